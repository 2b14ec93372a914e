"""Figures of parameter sweeps: latency, bandwidth, speedup and ratios along the swept axis, with skipped points and several sources."""

import itertools
import math

import pandas as pd
import pytest

from explorer.formatting import axis_value_texts

from explorer import style
from explorer.sweep import figures as sweep_figures
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from helpers import SWEEP_BASE as BASE
from helpers import job_rows


def traces(fig, **meta):
    return [t for t in fig.data if t.meta and all(t.meta.get(k) == v for k, v in meta.items())]


def frame(copy=None, source="this session", **kw):
    return sweep_runs.rows_frame(job_rows(copy=copy, **kw), source)


def test_sweep_latency_draws_timed_and_skipped_points():
    fig = sweep_figures.sweep_latency_figure(frame())
    (triton,) = traces(fig, implementation="triton", kind="timed")
    # x is dodged beside the other implementations (test_sweep_latency_dodges_...); the true value is customdata's last
    assert list(triton.customdata[:, 2]) == [16, 32, 64] and list(triton.y) == pytest.approx([0.1] * 3)
    assert triton.line.color == style.IMPL_COLORS["triton"]
    assert list(triton.error_y.array) == pytest.approx([0.01] * 3)  # p80 - median
    (naive,) = traces(fig, implementation="naive", kind="timed")
    assert list(naive.customdata[:, 2]) == [16, 32]
    (skipped,) = traces(fig, implementation="naive", kind="skipped")
    assert list(skipped.customdata[:, 1]) == [64] and list(skipped.y) == pytest.approx([0.64])  # at the predicted time
    assert skipped.marker.symbol == sweep_figures.SKIPPED_SYMBOL and list(skipped.text) == ["skipped"]
    assert "over budget" in skipped.customdata[0][0]
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == sweep_grid.AXES["context_len"]
    assert list(fig.layout.xaxis.tickvals) == [16, 32, 64]


def test_sweep_latency_axes_are_linear_when_the_range_is_narrow():
    fig = sweep_figures.sweep_latency_figure(frame(values=(16, 20), skip_from=1000))
    assert fig.layout.xaxis.type == "linear" and fig.layout.yaxis.type == "linear"


def test_two_sources_are_told_apart_by_line_style():
    both = pd.concat([frame(), frame(source="uploaded: h200.csv")], ignore_index=True)
    fig = sweep_figures.sweep_latency_figure(both)
    mine, theirs = traces(fig, implementation="triton", kind="timed")
    assert (mine.line.dash, theirs.line.dash) == ("solid", "dash")
    assert theirs.name == "Triton · uploaded: h200.csv"


def test_sweep_bandwidth_uses_gpu_time_and_draws_the_ceiling():
    fig = sweep_figures.sweep_bandwidth_figure(frame(copy=4.0))
    (triton,) = traces(fig, implementation="triton")
    assert list(triton.y) == pytest.approx([1e-3 / 0.05] * 3)  # gpu_gbps, not the call-latency gbps
    assert list(triton.customdata) == pytest.approx([100 * 0.02 / 4.0] * 3)
    assert [s.y0 for s in fig.layout.shapes] == [4.0]
    assert "ceiling" in fig.layout.annotations[0].text


def test_sweep_bandwidth_on_the_cpu_says_there_is_no_ceiling():
    fig = sweep_figures.sweep_bandwidth_figure(frame())
    (triton,) = traces(fig, implementation="triton")
    assert list(triton.y) == pytest.approx([1e-3 / 0.1] * 3)
    assert not fig.layout.shapes
    assert any("No ceiling on the CPU" in a.text for a in fig.layout.annotations)


