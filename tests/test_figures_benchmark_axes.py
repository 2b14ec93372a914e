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
