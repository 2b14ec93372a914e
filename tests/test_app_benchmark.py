"""AppTest suite for the Decode benchmark page: the CPU caps, a real (tiny) run
with its charts, table and history, out-of-memory and refusals, the run lock
shared by sessions, and the CPU timing threads. Assertions read the Plotly specs
the page sends."""

from __future__ import annotations

import json
import sys
import threading
from types import SimpleNamespace
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from paged_attention import (  # noqa: E402
    TOLERANCES, DecodeConfig, build_decode_inputs, execution_mode, reference_decode, unquantized_cache,
)
from explorer import settings as state  # noqa: E402
import ui.benchmark as bench_ui  # noqa: E402

from test_app import BENCH, TINY, assert_clean, chart, open_app  # noqa: E402
from test_app_sweep import SWEEP  # noqa: E402


def test_benchmark_page_before_running():
    at = open_app(page=BENCH)
    assert_clean(at)
    assert any("Press **Run benchmark**" in i.value for i in at.info)
    if execution_mode() == "interpreter":
        assert any("not GPU timings" in w.value for w in at.warning)
    # no live chart: the one chart is the recorded GPU runs' (tests/test_app_recorded.py)
    assert [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")] == ["recorded_chart"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU caps")
def test_cpu_refuses_large_and_caps_iterations():
    at = open_app({"batch": "64", "ctx_mode": "uniform", "ctx": "4096"}, page=BENCH)
    assert not at.exception
    assert any("On the CPU the benchmark runs only when" in w.value for w in at.warning)
    assert at.button(key="bench_run").disabled
    at = open_app({**TINY, "iters": "50", "warmup": "10"}, page=BENCH)
    caps = " ".join(i.value for i in at.info)
    assert "timed iterations capped from 50 to 3" in caps and "warm-up iterations capped" in caps
    assert not at.button(key="bench_run").disabled