def test_sweep_speedup_against_triton():
    fig = sweep_figures.sweep_speedup_figure(frame())
    (vec,) = traces(fig, implementation="vectorized", kind="timed")
    assert list(vec.y) == pytest.approx([5.0] * 3)
    (naive,) = traces(fig, implementation="naive", kind="timed")
    assert list(naive.y) == pytest.approx([1.6, 3.2])
    (skipped,) = traces(fig, implementation="naive", kind="skipped")
    assert list(skipped.x) == [64] and list(skipped.y) == pytest.approx([6.4])
    assert not traces(fig, implementation="triton")
    empty = sweep_figures.sweep_speedup_figure(frame()[lambda f: f["implementation"] != "triton"])
    assert "No Triton result" in empty.layout.annotations[0].text


def test_sweep_ratio_of_two_sources():
    other = frame(source="uploaded")
    other["median_ms"] = other["median_ms"] * 2
    fig = sweep_figures.sweep_ratio_figure(pd.concat([frame(), other], ignore_index=True), "uploaded", "this session")
    (triton,) = [t for t in fig.data if t.meta and t.meta["implementation"] == "triton"]
    assert list(triton.y) == pytest.approx([2.0] * 3)
    (naive,) = [t for t in fig.data if t.meta and t.meta["implementation"] == "naive"]
    assert list(naive.x) == [16, 32]  # only points both timed
    none = sweep_figures.sweep_ratio_figure(frame(), "uploaded", "this session")
    assert "share no measured point" in none.layout.annotations[0].text


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("ratios", [(5.3, 1.45, 0.4), (2.0, 0.15, 0.9), (40.0, 3.0, 0.8), (12.0, 1.2, 1.0)])
def test_ratio_ticks_stay_apart_on_a_short_log_axis(scale, ratios):
    """Issue 27, the fp8-against-float16 chart: its log axis spans under two decades,
    where Plotly's own ticks label 2, 3, ... 9 of each decade: 0.5 to 0.9 piled under
    1, and 5 to 10 at the top. The figure sets its ticks: each inside the axis'
    range, labelled, 1 among them, and neighbours at least a line of tick text apart
    on the plot's height (its height less its margins, as drawn)."""
    from explorer.formatting import format_number

    fast = frame(source="fp8 e4m3")
    for name, ratio in zip(("naive", "vectorized", "triton"), ratios):
        fast.loc[fast["implementation"] == name, "median_ms"] *= ratio
    both = pd.concat([frame(source="float16"), fast], ignore_index=True)
    with style.presentation(scale):
        fig = sweep_figures.sweep_ratio_figure(both, "fp8 e4m3", "float16", title="fp8 e4m3 cache against float16")
        tick_px = style.font_px("tick")
    axis = fig.layout.yaxis
    assert axis.type == "log"
    lo, hi = axis.range
    values = list(axis.tickvals)
    assert len(values) >= 2 and 1 in values
    assert all(lo <= math.log10(v) <= hi for v in values)
    assert list(axis.ticktext) == [format_number(v) for v in values]
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    gaps = [(math.log10(b) - math.log10(a)) / (hi - lo) * plot_px for a, b in itertools.pairwise(values)]
    assert min(gaps) >= style.LINE_HEIGHT * tick_px, (values, gaps)


def test_empty_sweep_figures():
    for make in (sweep_figures.sweep_latency_figure, sweep_figures.sweep_bandwidth_figure):
        assert "No points" in make(frame().iloc[:0]).layout.annotations[0].text


def test_latency_hover_writes_durations_by_the_one_rule():
    """The hover wrote "%{y:.4g} ms" ("518.6 ms") where the app writes three significant digits."""
    from explorer.formatting import MS_D3

    fig = sweep_figures.sweep_latency_figure(frame())
    (triton,) = traces(fig, implementation="triton", kind="timed")
    assert f"median %{{y:{MS_D3}}} ms" in triton.hovertemplate
    assert f"%{{customdata[0]:{MS_D3}}}–%{{customdata[1]:{MS_D3}}} ms" in triton.hovertemplate


