"""The block table as a figure, drawn from the table alone (no KV tensors): one row
per sequence, one cell per logical block, coloured by its physical block (the pool:
:mod:`.pool_figures`; a sequence's walk: :mod:`.walk_figures`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.cache.cell_style import (
    BLOCK_KEY,
    OUTSIDE_WINDOW,
    NEW_TOKENS,
    OUTSIDE_WINDOW_EDGE,
    add_outside_window,
    TABLE_BARE_PLOT_PX,
    UNALLOCATED_INK,
    WIDE_PLOT_PX,
    add_legend_square,
    add_new_token_marks,
    cell_text_fits,
    colorbar_title,
    id_box,
    inked,
    owner_colorscale,
    palette_inks,
    scale_inks,
)
from explorer.cache.picking import GRID_PAD, add_click_targets, add_outline, add_veil
from explorer.cache.sampling import GridSample, sample_grid
from explorer.cache.window import first_read_blocks
from explorer.formatting import count, format_number, ordinal
from explorer.limits import MAX_TABLE_CELLS
from explorer.marks import POOL_CHANGE_MARKS, SHARED_MARK, TEXT_CHAR_WIDTH, corner_fit
from explorer.style import (
    BLOCK_COLORSCALE,
    HALF_FIGURE_PX,
    LINE_HEIGHT,
    MIN_COLUMN_PX,
    NARROW_FIGURE_PX,
    PLOT_WIDTH_PX,
    SEQUENCE_COLORS,
    UNALLOCATED_COLOR,
    apply_style,
    cell_gaps,
    colorbar_length_px,
    font_px,
    integer_ticks,
    plot_area_height,
    plot_width_px,
    scaled,
    title_margins,
)


def filled_slots(lengths: np.ndarray, logical: np.ndarray, block_size: int) -> np.ndarray:
    """Slots filled in logical block ``logical`` of sequences of ``lengths``."""
    return np.clip(lengths - logical * block_size, 0, block_size)


def block_table_grid(
    n_rows: int, n_cols: int, max_cells: int = MAX_TABLE_CELLS, plot_width: float = PLOT_WIDTH_PX
) -> GridSample:
    """What :func:`block_table_figure` draws of an ``n_rows x n_cols`` block table.

    Every k-th row past ``max_cells`` cells; past ``plot_width /``
    :data:`MIN_COLUMN_PX` logical blocks (or the cell budget), k consecutive
    logical blocks per drawn column. Its :meth:`~GridSample.note` is the caption
    that says so.
    """
    return sample_grid(n_rows, n_cols, max_cells, max_cols=int(plot_width // MIN_COLUMN_PX), col_bins=True)


def block_table_figure(
    block_tables: np.ndarray,
    context_lens: Sequence[int],
    block_size: int,
    num_blocks: int | None = None,
    *,
    max_cells: int = MAX_TABLE_CELLS,
    seq_ids: Sequence[int] | None = None,
    title: str = "Block table",
    plot_width: float = PLOT_WIDTH_PX,
    color_by: str = "physical",
    ref_counts: np.ndarray | None = None,
    highlight: range | None = None,
    window: int | None = None,
    query_lens: Sequence[int] | None = None,
    marks_beside_px: float | None = None,
    copied: Sequence[int] | None = None,
) -> go.Figure:
    """The block table as a heatmap: one row per sequence, one column per logical block.

    Cells are coloured by physical block id (``color_by="physical"``, the blue
    :data:`~explorer.style.BLOCK_COLORSCALE`, its colour bar titled
    :data:`~.cell_style.BLOCK_KEY`) or by the owning sequence in the colours
    :func:`~.pool_figures.pool_figure` gives it (``color_by="sequence"``: a row's
    cells match its blocks in the pool), and then carry the physical id as text
    where it fits (where it fits only without the colour bar, as presentation
    mode's larger text in the Block table page's column, the bar gives way: the
    subtitle names the colour, each cell its id); unallocated entries (``-1``)
    are a separate pale trace marked "–". Hover shows sequence, logical block, token
    range, physical block and slots filled.

    A table wider than the plot has pixels for (see :func:`block_table_grid`)
    aggregates columns: each stands for k consecutive logical blocks, is coloured
    by the first allocated one among them and hovers how many are allocated, so
    a one-block sequence beside a million-block one still shows a column. Past
    ``max_cells`` cells every k-th row is drawn.

    Parameters
    ----------
    block_tables : ndarray
        ``[batch_size, max_num_blocks]`` integers, ``-1`` unallocated.
    context_lens : sequence of int
        ``batch_size`` context lengths.
    block_size : int
        Tokens per block.
    num_blocks : int, optional
        Pool size, the top of the colour scale (default: the largest id + 1).
    max_cells : int
        Past this many cells, rows are sampled and columns aggregated.
    seq_ids : sequence of int, optional
        A name for each row (a serving simulation's ``seq_id``), shown in the
        hover and on the y axis instead of the row index.
    title : str
        The figure's title.
    plot_width : float
        About how many pixels wide the plot area will be: columns are aggregated
        past ``plot_width /`` :data:`MIN_COLUMN_PX`, and block ids are written in
        the cells only where :func:`~explorer.style.font_px` (``"cell"``) text fits them at
        that width (at most :data:`~.cell_style.WIDE_PLOT_PX`, the page's at 1280 px).
    color_by : {"physical", "sequence"}
        What a cell's colour says: its physical block id (a continuous scale), or
        its sequence (``seq_ids`` when given, else the row), as in the pool.
    ref_counts : ndarray, optional
        ``[num_blocks]``: sequences holding each physical block (a sharing
        :class:`~explorer.serving.block_manager.BlockManager`'s counts). Cells whose block
        more than one sequence holds get a mark inside the cell, above its id
        (:data:`~explorer.marks.SHARED_MARK`; when every logical block has its own column).
    copied : sequence of int, optional
        With ``ref_counts``: physical blocks copy-on-write made
        (:attr:`~.sharing.SharedBatch.copied`); the cells pointing to them get the
        copy-on-write plus (:data:`COPIED_MARK`) where the shared mark would go, in a
        trace named ``COPIED_MARK.name`` after ``"shared block"``'s.
    marks_beside_px : float, optional
        The narrowest the plot area is drawn (px): given, a shared mark goes left of its
        cell's id, on the row's centre line, where a cell that wide holds both side by side.
    highlight : range, optional
        Physical block ids to outline: every drawn cell that points to one of
        them (an aggregated column: that holds one) gets a thick outline, and a
        pale veil dims the others. Cells of rows the sampling leaves out are not
        drawn, so not outlined.
    window : int, optional
        A sliding window (tokens): the allocated cells before each sequence's
        first block in the window (:func:`~.window.first_read_blocks`; an
        aggregated column when all its blocks are) keep their colour under white
        hatching, their ids written above it where ids fit, a legend entry and their hover
        saying :data:`~.cell_style.OUTSIDE_WINDOW`; with ``query_lens``, the window of
        each sequence's first new token (:func:`~.window.first_read_blocks`).
    query_lens : sequence of int, optional
        New tokens of each sequence (draft tokens: its last ``q`` positions, already
        in the cache): every drawn cell (an aggregated column) that holds one gets a
        star in its bottom-right corner (:func:`~.cell_style.add_new_token_marks`),
        its hover naming the positions. None (the plain decode step): no stars.

    Returns
    -------
    go.Figure
        Trace 0: allocated cells (``z`` = physical id, of the first allocated
        block of each aggregated column, or with ``color_by="sequence"`` the
        pool's colour code ``2 + seq % len(SEQUENCE_COLORS)`` and the id in
        ``text``; NaN where unallocated); trace 1:
        unallocated cells, whose ``text`` is "–" exactly there. ``x`` holds the
        logical block of each column, or the column edges (``len + 1`` values,
        at half blocks) when columns are aggregated. With ``ref_counts``, a
        scatter trace ``"shared block"`` follows (``customdata`` = sequence,
        logical block, physical block, holders), empty when nothing drawn is shared.
        Before it, a transparent scatter ``"click targets"`` (legend group
        :data:`~.picking.PICK_GROUP`) on every allocated cell, its ``customdata``
        trace 0's with the picked block twice appended (the first allocated of
        an aggregated column). With a ``window`` that leaves cells out, a bar trace
        named :data:`~.cell_style.OUTSIDE_WINDOW` (hatch bars on each of those
        cells, around its id where ids are written: :func:`~.cell_style.hatch_frame`), a legend bar, their ids (:func:`~.cell_style.add_outside_window`) and a line trace ``"window
        start"`` (a segment down each such row's cell edge where its window
        starts) come before it. With ``highlight``, the traces of
        :func:`~.picking.add_veil` and :func:`~.picking.add_outline` come last,
        after the trace :data:`~.cell_style.NEW_TOKENS` of ``query_lens``
        (``customdata`` = sequence, logical block, first and last new position in
        it, new tokens in it).
    """
    tables = np.asarray(block_tables)
    if tables.ndim != 2:
        raise ValueError(f"block_tables must be 2-D; got shape {tables.shape}")
    if color_by not in ("physical", "sequence"):
        raise ValueError(f"color_by must be 'physical' or 'sequence'; got {color_by!r}")
    lengths = np.asarray(context_lens, dtype=np.int64)
    batch, width = tables.shape
    if num_blocks is None:
        num_blocks = int(tables.max(initial=0)) + 1
    grid = block_table_grid(batch, width, max_cells, plot_width)
    rows, per_col = grid.rows, grid.col_stride
    names = rows if seq_ids is None else np.asarray(seq_ids, dtype=np.int64)[rows]
    seq_len = lengths[rows][:, None]
    if per_col == 1:
        x = first = last = grid.cols
        sub = tables[np.ix_(rows, x)].astype(np.int64)
        unalloc = sub < 0
        picked = None if highlight is None else (sub >= highlight.start) & (sub < highlight.stop)
    else:
        n_cols = math.ceil(width / per_col)
        padded = np.full((len(rows), n_cols * per_col), -1, dtype=np.int64)
        padded[:, :width] = tables[rows]
        bins = padded.reshape(len(rows), n_cols, per_col)
        held = bins >= 0
        allocated = held.sum(-1)
        unalloc = allocated == 0
        sub = np.where(unalloc, -1, np.take_along_axis(bins, held.argmax(-1)[..., None], -1)[..., 0])
        first = np.arange(n_cols) * per_col
        last = np.minimum(first + per_col, width) - 1
        x = np.append(first, width) - 0.5  # column edges: each column spans exactly its blocks
        picked = None if highlight is None else (
            held & (bins >= highlight.start) & (bins < highlight.stop)).any(-1)
    shape = sub.shape
    seq = np.broadcast_to(names[:, None], shape)
    start = np.broadcast_to(first[None, :] * block_size, shape)
    end = np.minimum(seq_len, (last[None, :] + 1) * block_size) - 1
    if per_col == 1:
        columns = [seq, np.broadcast_to(first[None, :], shape), start, end, sub,
                   filled_slots(seq_len, first[None, :], block_size)]
        hover = ("sequence %{customdata[0]}<br>logical block %{customdata[1]}"
                 "<br>tokens %{customdata[2]}–%{customdata[3]}<br>physical block %{customdata[4]}"
                 f"<br>slots filled %{{customdata[5]}}/{block_size}<extra></extra>")
        hover_unalloc = "sequence %{customdata[0]}<br>logical block %{customdata[1]}<br>unallocated (-1)<extra></extra>"
    else:
        columns = [seq, np.broadcast_to(first[None, :], shape), start, end, sub, allocated,
                   np.broadcast_to(last[None, :] - first[None, :] + 1, shape),
                   np.broadcast_to(last[None, :], shape)]
        hover = ("sequence %{customdata[0]}<br>logical blocks %{customdata[1]}–%{customdata[7]}"
                 "<br>tokens %{customdata[2]}–%{customdata[3]}"
                 "<br>%{customdata[5]} of %{customdata[6]} blocks allocated"
                 "<br>first: physical block %{customdata[4]}<extra></extra>")
        hover_unalloc = ("sequence %{customdata[0]}<br>logical blocks %{customdata[1]}–%{customdata[7]}"
                         "<br>unallocated (-1)<extra></extra>")
    custom = np.stack(columns, axis=-1).astype(np.int32)
    # A column lies outside the window when its last block comes before the sequence's first one read.
    q_rows = None if query_lens is None else np.asarray(query_lens, dtype=np.int64)[rows]
    first_read = first_read_blocks(lengths[rows], block_size, window, q_rows)
    outside = ~unalloc & (last[None, :] < first_read[:, None])

    z = np.where(unalloc, np.nan, sub).astype(float)
    by_sequence = color_by == "sequence"
    # A table of empty sequences keeps one column, but a sequence of 0 tokens holds 0 logical blocks.
    subtitle = ((f"{count(batch, 'sequence')} × {count(width, 'logical block')} of {count(block_size, 'token')}; "
                 if lengths.max(initial=0) > 0 else f"{count(batch, 'sequence')} of 0 tokens: no logical blocks; ")
                + ("colour = sequence, as in the pool; number = physical block" if by_sequence else BLOCK_KEY))
    if outside.any():
        subtitle += f" · hatched: before the sliding window of {count(window, 'token')}"
    if q_rows is not None:
        subtitle += " · ★ new tokens"
    if grid.sampled:
        parts = [f"every {ordinal(grid.row_stride)} row shown"] if grid.row_stride > 1 else []
        if per_col > 1:
            parts.append(f"{per_col:,} logical blocks per column (colour: the first allocated)")
        subtitle += " · sampled: " + "; ".join(parts)
    # At least 170 px of plot, so the colour bar keeps room for its ticks under its
    # two-line title when there are only a few rows.
    # A table in the page's narrower column (the serving page's) breaks its subtitle for it.
    figure_px = NARROW_FIGURE_PX if plot_width < WIDE_PLOT_PX else HALF_FIGURE_PX
    height = int(min(720, max(sum(title_margins(subtitle, figure_px)) + 170, 140 + 26 * len(rows))))
    plot_height = plot_area_height(height, subtitle, width_px=figure_px)
    gaps = cell_gaps(len(rows), shape[1], plot_height)
    digits = len(str(max(num_blocks - 1, 0)))
    text_on = per_col == 1 and cell_text_fits(len(rows), shape[1], digits, min(plot_width, WIDE_PLOT_PX), plot_height)
    # Presentation mode's ids outgrew the cells beside the colour bar and vanished: where
    # they fit once it goes, it goes (the subtitle still names the colour, the cells their ids).
    bare = (not by_sequence and not text_on and per_col == 1 and plot_width >= WIDE_PLOT_PX
            and cell_text_fits(len(rows), shape[1], digits, TABLE_BARE_PLOT_PX, plot_height))
    text_on = text_on or bare
    if not text_on:  # sized for the numbers' note; a grid too small for them says where the ids are
        subtitle = subtitle.replace("number = physical block", "hover: physical block")
    if by_sequence:  # the pool's categorical colours: 0 free, 1 other, 2 + seq % n a sequence
        codes = np.where(unalloc, np.nan, 2 + seq % len(SEQUENCE_COLORS)).astype(float)
        scale, k = owner_colorscale()
        colour = dict(z=codes, colorscale=scale, zmin=-0.5, zmax=k - 0.5, showscale=False,
                      text=inked(np.where(unalloc | outside, "", sub.astype(str)),
                                 palette_inks(seq % len(SEQUENCE_COLORS), SEQUENCE_COLORS)),
                      texttemplate="%{text}" if text_on else None)
    else:
        colour = dict(z=z, colorscale=BLOCK_COLORSCALE, zmin=0, zmax=max(1, num_blocks - 1), showscale=not bare,
                      texttemplate="%{text}" if text_on else None)
        if text_on:  # each id in the ink of more contrast on its cell; a hatched cell's go above the hatching
            colour.update(text=inked(np.where(unalloc | outside, "", sub.astype(str)),
                                     scale_inks(sub / max(1, num_blocks - 1), BLOCK_COLORSCALE)))
        if not bare:
            colour["colorbar"] = dict(title=colorbar_title(BLOCK_KEY), thickness=14,
                                      **integer_ticks(0, max(1, num_blocks - 1), colorbar_length_px(plot_height)))
    fig = go.Figure()
    fig.add_trace(
        go.Heatmap(
            x=x,
            y=rows,
            customdata=custom,
            hoverongaps=False,
            hovertemplate=hover,
            textfont=dict(size=font_px("cell")),
            **colour,
            **gaps,
            name="allocated",
        )
    )
    # The mark goes in the unallocated cells only: a constant texttemplate would
    # be written over every cell, striking through the allocated cells' ids.
    fig.add_trace(
        go.Heatmap(
            z=np.where(unalloc, 1.0, np.nan),
            x=x,
            y=rows,
            customdata=custom,
            colorscale=[[0, UNALLOCATED_COLOR], [1, UNALLOCATED_COLOR]],
            showscale=False,
            hoverongaps=False,
            hovertemplate=hover_unalloc,
            text=np.where(unalloc, "–", "") if text_on else None,
            texttemplate="%{text}" if text_on else None,
            textfont=dict(size=font_px("cell"), color=UNALLOCATED_INK),
            **gaps,
            name="unallocated (-1)",
        )
    )
    add_legend_square(fig, UNALLOCATED_COLOR, "unallocated (-1)", line="#CBD5E1")
    cell_px = min(plot_height / max(1, len(rows)), plot_width / max(1, shape[1]))
    beside_px = None if marks_beside_px is None else plot_width_px(marks_beside_px) / (shape[1] + 2 * GRID_PAD)
    centres = first + (last - first) / 2
    if outside.any():
        r, c = np.nonzero(outside)
        if by_sequence:
            inks = [SEQUENCE_COLORS[int(n) % len(SEQUENCE_COLORS)] for n in names[r]]
        else:
            inks = sample_colorscale(BLOCK_COLORSCALE, sub[r, c] / max(1, num_blocks - 1))
        add_outside_window(fig, centres[c], rows[r], last[c] - first[c] + 1, grid.row_stride, sub[r, c].astype(str)
                           if text_on else None, inks,
                           inks[0] if by_sequence else BLOCK_COLORSCALE[len(BLOCK_COLORSCALE) // 2][1],
                           text_box=id_box(digits, TABLE_BARE_PLOT_PX if bare else min(plot_width, WIDE_PLOT_PX),
                                            shape[1], plot_height, len(rows) * grid.row_stride))
        _window_starts(fig, rows, first_read, outside.any(1), grid.row_stride / 2)
    r, c = np.nonzero(~unalloc)
    # The targets win the hover: theirs says when a cell lies outside the window.
    window_text = np.where(outside[r, c], f"<br><b>{OUTSIDE_WINDOW}</b>", "")
    add_click_targets(fig, centres[c], rows[r], np.concatenate([custom[r, c], sub[r, c, None], sub[r, c, None]], -1),
                      cell_px, hovertemplate=hover.replace("<extra>", "%{text}<extra>"), text=window_text)
    if ref_counts is not None:
        # A row's height as drawn: the y axis spans the rows and a pad at either end.
        row_px = plot_height * grid.row_stride / (len(rows) * grid.row_stride + 2 * GRID_PAD)
        _shared_marks(fig, sub, rows, names, first, np.asarray(ref_counts), grid.row_stride,
                      exact=per_col == 1, cell_px=plot_width_px(min(plot_width, WIDE_PLOT_PX)) / (shape[1] + 2 * GRID_PAD),
                      row_px=row_px, ids=digits if text_on else 0,
                      gaps=gaps, beside_px=beside_px, copied=copied)
    if q_rows is not None:
        _new_token_marks(fig, names, rows, first, last, lengths[rows], q_rows, block_size, grid.row_stride, cell_px)
    if highlight is not None:
        add_veil(fig, x, rows, picked, **gaps)
        r, c = np.nonzero(picked)
        half = grid.row_stride / 2
        add_outline(fig, first[c] - 0.5, last[c] + 0.5, rows[r] - half, rows[r] + half, cell_px)
    apply_style(fig, title, subtitle, height=height, width_px=figure_px)
    # The grid's own extent (and room for an outline on its edge): the markers of the
    # click targets and shared-block marks would pad an autorange past it, to a "-1" tick.
    half = grid.row_stride / 2
    fig.update_xaxes(title="logical block", showgrid=False, zeroline=False,
                     range=[-0.5 - GRID_PAD, width - 0.5 + GRID_PAD], **integer_ticks(0, width - 1, plot_width=plot_width))
    fig.update_yaxes(title="sequence" if seq_ids is None else "sequence (seq_id)",
                     range=[rows[-1] + half + GRID_PAD, rows[0] - half - GRID_PAD], showgrid=False, zeroline=False)
    # Label rows by name (a seq_id need not be the row index), a line of tick text
    # apart at the size of now; row indices at round steps (every 20th, 100th, ...).
    step = row_tick_step(len(rows), plot_height, grid.row_stride if seq_ids is None else None)
    fig.update_yaxes(tickmode="array", tickvals=rows[::step], ticktext=[format_number(int(r)) for r in names[::step]])
    return fig


#: Round steps of the table's sequence ticks: 1, 2, 5, 10, 20, 25, 50, 100, ...
_ROUND_STEPS = tuple(m * 10 ** e for e in range(12) for m in ((1, 2, 5) if e == 0 else (1, 2, 2.5, 5)))


def row_tick_step(n_rows: int, plot_height: float, row_stride: int | None = None) -> int:
    """Every how many drawn rows of ``n_rows`` over ``plot_height`` px (at the scale
    of now) a y tick label goes: labels at least a line of tick text apart
    (:data:`~explorer.style.LINE_HEIGHT` times :func:`~explorer.style.font_px`
    ``"tick"``), so that they never touch in either mode. With ``row_stride`` (the
    drawn rows are every ``row_stride``-th sequence, labelled by index), the labelled
    sequences are a round step apart (20, 100, 250, ...: a multiple of the stride)."""
    gap = LINE_HEIGHT * font_px("tick")
    step = max(1, math.ceil(max(n_rows, 1) * gap / max(plot_height, 1.0)))
    if row_stride is None or step == 1:
        return step
    return next(s for s in _ROUND_STEPS if s % row_stride == 0 and s >= step * row_stride) // row_stride


def _window_starts(fig, rows, first_read, marked, half) -> None:
    """A bold line down each ``marked`` row's cell edge where its window starts
    (before logical block ``first_read``): the hatched cells end there."""
    xs, ys = [], []
    for row, start in zip(rows[marked], first_read[marked]):
        xs += [start - 0.5, start - 0.5, None]
        ys += [row - half, row + half, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=OUTSIDE_WINDOW_EDGE, width=scaled(3)),
                             hoverinfo="skip", showlegend=False, name="window start"))


def _new_token_marks(fig, names, rows, first, last, lengths, q, block_size, row_stride, cell_px) -> None:
    """A star in the bottom-right corner of each drawn cell that holds new tokens
    (positions ``n - q .. n - 1`` of its row's sequence)."""
    start = np.maximum(first[None, :] * block_size, (lengths - q)[:, None])  # the new positions in each cell
    end = np.minimum((last[None, :] + 1) * block_size, lengths[:, None]) - 1
    r, c = np.nonzero((end >= start) & (q[:, None] > 0))
    width = last[c] - first[c] + 1
    custom = np.stack([names[r], first[c], start[r, c], end[r, c], end[r, c] - start[r, c] + 1, q[r]], axis=-1)
    add_new_token_marks(
        fig, first[c] + (width - 1) / 2 + 0.3 * width, rows[r] + 0.28 * row_stride, custom,
        "sequence %{customdata[0]}, logical block %{customdata[1]}<br>" + NEW_TOKENS
        + ": positions %{customdata[2]}–%{customdata[3]}<br>%{customdata[4]} of the sequence's %{customdata[5]}"
        "<extra></extra>",
        cell_px,
    )


#: Pixels a shared mark keeps from the id written in its cell and from the cell's edge (at
#: scale 1, grown with it; 1 px where the cell is too tight for it).
SHARED_MARK_GAP_PX, MIN_EDGE_PX = 2, 1
#: The shared mark (:data:`~explorer.marks.SHARED_MARK`, as the captions name it): at most this
#: share of the cell text's size, at least :data:`MIN_SHARED_MARK_PX` (at scale 1, grown with it:
#: 3 px lost its white fill in its outline) where the cell holds that clear of the id, else the
#: most it holds; its outline :data:`SHARED_MARK_LINE_PX` (grown likewise).
SHARED_MARK_SHARE, MIN_SHARED_MARK_PX, SHARED_MARK_LINE_PX = 0.75, 7, 1.2
#: A copy-on-write copy in the table: the Serving simulation pool's mark (a yellow plus).
COPIED_MARK = POOL_CHANGE_MARKS["copied"]


def _shared_marks(fig, sub, rows, names, cols, ref_counts, row_stride, *, exact: bool, cell_px: float,
                  row_px: float, ids: int, gaps: dict, beside_px: float | None = None,
                  copied: np.ndarray | None = None) -> None:
    """:data:`~explorer.marks.SHARED_MARK` on the block-table cells whose physical block
    is shared, in the cell's top-left corner clear of the id written there (issue 27: it
    sat over ids, and over the next cell in narrow columns), as large as
    :func:`~explorer.marks.corner_fit` finds room for in the narrowest cell: ``cell_px``
    wide (``beside_px`` where given and narrower) and ``row_px`` high, less the heatmap's
    ``gaps``; ``ids`` digits of id text (0: none). With ``copied`` (physical block ids
    copy-on-write made: held by one sequence, never a shared cell), the copy-on-write
    plus (:data:`~explorer.marks.POOL_CHANGE_MARKS` ``"copied"``) in the same corner of the
    cells pointing to them, a trace of its own."""
    holders = np.where(sub >= 0, ref_counts[np.maximum(sub, 0)], 0)
    r, c = np.nonzero(holders > 1) if exact else (np.array([], dtype=int),) * 2
    place = dict(row_stride=row_stride, cell_px=cell_px, row_px=row_px, ids=ids, gaps=gaps, beside_px=beside_px)
    _corner_marks(fig, SHARED_MARK, cols[c], rows[r],
                  np.stack([names[r], cols[c], sub[r, c], holders[r, c]], axis=-1) if len(r) else None,
                  "sequence %{customdata[0]}, logical block %{customdata[1]}"
                  "<br>physical block %{customdata[2]}: shared by %{customdata[3]} sequences<extra></extra>", **place)
    if copied is not None and exact:
        r, c = np.nonzero((sub >= 0) & np.isin(sub, np.asarray(copied, dtype=np.int64)))
        _corner_marks(fig, COPIED_MARK, cols[c], rows[r],
                      np.stack([names[r], cols[c], sub[r, c]], axis=-1) if len(r) else None,
                      "sequence %{customdata[0]}, logical block %{customdata[1]}<br>physical block "
                      "%{customdata[2]}: a copy-on-write copy of a shared partly filled block<extra></extra>", **place)


def _corner_marks(fig, mark, x, y, customdata, hovertemplate: str, *, row_stride, cell_px: float, row_px: float,
                  ids: int, gaps: dict, beside_px: float | None) -> None:
    """One trace of ``mark`` in the top-left corner of the cells centred at ``x``, ``y``,
    sized and placed as :func:`_shared_marks` says."""
    gap, line = scaled(SHARED_MARK_GAP_PX), min(scaled(SHARED_MARK_LINE_PX), max(0.1 * row_px, 0.5))
    wide = cell_px if beside_px is None else min(cell_px, beside_px)
    text_w, text_h = ids * TEXT_CHAR_WIDTH * font_px("cell"), (font_px("cell") if ids else 0.0)
    dx, dy, size = corner_fit(wide - gaps["xgap"], row_px - gaps["ygap"], text_w, text_h, symbol=mark.symbol,
                              line=line, margin=gap, floor=scaled(MIN_SHARED_MARK_PX),
                              most=SHARED_MARK_SHARE * font_px("cell"))
    width = min(line, size / 6)
    shift, lift = -dx / max(wide, 1.0), -dy / max(row_px, 1.0) * row_stride
    fig.add_trace(
        go.Scatter(
            x=np.asarray(x, dtype=float) - shift,
            y=np.asarray(y) - lift,
            mode="markers",
            marker=dict(symbol=mark.symbol, size=size, color=mark.fill, line=dict(color=mark.line, width=width)),
            customdata=customdata,
            hovertemplate=hovertemplate,
            cliponaxis=False,
            name=mark.name,
        )
    )
