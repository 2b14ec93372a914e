"""The Serving simulation's block tables of the running sequences, in the colour
language of the pool beside them: by sequence when the pool is, by reference
count when the pool is (its levels and oranges), the shared-block marks placed
by the block table's own routine, beside the ids where the narrowest column holds both."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.cache import figures as cache_figures
from explorer.cache.cell_style import POOL_REF_COUNT_KEY, REF_COUNT_KEY, SEQUENCE_KEY, WIDE_PLOT_PX, legend_key
from explorer.cache.figures import block_table_figure
from explorer.cache.picking import GRID_PAD
from explorer.cache.sharing_figures import REF_LEVEL_COLORS, REF_LEVELS
from explorer.formatting import count, line_count, wrap_at_separators
from explorer.marks import SHARED_MARK, TEXT_CHAR_WIDTH, corner_fit
from explorer.serving.figures import check_color_by
from explorer.serving.view import ref_levels
from explorer.style import (
    FREE_COLOR,
    FULL_PLOT_WIDTH_PX,
    LINE_HEIGHT,
    NARROW_FIGURE_PX,
    font_px,
    line_chars,
    plot_width_px,
    scaled,
)

#: The tables' plot width at scale 1 (px): two fifths of a 1280 px page, less the
#: colour bar (what the ids and columns are fitted to).
TABLE_PLOT_PX = 180
#: The narrowest the tables' plot area is drawn (px, in either mode): Chromium drew
#: it 204 px wide on a 1280 px page, its left margin grown for the y axis' title and
#: seq_ids. The shared marks are placed beside the ids for it
#: (:func:`~explorer.cache.figures.block_table_figure`'s ``marks_beside_px``).
PLACED_PLOT_PX = 200
#: The tables' plot width at scale 1 (px) drawn across the page under the pool (presentation mode):
#: their columns 7 px wide in the two fifths of a 1280 px page held shared marks of 2 to 3 px.
STACKED_PLOT_PX = FULL_PLOT_WIDTH_PX
#: A legend row's height, in px of the legend's font (Plotly's, with its gap).
LEGEND_ROW = 1.75
#: The tables' colour key in each of the pool's colourings (:data:`POOL_COLOR_MODES`).
TABLE_KEYS = {"sequence": f"{SEQUENCE_KEY}, as in the pool", "reference count": f"{REF_COUNT_KEY}, as in the pool"}


def running_tables_figure(
    block_tables: np.ndarray, context_lens: Sequence[int], block_size: int, num_blocks: int, *,
    seq_ids: Sequence[int], color_by: str = "sequence", ref_counts: np.ndarray | None = None,
    window: int | None = None, plot_width: float = TABLE_PLOT_PX, max_holders: int | None = None,
) -> go.Figure:
    """The running sequences' block tables (:func:`~explorer.cache.figures.block_table_figure`
    by sequence), coloured as the pool beside them is.

    Parameters
    ----------
    block_tables : ndarray
        ``[num_running, max_blocks]`` integers, ``-1`` unallocated.
    context_lens : sequence of int
    block_size, num_blocks : int
    seq_ids : sequence of int
        The ``seq_id`` of each row.
    color_by : {"sequence", "reference count"}
        The pool's colouring. ``"reference count"``: every allocated cell in the
        pool's level colour (:data:`~explorer.cache.sharing_figures.REF_LEVELS`,
        :data:`~explorer.cache.sharing_figures.REF_LEVEL_COLORS`) of how many
        running sequences hold its block (``ref_counts``, or counted from
        ``block_tables``), trace 0's ``z`` the level (1 for one holder, ...),
        a legend square per level present, the legend titled
        :data:`~explorer.cache.cell_style.REF_COUNT_KEY` and the click targets'
        hover naming the holders.
    ref_counts : ndarray, optional
        ``[num_blocks]``: running sequences holding each block; given, shared
        blocks get the trace :data:`~explorer.marks.SHARED_MARK`, placed by
        :func:`~explorer.cache.figures.block_table_figure`: on the cell's centre, or
        left of its id on the row's centre line where a plot :data:`PLACED_PLOT_PX`
        wide holds both, else above the id.
    window : int, optional
        As for :func:`~explorer.cache.figures.block_table_figure`.
    plot_width : float
        The plot area's width at scale 1 (px): :data:`TABLE_PLOT_PX` in the page's narrower column,
        :data:`STACKED_PLOT_PX` across the page, where the shared marks are sized to its cells
        (:func:`~explorer.marks.corner_fit`), not to the block table page's widest column.
    max_holders : int, optional
        The most sequences that can hold a block (the max batch): by reference
        count, the legend lists every level that can occur
        (:func:`~explorer.serving.view.ref_levels`), as the pool's does.

    Returns
    -------
    go.Figure
        :func:`~explorer.cache.figures.block_table_figure`'s traces, its subtitle
        naming the colour by :data:`TABLE_KEYS`.

    Raises
    ------
    ValueError
        On an unknown ``color_by``.
    """
    check_color_by(color_by)
    tables = np.asarray(block_tables, dtype=np.int64)
    fig = block_table_figure(tables, context_lens, block_size, num_blocks, seq_ids=seq_ids,
                             title="Block tables of the running sequences", color_by="sequence",
                             ref_counts=ref_counts, plot_width=plot_width, window=window,
                             marks_beside_px=PLACED_PLOT_PX)
    if plot_width > WIDE_PLOT_PX:
        _fit_shared_marks(fig, plot_width, num_blocks)
    if color_by != "sequence":
        _rekey(fig, TABLE_KEYS[color_by])
    if color_by == "reference count":
        refs = (np.asarray(ref_counts, dtype=np.int64) if ref_counts is not None
                else np.bincount(tables[tables >= 0], minlength=num_blocks))
        _colour_by_reference_count(fig, refs, max_holders)
    return fig


def _fit_shared_marks(fig: go.Figure, plot_width: float, num_blocks: int) -> None:
    """The shared marks sized and placed as the block table places them (the cell's corner clear of its
    id, :func:`~explorer.marks.corner_fit`), for cells of a plot ``plot_width`` wide at scale 1: the block
    table sizes them for at most :data:`~explorer.cache.cell_style.WIDE_PLOT_PX`."""
    marks = next((t for t in fig.data if t.name == SHARED_MARK.name), None)
    if marks is None or marks.customdata is None or not len(marks.x):
        return
    heat = fig.data[0]
    rows = np.asarray(heat.y, dtype=float)
    stride = float(np.diff(rows).min()) if len(rows) > 1 else 1.0
    n_cols = np.asarray(heat.z).shape[1]
    plot_height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    row_px = plot_height * stride / (len(rows) * stride + 2 * GRID_PAD)  # as the block table measures a row
    cell_w = plot_width_px(plot_width) / (n_cols + 2 * GRID_PAD)
    ids = len(str(max(num_blocks - 1, 0))) if heat.texttemplate else 0
    line = min(scaled(cache_figures.SHARED_MARK_LINE_PX), max(0.1 * row_px, 0.5))
    dx, dy, size = corner_fit(cell_w - (heat.xgap or 0), row_px - (heat.ygap or 0),
                              ids * TEXT_CHAR_WIDTH * font_px("cell"), font_px("cell") if ids else 0.0,
                              symbol=SHARED_MARK.symbol, line=line, margin=scaled(cache_figures.SHARED_MARK_GAP_PX),
                              floor=scaled(cache_figures.MIN_SHARED_MARK_PX),
                              most=cache_figures.SHARED_MARK_SHARE * font_px("cell"))
    cols = np.asarray(marks.customdata)[:, 1].astype(float)  # each mark's logical block: its cell's centre
    centres = rows[np.abs(np.asarray(marks.y, dtype=float)[:, None] - rows[None, :]).argmin(1)]
    marks.update(x=cols + dx / cell_w, y=centres + dy / row_px * stride,
                 marker={"size": size, "line": {"width": min(line, size / 6)}})


def _rekey(fig: go.Figure, key: str) -> None:
    """The subtitle's colour key ``key`` for the sequence one, broken anew into the
    narrow column's lines, the figure taller by the lines it gains (the plot keeps its height)."""
    subtitle = fig.layout.title.subtitle
    text = wrap_at_separators(subtitle.text.replace("<br>", " ").replace(TABLE_KEYS["sequence"], key),
                              line_chars("subtitle", NARROW_FIGURE_PX))
    extra = (line_count(text) - line_count(subtitle.text)) * LINE_HEIGHT * font_px("subtitle")
    subtitle.text = text
    _grow(fig, top=extra)


