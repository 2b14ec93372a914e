"""Figures of benchmark results (lists of :class:`~paged_attention.bench.BenchResult`):
latency, speedup, bandwidth, accuracy against tolerance, and the run history.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import format_bytes, format_ms, format_speedup
from .style import ERROR_FLOOR, FAIL_COLOR, PASS_COLOR, _alpha, _log_range, _margins, _style, impl_color

def latency_figure(results: Sequence, *, log_y: bool = True) -> go.Figure:
    """Per-call latency: every timed sample as a box with its points, median
    labelled, and the CUDA-graph GPU time as a diamond where measured.

    Parameters
    ----------
    results : sequence of BenchResult

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
                y=list(r.samples_ms),
                x=[r.label] * len(r.samples_ms),
                name=r.label,
                marker=dict(color=color, size=5, opacity=0.6),
                line=dict(color=color, width=1.5),
                fillcolor=_alpha(color, 0.18),
                boxpoints="all",
                jitter=0.35,
                pointpos=0,
                hovertemplate=f"{r.label}<br>%{{y:.4g}} ms<extra></extra>",
                showlegend=False,
            )
        )
        fig.add_annotation(
            x=r.label, y=math.log10(max(r.p80_ms, 1e-9)) if log_y else r.p80_ms, text=f"<b>{format_ms(r.median_ms)}</b>",
            showarrow=False, yshift=16, font=dict(size=12, color=color),
        )
    gpu = [r for r in results if getattr(r, "gpu_time_ms", None) is not None]
    if gpu:
        fig.add_trace(
            go.Scatter(
                x=[r.label for r in gpu],
                y=[r.gpu_time_ms for r in gpu],
                mode="markers",
                marker=dict(symbol="diamond", size=13, color="#111827", line=dict(color="white", width=1.5)),
                name="GPU time (CUDA graph)",
                hovertemplate="%{x}<br>GPU time %{y:.4g} ms<extra></extra>",
            )
        )
    device = results[0].device if results else ""
    subtitle = "box = call latency over all timed calls (median line, quartiles)"
    if gpu:
        subtitle += "; ◆ = GPU time without launch overhead"
    _style(fig, f"Latency per decode step ({device})", subtitle, height=430)
    fig.update_yaxes(title="latency (ms)", type="log" if log_y else "linear")
    if log_y:
        _log_range(fig, [v for r in results for v in [*r.samples_ms, r.gpu_time_ms or r.median_ms]], 0.25, 0.45)
    fig.update_xaxes(title=None)
    return fig


def speedup_figure(results: Sequence, baseline: str = "naive") -> go.Figure:
    """Speedup of each implementation's median call latency over ``baseline``'s.

    Returns
    -------
    go.Figure
        One bar trace; empty (with a note) when the baseline did not run.
    """
    base = next((r for r in results if r.name == baseline), None)
    fig = go.Figure()
    if base is None:
        fig.add_annotation(text=f"No {baseline} result to compare against.", showarrow=False)
        return _style(fig, "Speedup", height=360)
    speed = [base.median_ms / r.median_ms if r.median_ms > 0 else float("nan") for r in results]
    fig.add_trace(
        go.Bar(
            x=[r.label for r in results],
            y=speed,
            marker=dict(color=[impl_color(r.name) for r in results]),
            text=[format_speedup(s) for s in speed],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}<br>%{y:.3g}× faster than " + base.label + "<extra></extra>",
            name="speedup",
        )
    )
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    finite = [s for s in speed if math.isfinite(s) and s > 0]
    log = bool(finite) and max(finite) / min(finite) > 30
    _style(fig, f"Speedup over {base.label}", "median call latency of the baseline ÷ median of each", height=360)
    fig.update_yaxes(title="speedup (×)", type="log" if log else "linear", rangemode="tozero")
    if log:
        _log_range(fig, finite, 0.3, 0.4)
    else:
        fig.update_yaxes(range=[0, max(finite, default=1) * 1.2])
    fig.update_layout(showlegend=False)
    return fig


