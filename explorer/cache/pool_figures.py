"""The physical block pool as a figure: a grid of blocks coloured by the sequence
that owns each (by how many sequences hold each: :mod:`.sharing_figures`), and the
click targets and outline every pool view shares.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.cache.cell_style import (
    CELL_PAD_PX,
    DIGIT_WIDTH,
    NARROW_BAR_PLOT_PX,
    NARROW_PLOT_PX,
    SEQUENCE_KEY,
    add_legend_square,
    cell_text_fits,
    inked,
    legend_key,
    owner_colorscale,
    palette_inks,
)
from explorer.cache.figures import filled_slots
from explorer.cache.picking import GRID_PAD, add_click_targets, add_outline, add_veil
from explorer.cache.sampling import pool_grid_shape
from explorer.category_ticks import first_block_ticks
from explorer.formatting import count
from explorer.limits import MAX_ID_ROWS, MAX_POOL_CELLS, MAX_SEQUENCE_LEGEND
from explorer.marks import PARTLY_FILLED_MARK, TEXT_CHAR_WIDTH, corner_fit
from explorer.style import (
    BATCH_SHARE_COLORSCALE,
    FREE_COLOR,
    NARROW_FIGURE_PX,
    OTHER_COLOR,
    PLOT_WIDTH_PX,
    SEQUENCE_COLORS,
    apply_style,
    cell_gaps,
    font_px,
    integer_ticks,
    narrow_title_px,
    plot_area_height,
    plot_width_px,
    presentation_scale,
    scaled,
)
from paged_attention.inputs import FREE, OTHER


def pool_shape(num_blocks: int, max_cells: int = MAX_POOL_CELLS, fit_ids: bool = False,
               plot_width: float = NARROW_PLOT_PX, min_cell_px: float = 0.0) -> tuple[int, int, int]:
    """``(rows, columns, blocks_per_cell)`` of a pool view: :func:`~.sampling.pool_grid_shape`'s,
    or with ``fit_ids`` (the Block table page's pool, which writes each block's id in its
    cell) fewer, wider columns where the ids at the cell text size of now
    (:func:`~explorer.style.font_px` ``"cell"``: presentation mode's is 1.5 times
    normal's) would not fit a plot ``plot_width`` px wide at scale 1 (the page's column,
    :data:`~.cell_style.NARROW_PLOT_PX`) otherwise, or cells would be narrower than
    ``min_cell_px`` (px at the scale of now: what its marks need, :func:`mark_cell_px`),
    so long as that takes at most :data:`~explorer.limits.MAX_ID_ROWS` rows and at least 4 columns."""
    n_rows, n_cols, per_cell = pool_grid_shape(num_blocks, max_cells)
    if not fit_ids or per_cell > 1:
        return n_rows, n_cols, per_cell
    digits = len(str(max(int(num_blocks) - 1, 0)))
    width = plot_width_px(plot_width)
    fit = int(width // (digits * DIGIT_WIDTH * font_px("cell") + 2 * CELL_PAD_PX))
    marks = int(width / min_cell_px - 2 * GRID_PAD) if min_cell_px > 0 else fit  # pitch as place_pool_marks has it
    fit = min(fit, marks) if marks >= 4 else fit  # too narrow for the marks' cells: the ids' still
    rows = math.ceil(max(int(num_blocks), 1) / max(fit, 1))
    if 4 <= fit < n_cols and rows <= MAX_ID_ROWS:
        return rows, fit, 1
    return n_rows, n_cols, per_cell


def block_fill(
    block_tables: np.ndarray, context_lens: Sequence[int], block_size: int, num_blocks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per physical block: its logical index in its sequence and the slots it holds.

    Returns
    -------
    logical : ndarray
        ``[num_blocks]`` int64, ``-1`` for blocks no sequence of the table uses.
    filled : ndarray
        ``[num_blocks]`` int64 slots filled (0 for unused blocks).
    """
    tables = np.asarray(block_tables, dtype=np.int64)
    lengths = np.asarray(context_lens, dtype=np.int64)
    seq, col = np.nonzero(tables >= 0)
    phys = tables[seq, col]
    logical = np.full(num_blocks, -1, dtype=np.int64)
    filled = np.zeros(num_blocks, dtype=np.int64)
    logical[phys] = col
    filled[phys] = filled_slots(lengths[seq], col, block_size)
    return logical, filled


