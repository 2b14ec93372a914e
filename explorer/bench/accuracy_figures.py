"""The error chart of benchmark results (lists of
:class:`~paged_attention.results.BenchResult`): each implementation's error against
the float64 reference and its tolerance, and an fp8 cache's quantization error
apart from the kernels'.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.bench.view import significant
from explorer.category_ticks import set_category_ticks
from explorer.formatting import decade_ticks, sig3_trim
from explorer.panel_layout import stacked_panels
from explorer.style import (
    ERROR_FLOOR,
    FAIL_COLOR,
    PASS_COLOR,
    apply_style,
    font_px,
    impl_color,
    log_axis_range,
    plot_area_height,
    scaled,
    with_alpha,
)

#: Colour of the tolerance lines (dashed: error = tolerance; dotted: atol) and their
#: labels: near-black, which no implementation's colour is (red was Naive PyTorch's).
TOLERANCE_COLOR = "#111827"
#: Colour and default name of the fp8 quantization error's line on the error chart: a
#: dark amber-brown, 20+ CIEDE2000 from every implementation's colour, the pass/fail
#: marks' and the tolerance's (violet #7C3AED came 12 from Triton (prefix-aware)'s magenta).
QUANTIZATION_COLOR = "#7A4A0A"
QUANTIZATION_LABEL = "fp8 quantization error (vs unquantized cache)"

#: The error chart's title: short enough to stay on one line in presentation mode.
ACCURACY_TITLE = "Error vs float64 reference"
#: The pass/fail marks over the error chart, the same for any number of
#: implementations (the subtitle says what they mean; hover gives the word):
#: "✓ pass" four abreast touched at presentation size.
PASS_MARK, FAIL_MARK = "✓", "✗"


def _quantization_text(label: str, error: float) -> str:
    """The quantization line's label: the value after the label's first words, any
    parenthesis on a second line, so that it stays inside a half-page plot at
    presentation size (on one line it ran left over the axis)."""
    head, sep, rest = label.partition(" (")
    return f"{head}: {significant(error)}<br>({rest}" if sep else f"{label}: {significant(error)}"


def decade_text(value: float) -> str:
    """How the error chart writes a decade, on both panels: as a card or the check
    table writes that error or ratio (:func:`~explorer.formatting.sig3`), its trailing
    zeros dropped (:func:`~explorer.formatting.sig3_trim`): ``0.01 -> "0.01"``
    (the card's ``"0.0100"``), ``1e-7 -> "1e-7"`` (the card's ``"1.00e-7"``). One
    decade read ``"0.01×"`` on the ratio panel and ``"1e-2"`` on the abs-error panel
    beside it (issue 27)."""
    return sig3_trim(value)


def ratio_ticks(fig: go.Figure, **where) -> None:
    """Label the tolerance-ratio panel's decades as multiples of the tolerance,
    :func:`decade_text` and ``"×"`` (``"1×"`` on its line, ``"0.1×"``, ``"0.01×"``),
    at the decades Plotly would tick (every ``dtick``-th of the axis' range), so
    that none reads as the abs-error panel's ``"0.1"`` below it: the same label
    written twice on one chart read as a bug from the back of a room (issue 27).
    ``where`` (``row``, ``col``) picks the panel's axis."""
    _decade_ticks(fig, lambda v: f"{decade_text(v)}×", **where)


def error_ticks(fig: go.Figure, **where) -> None:
    """Label the abs-error panel's decades by :func:`decade_text` (``"0.001"``,
    ``"1e-7"``, as a card writes ``0.00100``, ``1.94e-16``; Plotly's ``"~e"`` wrote
    ``"1e−3"``, another minus), at the tick font's full size
    (``exponentformat="power"`` drew its exponents at 0.75 of it)."""
    _decade_ticks(fig, decade_text, **where)


def _decade_ticks(fig: go.Figure, text, **where) -> None:
    axis = next(iter(fig.select_yaxes(**where)))
    lo, hi = axis.range
    fig.update_yaxes(**decade_ticks(lo, hi, int(axis.dtick or 1), text), **where)


def _quantization_yshift() -> float:
    """Pixels from the quantization line up to its label's bottom: half the line's
    end marks (28 px at scale 1) and a gap scaled to the label's font, so that the
    label's box does not cover its own dashed line at any size (issue 27)."""
    return scaled(14) + font_px("label") * 0.3


#: Pixels over the accuracy chart's plot for the pass/fail marks, and between its two
#: panels (the tick labels' overhang), at scale 1.
_ACCURACY_MARKS_PX, _ACCURACY_GAP_PX = 26, 32


def accuracy_figure(
    results: Sequence, quantization_error: float | None = None, quantization_label: str = QUANTIZATION_LABEL
) -> go.Figure:
    """Error against the float64 reference, in two panels sharing the x axis: a dot
    per implementation (both axes are logarithmic, where a bar's length would mean
    nothing and an exact zero has no place).

    Top: the tolerance ratio ``max |out − ref| / (atol + rtol·|ref|)`` (the
    result's ``max_tol_ratio``), with a line at 1: a result passes exactly when
    its dot stays at or below it, its decades written as multiples of the
    tolerance (``"1×"``, ``"0.1×"``: :func:`ratio_ticks`). Bottom: the max absolute
    error with ``atol`` as a line, its decades ``"0.001"`` (:func:`error_ticks`; both
    panels write a decade as the cards do, :func:`decade_text`). Relative error is not drawn: it is large wherever the reference is near
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
        (bottom panel, ``y`` the error at every implementation). Over the top
        panel, an annotation per implementation: :data:`PASS_MARK` or
        :data:`FAIL_MARK`.
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
        return "0 (exact)" if v == 0 else significant(v)

    def mark(v: float) -> str:
        return "NaN/inf" if not math.isfinite(v) else "0 (exact)" if v == 0 else ""

    quantized = quantization_error is not None and math.isfinite(quantization_error) and bool(results)
    subtitle = (f"top: max of |out − ref| / (atol + rtol·|ref|), {PASS_MARK} pass ≤ 1; "
                "bottom: max |out − ref|")
    if quantized:
        subtitle += "; ref = float64 on the dequantized fp8 cache"
    # Panels of a readable height (115 px each read as strips 630 px wide at 1920 px).
    panels = stacked_panels(2, subtitle, gap_px=_ACCURACY_GAP_PX, above_plot=_ACCURACY_MARKS_PX)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=panels.spacing)
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
    panel_px = (domain[1] - domain[0]) * plot_area_height(panels.height, subtitle, _ACCURACY_MARKS_PX)
    share = min((font_px("label") * 1.2 + scaled(6)) / panel_px, 0.5)
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
            text=[mark(v) for v in errors], textposition=positions(errors), textfont=dict(size=font_px("label")),
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
            text=[mark(v) for v in ratios], textposition=positions(ratios), textfont=dict(size=font_px("label")),
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
                f"{significant(quantization_error)}<extra></extra>",
            ),
            row=2, col=1,
        )
        fig.add_annotation(x=1, xref="x2 domain", xanchor="right", y=math.log10(level), yref="y2",
                           yanchor="bottom", yshift=_quantization_yshift(),
                           text=_quantization_text(quantization_label, quantization_error),
                           showarrow=False, align="right",
                           font=dict(color=QUANTIZATION_COLOR, size=font_px("label")), bgcolor="rgba(255,255,255,0.85)")
    tol = "tolerance"
    if results:
        rtol = results[0].rtol
        tol += (f" (atol = rtol = {significant(atol)})" if atol == rtol
                else f" (atol = {significant(atol)}, rtol = {significant(rtol)})")
    fig.add_hline(y=1, line=dict(color=TOLERANCE_COLOR, dash="dash", width=1.2), row=1, col=1)
    # Annotations on a log axis take log10 coordinates (add_hline's own label does not).
    fig.add_annotation(x=0, xref="x domain", xanchor="left", y=0, yref="y", yanchor="bottom",
                       text=tol, showarrow=False, font=dict(color=TOLERANCE_COLOR, size=font_px("label")),
                       bgcolor="rgba(255,255,255,0.85)")
    if results:
        fig.add_hline(y=atol, line=dict(color=TOLERANCE_COLOR, dash="dot", width=1.2), row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=math.log10(atol), yref="y2",
                           yanchor="bottom", text=f"atol = {significant(atol)}", showarrow=False,
                           font=dict(color=TOLERANCE_COLOR, size=font_px("label")), bgcolor="rgba(255,255,255,0.85)")
    for r in results:
        fig.add_annotation(
            x=r.label, xref="x", y=1, yref="y domain", yanchor="bottom", yshift=2, showarrow=False,
            text=PASS_MARK if r.passed else FAIL_MARK,
            hovertext=f"{r.label}: {'pass' if r.passed else 'FAIL'}",
            font=dict(size=font_px("body"), color=PASS_COLOR if r.passed else FAIL_COLOR),
        )
    # Room above the plot for the pass/fail marks.
    apply_style(fig, ACCURACY_TITLE, subtitle, height=panels.height, above_plot=_ACCURACY_MARKS_PX)
    fig.update_layout(showlegend=False)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title="error ÷ tol.", row=1, col=1)
    ratio_ticks(fig, row=1, col=1)
    fig.update_yaxes(title="abs error", row=2, col=1)
    error_ticks(fig, row=2, col=1)
    fig.update_xaxes(showgrid=False, ticklabelstandoff=10)  # clear of the exact results' circles on the floor
    set_category_ticks(fig, labels)
    return fig
