"""Figures of the attention options in the kernel's trace: the logits before and
after soft-capping (:attr:`~explorer.kernel.trace_record.KernelTrace.logits`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import TRACE_D3
from explorer.style import apply_style, integer_ticks, no_data_figure

#: The raw logits' colour (grey: what the kernel computes but does not use).
RAW_COLOR = "#94A3B8"
#: The capped logits' colour (what the online softmax uses).
CAPPED_COLOR = "#2563EB"


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
        are layout shapes at ``±soft_cap``.
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
        for y in (soft_cap, -soft_cap):
            fig.add_hline(y=y, line=dict(color="#111827", dash="dot", width=1),
                          annotation_text=f"{'+' if y > 0 else '−'}cap = {y:+.3g}", annotation_position="top left")
    over = int((np.abs(raw) > soft_cap).sum()) if soft_cap is not None else 0
    subtitle = (f"dotted = ±cap; the online softmax uses the soft-capped logits; {over:,} raw lie past the cap"
                if soft_cap is not None else "no soft-cap: the online softmax uses these")
    apply_style(fig, title, subtitle, height=360)
    fig.update_xaxes(title="logical token position", **integer_ticks(int(x.min()), int(x.max())))
    fig.update_yaxes(title="scaled logit s = scale·q·k")
    fig.update_layout(showlegend=soft_cap is not None)  # apply_style's legend, under the plot
    return fig
