"""Figures of benchmark results: latency, speedup, host overhead, bandwidth, accuracy and the run history."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from explorer.formatting import format_duration, format_speedup

from explorer import style
from explorer.bench import accuracy_figures
from explorer.bench import figures as bench_figures
from explorer.bench.view import RunEntry, percent


def _result(name, samples, gpu=None, abs_err=1e-4, rel_err=1e-3, passed=True):
    med = float(np.median(samples))
    return SimpleNamespace(
        name=name, label={"naive": "Naive PyTorch", "vectorized": "Optimized PyTorch", "triton": "Triton"}[name],
        samples_ms=samples, median_ms=med, p20_ms=min(samples), p80_ms=max(samples), gpu_time_ms=gpu,
        gbps=2.0 / med, gpu_gbps=None if gpu is None else 2.0 / gpu, bytes_moved=2_000_000,
        max_abs_err=abs_err, max_rel_err=rel_err, atol=2e-3, rtol=2e-3, passed=passed, device="cuda:0",
    )


RESULTS = [
    _result("naive", [10.0, 11.0, 12.0]),
    _result("vectorized", [1.0, 1.2, 1.1], gpu=0.5, abs_err=0.0),
    _result("triton", [0.2, 0.25, 0.3], gpu=0.05, abs_err=float("nan"), passed=False),
]


def test_latency_figure():
    fig = bench_figures.latency_figure(RESULTS)
    boxes = [t for t in fig.data if t.type == "box"]
    assert [t.name for t in boxes] == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(boxes[0].y) == [10.0, 11.0, 12.0]
    assert [t.marker.color for t in boxes] == [style.IMPL_COLORS[n] for n in ("naive", "vectorized", "triton")]
    gpu = next(t for t in fig.data if t.name == "GPU time (CUDA graph)")
    assert list(gpu.y) == [0.5, 0.05]
    assert fig.layout.yaxis.type == "log" and "ms" in fig.layout.yaxis.title.text


def _dots(fig):
    return next(t for t in fig.data if t.name == "speedup")


def _speedup_labels(fig) -> list[str]:
    """The speedup chart's labels, one per implementation, as read (line breaks and a
    hyphenated break joined)."""
    return [a.text.replace("-<br>", "").replace("<br>", " ") for a in fig.layout.annotations
            if a.name == "speedup label"]


def test_speedup_figure():
    fig = bench_figures.speedup_figure(RESULTS)
    dots = _dots(fig)
    assert list(dots.y) == pytest.approx([1.0, 10.0, 44.0])
    assert _speedup_labels(fig) == ["baseline", "10.0× faster", "44.0× faster"]
    assert "No naive" in bench_figures.speedup_figure(RESULTS[1:]).layout.annotations[0].text


def test_speedup_labels_say_what_the_cards_say():
    """Issue 27: the cards and the results table said "297× slower" where the chart
    labelled the same value "0.00336×". The chart's labels are the cards' words."""
    from explorer.bench import view

    results = [_result("naive", [1.0, 1.01, 1.02]), _result("vectorized", [0.5, 0.51, 0.52]),
               _result("triton", [297.0, 300.0, 303.0])]
    fig = bench_figures.speedup_figure(results)
    assert _speedup_labels(fig) == [c.delta for c in view.cards(results, "ms")]
    assert _speedup_labels(fig) == ["baseline", "1.98× faster", "297× slower"]
    assert not any(label.endswith("×") for label in _speedup_labels(fig))


def test_speedup_of_overlapping_ranges_says_indistinguishable_not_a_speedup():
    """Three noisy calls on a busy 2-core host ranked Optimized PyTorch "2.4× faster",
    then "1.1× slower": where the p20-p80 ranges overlap the chart gives no speedup."""
    results = [_result("naive", [10.0, 12.0, 14.0]), _result("vectorized", [9.0, 11.0, 13.0]),
               _result("triton", [2.0, 2.1, 2.2])]
    fig = bench_figures.speedup_figure(results)
    dots = _dots(fig)
    assert dots.y[1] == pytest.approx(12 / 11)
    assert _speedup_labels(fig)[1] == "indistinguishable" and "faster" not in dots.customdata[1]
    assert dots.customdata[1].startswith("indistinguishable from Naive PyTorch")
    assert dots.marker.symbol[1] != dots.marker.symbol[2]  # an open dot, not a filled one
    assert _speedup_labels(fig)[2] == f"{format_speedup(12 / 2.1)} faster" and dots.customdata[2].endswith(
        f"faster than Naive PyTorch<br>p20-p80 range: {format_speedup(10 / 2.2)} to {format_speedup(14 / 2.0)}")
    # each range bar: the baseline's p20 over this p80 to its p80 over this p20, across 1x when indistinguishable
    bars = next(t for t in fig.data if t.name == "p20-p80 range")
    assert list(bars.y[3:5]) == pytest.approx([10 / 13, 14 / 9]) and bars.y[3] < 1 < bars.y[4]
    assert list(bars.y[6:8]) == pytest.approx([10 / 2.2, 14 / 2.0]) and 1 < bars.y[6]
    assert fig.data.index(bars) < fig.data.index(dots)  # drawn under the dots


def test_bandwidth_figure_with_copy_bandwidth():
    fig = bench_figures.bandwidth_figure(RESULTS, copy_gbps=100.0)
    assert [t.name for t in fig.data] == ["from call latency", "from GPU time (CUDA graph)"]
    assert fig.data[1].y[0] is None
    # Each implementation's achieved bandwidth (from GPU time where measured) and its share, over the plot.
    labels = [a.text.replace("<br>", " ") for a in fig.layout.annotations if a.name == "bandwidth label"]
    assert labels == ["0.182 (0.182%)", "4.00 (4.00%)", "40.0 (40.0%)"]
    assert any(s.y0 == 100.0 for s in fig.layout.shapes)


def test_accuracy_figure_is_finite_and_marks_failures():
    fig = accuracy_figures.accuracy_figure(RESULTS)
    abs_bar, rel_bar = fig.data
    assert all(math.isfinite(v) and v > 0 for v in abs_bar.y)
    finite = [r.max_abs_err for r in RESULTS if math.isfinite(r.max_abs_err) and r.max_abs_err > 0]
    assert abs_bar.y[1] == pytest.approx(min(finite + [RESULTS[0].atol]) / 10)  # a decade under the rest
    assert abs_bar.customdata[1] == "0 (exact)" and abs_bar.text[1] == "0 (exact)"
    assert abs_bar.customdata[2] == "NaN/inf"
    texts = [a.text for a in fig.layout.annotations if a.yref == "y domain"]
    assert texts == [accuracy_figures.PASS_MARK, accuracy_figures.PASS_MARK, accuracy_figures.FAIL_MARK]
    assert any(s.y0 == 2e-3 for s in fig.layout.shapes)
    assert fig.layout.yaxis.type == "log"


def _entry(run, label, results, change=""):
    return RunEntry(run=run, change=change, label=label, config=None, warmup=0, iters=3, results=results,
                    copy_gbps=None)


def test_overhead_figure_splits_each_call_into_gpu_time_and_host_overhead():
    fig = bench_figures.overhead_figure(RESULTS, unit="ms")
    gpu, host = fig.data
    assert (gpu.name, host.name) == ("GPU time", "host overhead") and fig.layout.barmode == "stack"
    # Naive PyTorch has no GPU time: no bars, said so; Optimized: 0.5 of a 1.1 ms call on the GPU
    assert gpu.y[0] is None and host.y[0] is None
    assert gpu.y[1] == pytest.approx(100 * 0.5 / 1.1) and host.y[1] == pytest.approx(100 * 0.6 / 1.1)
    assert gpu.y[2] + host.y[2] == pytest.approx(100)
    assert (gpu.text[1], host.text[1]) == (format_duration(0.5, "ms"), format_duration(0.6, "ms"))
    marks = [a.text for a in fig.layout.annotations if a.x in [r.label for r in RESULTS]]
    assert marks == ["no GPU<br>time", f"<b>{percent(0.6 / 1.1)}</b>", f"<b>{percent(0.2 / 0.25)}</b>"]
    assert fig.layout.yaxis.type != "log"


def test_history_figure_groups_runs():
    history = [_entry(1, "B=1", RESULTS), _entry(2, "B=2", RESULTS[1:])]
    fig = bench_figures.history_figure(history)
    assert [t.name for t in fig.data] == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(fig.data[0].x) == ["#1", "#2"] and fig.data[0].y[1] is None
    assert fig.data[2].marker.color == style.IMPL_COLORS["triton"]


def _accuracy_result(name, label, abs_err, rel_err, ratio, passed=True):
    return SimpleNamespace(name=name, label=label, max_abs_err=abs_err, max_rel_err=rel_err, max_tol_ratio=ratio,
                           atol=1e-3, rtol=1e-3, passed=passed)


def test_accuracy_plots_the_tolerance_ratio_not_the_relative_error():
    results = [_accuracy_result("naive", "Naive", 2e-4, 9.1, 0.21),
               _accuracy_result("triton", "Triton", 3e-4, 8.7, 0.3),
               _accuracy_result("vectorized", "Optimized", 0.0, 0.0, 0.0)]
    fig = accuracy_figures.accuracy_figure(results)
    abs_bar, ratio_bar = fig.data
    # Not the relative errors 9.1 and 8.7; the exact result a decade under the smallest bar or line.
    assert ratio_bar.y[:2] == (0.21, 0.3) and ratio_bar.y[2] == pytest.approx(0.021)
    assert abs_bar.y[:2] == (2e-4, 3e-4) and abs_bar.y[2] == pytest.approx(2e-5)
    assert ratio_bar.text[2] == abs_bar.text[2] == "0 (exact)"
    assert ratio_bar.yaxis == "y" and abs_bar.yaxis == "y2"
    assert any(s.y0 == 1 and s.yref == "y" for s in fig.layout.shapes)  # the tolerance
    assert any(s.y0 == 1e-3 and s.yref == "y2" for s in fig.layout.shapes)  # atol
    assert "max |out − ref| = " in ratio_bar.hovertemplate  # the absolute error stays in view
    assert fig.layout.yaxis.range[1] > 0  # the tolerance line is on the chart
    assert not any("rel" in (t.name or "") for t in fig.data)


def test_accuracy_tolerance_lines_wear_no_implementations_colour():
    """Review at 1280x720 (issue 27): the dashed tolerance line, the dotted atol line
    and their labels were red, the colour of Naive PyTorch's dots beside them. Each
    colour on the chart means one thing: the lines and labels take one colour that
    no implementation (nor pass/fail) uses."""
    results = [_accuracy_result("naive", "Naive PyTorch", 2e-4, 9.1, 0.21),
               _accuracy_result("triton", "Triton", 3e-4, 8.7, 0.3)]
    fig = accuracy_figures.accuracy_figure(results)
    lines = [s for s in fig.layout.shapes if s.line.dash in ("dash", "dot")]
    assert {(s.yref, s.line.dash) for s in lines} == {("y", "dash"), ("y2", "dot")}
    labels = [a for a in fig.layout.annotations if a.text.startswith(("tolerance", "atol ="))]
    assert len(labels) == 2
    colours = {s.line.color for s in lines} | {a.font.color for a in labels}
    assert len(colours) == 1
    taken = {*style.IMPL_COLORS.values(), style.PASS_COLOR, style.FAIL_COLOR}
    taken |= {c for t in fig.data for c in np.atleast_1d(t.marker.line.color)}
    assert not colours & taken, colours


def test_accuracy_without_a_tolerance_ratio_bounds_it_by_atol():
    result = SimpleNamespace(name="triton", label="Triton", max_abs_err=5e-4, max_rel_err=3.0, atol=1e-3,
                             rtol=1e-3, passed=True)
    assert accuracy_figures.accuracy_figure([result]).data[1].y[0] == pytest.approx(0.5)


def test_latency_labels_use_the_axis_unit():
    results = [SimpleNamespace(name=n, label=n, samples_ms=s, median_ms=float(np.median(s)), p80_ms=max(s),
                               gpu_time_ms=None, device="cuda:0")
               for n, s in (("naive", [1.8, 2.0, 2.2]), ("triton", [0.18, 0.1849, 0.19]))]
    fig = bench_figures.latency_figure(results)
    labels = [a.text for a in fig.layout.annotations]
    assert labels == ["<b>2.00 ms</b>", "<b>0.185 ms</b>"]
    assert "ms" in fig.layout.yaxis.title.text and not any("µs" in t for t in labels)


def test_accuracy_of_an_all_exact_run_spans_a_few_decades():
    """An all-empty batch is exact everywhere: the panels must not stretch from 1e-12
    to 1 with a label per decade."""
    results = [_accuracy_result("naive", "Naive", 0.0, 0.0, 0.0), _accuracy_result("triton", "Triton", 0.0, 0.0, 0.0)]
    fig = accuracy_figures.accuracy_figure(results)
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):
        lo, hi = axis.range
        assert hi - lo <= 4
        assert (hi - lo) / (axis.dtick or 1) <= 6
    assert all(t == "0 (exact)" for bar in fig.data for t in bar.text)


FOUR = [
    SimpleNamespace(**{**vars(_result("naive", [510.0, 518.6, 530.0], abs_err=2.4e-4)), "max_tol_ratio": 0.08}),
    SimpleNamespace(**{**vars(_result("vectorized", [0.05, 0.0517, 0.06], abs_err=0.0)), "max_tol_ratio": 0.0}),
    SimpleNamespace(**{**vars(_result("triton", [36.0, 36.8, 37.0], gpu=30.0)), "max_tol_ratio": 0.09}),
    SimpleNamespace(**{**vars(_result("naive", [46.0, 46.9, 47.0])), "name": "triton_simple",
                       "label": "Triton (simple grid)", "max_tol_ratio": 0.079}),
]


def _benchmark_figures(results):
    return {
        "latency": bench_figures.latency_figure(results),
        "speedup": bench_figures.speedup_figure(results),
        "bandwidth": bench_figures.bandwidth_figure(results, copy_gbps=4000.0),
        "accuracy": accuracy_figures.accuracy_figure(results),
        "overhead": bench_figures.overhead_figure(results),
        "history": bench_figures.history_figure([_entry(1, "B=2", results)]),
    }


def _axis(fig, trace, letter="y"):
    ref = getattr(trace, f"{letter}axis", None) or letter
    return fig.layout[ref.replace(letter, f"{letter}axis", 1)]


@pytest.mark.parametrize("name", ["latency", "speedup", "overhead", "bandwidth", "accuracy", "history"])
def test_no_bars_on_a_log_axis(name):
    """A bar on a log axis starts at an arbitrary floor: its length means nothing,
    and an exact zero drew as a bar as tall as the rest."""
    fig = _benchmark_figures(FOUR)[name]
    for trace in fig.data:
        if trace.type == "bar":
            assert _axis(fig, trace).type != "log", f"{name}: bars {trace.name!r} on a log axis"


def test_exact_zero_error_sits_on_the_axis_floor_labelled():
    fig = accuracy_figures.accuracy_figure(FOUR)
    for trace in fig.data:
        axis = _axis(fig, trace)
        assert trace.type == "scatter" and "markers" in trace.mode
        i = 1  # Optimized PyTorch: error 0
        assert trace.y[i] == pytest.approx(10 ** axis.range[0])  # on the floor, not a normal height
        assert trace.text[i] == "0 (exact)" and trace.marker.symbol[i] == "circle-open"
        others = [y for j, y in enumerate(trace.y) if j != i]
        assert min(others) >= 10 ** (axis.range[0] + 1) * 0.999  # a decade above the floor
        assert [t for j, t in enumerate(trace.text) if j != i] == ["", "", ""]


def test_speedup_on_a_log_axis_is_a_dot_on_a_stem_from_parity():
    fig = bench_figures.speedup_figure(FOUR)
    dots = _dots(fig)
    assert fig.layout.yaxis.type == "log" and dots.type == "scatter"
    speed = np.array(dots.y, dtype=float)
    # Stems run from each dot to the 1x line, down from a speedup and up from a slowdown.
    assert np.allclose(speed - np.array(dots.error_y.arrayminus), np.where(speed > 1, 1, speed))
    assert np.allclose(speed + np.array(dots.error_y.array), np.where(speed < 1, 1, speed))
    assert dots.customdata[2].split("<br>")[0].endswith("faster than Naive PyTorch")


@pytest.mark.parametrize("name", ["latency", "speedup", "overhead", "bandwidth", "accuracy"])
def test_four_implementation_labels_stay_horizontal_and_whole(name):
    """Rotated labels of four implementations ran off a half-page chart at 1280 px
    (Chromium drew it 394 px wide: 314 px of plot, 78 px a category, 12 px text at
    6.6 px a character, LABEL_CHAR_WIDTH)."""
    fig = _benchmark_figures(FOUR)[name]
    axis = fig.layout.xaxis2 if name == "accuracy" else fig.layout.xaxis
    assert axis.tickangle == 0 and axis.automargin is True
    assert list(axis.tickvals) == [r.label for r in FOUR]
    lines = [line for text in axis.ticktext for line in text.split("<br>")]
    assert max(len(line) for line in lines) * style.LABEL_CHAR_WIDTH * 12 <= 314 / 4
    assert [" ".join(t.split("<br>")) for t in axis.ticktext] == [r.label for r in FOUR]  # every word, in order


def test_durations_in_figures_follow_the_one_rule():
    """Hovers wrote "518.6 ms" (d3's .4g) where the labels and cards write three
    significant digits: every duration a figure writes goes through format_ms."""
    import re

    from explorer import formatting

    figs = list(_benchmark_figures(FOUR).values())
    for fig in figs:
        for trace in fig.data:
            for fmt in re.findall(r"%\{[^}:]*:([^}]*)\}(?:–%\{[^}]*\})? ms", trace.hovertemplate or ""):
                assert fmt == formatting.MS_D3, trace.hovertemplate
    latency = figs[0]
    assert "<b>519 ms</b>" in [a.text for a in latency.layout.annotations]
    assert "519 ms" in figs[-1].data[0].text


def test_accuracy_shows_the_fp8_quantization_error_as_a_labelled_line_without_pass_fail():
    results = [_result("naive", [1.0], abs_err=1e-4), _result("triton", [0.1], abs_err=2e-4)]
    plain = accuracy_figures.accuracy_figure(results)
    assert len(plain.data) == 2  # a 16-bit cache: as before
    fig = accuracy_figures.accuracy_figure(results, quantization_error=0.03)
    assert len(fig.data) == 3
    line = fig.data[2]
    assert line.name == "fp8 quantization error (vs unquantized cache)" and line.yaxis == "y2"
    assert list(line.y) == [0.03, 0.03] and list(line.x) == ["Naive PyTorch", "Triton"]
    assert "fp8 quantization error: 0.0300<br>(vs unquantized cache)" in [a.text for a in fig.layout.annotations]
    assert fig.layout.yaxis2.range[1] > math.log10(0.03)  # on the axis
    marks = [a.text for a in fig.layout.annotations if a.yref == "y domain"]
    assert marks == [accuracy_figures.PASS_MARK] * 2  # pass/fail is the kernels' only


def _four_results():
    results = [_result(name, [1.0]) for name in ("naive", "vectorized", "triton", "triton")]
    results[3].name, results[3].label = "triton_simple", "Triton (simple grid)"
    return results


def test_error_chart_at_presentation_size_keeps_its_labels_apart():
    """Review at 1280x720 in presentation mode: the quantization line's label ran
    left over the "abs error" axis, the title stayed small while the others grew,
    and four "✓ pass" marks touched."""
    from explorer import style

    with style.presentation():
        fig = accuracy_figures.accuracy_figure(_four_results(), quantization_error=0.022)
    label = next(a for a in fig.layout.annotations if (a.text or "").startswith("fp8 quantization error"))
    assert label.xref == "x2 domain" and label.x == 1 and label.xanchor == "right"  # inside, from the right
    longest = max(len(line) for line in label.text.split("<br>"))
    # Within the plot area of a half-page chart at 1280 px (about 280 px at this size;
    # Chromium drew "fp8 quantization error: 0.022" at 18 px in about 225 px).
    with style.presentation():
        assert longest * 0.5 * label.font.size <= style.plot_width_px(style.HALF_PLOT_WIDTH_PX), label.text
    assert fig.layout.title.font.size >= 16 * 1.3  # grows like the other charts' titles
    marks = [a.text for a in fig.layout.annotations if a.yref == "y domain"]
    assert marks == [accuracy_figures.PASS_MARK] * 4
    # the same marks with two implementations as with four (review: "✓ pass" with three, "✓" with four)
    few = accuracy_figures.accuracy_figure(RESULTS[:2])
    assert [a.text for a in few.layout.annotations if a.yref == "y domain"] == [accuracy_figures.PASS_MARK] * 2


@pytest.mark.parametrize("make", [bench_figures.latency_figure, bench_figures.bandwidth_figure,
                                  bench_figures.speedup_figure, accuracy_figures.accuracy_figure])
@pytest.mark.parametrize("count", [4, 5])
def test_implementation_names_stay_upright_in_presentation_mode(make, count):
    """ "Naive PyTorch", "Optimized PyTorch", ... wrapped side by side at
    presentation size ran together ("NaiveOptimizedTriton") at 1280 px; then they
    were tilted 45 degrees (review: four charts of five implementations). Upright
    now, every other name a row lower, so each has two categories' width: 274 px
    of plot at presentation size, "Optimized" is 9 x 0.55 x 18 = 89 px."""
    results = _four_results()
    if count == 5:
        results = [*results, _result("triton", [1.0])]
        results[4].name, results[4].label = "triton_prefix", "Triton (prefix-aware)"
    labels = [r.label for r in results]
    plain = make(results)
    axis = plain.layout.xaxis2 if make is accuracy_figures.accuracy_figure else plain.layout.xaxis
    assert axis.tickangle == 0
    with style.presentation():
        big = make(results)
        share = style.plot_width_px(style.HALF_PLOT_WIDTH_PX) / count
    axis = big.layout.xaxis2 if make is accuracy_figures.accuracy_figure else big.layout.xaxis
    assert axis.tickangle == 0 and list(axis.tickvals) == labels
    text = list(axis.ticktext)
    depth = max(t.count("<br>") + 1 for t in text[::2])
    assert all(t.startswith("<br>" * depth) for t in text[1::2])  # the second row under the first
    assert not any(t.startswith("<br>") for t in text[::2])
    assert [t.replace("<br>", " ").replace("- ", "-").split() for t in text] == [label.split() for label in labels]
    # A name's lines fit two shares.
    lines = [line for t in text for line in t.split("<br>") if line]
    assert max(len(line) for line in lines) * style.LABEL_CHAR_WIDTH * 18 <= 2 * share


#: Widths of Arial's (Liberation Sans's, Chromium's here) characters as a share of
#: the font size, for the characters the value labels write; others 0.556 (a digit).
_ARIAL = {".": 0.278, ",": 0.278, " ": 0.278, "(": 0.333, ")": 0.333, "-": 0.333, "%": 0.889, "×": 0.584,
          "m": 0.833, "s": 0.5, "i": 0.222, "l": 0.222, "t": 0.278, "µ": 0.577, "w": 0.722, "f": 0.278,
          "r": 0.333}


def _arial_px(text: str, size: float) -> float:
    import re

    return sum(_ARIAL.get(c, 0.556) for c in re.sub(r"<[^>]*>", "", text)) * size


def _five_gpu_results():
    """Five implementations on a GPU, as the review saw them: a 40 ms loop, the rest
    around 1 ms, two of them alike, one indistinguishable from the baseline."""
    rows = [("naive", [40.0, 41.0, 44.0], None), ("vectorized", [39.0, 42.0, 45.0], 1.4),
            ("triton", [0.75, 0.76, 0.78], 0.74), ("triton_simple", [0.0019, 0.00192, 0.00195], 0.0019),
            ("triton_prefix", [0.74, 0.76, 0.79], 0.73)]
    results = []
    for name, samples, gpu in rows:
        r = _result("triton" if name.startswith("triton_") else name, samples, gpu=gpu)
        r.name = name
        r.label = {"triton_simple": "Triton (simple grid)", "triton_prefix": "Triton (prefix-aware)"}.get(name, r.label)
        results.append(r)
    return results


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("name, label, count", [("latency", "median label", 5), ("speedup", "speedup label", 5),
                                                ("overhead", "host share label", 4),
                                                ("bandwidth", "bandwidth label", 5)])
def test_value_labels_of_five_implementations_stay_apart_and_on_the_figure(name, label, count, scale):
    """Review at 1280x720 in presentation mode: the benchmark's labels touched and
    overlapped, five of them at 18 px beside bars and dots 55 px apart. They are
    written in a row over the plot, staggered where one is wider than its
    implementation's share: measured in Arial's widths, no two touch (half an em
    apart at least), each stays on the half-page figure, none is smaller than the
    mode's cell text."""
    results = _five_gpu_results()
    with style.presentation(scale):
        fig = _benchmark_figures(results)[name]
        plot = style.plot_width_px(style.HALF_PLOT_WIDTH_PX)
        floor = style.font_px("cell")
    categories = [r.label for r in results]
    notes = [a for a in fig.layout.annotations if a.name == label]
    assert len(notes) == count
    share = plot / len(categories)
    boxes = []
    for a in notes:
        size = a.font.size
        assert size >= floor and a.yref == "paper" and a.y == 1 and a.yanchor == "bottom"
        lines = a.text.split("<br>")
        width = max(_arial_px(line, size) for line in lines)
        centre = (categories.index(a.x) + 0.5) * share
        boxes.append((centre - width / 2, centre + width / 2, a.yshift, a.yshift + len(lines) * style.LINE_HEIGHT * size,
                      size))
        assert centre - width / 2 >= -fig.layout.margin.l and centre + width / 2 <= plot + fig.layout.margin.r, a.text
        # The row is held over the plot: the top margin holds the title block and the row.
        assert fig.layout.margin.t >= boxes[-1][3]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = a[1] + 0.5 * a[4] <= b[0] or b[1] + 0.5 * b[4] <= a[0]
            assert apart or a[3] <= b[2] or b[3] <= a[2], (name, scale, a, b)


def test_benchmark_axes_and_notes_write_thousands_as_the_tables_do():
    """Review at 1280x720 (issue 27): the history chart's axis read "1000" beside the
    tables' "2,990", and the recorded note "4127 to 4255 GB/s" beside "4,240 GB/s".
    The page's time and bandwidth axes take the one tick format with thousands
    separators (formatting.LOG_TICK_D3) and the notes' bandwidths are grouped."""
    import pandas as pd

    from explorer import formatting
    from explorer.bench.recorded_figures import recorded_latency_figure

    history = [_entry(1, "B=1", RESULTS), _entry(2, "B=2", RESULTS)]
    rows = pd.DataFrame({"configuration": ["4 x 2048", "4 x 2048"], "batch_size": [4, 4], "context_len": [2048, 2048],
                         "implementation": ["Triton", "Naive PyTorch"],
                         "key": ["triton", "naive"], "gpu_time_ms": [0.02, float("nan")], "median_ms": [0.05, 1.2]})
    figures = {
        "latency": bench_figures.latency_figure(RESULTS),
        "bandwidth": bench_figures.bandwidth_figure(RESULTS, copy_gbps=4240.0),
        "history": bench_figures.history_figure(history),
        "recorded": recorded_latency_figure(rows, gpu="NVIDIA H200", date="2026-11-29", layout="shuffled"),
    }
    for name, fig in figures.items():
        assert fig.layout.yaxis.tickformat == formatting.LOG_TICK_D3, name
    note = "measured the same day in peers_v7.txt; other runs that day measured 4127 to 4255 GB/s"
    assert formatting.group_prose_bandwidths(note) == note.replace("4127 to 4255", "4,130 to 4,260")


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_accuracy_quantization_label_stands_clear_above_its_line(scale):
    """Issue 27: the fp8 quantization label sat on its own dashed line. Its bottom
    stands above the line by half the line's end marks and a gap scaled to its font."""
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(_four_results(), quantization_error=0.0522)
        label = next(a for a in fig.layout.annotations if (a.text or "").startswith("fp8 quantization error"))
        line = next(d for d in fig.data if d.name.startswith("fp8 quantization error"))
        assert label.yanchor == "bottom" and label.y == pytest.approx(math.log10(line.y[0]))
        assert label.yshift >= line.marker.size / 2 * style.scaled(1) and label.yshift > style.font_px("label") * 0.25
