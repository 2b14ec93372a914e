"""Figures of the serving simulation: the pool at one step, the timeline of a run,
the block-size trade-off and the pool's animation over the steps.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.cache.cell_style import add_legend_square, cell_text_fits
from explorer.cache.pool_figures import place_pool_marks, pool_figure
from explorer.cache.sampling import pool_grid_shape
from explorer.cache.sharing_figures import REF_LEVELS, pool_ref_count_figure
from explorer.category_ticks import first_block_ticks
from explorer.formatting import count, format_number, format_percent, line_count
from explorer.legend_layout import fit_legend
from explorer.limits import MAX_ANIMATION_FRAMES, MAX_POOL_CELLS, MAX_SEQUENCE_LEGEND
from explorer.marks import POOL_CHANGE_MARKS
from explorer.panel_layout import origin_clear_range, stacked_panels
from explorer.serving.snapshot import PoolChanges
from explorer.serving.view import ref_levels
from explorer.style import (
    FREE_COLOR,
    FULL_FIGURE_PX,
    FULL_PLOT_WIDTH_PX,
    OTHER_COLOR,
    SEQUENCE_COLORS,
    apply_style,
    cell_gaps,
    font_px,
    integer_ticks,
    plot_width_px,
    scaled,
    title_margins,
    with_alpha,
)

#: The metric lines of :func:`serving_timeline_figure` (and the trade-off's waste bars):
#: colours no other meaning of the page takes, dark where the sequences' and the
#: reference counts' palettes are light or bright, at least 25 apart (CIE76) from
#: every colour of theirs, of the block ids' blues and of Triton's line, and of
#: another hue or lightness (tests/test_colour_language.py): the old teal, amber and
#: red read as sequences 5, 9 and 2, then the blue of blocks in use as Triton's
#: latency line and a block id, the purple of wasted slots as the sequences' lavender.
POOL_COLOR = "#805800"  # bronze
WASTE_COLOR = "#500838"  # dark wine
WAITING_COLOR = "#303030"  # charcoal
RUNNING_COLOR = "#005048"  # deep teal, a line only
#: The metric lines, by trace name.
METRIC_COLORS = {"blocks in use": POOL_COLOR, "wasted slots": WASTE_COLOR, "running": RUNNING_COLOR,
                 "waiting": WAITING_COLOR}
#: What :func:`serving_pool_figure` colours the pool by.
POOL_COLOR_MODES = ("sequence", "reference count")


def check_color_by(color_by: str) -> None:
    """Raise ``ValueError`` unless ``color_by`` is one of :data:`POOL_COLOR_MODES`."""
    if color_by not in POOL_COLOR_MODES:
        raise ValueError(f"color_by must be one of {', '.join(POOL_COLOR_MODES)}; got {color_by!r}")


#: The pool's legend, read from the back of a room: its font (px) at scale 1. At the presentation scale
#: (19.5 px) two entries of :data:`LEGEND_NAME_CHARS` still share a row of the narrowest column: a legend
#: of one entry a row (22.5 px, 15 at scale 1) stood taller than the grid.
POOL_LEGEND_FONT = 13
#: The most characters of a name in the pool's legend ("copy-on-write", "partly
#: filled", "+12 sequences"); the caption under the pool says the rest.
LEGEND_NAME_CHARS = 13
#: Most sequences the pool's legend names one by one (the lowest seq_ids); the
#: others share one entry, so the legend stays a few rows under the grid.
POOL_LEGEND_SEQUENCES = 4
#: Pixels of one row of the pool's grid, and the least and most its plot area takes.
POOL_ROW_PX, MIN_POOL_PLOT_PX, MAX_POOL_PLOT_PX = 28, 200, 560
#: Share of a pool cell's width its marks keep from its sides (review 3: two cells' marks read as a pair).
POOL_MARK_INSET = 0.15
#: The narrowest the pool is drawn (its column on a 1280 px page): the plot area's
#: width in px, which is also the most a row of its legend takes.
_NARROW_PLOT_PX = 380
#: Pixels under the grid: the x axis's ticks and title, then a gap before the legend.
_POOL_AXIS_PX = 62
#: Plotly's legend geometry: an entry's pixels besides its text (symbol), the gap
#: between entries, a row's height in px of the font, and the legend's padding.
_LEGEND_SYMBOL_PX, _LEGEND_GAP_PX, _LEGEND_ROW, _LEGEND_PAD_PX = 40, 5, 1.75, 12
#: Width of a character in px of its font size (Inter, Arial: about half).
_CHAR_WIDTH = 0.5
#: The pool's legend names under sharing and on many sequences, short enough for
#: two entries a row in the narrowest column (Plotly lays a legend that takes
#: several rows out in columns as wide as its widest entry).
_PARTIAL_NAME = "partly filled"


def serving_pool_figure(
    pool_owner: np.ndarray,
    block_tables: np.ndarray,
    context_lens: Sequence[int],
    block_size: int,
    *,
    step: int | None = None,
    taken: Sequence[int] = (),
    freed: Sequence[int] = (),
    recycled: Sequence[int] = (),
    copied: Sequence[int] = (),
    revived: Sequence[int] = (),
    color_by: str = "sequence",
    sharing: bool = False,
    seq_ids: Sequence[int] | None = None,
    max_cells: int = MAX_POOL_CELLS,
    max_holders: int | None = None, plot_width: float = _NARROW_PLOT_PX,
) -> go.Figure:
    """The pool of a serving simulation at one step, plus what the step changed.

    Coloured by owning sequence (:func:`pool_figure`: colour = owning ``seq_id``,
    the lowest of a shared block's holders, grey = free, dot = partly filled last
    block) or by reference count (:func:`pool_ref_count_figure` in the levels
    :data:`REF_LEVELS`: how many running sequences hold each block). The marks
    show blocks that left the free list or went back to it during the step (see
    :class:`~explorer.serving.snapshot.PoolChanges`, drawn as
    :data:`~explorer.marks.POOL_CHANGE_MARKS`): taken for new tokens, taken
    again after an earlier sequence held them (recycled), copy-on-write
    copies, cached blocks revived by a prefix-cache hit and blocks whose
    last reference went (freed). A block that only gains or loses a reference is not
    marked: the reference-count colours show it.

    Parameters
    ----------
    pool_owner : ndarray
        ``[num_blocks]``: owning ``seq_id``, ``-1`` free.
    block_tables, context_lens, block_size
        The running batch, as for :func:`pool_figure`.
    taken, freed, recycled, copied, revived : sequence of int
        Physical block ids (``recycled`` and ``copied`` subsets of ``taken``).
    color_by : {"sequence", "reference count"}
    sharing : bool
        Whether blocks can be shared: the copy-on-write and prefix-cache marks are
        then always in the legend (otherwise only when the step has some), so the
        legend stays put while the step changes.
    seq_ids : sequence of int, optional
        The ``seq_id`` of each row of ``block_tables`` (the hover of the
        reference-count view names them).
    max_holders : int, optional
        The most sequences that can hold a block (the max batch): the
        reference-count view's legend lists the levels of
        :func:`~explorer.serving.view.ref_levels` (those that can occur, the
        last closed at it), as the running tables' legend does.
    plot_width : float
        The plot area's width at scale 1 (px): its column's on a 1280 px page, or wider (across the page).

    Returns
    -------
    go.Figure
        The base figure's traces, then (exact view only) one trace per mark,
        named as in :data:`~explorer.marks.POOL_CHANGE_MARKS` and holding the blocks of
        :meth:`~explorer.serving.snapshot.PoolChanges.marks`, whose
        ``customdata[:, 0]`` are the block ids.

    Raises
    ------
    ValueError
        On an unknown ``color_by``.
    """
    check_color_by(color_by)
    owner = np.asarray(pool_owner, dtype=np.int64)
    if color_by == "sequence":
        fig = pool_figure(owner, block_tables, context_lens, block_size, max_cells=max_cells)
    else:
        tables = np.asarray(block_tables, dtype=np.int64)
        refs = np.bincount(tables[tables >= 0], minlength=len(owner))
        fig = pool_ref_count_figure(refs, tables, block_size, max_cells=max_cells, levels=REF_LEVELS,
                                    seq_ids=seq_ids)
        _possible_levels(fig, max_holders)
    n_rows, n_cols, per_cell = pool_grid_shape(len(owner), max_cells)
    if step is not None:
        fig.update_layout(title_text=f"Physical block pool after step {step}")
    if per_cell > 1:
        return _pool_layout(fig, n_rows, n_cols, len(owner), plot_width)
    if color_by == "sequence":
        _pool_sequence_legend(fig)
    blocks_of = PoolChanges(taken=tuple(taken), recycled=tuple(recycled), copied=tuple(copied),
                            revived=tuple(revived), freed=tuple(freed)).marks()
    for key, mark in POOL_CHANGE_MARKS.items():
        name, symbol = mark.name, mark.symbol
        blocks = np.array(blocks_of[key], dtype=np.int64)
        if key in ("copied", "revived") and not len(blocks) and not sharing:
            continue  # marks only sharing makes
        fig.add_trace(go.Scatter(  # an empty mark still gets its legend entry: one point at None
            x=blocks % n_cols if len(blocks) else [None], y=blocks // n_cols if len(blocks) else [None],
            mode="markers", name=name, meta={"mark": key},  # placed and sized by _pool_layout
            marker=dict(symbol=symbol, color=mark.fill,
                        line=dict(color=mark.line, width=1.5 if symbol == "x-thin" else 1)),
            customdata=np.stack([blocks, owner[blocks]], axis=-1) if len(blocks) else None,
            hovertemplate="block %{customdata[0]}: " + name + " this step<extra></extra>",
        ))
    return _pool_layout(fig, n_rows, n_cols, len(owner), plot_width)


def _possible_levels(fig: go.Figure, max_holders: int | None) -> None:
    """The reference-count legend's squares (``meta["level"]``) cut to the levels that
    can occur, named as :func:`~explorer.serving.view.ref_levels` names them."""
    levels, names = ref_levels(max_holders)
    squares = [t for t in fig.data if isinstance(t.meta, dict) and "level" in t.meta]
    fig.data = [t for t in fig.data if not (t in squares and t.meta["level"] > len(levels))]
    for t in squares:
        if t.meta["level"] <= len(levels):
            t.name = names[t.meta["level"] - 1]


def legend_rows(names: Sequence[str], width_px: float, font_px: float) -> int:
    """Rows a horizontal Plotly legend of entries ``names`` takes at most
    ``width_px`` wide at ``font_px``: one row if every entry fits side by side,
    else Plotly's grid, whose columns are as wide as the widest entry."""
    if not names:
        return 0
    widths = [len(name) * _CHAR_WIDTH * font_px + _LEGEND_SYMBOL_PX for name in names]
    if sum(widths) + _LEGEND_GAP_PX * (len(names) - 1) < width_px:
        return 1
    per_row = max(1, int((width_px + _LEGEND_GAP_PX) // (max(widths) + _LEGEND_GAP_PX)))
    return math.ceil(len(names) / per_row)


def _pool_sequence_legend(fig: go.Figure) -> None:
    """Name the first :data:`POOL_LEGEND_SEQUENCES` sequences in the pool's legend
    and fold the others into one entry (their colours are in the grid, and in the
    block table beside it); the partly filled mark under a short name."""
    for t in fig.data:
        if t.name == "partly filled last block":
            t.name = _PARTIAL_NAME
    entries = [t for t in fig.data if isinstance(t.meta, dict) and "sequence" in t.meta]
    if len(entries) <= POOL_LEGEND_SEQUENCES:
        return
    for t in entries[POOL_LEGEND_SEQUENCES:]:
        t.showlegend = False
    add_legend_square(fig, "#FFFFFF", "+" + count(len(entries) - POOL_LEGEND_SEQUENCES, "sequence"), line="#374151")
    data = list(fig.data)  # the folded entry right after the named ones
    data.insert(data.index(entries[-1]) + 1, data.pop())
    fig.data = data


def _pool_layout(fig: go.Figure, n_rows: int, n_cols: int, num_blocks: int,
                 plot_width: float = _NARROW_PLOT_PX) -> go.Figure:
    """Size the pool: a plot area of :data:`POOL_ROW_PX` a grid row (between
    :data:`MIN_POOL_PLOT_PX` and :data:`MAX_POOL_PLOT_PX`), under it the axis and
    the legend (:data:`POOL_LEGEND_FONT` px) with room for every row it takes
    ``plot_width`` wide, so Plotly never squeezes the grid nor scrolls the
    legend; block ids at the cell text size of now where they fit the narrowest
    cells (:func:`~explorer.cache.cell_style.cell_text_fits`), else none."""
    names = [t.name for t in fig.data if t.type != "heatmap" and t.showlegend is not False and t.name]
    # At the presentation scale (style.scaled): the plot, the text and its rows grow, the column's width does not.
    legend_font, width = scaled(POOL_LEGEND_FONT), plot_width_px(plot_width)
    rows = legend_rows(names, width, legend_font) + line_count(fig.layout.legend.title.text)  # its key
    plot_px = scaled(min(MAX_POOL_PLOT_PX, max(MIN_POOL_PLOT_PX, POOL_ROW_PX * n_rows)))
    top = fig.layout.margin.t
    bottom = scaled(_POOL_AXIS_PX + _LEGEND_PAD_PX) + math.ceil(rows * _LEGEND_ROW * legend_font)
    heat = fig.data[0]
    digits = len(str(max(num_blocks - 1, 0)))
    heat.update(textfont=dict(size=font_px("cell")), **cell_gaps(n_rows, n_cols, plot_px, plot_width))
    # The pool's own column, not the Block table page's narrower one its base figure assumes.
    fits = heat.text is not None and cell_text_fits(n_rows, n_cols, digits, plot_width, plot_px)
    heat.texttemplate = "%{text}" if fits else None
    place_pool_marks(fig, n_rows, n_cols, width, plot_px, digits if fits else 0, inset=POOL_MARK_INSET)
    fig.update_layout(
        height=int(top + plot_px + bottom), margin=dict(b=bottom),
        legend=dict(font=dict(size=legend_font), traceorder="normal",  # "grouped" stacks the entries; under
                    yref="paper", yanchor="top", y=-scaled(_POOL_AXIS_PX) / plot_px),  # the axis (review 3)
    )
    return fig


def serving_timeline_figure(metrics, step: int | None = None, num_blocks: int | None = None) -> go.Figure:
    """A serving simulation over time, three panels sharing the step axis: blocks in
    use (against the pool), slots wasted in partly filled last blocks (internal
    fragmentation), and the running batch and waiting queue. A line marks ``step``.

    Parameters
    ----------
    metrics : DataFrame
        :func:`~explorer.serving.snapshot.metrics_frame` (one row per step).
    step : int, optional
        The step shown elsewhere on the page.
    num_blocks : int, optional
        Pool size, drawn as a dashed line on the first panel.

    Returns
    -------
    go.Figure
        Traces named ``"blocks in use"``, ``"wasted slots"``, ``"running"``,
        ``"waiting"`` (``y`` = the metric per step), then ``"pool size"`` when given.
    """
    from plotly.subplots import make_subplots

    subtitle = "dotted line = the step shown above"
    panels = stacked_panels(3, subtitle, above_plot=6, width_px=FULL_FIGURE_PX)  # 6: room for the panel titles
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=panels.spacing,
        subplot_titles=("Blocks in use", "Slots wasted in partly filled last blocks (internal fragmentation)",
                        "Running batch and waiting queue"),
    )
    x = metrics["step"].to_numpy()
    fig.add_trace(go.Scatter(
        x=x, y=metrics["blocks_in_use"].to_numpy(), name="blocks in use", mode="lines",
        line=dict(color=POOL_COLOR, width=1.8), fill="tozeroy", fillcolor=with_alpha(POOL_COLOR, 0.15),
        customdata=[f"{format_number(int(u))} physical blocks in use, {format_number(int(f))} free"
                    for u, f in zip(metrics["blocks_in_use"], metrics["free_blocks"])],
        hovertemplate="step %{x}: %{customdata}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["wasted_slots"].to_numpy(), name="wasted slots", mode="lines",
        line=dict(color=WASTE_COLOR, width=1.8), fill="tozeroy", fillcolor=with_alpha(WASTE_COLOR, 0.18),
        customdata=[f"{format_number(int(w))} slots wasted ({format_percent(f)} of allocated)"
                    for w, f in zip(metrics["wasted_slots"], metrics["wasted_fraction"].astype(float))],
        hovertemplate="step %{x}: %{customdata}<extra></extra>",
    ), row=2, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["running"].to_numpy(), name="running", mode="lines", line=dict(color=RUNNING_COLOR, width=1.8),
        hovertemplate="step %{x}: %{y} running<extra></extra>",
    ), row=3, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["waiting"].to_numpy(), name="waiting", mode="lines", line=dict(color=WAITING_COLOR, width=1.8),
        fill="tozeroy", fillcolor=with_alpha(WAITING_COLOR, 0.12),
        hovertemplate="step %{x}: %{y} waiting<extra></extra>",
    ), row=3, col=1)
    if num_blocks is not None:
        fig.add_trace(go.Scatter(
            x=[x[0], x[-1]] if len(x) else [], y=[num_blocks, num_blocks], name="pool size", mode="lines",
            line=dict(color="#111827", dash="dash", width=1), hovertemplate=f"pool: {count(num_blocks, 'block')}<extra></extra>",
        ), row=1, col=1)
    if step is not None and len(x):
        row = metrics[metrics["step"] == step]
        for r, col in ((1, "blocks_in_use"), (2, "wasted_slots"), (3, "waiting")):
            fig.add_vline(x=step, line=dict(color="#111827", width=1, dash="dot"), row=r, col=1)
            if len(row):
                fig.add_trace(go.Scatter(
                    x=[step], y=[row[col].iloc[0]], mode="markers", showlegend=False, hoverinfo="skip",
                    marker=dict(color="#111827", size=7),
                ), row=r, col=1)
    apply_style(fig, "The pool over time", subtitle, height=panels.height, above_plot=6, width_px=FULL_FIGURE_PX)
    fig.update_layout(hovermode="x unified")
    fig.update_annotations(font=dict(size=font_px("body")), x=0, xanchor="left")
    ticks = integer_ticks(x.min(initial=0), x.max(initial=0))
    fig.update_xaxes(range=origin_clear_range(x.min(initial=0), x.max(initial=0), ticks["tickvals"][0],
                                              ticks["ticktext"][0], plot_width_px(FULL_PLOT_WIDTH_PX)), **ticks)
    fig.update_xaxes(title="decode step", row=3, col=1)
    fit_legend(fig, FULL_PLOT_WIDTH_PX)  # the figure taller by the rows presentation mode's legend takes
    panel_px = scaled(panels.panel_px)

    # Counts: whole-number ticks even when a short run never leaves 0 to 3.
    def top(*columns: str) -> float:
        return max((float(metrics[c].max()) for c in columns), default=0.0) if len(x) else 0.0

    tops = {1: max(num_blocks or 0, top("blocks_in_use")), 2: top("wasted_slots"), 3: top("running", "waiting")}
    for r, name in ((1, "physical blocks"), (2, "slots"), (3, "requests")):
        fig.update_yaxes(title=name, rangemode="tozero", row=r, col=1, **integer_ticks(0, max(1, tops[r]), panel_px))
    return fig