def bandwidth_figure(results: Sequence, copy_gbps: float | None = None) -> go.Figure:
    """Achieved bandwidth (bytes a decode step must move ÷ time) in GB/s.

    Bars for call latency, and beside them for GPU time where measured; with
    ``copy_gbps`` (this device's measured copy bandwidth) a line marks it and
    each bar is labelled with the fraction reached.

    Returns
    -------
    go.Figure
        Trace 0: "call latency" bars; trace 1 (when any GPU time): "GPU time" bars.
    """
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
            y=[r.gbps for r in results],
            marker=dict(color=colors),
            text=[label(r.gbps) for r in results],
            textposition="outside",
            cliponaxis=False,
            name="from call latency",
            hovertemplate="%{x}<br>%{y:,.1f} GB/s from call latency<extra></extra>",
        )
    )
    if any(r.gpu_gbps is not None for r in results):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r.gpu_gbps for r in results],
                marker=dict(color=[_alpha(c, 0.45) for c in colors], line=dict(color=colors, width=1.5),
                            pattern=dict(shape="/", fgcolor="white")),
                text=[label(r.gpu_gbps) for r in results],
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
    bytes_moved = results[0].bytes_moved if results else 0
    _style(fig, "Achieved memory bandwidth", f"{format_bytes(bytes_moved, 3)} moved per decode step (K, V once, Q, O)",
           height=380)
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(title="GB/s", rangemode="tozero")
    return fig


def accuracy_figure(results: Sequence) -> go.Figure:
    """Error against the float64 reference, in two panels sharing the x axis.

    Top: the tolerance ratio ``max |out − ref| / (atol + rtol·|ref|)`` (the
    result's ``max_tol_ratio``), with a line at 1: a result passes exactly when
    its bar stays below it. Bottom: the max absolute error with ``atol`` as a
    line. Relative error is not drawn: it is large wherever the reference is near
    zero, even for a correct output. Both axes are logarithmic.

    Exact results (error 0) are drawn a decade under the smallest other bar or
    line of their panel and labelled "0 (exact)"; NaN or inf at the top of the
    axis and labelled in the hover. A result without
    ``max_tol_ratio`` uses ``max_abs_err / atol``, an upper bound of it.

    Parameters
    ----------
    results : sequence of BenchResult

    Returns
    -------
    go.Figure
        Trace 0: "max abs error" (bottom panel, ``yaxis2``); trace 1:
        "error ÷ tolerance" (top panel, ``yaxis``); ``y`` floored and finite.
    """
    from plotly.subplots import make_subplots

    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def ratio(r) -> float:
        value = getattr(r, "max_tol_ratio", None)
        return r.max_abs_err / r.atol if value is None else value

    ratios = [ratio(r) for r in results]
    # Exact results (error 0) sit a decade under the smallest bar or line drawn,
    # not at ERROR_FLOOR: an all-exact run would otherwise span twelve decades.
    positive = [v for v in ratios if math.isfinite(v) and v > 0] + [1.0]
    ratio_floor = max(ERROR_FLOOR, min(positive) / 10)
    positive = [r.max_abs_err for r in results if math.isfinite(r.max_abs_err) and r.max_abs_err > 0]
    abs_floor = max(ERROR_FLOOR, min(positive + [results[0].atol if results else 1e-3]) / 10)

    def clean(v: float, floor: float = ERROR_FLOOR) -> float:
        if not math.isfinite(v):
            return 1e3
        return max(v, floor)

    def hover(v: float) -> str:
        if not math.isfinite(v):
            return "NaN/inf"
        return "0 (exact)" if v == 0 else f"{v:.3g}"

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(r.max_abs_err, abs_floor) for r in results], name="max abs error",
            text=["0 (exact)" if r.max_abs_err == 0 else "" for r in results], textposition="outside",
            marker=dict(color=[_alpha(c, 0.4) for c in colors], line=dict(color=colors, width=1.5)),
            showlegend=False,
            customdata=[hover(r.max_abs_err) for r in results],
            hovertemplate="%{x}<br>max |out − ref| = %{customdata}<extra></extra>",
        ),
        row=2, col=1,
    )
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(v, ratio_floor) for v in ratios], name="error ÷ tolerance", marker=dict(color=colors),
            text=["0 (exact)" if v == 0 else "" for v in ratios], textposition="outside",
            showlegend=False,
            customdata=np.array([[hover(v), hover(r.max_abs_err)] for v, r in zip(ratios, results)], dtype=object)
            if results else None,
            hovertemplate="%{x}<br>max |out − ref| / (atol + rtol·|ref|) = %{customdata[0]}"
            "<br>max |out − ref| = %{customdata[1]}<extra></extra>",
        ),
        row=1, col=1,
    )
    tol = "tolerance"
    if results:
        atol, rtol = results[0].atol, results[0].rtol
        tol += f" (atol = rtol = {atol:g})" if atol == rtol else f" (atol = {atol:g}, rtol = {rtol:g})"
    fig.add_hline(y=1, line=dict(color=FAIL_COLOR, dash="dash", width=1.2), row=1, col=1)
    # Annotations on a log axis take log10 coordinates (add_hline's own label does not).
    fig.add_annotation(x=0, xref="x domain", xanchor="left", y=0, yref="y", yanchor="bottom",
                       text=tol, showarrow=False, font=dict(color=FAIL_COLOR, size=12),
                       bgcolor="rgba(255,255,255,0.85)")
    if results:
        fig.add_hline(y=atol, line=dict(color=FAIL_COLOR, dash="dot", width=1.2), row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=math.log10(atol), yref="y2",
                           yanchor="bottom", text=f"atol = {atol:g}", showarrow=False,
                           font=dict(color=FAIL_COLOR, size=12), bgcolor="rgba(255,255,255,0.85)")
    for r in results:
        fig.add_annotation(
            x=r.label, xref="x", y=1, yref="y domain", yanchor="bottom", yshift=2, showarrow=False,
            text="✓ pass" if r.passed else "✗ FAIL",
            font=dict(size=13, color=PASS_COLOR if r.passed else FAIL_COLOR),
        )
    subtitle = "top: max of |out − ref| / (atol + rtol·|ref|), pass ≤ 1; bottom: max |out − ref|"
    _style(fig, "Error against the float64 reference", subtitle, height=480)
    # Room above the plot for the pass/fail marks.
    fig.update_layout(bargap=0.3, margin=dict(t=_margins(subtitle)[0] + 26), showlegend=False)
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title="error ÷ tol.", row=1, col=1)
    fig.update_yaxes(title="abs error", row=2, col=1)
    # Whole decades on both panels: the minor 2…9 labels of a short log axis crowd a panel this low.
    _log_range(fig, [clean(v, ratio_floor) for v in ratios] + [1.0], 0.4, 0.5, min_span=2, row=1, col=1)
    _log_range(fig, [clean(r.max_abs_err, abs_floor) for r in results] + ([results[0].atol] if results else []),
               0.4, 0.5, min_span=2, row=2, col=1)
    return fig


