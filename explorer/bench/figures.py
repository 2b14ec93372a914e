"""Figures of benchmark results (lists of :class:`~paged_attention.results.BenchResult`):
latency, speedup, host overhead, bandwidth, and the run history (the error chart
is :mod:`explorer.bench.accuracy_figures`).
"""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from explorer.bench.readouts import host_overhead_ms, rank, step_bytes_text
from explorer.bench.view import percent, rank_words
from explorer.category_ticks import SOFT_HYPHEN, add_label_row, label_row_px, log_ticks, set_category_ticks
from explorer.formatting import (
    LOG_TICK_D3,
    format_duration,
    format_gbps,
    format_speedup,
    in_unit,
)
from explorer.style import (
    FULL_FIGURE_PX,
    apply_style,
    font_px,
    impl_color,
    log_axis_range,
    with_alpha,
)
from paged_attention.results import achieved_gbps, shares_kv
from paged_attention.samples import INDISTINGUISHABLE


def latency_figure(results: Sequence, *, log_y: bool = True, unit: str = "ms") -> go.Figure:
    """Per-call latency: every timed sample as a box with its points, and the
    CUDA-graph GPU time as a diamond where measured; the medians written in a row
    over the plot (:func:`~explorer.category_ticks.add_label_row`, annotations named
    ``"median label"``).

    Parameters
    ----------
    results : sequence of BenchResult
    unit : str
        The unit of the axis, labels and hovers (``"µs"``, ``"ms"`` or ``"s"``;
        the page's :func:`explorer.formatting.duration_unit`).

    Returns
    -------
    go.Figure
        One box trace per implementation (in order), then one scatter trace
        "GPU time (CUDA graph)" when any result has ``gpu_time_ms``.
    """
    fig = go.Figure()
    for r in results:
        color = impl_color(r.name)
        fig.add_trace(
            go.Box(
                y=[in_unit(v, unit) for v in r.samples_ms],
                x=[r.label] * len(r.samples_ms),
                name=r.label,
                marker=dict(color=color, size=5, opacity=0.6),
                line=dict(color=color, width=1.5),
                fillcolor=with_alpha(color, 0.18),
                boxpoints="all",
                jitter=0.35,
                pointpos=0,
                # Each point's own text, as the cards write it (a d3 format in the browser wrote
                # "0.00000000100" where a card reads "1.00e-9"); the box's median is over the plot.
                customdata=[format_duration(v, unit) for v in r.samples_ms],
                hoveron="points",
                hovertemplate=f"{r.label}<br>%{{customdata}}<extra></extra>",
                showlegend=False,
            )
        )
    gpu = [r for r in results if getattr(r, "gpu_time_ms", None) is not None]
    if gpu:
        fig.add_trace(
            go.Scatter(
                x=[r.label for r in gpu],
                y=[in_unit(r.gpu_time_ms, unit) for r in gpu],
                mode="markers",
                marker=dict(symbol="diamond", size=13, color="#111827", line=dict(color="white", width=1.5)),
                name="GPU time (CUDA graph)",
                customdata=[format_duration(r.gpu_time_ms, unit) for r in gpu],
                hovertemplate="%{x}<br>GPU time %{customdata}<extra></extra>",
            )
        )
    device = results[0].device if results else ""
    subtitle = "box = call latency over all timed calls (median line, quartiles)"
    if gpu:
        subtitle += "; ◆ = GPU time without launch overhead"
    # The medians in a row over the plot: over each box they ran into each other at presentation size.
    row = [f"<b>{format_duration(r.median_ms, unit)}</b>" for r in results]
    above = label_row_px(row)
    apply_style(fig, f"Latency per decode step ({device})", subtitle, height=round(430 + above), above_plot=above)
    add_label_row(fig, [r.label for r in results], row, [impl_color(r.name) for r in results], name="median label")
    fig.update_yaxes(title=f"latency ({unit})", type="log" if log_y else "linear", tickformat=LOG_TICK_D3)
    if log_y:
        log_axis_range(fig, [in_unit(v, unit) for r in results for v in [*r.samples_ms, r.gpu_time_ms or r.median_ms]],
                       0.25, 0.25)
        spaced_log_ticks(fig)
    fig.update_xaxes(title=None)
    set_category_ticks(fig, [r.label for r in results])
    return fig


