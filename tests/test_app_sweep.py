"""AppTest suite for the Sweep page: its grid controls, CPU caps, a real (tiny)
sweep with the naive budget, cancelling, and uploaded CSVs compared side by side.
Assertions read the Plotly specs the page sends."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import CPU_ONLY, TINY, arr, assert_clean, chart, open_app  # noqa: E402

import ui.sweep as sweep_ui  # noqa: E402
from explorer import limits  # noqa: E402
from explorer.sweep import grid, runs  # noqa: E402
from explorer import settings as state
from helpers import job_rows  # noqa: E402
from paged_attention import execution_mode  # noqa: E402

SWEEP = "app_pages/sweep.py"
def traces(spec: dict, **meta) -> list[dict]:
    return [t for t in spec["data"] if all((t.get("meta") or {}).get(k) == v for k, v in meta.items())]


def sweep_grid(at: AppTest, low: int, high: int, points: int, budget: float = 600.0) -> AppTest:
    at.number_input(key="sw_low").set_value(low).run()
    at.number_input(key="sw_high").set_value(high).run()
    at.number_input(key="sw_points").set_value(points).run()
    return at.number_input(key="sw_budget").set_value(budget).run()


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
    at.button(key="sw_run").click().run()
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
    assert arr(triton["x"]).tolist() == [16, 32] and all(y > 0 for y in arr(triton["y"]))
    (skipped,) = traces(latency, implementation="naive", kind="skipped")
    assert arr(skipped["x"]).tolist() == [16, 32] and skipped["text"] == ["skipped", "skipped"]
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
    at.button(key="sw_run").click().run()
    assert_clean(at)
    (naive,) = traces(chart(at, "sw_latency_chart"), implementation="naive", kind="timed")
    assert arr(naive["x"]).tolist() == [16, 32]
    assert at.session_state[sweep_ui.JOB].naive_last is not None


def test_cancel_button_stops_the_sweep_and_keeps_the_points_done(monkeypatch):
    real = sweep_ui.run_next_point

    def one_point_per_run(job, on_wait):
        real(job, on_wait)
        st.stop()  # end this script run here, as a user's click would interrupt it

    monkeypatch.setattr(sweep_ui, "run_next_point", one_point_per_run)
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 64, 3)
    at.button(key="sw_run").click().run()
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.running and job.next_index == 1
    assert not at.button(key="sw_cancel").disabled and at.button(key="sw_run").disabled
    at.button(key="sw_cancel").click().run()
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "cancelled" and job.next_index == 1
    assert any("Cancelled after 1 of 3 points" in w.value for w in at.warning)
    assert at.dataframe[0].value["value"].tolist() == [16, 16, 16]  # the point done is kept
    assert chart(at, "sw_latency_chart")
    at.run()  # nothing resumes
    assert at.session_state[sweep_ui.JOB].next_index == 1


def test_cancel_during_a_point_stops_before_the_next(monkeypatch):
    real = sweep_ui.run_next_point

    def cancel_during_second_point(job, on_wait):
        real(job, on_wait)
        if job.next_index == 2:
            sweep_ui.cancel_sweep()  # the click lands while point 2 is timed

    monkeypatch.setattr(sweep_ui, "run_next_point", cancel_during_second_point)
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 64, 3)
    at.button(key="sw_run").click().run()
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "cancelled" and len(job.rows) == 6
    assert arr(chart(at, "sw_latency_chart")["data"][0]["x"]).tolist() == [16, 32]


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


def test_uploaded_csv_is_compared_side_by_side():
    other = runs.rows_frame(job_rows(values=(16, 32), copy=4000.0), "h200")
    other["device_name"] = "NVIDIA H200"
    at = upload(open_app(TINY, page=SWEEP), "h200.csv", runs.sweep_csv(other).encode())
    assert_clean(at)
    bandwidth = chart(at, "sw_bandwidth_chart")  # the upload alone: its ceiling is drawn
    assert [s["y0"] for s in bandwidth["layout"]["shapes"]] == [4000.0]
    (up,) = traces(chart(at, "sw_latency_chart"), implementation="triton", kind="timed")
    assert up["meta"]["source"] == "uploaded: h200.csv"

    at = sweep_grid(at, 16, 32, 2)
    at.button(key="sw_run").click().run()
    assert_clean(at)
    mine, theirs = traces(chart(at, "sw_latency_chart"), implementation="triton", kind="timed")
    assert (mine["meta"]["source"], theirs["meta"]["source"]) == ("this session", "uploaded: h200.csv")
    assert (mine["line"]["dash"], theirs["line"]["dash"]) == ("solid", "dash")
    ratio = chart(at, "sw_ratio_chart")
    (triton,) = [t for t in ratio["data"] if (t.get("meta") or {}).get("implementation") == "triton"]
    mine_ms = at.session_state[sweep_ui.JOB].frame().query("implementation == 'triton'")["median_ms"].to_numpy()
    np.testing.assert_allclose(arr(triton["y"]), 0.1 / mine_ms)
    sources = set(at.dataframe[0].value["source"])
    assert sources == {"this session", "upload"}  # the upload's name is in its caption and the charts


@pytest.mark.parametrize("data, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8"),
    (b"implementation,median_ms\ntriton,1\n", "lacks the columns"),
    (b"axis,value,implementation,status,median_ms\ncontext_len,16,warp_magic,ok,1\n", "Unknown implementation"),
])
def test_bad_upload_is_an_error_not_a_traceback(data, message):
    at = upload(open_app(TINY, page=SWEEP), "bad.csv", data)
    assert not at.exception
    assert any("Cannot compare with `bad.csv`" in e.value and message in e.value for e in at.error)
    assert not live_charts(at)


def test_uploaded_names_are_shown_as_typed_not_as_markdown():
    frame = runs.rows_frame(job_rows(values=(16, 32)), "x")
    frame["device_name"] = ":red[RED] **GPU**"
    at = upload(open_app(TINY, page=SWEEP), "$x$.csv", runs.sweep_csv(frame).encode())
    assert_clean(at)
    (caption,) = [c.value for c in at.caption if "from" in c.value and "row" in c.value]
    assert caption.startswith(f"`$x$.csv`: {len(frame)} rows from `:red[RED] **GPU**`;"), caption


def test_upload_of_another_axis_is_not_overlaid():
    other = runs.rows_frame(job_rows(values=(16, 32)), "x")
    other["axis"] = "batch_size"
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2)
    at.button(key="sw_run").click().run()
    at = upload(at, "batch.csv", runs.sweep_csv(other).encode())
    assert_clean(at)
    assert any("varies batch size" in w.value for w in at.warning)
    assert {t["meta"]["source"] for t in chart(at, "sw_latency_chart")["data"] if t.get("meta")} == {"this session"}


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
    at.button(key="sw_run").click().run()
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
    sweep_ui.run_next_point(job, on_wait=lambda: None)
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
    first.button(key="sw_run").click().run()
    assert_clean(first)
    assert not any("reused from this server's cache" in c.value for c in first.caption)
    assert "cached" not in first.dataframe[0].value.columns
    measured = first.session_state[sweep_ui.JOB].frame()
    stamps = measured.loc[measured["status"] == "ok", "measured_at"]
    assert stamps.str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").all()

    second = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    second.button(key="sw_run").click().run()
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
    second.button(key="sw_run").click().run()
    assert_clean(second)
    assert not any("reused from this server's cache" in c.value for c in second.caption)
    assert "cached" not in second.dataframe[0].value.columns
    sweep_ui.measure.clear()


def test_upload_of_this_sessions_own_sweep_says_the_ratio_is_one_by_construction():
    sweep_ui.measure.clear()
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    at.button(key="sw_run").click().run()
    own = runs.sweep_csv(at.session_state[sweep_ui.JOB].frame()).encode()
    at = upload(at, "mine.csv", own)
    assert_clean(at)
    (note,) = [w.value for w in at.warning if "by construction" in w.value]
    assert note.startswith("4 timings of the upload are this session's own measurements")
    older = pd.read_csv(io.BytesIO(own)).drop(columns=["measured_at", "cached"]).to_csv(index=False)
    at = upload(at, "older.csv", older.encode())  # a CSV from before measured_at: nothing to match
    assert_clean(at)
    assert not any("by construction" in w.value for w in at.warning)
    sweep_ui.measure.clear()


def test_sweep_compares_a_float16_and_an_fp8_cache_in_one_chart():
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=180), 16, 32, 2, budget=0.0)
    at.checkbox(key="sw_compare_kv").check().run()
    assert any("each with a float16 and an fp8 e4m3 KV cache" in c.value for c in at.caption)
    at.button(key="sw_run").click().run()
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done" and job.total == 4
    # Counted as the caption counts: points, each with both caches.
    assert [p.proto.text for p in at.get("progress")] == ["4 of 4 runs (2 points × 2 caches)"]
    table = at.dataframe[0].value
    assert list(table["kv_dtype"]) == ["float16"] * 3 + ["fp8 e4m3"] * 3 + ["float16"] * 3 + ["fp8 e4m3"] * 3
    assert (table[table["status"] == "ok"]["correct"] == "yes").all()
    frame = job.frame()
    fp8 = frame[frame["kv_dtype"] == "float8_e4m3fn"]["bytes_moved"].to_numpy()
    half = frame[frame["kv_dtype"] == "float16"]["bytes_moved"].to_numpy()
    assert (fp8 < half).all()  # one byte per K and V value
    assert "kv_dtype" in runs.sweep_csv(frame).splitlines()[0].split(",")

    for key in ("sw_latency_chart", "sw_bandwidth_chart"):
        lines = traces(chart(at, key), implementation="triton", kind="timed")
        assert [t["name"] for t in lines] == ["Triton · float16", "Triton · fp8 e4m3"]
        assert [t["line"]["dash"] for t in lines] == ["solid", "dash"]
        assert all(arr(t["x"]).tolist() == [16, 32] for t in lines)
    ratio = chart(at, "sw_kv_ratio_chart")
    assert ratio["layout"]["title"]["text"] == "fp8 e4m3 cache against float16"
    assert {t["meta"]["implementation"] for t in ratio["data"] if t.get("meta")} >= {"vectorized", "triton"}

    # Its own CSV uploaded back: the time ratio compares the first cache only, and says so.
    at = upload(at, "sweep_context_len.csv", runs.sweep_csv(frame).encode())
    assert_clean(at)
    ratio = chart(at, "sw_ratio_chart")
    assert ratio["layout"]["title"]["text"].replace("<br>", " ") == "Time ratio between the two sweeps: float16 cache only"
    assert any("Only the points with a float16 cache are compared" in c.value for c in at.caption)


def test_cache_comparison_words_the_byte_ratio_from_the_two_element_sizes():
    at = open_app({**TINY, "dtype": "float32"}, page=SWEEP)
    help_text = at.checkbox(key="sw_compare_kv").help
    assert "a quarter of the bytes" in help_text and "half the bytes" not in help_text  # fp8 is 1 byte of float32's 4
    base = runs.rows_frame(job_rows(values=(16, 32), skip_from=1000), "x").assign(dtype="float32")
    both = pd.concat([base.assign(kv_dtype="float32"), base.assign(kv_dtype="float8_e5m2")], ignore_index=True)
    at = upload(at, "f32.csv", runs.sweep_csv(both).encode())
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "KV cache over its time" in c.value]
    assert "a quarter of the bytes can approach 0.25" in note and "0.5" not in note
    assert "half the bytes can approach 0.5" in next(  # float16: half
        c.value for c in upload(open_app(TINY, page=SWEEP), "f16.csv", runs.sweep_csv(
            pd.concat([base.assign(dtype="float16", kv_dtype="float16"),
                       base.assign(dtype="float16", kv_dtype="float8_e5m2")], ignore_index=True)).encode()).caption
        if "KV cache over its time" in c.value)
    assert "half the bytes" in open_app(TINY, page=SWEEP).checkbox(key="sw_compare_kv").help


def test_points_table_is_narrow_enough_for_1280_px():
    base = runs.rows_frame(job_rows(values=(16, 32), skip_from=1000), "x")
    both = pd.concat([base.assign(kv_dtype="float16"), base.assign(kv_dtype="float8_e5m2")], ignore_index=True)
    at = upload(open_app(TINY, page=SWEEP), "sweep_context_len.csv", runs.sweep_csv(both).encode())
    assert_clean(at)
    table = at.dataframe[0].value
    # p20 and p80 are the latency chart's bars (and in the CSV); the upload is "upload"
    assert list(table.columns) == ["source", "value", "label", "kv_dtype", "status", "correct", "median_ms", "gbps",
                                   "max_abs_err"]
    assert set(table["source"]) == {"upload"} and set(table["kv_dtype"]) == {"float16", "fp8 e5m2"}


# -- page controls in the URL ------------------------------------------------------

def test_sweep_url_sets_the_page_controls():
    query = {**TINY, "sw_axis": "batch_size", "sw_from": "2", "sw_to": "8", "sw_points": "3", "sw_spacing": "linear"}
    at = open_app(query, page=SWEEP)
    assert_clean(at)
    assert at.selectbox(key="sw_axis").value == "batch_size"
    assert at.number_input(key="sw_low").value == 2 and at.number_input(key="sw_high").value == 8
    assert at.number_input(key="sw_points").value == 3
    assert at.session_state["sw_spacing"] == "linear"
    assert not [w for w in at.warning if w.value.startswith("URL:")]
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
    notes = [w.value for w in at.warning if w.value.startswith("URL:")]
    assert any("sw_axis=sideways" in n for n in notes) and any("sw_from=lots" in n for n in notes)
    assert any("sw_points=99" in n and "between 1 and 12" in n for n in notes)
    assert at.selectbox(key="sw_axis").value == "context_len"
    assert at.query_params["sw_axis"] in ("context_len", ["context_len"])  # rewritten to the value used
    at.button(key="sw_dismiss_url_notes").click().run()
    assert not [w for w in at.warning if w.value.startswith("URL:")]


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
    at.button(key="sw_run").click().run()
    assert_clean(at)
    frame = at.session_state[sweep_ui.JOB].frame()
    ok = frame[frame["status"] == "ok"]
    assert len(ok) == 4 and (ok["correct"] == "yes").all()
    assert set(frame["shared_prefix"]) == {16} and set(frame["prefix_groups"]) == {2}
    # a point shorter than the prefix is the configuration's error, not a traceback
    at = sweep_grid(at, 8, 48, 2, budget=0.0)
    assert not at.exception
    assert any("shared_prefix (16) must be at most every context length" in e.value for e in at.error)