def test_a_sweep_comparing_caches_draws_one_line_style_per_cache():
    half = frame(copy=4.0)
    fp8 = half.assign(kv_dtype="float8_e4m3fn", median_ms=half["median_ms"] / 2)
    both = pd.concat([half, fp8], ignore_index=True)
    fig = sweep_figures.sweep_latency_figure(both)
    mine, theirs = traces(fig, implementation="triton", kind="timed")
    assert (mine.name, theirs.name) == ("Triton · float16", "Triton · fp8 e4m3")
    assert (mine.line.dash, theirs.line.dash) == ("solid", "dash")
    assert list(theirs.y) == pytest.approx([0.05] * 3)
    assert "line style = KV cache" in fig.layout.title.subtitle.text
    bandwidth = sweep_figures.sweep_bandwidth_figure(both)
    assert len(traces(bandwidth, implementation="triton")) == 2
    assert [s.y0 for s in bandwidth.layout.shapes] == [4.0]  # one device, one ceiling


def _two_sources_two_caches():
    """An upload of a sweep comparing caches, beside this session's: 4 line styles."""
    parts = []
    for source in ("this session", "uploaded: sweep_context_len.csv"):
        for kv in ("float16", "float8_e5m2"):
            parts.append(frame(source=source, skip_from=1000).assign(kv_dtype=kv))
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("make", [sweep_figures.sweep_latency_figure, sweep_figures.sweep_bandwidth_figure,
                                  sweep_figures.sweep_speedup_figure])
def test_every_legend_entry_has_its_row_and_the_plot_keeps_its_height(make, scale):
    """Review at 1280x720 in presentation mode: three legend entries took three rows
    the figure had no room for, and Plotly squeezed the plot to fit them. The legend
    is a grid of equal columns (Plotly's rows known when the figure is built), the
    bottom margin holds its rows and the x axis, and the figure grows by them: the
    plot area is the same whatever the legend."""
    from explorer.legend_layout import axis_block_px, legend_grid

    above = 26 if make is sweep_figures.sweep_bandwidth_figure else 0  # "No ceiling on the CPU" over the plot
    for rows in (frame(skip_from=1000), frame(), _two_sources_two_caches()):
        with style.presentation(scale):
            fig = make(rows)
            names = [t.name for t in fig.data if t.showlegend is not False and t.name]
            grid, axis = legend_grid(names), axis_block_px()
        legend = fig.layout.legend
        assert (legend.orientation, legend.traceorder, legend.entrywidthmode) == ("h", "normal", "pixels")
        assert legend.entrywidth >= grid.text_px  # no entry's text runs into the next column
        assert grid.columns * grid.rows >= len(names) > grid.columns * (grid.rows - 1)
        assert fig.layout.margin.b >= grid.height_px + axis
        # The plot area apply_style gives a 440 px figure with this subtitle, at this scale.
        with style.presentation(scale):
            plot = style.plot_area_height(440, fig.layout.title.subtitle.text.replace("<br>", " "), above)
        assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b == pytest.approx(plot, abs=1.5)


def test_legend_grid_follows_plotlys_rows():
    """Plotly wraps a horizontal legend's row once the next entry (text, a 40 px
    symbol, a 5 px gap) would reach the plot's right edge."""
    from explorer.legend_layout import legend_grid

    three = ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    with style.presentation():
        assert (legend_grid(three).columns, legend_grid(three).rows) == (1, 3)
    assert (legend_grid(["Triton", "Naive"]).columns, legend_grid(["Triton", "Naive"]).rows) == (2, 1)
    wide = legend_grid(three, plot_width=2000)
    assert (wide.columns, wide.rows) == (3, 1)
    assert legend_grid([]).rows == 0 and legend_grid([]).height_px == 0


