"""The block-size trade-off of the serving simulation: waste in last blocks against
kernel latency, one point per block size (:func:`~explorer.serving.tradeoff.block_size_tradeoff`)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go

from explorer.category_ticks import set_category_ticks
from explorer.formatting import (
    MS_D3,
    duration_unit,
    format_number,
    format_percent,
    in_unit,
    sig3,
)
from explorer.serving.figures import WASTE_COLOR
from explorer.style import (
    FULL_FIGURE_PX,
    FULL_PLOT_WIDTH_PX,
    apply_style,
    impl_color,
    scaled,
    with_alpha,
)


def tradeoff_figure(table, latency_ms: Mapping[int, float] | None = None, current: int | None = None,
                    unit: str | None = None) -> go.Figure:
    """Block size trade-off on one request stream: memory wasted in partly filled
    last blocks (bars, left axis) against the Triton kernel's latency on each
    block size's busiest step (line, right axis, once measured).

    Parameters
    ----------
    table : DataFrame
        :func:`~explorer.serving.tradeoff.block_size_tradeoff`'s table.
    latency_ms : mapping, optional
        ``block_size -> milliseconds``.
    current : int, optional
        The block size chosen on the page (its bar is outlined).
    unit : {"µs", "ms", "s"}, optional
        The unit the latency is drawn in, the page's one
        (:func:`~explorer.serving.view.page_duration_unit`); by default the
        latencies' own (:func:`~explorer.formatting.duration_unit`).

    Returns
    -------
    go.Figure
        Trace 0: bars ``"wasted slots (%)"`` (``y`` = percent of allocated slots);
        trace 1 (when latencies are given): ``"Triton latency"`` on ``y2``, in
        ``unit`` (the axis' title names it).
    """
    sizes = table["block_size"].astype(int).tolist()
    x = [str(b) for b in sizes]
    waste = 100 * table["wasted_fraction"].to_numpy(float)
    # Means to three significant figures; the stalled sequence-steps, a count, exactly.
    custom = np.stack([*([sig3(v) for v in table[column].to_numpy(float)] for column in
                         ("mean_wasted_slots", "mean_blocks_in_use", "mean_waiting")),
                       [format_number(int(v)) for v in table["stalled"]]], axis=-1)
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=x, y=waste, name="wasted slots (%)", marker=dict(
            color=[with_alpha(WASTE_COLOR, 0.85 if b == current else 0.55) for b in sizes],
            line=dict(color=["#111827" if b == current else WASTE_COLOR for b in sizes], width=[2 if b == current else 1 for b in sizes]),
        ),
        # The labels at the cell size of now, whole: uniformtext hid those wider than
        # their bar in presentation mode (a bar's slot holds them).
        text=[format_percent(w / 100) for w in waste], textposition="outside", cliponaxis=False,
        constraintext="none", customdata=custom,
        hovertemplate="block size %{x}<br>%{text} of allocated slots wasted (mean %{customdata[0]} slots)"
        "<br>mean blocks in use %{customdata[1]}<br>mean waiting %{customdata[2]}, "
        "stalled %{customdata[3]} sequence-steps<extra></extra>",
    ))
    subtitle = "bars: slots allocated but unfilled, as % of allocated (mean over the run)"
    if current in sizes:  # the darker, outlined bar says which (review 3: unexplained)
        subtitle += f"; dark outlined bar: block size {current}, the page's"
    if latency_ms:
        measured = [b for b in sizes if b in latency_ms]
        unit = unit or duration_unit(list(latency_ms.values()))
        fig.add_trace(go.Scatter(
            x=[str(b) for b in measured], y=[in_unit(latency_ms[b], unit) for b in measured], name="Triton latency",
            mode="lines+markers", yaxis="y2", line=dict(color=impl_color("triton"), width=2.4),
            marker=dict(size=9, color=impl_color("triton")),
            hovertemplate=f"block size %{{x}}<br>Triton decode %{{y:{MS_D3}}} {unit} on the shared batch<extra></extra>",
        ))
        subtitle += "; line: Triton decode latency, one batch laid out in each block size"
        fig.update_layout(yaxis2=dict(title=f"Triton latency ({unit})", overlaying="y", side="right", rangemode="tozero",
                                      tickmode="auto", nticks=6,
                                      showgrid=False, color=impl_color("triton")))
    apply_style(fig, "Block size: memory waste against kernel latency", subtitle, height=420,
                width_px=FULL_FIGURE_PX)
    fig.update_xaxes(title="block size (tokens)", type="category")
    set_category_ticks(fig, x, FULL_PLOT_WIDTH_PX)
    # The waste axis only: update_yaxes would also reach the latency axis (y2).
    fig.update_layout(yaxis=dict(title="wasted slots (% of allocated)", rangemode="tozero",
                                 range=[0, max([*waste, 1]) * 1.2]),
                      margin=dict(r=scaled(70 if latency_ms else 20)), bargap=0.35)
    return fig
