"""AppTest suite for the Decode benchmark page's results: the CPU caps, a real
(tiny) run with its cards, charts, table and history, one unit of time, rankings
that say "indistinguishable" where the p20-p80 ranges overlap, host overhead, an
empty batch, an fp8 cache and a shared prefix. Assertions read the Plotly specs
the page sends. Running (locks, failures, stops): test_app_benchmark_runs.py."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

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
from explorer import formatting, settings as state  # noqa: E402
from ui.recorded import recorded_durations  # noqa: E402
import ui.benchmark as bench_ui  # noqa: E402

from test_app import BENCH, TINY, assert_clean, chart, open_app, result_columns, results, url_notes  # noqa: E402
from test_app_sweep import SWEEP  # noqa: E402
from explorer.bench.accuracy_figures import PASS_MARK  # noqa: E402


@pytest.fixture(autouse=True)
def exact_timed_calls(monkeypatch):
    """Runs here time the sidebar's timed calls and no more: the CPU's time budget
    (ui.benchmark.TIMING_BUDGET_S) would add seconds to each
    (test_timed_calls_go_on_within_the_budget_while_a_median_moves turns it on)."""
    monkeypatch.setitem(bench_ui.TIMING_BUDGET_S, "cpu", None)


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
    marks = [a["text"] for a in accuracy["layout"]["annotations"] if a.get("yref") == "y domain"]
    assert marks == [PASS_MARK] * 3
    assert any(s["y0"] == atol for s in accuracy["layout"]["shapes"])

    speed = next(t for t in chart(at, "bench_speedup")["data"] if t["name"] == "speedup")
    assert speed["y"][0] == pytest.approx(1.0)
    chart(at, "bench_bandwidth")
    # on the CPU there is no GPU time to subtract: the page says so instead of a host overhead
    keys = [e.proto.id for e in at.get("plotly_chart")]
    assert not any(k.endswith("-bench_overhead") for k in keys) or torch.cuda.is_available()
    assert any(i.value.startswith("**Host overhead: needs a GPU.**") for i in at.info) or torch.cuda.is_available()

    table = results(at)
    assert list(table["implementation"]) == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(table["correct"]) == ["yes", "yes", "yes"]
    assert list(table["samples"]) == [f"{len(b['y']):,}" for b in boxes]
    # What a speaker points at comes first, each table whole at 1280 px.
    assert list(at.dataframe[0].value.columns)[:2] == ["implementation", "median_ms"]
    assert list(at.dataframe[1].value.columns)[:2] == ["implementation", "correct"]
    assert list(at.dataframe[2].value.columns)[:3] == ["run", "change", "all correct"]
    assert not {"gpu_time_ms", "host_overhead_ms"} & set(table.columns) or torch.cuda.is_available()
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
    assert list(at.dataframe[2].value["change"]) == ["first run", "seed 0→1"]
    assert len(at.dataframe[2].value) == 2

    # one set of inputs is kept, for the latest configuration only
    slot = bench_ui.inputs_slot()
    assert slot.key is not None and slot.key.seed == 1

    at.button(key="bench_clear").click().run()
    assert_clean(at)
    # no live chart: the one chart is the recorded GPU runs' (tests/test_app_recorded.py)
    assert [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")] == ["recorded_chart"]


@pytest.mark.gpu
def test_gpu_run_shows_gpu_time_and_copy_bandwidth():
    at = open_app({**TINY, "device": "cuda", "iters": "5"}, page=BENCH, timeout=300)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    latency = chart(at, "bench_latency")
    assert any(t.get("name") == "GPU time (CUDA graph)" for t in latency["data"])
    bandwidth = chart(at, "bench_bandwidth")
    assert len(bandwidth["data"]) == 2 and bandwidth["layout"]["shapes"]
    table = results(at)
    assert table["pct_of_copy_bw"].notna().all()
    # All three implementations ran on the GPU and matched the float64 reference.
    assert {"Naive PyTorch", "Optimized PyTorch", "Triton"} <= set(table["implementation"])
    assert any(" cuda · warm-up" in c.value for c in at.caption)  # the run's device, in its caption
    assert (table["correct"] == "yes").all()
    # host overhead where CUDA graphs timed the GPU's part: a number, and a chart of each call's split
    timed = table["gpu_time_ms"] != "n/a"
    assert timed.any() and (table["host_overhead_ms"][timed] != "n/a").all()
    overhead = chart(at, "bench_overhead")
    assert [t["name"] for t in overhead["data"]] == ["GPU time", "host overhead"]
    print(table[["implementation", "median_ms", "gpu_time_ms", "host_overhead_ms", "pct_of_copy_bw",
                 "max_abs_err", "correct"]].to_string(index=False))


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
    table = results(at)
    assert list(table["achieved_gbps"]) == ["n/a"] * 3 and list(table["speedup_vs_naive"]) == ["n/a"] * 3
    assert "pct_of_copy_bw" not in table.columns


def test_atol_column_keeps_bfloat16s_tolerance():
    at = open_app({**TINY, "dtype": "bfloat16"}, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = results(at)
    assert TOLERANCES[torch.bfloat16][0] == 0.016
    assert set(table["atol"]) == {"0.0160"}  # three significant figures, not "2e-02"


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
    table = results(at)
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
    assert list(at.dataframe[2].value["change"]) == ["first run", "KV cache fp8 e4m3→float16"]


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
    table = results(at)
    assert [m.value for m in at.metric] == [f"{v} {unit}" for v in table["median_ms"]]
    assert any(m.value == f"**Time per call ({unit})**" for m in at.markdown)  # the unit of the table's times
    # The recorded section keeps its own unit, its chart's and table's alike (review 3).
    own = formatting.duration_unit(recorded_durations())
    recorded = chart(at, "recorded_chart")
    assert recorded["layout"]["yaxis"]["title"]["text"] == f"recorded latency ({own})"
    assert _hover_durations(recorded) and all(d.endswith(f" {own}") for d in _hover_durations(recorded))
    (recorded_table,) = _recorded_section(at).dataframe
    written = {formatting.duration_number(v, own) for v in recorded_durations()}  # the recorded times, in its unit
    assert set(recorded_table.value["median_ms"]) <= written
    for key, title in (("bench_latency", "latency"), ("bench_history_chart", "median latency")):
        spec = chart(at, key)
        assert spec["layout"]["yaxis"]["title"]["text"] == f"{title} ({unit})"
        assert _hover_durations(spec) and all(d.endswith(f" {unit}") for d in _hover_durations(spec)), key
    latency = chart(at, "bench_latency")
    medians = [a["text"] for a in latency["layout"]["annotations"]]
    assert medians == [f"<b>{m.value}</b>" for m in at.metric]
    assert any(m.value == f"**Median call latency per run ({unit})**" for m in at.markdown)  # the history's
    # Bandwidths: text, three significant digits at most, never scientific or clipped.
    for value in table["achieved_gbps"]:
        assert isinstance(value, str) and "e" not in value
        digits = value.replace(",", "").replace(".", "").lstrip("0")
        assert len(digits) <= 3 or float(value.replace(",", "")) >= 100, value


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
    ({"prefix": "100"}, "Shared prefix (100 tokens) must not exceed Tokens per sequence (64)"),
    ({"prefix_groups": "5"}, "Prefix groups (5) must be from 1 to Batch size (4)"),
])
def test_a_prefix_the_batch_cannot_hold_is_a_config_error(query, rule):
    at = open_app({**PREFIX, **query}, page=BENCH)
    assert not at.exception
    assert [e.value for e in at.error] == [f"**Invalid configuration.** {rule}."]


def test_bad_prefix_in_the_url_gets_a_note():
    at = open_app({**TINY, "prefix": "lots", "prefix_groups": "0"}, page=BENCH)
    assert_clean(at)
    notes = url_notes(at.sidebar)
    assert notes == ["`prefix=lots` ignored (not a whole number); using 0.",
                     "`prefix_groups=0` ignored (must be between 1 and 4,096); using 1."]


def test_run_with_a_shared_prefix_races_the_prefix_aware_kernel_on_unique_bytes():
    at = open_app(PREFIX, page=BENCH, timeout=180)
    config = DecodeConfig(batch_size=4, context_lens=64, num_heads=4, num_kv_heads=2, head_dim=32,
                          shared_prefix=32, prefix_groups=2)
    # the bytes before any run: 4 x 64 tokens logically, two 32-token prefixes fewer in the pool
    kv = {m.label: (m.value, m.delta) for m in at.metric}
    assert kv == {"K+V read, logical": ("65.5 kB", "prefix in every sequence"),
                  "K+V read, unique": ("49.2 kB", "-25.0%: prefix once per group")}
    assert config.needed_kv_bytes() == 65_536 and config.unique_kv_bytes() == 49_152
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = results(at)
    assert list(table["implementation"]) == ["Naive PyTorch", "Optimized PyTorch", "Triton", "Triton (prefix-aware)"]
    assert list(table["correct"]) == ["yes"] * 4
    assert float(table["max_tol_ratio"].iloc[3]) < 1
    # bandwidth on unique bytes, named so (the logical one is in the CSV)
    assert result_columns(at)["achieved_gbps"]["label"] == "GB/s (unique)"
    bandwidth = chart(at, "bench_bandwidth")
    assert "Bandwidth on unique bytes" in bandwidth["layout"]["title"]["text"]
    assert any("prefix=32×2 groups" in c.value for c in at.caption)  # the run's label, in its CSV too


def _fake_result(name, label, samples, gpu=None, host=None):
    """A BenchResult's fields as the page reads them, with chosen call latencies (ms)."""
    ordered = sorted(samples)
    return SimpleNamespace(
        name=name, label=label, device="cuda:0" if gpu else "cpu", samples_ms=samples, median_ms=ordered[1],
        p20_ms=ordered[0] + 0.4 * (ordered[1] - ordered[0]), p80_ms=ordered[1] + 0.6 * (ordered[2] - ordered[1]),
        gpu_time_ms=gpu, gpu_p20_ms=gpu, gpu_p80_ms=gpu, host_ms=host, bytes_moved=10_000, gbps=1.0, gpu_gbps=gpu and 2.0,
        unique_bytes=10_000, unique_gbps=1.0, gpu_unique_gbps=gpu and 2.0, max_abs_err=1e-4, max_rel_err=1e-3,
        max_tol_ratio=0.05, atol=2e-3, rtol=2e-3, passed=True,
    )