def overhead_figure(results: Sequence, unit: str = "ms") -> go.Figure:
    """Where each call's time goes: the GPU's work and the host overhead (median
    call latency − GPU time, :func:`explorer.bench.readouts.host_overhead_ms`), as
    shares of the median call latency, each labelled with its time, and the host's
    share over each bar: what launch overhead costs, and what a CUDA graph's replay
    leaves out.

    An implementation without a GPU time (one that synchronises with the host, or
    any on the CPU) has no bars, and says so in their place.

    Parameters
    ----------
    results : sequence of BenchResult
    unit : str
        The unit of the labels (as :func:`latency_figure`'s).

    Returns
    -------
    go.Figure
        Trace 0 "GPU time", trace 1 "host overhead": stacked bars, ``y`` in % of
        the median call latency (None without a GPU time), ``text`` the time.
    """
    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]
    host = [host_overhead_ms(r) for r in results]
    gpu = [None if h is None else r.median_ms - h for r, h in zip(results, host)]

    def share(part: float | None, r) -> float | None:
        return None if part is None or r.median_ms <= 0 else 100 * part / r.median_ms

    fig = go.Figure()
    for name, parts, marker in (
        ("GPU time", gpu, dict(color=colors)),
        ("host overhead", host, dict(color=[with_alpha(c, 0.3) for c in colors], line=dict(color=colors, width=1.5),
                                     pattern=dict(shape="/", fgcolor=colors))),
    ):
        fig.add_trace(go.Bar(
            x=labels, y=[share(v, r) for v, r in zip(parts, results)], name=name, marker=marker,
            text=[format_duration(v, unit) if v is not None else "" for v in parts], textposition="inside",
            insidetextanchor="middle", textangle=0, customdata=[percent(None if v is None else v / r.median_ms)
                                                   for v, r in zip(parts, results)],
            hovertemplate=f"%{{x}}<br>{name} %{{text}}: %{{customdata}} of the call<extra></extra>",
        ))
    for label, r, h in zip(labels, results, host):
        if h is None or r.median_ms <= 0:
            fig.add_annotation(x=label, y=50, showarrow=False, font=dict(size=font_px("label")), text="no GPU<br>time")
    # The host's shares in a row over the plot: over the bars they touched at presentation size.
    row = [f"<b>{percent(h / r.median_ms)}</b>" if h is not None and r.median_ms > 0 else ""
           for r, h in zip(results, host)]
    above = label_row_px(row)
    apply_style(fig, "Where a call's time goes",
                "solid: GPU time (CUDA graph); hatched: host overhead, its share on top", height=round(360 + above),
                above_plot=above)
    add_label_row(fig, labels, row, ["#1F2937"] * len(labels), name="host share label")
    # Labels too small to read are left out rather than shrunk (the hover has them).
    fig.update_layout(barmode="stack", bargap=0.35, showlegend=False, uniformtext=dict(minsize=font_px("cell"), mode="hide"))
    fig.update_yaxes(title="% of call latency", range=[0, 102], tickvals=[0, 25, 50, 75, 100])
    fig.update_xaxes(showgrid=False)
    set_category_ticks(fig, labels)
    return fig


#: Colour of the stems from the 1× line and of the p20-p80 range bars on the speedup chart.
_STEM_COLOR, _RANGE_COLOR = "#CBD5E1", "rgba(100, 116, 139, 0.35)"
#: Decades of the speedup axis beyond its farthest value from 1×, each side, and
#: the least it reaches from 1× (0.316× to 3.16×) when all are near parity.
_SPEEDUP_MARGIN, _SPEEDUP_MIN_REACH = 0.3, 0.5


