"""Figures of the attention options in the kernel's trace: the logits before and
after soft-capping (:attr:`~explorer.kernel.trace_record.KernelTrace.logits`), and
the attention sink's bracket on the online softmax (:func:`add_sink_bracket`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import TRACE_D3, count, format_number, sig3
from explorer.panel_layout import panel_heights
from explorer.style import LINE_HEIGHT, apply_style, font_px, integer_ticks, no_data_figure, plot_area_height, scaled

#: The raw logits' colour (grey: what the kernel computes but does not use).
RAW_COLOR = "#94A3B8"
#: The capped logits' colour (what the online softmax uses).
CAPPED_COLOR = "#2563EB"
#: The figure's height at scale 1 (px).
HEIGHT = 360
#: Pixels at scale 1 between a cap's line and its label.
_LABEL_GAP = 3
#: The attention sink's colour (its bar in the merge, its term in the denominator): the
#: page's ink, as the output's mark and the merge's max-m line, named by its label;
#: 20+ CIEDE2000 from every split colour (amber #B45309 came 16 from a split's brown).
SINK_COLOR = "#111827"
#: The sink bracket's least height and its caps' width (px at scale 1): drawn to scale, a small
#: sink's term was a bracket of a few px, lost at 1280x720 (issue 27, back row). Drawn taller, its
#: label says so; its value is the label's and the hover's.
SINK_MIN_PX, SINK_CAP_PX = 24, 12
#: The l panel's headroom over its highest value (the error panel's too).
L_HEADROOM = 1.08


def cap_label(y: float) -> str:
    """The label of the cap's line at ``y`` (``+soft_cap`` or ``-soft_cap``), its
    number as typed and its minus sign Plotly's tick labels' (U+2212):
    ``"+cap = 50"``, ``"−cap = −50"``."""
    sign = "+" if y > 0 else "\u2212"
    return f"{sign}cap = {sign if y < 0 else ''}{format_number(abs(y))}"


def logits_figure(logits, soft_cap: float | None) -> go.Figure:
    """The scaled logits ``s = scale * q.k`` of every attended position, raw and
    soft-capped (``soft_cap * tanh(s / soft_cap)``), with the cap's lines at
    ``±soft_cap``.

    Parameters
    ----------
    logits : DataFrame
        :attr:`~explorer.kernel.trace_record.KernelTrace.logits` (columns
        ``token``, ``raw``, ``capped``; natural units).
    soft_cap : float or None
        The cap; None draws the raw logits alone.

    Returns
    -------
    go.Figure
        Trace 0: ``"raw logit"`` markers (``x`` = token); trace 1 with a cap:
        ``"soft-capped"`` (what the online softmax uses); the cap's dotted lines
        are layout shapes at ``±soft_cap``, each labelled (:func:`cap_label`) by an
        annotation inside the plot at its right end, the y range holding both.
    """
    title = "Logits: raw and soft-capped" if soft_cap is not None else "Logits"
    if logits is None or not len(logits):
        return no_data_figure(go.Figure(), "No logits: the sequence is empty.", title, 300)
    fig = go.Figure()
    x = logits["token"].to_numpy()
    raw, capped = logits["raw"].to_numpy(float), logits["capped"].to_numpy(float)
    fig.add_trace(go.Scatter(x=x, y=raw, name="raw logit", mode="markers", marker=dict(size=5, color=RAW_COLOR),
                             hovertemplate="token %{x:,}: s = %{y:" + TRACE_D3 + "}<extra>raw</extra>"))
    if soft_cap is not None:
        fig.add_trace(go.Scatter(
            x=x, y=capped, name="soft-capped", mode="markers", marker=dict(size=5, color=CAPPED_COLOR),
            hovertemplate="token %{x:,}: cap·tanh(s / cap) = %{y:" + TRACE_D3 + "}<extra>soft-capped</extra>"))
    over = int((np.abs(raw) > soft_cap).sum()) if soft_cap is not None else 0
    subtitle = (f"dotted = ±cap; the online softmax uses the soft-capped logits; {count(over, 'raw logit')} "
                f"{'lies' if over == 1 else 'lie'} past the cap"
                if soft_cap is not None else "no soft-cap: the online softmax uses these")
    apply_style(fig, title, subtitle, height=HEIGHT)
    if soft_cap is not None:
        # Each label inside the plot at its line's right end, above +cap and below −cap: at the
        # left they ran into the y tick labels ("+cap = +50" into "60").
        for y in (soft_cap, -soft_cap):
            fig.add_hline(y=y, line=dict(color="#111827", dash="dot", width=1))
            fig.add_annotation(xref="paper", x=1, xanchor="right", y=y, yanchor="bottom" if y > 0 else "top",
                               yshift=scaled(_LABEL_GAP) * (1 if y > 0 else -1), text=cap_label(y), showarrow=False,
                               font=dict(size=font_px("label")), bgcolor="rgba(255,255,255,0.8)")
        # Room for both labels within the plot, beyond the lines and the logits.
        lo, hi = min(float(raw.min()), -soft_cap), max(float(raw.max()), soft_cap)
        share = min((LINE_HEIGHT * font_px("label") + scaled(2 * _LABEL_GAP)) / plot_area_height(HEIGHT, subtitle), 0.3)
        pad = (hi - lo) * share / (1 - 2 * share)
        fig.update_yaxes(range=[lo - pad, hi + pad])
    fig.update_xaxes(title="logical token position", **integer_ticks(int(x.min()), int(x.max())))
    fig.update_yaxes(title="scaled logit s = scale·q·k")
    fig.update_layout(showlegend=soft_cap is not None)  # apply_style's legend, under the plot
    return fig


def add_sink_bracket(fig: go.Figure, x: float, l_final: float, sink_term: float, l_top: float, *,
                     row: int = 2, col: int = 1) -> bool:
    """Draw the sink's term on the online softmax's l panel (``row``, ``col`` of a styled ``fig``, its
    height and margins final): a bracket at ``x`` from ``l_final`` (the finished row's denominator
    before the sink) up by ``sink_term``, or by :data:`SINK_MIN_PX` (grown with the scale) where the
    term is shorter on screen, labelled with its value (``"+ sink 0.0123"``, and ``"(not to scale)"``
    when drawn taller). Sets the panel's y range, ``[0, R]``: :data:`L_HEADROOM` over ``l_top`` (the
    panel's highest l) and over the bracket. Returns whether the bracket was drawn taller than its term.

    The bracket is trace ``"sink"`` (``y`` = its ends, ``customdata`` = ``(l_final, sink_term)``),
    its caps two layout shapes ``"sink cap"`` :data:`SINK_CAP_PX` wide in pixels (no marker: a marker
    symbol is a mark of :data:`~explorer.marks.ALL_MARKS`), its label an annotation ``"sink label"``.
    """
    panel = panel_heights(fig)[row - 1]
    least = min(scaled(SINK_MIN_PX), panel / 3)
    top = max(l_top, l_final + sink_term) * L_HEADROOM
    enlarged = sink_term * panel / top < least
    if enlarged:  # the panel's top over the taller bracket: l_final + least * top / panel <= top / headroom
        top = max(top, l_final / (1 / L_HEADROOM - least / panel))
    high = l_final + (least * top / panel if enlarged else sink_term)
    fig.add_trace(go.Scatter(
        x=[x, x], y=[l_final, high], name="sink", mode="lines", line=dict(color=SINK_COLOR, width=3),
        showlegend=False, customdata=[[l_final, sink_term]] * 2,
        hovertemplate="the denominator: l = %{customdata[0]:" + TRACE_D3 + "} (all splits, on the common max)<br>+ "
        "the sink's term 2^(sink − m) = %{customdata[1]:" + TRACE_D3 + "}<extra></extra>",
    ), row=row, col=col)
    cap = scaled(SINK_CAP_PX)
    for y in (l_final, high):  # a bracket's caps, one width at both ends (issue 27 review 3)
        fig.add_shape(type="line", xsizemode="pixel", xanchor=x, x0=-cap / 2, x1=cap / 2, y0=y, y1=y,
                      line=dict(color=SINK_COLOR, width=3), name="sink cap", row=row, col=col)
    fig.add_annotation(x=x, y=high, xanchor="right", yanchor="middle", xshift=-(cap / 2 + scaled(3)), showarrow=False,
                       text=f"+ sink {sig3(sink_term)}" + (" (not to scale)" if enlarged else ""),
                       font=dict(size=font_px("label"), color=SINK_COLOR), bgcolor="rgba(255,255,255,0.8)",
                       name="sink label", row=row, col=col)
    fig.update_yaxes(range=[0, top], row=row, col=col)
    return enlarged