def pool_figure(
    pool_owner: np.ndarray,
    block_tables: np.ndarray,
    context_lens: Sequence[int],
    block_size: int,
    *,
    max_cells: int = MAX_POOL_CELLS,
    highlight: range | None = None,
    fit_ids: bool = False,
    plot_width: float = NARROW_PLOT_PX,
    figure_px: float = NARROW_FIGURE_PX,
) -> go.Figure:
    """The physical pool as a grid of blocks, coloured by owning sequence.

    Free blocks are grey, blocks held by sequences outside the batch (the
    fragmented layout's ``OTHER``) dark slate, and each sequence's partly filled
    last block carries a dark dot. Pools larger than ``max_cells`` blocks are
    aggregated: each cell covers consecutive blocks and is coloured by the share
    that belongs to this batch.

    Parameters
    ----------
    pool_owner : ndarray
        ``[num_blocks]``: the owning sequence, ``-1`` free, ``-2`` other.
    block_tables : ndarray
        ``[batch_size, max_num_blocks]``, ``-1`` unallocated.
    context_lens : sequence of int
    block_size : int
    highlight : range, optional
        Physical block ids to outline (see :func:`pool_pick`).
    fit_ids : bool
        Lay the grid out so that each block's id fits its cell where it can
        (:func:`pool_shape`): presentation mode's larger ids in the page's column; and
        cells that hold its partly filled dot at :data:`POOL_MARK_PX` clear of the ids
        (:func:`marks_cell_px`): fewer columns, taller rows.
    plot_width, figure_px : float
        The plot area's and the figure's width at scale 1 (px): two fifths of the page
        (default), or :data:`~explorer.style.FULL_PLOT_WIDTH_PX` and
        :data:`~explorer.style.FULL_FIGURE_PX` across it.

    Up to :data:`MAX_SEQUENCE_LEGEND` sequences each get a legend entry; past
    that the colours repeat (every ``len(SEQUENCE_COLORS)`` sequences), the
    subtitle and the legend's title say so, and the hover names each block's owner.

    Returns
    -------
    go.Figure
        Trace 0 is the heatmap; its ``z`` is the category code (exact view:
        0 free, 1 other, ``2 + seq % len(SEQUENCE_COLORS)`` a sequence) or the
        in-batch share (aggregated view). In the exact view, legend-only traces
        ``"free"``, ``"other sequences (not in batch)"`` and ``"sequence s"``
        (``meta={"sequence": s}``) follow. Then :func:`pool_pick`'s traces.
    """
    owner = np.asarray(pool_owner, dtype=np.int64)
    num_blocks = len(owner)
    filled = block_fill(block_tables, context_lens, block_size, num_blocks)[1]
    partial = fit_ids and bool(((owner >= 0) & (filled > 0) & (filled < block_size)).any())
    cell_w, cell_h = marks_cell_px([(PARTLY_FILLED_MARK.symbol, scaled(1))] if partial else [], num_blocks)
    n_rows, n_cols, per_cell = shape = pool_shape(num_blocks, max_cells, fit_ids, plot_width, cell_w)
    seqs = np.unique(owner[owner >= 0])
    listed = per_cell == 1 and len(seqs) <= MAX_SEQUENCE_LEGEND
    fig = go.Figure()
    if per_cell == 1:
        subtitle = (f"{count(num_blocks, 'physical block')} of {count(block_size, 'slot')}, {n_cols} per row; "
                    + SEQUENCE_KEY)
        if not listed:
            subtitle = (f"{count(num_blocks, 'block')} of {count(block_size, 'slot')}, {n_cols} per row; "
                        f"{SEQUENCE_KEY} ({len(SEQUENCE_COLORS)} colours, repeating)")
    else:
        subtitle = f"{count(num_blocks, 'block')}, {per_cell} per cell; colour = share held by this batch"
    # Grow the figure by the sequences' legend (two entries a row in a narrow
    # column, under its title) rather than let it squeeze the grid; its rows grow with the
    # scale, as the figure's height does (issue 27, review 4: presentation mode's grid drew
    # 60 px rows for the 64 its marks were placed in, the dots over their cells' edge).
    legend_rows = (math.ceil((len(seqs) + 3) / 2) if listed else 1 + (per_cell == 1)) + (per_cell == 1)
    legend_px = 22 * (legend_rows - 1)
    height = int(min(720, max(320, 190 + 24 * n_rows)) + legend_px
                 + pool_title_px(subtitle, figure_px))  # the subtitle's lines in the figure's width
    if per_cell == 1:
        height += mark_rows_px(plot_area_height(height, subtitle, width_px=figure_px) - scaled(legend_px),
                               n_rows, cell_h)
    plot_height = plot_area_height(height, subtitle, width_px=figure_px) - scaled(legend_px)
    if per_cell == 1:
        _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols, plot_height,
                    seqs if listed else (), plot_width)
    else:
        _pool_aggregated(fig, owner, n_rows, n_cols, per_cell, plot_height)
    pool_pick(fig, num_blocks, max_cells, plot_height, highlight, shape)
    if per_cell == 1:  # past the palette, the legend's title says the colours repeat (no entry per sequence)
        legend_key(fig, SEQUENCE_KEY if listed else f"{SEQUENCE_KEY}<br>(repeats every {len(SEQUENCE_COLORS)} sequences)",
                   figure_px)
    apply_style(fig, "Physical block pool", subtitle, height=height, width_px=figure_px)  # two fifths of the page
    fig.update_xaxes(title=f"+ offset within row ({per_cell} blocks per cell)"
                     if per_cell > 1 else "+ offset within row", showgrid=False, zeroline=False,
                     **integer_ticks(0, n_cols - 1, plot_width=plot_width if per_cell == 1 else NARROW_BAR_PLOT_PX))
    fig.update_yaxes(title="first block", range=[n_rows - 0.5 + GRID_PAD, -0.5 - GRID_PAD], showgrid=False,
                     zeroline=False, **first_block_ticks(n_rows, n_cols * per_cell, plot_height))
    return fig


