"""The per-token figure of a sweep (DataFrames of :data:`~explorer.sweep.runs.SWEEP_COLUMNS`):
the time of one step over the new tokens it scores (``query_tokens``), along the
swept axis, with the line a step whose time stayed flat would draw.

While decode is memory-bound, a step's draft tokens ride on the K and V bytes the
first token reads anyway: the step's time stays flat and the time per token falls
as 1 / q_len, along the flat-step line. Where the scores and products of the extra
rows start to cost more than the bytes, the step's time rises and the time per
token leaves the line. Laid out with :mod:`explorer.sweep.figures`' own helpers
(line styles per source, the axis, the legend), so it reads as the charts beside it.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import MS_D3, compact, duration_unit, format_duration, in_unit
from explorer.legend_layout import fit_legend
from explorer.style import apply_style, impl_color, log_axis_range, no_data_figure
from explorer.sweep.figures import (
    CEILING_COLORS,
    SOURCE_DASHES,
    SOURCE_SYMBOLS,
    axis_title,
    impl_label,
    impl_order,
    source_series,
    sweep_x_axis,
    trace_name,
    y_log,
)
from explorer.sweep.dodge import hover_texts
from explorer.sweep.runs import per_token_ms

#: Colour of the flat-step line: the second ceiling's neutral grey, 20+ CIEDE2000 from
#: every implementation's colour (slate #6B7280 came 19 from Triton's blue).
FLAT_COLOR = CEILING_COLORS[1]


def flat_step_ms(rows, per_step_ms: float) -> np.ndarray:
    """Time per token, in ms, at each of ``rows`` (:data:`~explorer.sweep.runs.SWEEP_COLUMNS`)
    if every step took ``per_step_ms``: ``per_step_ms / query_tokens``."""
    return per_step_ms / rows["query_tokens"].to_numpy(float)


def sweep_per_token_figure(frame, target: str = "triton", note: str | None = None) -> go.Figure:
    """Median time per new token of each implementation across a sweep.

    Each timed point's median call latency over its ``query_tokens``
    (:func:`~explorer.sweep.runs.per_token_ms`), in the one unit the data asks for
    (:func:`~explorer.formatting.duration_unit`). A dashed line starts at
    ``target``'s first timed point of the first source and divides that step's
    time by the tokens of each point: where ``target`` follows it, its step takes
    as long whatever the new tokens (memory-bound); where it lies above, the extra
    rows cost time. Skipped points are left out (the latency chart marks them).

    Parameters
    ----------
    frame : DataFrame
        Rows with the columns of :data:`~explorer.sweep.runs.SWEEP_COLUMNS`.
    target : str
        The implementation the flat-step line follows.
    note : str, optional
        Words appended to the subtitle.

    Returns
    -------
    go.Figure
        Per source and implementation one ``"lines+markers"`` trace (``x`` = axis
        value, ``y`` = time per token in the unit of the y axis's title,
        ``meta`` = ``{"implementation", "source", "kind": "timed", "unit"}``), and
        the flat-step trace (``meta["kind"] == "flat"``).
    """
    fig = go.Figure()
    title = "Time per new token"
    ok = frame[frame["status"] == "ok"] if frame is not None and len(frame) else None
    if ok is None or not len(ok) or not np.isfinite(per_token_ms(ok).to_numpy(float)).any():
        return no_data_figure(fig, "No timed point with its new tokens counted.", title)
    unit = duration_unit(per_token_ms(ok).tolist())
    series = source_series(frame)
    sources = [name for name, _, _ in series]
    ys: list[float] = []
    flat = None
    _texts = hover_texts(frame["value"].tolist())
    for si, (source, _, part) in enumerate(series):
        for name in impl_order(part):
            rows = part[(part["implementation"] == name) & (part["status"] == "ok")].sort_values("value")
            per = per_token_ms(rows).to_numpy(float)
            keep = np.isfinite(per)
            rows, per = rows[keep], per[keep]
            if not len(rows):
                continue
            color, label = impl_color(name), impl_label(name)
            y = np.array([in_unit(v, unit) for v in per])
            ys += list(y)
            fig.add_trace(go.Scatter(
                x=rows["value"].to_numpy(float), y=y, mode="lines+markers", name=trace_name(label, source, sources),
                legendgroup=name, line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                marker=dict(color=color, size=8, symbol=SOURCE_SYMBOLS[si % 4]),
                customdata=np.stack([rows["median_ms"].to_numpy(float), rows["query_tokens"].to_numpy(float)], axis=-1),
                hovertext=_texts(rows["value"]),
                hovertemplate=f"{label} ({source})<br>%{{hovertext}}: %{{y:{MS_D3}}} {unit} per token"
                f"<br>step %{{customdata[0]:{MS_D3}}} ms for %{{customdata[1]:,}} new tokens<extra></extra>",
                meta={"implementation": name, "source": source, "kind": "timed", "unit": unit},
            ))
            if flat is None and si == 0 and name == target:
                flat = rows
    if flat is not None and len(flat) > 1:
        first = flat.iloc[0]
        y = [in_unit(v, unit) for v in flat_step_ms(flat, float(first["median_ms"]))]
        ys += y
        fig.add_trace(go.Scatter(
            x=flat["value"].to_numpy(float), y=y, mode="lines",
            name=f"{impl_label(target)}'s step at q_len {compact(int(first['value']))}, held flat",
            line=dict(color=FLAT_COLOR, width=1.6, dash="dash"), hovertext=_texts(flat["value"]),
            hovertemplate=f"every step {format_duration(float(first['median_ms']))}<br>%{{hovertext}}: %{{y:{MS_D3}}} {unit} "
                          "per token<extra></extra>",
            meta={"implementation": target, "source": sources[0], "kind": "flat", "unit": unit},
        ))
    subtitle = (f"median call latency ÷ the step's new tokens (every sequence's); dashed: {impl_label(target)}'s "
                "first step held flat" if flat is not None and len(flat) > 1
                else "median call latency ÷ the step's new tokens (every sequence's)")
    if note:
        subtitle += f"; {note}"
    apply_style(fig, title, subtitle, height=440)
    sweep_x_axis(fig, frame["value"].tolist(), axis_title(frame))
    finite = [v for v in ys if math.isfinite(v) and v > 0]
    if y_log(fig, finite, span=4, title=f"time per token ({unit})"):
        log_axis_range(fig, finite, 0.2, 0.3)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max(finite, default=1) * 1.15])
    fit_legend(fig)
    return fig