def _run_with(monkeypatch, timings: dict) -> AppTest:
    """The page at TINY after a run whose results are ``timings`` (name -> (samples, gpu time))."""
    from paged_attention import LABELS

    def fake(names, inputs, **kwargs):
        return [_fake_result(name, LABELS[name], *timings[name]) for name in names]

    monkeypatch.setattr(bench_ui, "benchmark_implementations", fake)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    return at


def test_overlapping_call_latencies_are_indistinguishable_on_cards_chart_and_table(monkeypatch):
    """Issue 23: three noisy calls on a laptop gave "2.4× faster", "2.2× faster" and
    "1.1× slower" on identical settings. Where the p20-p80 ranges overlap, nothing
    on the page says faster or slower."""
    at = _run_with(monkeypatch, {"naive": ([118.0, 119.0, 140.0], None),  # p20-p80 118-132
                                 "vectorized": ([105.0, 130.0, 150.0], None),  # p20-p80 115-142, median slower
                                 "triton": ([3800.0, 3860.0, 5470.0], None)})
    cards = {m.label: m.delta for m in at.metric}
    assert cards["Optimized PyTorch"] == "indistinguishable"
    assert cards["Triton"].endswith("slower") and cards["Naive PyTorch"] == "baseline"
    spec = chart(at, "bench_speedup")
    speed = next(t for t in spec["data"] if t["name"] == "speedup")
    labels = [a["text"] for a in spec["layout"]["annotations"] if a.get("name") == "speedup label"]
    assert labels[1] == "indistinguishable" and "slower" not in speed["customdata"][1]
    assert list(results(at)["speedup_vs_naive"])[:2] == ["baseline", "indistinguishable"]


