"""Figures of benchmark results (lists of :class:`~paged_attention.results.BenchResult`):
latency, speedup, bandwidth, accuracy against tolerance, and the run history.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import (
    MS_D3,
    format_bytes,
    format_duration,
    format_speedup,
    in_unit,
)
from explorer.style import (
    ERROR_FLOOR,
    FAIL_COLOR,
    PASS_COLOR,
    PRESENTATION_SCALE,
    apply_style,
    impl_color,
    log_axis_range,
    plot_area_height,
    set_category_ticks,
    title_margins,
    with_alpha,
)
from paged_attention.results import shares_kv


def latency_figure(results: Sequence, *, log_y: bool = True, unit: str = "ms") -> go.Figure:
    """Per-call latency: every timed sample as a box with its points, median
    labelled, and the CUDA-graph GPU time as a diamond where measured.

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
                hovertemplate=f"{r.label}<br>%{{y:{MS_D3}}} {unit}<extra></extra>",
                showlegend=False,
            )
        )
        p80 = in_unit(r.p80_ms, unit)
        fig.add_annotation(
            x=r.label, y=math.log10(max(p80, 1e-9)) if log_y else p80, text=f"<b>{format_duration(r.median_ms, unit)}</b>",
            showarrow=False, yshift=16, font=dict(size=12, color=color),
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
                hovertemplate=f"%{{x}}<br>GPU time %{{y:{MS_D3}}} {unit}<extra></extra>",
            )
        )
    device = results[0].device if results else ""
    subtitle = "box = call latency over all timed calls (median line, quartiles)"
    if gpu:
        subtitle += "; ◆ = GPU time without launch overhead"
    apply_style(fig, f"Latency per decode step ({device})", subtitle, height=430)
    fig.update_yaxes(title=f"latency ({unit})", type="log" if log_y else "linear")
    if log_y:
        log_axis_range(fig, [in_unit(v, unit) for r in results for v in [*r.samples_ms, r.gpu_time_ms or r.median_ms]],
                   0.25, 0.45)
    fig.update_xaxes(title=None)
    set_category_ticks(fig, [r.label for r in results])
    return fig


def speedup_figure(results: Sequence, baseline: str = "naive") -> go.Figure:
    """Speedup of each implementation's median call latency over ``baseline``'s.

    A dot per implementation on a stem from the 1× line (parity): the axis turns
    logarithmic when the speedups span more than 30×, where a bar from the
    bottom of the axis would have a length that means nothing, and a stem from
    1× still reads as "how many times faster or slower".

    Returns
    -------
    go.Figure
        One scatter trace ``"speedup"`` (``y`` = speedup, ``text`` its label,
        ``error_y`` the stems to 1×); empty (with a note) when the baseline did
        not run.
    """
    base = next((r for r in results if r.name == baseline), None)
    fig = go.Figure()
    if base is None:
        fig.add_annotation(text=f"No {baseline} result to compare against.", showarrow=False)
        return apply_style(fig, "Speedup", height=360)
    speed = [base.median_ms / r.median_ms if r.median_ms > 0 else float("nan") for r in results]

    def hover(s: float) -> str:
        if not math.isfinite(s) or s <= 0:
            return "no speedup (no time measured)"
        if s >= 1:
            return f"{format_speedup(s)} faster than {base.label}"
        return f"{format_speedup(1 / s)} slower than {base.label}"

    finite = [s for s in speed if math.isfinite(s) and s > 0]
    fig.add_trace(
        go.Scatter(
            x=[r.label for r in results],
            y=speed,
            mode="markers+text",
            marker=dict(color=[impl_color(r.name) for r in results], size=16, line=dict(color="white", width=1.5)),
            error_y=dict(type="data", symmetric=False, width=0, thickness=3, color="#CBD5E1",
                         array=[max(1 - s, 0) if math.isfinite(s) else 0 for s in speed],
                         arrayminus=[max(s - 1, 0) if math.isfinite(s) else 0 for s in speed]),
            text=[format_speedup(s) for s in speed],
            textposition=["bottom center" if math.isfinite(s) and s < 1 else "top center" for s in speed],
            textfont=dict(size=13),
            cliponaxis=False,
            customdata=[hover(s) for s in speed],
            hovertemplate="%{x}<br>%{customdata}<extra></extra>",
            name="speedup",
        )
    )
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    log = bool(finite) and max(finite) / min(finite) > 30
    apply_style(fig, f"Speedup over {base.label}", "median call latency of the baseline ÷ median of each; stem from 1×",
           height=360)
    fig.update_yaxes(title="speedup (×)", type="log" if log else "linear")
    if log:
        # Room for the labels under the slowdowns' dots and over the speedups'.
        log_axis_range(fig, [*finite, 1.0], 0.75 if min(finite) < 1 else 0.3, 0.6)
    else:
        fig.update_yaxes(range=[0, max([*finite, 1.0]) * 1.25])
    fig.update_layout(showlegend=False)
    fig.update_xaxes(showgrid=False)
    set_category_ticks(fig, [r.label for r in results])
    return fig


