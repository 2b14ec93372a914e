"""Axes of the benchmark's figures (review 3): the run history's log ticks, the
speedup's log axis centred on 1x."""

import itertools
import math

import pytest
from test_figures_benchmark import _entry, _result

from explorer import style
from explorer.bench import figures as bench_figures
from explorer.category_ticks import tick_room_px


def _plot_px(fig) -> float:
    return fig.layout.height - fig.layout.margin.t - fig.layout.margin.b


def _history(*runs):
    """Run entries, one per list of (name, median ms) pairs."""
    return [_entry(i + 1, f"run {i + 1}", [_result(n, [ms * 0.98, ms, ms * 1.03]) for n, ms in run])
            for i, run in enumerate(runs)]


#: The review's history (a CPU run: 89.2, 24 and 326 ms), one run and two, one
#: implementation's (under a decade), and a µs-scale GPU one over three decades.
HISTORIES = {
    "one implementation": [[("naive", 89.2)]],
    "one CPU run": [[("naive", 89.2), ("vectorized", 24.0), ("triton", 326.0)]],
    "two CPU runs": [[("naive", 89.2), ("vectorized", 24.0), ("triton", 326.0)],
                     [("naive", 30.0), ("vectorized", 11.0), ("triton", 210.0)]],
    "GPU runs": [[("naive", 12.0), ("vectorized", 0.3), ("triton", 0.05)],
                 [("naive", 40.0), ("vectorized", 0.9), ("triton", 0.06)]],
}


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("name", list(HISTORIES))
def test_run_history_labels_only_decades_or_1_2_5_and_keeps_them_apart(name, scale):
    """Review 3 at 1280x720 in presentation mode: the "Runs in this session" chart's
    log axis labelled every minor tick (20, 30 ... 90, 100, 200 ... 800) at 18 px, the
    labels on one another. Its ticks are now 1, 2, 5 times a power of ten (or whole
    decades), each label a line and a half of tick text from the next."""
    with style.presentation(scale):
        fig = bench_figures.history_figure(_history(*HISTORIES[name]))
        room = tick_room_px()
    axis = fig.layout.yaxis
    assert axis.type == "log" and axis.tickmode == "array"
    ticks = list(axis.tickvals)
    assert len(ticks) >= 2
    lo, hi = axis.range
    assert all(lo <= math.log10(v) <= hi for v in ticks)
    mantissas = {round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6) for v in ticks}
    assert mantissas <= {1, 2, 5}
    px_per_decade = _plot_px(fig) / (hi - lo)
    logs = [math.log10(v) for v in ticks]
    assert min(b - a for a, b in itertools.pairwise(logs)) * px_per_decade >= room
    # every median's dot is on the axis
    ys = [y for t in fig.data for y in t.y if y is not None]
    assert lo < math.log10(min(ys)) and math.log10(max(ys)) < hi


#: Speedups over Naive PyTorch both above and below 1×: the review's 0.27× (a CPU
#: run, where Triton is interpreted), a few near parity, and a GPU run's 44×.
SPEEDUPS = {
    "slower and faster": [("naive", 10.0), ("vectorized", 0.5), ("triton", 37.0)],
    "near parity": [("naive", 10.0), ("vectorized", 9.0), ("triton", 11.0)],
    "all faster": [("naive", 10.0), ("vectorized", 1.0), ("triton", 0.227)],
    "all slower": [("naive", 1.0), ("vectorized", 3.0), ("triton", 300.0)],
}


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("name", list(SPEEDUPS))
def test_speedup_axis_is_log_centred_on_parity_and_holds_every_speedup(name, scale):
    """Review 3: the speedup chart's y axis was linear 0-20 in some runs (a 0.27× dot
    on the 0 line, out of sight) and log in others. It is always log, its range as
    far below 1× as above (in decades), every speedup and p20-p80 range inside."""
    results = [_result(n, [ms * 0.97, ms, ms * 1.04]) for n, ms in SPEEDUPS[name]]
    with style.presentation(scale):
        fig = bench_figures.speedup_figure(results)
        room = tick_room_px()
    axis = fig.layout.yaxis
    assert axis.type == "log"
    lo, hi = axis.range
    assert lo == pytest.approx(-hi) and hi > 0
    base = results[0].median_ms
    speedups = [base / r.median_ms for r in results]
    assert any(s != pytest.approx(1) for s in speedups)
    bars = [y for y in next(t for t in fig.data if t.name == "p20-p80 range").y if y is not None]
    for v in [*speedups, *bars]:
        assert lo < math.log10(v) < hi
    assert list(next(t for t in fig.data if t.name == "speedup").y) == pytest.approx(speedups)
    # 1× among the labelled ticks, the labels apart
    ticks = list(axis.tickvals)
    assert 1 in ticks
    logs = [math.log10(v) for v in ticks]
    assert min(b - a for a, b in itertools.pairwise(logs)) * _plot_px(fig) / (hi - lo) >= room