def history_figure(history: Sequence[Mapping]) -> go.Figure:
    """Median call latency of each implementation across the runs of a session.

    Parameters
    ----------
    history : sequence of mapping
        Each with ``"run"`` (int), ``"label"`` (config summary) and ``"results"``
        (list of BenchResult).

    Returns
    -------
    go.Figure
        One bar trace per implementation seen, grouped by run (log y).
    """
    order: list[tuple[str, str]] = []
    for h in history:
        for r in h["results"]:
            if (r.name, r.label) not in order:
                order.append((r.name, r.label))
    xs = [f"#{h['run']}" for h in history]
    fig = go.Figure()
    for name, label in order:
        ys, hovers = [], []
        for h in history:
            r = next((r for r in h["results"] if r.name == name), None)
            ys.append(r.median_ms if r else None)
            hovers.append(h["label"])
        fig.add_trace(
            go.Bar(
                x=xs, y=ys, name=label, marker=dict(color=impl_color(name)), customdata=hovers,
                text=[format_ms(y) if y is not None else "" for y in ys], textposition="outside",
                textfont=dict(size=10), cliponaxis=False,
                hovertemplate=f"{label}<br>run %{{x}}: %{{y:.4g}} ms<br>%{{customdata}}<extra></extra>",
            )
        )
    _style(fig, "Runs in this session", "median call latency per run; hover a bar for its configuration", height=380)
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(title="median latency (ms)", type="log")
    _log_range(fig, [r.median_ms for h in history for r in h["results"]], 0.2, 0.3)
    fig.update_xaxes(title="run", type="category")
    return fig