def bandwidth_figure(results: Sequence, copy_gbps: float | None = None) -> go.Figure:
    """Achieved bandwidth (bytes a decode step must move ÷ time) in GB/s.

    Bars for call latency, and beside them for GPU time where measured; with
    ``copy_gbps`` (this device's measured copy bandwidth) a line marks it and
    each bar is labelled with the fraction reached. With a shared prefix
    (:func:`~paged_attention.results.shares_kv`) the bytes are the unique ones (a
    shared block once), as the title says: on logical bytes a kernel that reads
    each shared block once would seem to beat the copy bandwidth.

    Returns
    -------
    go.Figure
        Trace 0: "call latency" bars; trace 1 (when any GPU time): "GPU time" bars.
    """
    if any(shares_kv(r) for r in results):
        call = [r.unique_gbps for r in results]
        gpu = [r.gpu_unique_gbps for r in results]
        title = "Bandwidth on unique bytes"
        subtitle = (f"{format_bytes(results[0].unique_bytes, 3)} per decode step: K, V (each shared block once), Q, O "
                    f"({format_bytes(results[0].bytes_moved, 3)} logical)")
    else:
        call = [r.gbps for r in results]
        gpu = [r.gpu_gbps for r in results]
        title = "Achieved memory bandwidth"
        bytes_moved = results[0].bytes_moved if results else 0
        subtitle = f"{format_bytes(bytes_moved, 3)} moved per decode step (K, V once, Q, O)"
    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def label(v: float | None) -> str:
        if v is None:
            return ""
        text = f"{v:.3g}" if v < 100 else f"{v:,.0f}"
        return f"{text} ({100 * v / copy_gbps:.0f}%)" if copy_gbps else text

    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=call,
            marker=dict(color=colors),
            text=[label(v) for v in call],
            textposition="outside",
            cliponaxis=False,
            name="from call latency",
            hovertemplate="%{x}<br>%{y:,.1f} GB/s from call latency<extra></extra>",
        )
    )
    if any(v is not None for v in gpu):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=gpu,
                marker=dict(color=[with_alpha(c, 0.45) for c in colors], line=dict(color=colors, width=1.5),
                            pattern=dict(shape="/", fgcolor="white")),
                text=[label(v) for v in gpu],
                textposition="outside",
                cliponaxis=False,
                name="from GPU time (CUDA graph)",
                hovertemplate="%{x}<br>%{y:,.1f} GB/s from GPU time<extra></extra>",
            )
        )
    if copy_gbps:
        fig.add_hline(
            y=copy_gbps, line=dict(color="#111827", dash="dash", width=1.2),
            annotation_text=f"measured copy bandwidth {copy_gbps:,.0f} GB/s", annotation_position="top left",
        )
    apply_style(fig, title, subtitle, height=380)
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(title="GB/s", rangemode="tozero")
    set_category_ticks(fig, labels)
    return fig


#: Colour and default name of the fp8 quantization error's line on the error chart.
QUANTIZATION_COLOR = "#7C3AED"
QUANTIZATION_LABEL = "fp8 quantization error (vs unquantized cache)"

#: The error chart's title: short enough (:data:`~explorer.style.TITLE_LINE`)
#: to grow in presentation mode like the other charts' titles.
ACCURACY_TITLE = "Error vs float64 reference"
#: From this many implementations on, the pass/fail marks over the error chart are
#: "✓" and "✗" alone (hover for the word): "✓ pass" four abreast touched.
CROWDED_MARKS = 4