def test_host_overhead_is_shown_per_implementation_where_the_gpu_time_is_known(monkeypatch):
    at = _run_with(monkeypatch, {"naive": ([1.0, 1.1, 1.2], None), "vectorized": ([0.2, 0.21, 0.22], 0.05),
                                 "triton": ([0.07, 0.0708, 0.072], 0.0046)})
    table = results(at)
    unit = at.metric[0].value.rsplit(" ", 1)[-1]
    assert unit == "µs"
    assert list(table["host_overhead_ms"]) == ["n/a", "160", "66.2"]  # call latency − GPU time, in µs
    assert result_columns(at)["host_overhead_ms"]["label"] == "Host overhead"
    assert any(m.value == "**Time per call (µs)**" for m in at.markdown)
    overhead = chart(at, "bench_overhead")
    gpu, host = overhead["data"]
    assert host["y"][2] == pytest.approx(100 * 0.0662 / 0.0708) and gpu["y"][0] is None
    assert any("Triton, 66.2 µs of a 70.8 µs call (93.5%)" in m.value for m in at.markdown)


def test_timed_calls_go_on_within_the_budget_while_a_median_moves(monkeypatch):
    """Issue 23: the number of timed calls adapts to the variance, time-boxed: the
    sidebar's timed calls are the fewest, and more run while a median moves."""
    monkeypatch.setitem(bench_ui.TIMING_BUDGET_S, "cpu", 1.5)
    at = open_app(TINY, page=BENCH, timeout=120)
    assert any("2 timed calls or more (up to 1.50 s more while a median moves)" in c.value for c in at.caption)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    samples = [int(n.replace(",", "")) for n in results(at)["samples"]]
    assert min(samples) >= 2 and max(samples) > 2  # the PyTorch calls take milliseconds: more of them fit
    boxes = [t for t in chart(at, "bench_latency")["data"] if t["type"] == "box"]
    assert [len(b["y"]) for b in boxes] == samples