def test_two_sources_keep_legend_entries_and_ceiling_labels_short():
    import pandas as pd

    from explorer.sweep.figures import sweep_bandwidth_figure, sweep_latency_figure

    base = dict(axis="context_len", label="", p20_ms=1.0, p80_ms=1.0, gpu_time_ms=float("nan"), gbps=100.0,
                gpu_gbps=float("nan"), copy_gbps=4238.9, predicted_ms=float("nan"), note="",
                device_name="NVIDIA H200", kv_dtype="float16")
    frame = pd.DataFrame([
        {**base, "source": src, "value": v, "implementation": impl, "status": st, "median_ms": 1.0,
         "predicted_ms": 9.0}
        for src in ("this session", "recorded") for v in (512, 2048)
        for impl, st in (("naive", "skipped"), ("triton", "ok"))])
    lat = sweep_latency_figure(frame, note="dashed: recorded on NVIDIA H200")
    assert "recorded on NVIDIA H200" in lat.layout.title.subtitle.text
    assert "Naive PyTorch: skipped · recorded" in [t.name for t in lat.data]
    bw = sweep_bandwidth_figure(frame)
    labels = [a.text for a in bw.layout.annotations]
    assert "copy ceiling 4,240 GB/s · recorded" in labels and all(len(t) <= 40 for t in labels)


def _limit_lines(fig):
    shapes = [s for s in fig.layout.shapes if s.name == "window limit"]
    notes = [a for a in fig.layout.annotations if a.name == "window limit"]
    return shapes, notes


@pytest.mark.parametrize("make", [sweep_figures.sweep_latency_figure, sweep_figures.sweep_bandwidth_figure,
                                  sweep_figures.sweep_speedup_figure])
def test_a_window_is_a_dashed_line_on_the_context_axis(make):
    windowed = sweep_runs.rows_frame(job_rows(base=BASE.with_(window=32)), "me")
    (line,), (note,) = _limit_lines(make(windowed))
    assert (line.x0, line.x1, line.yref, line.line.dash) == (32, 32, "paper", "dash")
    assert note.text == "window 32"
    assert note.x == pytest.approx(math.log10(32))  # the x axis is log: annotations sit at the log
    assert _limit_lines(make(frame())) == ([], [])  # no window, no line