def _recorded(points):
    """A recorded set's rows: one configuration per (implementation, median ms)."""
    import pandas as pd

    keys = {"naive": "Naive PyTorch", "vectorized": "Optimized PyTorch", "triton": "Triton"}
    return pd.DataFrame({"configuration": [f"batch {i + 1} x 512" for i in range(len(points))],
                         "batch_size": [i + 1 for i in range(len(points))], "context_len": [512] * len(points),
                         "implementation": [keys[k] for k, _ in points], "key": [k for k, _ in points],
                         "gpu_time_ms": [float("nan")] * len(points), "median_ms": [ms for _, ms in points]})


#: Latencies (ms) spanning under a decade, one to two decades, and over two.
LATENCIES = {
    "under a decade": [("naive", 1.05), ("vectorized", 1.2)],
    "one to two decades": [("naive", 12.0), ("vectorized", 1.1), ("triton", 0.6)],
    "over two decades": [("naive", 40.0), ("vectorized", 1.4), ("triton", 0.012)],
}


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("chart", ["live", "recorded"])
@pytest.mark.parametrize("name", list(LATENCIES))
def test_latency_axis_labels_1_2_5_or_decades_written_by_format_number(name, chart, scale):
    """Issue 27 (round 4): the latency chart kept Plotly's own log labels where the
    data spanned under two decades ("2", "5" minor ticks, odd values). Its ticks are
    the run history's: 1, 2, 5 times a power of ten or whole decades, two at least,
    each label a line and a half of tick text from the next, written as
    formatting.format_number writes the value."""
    from explorer.bench.recorded_figures import recorded_latency_figure
    from explorer.formatting import format_number

    points = LATENCIES[name]
    with style.presentation(scale):
        if chart == "live":
            fig = bench_figures.latency_figure([_result(n, [ms * 0.98, ms, ms * 1.03]) for n, ms in points])
        else:
            fig = recorded_latency_figure(_recorded(points), gpu="NVIDIA H200", date="2026-11-29", layout="shuffled")
        room = tick_room_px()
    axis = fig.layout.yaxis
    assert axis.type == "log" and axis.tickmode == "array"
    ticks, text = list(axis.tickvals), list(axis.ticktext)
    assert len(ticks) >= 2 and text == [format_number(v) for v in ticks]
    lo, hi = axis.range
    assert all(lo <= math.log10(v) <= hi for v in ticks)
    mantissas = {round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6) for v in ticks}
    assert mantissas <= {1, 2, 5}
    logs = [math.log10(v) for v in ticks]
    assert min(b - a for a, b in itertools.pairwise(logs)) * _plot_px(fig) / (hi - lo) >= room
    ys = [y for t in fig.data for y in t.y if y is not None]
    assert lo < math.log10(min(ys)) and math.log10(max(ys)) < hi


def _hover_texts(trace) -> list[str]:
    """What each point of ``trace`` shows on hover, its template filled in as Plotly
    does for ``%{x}``, ``%{customdata}`` and ``%{customdata[i]}``; a placeholder with
    a d3 format (``%{y:,.3r}``) would be formatted by the browser, not here."""
    import re

    template = trace.hovertemplate
    assert not re.search(r"%\{[^}]*:", template), template  # no number formatted in the browser
    out = []
    for i, x in enumerate(trace.x):
        data = trace.customdata[i]
        text = template.replace("%{x}", str(x))
        text = re.sub(r"%\{customdata\[(\d)\]\}", lambda m, data=data: str(data[int(m.group(1))]), text)
        out.append(text.replace("%{customdata}", str(data)).replace("<extra></extra>", ""))
    return out


def test_benchmark_hovers_write_times_as_the_cards_do():
    """Issue 27 (round 4): the latency, run-history and recorded hovers formatted their
    numbers in the browser (d3 ",.3r": "0.00000000200" where a card writes "2.00e-9").
    Each point's hover now carries formatting.format_duration's text."""
    from explorer.bench.recorded_figures import recorded_latency_figure
    from explorer.formatting import format_duration

    tiny = [_result("naive", [2e-9, 2.1e-9, 2.2e-9], gpu=1.5e-9), _result("triton", [1234.0, 1250.0, 1300.0])]
    fig = bench_figures.latency_figure(tiny, unit="ms")
    box = fig.data[0]
    assert box.hoveron == "points"
    assert _hover_texts(box) == [f"Naive PyTorch<br>{format_duration(v, 'ms')}" for v in tiny[0].samples_ms]
    assert _hover_texts(box)[0] == "Naive PyTorch<br>2.00e-9 ms"
    assert _hover_texts(fig.data[1])[0] == "Triton<br>1,230 ms"
    gpu = next(t for t in fig.data if t.name == "GPU time (CUDA graph)")
    assert _hover_texts(gpu) == ["Naive PyTorch<br>GPU time 1.50e-9 ms"]
    history = bench_figures.history_figure([_entry(1, "B=1", tiny)], unit="ms")
    assert _hover_texts(history.data[0]) == ["Naive PyTorch<br>run #1: 2.10e-9 ms<br>B=1"]
    recorded = recorded_latency_figure(_recorded([("naive", 2e-9), ("triton", 1234.0)]), gpu="NVIDIA H200",
                                       date="2026-11-29", layout="shuffled")
    texts = [t for trace in recorded.data for t in _hover_texts(trace)]
    assert "recorded · Naive PyTorch<br>batch 1 x 512<br>call latency 2.00e-9 ms" in texts
    assert all("−" not in t for t in texts)  # the app's ASCII minus in its exponents