def test_the_recorded_section_keeps_its_own_unit_beside_a_slow_live_run(monkeypatch):
    """Review 3 at 1280x720: the "Recorded on NVIDIA H200" table and chart read µs on
    the page's load and ms after a CPU run, following the live run's unit. The
    recorded GPU times keep their own unit (µs), whatever a live run's; the run's
    cards, charts and tables read theirs (ms)."""
    at = open_app(TINY, page=BENCH, timeout=120)
    (before,) = _recorded_section(at).dataframe
    before_axis = chart(at, "recorded_chart")["layout"]["yaxis"]["title"]["text"]
    at = _run_with(monkeypatch, {"naive": ([118.0, 119.0, 140.0], None), "vectorized": ([105.0, 130.0, 150.0], None),
                                 "triton": ([3800.0, 3860.0, 5470.0], None)})
    unit = at.metric[0].value.rsplit(" ", 1)[-1]
    own = formatting.duration_unit(recorded_durations())
    assert (unit, own) == ("ms", "µs")  # the live run's and the recorded ones' differ
    recorded = chart(at, "recorded_chart")
    assert recorded["layout"]["yaxis"]["title"]["text"] == before_axis == f"recorded latency ({own})"
    assert _hover_durations(recorded) and all(d.endswith(f" {own}") for d in _hover_durations(recorded))
    (after,) = _recorded_section(at).dataframe
    assert after.value.equals(before.value)  # the same times, in the same unit, as before the run
    assert set(after.value["median_ms"]) <= {formatting.duration_number(v, own) for v in recorded_durations()}
    assert chart(at, "bench_latency")["layout"]["yaxis"]["title"]["text"] == f"latency ({unit})"


def _recorded_section(at: AppTest):
    (section,) = [e for e in at.expander if e.label.startswith("Recorded on a GPU")]
    return section


def _hover_durations(spec) -> list[str]:
    """The durations a chart's hovers write: each point's pre-formatted text (its
    ``customdata``, the last item where a point carries several), none where empty."""
    out = []
    for trace in spec["data"]:
        for data in trace.get("customdata") or []:
            text = data[-1] if isinstance(data, list) else data
            if text:
                out.append(text)
    return out
