"""Clicking between the block table and the pool: invisible click targets on the
cells of a heatmap (a click on a heatmap cell selects nothing in Plotly; on a
scatter point it does), and the thick outline that marks the picked blocks.

A target's ``customdata`` ends with the first and last physical block it picks;
:func:`explorer.cache.block_link.picked_blocks` reads them back from a selection.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.cache.block_link import PICK_GROUP
from explorer.limits import MAX_RINGS

#: The outline of a picked cell: a dark band with a white line inside, so that it
#: reads on every colour of the scales (pale blue to navy, pale orange to brown, every sequence colour).
OUTLINE_COLOR = "#111827"
OUTLINE_INNER_COLOR = "#FFFFFF"
OUTLINE_WIDTH = 6
OUTLINE_INNER_WIDTH = 2.5
#: The name of the outline traces (the inner line's name adds " (inner)").
OUTLINE_NAME = "selected block"
#: Cells of room around a pool grid, so that an outline on its edge is not cut off.
GRID_PAD = 0.2
#: The veil over every cell not picked: the picked ones stand out as a spotlight.
VEIL_NAME = "not selected (dimmed)"
VEIL_OPACITY = 0.6
#: Cells smaller than this (pixels) get a ring of :data:`RING_PX` around their outline,
#: up to :data:`MAX_RINGS` of them (past that the rings would cover the chart).
MIN_OUTLINED_PX = 10
RING_PX = 30


def add_click_targets(fig: go.Figure, x, y, customdata, size: float, *, hovertemplate: str,
                      text=None) -> None:
    """A transparent square marker on every clickable cell (the heatmap's hover,
    repeated: the nearer marker wins the hover, and with it the click).

    Parameters
    ----------
    x, y : array-like
        ``[n]`` cell centres in data coordinates.
    customdata : ndarray
        ``[n, k]``; its last two columns are the first and last physical block a
        click on the cell picks.
    size : float
        About the cell's size in pixels.
    """
    fig.add_trace(go.Scatter(
        x=np.asarray(x), y=np.asarray(y), mode="markers", customdata=customdata, text=text,
        hovertemplate=hovertemplate, legendgroup=PICK_GROUP, showlegend=False, name="click targets",
        # A transparent marker would give its hover label a transparent background.
        hoverlabel=dict(bgcolor="white", bordercolor=OUTLINE_COLOR, font=dict(color=OUTLINE_COLOR)),
        marker=dict(symbol="square", size=float(np.clip(size, 4, 60)), color="rgba(0,0,0,0)"),
        # Points left unselected by a click keep their (transparent) look.
        unselected=dict(marker=dict(opacity=0)), selected=dict(marker=dict(opacity=0)),
    ))


def add_veil(fig: go.Figure, x, y, picked: np.ndarray, **gaps) -> None:
    """A pale veil (a white heatmap at :data:`VEIL_OPACITY`, named
    :data:`VEIL_NAME`, no hover) over every cell of a heatmap on ``x``, ``y``
    where ``picked`` (``[len(y), len(x)]``, or one fewer column for column
    edges) is false; nothing when no cell is picked."""
    picked = np.asarray(picked, dtype=bool)
    if not picked.any():
        return
    fig.add_trace(go.Heatmap(
        x=x, y=y, z=np.where(picked, np.nan, 1.0), colorscale=[[0, "white"], [1, "white"]], opacity=VEIL_OPACITY,
        showscale=False, hoverinfo="skip", name=VEIL_NAME, **gaps,
    ))


def add_outline(fig: go.Figure, x0, x1, y0, y1, cell_px: float = 20) -> None:
    """Thick outlines around the rectangles ``[x0, x1] x [y0, y1]`` (arrays of
    equal length, data coordinates): two traces named :data:`OUTLINE_NAME`
    (dark band) and ``OUTLINE_NAME + " (inner)"`` (white line), each one line
    through every rectangle, ``None`` between them. Cells under
    :data:`MIN_OUTLINED_PX` pixels (``cell_px``) would vanish under their
    outline: up to :data:`MAX_RINGS` of them also get a ring
    (``OUTLINE_NAME + " (ring)"``) of :data:`RING_PX`. Nothing is added for no rectangles."""
    x0, x1, y0, y1 = (np.asarray(v, dtype=float).ravel() for v in (x0, x1, y0, y1))
    if not len(x0):
        return
    nan = np.full_like(x0, np.nan)
    xs = np.stack([x0, x1, x1, x0, x0, nan], axis=-1).ravel()
    ys = np.stack([y0, y0, y1, y1, y0, nan], axis=-1).ravel()
    xs, ys = [None if np.isnan(v) else float(v) for v in xs], [None if np.isnan(v) else float(v) for v in ys]
    for name, color, width in ((OUTLINE_NAME, OUTLINE_COLOR, OUTLINE_WIDTH),
                               (OUTLINE_NAME + " (inner)", OUTLINE_INNER_COLOR, OUTLINE_INNER_WIDTH)):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=color, width=width),
                                 hoverinfo="skip", showlegend=False, name=name))
    if cell_px < MIN_OUTLINED_PX and len(x0) <= MAX_RINGS:
        fig.add_trace(go.Scatter(
            x=(x0 + x1) / 2, y=(y0 + y1) / 2, mode="markers", hoverinfo="skip", showlegend=False,
            name=OUTLINE_NAME + " (ring)", cliponaxis=False,
            marker=dict(symbol="circle-open", size=RING_PX, color=OUTLINE_COLOR, line=dict(width=OUTLINE_WIDTH - 1)),
        ))
