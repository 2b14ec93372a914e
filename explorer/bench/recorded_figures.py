"""Figures of a benchmark set recorded on a GPU (:mod:`explorer.bench.recorded`), drawn
apart from any live run and titled as recorded."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from explorer.bench.figures import spaced_log_ticks
from explorer.formatting import LOG_TICK_D3, format_duration, in_unit
from explorer.category_ticks import set_category_ticks
from explorer.style import FULL_FIGURE_PX, FULL_PLOT_WIDTH_PX, apply_style, font_px, impl_color, log_axis_range

#: Fill of the configuration that matches the sidebar's.
HIGHLIGHT_COLOR = "rgba(250, 204, 21, 0.25)"


def kv_token_order(rows: pd.DataFrame) -> list[str]:
    """The ``configuration`` names of ``rows`` (with ``batch_size`` and ``context_len``) in
    the order of the K/V tokens they hold, ``batch_size x context_len``, ascending (the
    smaller batch first where two hold as many): ``batch 2 × 60``, ``batch 1 × 512``,
    ``batch 16 × 256``..."""
    configs = rows.drop_duplicates("configuration")
    tokens = configs["batch_size"].astype(int) * configs["context_len"].astype(int)
    order = sorted(range(len(configs)), key=lambda i: (tokens.iloc[i], int(configs["batch_size"].iloc[i])))
    return [configs["configuration"].iloc[i] for i in order]


def recorded_latency_figure(
    rows: pd.DataFrame, *, gpu: str, date: str, layout: str, highlight: str | None = None, unit: str = "ms"
) -> go.Figure:
    """Recorded latency per implementation per configuration, as dots on a log axis.

    Parameters
    ----------
    rows : pd.DataFrame
        :func:`explorer.bench.recorded.recorded_rows` of one layout: ``configuration``,
        ``implementation``, ``key``, ``gpu_time_ms`` (NaN where not measured) and
        ``median_ms``, in ms.
    gpu, date, layout : str
        Where, when and with which block layout the rows were recorded (title and
        subtitle).
    highlight : str, optional
        A ``configuration`` to mark as the sidebar's own (a shaded band).
    unit : str
        The unit of the axis and hovers (``"µs"``, ``"ms"`` or ``"s"``: the page's
        :func:`explorer.formatting.duration_unit`).

    Returns
    -------
    go.Figure
        Per implementation, in order, a trace "<label> · GPU time" of filled dots
        (only where GPU time was measured), then one "<label> · call latency" of
        hollow dots; every name and the title say "recorded".
    """
    fig = go.Figure()
    configs = kv_token_order(rows)
    for label, group in rows.groupby("implementation", sort=False):
        color = impl_color(group["key"].iloc[0])
        gpu_rows = group[group["gpu_time_ms"].notna()]
        common = dict(mode="markers", offsetgroup=label, legendgroup=label)
        if not gpu_rows.empty:
            fig.add_trace(go.Scatter(
                x=list(gpu_rows["configuration"]), y=[in_unit(v, unit) for v in gpu_rows["gpu_time_ms"]], name=f"{label} · GPU time",
                marker=dict(color=color, size=11, symbol="circle", line=dict(color="white", width=1)),
                customdata=[format_duration(v, unit) for v in gpu_rows["gpu_time_ms"]],
                hovertemplate=f"recorded · {label}<br>%{{x}}<br>GPU time %{{customdata}}<extra></extra>",
                **common,
            ))
        fig.add_trace(go.Scatter(
            x=list(group["configuration"]), y=[in_unit(v, unit) for v in group["median_ms"]], name=f"{label} · call latency",
            marker=dict(color=color, size=10, symbol="circle-open", line=dict(color=color, width=2)),
            customdata=[format_duration(v, unit) for v in group["median_ms"]],
            hovertemplate=f"recorded · {label}<br>%{{x}}<br>call latency %{{customdata}}<extra></extra>",
            **common,
        ))
    if highlight in configs:
        i = configs.index(highlight)
        fig.add_vrect(x0=i - 0.5, x1=i + 0.5, fillcolor=HIGHLIGHT_COLOR, line_width=0, layer="below",
                      annotation_text="your configuration", annotation_position="top left",
                      annotation_font_size=font_px("body"))
    apply_style(fig, f"Recorded on {gpu}: latency per decode step",
           f"recorded {date}, not this machine · {layout} block table · ● GPU time (CUDA graph); "
           "○ call latency", height=460, width_px=FULL_FIGURE_PX)
    fig.update_layout(scattermode="group", scattergap=0.5)
    fig.update_yaxes(title=f"recorded latency ({unit})", type="log", tickformat=LOG_TICK_D3)
    # room above the highest dot for the band's label
    log_axis_range(fig, [in_unit(v, unit) for v in [*rows["gpu_time_ms"].dropna(), *rows["median_ms"]]], 0.2, 0.6 if highlight in configs else 0.3)
    spaced_log_ticks(fig)  # 1, 2, 5 or whole decades, as the live latency chart's
    # the full page's width: at a half chart's share "batch 4 × 2,048 tokens" took three lines
    set_category_ticks(fig, configs, FULL_PLOT_WIDTH_PX)
    # the axis's order is the list's, not that of the first trace (GPU time), which may lack some
    fig.update_xaxes(title=None, categoryorder="array", categoryarray=configs)
    return fig