def test_the_context_is_a_dashed_line_on_the_window_axis():
    rows = job_rows(axis="window", values=(16, 37, 74), skip_from=1000)
    (line,), (note,) = _limit_lines(sweep_figures.sweep_latency_figure(sweep_runs.rows_frame(rows, "me")))
    assert (line.x0, line.x1, line.line.dash, note.text) == (37, 37, "dash", "context 37")
    ragged = job_rows(axis="window", values=(16, 74), base=BASE.with_(context_lens=(20, 50)))
    (_,), (note,) = _limit_lines(sweep_figures.sweep_latency_figure(sweep_runs.rows_frame(ragged, "me")))
    assert note.text == "longest context 50"
    # outside the values swept there is nothing to mark
    short = job_rows(axis="window", values=(4, 8), skip_from=1000)
    assert sweep_figures.window_limit(sweep_runs.rows_frame(short, "me")) is None
    narrow = sweep_runs.rows_frame(job_rows(axis="window", values=(30, 40), skip_from=1000), "me")
    fig = sweep_figures.sweep_latency_figure(narrow)
    assert fig.layout.xaxis.type == "linear" and _limit_lines(fig)[1][0].x == 37  # on a linear axis, the value


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_log_axes_write_one_tick_style(scale):
    """Review: a log axis read "100μ" under "0.001" (Plotly's own labels: SI prefixes
    past a thousand and under a thousandth, decimals between). Every log axis of the
    sweep charts writes its ticks in one format, LOG_TICK_D3 (``0.0001``, ``10,000``);
    an x axis of up to 16 values names each ("4k")."""
    from explorer.formatting import LOG_TICK_D3, format_number

    values = tuple(2 ** k for k in range(4, 22))  # 18 values: Plotly's own x ticks
    rows = frame(values=values, skip_from=10**9)
    fast = rows["implementation"] == "triton"
    for column in ("median_ms", "p20_ms", "p80_ms"):
        rows.loc[fast, column] *= 1e-4  # 1e-5 ms: "10μ" on Plotly's own axis
    other = rows.assign(source="uploaded", median_ms=rows["median_ms"] * 300)
    both = pd.concat([rows, other], ignore_index=True)
    with style.presentation(scale):
        figures = [sweep_figures.sweep_latency_figure(rows), sweep_figures.sweep_bandwidth_figure(rows),
                   sweep_figures.sweep_speedup_figure(rows),
                   sweep_figures.sweep_ratio_figure(both, "uploaded", "this session"),
                   sweep_figures.sweep_latency_figure(frame(values=(16, 256, 4096), skip_from=10**9))]
    logs = [(fig, key) for fig in figures for key in ("xaxis", "yaxis") if fig.layout[key].type == "log"]
    assert len(logs) == 2 * len(figures)
    for fig, key in logs:
        axis = fig.layout[key]
        if axis.ticktext is None:
            assert axis.tickformat == LOG_TICK_D3, (fig.layout.title.text, key)
        elif key == "yaxis":  # a ratio's few ticks (test_ratio_ticks_stay_apart_on_a_short_log_axis)
            assert list(axis.ticktext) == [format_number(v) for v in axis.tickvals]
        else:  # the swept values, each named
            assert list(axis.ticktext) == ["16", "256", "4k"]


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_the_ceiling_label_fits_across_the_plot_and_over_the_line(scale):
    """At 1280x720 in presentation mode "copy ceiling 4,240 GB/s · recorded" ran past
    the chart's edge. It is broken into lines of the plot's width (half an em a
    character), and the axis keeps room over the ceiling for them."""
    recorded = frame(copy=4240.0, source="recorded")
    recorded["gpu_gbps"] = recorded["gpu_gbps"] * 100  # up near the ceiling, on a log axis
    both = pd.concat([frame(), recorded], ignore_index=True)
    with style.presentation(scale):
        fig = sweep_figures.sweep_bandwidth_figure(both)
        width = style.plot_width_px(style.HALF_PLOT_WIDTH_PX)
        plot = style.plot_area_height(440, fig.layout.title.subtitle.text.replace("<br>", " "))
    (label,) = [a for a in fig.layout.annotations if "ceiling" in a.text]
    lines = label.text.split("<br>")
    assert " · ".join(lines) == "copy ceiling 4,240 GB/s · recorded"  # broken at its separator
    assert label.align == "left"
    assert all(len(line) * style.CHAR_WIDTH * label.font.size <= width for line in lines), lines
    assert (len(lines) > 1) is (scale > 1)
    axis = fig.layout.yaxis
    assert axis.type == "log"
    over = (axis.range[1] - math.log10(4240.0)) / (axis.range[1] - axis.range[0]) * plot
    assert over >= len(lines) * style.LINE_HEIGHT * label.font.size, (over, lines)


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("values", [(16, 32, 64), (16, 20), (64,)])
def test_sweep_latency_dodges_implementations_at_one_value_and_hovers_the_true_value(values, scale):
    """Review at 1280x720 (issue 27): at one swept value the p20–p80 bars of the
    implementations stood on one another. Each implementation is drawn a few pixels
    beside the others, the same on screen at every value (a factor on a log axis),
    its skipped points with it; the hover and customdata keep the true value."""
    rows = frame(values=values, skip_from=values[-1])
    rows["median_ms"], rows["p20_ms"], rows["p80_ms"] = 1.0, 0.8, 1.25  # every bar on the others
    with style.presentation(scale):
        fig = sweep_figures.sweep_latency_figure(rows)
        width = style.plot_width_px(style.HALF_PLOT_WIDTH_PX)
    axis = fig.layout.xaxis
    log = axis.type == "log"
    assert log is (values[-1] / values[0] >= 4)
    lo, hi = (math.log10(values[0]), math.log10(values[-1])) if log else (values[0], values[-1])
    if len(values) == 1:
        lo, hi = axis.range
    offsets = {}  # px from the true value, per implementation
    for t in fig.data:
        true = list(t.customdata[:, -1])
        assert true == [v for v in values if (t.meta["kind"] == "skipped") is (t.meta["implementation"] == "naive"
                                                                                and v >= values[-1])]
        assert "%{x" not in t.hovertemplate and "%{hovertext}" in t.hovertemplate  # the true value, as the ticks write it
        assert list(t.hovertext) == [dict(zip(values, axis_value_texts(values)))[v] for v in true]
        px = [((math.log10(x) - math.log10(v)) if log else (x - v)) / (hi - lo) * width for x, v in zip(t.x, true)]
        assert max(px) - min(px) == pytest.approx(0, abs=1e-6)  # one dodge along the whole line
        offsets.setdefault(t.meta["implementation"], set()).add(round(px[0], 6))
    assert all(len(o) == 1 for o in offsets.values())  # a skipped point stands where its timed ones do
    dodge = sorted(o.pop() for o in offsets.values())
    assert len(dodge) == 3 and sum(dodge) == pytest.approx(0, abs=1e-6)  # centred on the true value
    gaps = [b - a for a, b in itertools.pairwise(dodge)]
    assert all(5 <= g <= 7 + 1e-6 for g in gaps), gaps  # apart, and only slightly


