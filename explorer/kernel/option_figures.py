"""Figures of the attention options in the kernel's trace: the logits before and
after soft-capping (:attr:`~explorer.kernel.trace_record.KernelTrace.logits`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import TRACE_D3, count, format_number
from explorer.style import LINE_HEIGHT, apply_style, font_px, integer_ticks, no_data_figure, plot_area_height, scaled

#: The raw logits' colour (grey: what the kernel computes but does not use).
RAW_COLOR = "#94A3B8"
#: The capped logits' colour (what the online softmax uses).
CAPPED_COLOR = "#2563EB"
#: The figure's height at scale 1 (px).
HEIGHT = 360
#: Pixels at scale 1 between a cap's line and its label.
_LABEL_GAP = 3


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