def _grow(fig: go.Figure, *, top: float = 0, bottom: float = 0) -> None:
    """``fig`` taller by ``top`` px in its top margin and ``bottom`` in its bottom
    one, its title still hung where :func:`~explorer.style.apply_style` put it."""
    height = fig.layout.height
    new = round(height + top + bottom)
    fig.update_layout(height=new, margin=dict(t=round(fig.layout.margin.t + top), b=round(fig.layout.margin.b + bottom)),
                      title=dict(y=1 - (1 - fig.layout.title.y) * height / new))


def _colour_by_reference_count(fig: go.Figure, refs: np.ndarray, max_holders: int | None = None) -> None:
    """Trace 0 in the pool's reference-count levels; a legend square per level
    that can occur with at most ``max_holders`` holders (the pool's legend's,
    :func:`~explorer.serving.view.ref_levels`), under
    :data:`~explorer.cache.cell_style.REF_COUNT_KEY`; the holders in the click
    targets' hover."""
    heat = fig.data[0]
    custom = np.asarray(heat.customdata)
    codes = np.asarray(heat.z, dtype=float)
    held = refs[np.maximum(custom[..., 4], 0)]
    level = np.searchsorted(np.asarray(REF_LEVELS), held, side="right").astype(float)
    z = np.where(np.isnan(codes), np.nan, level)
    k = len(REF_LEVEL_COLORS) + 1  # 0 free (never drawn here: an unallocated cell is NaN), then each level
    colors = [FREE_COLOR, *REF_LEVEL_COLORS]
    heat.update(z=z, colorscale=[[(i + j) / k, c] for i, c in enumerate(colors) for j in (0, 1)],
                zmin=-0.5, zmax=k - 0.5)
    levels, names = ref_levels(max_holders)
    present = range(1, len(levels) + 1)  # every level that can occur, whether or not this step shows it
    squares = [go.Scatter(x=[None], y=[None], mode="markers", name=names[lv - 1], hoverinfo="skip",
                          marker=dict(symbol="square", size=12, color=REF_LEVEL_COLORS[lv - 1],
                                      line=dict(color=REF_LEVEL_COLORS[lv - 1], width=1)),
                          meta={"level": lv}) for lv in present]
    fig.add_traces(squares)
    data = list(fig.data)  # the levels first in the legend, before "unallocated"
    fig.data = [data[0], data[1], *data[-len(squares):], *data[2:len(data) - len(squares)]] if squares else data
    key_lines = legend_key(fig, POOL_REF_COUNT_KEY, NARROW_FIGURE_PX)
    _grow(fig, bottom=(len(squares) + key_lines) * LEGEND_ROW * font_px("legend"))  # a row per level and the key's
    targets = next(t for t in fig.data if t.name == "click targets")
    blocks = np.asarray(targets.customdata)[:, 4].astype(np.int64)
    extra = np.asarray(targets.text if targets.text is not None else [""] * len(blocks), dtype=object)
    targets.text = [f"{e}<br>held by {count(int(refs[b]), 'running sequence')}" for e, b in zip(extra, blocks)]