def _recorded_context_sweep():
    from explorer.bench.recorded import FOLDERS, load_recorded_set

    (path,) = sorted(FOLDERS["sweep"].glob("*_context_len.csv"))
    return load_recorded_set(path, "sweep").table


def _naive_drawn(table):
    fig = sweep_figures.sweep_latency_figure(table)
    skipped = traces(fig, implementation="naive", kind="skipped")
    (timed,) = traces(fig, implementation="naive", kind="timed")
    notes, drawn = {}, list(zip(timed.customdata[:, 2].astype(float), timed.y))
    for t in skipped:
        assert all(len(line) <= sweep_figures.HOVER_CHARS for n in t.customdata[:, 0] for line in n.split("<br>"))
        values = t.customdata[:, 1].astype(float)
        notes |= {v: n.replace("<br>", " ") for v, n in zip(values, t.customdata[:, 0])}
        drawn += list(zip(values, t.y))
    return sorted(drawn), notes


def test_the_recorded_context_sweep_draws_naive_rising_with_the_context():
    """The recorded H200 context sweep (probed warm, as the page probes): naive's measured
    and skipped points rise with the context and none needed re-deriving."""
    table = _recorded_context_sweep()
    drawn, notes = _naive_drawn(table)
    assert [v for v, _ in drawn] == [512, 2048, 8192, 16384, 32768]
    assert [y for _, y in drawn] == sorted(y for _, y in drawn), drawn
    assert notes and not any("re-derived" in n for n in notes.values())


def test_a_prediction_contradicting_a_measured_point_is_re_derived():
    """Review: the sweep recorded on 2026-12-01 drew naive skipped at 512 tokens at a
    predicted 129 ms (one cold probing call) beside 13.4 ms measured at 2,048. A
    prediction contradicting a measured point is drawn where the cost model puts it from
    the measured point, and says so; the consistent ones as recorded."""
    table = _recorded_context_sweep().copy()
    naive = (table["implementation"] == "naive")
    first = table.index[naive & (table["value"] == 512)][0]
    table.loc[first, ["status", "median_ms", "predicted_ms", "note"]] = [
        "skipped", float("nan"), 129.0, "skipped: 61 calls x ~129 ms predicted = 7.87 s, over the 2 s budget"]
    drawn, notes = _naive_drawn(table)
    assert [v for v, _ in drawn] == [512, 2048, 8192, 16384, 32768]
    assert [y for _, y in drawn] == sorted(y for _, y in drawn), drawn  # rising with the context
    assert "re-derived from the measured 2,048 point" in notes[512]
    recorded = table[naive].set_index("value")
    skipped_at = dict(drawn)
    assert all(skipped_at[v] == recorded.loc[v, "predicted_ms"] and "re-derived" not in notes[v]
               for v in (8192, 16384, 32768))  # consistent with the measured point: as recorded


