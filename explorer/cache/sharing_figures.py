"""Figures of a KV cache that shares blocks: the physical pool coloured by how many
sequences hold each block (the block table's marks are
:func:`~.figures.block_table_figure`'s ``ref_counts``), and a serving simulation's
blocks in use with sharing against without."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.cache.cell_style import (
    NARROW_BAR_PLOT_PX,
    NARROW_PLOT_PX,
    POOL_REF_COUNT_KEY,
    REF_COUNT_KEY,
    add_legend_square,
    cell_text_fits,
    colorbar_title,
    ink_on,
    inked,
    legend_key,
    legend_key_text,
)
from explorer.cache.picking import GRID_PAD
from explorer.cache.pool_figures import (
    mark_rows_px,
    marks_cell_px,
    place_pool_marks,
    pool_pick,
    pool_shape,
    pool_title_px,
)
from explorer.category_ticks import first_block_ticks
from explorer.formatting import count, line_count
from explorer.limits import MAX_POOL_CELLS, MAX_STEPPED_REFS
from explorer.marks import POOL_CHANGE_MARKS
from explorer.panel_layout import origin_clear_range
from explorer.style import (
    FREE_COLOR,
    FULL_FIGURE_PX,
    FULL_PLOT_WIDTH_PX,
    NARROW_FIGURE_PX,
    OTHER_COLOR,
    REF_COUNT_COLORS,
    apply_style,
    cell_gaps,
    font_px,
    integer_ticks,
    plot_area_height,
    plot_width_px,
    scaled,
    with_alpha,
)

#: Reference-count levels that read from the back of a room: the first count of each
#: (1, 2, 3-4, 5+), and their colours, four steps of :data:`~explorer.style.REF_COUNT_COLORS`.
REF_LEVELS = (1, 2, 3, 5)
REF_LEVEL_COLORS = tuple(REF_COUNT_COLORS[i] for i in (0, 1, 3, 4))
#: :data:`~explorer.style.REF_COUNT_COLORS` as a colour scale from one holder (0) to the most (1).
_REF_SCALE = [[i / (len(REF_COUNT_COLORS) - 1), c] for i, c in enumerate(REF_COUNT_COLORS)]
#: The name of blocks held by sequences outside the batch (the fragmented layout's).
OTHER_NAME = "other sequences (not in batch)"


def ref_color(k: int, top: int) -> str:
    """The colour of a block ``k`` sequences hold, in a pool whose most is ``top``:
    free grey for none, then :data:`~explorer.style.REF_COUNT_COLORS`: its ``k``-th colour
    while ``top`` is at most its length (one count, one colour, on every chart), else the
    scale sampled from one holder to ``top``."""
    if k <= 0:
        return FREE_COLOR
    if top <= len(REF_COUNT_COLORS):
        return REF_COUNT_COLORS[min(k, top) - 1]
    return sample_colorscale(_REF_SCALE, [(k - 1) / max(1, top - 1)])[0]


def _bands(colors: Sequence[str], span: int) -> list:
    """The first ``len(colors)`` of ``span`` equal bands of a colour scale, one colour each."""
    return [[(i + j) / span, c] for i, c in enumerate(colors) for j in (0, 1)]


def _ref_colorscale(top: int, lo: int, levels: int | None = None) -> list:
    """Colour scale over ``z`` in ``[lo - 0.5, top + 0.5]``: other sequences' blocks
    (``z = -1``, when ``lo`` is -1), free (0), then one step per count up to
    :data:`MAX_STEPPED_REFS`, past that a gradient; with ``levels``, one step per
    level (``z`` = the level) in :data:`REF_LEVEL_COLORS`."""
    fixed = [OTHER_COLOR] * (lo < 0) + [FREE_COLOR]
    if levels is not None or top <= MAX_STEPPED_REFS:
        steps = REF_LEVEL_COLORS[:levels] if levels is not None else [ref_color(k, top) for k in range(1, top + 1)]
        return _bands([*fixed, *steps], len(fixed) + len(steps))
    edge = len(fixed) / (top - lo + 1)
    return [*_bands(fixed, top - lo + 1), *[[edge + (1 - edge) * x, c] for x, c in _REF_SCALE]]


def ref_count_name(lo: int, hi: int | None = -1) -> str:
    """The legend name of blocks ``lo`` to ``hi`` sequences hold (``hi`` -1: just ``lo``;
    None: ``lo`` or more), on every page alike: "1 sequence", "2 sequences",
    "3–4 sequences", "5+ sequences"."""
    span = f"{lo}+" if hi is None else str(lo) if hi in (-1, lo) else f"{lo}–{hi}"
    return f"{span} sequence" + ("" if span == "1" else "s")


def ref_level_names(levels: Sequence[int] = REF_LEVELS) -> list[str]:
    """Legend names of reference-count ``levels`` (first counts, increasing from 1):
    ``["1 sequence", "2 sequences", "3–4 sequences", "5+ sequences"]`` (:func:`ref_count_name`)."""
    return [ref_count_name(lo, levels[i + 1] - 1 if i + 1 < len(levels) else None) for i, lo in enumerate(levels)]


def pool_ref_count_figure(
    ref_counts: np.ndarray, block_tables: np.ndarray, block_size: int, *, max_cells: int = MAX_POOL_CELLS,
    levels: Sequence[int] | None = None, seq_ids: Sequence[int] | None = None,
    highlight: range | None = None, other: np.ndarray | None = None, fit_ids: bool = False,
    copied: Sequence[int] | None = None, plot_width: float = NARROW_PLOT_PX, figure_px: float = NARROW_FIGURE_PX,
) -> go.Figure:
    """The physical pool coloured by reference count: how many sequences hold each block.

    Free blocks are grey, held ones orange (:data:`~explorer.style.REF_COUNT_COLORS`),
    darker the more sequences hold them; blocks that sequences outside the batch
    hold (``other``) slate. Pools larger than ``max_cells`` blocks are
    aggregated: each cell covers consecutive blocks and is coloured by the most
    holders among them. With ``levels`` the counts are binned into a few colours
    (:data:`REF_LEVEL_COLORS`), every level always in the legend, for a pool shown
    to a room. The legend (or colour bar) is titled
    :data:`~.cell_style.REF_COUNT_KEY`.

    Parameters
    ----------
    ref_counts : ndarray
        ``[num_blocks]`` integers, 0 free.
    block_tables : ndarray
        ``[batch_size, max_num_blocks]``, ``-1`` unallocated (the holders in the hover).
    block_size : int
    levels : sequence of int, optional
        The first count of each colour level, increasing from 1 (e.g.
        :data:`REF_LEVELS`: 1, 2, 3–4, 5+); at most ``len(REF_LEVEL_COLORS)``.
    seq_ids : sequence of int, optional
        The ``seq_id`` of each row of ``block_tables``, named in the hover (by
        default the row index).
    highlight : range, optional
        Physical block ids to outline (see :func:`~.pool_figures.pool_pick`).
    other : ndarray of bool, optional
        ``[num_blocks]``: blocks held by sequences outside the batch (the
        fragmented layout's ``OTHER``), which no row of ``block_tables`` holds.
    fit_ids : bool
        Lay the grid out so that each block's id fits its cell where it can
        (:func:`~.pool_figures.pool_shape`), in cells that hold its ``copied`` marks at
        :data:`~.pool_figures.POOL_MARK_PX` clear of the ids (:func:`~.pool_figures.marks_cell_px`).
    copied : sequence of int, optional
        Physical blocks that copy-on-write made (:attr:`~.sharing.SharedBatch.copied`):
        each gets the Serving simulation's copy-on-write mark
        (:data:`~explorer.marks.POOL_CHANGE_MARKS` ``"copied"``) in its cell's top-left
        corner, and the mark a legend entry; not drawn in an aggregated pool.
    plot_width, figure_px : float
        The plot area's and the figure's width at scale 1 (px), as for
        :func:`~.pool_figures.pool_figure`: two fifths of the page by default.

    Returns
    -------
    go.Figure
        Trace 0 is the heatmap; its ``z`` is the reference count of each block
        (the most in each cell when aggregated; -1 for ``other``, NaN past the
        pool), ``zmin`` -0.5 (-1.5 with ``other`` blocks) and ``zmax = max + 0.5``.
        Legend-only squares ``"free"``, :data:`OTHER_NAME` (with ``other`` blocks),
        ``"1 sequence"`` and, up to :data:`MAX_STEPPED_REFS` holders, ``"k
        sequences"`` (:func:`ref_count_name`) (``meta={"refs": k}``) for each count present follow; past
        that a colour bar. With ``levels``, ``z`` is the level instead (0 free,
        ``i + 1`` for level ``i``) and the squares are ``"free"`` and every level's
        :func:`ref_level_names` (``meta={"level": i + 1}``). Then
        :func:`~.pool_figures.pool_pick`'s traces; with ``copied`` (exact pool), last the
        mark trace named ``POOL_CHANGE_MARKS["copied"].name`` (``meta={"mark": "copied"}``,
        ``customdata[:, 0]`` its blocks).

    Raises
    ------
    ValueError
        If ``levels`` does not start at 1, does not increase, or has more entries
        than :data:`REF_LEVEL_COLORS`.
    """
    if levels is not None and (not 0 < len(levels) <= len(REF_LEVEL_COLORS) or levels[0] != 1
                               or any(b <= a for a, b in zip(levels, levels[1:]))):
        raise ValueError(f"levels must increase from 1, at most {len(REF_LEVEL_COLORS)} of them; got {levels!r}")
    refs = np.asarray(ref_counts, dtype=np.int64)
    num_blocks = len(refs)
    foreign = np.zeros(num_blocks, bool) if other is None else np.asarray(other, dtype=bool) & (refs == 0)
    cow = POOL_CHANGE_MARKS["copied"]
    cell_w, cell_h = marks_cell_px([(cow.symbol, 1.0)] if fit_ids and copied is not None and len(copied) else [],
                                   num_blocks)
    n_rows, n_cols, per_cell = shape = pool_shape(num_blocks, max_cells, fit_ids, plot_width, cell_w)
    cells = n_rows * n_cols
    padded = np.full(cells * per_cell, -1, dtype=np.int64)
    padded[:num_blocks] = refs
    groups = padded.reshape(cells, per_cell)
    outside = np.zeros(cells * per_cell, bool)
    outside[:num_blocks] = foreign
    z = groups.max(1).astype(float)
    if levels is not None:  # the level of each count: 0 free, i + 1 for levels[i] <= count < levels[i + 1]
        z = np.searchsorted(np.asarray(levels), z, side="right").astype(float)
    z[(groups.max(1) == 0) & outside.reshape(cells, per_cell).any(1)] = -1
    z[groups.max(1) < 0] = np.nan
    lo = -1 if foreign.any() else 0
    top = max(2, int(refs.max(initial=0)))
    shared = int((refs > 1).sum())
    subtitle = (f"{count(num_blocks, 'block')}, {count(shared, 'shared block')}; {REF_COUNT_KEY}"
                if per_cell == 1 else
                f"{count(num_blocks, 'block')}, {per_cell} per cell; colour = most sequences holding one")
    stepped = top <= MAX_STEPPED_REFS or levels is not None
    counts = (np.unique(refs[refs > 1]) if stepped and levels is None else np.array([], dtype=np.int64))
    # Grow the figure by its legend (Plotly stacks these entries one a row in a
    # narrow column, under its title) rather than let it squeeze the grid.
    key_lines = line_count(legend_key_text(POOL_REF_COUNT_KEY, figure_px)) if stepped else 1
    marked = copied is not None and per_cell == 1  # the copy-on-write mark's entry, a row of its own
    extra = 22 * (1 + key_lines + len(counts) + (lo < 0) + marked) if levels is None else 52
    height = int(min(720, max(320, 190 + 24 * n_rows)) + extra + pool_title_px(subtitle, figure_px))
    if per_cell == 1:
        height += mark_rows_px(plot_area_height(height, subtitle, width_px=figure_px) - scaled(extra), n_rows, cell_h)
    plot_height = plot_area_height(height, subtitle, width_px=figure_px) - scaled(extra)  # grown as the height is
    if per_cell == 1:
        holders: list[list[int]] = [[] for _ in range(num_blocks)]
        tables = np.asarray(block_tables, dtype=np.int64)
        names = list(range(len(tables))) if seq_ids is None else [int(s) for s in seq_ids]
        for seq, col in zip(*np.nonzero(tables >= 0)):
            holders[tables[seq, col]].append(names[seq])
        hover = [f"block {b}<br>held by a sequence outside this batch" if foreign[b] else
                 f"block {b}<br>free" if not h else
                 f"block {b}<br>held by {count(len(h), 'sequence')}: "
                 + ", ".join(map(str, h[:8])) + (", …" if len(h) > 8 else "")
                 for b, h in enumerate(holders)] + [""] * (cells - num_blocks)
        custom = np.array(hover, dtype=object).reshape(n_rows, n_cols)
        template = "%{customdata}<extra></extra>"
        text = np.array([str(i) if i < num_blocks else "" for i in range(cells)], dtype=object)
        # Each id in the ink of more contrast on its cell's colour: other, free, then a count's (or level's).
        def cell_color(v: float) -> str:
            if np.isnan(v) or v <= 0:
                return OTHER_COLOR if v == -1 else FREE_COLOR
            return REF_LEVEL_COLORS[int(v) - 1] if levels is not None else ref_color(int(v), top)
        values = sorted({float(v) for v in z if not np.isnan(v)})
        ink = {v: ink_on(cell_color(v)) for v in values}
        text = inked(text, np.array([ink.get(float(v), ink_on(FREE_COLOR)) for v in z], dtype=object))
        text_on = cell_text_fits(n_rows, n_cols, len(str(num_blocks - 1)), plot_width, plot_height)
    else:
        first = np.arange(cells) * per_cell
        last = np.minimum(first + per_cell, num_blocks) - 1
        custom = np.stack([first, last, (groups > 0).sum(1), (groups > 1).sum(1), groups.max(1)],
                          axis=-1).reshape(n_rows, n_cols, 5)
        template = ("blocks %{customdata[0]}–%{customdata[1]}<br>in use: %{customdata[2]}"
                    "<br>shared: %{customdata[3]} (up to %{customdata[4]} sequences)<extra></extra>")
        text, text_on = None, False
    fig = go.Figure(
        go.Heatmap(
            z=z.reshape(n_rows, n_cols),
            customdata=custom,
            text=None if text is None else text.reshape(n_rows, n_cols),
            texttemplate="%{text}" if text_on else None,
            textfont=dict(size=font_px("cell")),
            colorscale=_ref_colorscale(top, lo, None if levels is None else len(levels)),
            zmin=lo - 0.5,
            zmax=(top if levels is None else len(levels)) + 0.5,
            showscale=not stepped,
            colorbar=dict(title=colorbar_title(POOL_REF_COUNT_KEY), thickness=14,
                          **integer_ticks(0, top, plot_height)),
            hoverongaps=False,
            hovertemplate=template,
            **cell_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )
    add_legend_square(fig, FREE_COLOR, "free")
    if lo < 0:
        add_legend_square(fig, OTHER_COLOR, OTHER_NAME)
    if levels is not None:
        for i, name in enumerate(ref_level_names(levels)):
            add_legend_square(fig, REF_LEVEL_COLORS[i], name, meta={"level": i + 1})
    else:
        add_legend_square(fig, ref_color(1, top), ref_count_name(1))
    if stepped and levels is None:  # one entry per count present; a colour bar of a few steps is too short to read
        for k in counts:
            add_legend_square(fig, ref_color(int(k), top), ref_count_name(int(k)), meta={"refs": int(k)})
    pool_pick(fig, num_blocks, max_cells, plot_height, highlight, shape)
    if copied is not None and per_cell == 1:
        _copied_marks(fig, np.asarray(copied, dtype=np.int64), n_rows, n_cols,
                      plot_width_px(plot_width if stepped else NARROW_BAR_PLOT_PX), plot_height,
                      len(str(num_blocks - 1)) if text_on else 0)
    if stepped:
        legend_key(fig, POOL_REF_COUNT_KEY, figure_px)
    apply_style(fig, "Physical block pool: sharing", subtitle, height=height, width_px=figure_px)
    fig.update_xaxes(title=f"+ offset within row ({per_cell} blocks per cell)" if per_cell > 1
                     else "+ offset within row", showgrid=False, zeroline=False,
                     **integer_ticks(0, n_cols - 1, plot_width=plot_width if stepped else NARROW_BAR_PLOT_PX))
    fig.update_yaxes(title="first block", range=[n_rows - 0.5 + GRID_PAD, -0.5 - GRID_PAD], showgrid=False,
                     zeroline=False, **first_block_ticks(n_rows, n_cols * per_cell, plot_height))
    return fig


def _copied_marks(fig: go.Figure, blocks: np.ndarray, n_rows: int, n_cols: int, plot_w: float, plot_h: float,
                  digits: int) -> None:
    """The copy-on-write mark on ``blocks`` of the pool, as the Serving simulation's pool
    draws it, placed by :func:`~.pool_figures.place_pool_marks` clear of ``digits`` of id."""
    mark = POOL_CHANGE_MARKS["copied"]
    fig.add_trace(go.Scatter(
        x=blocks % n_cols if len(blocks) else [None], y=blocks // n_cols if len(blocks) else [None],
        mode="markers", name=mark.name, meta={"mark": "copied"},
        marker=dict(symbol=mark.symbol, color=mark.fill, line=dict(color=mark.line, width=1)),
        customdata=blocks[:, None] if len(blocks) else None,
        hovertemplate="block %{customdata[0]}: a copy-on-write copy (a sample's own copy of a shared partly "
                      "filled block)<extra></extra>",
    ))
    place_pool_marks(fig, n_rows, n_cols, plot_w, plot_h, digits)


#: The serving timeline's two lines: blocks in use with sharing (the colour of blocks in
#: use on the Serving page, :data:`explorer.serving.figures.POOL_COLOR`; not Triton's
#: blue), and the same batch without.
SHARED_LINE_COLOR = "#805800"
UNSHARED_LINE_COLOR = "#9CA3AF"


def sharing_timeline_figure(metrics, step: int | None = None, num_blocks: int | None = None, *,
                            kind: str = "sharing", note: str | None = None) -> go.Figure:
    """Blocks in use over a serving simulation, with sharing (or ``kind``) against without.

    Parameters
    ----------
    metrics : DataFrame
        :func:`~explorer.serving.simulator.metrics_frame` of a simulation with sharing: its
        ``blocks_in_use`` (the pool with sharing) and ``blocks_unshared`` (the same
        running sequences, each in blocks of its own).
    step : int, optional
        The step shown elsewhere on the page, marked by a dotted line.
    num_blocks : int, optional
        Pool size, drawn dashed: without sharing the batch can need more blocks than
        the pool has.
    kind, note : str
        What is compared (``"freeing"``: a window's blocks freed, ``blocks_unshared``
        then holding the pool without it), and the subtitle's first words (default:
        the same running sequences each step).

    Returns
    -------
    go.Figure
        Traces ``"without sharing"`` and ``"with sharing"`` (``kind`` in place of sharing) (``y`` per step), then
        ``"pool size"`` when given.
    """
    x = metrics["step"].to_numpy()
    shared, unshared = metrics["blocks_in_use"].to_numpy(), metrics["blocks_unshared"].to_numpy()
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=x, y=unshared, name=f"without {kind}", mode="lines", line=dict(color=UNSHARED_LINE_COLOR, width=1.8),
        hovertemplate=f"step %{{x}}: %{{y:,}} physical blocks without {kind}<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=x, y=shared, name=f"with {kind}", mode="lines", line=dict(color=SHARED_LINE_COLOR, width=2),
        fill="tonexty", fillcolor=with_alpha(SHARED_LINE_COLOR, 0.10), customdata=unshared - shared,
        hovertemplate=f"step %{{x}}: %{{y:,}} physical blocks with {kind} (%{{customdata:,}} saved)<extra></extra>",
    ))
    if num_blocks is not None:
        fig.add_trace(go.Scatter(
            x=[x[0], x[-1]] if len(x) else [], y=[num_blocks, num_blocks], name="pool size", mode="lines",
            line=dict(color="#111827", dash="dash", width=1), hovertemplate=f"pool: {num_blocks:,} physical blocks<extra></extra>",
        ))
    if step is not None and len(x):
        fig.add_vline(x=step, line=dict(color="#111827", width=1, dash="dot"))
    subtitle = (note or "the same running sequences each step") + "; shaded = blocks saved" + (
        "; dotted line = the step shown above" if step is not None else "")
    apply_style(fig, f"Blocks in use: with {kind} against without", subtitle, height=360,
                width_px=FULL_FIGURE_PX)  # across the page
    top = max(num_blocks or 0, int(unshared.max(initial=0)), 1)
    ticks = integer_ticks(x.min(initial=0), x.max(initial=0))
    # The step axis starts a little left of step 0: its "0" clear of the y axis's "0" (review 3).
    fig.update_xaxes(title="decode step", range=origin_clear_range(
        x.min(initial=0), x.max(initial=0), ticks["tickvals"][0], ticks["ticktext"][0],
        plot_width_px(FULL_PLOT_WIDTH_PX)), **ticks)
    fig.update_yaxes(title="physical blocks", rangemode="tozero", **integer_ticks(0, top, 220))
    fig.update_layout(hovermode="x unified")
    return fig