def _quantization_text(label: str, error: float) -> str:
    """The quantization line's label: the value after the label's first words, any
    parenthesis on a second line, so that it stays inside a half-page plot at
    presentation size (on one line it ran left over the axis)."""
    head, sep, rest = label.partition(" (")
    return f"{head}: {error:.2g}<br>({rest}" if sep else f"{label}: {error:.2g}"


#: The accuracy chart's height, the pixels over its plot for the pass/fail marks,
#: and the font size of its tolerance lines' labels.
_ACCURACY_HEIGHT, _ACCURACY_MARKS_PX, _LABEL_SIZE = 480, 26, 12


def accuracy_figure(
    results: Sequence, quantization_error: float | None = None, quantization_label: str = QUANTIZATION_LABEL
) -> go.Figure:
    """Error against the float64 reference, in two panels sharing the x axis: a dot
    per implementation (both axes are logarithmic, where a bar's length would mean
    nothing and an exact zero has no place).

    Top: the tolerance ratio ``max |out − ref| / (atol + rtol·|ref|)`` (the
    result's ``max_tol_ratio``), with a line at 1: a result passes exactly when
    its dot stays at or below it. Bottom: the max absolute error with ``atol`` as
    a line. Relative error is not drawn: it is large wherever the reference is near
    zero, even for a correct output.

    Each panel runs from a decade under its smallest error or line to above its
    largest; exact results (error 0) sit on its floor as open circles labelled
    "0 (exact)", NaN or inf at its top as crosses labelled "NaN/inf".
    Errors under :data:`ERROR_FLOOR` count as that. A result without
    ``max_tol_ratio`` uses ``max_abs_err / atol``, an upper bound of it.

    For an fp8 KV cache, ``quantization_error`` (the float64 answer on the
    dequantized cache against the one on the unquantized values: what storing K
    and V in 8 bits costs, whatever the kernel) is drawn in the bottom panel as a
    dashed line labelled ``quantization_label``, with no pass/fail: the dots
    remain each kernel's own error against the dequantized reference.

    Parameters
    ----------
    results : sequence of BenchResult
    quantization_error : float, optional
        ``max |ref_fp8 − ref_unquantized|``; None for a 16-bit or 32-bit cache.
    quantization_label : str
        The line's name and label.

    Returns
    -------
    go.Figure
        Trace 0: "max abs error" (bottom panel, ``yaxis2``); trace 1:
        "error ÷ tolerance" (top panel, ``yaxis``): marker scatters, ``y``
        positive and finite (the floor or top of the axis where the error is 0
        or not finite), ``text`` "0 (exact)" or "NaN/inf" there, else empty.
        With ``quantization_error``, trace 2 named ``quantization_label``
        (bottom panel, ``y`` the error at every implementation).
    """
    from plotly.subplots import make_subplots

    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def ratio(r) -> float:
        value = getattr(r, "max_tol_ratio", None)
        return r.max_abs_err / r.atol if value is None else value

    ratios = [ratio(r) for r in results]
    errors = [r.max_abs_err for r in results]
    atol = results[0].atol if results else 1e-3

    def hover(v: float) -> str:
        if not math.isfinite(v):
            return "NaN/inf"
        return "0 (exact)" if v == 0 else f"{v:.3g}"

    def mark(v: float) -> str:
        return "NaN/inf" if not math.isfinite(v) else "0 (exact)" if v == 0 else ""

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    quantized = quantization_error is not None and math.isfinite(quantization_error) and bool(results)
    subtitle = "top: max of |out − ref| / (atol + rtol·|ref|), pass ≤ 1; bottom: max |out − ref|"
    if quantized:
        subtitle += "; ref = float64 on the dequantized fp8 cache"
    # The axes first (a decade under the smallest error or line, for the exact
    # ones' floor), then the dots, whose zeros and NaNs go to the axis' ends.
    ranges = []
    for row, values, line in ((1, ratios, 1.0), (2, [*errors, *([quantization_error] if quantized else [])], atol)):
        positive = [max(v, ERROR_FLOOR) for v in values if math.isfinite(v) and v > 0] + [line]
        log_axis_range(fig, positive, 1.0, 0.5, min_span=2, row=row, col=1)
        ranges.append(fig.layout["yaxis" if row == 1 else "yaxis2"].range)
    # Room in pixels, not decades, between the tolerance line (at 1, log 0) and the
    # pass marks over the top panel, for the line's label at presentation size
    # (which keeps the plot area): half a decade shrank to a few pixels on a tall span.
    lo, hi = ranges[0]
    domain = fig.layout.yaxis.domain
    panel_px = (domain[1] - domain[0]) * (plot_area_height(_ACCURACY_HEIGHT, subtitle) - _ACCURACY_MARKS_PX)
    share = min((_LABEL_SIZE * PRESENTATION_SCALE * 1.2 + 6) / panel_px, 0.5)
    if hi / (hi - lo) < share:
        ranges[0] = (lo, -share * lo / (1 - share))
        fig.update_yaxes(range=list(ranges[0]), row=1, col=1)

    def place(values: Sequence[float], rng) -> list[float]:
        lo, hi = rng
        top = 10 ** (hi - 0.25)  # under the edge, clear of the pass/fail marks above the plot
        return [top if not math.isfinite(v) else 10 ** lo if v == 0 else max(v, ERROR_FLOOR) for v in values]

    def symbols(values: Sequence[float]) -> list[str]:
        return ["x-thin" if not math.isfinite(v) else "circle-open" if v == 0 else "circle" for v in values]

    def positions(values: Sequence[float]) -> list[str]:
        return ["bottom center" if not math.isfinite(v) else "top center" for v in values]

    fig.add_trace(
        go.Scatter(
            x=labels, y=place(errors, ranges[1]), name="max abs error", mode="markers+text",
            marker=dict(color=[c if v == 0 else with_alpha(c, 0.45) for c, v in zip(colors, errors)], size=14,
                        symbol=symbols(errors), line=dict(color=colors, width=2)),
            text=[mark(v) for v in errors], textposition=positions(errors), textfont=dict(size=12),
            cliponaxis=False, showlegend=False,
            customdata=[hover(v) for v in errors],
            hovertemplate="%{x}<br>max |out − ref| = %{customdata}<extra></extra>",
        ),
        row=2, col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=labels, y=place(ratios, ranges[0]), name="error ÷ tolerance", mode="markers+text",
            marker=dict(color=colors, size=14, symbol=symbols(ratios), line=dict(color=colors, width=2)),
            text=[mark(v) for v in ratios], textposition=positions(ratios), textfont=dict(size=12),
            cliponaxis=False, showlegend=False,
            customdata=np.array([[hover(v), hover(e)] for v, e in zip(ratios, errors)], dtype=object)
            if results else None,
            hovertemplate="%{x}<br>max |out − ref| / (atol + rtol·|ref|) = %{customdata[0]}"
            "<br>max |out − ref| = %{customdata[1]}<extra></extra>",
        ),
        row=1, col=1,
    )
    if quantized:
        level = max(quantization_error, ERROR_FLOOR)
        fig.add_trace(
            go.Scatter(
                x=labels, y=[level] * len(labels), name=quantization_label, mode="lines+markers",
                line=dict(color=QUANTIZATION_COLOR, dash="dash", width=2),
                marker=dict(symbol="line-ew-open", size=28, color=QUANTIZATION_COLOR, line=dict(width=2)),
                showlegend=False,
                hovertemplate=f"{quantization_label}<br>max |ref on fp8 − ref on unquantized| = "
                f"{quantization_error:.3g}<extra></extra>",
            ),
            row=2, col=1,
        )
        fig.add_annotation(x=1, xref="x2 domain", xanchor="right", y=math.log10(level), yref="y2",
                           yanchor="bottom", text=_quantization_text(quantization_label, quantization_error),
                           showarrow=False, align="right",
                           font=dict(color=QUANTIZATION_COLOR, size=12), bgcolor="rgba(255,255,255,0.85)")
    tol = "tolerance"
    if results:
        rtol = results[0].rtol
        tol += f" (atol = rtol = {atol:g})" if atol == rtol else f" (atol = {atol:g}, rtol = {rtol:g})"
    fig.add_hline(y=1, line=dict(color=FAIL_COLOR, dash="dash", width=1.2), row=1, col=1)
    # Annotations on a log axis take log10 coordinates (add_hline's own label does not).
    fig.add_annotation(x=0, xref="x domain", xanchor="left", y=0, yref="y", yanchor="bottom",
                       text=tol, showarrow=False, font=dict(color=FAIL_COLOR, size=_LABEL_SIZE),
                       bgcolor="rgba(255,255,255,0.85)")
    if results:
        fig.add_hline(y=atol, line=dict(color=FAIL_COLOR, dash="dot", width=1.2), row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=math.log10(atol), yref="y2",
                           yanchor="bottom", text=f"atol = {atol:g}", showarrow=False,
                           font=dict(color=FAIL_COLOR, size=_LABEL_SIZE), bgcolor="rgba(255,255,255,0.85)")
    crowded = len(results) >= CROWDED_MARKS  # "✓ pass" side by side ran into each other
    for r in results:
        fig.add_annotation(
            x=r.label, xref="x", y=1, yref="y domain", yanchor="bottom", yshift=2, showarrow=False,
            text=("✓" if r.passed else "✗") if crowded else ("✓ pass" if r.passed else "✗ FAIL"),
            hovertext=f"{r.label}: {'pass' if r.passed else 'FAIL'}",
            font=dict(size=13, color=PASS_COLOR if r.passed else FAIL_COLOR),
        )
    apply_style(fig, ACCURACY_TITLE, subtitle, height=_ACCURACY_HEIGHT)
    # Room above the plot for the pass/fail marks.
    fig.update_layout(margin=dict(t=title_margins(subtitle)[0] + _ACCURACY_MARKS_PX), showlegend=False)
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title="error ÷ tol.", row=1, col=1)
    fig.update_yaxes(title="abs error", row=2, col=1)
    fig.update_xaxes(showgrid=False, ticklabelstandoff=10)  # clear of the exact results' circles on the floor
    set_category_ticks(fig, labels)
    return fig