def pool_title_px(subtitle: str | None, figure_px: float) -> int:
    """Pixels at scale 1 that ``subtitle`` takes more in a figure ``figure_px`` wide than in a half-page
    one: :func:`~explorer.style.narrow_title_px` in two fifths of the page, none across it."""
    return narrow_title_px(subtitle) if figure_px <= NARROW_FIGURE_PX else 0


def marks_cell_px(marks: Sequence[tuple[str, float]], num_blocks: int) -> tuple[float, float]:
    """The least cell width and height (px at the scale of now) of a pool of ``num_blocks`` whose
    cells hold each of ``marks`` (``(symbol, outline px)``) at :data:`POOL_MARK_PX` (:func:`mark_px`)
    clear of the ids (:func:`mark_cell_px`); ``(0, 0)`` without marks."""
    digits = len(str(max(int(num_blocks) - 1, 0)))
    cells = [mark_cell_px(symbol, line, digits, mark_px(POOL_MARK_PX)) for symbol, line in marks]
    return (max(w for w, _ in cells), max(h for _, h in cells)) if cells else (0.0, 0.0)


def mark_rows_px(plot_height: float, n_rows: int, cell_h: float) -> int:
    """Pixels at scale 1 a pool figure grows by so that its plot of ``plot_height`` px (at the scale
    of now) holds ``n_rows`` rows of ``cell_h`` px (:func:`marks_cell_px`), its grid pad included."""
    return math.ceil(max((n_rows + 2 * GRID_PAD) * cell_h - plot_height, 0.0) / presentation_scale())