#: Pixels under the animated pool: its axis (ticks and title), the Play and Pause
#: buttons, the step slider below them (its current-value label on its own row,
#: never under the buttons) and the legend.
_AXIS_PX, _BUTTONS_PX, _SLIDER_PX, _LEGEND_PX = 54, 40, 76, 36


#: The animated pool's legend entry for its sequences, past :data:`MAX_SEQUENCE_LEGEND`
#: of them: a neutral square (a single sequence colour read as what every sequence is drawn in).
ANIMATION_SEQUENCES = "one colour per sequence"
#: Padding either side of a slider label, a digit wide: presentation mode's 96 104 112 ran together.
SLIDER_LABEL_PAD = "\u2007"


def animation_steps(num_steps: int, max_frames: int = MAX_ANIMATION_FRAMES) -> list[int]:
    """The steps :func:`pool_animation_figure` should show of a run of ``num_steps``
    steps (0 to ``num_steps - 1``): every k-th step from 0, k the first of 1, 2, 5,
    10, 20, 25, 50, 100, ... that keeps them within ``max_frames``, then the last
    step. Frames land on round steps (0, 2, 4, ..., 118, 119), not on whatever
    rounding an even spread over the run gives (0, 2, 3, 5, 6, ...).

    Parameters
    ----------
    num_steps : int
        Steps in the run (at least 1).
    max_frames : int
        Most steps returned (at least 2).

    Returns
    -------
    list of int
        Increasing steps, first 0 and last ``num_steps - 1``.
    """
    last = max(int(num_steps), 1) - 1
    max_frames = max(int(max_frames), 2)
    # 1, 2, 5, 10, 20, 25, 50, 100, ...: the last is past the run, giving [0, last].
    strides = (int(m * 10 ** e) for e in range(len(str(last)) + 1) for m in ((1, 2, 5) if e == 0 else (1, 2, 2.5, 5)))

    def frames(k: int) -> list[int]:
        steps = list(range(0, last + 1, k))
        return steps if steps[-1] == last else [*steps, last]

    return next(steps for steps in map(frames, strides) if len(steps) <= max_frames)


