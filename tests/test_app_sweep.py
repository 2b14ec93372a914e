"""AppTest suite for the Sweep, Serving simulation and Inside the kernel pages:
defaults, controls, bad input, CPU caps, real (tiny) runs. Assertions read the
Plotly specs the pages send."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from paged_attention import assign_blocks, execution_mode, plan_launch  # noqa: E402
from explorer import limits, settings as state, sweep  # noqa: E402
from explorer.kernel_trace_view import decode_shape  # noqa: E402
from explorer.serving_history import simulate  # noqa: E402
import ui.sweep as sweep_ui  # noqa: E402
from ui.data import serving_config  # noqa: E402

from helpers import job_rows  # noqa: E402
from test_app import TINY, arr, assert_clean, chart, open_app  # noqa: E402

SWEEP = "app_pages/sweep.py"
SERVING = "app_pages/serving_simulation.py"
KERNEL = "app_pages/inside_the_kernel.py"
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU caps and CPU defaults")


def traces(spec: dict, **meta) -> list[dict]:
    return [t for t in spec["data"] if all((t.get("meta") or {}).get(k) == v for k, v in meta.items())]


def sweep_grid(at: AppTest, low: int, high: int, points: int, budget: float = 600.0) -> AppTest:
    at.number_input(key="sw_low").set_value(low).run()
    at.number_input(key="sw_high").set_value(high).run()
    at.number_input(key="sw_points").set_value(points).run()
    return at.number_input(key="sw_budget").set_value(budget).run()


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    return at.file_uploader(key="sw_upload").set_value((name, data, "text/csv")).run()


# -- sweep -----------------------------------------------------------------------------

def test_sweep_page_before_running():
    at = open_app(TINY, page=SWEEP)
    assert_clean(at)
    assert at.title[0].value == "Sweep"
    assert any("Press **Run sweep**" in i.value for i in at.info)
    assert not at.get("plotly_chart")
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
        sweep.default_range("block_size", config, cpu=config.device == "cpu")
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
    other = sweep.rows_frame(job_rows(values=(16, 32), copy=4000.0), "h200")
    other["device_name"] = "NVIDIA H200"
    at = upload(open_app(TINY, page=SWEEP), "h200.csv", sweep.sweep_csv(other).encode())
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
    assert sources == {"this session", "uploaded: h200.csv"}


@pytest.mark.parametrize("data, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8"),
    (b"implementation,median_ms\ntriton,1\n", "lacks the columns"),
    (b"axis,value,implementation,status,median_ms\ncontext_len,16,warp_magic,ok,1\n", "Unknown implementation"),
])
def test_bad_upload_is_an_error_not_a_traceback(data, message):
    at = upload(open_app(TINY, page=SWEEP), "bad.csv", data)
    assert not at.exception
    assert any("Cannot compare with `bad.csv`" in e.value and message in e.value for e in at.error)
    assert not at.get("plotly_chart")


def test_uploaded_names_are_shown_as_typed_not_as_markdown():
    frame = sweep.rows_frame(job_rows(values=(16, 32)), "x")
    frame["device_name"] = ":red[RED] **GPU**"
    at = upload(open_app(TINY, page=SWEEP), "$x$.csv", sweep.sweep_csv(frame).encode())
    assert_clean(at)
    (caption,) = [c.value for c in at.caption if "from" in c.value and "row" in c.value]
    assert caption.startswith(f"`$x$.csv`: {len(frame)} rows from `:red[RED] **GPU**`;"), caption


def test_upload_of_another_axis_is_not_overlaid():
    other = sweep.rows_frame(job_rows(values=(16, 32)), "x")
    other["axis"] = "batch_size"
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2)
    at.button(key="sw_run").click().run()
    at = upload(at, "batch.csv", sweep.sweep_csv(other).encode())
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


def test_benchmark_and_block_table_controls_survive_a_visit_to_another_page():
    at = open_app(TINY, page="app_pages/decode_benchmark.py")
    at.checkbox(key="bench_include_simple").check().run()
    at.switch_page("app_pages/block_table.py").run()
    at.number_input(key="bt_seq").set_value(1).run()
    at.switch_page(SWEEP).run()
    at.switch_page("app_pages/decode_benchmark.py").run()
    assert_clean(at)
    assert at.checkbox(key="bench_include_simple").value
    at.switch_page("app_pages/block_table.py").run()
    assert at.number_input(key="bt_seq").value == 1


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


# -- serving simulation ---------------------------------------------------------------

#: A small simulation that every machine runs the same way (the page's defaults differ).
SIM = {"sv_num_blocks": 64, "sv_block_size": 8, "sv_max_batch": 6, "sv_rate": 0.3, "sv_prompt_lo": 4,
       "sv_prompt_hi": 96, "sv_output_lo": 4, "sv_output_hi": 48, "sv_steps": 120}


def open_serving(**changes) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in TINY.items():
        at.query_params[key] = value
    for key, value in {**SIM, **changes}.items():
        at.session_state[key] = value
    at.switch_page(SERVING)
    return at.run()


def sim_history():
    config = serving_config(SIM["sv_num_blocks"], SIM["sv_block_size"], SIM["sv_max_batch"], SIM["sv_rate"],
                            ("long-tail", SIM["sv_prompt_lo"], SIM["sv_prompt_hi"]),
                            ("long-tail", SIM["sv_output_lo"], SIM["sv_output_hi"]), 0)
    return simulate(config, SIM["sv_steps"])


def pool_codes(at: AppTest, num_blocks: int) -> np.ndarray:
    return arr(chart(at, "sv_pool_chart")["data"][0]["z"]).ravel()[:num_blocks]


def test_serving_page_starts_at_the_busiest_step():
    at = open_serving()
    assert_clean(at)
    history = sim_history()
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax())
    assert at.slider(key="sv_step").value == step
    owner = history.records[step].pool_owner()
    assert np.array_equal(pool_codes(at, 64) == 0, owner == -1)
    blocks = next(m for m in at.metric if m.label == "Blocks in use")  # the pool size moved to the delta
    assert (blocks.value, blocks.delta) == (f"{(owner >= 0).sum()}", f"of 64 · {100 * (owner >= 0).mean():.0f}%")
    table = chart(at, "sv_table_chart")
    assert table["layout"]["yaxis"]["ticktext"] == [str(s) for s in history.records[step].seq_ids]
    timeline = chart(at, "sv_timeline_chart")
    assert arr(timeline["data"][0]["y"]).tolist() == history.metrics["blocks_in_use"].tolist()
    at.toggle(key="sv_anim").set_value(True).run()
    assert_clean(at)
    frames = chart(at, "sv_anim_chart")["frames"]
    assert len(frames) == 80 and frames[-1]["name"] == "119"
    bars = chart(at, "sv_tradeoff_chart")["data"][0]
    assert bars["x"] == ["1", "2", "4", "8", "16", "32", "64", "128", "256"]


def test_serving_slider_moves_every_figure():
    history = sim_history()
    at = open_serving()
    for step in (5, 60):
        at.slider(key="sv_step").set_value(step).run()
        assert_clean(at)
        pool = chart(at, "sv_pool_chart")
        assert pool["layout"]["title"]["text"] == f"Physical block pool after step {step}"
        owner = history.records[step].pool_owner()
        assert np.array_equal(pool_codes(at, 64) == 0, owner == -1)
        taken, freed, recycled = history.changes(step)
        marks = {t["name"]: t for t in pool["data"]}
        got = set(arr(marks["freed this step"]["customdata"])[:, 0].astype(int)) if len(freed) else set()
        assert got == set(freed.tolist())
        shapes = chart(at, "sv_timeline_chart")["layout"]["shapes"]
        assert {s["x0"] for s in shapes} == {step}


def test_serving_with_one_step_draws_it_without_a_slider():
    at = open_serving()
    at.number_input(key="sv_steps").set_value(1).run()
    assert_clean(at)
    assert not at.slider and any("Decode step 0, the only one" in c.value for c in at.caption)
    assert chart(at, "sv_pool_chart")["layout"]["title"]["text"].endswith("after step 0")


def test_serving_controls_change_the_simulation():
    at = open_serving()
    at.selectbox(key="sv_block_size").set_value(16).run()
    assert_clean(at)
    bars = chart(at, "sv_tradeoff_chart")["data"][0]
    assert bars["marker"]["line"]["width"][bars["x"].index("16")] == 2  # the chosen block size is outlined
    assert "of 16 slots" in chart(at, "sv_pool_chart")["layout"]["title"]["subtitle"]["text"]
    at.number_input(key="sv_rate").set_value(0.0).run()
    assert_clean(at)
    assert {m.label: m.value for m in at.metric}["Running"] == "0"  # no traffic, nothing runs
    assert any("No sequence is running" in i.value for i in at.info)
    at.segmented_control(key="sv_prompt_kind").set_value("uniform").run()
    at.number_input(key="sv_rate").set_value(0.5).run()
    assert_clean(at)


@pytest.mark.parametrize("changes, message", [
    ({"sv_prompt_lo": 200, "sv_prompt_hi": 100}, "Prompt length needs shortest <= longest"),
    ({"sv_num_blocks": 4}, "The pool must hold the longest request: Prompt length longest + Output length longest"),
])
def test_invalid_simulation_shows_an_error(changes, message):
    at = open_serving(**changes)
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert not at.get("plotly_chart")


def test_time_triton_on_a_step_and_across_block_sizes():
    at = open_serving()
    step = at.slider(key="sv_step").value
    at.button(key="sv_time").click().run()
    assert_clean(at)
    metric = next(m for m in at.metric if m.label == f"Triton decode at step {step}")
    assert float(metric.value.split()[0]) > 0
    table = at.dataframe[0].value
    assert table["step"].tolist() == [step] and table["correct"].tolist() == ["yes"]

    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    spec = chart(at, "sv_tradeoff_chart")
    assert spec["layout"]["yaxis2"]["title"]["text"] == "Triton latency (ms)"
    line = spec["data"][1]
    expected = ["4", "16", "64"] if execution_mode() == "interpreter" else ["1", "2", "4", "8", "16", "32", "64", "128", "256"]
    assert line["x"] == expected and all(y > 0 for y in line["y"])


def _serving_with_a_large_step() -> AppTest:
    """The Serving page with a batch of up to 32 sequences of up to 1,000-token prompts
    (the sidebar's default heads: 32/8/128): over the CPU cap at every block size."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**SIM, "sv_num_blocks": 512, "sv_max_batch": 32, "sv_rate": 1.0, "sv_prompt_hi": 1000}.items():
        at.session_state[key] = value
    return at.switch_page(SERVING).run()


@CPU_ONLY
def test_cpu_refuses_to_time_a_large_step():
    at = _serving_with_a_large_step()
    assert not at.exception
    assert any("On the CPU the benchmark runs only when" in w.value for w in at.warning)
    assert at.button(key="sv_time").disabled


@pytest.mark.gpu
def test_gpu_times_triton_on_a_serving_step():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for key, value in {**TINY, "device": "cuda"}.items():
        at.query_params[key] = value
    at.switch_page(SERVING).run()
    at.button(key="sv_time").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["correct"].tolist() == ["yes"] and table["gbps"].iloc[0] > 0


# -- inside the kernel -----------------------------------------------------------------

RAGGED = {"batch": "3", "ctx_mode": "ragged", "lens": "300,97,1", "heads": "6", "kv_heads": "2", "head_dim": "24",
          "preset": "Custom", "block": "16", "dtype": "float32", "lo": "1", "hi": "300"}


def test_kernel_page_traces_the_longest_sequence():
    at = open_app(RAGGED, page=KERNEL)
    assert_clean(at)
    assert at.number_input(key="ik_seq").value == 0
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens"] == "300" and metrics["Block-table lookups"] == "19"
    assert float(metrics["Error vs reference"]) < 1e-12
    config = state.settings_from_query(RAGGED)[0].config()
    tables, _ = assign_blocks(config)
    walk = chart(at, "ik_walk_chart")["data"][0]
    base = arr(walk["base"]).astype(int)
    assert np.array_equal(arr(walk["customdata"])[:, 0].astype(int), tables[0].numpy()[base // 16])
    assert sorted(np.concatenate([np.arange(b, b + n) for b, n in zip(base, arr(walk["x"]).astype(int))])) == \
        list(range(300))
    softmax = chart(at, "ik_softmax_chart")
    errors = [t for t in softmax["data"] if t["name"].startswith("error vs final")]
    star = [t for t in softmax["data"] if t["name"] == "output"]
    if len(errors) == 1:  # one split (the CPU's plan): its last tile is the final answer
        assert arr(errors[0]["y"])[-1] < 1e-12
    else:  # split-K (a GPU's plan): only the merge, drawn as the star, is the final answer
        assert star and arr(star[0]["y"])[-1] < 1e-12


def test_kernel_page_follows_sequence_head_and_plan_overrides():
    at = open_app(RAGGED, page=KERNEL)
    at.number_input(key="ik_seq").set_value(1).run()
    at.number_input(key="ik_head").set_value(5).run()
    assert_clean(at)
    assert {m.label: m.value for m in at.metric}["Tokens"] == "97"
    assert any("query head 5 reads KV head 1" in c.value for c in at.caption)
    at.toggle(key="ik_override").set_value(True).run()
    at.number_input(key="ik_splits").set_value(3).run()
    runs = {m.label: (m.value, m.delta) for m in at.metric}["Splits that run"]
    assert runs == ("1", "of 3")  # 97 tokens: all in split 0
    assert any("nothing to merge" in i.value for i in at.info)
    at.number_input(key="ik_seq").set_value(0).run()
    at.selectbox(key="ik_block_n").set_value(16).run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Splits that run"] == "3" and metrics["Tiles walked"] == "19"  # a 16-token tile per block
    assert float(metrics["Error vs reference"]) < 1e-12
    merge = chart(at, "ik_merge_chart")
    assert sum(arr(merge["data"][1]["y"])) == pytest.approx(100)
    assert len(merge["data"][0]["x"]) == 3
    at.toggle(key="ik_override").set_value(False).run()
    assert {m.label: m.value for m in at.metric}["Tiles walked"] != "19"


@pytest.mark.parametrize("query, kind, message", [
    ({"batch": "1", "ctx_mode": "uniform", "ctx": "40000"}, "error", "traces at most"),
    ({"batch": "2", "ctx_mode": "ragged", "lo": "500", "hi": "20"}, "error", "Shortest (500) must not exceed Longest (20)"),
])
def test_kernel_page_limits_and_bad_input(query, kind, message):
    at = open_app(query, page=KERNEL)
    assert not at.exception
    assert any(message in e.value for e in getattr(at, kind))


@pytest.mark.gpu
def test_gpu_kernel_page_traces_the_plan_of_the_gpu():
    query = {**RAGGED, "device": "cuda", "dtype": "float16"}
    at = open_app(query, page=KERNEL)
    assert_clean(at)
    config = state.settings_from_query(query)[0].config()
    tables, _ = assign_blocks(config)
    plan = plan_launch(decode_shape(config, tables.numpy()), torch.device("cuda"), torch.float16)
    assert f"BLOCK_N = {plan.block_n} tokens per tile" in " ".join(c.value for c in at.caption)
    assert float({m.label: m.value for m in at.metric}["Error vs reference"]) < 1e-12


def test_kernel_page_explains_an_empty_sequence():
    at = open_app({"batch": "2", "ctx_mode": "ragged", "lens": "0,20", "lo": "0", "hi": "20"}, page=KERNEL)
    assert at.number_input(key="ik_seq").value == 1  # starts on the longest
    at.number_input(key="ik_seq").set_value(0).run()
    assert_clean(at)
    assert any("no cached tokens" in i.value for i in at.info)


# -- review fixes ----------------------------------------------------------------------

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
def test_serving_defaults_fit_the_cpu_cap_so_the_first_clicks_work():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)  # the sidebar's defaults: 32/8/128 heads
    at.switch_page(SERVING).run()
    assert_clean(at)
    assert at.number_input(key="sv_max_batch").value == 4  # 4 x 32 heads x 64 = 8,192, the cap
    assert at.number_input(key="sv_rate").value == 0.13  # 0.2 for 6 slots, scaled to 4
    waiting = at.metric[1].value  # at the busiest step
    assert int(waiting) <= 5  # the queue stays short (0.2 a step into 4 slots: 10 waiting there)
    assert not at.button(key="sv_time").disabled and not at.button(key="sv_tradeoff_run").disabled
    assert not any("CPU" in w.value for w in at.warning)
    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    line = chart(at, "sv_tradeoff_chart")["data"][1]
    assert line["x"] == ["4", "16", "64"] and all(y > 0 for y in line["y"])  # every size timed, none refused


@CPU_ONLY
def test_serving_says_up_front_when_no_block_size_fits_the_cpu_cap():
    at = _serving_with_a_large_step()
    assert not at.exception
    assert at.button(key="sv_tradeoff_run").disabled
    (note,) = [w.value for w in at.warning if w.value.startswith("Nothing to time")]
    assert limits.CPU_WORK_RULE in note and "11 x max(8 x 1,006, 32 x 64) = 88,528" in note
    assert note.endswith("Lower **Max batch**, the sidebar's KV heads or the longest prompt or output.")
    assert not any("Not timed" in i.value for i in at.info)


def test_serving_metrics_stay_short_enough_to_fit():
    at = open_serving(sv_num_blocks=16_384, sv_steps=1000, sv_rate=2.0)
    assert_clean(at)
    values = {m.label: m.value for m in at.metric}
    assert all(len(v) <= 7 for v in values.values()), values  # six side by side: "16,384" fits, "561 / 16,384" not
    blocks = next(m for m in at.metric if m.label == "Blocks in use")
    assert blocks.delta.startswith("of 16,384 · ")


def test_kernel_page_says_when_the_split_override_is_capped():
    query = {"batch": "3", "ctx_mode": "ragged", "lens": "0,5000,31", "lo": "0", "hi": "5000"}
    at = open_app(query, page=KERNEL)
    at.toggle(key="ik_override").set_value(True).run()
    at.number_input(key="ik_splits").set_value(256).run()
    assert_clean(at)
    assert {m.label: (m.value, m.delta) for m in at.metric}["Splits that run"] == ("157", "of 157")
    (note,) = [i.value for i in at.info if "Splits capped" in i.value]
    assert note.startswith("Splits capped from 256 to 157: the longest sequence has 313 blocks of 16 tokens")
    at.number_input(key="ik_splits").set_value(8).run()
    assert not any("Splits capped" in i.value for i in at.info)


@CPU_ONLY
def test_serving_step_refusal_names_max_batch_not_the_sidebar_batch():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**SIM, "sv_num_blocks": 512, "sv_max_batch": 999, "sv_rate": 1.0, "sv_prompt_hi": 1000}.items():
        at.session_state[key] = value
    at.switch_page(SERVING).run()
    assert not at.exception
    assert at.button(key="sv_time").disabled
    (refusal,) = [w.value for w in at.warning if w.value.startswith("On the CPU the benchmark runs only when")]
    assert "Lower **Max batch**, the sidebar's KV heads or the longest prompt or output, or run on a GPU." in refusal
    assert "Lower the batch" not in refusal


@CPU_ONLY
def test_sweep_at_batch_one_does_not_advise_lowering_the_batch():
    at = open_app({"batch": "1", "heads": "256", "kv_heads": "8", "ctx_mode": "uniform", "ctx": "64"}, page=SWEEP)
    assert not at.exception
    (error,) = [e.value for e in at.error]  # 1 x max(8 x 64, 256 x 64) = 16,384 at any context
    assert error.endswith("Lower the sidebar's query heads.")
    assert "batch" not in error.split("Lower")[-1]


def test_kernel_page_says_when_every_sequence_is_empty():
    at = open_app({"batch": "3", "ctx_mode": "uniform", "ctx": "0"}, page=KERNEL)
    assert_clean(at)
    (info,) = [i.value for i in at.info if "no cached tokens" in i.value]
    assert info.startswith("Every sequence is empty")
    assert "Pick another sequence" not in info