def pool_pick(fig: go.Figure, num_blocks: int, max_cells: int, plot_height: float,
              highlight: range | None = None, shape: tuple[int, int, int] | None = None) -> None:
    """Click targets on a pool view's cells and the outline of the picked blocks.

    The targets (see :func:`~.picking.add_click_targets`) repeat trace 0's hover
    (its ``customdata`` as text in the exact view) and pick their cell's blocks:
    one, or the ``blocks_per_cell`` of an aggregated cell. ``highlight`` outlines
    every cell that holds one of its blocks and veils the others
    (:func:`~.picking.add_veil`). ``shape``: the grid's ``(rows, columns,
    blocks_per_cell)`` (default :func:`~.sampling.pool_grid_shape`'s).
    """
    n_rows, n_cols, per_cell = shape or pool_grid_shape(num_blocks, max_cells)
    heat = fig.data[0]
    cells = np.arange(math.ceil(num_blocks / per_cell))
    first = cells * per_cell
    last = np.minimum(first + per_cell, num_blocks) - 1
    custom = np.asarray(heat.customdata, dtype=object).reshape(n_rows * n_cols, -1)[cells]
    picks = np.stack([first, last], axis=-1)
    if per_cell == 1:
        text, template, custom = custom[:, 0], "%{text}<extra></extra>", picks
    else:
        text, template, custom = None, heat.hovertemplate, np.concatenate([custom.astype(np.int64), picks], -1)
    size = min(plot_height / max(1, n_rows), PLOT_WIDTH_PX / max(1, n_cols))
    add_click_targets(fig, cells % n_cols, cells // n_cols, custom, size, hovertemplate=template, text=text)
    # The grid's extent and room for an outline on its edge: the markers would pad the autorange.
    fig.update_xaxes(range=[-0.5 - GRID_PAD, n_cols - 0.5 + GRID_PAD])
    if highlight is not None and len(highlight):
        lo, hi = max(highlight.start, 0) // per_cell, min(highlight.stop - 1, num_blocks - 1) // per_cell
        shown = np.arange(lo, hi + 1)
        col, row = shown % n_cols, shown // n_cols
        picked = np.zeros(n_rows * n_cols, dtype=bool)
        picked[shown] = True
        add_veil(fig, None, None, picked.reshape(n_rows, n_cols), **cell_gaps(n_rows, n_cols, plot_height))
        add_outline(fig, col - 0.5, col + 0.5, row - 0.5, row + 0.5, size)


def _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols, plot_height, listed,
                plot_width) -> None:
    num_blocks = len(owner)
    palette = SEQUENCE_COLORS
    codes = np.where(owner >= 0, 2 + owner % len(palette), np.where(owner == OTHER, 1, 0)).astype(float)
    logical, filled = block_fill(block_tables, context_lens, block_size, num_blocks)
    pad = n_rows * n_cols - num_blocks
    ids = np.arange(n_rows * n_cols)
    z = np.concatenate([codes, np.full(pad, np.nan)]).reshape(n_rows, n_cols)

    hover = []
    for b in range(num_blocks):
        o = int(owner[b])
        if o >= 0:
            hover.append(
                f"block {b}<br>sequence {o}, logical block {int(logical[b])}"
                f"<br>slots filled {int(filled[b])}/{block_size}"
            )
        elif o == OTHER:
            hover.append(f"block {b}<br>held by a sequence outside this batch")
        else:
            hover.append(f"block {b}<br>free")
    hover += [""] * pad
    scale, k = owner_colorscale()
    cells = n_rows * n_cols
    small = cells <= 5000
    fig.add_trace(
        go.Heatmap(
            z=z,
            customdata=np.array(hover, dtype=object).reshape(n_rows, n_cols),
            # Each id in the ink of more contrast on its cell (the owners' colours: free, other, a sequence's).
            text=inked(np.array([str(i) if i < num_blocks else "" for i in ids], dtype=object),
                       palette_inks(np.nan_to_num(z.ravel(), nan=0), [FREE_COLOR, OTHER_COLOR, *SEQUENCE_COLORS])
                       ).reshape(n_rows, n_cols),
            texttemplate="%{text}" if cell_text_fits(n_rows, n_cols, len(str(num_blocks - 1)), plot_width,
                                                     plot_height) else None,
            textfont=dict(size=font_px("cell")),
            colorscale=scale,
            zmin=-0.5,
            zmax=k - 0.5,
            showscale=False,
            hoverongaps=False,
            hovertemplate="%{customdata}<extra></extra>",
            **cell_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )
    add_legend_square(fig, FREE_COLOR, "free")
    if (owner == OTHER).any():
        add_legend_square(fig, OTHER_COLOR, "other sequences (not in batch)")
    for seq in listed:
        add_legend_square(fig, palette[int(seq) % len(palette)], f"sequence {int(seq)}", meta={"sequence": int(seq)})
    partial = np.nonzero((owner >= 0) & (filled > 0) & (filled < block_size))[0]
    fig.add_trace(
        go.Scatter(
            x=partial % n_cols + 0.27,
            y=partial // n_cols - 0.27,
            mode="markers",
            # Grown with presentation mode's cells, as the pool's other marks are (issue 27: 5 px in 55 px cells).
            marker=dict(symbol=PARTLY_FILLED_MARK.symbol, size=scaled(7 if small else 4), color=PARTLY_FILLED_MARK.fill,
                        line=dict(color=PARTLY_FILLED_MARK.line, width=scaled(1))),
            customdata=np.stack([partial, owner[partial], filled[partial], block_size - filled[partial]], axis=-1)
            if len(partial)
            else None,
            hovertemplate="block %{customdata[0]}: last block of sequence %{customdata[1]}"
            f"<br>%{{customdata[2]}}/{block_size} slots filled, %{{customdata[3]}} wasted<extra></extra>",
            name=PARTLY_FILLED_MARK.name,
            meta={"mark": "partial"},
        )
    )
    place_pool_marks(fig, n_rows, n_cols, plot_width_px(plot_width), plot_height, len(str(num_blocks - 1))
                     if fig.data[0].texttemplate else 0)


def _pool_aggregated(fig, owner, n_rows, n_cols, per_cell, plot_height) -> None:
    num_blocks = len(owner)
    cells = n_rows * n_cols
    padded = np.full(cells * per_cell, -3, dtype=np.int64)
    padded[:num_blocks] = owner
    groups = padded.reshape(cells, per_cell)
    in_batch = (groups >= 0).sum(1)
    free = (groups == FREE).sum(1)
    other = (groups == OTHER).sum(1)
    present = in_batch + free + other
    share = np.where(present > 0, in_batch / np.maximum(present, 1), np.nan)
    first = np.arange(cells) * per_cell
    last = np.minimum(first + per_cell, num_blocks) - 1
    custom = np.stack([first, last, in_batch, free, other], axis=-1).reshape(n_rows, n_cols, 5)
    fig.add_trace(
        go.Heatmap(
            z=share.reshape(n_rows, n_cols),
            customdata=custom,
            colorscale=BATCH_SHARE_COLORSCALE,
            zmin=0,
            zmax=1,
            colorbar=dict(title=dict(text="colour =<br>share in<br>this batch"), thickness=14, tickformat=".0%"),
            hoverongaps=False,
            hovertemplate="blocks %{customdata[0]}–%{customdata[1]}<br>in this batch: %{customdata[2]}"
            "<br>free: %{customdata[3]}<br>other sequences: %{customdata[4]}<extra></extra>",
            **cell_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )


#: Each pool mark's corner of its cell and its most size (px at scale 1, :func:`mark_px` at the scale of
#: now, in a grid of at most 5,000 cells; 5 px past that), by its trace's ``meta["mark"]``: the partly filled
#: dot top right, a step's changes (:data:`~explorer.marks.POOL_CHANGE_MARKS`) top left, a freed block's cross
#: bottom right (a block freed and taken in a step shows both), each in its half of the cell, clear of the id.
POOL_MARK_PLACES = {"partial": ("top-right", 7), "taken": ("top-left", 8), "recycled": ("top-left", 10),
                    "copied": ("top-left", 10), "revived": ("top-left", 8), "freed": ("bottom-right", 8)}
#: Pixels a pool mark keeps from its cell's edge and its id (at scale 1), and its least size.
POOL_MARK_GAP_PX, MIN_POOL_MARK_PX = 2, 4
#: The size (px at scale 1, :func:`mark_px` at the scale of now) that the Block table's pool (``fit_ids``)
#: lays its cells out to hold each of its marks at, clear of the ids (issue 27, review 4: its partly
#: filled dot and copy-on-write plus were 4 px in normal mode, the dot touching the ids).
POOL_MARK_PX = 7


def mark_px(px: float) -> float:
    """``px`` of a pool mark's size at scale 1, at the scale of now: times the scale squared, so that
    presentation mode's marks (1.5 squared, 2.25 times as large) grow more than its text, 1.5 times, does:
    a glyph of a few pixels, read across a room, needs more than a digit (issue 27, review 4: the
    Serving pool's marks, 10 px in cells of 55, read as specks)."""
    return px * presentation_scale() ** 2


def mark_cell_px(symbol: str, line: float, digits: int, size: float) -> tuple[float, float]:
    """The least width and height (px) of a pool cell whose corner holds a mark of ``symbol``, outline
    ``line`` px, at ``size`` px, clear of ``digits`` of id text at the cell text size of now and of its
    half of the cell, as :func:`place_pool_marks` places it (:func:`~explorer.marks.corner_fit` with the
    pool's margins: the least width first, then the least height at that width)."""
    text_w, text_h = (digits * TEXT_CHAR_WIDTH * font_px("cell"), font_px("cell")) if digits else (0.0, 0.0)

    def fits(w: float, h: float) -> bool:
        return corner_fit(w, h, text_w, text_h, symbol=symbol, line=line, margin=scaled(POOL_MARK_GAP_PX),
                          floor=scaled(MIN_POOL_MARK_PX), most=size, shared=True)[2] >= size - 1e-6

    def least(ok) -> float:
        lo, hi = 0.0, 4096.0
        for _ in range(40):
            lo, hi = (lo, (lo + hi) / 2) if ok((lo + hi) / 2) else ((lo + hi) / 2, hi)
        return hi

    width = least(lambda w: fits(w, 4096.0))
    return width, least(lambda h: fits(width, h))


def place_pool_marks(fig: go.Figure, n_rows: int, n_cols: int, plot_w: float, plot_h: float, digits: int,
                     *, inset: float = 0.0) -> None:
    """Put the pool's marks (traces with ``meta["mark"]``, a key of :data:`POOL_MARK_PLACES`,
    ``customdata[:, 0]`` their block ids) in their corners of cells ``plot_w / n_cols`` by
    ``plot_h / n_rows`` px (plot area at the scale of now, its pad included), sized by
    :func:`~explorer.marks.corner_fit` clear of ``digits`` of id text (0: none written).
    ``inset`` > 0: in the cell as drawn (the heatmap's gaps off) and that share of its width
    from its left and right edges, so that two cells' marks side by side do not read as a pair."""
    cell_w, cell_h = plot_w / (n_cols + 2 * GRID_PAD), plot_h / (n_rows + 2 * GRID_PAD)
    pitch_w, pitch_h = cell_w, cell_h
    if inset > 0:
        heat = fig.data[0]
        cell_w, cell_h = cell_w - (heat.xgap or 0), cell_h - (heat.ygap or 0)
    font = font_px("cell")
    text_w, text_h = (digits * TEXT_CHAR_WIDTH * font, font) if digits else (0.0, 0.0)
    small = n_rows * n_cols <= 5000
    for t in fig.data:
        key = t.meta.get("mark") if isinstance(t.meta, dict) else None
        if key not in POOL_MARK_PLACES:
            continue
        corner, most = POOL_MARK_PLACES[key]
        dx, dy, size = corner_fit(cell_w, cell_h, text_w, text_h, symbol=t.marker.symbol, line=t.marker.line.width or 0,
                                  margin=scaled(POOL_MARK_GAP_PX), floor=scaled(MIN_POOL_MARK_PX),
                                  most=(mark_px(most) if inset <= 0 else scaled(most)) if small else scaled(5), corner=corner, shared=True,
                                  side_margin=inset * cell_w if inset > 0 else None)
        t.marker.size = size
        if t.customdata is None or not len(t.customdata):
            continue
        blocks = np.asarray(t.customdata, dtype=np.int64)[:, 0]
        t.x, t.y = blocks % n_cols + dx / pitch_w, blocks // n_cols + dy / pitch_h
