"""AppTest suite for the Sweep page: its grid controls and summary line, CPU caps,
a real (tiny) sweep with the naive budget, Cancel (at once, and while queued), the
server's cache of points, the URL. Comparisons (uploads, two caches) are in
``test_app_sweep_compare``. Assertions read the Plotly specs the page sends."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import CPU_ONLY, TINY, arr, assert_clean, chart, open_app, url_notes  # noqa: E402

import ui.benchmark as bench_ui  # noqa: E402
import ui.sweep as sweep_ui  # noqa: E402
from explorer import formatting, limits  # noqa: E402
from explorer.sweep import grid, runs  # noqa: E402
from explorer.sweep import view as sweep_view  # noqa: E402
from explorer import settings as state  # noqa: E402
from paged_attention import execution_mode  # noqa: E402

SWEEP = "app_pages/sweep.py"
def traces(spec: dict, **meta) -> list[dict]:
    return [t for t in spec["data"] if all((t.get("meta") or {}).get(k) == v for k, v in meta.items())]


def sweep_grid(at: AppTest, low: int, high: int, points: int, budget: float = 600.0) -> AppTest:
    at.number_input(key="sw_low").set_value(low).run()
    at.number_input(key="sw_high").set_value(high).run()
    at.number_input(key="sw_points").set_value(points).run()
    return at.number_input(key="sw_budget").set_value(budget).run()


def run_sweep(at: AppTest, timeout: float = 300) -> AppTest:
    """Press Run, wait for the worker to end the sweep, and draw the page again
    (as the progress fragment does in a browser)."""
    at.button(key="sw_run").click().run()
    assert at.session_state[sweep_ui.JOB].wait(timeout), "the sweep did not end"
    return at.run()


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    return at.file_uploader(key="sw_upload").set_value((name, data, "text/csv")).run()


def live_charts(at) -> list:
    """The page's charts other than the shipped recorded sweeps' (its "Recorded on a GPU" section)."""
    return [c for c in at.get("plotly_chart") if not str(c.key).startswith("sw_recorded")]


def test_sweep_page_before_running():
    at = open_app(TINY, page=SWEEP)
    assert_clean(at)
    assert at.title[0].value == "Sweep"
    assert any("Press **Run sweep**" in i.value for i in at.info)
    assert not live_charts(at)
    assert at.selectbox(key="sw_axis").value == "context_len"
    assert not at.button(key="sw_run").disabled and at.button(key="sw_cancel").disabled
    if execution_mode() == "interpreter":
        assert any("not GPU timings" in w.value for w in at.warning)


def test_sweep_runs_a_tiny_grid_and_marks_skipped_naive_points():
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    assert any("**2 points**: 16, 32" in c.value for c in at.caption)
    at = run_sweep(at)
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done" and job.next_index == 2
    table = at.dataframe[0].value
    assert len(table) == 6
    assert list(table.columns)[:5] == ["source", "value", "label", "status", "correct"]  # on screen at 1280 px
    naive = table[table["label"] == "Naive PyTorch"]
    assert list(naive["status"]) == ["skipped"] * 2 and naive["note"].str.contains("budget").all()
    assert (table[table["label"] != "Naive PyTorch"]["status"] == "ok").all()
    assert (table[table["status"] == "ok"]["correct"] == "yes").all()

    latency = chart(at, "sw_latency_chart")
    (triton,) = traces(latency, implementation="triton", kind="timed")
    assert arr(triton["customdata"])[:, 2].tolist() == [16, 32] and all(y > 0 for y in arr(triton["y"]))  # x: dodged
    (skipped,) = traces(latency, implementation="naive", kind="skipped")
    assert [row[1] for row in skipped["customdata"]] == [16, 32] and skipped["text"] == ["skipped", "skipped"]
    assert not traces(latency, implementation="naive", kind="timed")
    speedup = chart(at, "sw_speedup_chart")
    assert traces(speedup, implementation="naive", kind="skipped")
    (vec,) = traces(speedup, implementation="vectorized", kind="timed")
    assert len(vec["y"]) == 2
    bandwidth = chart(at, "sw_bandwidth_chart")
    if execution_mode() == "interpreter":
        assert any("No ceiling on the CPU" in a["text"] for a in bandwidth["layout"]["annotations"])
    assert at.get("download_button")
    assert any(p.proto.text == "2 of 2 points" for p in at.get("progress"))


def test_sweep_times_naive_within_its_budget():
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=600.0)
    at = run_sweep(at)
    assert_clean(at)
    (naive,) = traces(chart(at, "sw_latency_chart"), implementation="naive", kind="timed")
    assert arr(naive["customdata"])[:, 2].tolist() == [16, 32]
    assert at.session_state[sweep_ui.JOB].naive_last is not None


def _long_second_point(monkeypatch) -> threading.Event:
    """Make the sweep's second point (context 32) a long one, 6,000 rounds of 10 ms,
    reporting its progress as a real point does; the event is set once it started."""
    real, started = sweep_ui.benchmark_implementations, threading.Event()

    def slow(names, inputs, *, on_progress=None, **kwargs):
        if inputs.config.lengths[0] != 32:
            return real(names, inputs, on_progress=on_progress, **kwargs)
        started.set()
        for done in range(6000):
            time.sleep(0.01)
            on_progress(done + 1, 6000)
        raise AssertionError("the long point was never cancelled")

    monkeypatch.setattr(sweep_ui, "benchmark_implementations", slow)
    sweep_ui.measure.clear()  # a point timed by an earlier test would not be timed again
    return started


def test_cancel_ends_a_running_sweep_at_once_and_keeps_the_points_done(monkeypatch):
    started = _long_second_point(monkeypatch)
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 64, 3)
    at.button(key="sw_run").click().run()
    assert_clean(at)
    assert started.wait(120), "the second point never started"
    job = at.session_state[sweep_ui.JOB]
    assert job.running and job.next_index == 1
    at.run()  # the page, as the progress fragment redraws it: the first point is drawn
    assert not at.button(key="sw_cancel").disabled and at.button(key="sw_run").disabled
    assert [p.proto.text for p in at.get("progress")] == [
        "Point 2 of 3: context length (tokens) = 32 · Cancel stops it at once"]
    at.button(key="sw_cancel").click().run()
    assert_clean(at)
    # Cancelled on the click's own run, not after the point in flight
    assert job.state == "cancelled" and job.next_index == 1
    assert [w.value for w in at.warning if "Cancelled" in w.value] == [
        "Cancelled after 1 of 3 points. The points done are kept below."]
    assert [p.proto.text for p in at.get("progress")] == ["1 of 3 points"]
    assert at.dataframe[0].value["value"].tolist() == [16, 16, 16]  # the point done is kept
    assert chart(at, "sw_latency_chart")
    assert not at.button(key="sw_run").disabled and at.button(key="sw_cancel").disabled
    assert job.wait(5), "the worker went on with the long point"  # it stopped within a round, not 60 s later
    at.run()  # nothing resumes, and the point in flight is not added
    assert (job.state, job.next_index, len(job.rows)) == ("cancelled", 1, 3)
    assert not bench_ui.run_lock().locked()
    sweep_ui.measure.clear()


def test_a_queued_sweep_says_so_and_cancel_ends_it_without_waiting(monkeypatch):
    lock = bench_ui.run_lock()
    assert lock.acquire(owner="another tab")  # another session's benchmark holds the machine
    try:
        at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2)
        at.button(key="sw_run").click().run()
        job = at.session_state[sweep_ui.JOB]
        deadline = time.monotonic() + 30
        while job.waiting is None and time.monotonic() < deadline:  # the worker reaches the lock
            time.sleep(0.05)
        assert job.waiting == "other"
        at.run()
        assert_clean(at)
        assert [i.value for i in at.info if "Queued" in i.value] == [
            "Queued: another session is running a benchmark on this machine; the sweep goes on when it ends."]
        at.button(key="sw_cancel").click().run()
        assert job.state == "cancelled" and not [i for i in at.info if "Queued" in i.value]
        # Issue 27: "Cancelled after 0 of 2 points. The points done are kept below." over
        # nothing, and a second box saying "Press Run sweep": one box, that says what to do.
        assert [w.value for w in at.warning if "Cancel" in w.value] == [
            "Cancelled before the first point finished. Press **Run sweep** to start again, or upload a saved "
            "sweep below."]
        assert not [i for i in at.info if "Run sweep" in i.value]
    finally:
        lock.release()
    assert job.wait(30)  # once it has the lock, the worker sees the Cancel and times nothing
    assert job.rows == [] and not lock.locked()


def test_sweep_other_axes_and_axis_change_resets_the_range():
    at = open_app(TINY, page=SWEEP)
    at.selectbox(key="sw_axis").set_value("block_size").run()
    assert_clean(at)
    config = state.settings_from_query(TINY)[0].config()
    assert (at.number_input(key="sw_low").value, at.number_input(key="sw_high").value) == \
        grid.default_range("block_size", config, cpu=config.device == "cpu")
    at.selectbox(key="sw_axis").set_value("num_kv_heads").run()
    assert any("**3 points**: 1, 2, 4" in c.value for c in at.caption)  # divisors of 4 query heads
    at.number_input(key="sw_points").set_value(2).run()
    at.selectbox(key="sw_axis").set_value("head_dim").run()
    at.segmented_control(key="sw_spacing").set_value("linear").run()
    at.number_input(key="sw_low").set_value(16).run()
    at.number_input(key="sw_high").set_value(48).run()
    at.number_input(key="sw_points").set_value(3).run()
    assert_clean(at)
    assert any("**3 points**: 16, 32, 48" in c.value for c in at.caption)


def test_summary_names_only_the_sidebar_settings_the_sweep_keeps():
    at = open_app({**TINY, "ctx_mode": "ragged"}, page=SWEEP)
    assert_clean(at)

    def summary() -> str:
        (line,) = [c.value for c in at.caption if "points**" in c.value or "point**" in c.value]
        return line.split("sidebar: ")[1]

    assert summary().startswith("B=2 H=4/2 d=32 bs=16 float16")  # the context lengths are the sweep's
    assert "ctx=" not in summary()
    at.selectbox(key="sw_axis").set_value("num_kv_heads").run()
    assert "H=4 " in summary() and "H=4/2" not in summary() and "ctx=" in summary()
    for axis, gone in (("batch_size", "B=2"), ("block_size", "bs=16"), ("head_dim", "d=32")):
        at.selectbox(key="sw_axis").set_value(axis).run()
        assert gone not in summary(), (axis, summary())
    at.checkbox(key="sw_compare_kv").check().run()  # both caches are the sweep's
    fp8 = open_app({**TINY, "kv_dtype": "float8_e5m2"}, page=SWEEP)
    assert any("kv=fp8 e5m2" in c.value for c in fp8.caption if "sidebar: " in c.value)
    fp8.checkbox(key="sw_compare_kv").check().run()
    assert not any("kv=" in c.value for c in fp8.caption if "sidebar: " in c.value)


def test_invalid_sweep_shows_an_error_and_disables_run():
    at = open_app(TINY, page=SWEEP)
    at.number_input(key="sw_low").set_value(200).run()
    at.number_input(key="sw_high").set_value(100).run()
    assert not at.exception
    assert any("From (200) must not exceed To (100)." in e.value for e in at.error)
    assert at.button(key="sw_run").disabled
    at.selectbox(key="sw_axis").set_value("block_size").run()
    at.number_input(key="sw_low").set_value(5).run()
    at.number_input(key="sw_high").set_value(7).run()
    assert any("No power of two" in e.value for e in at.error)  # a sentence after "Invalid sweep."


@CPU_ONLY
def test_cpu_caps_the_grid_and_says_so():
    at = open_app({**TINY, "batch": "8", "kv_heads": "4", "iters": "50", "warmup": "10"}, page=SWEEP)
    at.number_input(key="sw_low").set_value(16).run()
    at.number_input(key="sw_high").set_value(65536).run()
    at.number_input(key="sw_points").set_value(12).run()
    assert_clean(at)
    caps = " ".join(i.value for i in at.info)
    assert "points dropped" in caps and "capped from 50" in caps
    caption = next(c.value for c in at.caption if "points**" in c.value)
    values = [int(v) for v in caption.split("**: ")[1].split(" · ")[0].split(", ")]
    assert values[0] == 16 and max(values) <= 256  # 8 sequences x 4 KV heads x 256 tokens = 8192, the cap
    at.number_input(key="sw_low").set_value(4096).run()
    assert any("No point of this grid fits the CPU cap" in e.value for e in at.error)


def test_page_controls_survive_a_visit_to_another_page():
    at = open_app(TINY, page=SWEEP)
    at.selectbox(key="sw_axis").set_value("batch_size").run()
    at.number_input(key="sw_high").set_value(4).run()
    at.switch_page("app_pages/block_table.py").run()
    at.switch_page(SWEEP).run()
    assert_clean(at)
    assert at.selectbox(key="sw_axis").value == "batch_size" and at.number_input(key="sw_high").value == 4


@pytest.mark.gpu
def test_gpu_sweep_draws_the_copy_bandwidth_ceiling():
    at = sweep_grid(open_app({**TINY, "device": "cuda", "iters": "5"}, page=SWEEP, timeout=300), 64, 1024, 3)
    at = run_sweep(at)
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done"
    frame = job.frame()
    assert (frame["copy_gbps"] > 100).all() and frame["gpu_time_ms"].notna().any()
    bandwidth = chart(at, "sw_bandwidth_chart")
    assert [s["y0"] for s in bandwidth["layout"]["shapes"]] == [pytest.approx(frame["copy_gbps"].iloc[0])]
    table = at.dataframe[0].value
    assert table["pct_of_copy_bw"].notna().any()


@CPU_ONLY
def test_sweep_with_no_point_under_the_cpu_cap_quotes_the_real_rule():
    at = open_app({"batch": "5", "ctx_mode": "uniform", "ctx": "64"}, page=SWEEP)  # 5 x 32 heads x 64 = 10,240
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert limits.CPU_WORK_RULE in error and "5 x max(8 x 16, 32 x 64) = 10,240" in error
    assert "Lower the sidebar's batch or query heads." in error
    assert at.button(key="sw_run").disabled
    assert not any("Press **Run sweep**" in i.value for i in at.info)  # the error alone


@CPU_ONLY
def test_sweep_at_batch_one_does_not_advise_lowering_the_batch():
    at = open_app({"batch": "1", "heads": "256", "kv_heads": "8", "ctx_mode": "uniform", "ctx": "64"}, page=SWEEP)
    assert not at.exception
    (error,) = [e.value for e in at.error]  # 1 x max(8 x 64, 256 x 64) = 16,384 at any context
    assert error.endswith("Lower the sidebar's query heads.")
    assert "batch" not in error.split("Lower")[-1]


def test_a_point_times_its_implementations_together_and_a_failing_one_gets_its_own_row(monkeypatch):
    """Interleaved rounds need every implementation in one call; when that call
    raises, each is timed alone so the others still get their rows."""
    base = runs.DecodeConfig(batch_size=1, context_lens=9, num_heads=2, num_kv_heads=1, head_dim=8, device="cpu")
    job = runs.SweepJob(base, "context_len", (9,), ("vectorized", "triton"), 0, 2, 600.0, "test")
    calls = []
    real = sweep_ui.benchmark_implementations

    def flaky(names, inputs, **kwargs):
        calls.append(tuple(names))
        if "triton" in names:
            raise RuntimeError("kernel exploded")
        return real(names, inputs, **kwargs)

    monkeypatch.setattr(sweep_ui, "benchmark_implementations", flaky)
    sweep_ui.measure.clear()
    sweep_ui.run_next_point(job)
    assert calls == [("vectorized", "triton"), ("vectorized",), ("triton",)]
    status = {row["implementation"]: row["status"] for row in job.rows}
    assert status == {"vectorized": "ok", "triton": "failed"}
    assert "kernel exploded" in next(r["note"] for r in job.rows if r["implementation"] == "triton")
    sweep_ui.measure.clear()


def test_a_sweep_says_which_points_it_reused_from_the_servers_cache():
    """Another session's sweep of the same points reuses its timings: the page says so, when they were taken,
    and marks the rows; after Clear cache they are timed again."""
    sweep_ui.measure.clear()
    first = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    first = run_sweep(first)
    assert_clean(first)
    assert not any("reused from this server's cache" in c.value for c in first.caption)
    assert "cached" not in first.dataframe[0].value.columns
    measured = first.session_state[sweep_ui.JOB].frame()
    stamps = measured.loc[measured["status"] == "ok", "measured_at"]
    assert stamps.str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").all()

    second = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    second = run_sweep(second)
    assert_clean(second)
    (note,) = [c.value for c in second.caption if "reused from this server's cache" in c.value]
    minutes = sorted({s[11:16] for s in stamps})
    assert "2 of 2 points reused from this server's cache, measured " in note
    assert minutes[0] in note and note.endswith("**Clear cache** to re-time them.")
    table = second.dataframe[0].value
    assert list(table.loc[table["status"] == "ok", "cached"]) == ["yes"] * 4
    again = second.session_state[sweep_ui.JOB].frame()
    assert list(again.loc[again["status"] == "ok", "measured_at"]) == list(stamps)
    assert "measured_at" in runs.sweep_csv(again).splitlines()[0].split(",")

    second.button(key="sw_clear").click().run()
    second = run_sweep(second)
    assert_clean(second)
    assert not any("reused from this server's cache" in c.value for c in second.caption)
    assert "cached" not in second.dataframe[0].value.columns
    sweep_ui.measure.clear()


# -- page controls in the URL ------------------------------------------------------

def test_sweep_url_sets_the_page_controls():
    query = {**TINY, "sw_axis": "batch_size", "sw_from": "2", "sw_to": "8", "sw_points": "3", "sw_spacing": "linear"}
    at = open_app(query, page=SWEEP)
    assert_clean(at)
    assert at.selectbox(key="sw_axis").value == "batch_size"
    assert at.number_input(key="sw_low").value == 2 and at.number_input(key="sw_high").value == 8
    assert at.number_input(key="sw_points").value == 3
    assert at.session_state["sw_spacing"] == "linear"
    assert not url_notes(at)
    # the URL keeps the page's controls beside the sidebar's
    q = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert {k: q.get(k) for k in ("sw_axis", "sw_from", "sw_to", "sw_points", "sw_spacing", "batch")} == {
        "sw_axis": "batch_size", "sw_from": "2", "sw_to": "8", "sw_points": "3", "sw_spacing": "linear", "batch": "2"}
    # edited controls follow into the URL
    at.number_input(key="sw_high").set_value(6).run()
    assert at.query_params["sw_to"] in ("6", ["6"])


def test_sweep_url_garbage_is_named_and_replaced():
    query = {**TINY, "sw_axis": "sideways", "sw_from": "lots", "sw_points": "99"}
    at = open_app(query, page=SWEEP)
    assert not at.exception
    notes = url_notes(at)
    assert any("sw_axis=sideways" in n for n in notes) and any("sw_from=lots" in n for n in notes)
    assert any("sw_points=99" in n and "between 1 and 12" in n for n in notes)
    assert at.selectbox(key="sw_axis").value == "context_len"
    assert at.query_params["sw_axis"] in ("context_len", ["context_len"])  # rewritten to the value used
    at.button(key="sw_dismiss_url_notes").click().run()
    assert not url_notes(at)


def test_other_pages_drop_the_sweep_keys():
    at = open_app({**TINY, "sw_axis": "batch_size"}, page=SWEEP)
    assert at.query_params["sw_axis"] in ("batch_size", ["batch_size"])
    at.switch_page("app_pages/block_table.py").run()
    assert "sw_axis" not in at.query_params
    at.switch_page(SWEEP).run()  # and back: the controls kept, and in the URL again
    assert at.selectbox(key="sw_axis").value == "batch_size"
    assert at.query_params["sw_axis"] in ("batch_size", ["batch_size"])


def test_sweep_of_a_shared_prefix_batch_keeps_the_prefix_in_its_rows():
    shared = {**TINY, "batch": "4", "prefix": "16", "prefix_groups": "2"}
    at = sweep_grid(open_app(shared, page=SWEEP, timeout=120), 32, 48, 2, budget=0.0)
    at = run_sweep(at)
    assert_clean(at)
    frame = at.session_state[sweep_ui.JOB].frame()
    ok = frame[frame["status"] == "ok"]
    assert len(ok) == 4 and (ok["correct"] == "yes").all()
    assert set(frame["shared_prefix"]) == {16} and set(frame["prefix_groups"]) == {2}
    # a point shorter than the prefix is the configuration's error, not a traceback
    at = sweep_grid(at, 8, 48, 2, budget=0.0)
    assert not at.exception
    assert any("shared_prefix (16) must be at most every context length" in e.value for e in at.error)


def test_presentation_mode_shows_the_points_as_an_html_table():
    """Issue 27, the back row: Streamlit's grid draws 15.75 px text in presentation
    mode whatever the page's style says, so the points table is an HTML table there
    (``ui.tables.show_table``), its text at the page's 18 px: the same rows, the
    columns in the grid's order under its headers."""
    at = run_sweep(sweep_grid(open_app({**TINY, "present": "1"}, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0))
    assert_clean(at)
    assert not [d for d in at.dataframe if "sw_table" in d.proto.id]
    (table,) = [t for t in at.table if len(t.value) == 6]  # 3 implementations x 2 points
    _, columns = sweep_view.points_table(at.session_state[sweep_ui.JOB].frame())
    assert list(table.value.columns) == [c.label for c in columns]
    assert list(table.value.iloc[:, 3]).count("skipped") == 2  # the naive loop over its budget, at both points


def test_naive_budget_box_shows_three_significant_figures():
    """Issue 27: the box wrote its 10 s as "10.00" (Streamlit's default ``%0.2f``)."""
    at = open_app(TINY, page=SWEEP, timeout=120)
    box = at.number_input(key="sw_budget")
    assert box.proto.format == formatting.SIG3_PRINTF == "%.3g"
    assert box.step == 1.0  # its bounds, 0 to 600 s, the app keeps (ui.inputs.bounded_number_input)