def test_run_benchmark_produces_charts_table_and_history():
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    latency = chart(at, "bench_latency")
    boxes = [t for t in latency["data"] if t["type"] == "box"]
    assert [b["name"] for b in boxes] == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert all(len(b["y"]) == 2 and all(y > 0 for y in b["y"]) for b in boxes)
    assert latency["layout"]["yaxis"]["type"] == "log"

    accuracy = chart(at, "bench_accuracy")
    atol, _ = TOLERANCES[torch.float16]
    abs_err = accuracy["data"][0]["y"]
    assert all(np.isfinite(abs_err)) and max(abs_err) < atol
    assert [a["text"] for a in accuracy["layout"]["annotations"] if "pass" in a["text"]] == ["✓ pass"] * 3
    assert any(s["y0"] == atol for s in accuracy["layout"]["shapes"])

    speed = chart(at, "bench_speedup")
    assert speed["data"][0]["y"][0] == pytest.approx(1.0)
    chart(at, "bench_bandwidth")

    table = at.dataframe[0].value
    assert list(table["implementation"]) == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(table["correct"]) == ["yes", "yes", "yes"]
    # What a speaker points at comes first, on screen at 1280 px.
    assert list(at.dataframe[0].proto.column_order)[:3] == ["implementation", "correct", "median_ms"]
    assert list(at.dataframe[1].value.columns)[:3] == ["run", "change", "all correct"]
    assert "gpu_time_ms" not in table.columns or torch.cuda.is_available()
    assert at.get("download_button")

    history = chart(at, "bench_history_chart")
    assert [t["x"] for t in history["data"]] == [["#1<br>first run"]] * 3

    # change one setting: the last results stay until Run is pressed again
    at.number_input(key="sb_seed").set_value(1).run()
    assert chart(at, "bench_latency") and any("sidebar changed" in c.value for c in at.caption)
    at.checkbox(key="bench_include_simple").check().run()
    at.button(key="bench_run").click().run()
    assert_clean(at)
    boxes = [t for t in chart(at, "bench_latency")["data"] if t["type"] == "box"]
    assert [b["name"] for b in boxes][-1] == "Triton (simple grid)"
    history = chart(at, "bench_history_chart")
    assert [t["name"] for t in history["data"]][-1] == "Triton (simple grid)"
    # each run is named by what changed since the one before
    assert history["data"][0]["x"] == ["#1<br>first run", "#2<br>seed 0→1"]
    assert list(at.dataframe[1].value["change"]) == ["first run", "seed 0→1"]
    assert len(at.dataframe[1].value) == 2

    # one set of inputs is kept, for the latest configuration only
    slot = bench_ui.inputs_slot()
    assert slot.key is not None and slot.key.seed == 1

    at.button(key="bench_clear").click().run()
    assert_clean(at)
    # no live chart: the one chart is the recorded GPU runs' (tests/test_app_recorded.py)
    assert [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")] == ["recorded_chart"]


def _run_tiny_with(monkeypatch, target: str, exc: BaseException) -> AppTest:
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(bench_ui, target, boom)
    at = open_app(TINY, page=BENCH)
    return at.button(key="bench_run").click().run()


def test_cuda_out_of_memory_is_reported_and_app_recovers(monkeypatch):
    at = _run_tiny_with(monkeypatch, "benchmark_implementations", torch.cuda.OutOfMemoryError("CUDA out of memory. Tried"))
    assert not at.exception
    assert any("ran out of memory" in e.value for e in at.error)
    assert bench_ui.inputs_slot().key is None  # released
    monkeypatch.undo()
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert chart(at, "bench_latency")


def test_memory_refusal_is_reported(monkeypatch):
    refusal = bench_ui.BenchmarkRefused("needs about 200 GiB but only 100 GiB is free")
    monkeypatch.setattr(bench_ui.InputsSlot, "get", lambda self, config: (_ for _ in ()).throw(refusal))
    at = open_app(TINY, page=BENCH)
    at.button(key="bench_run").click().run()
    assert not at.exception
    assert any("only 100 GiB is free" in e.value for e in at.error)


def test_unexpected_failure_is_an_error_not_a_traceback(monkeypatch):
    at = _run_tiny_with(monkeypatch, "benchmark_implementations", RuntimeError("kernel exploded"))
    assert not at.exception
    assert any("RuntimeError: kernel exploded" in e.value for e in at.error)


def _release_once_waited_for(monkeypatch, lock) -> None:
    """Make the holder of ``lock`` let go only once the page blocks on it, so a test
    does not race with how long the page takes to get there (seconds on a GPU host,
    where a fixed timer let go before the click and nothing was queued)."""
    take = lock.acquire

    def acquire(blocking=True, owner=None):
        if blocking and lock.locked():
            threading.Timer(0.2, lock.release).start()
        return take(blocking, owner)

    monkeypatch.setattr(lock, "acquire", acquire)


def test_queued_session_is_told_and_then_runs(monkeypatch):
    lock = bench_ui.run_lock()
    lock.acquire()
    _release_once_waited_for(monkeypatch, lock)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    # The note said so while the run waited; once it ran, no box stays (an empty one did), a caption does.
    assert not any("Queued" in i.value for i in at.info)
    assert any("Queued behind another session's run" in c.value for c in at.caption)
    assert chart(at, "bench_latency")


def test_acquire_calls_on_wait_only_when_busy():
    lock, waited = threading.Lock(), []
    bench_ui.acquire(lock, lambda: waited.append(1))
    assert waited == [] and lock.locked()
    threading.Timer(0.2, lock.release).start()
    bench_ui.acquire(lock, lambda: waited.append(1))
    assert waited == [1]
    lock.release()


@pytest.mark.gpu
def test_check_fits_refuses_more_than_free_memory():
    free, _ = torch.cuda.mem_get_info()
    heads = 8 * 128 * 2 * 2  # bytes per token of K and V at 8 KV heads, head_dim 128, float16
    huge = DecodeConfig(batch_size=64, context_lens=int(2 * free / heads / 64), device="cuda")
    with pytest.raises(bench_ui.BenchmarkRefused, match="free"):
        bench_ui.check_fits(huge)
    bench_ui.check_fits(DecodeConfig(batch_size=1, context_lens=16, device="cuda"))


@pytest.mark.gpu
def test_gpu_run_shows_gpu_time_and_copy_bandwidth():
    at = open_app({**TINY, "device": "cuda", "iters": "5"}, page=BENCH, timeout=300)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    latency = chart(at, "bench_latency")
    assert any(t.get("name") == "GPU time (CUDA graph)" for t in latency["data"])
    bandwidth = chart(at, "bench_bandwidth")
    assert len(bandwidth["data"]) == 2 and bandwidth["layout"]["shapes"]
    table = at.dataframe[0].value
    assert table["pct_of_copy_bw"].notna().all()
    # All three implementations ran on the GPU and matched the float64 reference.
    assert {"Naive PyTorch", "Optimized PyTorch", "Triton"} <= set(table["implementation"])
    assert set(table["device"]) == {"cuda:0"}
    assert (table["correct"] == "yes").all()
    print(table[["implementation", "device", "median_ms", "gpu_time_ms", "pct_of_copy_bw", "max_abs_err", "correct"]]
          .to_string(index=False))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU caps")
def test_refused_run_shows_the_refusal_alone():
    at = open_app({"batch": "64", "ctx_mode": "uniform", "ctx": "4096"}, page=BENCH)
    assert_clean(at)
    assert at.button(key="bench_run").disabled
    assert any("On the CPU the benchmark runs only when" in w.value for w in at.warning)
    assert not any("Press **Run benchmark**" in i.value for i in at.info)


def test_all_empty_batch_has_no_bandwidth_and_no_speedup():
    at = open_app({**TINY, "ctx_mode": "ragged", "lens": "0,0", "lo": "0", "hi": "8"}, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert any("Every context is empty: there is nothing to attend to" in w.value for w in at.warning)
    assert [m.delta for m in at.metric] == [""] * 3  # no "287× faster than naive"
    keys = [e.proto.id for e in at.get("plotly_chart")]
    assert not any(k.endswith("-bench_speedup") or k.endswith("-bench_bandwidth") for k in keys)
    assert any("Bandwidth: n/a" in i.value for i in at.info) and any("Speedup: not meaningful" in i.value
                                                                       for i in at.info)
    table = at.dataframe[0].value
    assert list(table["gbps"]) == ["n/a"] * 3 and list(table["speedup_vs_naive"]) == ["n/a"] * 3
    assert "pct_of_copy_bw" not in table.columns


def test_atol_column_keeps_bfloat16s_tolerance():
    at = open_app({**TINY, "dtype": "bfloat16"}, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert set(table["atol"]) == {TOLERANCES[torch.bfloat16][0]}
    fmt = json.loads(at.dataframe[0].proto.columns)["atol"]["type_config"]["format"]
    assert fmt % TOLERANCES[torch.bfloat16][0] == "0.016"  # not "2e-02"


def test_second_click_while_this_sessions_run_finishes_is_not_another_session(monkeypatch):
    monkeypatch.setattr(bench_ui, "session_id", lambda: "this tab")
    lock = bench_ui.run_lock()
    assert lock.acquire(owner="this tab")  # the first click's run, still timing
    _release_once_waited_for(monkeypatch, lock)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "Waited for your previous run" in captions and "another session" not in captions
    assert chart(at, "bench_latency")


def test_acquire_tells_this_sessions_run_from_another_sessions(monkeypatch):
    monkeypatch.setattr(bench_ui, "session_id", lambda: "me")
    for holder, expected in (("me", "own"), ("someone else", "other"), (None, "other")):
        lock, told = bench_ui.RunLock(), []
        lock.acquire(owner=holder)
        threading.Timer(0.2, lock.release).start()
        bench_ui.acquire(lock, lambda: told.append("other"), lambda: told.append("own"))
        assert told == [expected] and lock.owner == "me"
        lock.release()
        assert lock.owner is None and not lock.locked()


def test_a_replacing_run_reuses_the_results_the_stopped_run_kept(monkeypatch):
    """A second click stops the first run at its next UI update; the new run times only what is left,
    the rest together, and says which results it reused."""
    config = state.settings_from_query(TINY)[0].config()
    timed, told = [], []

    def fake(names, inputs, **kwargs):
        timed.append(list(names))
        return [SimpleNamespace(name=name) for name in names]

    monkeypatch.setattr(bench_ui, "benchmark_implementations", fake)
    kept = SimpleNamespace(name="naive")
    done = [kept]
    results, _ = bench_ui.run_benchmark_locked(
        config, ["naive", "vectorized", "triton"], warmup=0, iters=1, on_progress=lambda *a: None,
        on_result=lambda r, reused: told.append((r.name, reused)), on_wait=lambda: None, done=done,
    )
    assert timed == [["vectorized", "triton"]]  # one interleaved run of what is left
    assert told == [("naive", True), ("vectorized", False), ("triton", False)]
    assert results[0] is kept and [r.name for r in results] == ["naive", "vectorized", "triton"]
    assert [r.name for r in done] == ["naive", "vectorized", "triton"]  # kept as measured, for a next replacement


def test_cpu_runs_time_on_one_torch_thread_and_restore_the_count(monkeypatch):
    """The browser shares a CPU host's cores; torch's threads waiting for each other
    made a sweep point 40 times slower on 2 cores."""
    config = state.settings_from_query({**TINY, "device": "cpu"})[0].config()  # a CPU run on any host
    assert config.device == "cpu"
    seen = []

    def fake(names, inputs, **kwargs):
        seen.append(torch.get_num_threads())
        return [SimpleNamespace(name=name) for name in names]

    monkeypatch.setattr(bench_ui, "benchmark_implementations", fake)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        bench_ui.run_benchmark_locked(config, ["naive", "vectorized"], warmup=0, iters=1,
                                      on_progress=lambda *a: None, on_result=lambda r, reused: None,
                                      on_wait=lambda: None)
        assert seen == [bench_ui.CPU_TIMING_THREADS]  # both timed together, on one thread
        assert torch.get_num_threads() == 2  # restored
        with bench_ui.cpu_timing_threads("cuda:0"):
            assert torch.get_num_threads() == 2  # a GPU run keeps the host's threads
    finally:
        torch.set_num_threads(before)


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


def test_fp8_run_separates_the_quantization_error_from_the_kernel_error():
    at = open_app({**TINY, "kv_dtype": "float8_e4m3fn"}, page=BENCH, timeout=120)
    assert any("kv=fp8 e4m3 per tensor" in c.value for c in at.caption)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["correct"]) == ["yes", "yes", "yes"]  # the kernels, against the dequantized reference
    config = state.settings_from_query({**TINY, "kv_dtype": "float8_e4m3fn"})[0].config()
    inputs = build_decode_inputs(config)
    quantized = reference_decode(*inputs.args(), **inputs.scales())
    k32, v32 = unquantized_cache(config)
    exact = reference_decode(inputs.query.double(), k32.double(), v32.double(), inputs.block_tables,
                             inputs.context_lens)
    q = float((quantized - exact).abs().max())

    accuracy = chart(at, "bench_accuracy")
    kernel, _, line = accuracy["data"]
    assert line["name"] == "fp8 quantization error (vs unquantized cache)"
    assert line["y"] == pytest.approx([q] * 3) and line["yaxis"] == "y2"
    assert max(kernel["y"]) < TOLERANCES[torch.float16][0] < q  # the kernels' error is far below fp8's own
    caption = next(c.value for c in at.caption if "quantization error" in c.value)
    assert f"max {q:.2g}" in caption and "before quantization" in caption and "dequantized fp8 e4m3" in caption
    # bytes moved count one byte per K and V value
    assert bench_ui.inputs_slot().key.decode_bytes() == config.decode_bytes() < config.with_(kv_dtype=None).decode_bytes()

    at.selectbox(key="sb_kv_dtype").set_value("same").run()
    at.button(key="bench_run").click().run()  # a 16-bit cache: the chart as before
    assert_clean(at)
    assert len(chart(at, "bench_accuracy")["data"]) == 2
    assert not any("quantization error" in c.value for c in at.caption)
    assert list(at.dataframe[1].value["change"]) == ["first run", "KV cache fp8 e4m3→float16"]


def test_quantization_error_too_large_for_memory_is_skipped_with_a_note(monkeypatch):
    real = bench_ui.check_memory

    def check(config):
        memory = real(config)
        return memory if config.dtype != "float32" else SimpleNamespace(fits=False, need=8 << 30, free=1 << 30)

    monkeypatch.setattr(bench_ui, "check_memory", check)
    at = open_app({**TINY, "kv_dtype": "float8_e5m2"}, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert len(chart(at, "bench_accuracy")["data"]) == 2
    caption = next(c.value for c in at.caption if "quantization error" in c.value)
    assert "not measured" in caption and "8.59 GB" in caption


def test_one_unit_of_time_in_cards_charts_and_tables():
    """A speaker reads one unit on the page: the cards said µs, the charts ms and
    the tables raw ms (0.8137, "%.4g"); GB/s such as 0.000612 was a NumberColumn
    clipped to ".000612" at 1280 px, now text to three significant digits."""
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    at.button(key="bench_run").click().run()  # a second run, for the history's chart and table
    assert_clean(at)
    unit = at.metric[0].value.rsplit(" ", 1)[-1]
    assert unit in ("µs", "ms", "s")
    table = at.dataframe[0].value
    columns = json.loads(at.dataframe[0].proto.columns)
    assert [m.value for m in at.metric] == [f"{v} {unit}" for v in table["median_ms"]]
    for column in ("median_ms", "p20_ms", "p80_ms"):
        assert columns[column]["label"].endswith(f"({unit})"), columns[column]
    for key, title in (("bench_latency", "latency"), ("bench_history_chart", "median latency"),
                       ("recorded_chart", "recorded latency")):
        spec = chart(at, key)
        assert spec["layout"]["yaxis"]["title"]["text"] == f"{title} ({unit})"
        assert all(f"}} {unit}<" in t["hovertemplate"] for t in spec["data"]), key
    latency = chart(at, "bench_latency")
    medians = [a["text"] for a in latency["layout"]["annotations"]]
    assert medians == [f"<b>{m.value}</b>" for m in at.metric]
    history = at.dataframe[1]
    labels = [c for c in json.loads(history.proto.columns).values() if c.get("label", "").endswith(")")]
    assert labels and all(c["label"].endswith(f"({unit})") for c in labels)
    recorded = json.loads(at.dataframe[2].proto.columns)
    assert recorded["median_ms"]["label"] == f"Call latency ({unit})"
    # Bandwidths: text, three significant digits at most, never scientific or clipped.
    for value in table["gbps"]:
        assert isinstance(value, str) and "e" not in value
        digits = value.replace(",", "").replace(".", "").lstrip("0")
        assert len(digits) <= 3 or float(value.replace(",", "")) >= 100, value


def test_a_run_stopped_midway_says_so_and_the_next_run_keeps_what_it_measured(monkeypatch):
    """Streamlit stops a running script when the page is left or a setting changes:
    the page says the last run stopped, and pressing Run again measures only what
    is missing (the stopped run's results are kept)."""
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    real = bench_ui.run_benchmark_locked
    calls = []

    def stops_after_the_first(config, names, **kw):
        calls.append(list(names))
        if len(calls) == 1:
            real(config, names[:1], **kw)  # measures the first implementation, then the script is stopped
            raise StopException()
        return real(config, names, **kw)

    monkeypatch.setattr(bench_ui, "run_benchmark_locked", stops_after_the_first)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    at.run()  # the page as it is drawn after the stop, on the next script run
    assert not at.exception
    stopped = [w.value for w in at.warning if "last run stopped" in w.value]
    assert stopped and "1 of 3 implementations measured" in stopped[0] and "what it measured is kept" in stopped[0]
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert not [w for w in at.warning if "last run stopped" in w.value]
    assert list(at.dataframe[0].value["correct"]) == ["yes", "yes", "yes"]
    assert any("measured by the run your click replaced" in m.value for m in at.markdown)


#: TINY with a batch of four that shares a 32-token prefix in two groups (two whole blocks of 16).
PREFIX = {**TINY, "batch": "4", "ctx": "64", "prefix": "32", "prefix_groups": "2"}


def test_shared_prefix_fields_follow_the_url_and_go_back_into_it():
    at = open_app({**TINY, "batch": "4"}, page=BENCH)
    assert_clean(at)
    assert at.number_input(key="sb_shared_prefix").value == 0
    # groups mean nothing without a prefix: hidden, and kept out of the URL
    assert not [n for n in at.number_input if n.key == "sb_prefix_groups"]
    assert "prefix" not in at.query_params and "prefix_groups" not in at.query_params
    assert not [c for c in at.checkbox if c.key == "bench_include_prefix"]

    at.number_input(key="sb_shared_prefix").set_value(32).run()
    at.number_input(key="sb_prefix_groups").set_value(2).run()
    assert_clean(at)
    assert (at.query_params["prefix"], at.query_params["prefix_groups"]) == ("32", "2")

    at = open_app(PREFIX, page=BENCH)
    assert_clean(at)
    assert (at.number_input(key="sb_shared_prefix").value, at.number_input(key="sb_prefix_groups").value) == (32, 2)
    assert at.checkbox(key="bench_include_prefix").value  # on by default once a prefix is shared
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "Shared prefix: **2 blocks** held once for each of 2 groups" in sidebar


@pytest.mark.parametrize("query, rule", [
    ({"prefix": "100"}, "Shared prefix (tokens) (100) must not exceed Tokens per sequence (64)"),
    ({"prefix_groups": "5"}, "Prefix groups (5) must be from 1 to Batch size (4)"),
])
def test_a_prefix_the_batch_cannot_hold_is_a_config_error(query, rule):
    at = open_app({**PREFIX, **query}, page=BENCH)
    assert not at.exception
    assert [e.value for e in at.error] == [f"**Invalid configuration.** {rule}."]


def test_bad_prefix_in_the_url_gets_a_note():
    at = open_app({**TINY, "prefix": "lots", "prefix_groups": "0"}, page=BENCH)
    assert_clean(at)
    notes = [w.value for w in at.sidebar.warning if w.value.startswith("URL:")]
    assert notes == ["URL: `prefix=lots` ignored (not a whole number); using 0.",
                     "URL: `prefix_groups=0` ignored (must be between 1 and 4,096); using 1."]


def test_run_with_a_shared_prefix_races_the_prefix_aware_kernel_on_unique_bytes():
    at = open_app(PREFIX, page=BENCH, timeout=180)
    config = DecodeConfig(batch_size=4, context_lens=64, num_heads=4, num_kv_heads=2, head_dim=32,
                          shared_prefix=32, prefix_groups=2)
    # the bytes before any run: 4 x 64 tokens logically, two 32-token prefixes fewer in the pool
    kv = {m.label: (m.value, m.delta) for m in at.metric}
    assert kv == {"KV read, logical": ("65.5 kB", "prefix in every sequence"),
                  "KV read, unique": ("49.2 kB", "-25%: prefix once per group")}
    assert config.needed_kv_bytes() == 65_536 and config.unique_kv_bytes() == 49_152
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["implementation"]) == ["Naive PyTorch", "Optimized PyTorch", "Triton", "Triton (prefix-aware)"]
    assert list(table["correct"]) == ["yes"] * 4
    assert float(table["max_tol_ratio"].iloc[3]) < 1
    # bandwidth on unique bytes, named so, beside the logical one
    columns = at.dataframe[0].proto.columns
    assert "GB/s (unique bytes)" in columns and "GB/s (logical bytes)" in columns
    assert "unique_gbps" in table.columns
    bandwidth = chart(at, "bench_bandwidth")
    assert "Bandwidth on unique bytes" in bandwidth["layout"]["title"]["text"]
    assert any("prefix=32×2 groups" in c.value for c in at.caption)  # the run's label, in its CSV too