@pytest.mark.parametrize("values", [(512, 2048, 8192, 16384, 32768), (16, 37, 1500, 4096)])
def test_the_grid_caption_writes_the_values_as_the_ticks_do(values):
    """Review: a recorded sweep's x ticks read "2k, 8k, 16k, 32k" and its caption
    "2,048, 8,192, 16,384, 32,768". The captions write the swept values as the ticks."""
    from explorer.sweep import view

    fig = sweep_figures.sweep_latency_figure(frame(values=values, skip_from=10**9))
    caption = view.grid_caption(sweep_grid.GridPlan(values, 0, 2), "context_len", (), BASE)
    assert caption.startswith(f"**{len(values)} points**: {', '.join(fig.layout.xaxis.ticktext)} · ")


@pytest.mark.parametrize("values, texts", [([512, 1024, 2048, 8192], ["512", "1k", "2k", "8k"]),
                                           ([1000, 1166, 2048], ["1,000", "1,166", "2,048"])])
def test_sweep_axis_writes_its_values_one_way(values, texts):
    """Issue 27 (round 4): one sweep axis read "1,166" beside "2k" (multiples of 1,024
    as "k", others in full). An axis, and the caption naming its values, now write
    them all one way (formatting.axis_value_texts)."""
    import plotly.graph_objects as go

    from explorer import formatting

    fig = go.Figure()
    sweep_figures.sweep_x_axis(fig, values, "context length")
    assert list(fig.layout.xaxis.ticktext) == texts
    from explorer.sweep.figures import sweep_bandwidth_figure
    bw = [t for t in sweep_bandwidth_figure(_hover_frame(values)).data if t.meta and t.meta.get("kind") == "timed"]
    assert bw and all("%{x" not in t.hovertemplate and list(t.hovertext) == texts for t in bw)
    assert formatting.format_axis_values(values) == ", ".join(texts)


def _hover_frame(values):
    import pandas as pd
    return pd.DataFrame([dict(source="this session", implementation=impl, value=v, status="ok", median_ms=0.1 * (i + 1),
                              p20_ms=0.09, p80_ms=0.11, predicted_ms=float("nan"), note="", gbps=1.0,
                              gpu_gbps=float("nan"), copy_gbps=float("nan"), axis="context_len")
                         for impl in ("triton", "naive") for i, v in enumerate(values)])


@pytest.mark.parametrize("values, texts", [([512, 2048, 8192], ["512", "2k", "8k"]),
                                           ([1000, 1166, 2048], ["1,000", "1,166", "2,048"])])
def test_sweep_hovers_write_the_axis_values_as_the_ticks_do(values, texts):
    from explorer.sweep.figures import sweep_latency_figure
    fig = sweep_latency_figure(_hover_frame(values))
    timed = [t for t in fig.data if t.meta and t.meta.get("kind") == "timed"]
    assert timed and "%{hovertext}" in timed[0].hovertemplate and "%{x" not in timed[0].hovertemplate
    assert list(timed[0].hovertext) == texts
    assert list(fig.layout.xaxis.ticktext) == texts
    from explorer.sweep.figures import sweep_bandwidth_figure
    bw = [t for t in sweep_bandwidth_figure(_hover_frame(values)).data if t.meta and t.meta.get("kind") == "timed"]
    assert bw and all("%{x" not in t.hovertemplate and list(t.hovertext) == texts for t in bw)