def history_figure(history: Sequence[Mapping], unit: str = "ms") -> go.Figure:
    """Median call latency of each implementation across the runs of a session.

    Dots, side by side within each run, on a log axis (where bars' lengths would
    mean nothing), each labelled with its time.

    Parameters
    ----------
    history : sequence of mapping
        Each with ``"run"`` (int), ``"label"`` (config summary), ``"results"``
        (list of BenchResult) and optionally ``"change"`` (what differs from the
        run before, shown under the run's number).
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
        for r in h["results"]:
            if (r.name, r.label) not in order:
                order.append((r.name, r.label))
    # Each run is named by what changed since the one before (``"change"``, from
    # explorer.bench.readouts.run_change), not by its number alone.
    xs = [f"#{h['run']}<br>{h['change']}" if h.get("change") else f"#{h['run']}" for h in history]
    fig = go.Figure()
    for name, label in order:
        ms = [next((r.median_ms for r in h["results"] if r.name == name), None) for h in history]
        ys = [in_unit(v, unit) if v is not None else None for v in ms]
        hovers = [h["label"] for h in history]
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, name=label, mode="markers+text", offsetgroup=name,
                marker=dict(color=impl_color(name), size=12, line=dict(color="white", width=1)),
                customdata=hovers,
                text=[format_duration(v, unit) if v is not None else "" for v in ms], textposition="top center",
                textfont=dict(size=10, color=impl_color(name)), cliponaxis=False,
                hovertemplate=f"{label}<br>run %{{x}}: %{{y:{MS_D3}}} {unit}<br>%{{customdata}}<extra></extra>",
            )
        )
    apply_style(fig, "Runs in this session", "median call latency per run; hover a dot for its configuration", height=380)
    fig.update_layout(scattermode="group", scattergap=0.25)
    fig.update_yaxes(title=f"median latency ({unit})", type="log")
    log_axis_range(fig, [in_unit(r.median_ms, unit) for h in history for r in h["results"]], 0.3, 0.4)
    fig.update_xaxes(title="run", type="category", showgrid=False)
    return fig