def speedup_figure(results: Sequence, baseline: str = "naive") -> go.Figure:
    """Speedup of each implementation's median call latency over ``baseline``'s,
    and whether it is one (:func:`explorer.bench.readouts.rank`).

    A dot per implementation on a stem from the 1× line (parity), and behind it
    a bar over the speedup's range from the two p20-p80 ranges: where the bar
    crosses 1× the ranges overlap and the dot is open, labelled
    "indistinguishable" instead of a speedup. The labels are the cards' words
    (:func:`~explorer.bench.view.rank_words`: "44.0× faster", "297× slower",
    "baseline"), not a ratio below 1 for a slowdown. They are written in a row over
    the plot, each over its implementation (:func:`~explorer.category_ticks.add_label_row`:
    staggered on two rows where they are wider than an implementation's share):
    beside the dots, five labels at presentation size ran into each other. The axis is
    logarithmic and centred on 1× (as far below as above, in decades, covering every
    speedup and range): "n× faster" and "n× slower" stand as far from parity, and a
    stem from 1× reads as "how many times faster or slower" (a linear axis drew a
    0.27× dot on its 0 line).

    Returns
    -------
    go.Figure
        Trace 0: ``"p20-p80 range"`` (a line segment per implementation,
        ``None`` between); trace 1: ``"speedup"`` (``y`` = speedup, ``customdata``
        the hover's words, ``error_y`` the stems to 1×); the labels, "3.99× faster",
        "2.5× slower", "baseline" or "indistinguishable" (broken "indistin-<br>guishable" where narrow), as
        annotations named ``"speedup label"``, one per implementation with a time.
        Empty (with a note) when the baseline did not run.
    """
    base = next((r for r in results if r.name == baseline), None)
    fig = go.Figure()
    if base is None:
        fig.add_annotation(text=f"No {baseline} result to compare against.", showarrow=False)
        return apply_style(fig, "Speedup", height=360)
    ranks = rank(results, baseline)
    nan = float("nan")
    speed = [nan if k.speedup is None else k.speedup for k in ranks]
    same = [k.verdict == INDISTINGUISHABLE for k in ranks]

    def hover(k) -> str:
        if k.speedup is None:
            return "no speedup (no time measured)"
        words = rank_words(k.verdict, k.speedup, base.label) if k.name != baseline else "the baseline"
        return f"{words}<br>p20-p80 range: {format_speedup(k.low)} to {format_speedup(k.high)}"

    finite = [s for s in speed if math.isfinite(s) and s > 0]
    spans = [v for k in ranks if k.speedup is not None for v in (k.low, k.high) if v > 0]
    labels = [r.label for r in results]
    # The range bars first, so that the dots are drawn over them.
    xs, ys = [], []
    for label, k in zip(labels, ranks):
        if k.speedup is not None:
            xs += [label, label, None]
            ys += [k.low, k.high, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=_RANGE_COLOR, width=10),
                             name="p20-p80 range", hoverinfo="skip", showlegend=False))
    # The cards' and the results table's words ("297× slower", not "0.00336×"): one value, one way.
    texts = [rank_words(k.verdict, k.speedup) for k in ranks]
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=speed,
            mode="markers",
            marker=dict(color=["white" if o else impl_color(r.name) for r, o in zip(results, same)], size=16,
                        symbol=["circle-open-dot" if o else "circle" for o in same],
                        line=dict(color=[impl_color(r.name) if o else "white" for r, o in zip(results, same)],
                                  width=[3 if o else 1.5 for o in same])),
            error_y=dict(type="data", symmetric=False, width=0, thickness=3, color=_STEM_COLOR,
                         array=[max(1 - s, 0) if math.isfinite(s) else 0 for s in speed],
                         arrayminus=[max(s - 1, 0) if math.isfinite(s) else 0 for s in speed]),
            cliponaxis=False,
            customdata=[hover(k) for k in ranks],
            hovertemplate="%{x}<br>%{customdata}<extra></extra>",
            name="speedup",
        )
    )
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    # "indistinguishable" may break where it is wider than two implementations' shares.
    row = [t.replace("indistinguishable", f"indistin{SOFT_HYPHEN}guishable") for t in texts]
    above = label_row_px(row)  # the figure grows by the row: the plot keeps its height
    apply_style(fig, f"Speedup over {base.label}",
                "median call latency; bar: p20-p80 range (across 1×: indistinguishable)",
                height=round(360 + above), above_plot=above)
    add_label_row(fig, labels, row, [impl_color(r.name) for r in results], name="speedup label")
    # Always log, centred on 1×: "n× faster" and "n× slower" the same distance from parity
    # (review 3: a linear 0-20 axis left a 0.27× dot on the 0 line, other runs drew a log one).
    reach = max([abs(math.log10(v)) for v in [*finite, *spans]], default=0) + _SPEEDUP_MARGIN
    reach = max(reach, _SPEEDUP_MIN_REACH)
    fig.update_yaxes(title="speedup (×)", type="log", range=[-reach, reach])
    spaced_log_ticks(fig)
    fig.update_layout(showlegend=False)
    fig.update_xaxes(showgrid=False)
    set_category_ticks(fig, labels)
    return fig


