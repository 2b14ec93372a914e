"""Legends under a chart laid out so that every entry shows and the plot keeps its
height (:func:`fit_legend`): a grid of equal columns across the plot's width, as
many rows as the entries need, and a figure taller by the rows its bottom margin
does not already hold.

Plotly lays out a horizontal legend at most as wide as the plot area; entries
that do not fit on one row wrap into a grid whose columns are as wide as the
widest entry. Left to itself (entries of a legend group stacked, their widths
measured in the browser) it took rows the figure had no room for and squeezed
the plot; here the column width is set from the text (``entrywidth``), so the
rows are known when the figure is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import plotly.graph_objects as go

from explorer.formatting import line_count
from explorer.style import HALF_PLOT_WIDTH_PX, LABEL_CHAR_WIDTH, LINE_HEIGHT, font_px, plot_width_px, scaled

#: Plotly's legend geometry, in px at every scale: an entry's symbol and the gaps
#: either side of it (``itemwidth`` 30 and twice the item gap of 5), the gap after an
#: entry, the padding a row adds to its text's line, the smallest row, and the
#: padding above and below the entries.
SYMBOL_PX, ITEM_GAP_PX, ROW_PAD_PX, MIN_ROW_PX, LEGEND_PAD_PX = 40, 5, 3, 16, 10
#: The share of the plot's width a legend row is planned for: wide tick labels on
#: the y axis ("10,000") push the plot's left edge past apply_style's margin.
ROW_SHARE = 0.9
#: Pixels at scale 1 between the legend and the x axis' title, and between the
#: axis' title and its tick labels (Plotly's standoff).
AXIS_GAP_PX = 12


@dataclass(frozen=True)
class LegendGrid:
    """How a horizontal legend's entries lie: ``columns`` of ``text_px`` of text
    each (the widest entry's, estimated), in ``rows`` rows, ``height_px`` tall."""

    text_px: float
    columns: int
    rows: int
    height_px: float


def legend_grid(names: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX) -> LegendGrid:
    """The grid of a horizontal legend of ``names`` at the legend text size of now,
    under a plot ``plot_width`` px wide at scale 1 (:func:`~explorer.style.plot_width_px`;
    by default a half-page chart's at 1280 px), as Plotly lays it out when every
    entry's text is ``text_px`` wide: an entry ``text_px`` plus :data:`SYMBOL_PX`,
    :data:`ITEM_GAP_PX` between entries, and a row wrapped once the next entry
    would reach the plot's right edge (planned for :data:`ROW_SHARE` of its width)."""
    size = font_px("legend")
    text = max((len(name) for name in names), default=0) * LABEL_CHAR_WIDTH * size
    room = ROW_SHARE * plot_width_px(plot_width)
    step = text + SYMBOL_PX + ITEM_GAP_PX
    # Entry k (from 0) of a row starts at k * step and fits while text + SYMBOL_PX + k * step < room.
    columns = max(1, math.ceil((room - text - SYMBOL_PX) / step)) if room > text + SYMBOL_PX else 1
    columns = min(columns, max(len(names), 1))
    rows = math.ceil(len(names) / columns) if names else 0
    row_px = max(LINE_HEIGHT * size, MIN_ROW_PX) + ROW_PAD_PX
    return LegendGrid(text, columns, rows, rows * row_px + LEGEND_PAD_PX if rows else 0)


def axis_block_px() -> float:
    """Pixels, at the current scale, that an x axis' tick labels and one-line title
    take under the plot, with the gaps between them and the legend."""
    return LINE_HEIGHT * (font_px("tick") + font_px("body")) + scaled(2 * AXIS_GAP_PX)


def fit_legend(fig: go.Figure, plot_width: float = HALF_PLOT_WIDTH_PX) -> LegendGrid | None:
    """Lay out ``fig``'s legend (a figure :func:`~explorer.style.apply_style` styled,
    its legend hung from the bottom edge) in the grid of :func:`legend_grid`, and
    make the figure taller by what the legend (its title's lines too) and the x axis
    need beyond its bottom margin, so that the plot area keeps the height ``apply_style`` gave it.

    Returns
    -------
    LegendGrid or None
        The grid, or None when the figure shows no legend (fewer than two entries).
    """
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    if len(names) < 2 or fig.layout.showlegend is False:
        return None
    grid = legend_grid(names, plot_width)
    # "normal": a legend group's entries are not stacked in a column of their own.
    fig.update_layout(legend=dict(orientation="h", traceorder="normal", entrywidth=math.ceil(grid.text_px),
                                  entrywidthmode="pixels"))
    title = fig.layout.legend.title  # a key over the entries (side "top") takes a row a line
    key_px = line_count(title.text) * LINE_HEIGHT * (title.font.size or font_px("legend"))
    bottom = fig.layout.margin.b
    need = math.ceil(grid.height_px + key_px + axis_block_px())
    if need > bottom:
        fig.update_layout(height=fig.layout.height + need - bottom, margin=dict(b=need))
    return grid