def pool_animation_figure(owners: np.ndarray, steps: Sequence[int], block_size: int) -> go.Figure:
    """The pool replayed step by step as a Plotly animation (Play, Pause and a step
    slider run in the browser), coloured as :func:`pool_figure`: grey free, one
    colour per ``seq_id`` (repeating every ``len(SEQUENCE_COLORS)`` sequences),
    with its axes titled and a legend.

    Parameters
    ----------
    owners : ndarray
        ``[frames, num_blocks]``: the owning ``seq_id`` of each block at each
        frame, ``-1`` free; at most :data:`MAX_ANIMATION_FRAMES` frames and
        :data:`MAX_POOL_CELLS` blocks.
    steps : sequence of int
        The step of each frame (see :func:`animation_steps`).
    block_size : int

    Returns
    -------
    go.Figure
        Trace 0: the first frame's heatmap; then legend-only traces ``"free"``
        and, for up to :data:`MAX_SEQUENCE_LEGEND` sequences over all frames,
        ``"sequence s"``, else one :data:`ANIMATION_SEQUENCES`; slider labels the
        steps padded by :data:`SLIDER_LABEL_PAD`;
        ``frames``: one per step (named by the step), each a heatmap ``z`` of
        category codes (0 free, ``2 + seq_id % len(SEQUENCE_COLORS)``).

    Raises
    ------
    ValueError
        On more frames or blocks than drawn, or ``steps`` of another length.
    """
    owners = np.asarray(owners, dtype=np.int64)
    if owners.ndim != 2 or len(steps) != len(owners):
        raise ValueError(f"owners must be [frames, num_blocks] with one step per frame; got {owners.shape}, {len(steps)} steps")
    if len(owners) > MAX_ANIMATION_FRAMES or owners.shape[1] > MAX_POOL_CELLS:
        raise ValueError(f"at most {MAX_ANIMATION_FRAMES} frames of {MAX_POOL_CELLS} blocks; got {owners.shape}")
    num_blocks = owners.shape[1]
    n_rows, n_cols, _ = pool_grid_shape(num_blocks)
    pad = n_rows * n_cols - num_blocks
    subtitle = (f"{count(num_blocks, 'block')} of {count(block_size, 'slot')}; colour = owning sequence "
                f"({len(SEQUENCE_COLORS)} colours, repeating), grey = free")
    top = title_margins(subtitle, FULL_FIGURE_PX)[0]
    bottom = _AXIS_PX + _BUTTONS_PX + _SLIDER_PX + _LEGEND_PX
    plot_height = int(min(720, max(360, 240 + 24 * n_rows))) - top - 110
    height = plot_height + top + bottom
    gaps = cell_gaps(n_rows, n_cols, plot_height)
    colors = [FREE_COLOR, OTHER_COLOR, *SEQUENCE_COLORS]
    k = len(colors)
    scale = [p for i, c in enumerate(colors) for p in ([i / k, c], [(i + 1) / k, c])]

    def codes(owner: np.ndarray) -> np.ndarray:
        z = np.where(owner >= 0, 2 + owner % len(SEQUENCE_COLORS), 0).astype(float)
        return np.concatenate([z, np.full(pad, np.nan)]).reshape(n_rows, n_cols)

    def heatmap(owner: np.ndarray) -> go.Heatmap:
        used = int((owner >= 0).sum())
        return go.Heatmap(z=codes(owner), colorscale=scale, zmin=-0.5, zmax=k - 0.5, showscale=False,
                          **gaps, hoverinfo="skip", name=f"{count(used, 'block')} in use")

    fig = go.Figure(data=[heatmap(owners[0])] if len(owners) else [])
    fig.frames = [go.Frame(data=[heatmap(o)], name=str(int(s)), traces=[0]) for o, s in zip(owners, steps)]
    add_legend_square(fig, FREE_COLOR, "free", line="#CBD5E1")
    seqs = np.unique(owners[owners >= 0])
    if len(seqs) <= MAX_SEQUENCE_LEGEND:
        for seq in seqs:
            add_legend_square(fig, SEQUENCE_COLORS[int(seq) % len(SEQUENCE_COLORS)], f"sequence {int(seq)}",
                           meta={"sequence": int(seq)})
    else:  # a neutral square: one sequence's colour read as every sequence's
        add_legend_square(fig, "#FFFFFF", ANIMATION_SEQUENCES, line="#374151")
    slider_steps = [  # each label padded: Plotly writes every k-th, k keeping their measured widths 8 px apart
        dict(method="animate", label=f"{SLIDER_LABEL_PAD}{int(s)}{SLIDER_LABEL_PAD}",
             args=[[str(int(s))], dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))])
        for s in steps
    ]
    # Paper coordinates of the controls, from pixels under the plot: the buttons
    # under the axis title, the slider on its own row under them.
    below = lambda px: -px / plot_height  # noqa: E731
    fig.update_layout(
        updatemenus=[dict(
            type="buttons", direction="left", x=0, xanchor="left", y=below(_AXIS_PX), yanchor="top",
            showactive=False, pad=dict(r=10, t=0),
            buttons=[
                dict(label="▶ Play", method="animate",
                     args=[None, dict(frame=dict(duration=250, redraw=True), fromcurrent=True, transition=dict(duration=0))]),
                dict(label="❚❚ Pause", method="animate",
                     args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate", transition=dict(duration=0))]),
            ],
        )],
        sliders=[dict(active=0, steps=slider_steps, x=0, xanchor="left", len=1, y=below(_AXIS_PX + _BUTTONS_PX),
                      yanchor="top", currentvalue=dict(prefix="step", font=dict(size=font_px("body")), xanchor="left"),
                      pad=dict(t=0, b=0, l=0, r=0))],
    )
    apply_style(fig, "The pool, replayed", subtitle, height=height, width_px=FULL_FIGURE_PX)
    fig.update_layout(margin=dict(b=scaled(bottom)))
    fig.update_xaxes(title="+ offset within row", range=[-0.5, n_cols - 0.5], showgrid=False, zeroline=False,
                     **integer_ticks(0, n_cols - 1))
    fig.update_yaxes(title="first block", autorange="reversed", showgrid=False, zeroline=False,
                     **first_block_ticks(n_rows, n_cols, scaled(plot_height)))
    return fig