def bandwidth_figure(results: Sequence, copy_gbps: float | None = None) -> go.Figure:
    """Achieved bandwidth (bytes a decode step must move ÷ time) in GB/s.

    Bars for call latency, and beside them for GPU time where measured; with
    ``copy_gbps`` (this device's measured copy bandwidth) a line marks it. Each
    implementation's achieved bandwidth (:func:`~paged_attention.results.achieved_gbps`:
    from GPU time where measured, as the results table's) is written in a row over
    the plot with the fraction of ``copy_gbps`` reached
    (:func:`~explorer.category_ticks.add_label_row`): a label over each of two bars
    side by side ran into its neighbours. With a shared prefix
    (:func:`~paged_attention.results.shares_kv`) the bytes are the unique ones (a
    shared block once), as the title says: on logical bytes a kernel that reads
    each shared block once would seem to beat the copy bandwidth.

    Returns
    -------
    go.Figure
        Trace 0: "call latency" bars; trace 1 (when any GPU time): "GPU time" bars;
        the labels as annotations named ``"bandwidth label"``.
    """
    sharing = any(shares_kv(r) for r in results)
    if sharing:
        call = [r.unique_gbps for r in results]
        gpu = [r.gpu_unique_gbps for r in results]
        title = "Bandwidth on unique bytes"
        subtitle = step_bytes_text(results[0].bytes_moved, results[0].unique_bytes)
    else:
        call = [r.gbps for r in results]
        gpu = [r.gpu_gbps for r in results]
        title = "Achieved memory bandwidth"
        subtitle = step_bytes_text(results[0].bytes_moved if results else 0)
    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def label(v: float | None) -> str:
        if v is None:
            return ""
        return f"{format_gbps(v)} ({percent(v / copy_gbps)})" if copy_gbps else format_gbps(v)

    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=call,
            marker=dict(color=colors),
            name="from call latency",
            customdata=[format_gbps(v) for v in call],
            hovertemplate="%{x}<br>%{customdata} GB/s from call latency<extra></extra>",
        )
    )
    if any(v is not None for v in gpu):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=gpu,
                marker=dict(color=[with_alpha(c, 0.45) for c in colors], line=dict(color=colors, width=1.5),
                            pattern=dict(shape="/", fgcolor="white")),
                name="from GPU time (CUDA graph)",
                customdata=[format_gbps(v) for v in gpu],
                hovertemplate="%{x}<br>%{customdata} GB/s from GPU time<extra></extra>",
            )
        )
    if copy_gbps:
        fig.add_hline(
            y=copy_gbps, line=dict(color="#111827", dash="dash", width=1.2),
            # Short enough for a half-page chart in presentation mode ("measured ..." ran past its edge).
            annotation_text=f"copy bandwidth {format_gbps(copy_gbps)} GB/s", annotation_position="top left",
        )
    row = [label(achieved_gbps(r, unique=sharing)) for r in results]
    if any(v is not None for v in gpu):
        subtitle += "; labels: from GPU time where measured"
    above = label_row_px(row)
    apply_style(fig, title, subtitle, height=round(380 + above), above_plot=above)
    add_label_row(fig, labels, row, colors, name="bandwidth label")
    fig.update_layout(barmode="group", bargap=0.3)
    # Room over the copy line for its label, under the row of labels.
    top = max([v for v in (*call, *gpu, copy_gbps) if v is not None], default=1)
    fig.update_yaxes(title="GB/s", range=[0, top * 1.15], tickformat=LOG_TICK_D3)
    set_category_ticks(fig, labels)
    return fig


def history_figure(history: Sequence, unit: str = "ms") -> go.Figure:
    """Median call latency of each implementation across the runs of a session.

    Dots, side by side within each run, on a log axis (where bars' lengths would
    mean nothing), each labelled with its time.

    Parameters
    ----------
    history : sequence of RunEntry
        :class:`explorer.bench.view.RunEntry`: ``run`` (int), ``label`` (config
        summary), ``results`` (list of BenchResult) and ``change`` (what differs
        from the run before, shown under the run's number; may be empty).
    unit : str
        The unit of the axis, labels and hovers (as :func:`latency_figure`'s).

    Returns
    -------
    go.Figure
        One marker trace per implementation seen (``y`` = median ms, None
        where it did not run), grouped by run (log y).
    """
    order: list[tuple[str, str]] = []
    for h in history:
        for r in h.results:
            if (r.name, r.label) not in order:
                order.append((r.name, r.label))
    # Each run is named by what changed since the one before (``change``, from
    # explorer.bench.readouts.run_change), not by its number alone.
    xs = [f"#{h.run}<br>{h.change}" if h.change else f"#{h.run}" for h in history]
    fig = go.Figure()
    for name, label in order:
        ms = [next((r.median_ms for r in h.results if r.name == name), None) for h in history]
        ys = [in_unit(v, unit) if v is not None else None for v in ms]
        hovers = [[h.label, format_duration(v, unit) if v is not None else ""] for h, v in zip(history, ms)]
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, name=label, mode="markers+text", offsetgroup=name,
                marker=dict(color=impl_color(name), size=12, line=dict(color="white", width=1)),
                customdata=hovers,
                text=[format_duration(v, unit) if v is not None else "" for v in ms], textposition="top center",
                textfont=dict(size=font_px("label"), color=impl_color(name)), cliponaxis=False,
                hovertemplate=f"{label}<br>run %{{x}}: %{{customdata[1]}}<br>%{{customdata[0]}}<extra></extra>",
            )
        )
    apply_style(fig, "Runs in this session", "median call latency per run; hover a dot for its configuration", height=380,
                width_px=FULL_FIGURE_PX)
    fig.update_layout(scattermode="group", scattergap=0.25)
    fig.update_yaxes(title=f"median latency ({unit})", type="log", tickformat=LOG_TICK_D3)  # "1,000", as the tables
    log_axis_range(fig, [in_unit(r.median_ms, unit) for h in history for r in h.results], 0.3, 0.4)
    spaced_log_ticks(fig)
    fig.update_xaxes(title="run", type="category", showgrid=False)
    return fig


#: The least span (decades) of an axis labelled by :func:`spaced_log_ticks`: any
#: span over log10(5) = 0.7 decades holds two of 1, 2 and 5 times a power of ten
#: (a shorter one, 1.2 to 4.5, may hold one: "2").
MIN_LOG_TICK_SPAN = 0.75


def spaced_log_ticks(fig: go.Figure) -> None:
    """Label the log y axis of ``fig`` at 1, 2 and 5 times each power of ten, or at
    whole decades where those would not stay apart on its plot's height
    (:func:`~explorer.category_ticks.log_ticks`, written by
    :func:`~explorer.formatting.format_number`: "0.5", "1", "1,000"). On a span
    under two decades Plotly labelled every 2, 3 ... 9, piled on one another at
    presentation size (review 3: 20, 30 ... 90, 100, 200 ... 800 on the run history),
    and on a short one odd values. An axis shorter than :data:`MIN_LOG_TICK_SPAN`
    is first widened about its middle to it, so that it has two labels at least.

    Parameters
    ----------
    fig : go.Figure
        With a log y axis whose ``range`` is set (decades); left as is without one.
    """
    span = fig.layout.yaxis.range
    if span is None:
        return
    lo, hi = span
    if hi - lo < MIN_LOG_TICK_SPAN:
        middle = (lo + hi) / 2
        lo, hi = middle - MIN_LOG_TICK_SPAN / 2, middle + MIN_LOG_TICK_SPAN / 2
        fig.update_yaxes(range=[lo, hi])
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    fig.update_yaxes(dtick=None, **log_ticks(lo, hi, plot_px, mantissas=((1,), (1, 2, 5))))
