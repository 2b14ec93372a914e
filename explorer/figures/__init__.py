"""Plotly figures of the explorer: data in, ``go.Figure`` out.

Five families:

* the paged cache, drawn from the block table alone (no KV tensors):
  :func:`block_table_figure`, :func:`pool_figure`, :func:`token_walk_figure`,
  :func:`block_walk_figure`;
* benchmark results (lists of :class:`~paged_attention.bench.BenchResult`):
  :func:`latency_figure`, :func:`speedup_figure`, :func:`bandwidth_figure`,
  :func:`accuracy_figure`, :func:`history_figure`;
* sweeps (DataFrames of :data:`~paged_attention.sweep.SWEEP_COLUMNS`):
  :func:`sweep_latency_figure`, :func:`sweep_bandwidth_figure`,
  :func:`sweep_speedup_figure`, :func:`sweep_ratio_figure`;
* the serving simulation: :func:`serving_pool_figure`,
  :func:`serving_timeline_figure`, :func:`tradeoff_figure`,
  :func:`pool_animation_figure`;
* inside the kernel (a :class:`~paged_attention.walkthrough.KernelTrace`):
  :func:`kernel_walk_figure`, :func:`online_softmax_figure`,
  :func:`split_merge_figure`.

A browser draws a few tens of thousands of heatmap cells comfortably. Past that
the cache figures sample (every k-th row and column, exact values in the cells
shown) or aggregate (the pool: k consecutive blocks per cell), and
:func:`sample_grid` tells the page what was done so it can say so.

Every implementation keeps one colour in every chart (:data:`IMPL_COLORS`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.settings import count, format_bytes

#: One colour per implementation, in every chart.
IMPL_COLORS: dict[str, str] = {
    "naive": "#D9534F",
    "vectorized": "#F0AD4E",
    "triton": "#2563EB",
    "triton_simple": "#14B8A6",
}
FALLBACK_COLOR = "#6B7280"

FREE_COLOR = "#E5E7EB"
OTHER_COLOR = "#64748B"
UNALLOCATED_COLOR = "#F1F5F9"
PASS_COLOR = "#16A34A"
FAIL_COLOR = "#DC2626"
#: Sequence colours in the pool view: plotly's Dark24, Alphabet and Light24
#: (``plotly.colors.qualitative``) less their greys (grey means free or foreign),
#: colours too pale to tell from a free block or too dark for the dot on a partly
#: filled block, and near-duplicates (CIEDE2000 distance under 15, and #6C4516,
#: a brown too like #862A16).
SEQUENCE_COLORS: tuple[str, ...] = (
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#511CFB", "#00A08B",
    "#6C7C32", "#862A16", "#DEA0FD", "#FEAF16", "#F8A19F", "#2ED9FF", "#B10DA1", "#86CE00",
)
#: Up to this many sequences in a pool view, each gets a legend entry.
MAX_SEQUENCE_LEGEND = 12
BLOCK_COLORSCALE = "Viridis"

#: Cells drawn before the cache figures sample or aggregate.
MAX_TABLE_CELLS = 20_000
MAX_POOL_CELLS = 12_000
MAX_WALK_CELLS = 8_192
MAX_WALK_POINTS = 4_000
#: Cells up to which numbers are printed inside heatmap cells.
MAX_TEXT_CELLS = 400

#: Errors of exactly zero are drawn at this height on the log axis.
ERROR_FLOOR = 1e-12

#: Width in pixels of a figure's plot area in the narrower columns the pages draw
#: it in (a ~600 px column less margins and colour bar). Cell sizes are estimated
#: from it and from the figure's height.
PLOT_WIDTH_PX = 400
#: Heatmap cells (and bars) thinner than this get no 1 px gap or outline: it
#: would swallow them.
MIN_GAP_CELL_PX = 6
#: Integer ticks stay at least this far apart (every 2nd, 5th, ... id when not every one fits).
MIN_TICK_PX = 30

_FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13, color="#1F2937")

FREE = -1
OTHER = -2


def _fits_text(n_cells: int, n_cols: int, max_value: int, plot_width: float = PLOT_WIDTH_PX) -> bool:
    """Whether numbers fit inside heatmap cells: few cells, and rows narrow enough
    for a plot ``plot_width`` px wide (48 digits in :data:`PLOT_WIDTH_PX`)."""
    max_digits = 48 * plot_width / PLOT_WIDTH_PX
    return n_cells <= MAX_TEXT_CELLS and n_cols * len(str(max(0, int(max_value)))) <= max_digits


def compact(n: int) -> str:
    """``524288 -> "524k"``, ``12345 -> "12,345"``: short counts for tight labels."""
    n = int(n)
    if abs(n) < 100_000:
        return f"{n:,}"
    if abs(n) < 1_000_000:
        return f"{n / 1e3:,.0f}k"
    return f"{n / 1e6:,.1f}M"


def impl_color(name: str) -> str:
    """The colour of implementation ``name`` (grey for an unknown one)."""
    return IMPL_COLORS.get(name, FALLBACK_COLOR)


#: Characters of subtitle per line: Plotly does not wrap titles, and the narrowest
#: charts (two fifths of a 1280 px page) hold about this many at the subtitle's size.
SUBTITLE_LINE = 60
#: Pixels each further subtitle line adds to the top margin.
SUBTITLE_LINE_HEIGHT = 17


def _wrap_subtitle(subtitle: str | None) -> str:
    """``subtitle`` broken into lines of at most :data:`SUBTITLE_LINE` characters at
    its `` · `` and ``; `` separators (a part longer than that stays whole)."""
    if not subtitle or len(subtitle) <= SUBTITLE_LINE:
        return subtitle or ""
    pieces = re.split(r"( · |; )", subtitle)  # text, separator, text, ...
    lines = [pieces[0]]
    for sep, part in zip(pieces[1::2], pieces[2::2]):
        if len(lines[-1]) + len(sep) + len(part) <= SUBTITLE_LINE:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.strip(" ·")  # a line ends with its ";", not with a "·"
            lines.append(part)
    return "<br>".join(lines)


def _margins(subtitle: str | None) -> tuple[int, int]:
    """Top and bottom margins (px) :func:`_style` gives a figure."""
    if not subtitle:
        return 56, 100
    return 84 + SUBTITLE_LINE_HEIGHT * _wrap_subtitle(subtitle).count("<br>"), 100


def _colorbar_px(plot_height: float) -> float:
    """Pixels of a colour bar's scale as long as the plot, less its two-line title."""
    return max(plot_height - 40, 40)


def _plot_height(height: int, subtitle: str | None) -> int:
    """Pixels between the margins of a figure of ``height`` styled by :func:`_style`."""
    top, bottom = _margins(subtitle)
    return max(height - top - bottom, 1)


def _style(fig: go.Figure, title: str, subtitle: str | None = None, height: int = 420) -> go.Figure:
    top, bottom = _margins(subtitle)
    # The legend hangs from the bottom of the figure, not from the plot area: a
    # legend of several rows then pushes the plot up (Plotly grows the margin to
    # fit it and the axis title) instead of sliding under the x axis title, as
    # one placed a fixed fraction of the plot area below it did.
    fig.update_layout(
        template="plotly_white",
        font=_FONT,
        title=dict(text=title, x=0, xanchor="left", font=dict(size=16), subtitle=dict(text=_wrap_subtitle(subtitle))),
        height=height,
        margin=dict(l=60, r=20, t=top, b=bottom),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0,
                    font=dict(size=12)),
        hoverlabel=dict(font=dict(family=_FONT["family"])),
    )
    return fig


def _gaps(n_rows: int, n_cols: int, plot_height: float, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """``xgap``/``ygap`` of a heatmap: 1 px between cells that are wide (tall)
    enough to spare it, none between thinner ones, which a gap would swallow."""
    return dict(
        xgap=1 if plot_width / max(n_cols, 1) >= MIN_GAP_CELL_PX else 0,
        ygap=1 if plot_height / max(n_rows, 1) >= MIN_GAP_CELL_PX else 0,
    )


def _int_ticks(lo: float, hi: float, length_px: float = PLOT_WIDTH_PX) -> dict:
    """Tick settings for an axis or colour bar of integers (ids, counts) spanning
    ``lo`` to ``hi`` over ``length_px`` pixels.

    Up to a span of 50, ticks every 1, 2, 5, ... so that they stay
    :data:`MIN_TICK_PX` apart (Plotly's own would fall on halves over a short
    span); past it, Plotly's own ticks, which are whole numbers there, printed as
    integers.
    """
    span = max(float(hi) - float(lo), 0.0)
    if span > 50:
        return dict(tickmode="auto", tickformat=",d")
    fit = max(length_px / MIN_TICK_PX, 1.0)
    step = next(s for s in (1, 2, 5, 10, 25, 50) if span / s <= fit)
    return dict(tickmode="linear", tick0=0, dtick=step)


# -- sampling ------------------------------------------------------------------

@dataclass(frozen=True)
class GridSample:
    """Which rows and columns of an ``n_rows x n_cols`` grid are drawn.

    ``rows`` and ``cols`` are every ``row_stride``-th and ``col_stride``-th index.
    """

    n_rows: int
    n_cols: int
    row_stride: int
    col_stride: int

    @property
    def rows(self) -> np.ndarray:
        return np.arange(0, self.n_rows, self.row_stride)

    @property
    def cols(self) -> np.ndarray:
        return np.arange(0, self.n_cols, self.col_stride)

    @property
    def sampled(self) -> bool:
        return self.row_stride > 1 or self.col_stride > 1

    @property
    def cells(self) -> int:
        return len(self.rows) * len(self.cols)

    def strides(self, row_name: str, col_name: str) -> str:
        """``"every 4th row and every 2nd column"``: what is drawn, naming only the
        sampled axes (``""`` when nothing was sampled)."""
        parts = []
        if self.row_stride > 1:
            parts.append(f"every {_ordinal(self.row_stride)} {row_name}")
        if self.col_stride > 1:
            parts.append(f"every {_ordinal(self.col_stride)} {col_name}")
        return " and ".join(parts)

    def note(self, row_name: str, col_name: str) -> str:
        """A caption saying what was sampled, or ``""`` when nothing was."""
        if not self.sampled:
            return ""
        return (
            f"Sampled for the browser: showing {self.strides(row_name, col_name)} "
            f"({len(self.rows):,} x {len(self.cols):,} of {self.n_rows:,} x {self.n_cols:,} cells); "
            f"each cell shown holds its exact value."
        )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def sample_grid(n_rows: int, n_cols: int, max_cells: int) -> GridSample:
    """Strides that keep an ``n_rows x n_cols`` grid under ``max_cells`` cells.

    The stride doubles on whichever axis currently has more entries drawn, so a
    long thin grid is thinned along its long side first.
    """
    n_rows, n_cols = max(1, int(n_rows)), max(1, int(n_cols))
    rs = cs = 1
    while math.ceil(n_rows / rs) * math.ceil(n_cols / cs) > max_cells:
        if math.ceil(n_rows / rs) >= math.ceil(n_cols / cs):
            rs *= 2
        else:
            cs *= 2
    return GridSample(n_rows, n_cols, rs, cs)


def pool_grid_shape(num_blocks: int, max_cells: int = MAX_POOL_CELLS) -> tuple[int, int, int]:
    """``(rows, columns, blocks_per_cell)`` of the pool view.

    About three times as wide as tall; ``blocks_per_cell > 1`` when the pool has
    more blocks than ``max_cells`` and consecutive blocks share a cell.
    """
    num_blocks = max(1, int(num_blocks))
    per_cell = max(1, math.ceil(num_blocks / max_cells))
    cells = math.ceil(num_blocks / per_cell)
    width = min(cells, max(8, int(math.ceil(math.sqrt(3 * cells)))))
    if width > 16:
        width = int(math.ceil(width / 8) * 8)
    return math.ceil(cells / width), width, per_cell


# -- the paged cache -----------------------------------------------------------

def _filled(lengths: np.ndarray, logical: np.ndarray, block_size: int) -> np.ndarray:
    """Slots filled in logical block ``logical`` of sequences of ``lengths``."""
    return np.clip(lengths - logical * block_size, 0, block_size)


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
) -> go.Figure:
    """The block table as a heatmap: one row per sequence, one column per logical block.

    Cells are coloured by physical block id; unallocated entries (``-1``) are a
    separate pale trace. Hover shows sequence, logical block, token range,
    physical block and slots filled.

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
        Past this many cells, rows and columns are sampled (see :func:`sample_grid`).
    seq_ids : sequence of int, optional
        A name for each row (a serving simulation's ``seq_id``), shown in the
        hover and on the y axis instead of the row index.
    title : str
        The figure's title.
    plot_width : float
        About how many pixels wide the plot area will be; block ids are written in
        the cells only where they fit.

    Returns
    -------
    go.Figure
        Trace 0: allocated cells (``z`` = physical id, NaN where unallocated);
        trace 1: unallocated cells.
    """
    tables = np.asarray(block_tables)
    if tables.ndim != 2:
        raise ValueError(f"block_tables must be 2-D; got shape {tables.shape}")
    lengths = np.asarray(context_lens, dtype=np.int64)
    batch, width = tables.shape
    if num_blocks is None:
        num_blocks = int(tables.max(initial=0)) + 1
    grid = sample_grid(batch, width, max_cells)
    rows, cols = grid.rows, grid.cols
    sub = tables[np.ix_(rows, cols)].astype(np.int64)
    unalloc = sub < 0
    names = rows if seq_ids is None else np.asarray(seq_ids, dtype=np.int64)[rows]
    seq = np.broadcast_to(names[:, None], sub.shape)
    logical = np.broadcast_to(cols[None, :], sub.shape)
    seq_len = lengths[rows][:, None]
    start = logical * block_size
    end = np.minimum(seq_len, start + block_size) - 1
    filled = _filled(seq_len, logical, block_size)
    custom = np.stack([seq, logical, start, end, sub, filled], axis=-1).astype(np.int32)

    z = np.where(unalloc, np.nan, sub).astype(float)
    text_on = _fits_text(grid.cells, len(cols), num_blocks - 1, plot_width)
    subtitle = (f"{count(batch, 'sequence')} x {count(width, 'logical block')} of "
                f"{count(block_size, 'token')}; colour = physical block id")
    if grid.sampled:
        subtitle += f" · sampled: {grid.strides('row', 'column')} shown"
    # At least 170 px of plot, so the colour bar keeps room for its ticks under its
    # two-line title when there are only a few rows.
    height = int(min(720, max(sum(_margins(subtitle)) + 170, 140 + 26 * len(rows))))
    plot_height = _plot_height(height, subtitle)
    gaps = _gaps(len(rows), len(cols), plot_height)
    fig = go.Figure()
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=cols,
            y=rows,
            customdata=custom,
            colorscale=BLOCK_COLORSCALE,
            zmin=0,
            zmax=max(1, num_blocks - 1),
            colorbar=dict(title=dict(text="physical<br>block id"), thickness=14,
                          **_int_ticks(0, max(1, num_blocks - 1), _colorbar_px(plot_height))),
            hoverongaps=False,
            hovertemplate=(
                "sequence %{customdata[0]}<br>logical block %{customdata[1]}"
                "<br>tokens %{customdata[2]}–%{customdata[3]}"
                "<br>physical block %{customdata[4]}"
                f"<br>slots filled %{{customdata[5]}}/{block_size}<extra></extra>"
            ),
            texttemplate="%{z}" if text_on else None,
            textfont=dict(size=10),
            **gaps,
            name="allocated",
        )
    )
    fig.add_trace(
        go.Heatmap(
            z=np.where(unalloc, 1.0, np.nan),
            x=cols,
            y=rows,
            customdata=custom,
            colorscale=[[0, UNALLOCATED_COLOR], [1, UNALLOCATED_COLOR]],
            showscale=False,
            hoverongaps=False,
            hovertemplate="sequence %{customdata[0]}<br>logical block %{customdata[1]}"
            "<br>unallocated (-1)<extra></extra>",
            texttemplate="–" if text_on else None,
            textfont=dict(size=10, color="#94A3B8"),
            **gaps,
            name="unallocated (-1)",
        )
    )
    _legend_square(fig, UNALLOCATED_COLOR, "unallocated (-1)", line="#CBD5E1")
    _style(fig, title, subtitle, height=height)
    fig.update_xaxes(title="logical block", showgrid=False, zeroline=False, **_int_ticks(0, width - 1))
    fig.update_yaxes(title="sequence" if seq_ids is None else "sequence (seq_id)", autorange="reversed",
                     showgrid=False, zeroline=False)
    # Label rows by name (a seq_id need not be the row index): each of up to 40,
    # past that every k-th, 14 px or more apart.
    step = 1 if len(rows) <= 40 else math.ceil(len(rows) * 14 / plot_height)
    fig.update_yaxes(tickmode="array", tickvals=rows[::step], ticktext=[str(r) for r in names[::step]])
    return fig


def _legend_square(fig: go.Figure, color: str, name: str, line: str | None = None, meta: dict | None = None) -> None:
    """A legend entry for a heatmap category (heatmaps have no legend of their own)."""
    fig.update_layout(showlegend=True)
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            marker=dict(symbol="square", size=12, color=color, line=dict(color=line or color, width=1)),
            name=name,
            hoverinfo="skip",
            meta=meta,
        )
    )


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
    filled[phys] = _filled(lengths[seq], col, block_size)
    return logical, filled


def pool_figure(
    pool_owner: np.ndarray,
    block_tables: np.ndarray,
    context_lens: Sequence[int],
    block_size: int,
    *,
    max_cells: int = MAX_POOL_CELLS,
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

    Up to :data:`MAX_SEQUENCE_LEGEND` sequences each get a legend entry; past
    that the colours repeat (every ``len(SEQUENCE_COLORS)`` sequences), the
    subtitle says so, and the hover names each block's owner.

    Returns
    -------
    go.Figure
        Trace 0 is the heatmap; its ``z`` is the category code (exact view:
        0 free, 1 other, ``2 + seq % len(SEQUENCE_COLORS)`` a sequence) or the
        in-batch share (aggregated view). In the exact view, legend-only traces
        ``"free"``, ``"other sequences (not in batch)"`` and ``"sequence s"``
        (``meta={"sequence": s}``) follow.
    """
    owner = np.asarray(pool_owner, dtype=np.int64)
    num_blocks = len(owner)
    n_rows, n_cols, per_cell = pool_grid_shape(num_blocks, max_cells)
    seqs = np.unique(owner[owner >= 0])
    listed = per_cell == 1 and len(seqs) <= MAX_SEQUENCE_LEGEND
    fig = go.Figure()
    if per_cell == 1:
        subtitle = (f"{count(num_blocks, 'physical block')} of {count(block_size, 'slot')}, {n_cols} per row; "
                    "colour = owning sequence")
        if not listed:
            subtitle = (f"{count(num_blocks, 'block')} of {count(block_size, 'slot')}, {n_cols} per row; "
                        f"colour = sequence ({len(SEQUENCE_COLORS)} colours, repeating)")
    else:
        subtitle = f"{count(num_blocks, 'block')}, {per_cell} per cell; colour = share held by this batch"
    # Grow the figure by the sequences' legend (two entries a row in a narrow
    # column) rather than let it squeeze the grid.
    legend_rows = math.ceil((len(seqs) + 3) / 2) if listed else 1
    height = int(min(720, max(320, 190 + 24 * n_rows)) + 22 * (legend_rows - 1))
    plot_height = _plot_height(height, subtitle) - 22 * (legend_rows - 1)
    if per_cell == 1:
        _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols, plot_height,
                    seqs if listed else ())
    else:
        _pool_aggregated(fig, owner, n_rows, n_cols, per_cell, plot_height)
    _style(fig, "Physical block pool", subtitle, height=height)
    fig.update_xaxes(title=f"+ offset within row ({per_cell} blocks per cell)"
                     if per_cell > 1 else "+ offset within row", showgrid=False, zeroline=False,
                     **_int_ticks(0, n_cols - 1))
    fig.update_yaxes(title="first block", autorange="reversed", showgrid=False, zeroline=False)
    step = max(1, math.ceil(n_rows / 10))
    rows = list(range(0, n_rows, step))
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=[compact(r * n_cols * per_cell) for r in rows])
    return fig


def _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols, plot_height, listed) -> None:
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
    colors = [FREE_COLOR, OTHER_COLOR, *palette]
    k = len(colors)
    scale = []
    for i, c in enumerate(colors):
        scale += [[i / k, c], [(i + 1) / k, c]]
    cells = n_rows * n_cols
    small = cells <= 5000
    fig.add_trace(
        go.Heatmap(
            z=z,
            customdata=np.array(hover, dtype=object).reshape(n_rows, n_cols),
            text=np.array([str(i) if i < num_blocks else "" for i in ids], dtype=object).reshape(n_rows, n_cols),
            texttemplate="%{text}" if _fits_text(cells, n_cols, num_blocks - 1) else None,
            textfont=dict(size=9),
            colorscale=scale,
            zmin=-0.5,
            zmax=k - 0.5,
            showscale=False,
            hoverongaps=False,
            hovertemplate="%{customdata}<extra></extra>",
            **_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )
    _legend_square(fig, FREE_COLOR, "free")
    if (owner == OTHER).any():
        _legend_square(fig, OTHER_COLOR, "other sequences (not in batch)")
    for seq in listed:
        _legend_square(fig, palette[int(seq) % len(palette)], f"sequence {int(seq)}", meta={"sequence": int(seq)})
    partial = np.nonzero((owner >= 0) & (filled > 0) & (filled < block_size))[0]
    fig.add_trace(
        go.Scatter(
            x=partial % n_cols + 0.27,
            y=partial // n_cols - 0.27,
            mode="markers",
            marker=dict(symbol="circle", size=7 if small else 4, color="#111827", line=dict(color="white", width=1)),
            customdata=np.stack([partial, owner[partial], filled[partial], block_size - filled[partial]], axis=-1)
            if len(partial)
            else None,
            hovertemplate="block %{customdata[0]}: last block of sequence %{customdata[1]}"
            f"<br>%{{customdata[2]}}/{block_size} slots filled, %{{customdata[3]}} wasted<extra></extra>",
            name="partly filled last block",
        )
    )
    fig.update_xaxes(range=[-0.5, n_cols - 0.5])


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
            colorscale=[[0, "#F3F4F6"], [1, "#1D4ED8"]],
            zmin=0,
            zmax=1,
            colorbar=dict(title=dict(text="share in<br>this batch"), thickness=14, tickformat=".0%"),
            hoverongaps=False,
            hovertemplate="blocks %{customdata[0]}–%{customdata[1]}<br>in this batch: %{customdata[2]}"
            "<br>free: %{customdata[3]}<br>other sequences: %{customdata[4]}<extra></extra>",
            **_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )


def token_walk_figure(
    table_row: np.ndarray,
    context_len: int,
    block_size: int,
    seq: int = 0,
    num_blocks: int | None = None,
    *,
    max_cells: int = MAX_WALK_CELLS,
) -> go.Figure:
    """Where each token of one sequence lands: one row per logical block, one
    column per slot, coloured by the physical block (the scale of
    :func:`block_table_figure`), with the token index in each cell when small.

    Slots past the context in the last block are drawn pale ("empty").

    Parameters
    ----------
    table_row : ndarray
        ``[max_num_blocks]``: the sequence's row of the block table.
    context_len : int
        Tokens in the sequence.
    block_size : int
    seq : int
        The sequence's index (for labels).
    num_blocks : int, optional
        Pool size, the top of the colour scale.

    Returns
    -------
    go.Figure
        Trace 0: filled slots, ``z`` = physical block, ``customdata`` =
        ``(token, logical block, physical block, slot)``; trace 1: empty slots.
    """
    row = np.asarray(table_row, dtype=np.int64)
    n = int(context_len)
    needed = math.ceil(n / block_size)
    if num_blocks is None:
        num_blocks = int(row.max(initial=0)) + 1
    fig = go.Figure()
    if needed == 0:
        return _no_tokens(fig, seq, f"Token walk of sequence {seq}")
    grid = sample_grid(needed, block_size, max_cells)
    logical = grid.rows
    slots = grid.cols
    phys = row[logical]
    token = logical[:, None] * block_size + slots[None, :]
    valid = token < n
    z = np.where(valid, phys[:, None], np.nan).astype(float)
    custom = np.stack(
        [token, np.broadcast_to(logical[:, None], token.shape), np.broadcast_to(phys[:, None], token.shape),
         np.broadcast_to(slots[None, :], token.shape)],
        axis=-1,
    ).astype(np.int32)
    # A long sequence in a huge pool spans a sliver of the table's colour scale;
    # stretch the scale over its own blocks then, and say so.
    zmin, zmax = 0, max(1, num_blocks - 1)
    lo, hi = int(phys.min()), int(phys.max())
    own_scale = (hi - lo + 1) < 0.1 * num_blocks
    if own_scale:
        zmin, zmax = lo, max(hi, lo + 1)
    cells = token.size
    text_on = _fits_text(cells, len(slots), n - 1)
    subtitle = f"{count(n, 'token')} in {count(needed, 'block')} of {block_size}; colour = physical block id"
    if own_scale:
        subtitle += f" (scale: this sequence's blocks {lo:,}–{hi:,})"
    if grid.sampled:
        subtitle += f" · sampled: {grid.strides('logical block', 'slot')} shown"
    # Tall enough for the y axis title beside even one or two rows.
    height = int(min(720, max(320, 140 + 22 * len(logical))))
    plot_height = _plot_height(height, subtitle)
    gaps = _gaps(len(logical), len(slots), plot_height)
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=slots,
            y=logical,
            customdata=custom,
            text=token,
            texttemplate="%{text}" if text_on else None,
            textfont=dict(size=9),
            colorscale=BLOCK_COLORSCALE,
            zmin=zmin,
            zmax=zmax,
            colorbar=dict(title=dict(text="physical<br>block id"), thickness=14,
                          **_int_ticks(zmin, zmax, _colorbar_px(plot_height))),
            hoverongaps=False,
            hovertemplate="token %{customdata[0]}<br>logical block %{customdata[1]}, slot %{customdata[3]}"
            "<br>→ physical block %{customdata[2]}, slot %{customdata[3]}<extra></extra>",
            **gaps,
            name="tokens",
        )
    )
    fig.add_trace(
        go.Heatmap(
            z=np.where(valid, np.nan, 1.0),
            x=slots,
            y=logical,
            customdata=custom,
            colorscale=[[0, UNALLOCATED_COLOR], [1, UNALLOCATED_COLOR]],
            showscale=False,
            hoverongaps=False,
            hovertemplate="physical block %{customdata[2]}, slot %{customdata[3]}"
            "<br>empty: allocated but unused<extra></extra>",
            **gaps,
            name="empty slot",
        )
    )
    _legend_square(fig, UNALLOCATED_COLOR, "empty slot (wasted)", line="#CBD5E1")
    _style(fig, f"Token walk of sequence {seq}", subtitle, height=height)
    fig.update_xaxes(title="slot within block", showgrid=False, zeroline=False, **_int_ticks(0, block_size - 1))
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False)
    if len(logical) <= 40:
        fig.update_yaxes(title="logical → physical", tickmode="array", tickvals=logical,
                         ticktext=[f"{j} → {p}" for j, p in zip(logical, phys)])
    else:
        fig.update_yaxes(title="logical block", **_int_ticks(0, needed - 1, plot_height))
    return fig


def _no_tokens(fig: go.Figure, seq: int, title: str) -> go.Figure:
    """The figure of a sequence without tokens: a note, no axes."""
    fig.add_annotation(text=f"Sequence {seq} has no cached tokens.", showarrow=False, font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _style(fig, title, height=260)


def block_walk_figure(
    table_row: np.ndarray, context_len: int, block_size: int, seq: int = 0, num_blocks: int | None = None
) -> go.Figure:
    """The path one sequence takes through the pool: physical block id against
    logical block. A straight line is a contiguous allocation; jumps are what the
    kernel's block-table lookups absorb.

    Returns
    -------
    go.Figure
        One scatter trace, ``x`` = logical block, ``y`` = physical block
        (every k-th block when there are more than ``MAX_WALK_POINTS``); for an
        empty sequence no trace, a note.
    """
    row = np.asarray(table_row, dtype=np.int64)
    needed = math.ceil(int(context_len) / block_size)
    title = f"Sequence {seq} through the pool"
    if needed == 0:
        return _no_tokens(go.Figure(), seq, title)
    top = max(1, (num_blocks or int(row.max(initial=0)) + 1) - 1)
    stride = max(1, math.ceil(needed / MAX_WALK_POINTS))
    logical = np.arange(0, needed, stride)
    phys = row[logical]
    start = logical * block_size
    end = np.minimum(int(context_len), start + block_size) - 1
    fig = go.Figure(
        go.Scatter(
            x=logical,
            y=phys,
            mode="lines+markers" if len(logical) <= 400 else "lines",
            line=dict(color="#94A3B8", width=1),
            marker=dict(size=7, color=phys, colorscale=BLOCK_COLORSCALE, cmin=0, cmax=top),
            customdata=np.stack([start, end], axis=-1) if len(logical) else None,
            cliponaxis=False,
            hovertemplate="logical block %{x} (tokens %{customdata[0]}–%{customdata[1]})"
            "<br>→ physical block %{y}<extra></extra>",
            name="block",
        )
    )
    subtitle = "straight line = contiguous; jumps = scattered blocks"
    if stride > 1:
        subtitle += f" · every {_ordinal(stride)} block"
    _style(fig, title, subtitle, height=380)
    fig.update_xaxes(title="logical block", zeroline=False, **_int_ticks(0, needed - 1))
    fig.update_yaxes(title="physical block id", zeroline=False, rangemode="tozero",
                     **_int_ticks(0, int(phys.max()), _plot_height(380, subtitle)))
    fig.update_layout(showlegend=False)
    return fig


# -- benchmark results ---------------------------------------------------------

def _fmt_ms(ms: float) -> str:
    """``184.9 -> "185 ms"``, ``2 -> "2.00 ms"``, ``0.1849 -> "0.185 ms"``: always
    milliseconds, the unit of the axes, with three significant digits below 100."""
    if not math.isfinite(ms) or ms <= 0:
        return f"{ms:g} ms"
    if ms >= 100:
        return f"{ms:,.0f} ms"
    return f"{ms:.{max(0, 2 - math.floor(math.log10(ms)))}f} ms"


def latency_figure(results: Sequence, *, log_y: bool = True) -> go.Figure:
    """Per-call latency: every timed sample as a box with its points, median
    labelled, and the CUDA-graph GPU time as a diamond where measured.

    Parameters
    ----------
    results : sequence of BenchResult

    Returns
    -------
    go.Figure
        One box trace per implementation (in order), then one scatter trace
        "GPU time (CUDA graph)" when any result has ``gpu_time_ms``.
    """
    fig = go.Figure()
    for r in results:
        color = impl_color(r.name)
        fig.add_trace(
            go.Box(
                y=list(r.samples_ms),
                x=[r.label] * len(r.samples_ms),
                name=r.label,
                marker=dict(color=color, size=5, opacity=0.6),
                line=dict(color=color, width=1.5),
                fillcolor=_alpha(color, 0.18),
                boxpoints="all",
                jitter=0.35,
                pointpos=0,
                hovertemplate=f"{r.label}<br>%{{y:.4g}} ms<extra></extra>",
                showlegend=False,
            )
        )
        fig.add_annotation(
            x=r.label, y=math.log10(max(r.p90_ms, 1e-9)) if log_y else r.p90_ms, text=f"<b>{_fmt_ms(r.median_ms)}</b>",
            showarrow=False, yshift=16, font=dict(size=12, color=color),
        )
    gpu = [r for r in results if getattr(r, "gpu_time_ms", None) is not None]
    if gpu:
        fig.add_trace(
            go.Scatter(
                x=[r.label for r in gpu],
                y=[r.gpu_time_ms for r in gpu],
                mode="markers",
                marker=dict(symbol="diamond", size=13, color="#111827", line=dict(color="white", width=1.5)),
                name="GPU time (CUDA graph)",
                hovertemplate="%{x}<br>GPU time %{y:.4g} ms<extra></extra>",
            )
        )
    device = results[0].device if results else ""
    subtitle = "box = call latency over all timed calls (median line, quartiles)"
    if gpu:
        subtitle += "; ◆ = GPU time without launch overhead"
    _style(fig, f"Latency per decode step ({device})", subtitle, height=430)
    fig.update_yaxes(title="latency (ms)", type="log" if log_y else "linear")
    if log_y:
        _log_range(fig, [v for r in results for v in [*r.samples_ms, r.gpu_time_ms or r.median_ms]], 0.25, 0.45)
    fig.update_xaxes(title=None)
    return fig


def _log_range(
    fig: go.Figure, values: Sequence[float | None], below: float, above: float, min_span: float = 0, **where
) -> None:
    """Fit a log y axis to ``values`` with margins (in decades), at least
    ``min_span`` decades tall; label only powers of ten when the data spans
    several, so the minor 2s and 5s do not clutter it. ``where`` (``row``,
    ``col``) picks the axis of a subplot; default all."""
    values = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not values:
        return
    lo, hi = math.log10(min(values)) - below, math.log10(max(values)) + above
    lo = min(lo, hi - min_span)
    fig.update_yaxes(range=[lo, hi], **where)
    if hi - lo >= 2:
        # Whole decades; every 2nd, 3rd ... one on a tall span, so labels never crowd.
        fig.update_yaxes(dtick=max(1, math.ceil((hi - lo) / 6)), **where)


def _log_hline_labels(fig: go.Figure) -> None:
    """Move the labels of ``add_hline`` onto a log y axis: Plotly places
    annotations there in log10 coordinates, but ``add_hline`` gives its label the
    plain value (so a label at 4 GB/s landed at 10^4 GB/s, off the chart)."""
    for a in fig.layout.annotations:
        if a.yref == "y" and a.y is not None and a.y > 0:
            a.y = math.log10(a.y)


def _alpha(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _fmt_speedup(s: float) -> str:
    if not math.isfinite(s):
        return ""
    if s < 1:
        return f"{s:.2g}×"
    return f"{s:.1f}×" if s < 100 else f"{s:,.0f}×"


def speedup_figure(results: Sequence, baseline: str = "naive") -> go.Figure:
    """Speedup of each implementation's median call latency over ``baseline``'s.

    Returns
    -------
    go.Figure
        One bar trace; empty (with a note) when the baseline did not run.
    """
    base = next((r for r in results if r.name == baseline), None)
    fig = go.Figure()
    if base is None:
        fig.add_annotation(text=f"No {baseline} result to compare against.", showarrow=False)
        return _style(fig, "Speedup", height=360)
    speed = [base.median_ms / r.median_ms if r.median_ms > 0 else float("nan") for r in results]
    fig.add_trace(
        go.Bar(
            x=[r.label for r in results],
            y=speed,
            marker=dict(color=[impl_color(r.name) for r in results]),
            text=[_fmt_speedup(s) for s in speed],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}<br>%{y:.3g}× faster than " + base.label + "<extra></extra>",
            name="speedup",
        )
    )
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    finite = [s for s in speed if math.isfinite(s) and s > 0]
    log = bool(finite) and max(finite) / min(finite) > 30
    _style(fig, f"Speedup over {base.label}", "median call latency of the baseline ÷ median of each", height=360)
    fig.update_yaxes(title="speedup (×)", type="log" if log else "linear", rangemode="tozero")
    if log:
        _log_range(fig, finite, 0.3, 0.4)
    else:
        fig.update_yaxes(range=[0, max(finite, default=1) * 1.2])
    fig.update_layout(showlegend=False)
    return fig


def bandwidth_figure(results: Sequence, copy_gbps: float | None = None) -> go.Figure:
    """Achieved bandwidth (bytes a decode step must move ÷ time) in GB/s.

    Bars for call latency, and beside them for GPU time where measured; with
    ``copy_gbps`` (this device's measured copy bandwidth) a line marks it and
    each bar is labelled with the fraction reached.

    Returns
    -------
    go.Figure
        Trace 0: "call latency" bars; trace 1 (when any GPU time): "GPU time" bars.
    """
    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def label(v: float | None) -> str:
        if v is None:
            return ""
        text = f"{v:.3g}" if v < 100 else f"{v:,.0f}"
        return f"{text} ({100 * v / copy_gbps:.0f}%)" if copy_gbps else text

    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=[r.gbps for r in results],
            marker=dict(color=colors),
            text=[label(r.gbps) for r in results],
            textposition="outside",
            cliponaxis=False,
            name="from call latency",
            hovertemplate="%{x}<br>%{y:,.1f} GB/s from call latency<extra></extra>",
        )
    )
    if any(r.gpu_gbps is not None for r in results):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r.gpu_gbps for r in results],
                marker=dict(color=[_alpha(c, 0.45) for c in colors], line=dict(color=colors, width=1.5),
                            pattern=dict(shape="/", fgcolor="white")),
                text=[label(r.gpu_gbps) for r in results],
                textposition="outside",
                cliponaxis=False,
                name="from GPU time (CUDA graph)",
                hovertemplate="%{x}<br>%{y:,.1f} GB/s from GPU time<extra></extra>",
            )
        )
    if copy_gbps:
        fig.add_hline(
            y=copy_gbps, line=dict(color="#111827", dash="dash", width=1.2),
            annotation_text=f"measured copy bandwidth {copy_gbps:,.0f} GB/s", annotation_position="top left",
        )
    bytes_moved = results[0].bytes_moved if results else 0
    _style(fig, "Achieved memory bandwidth", f"{format_bytes(bytes_moved, 3)} moved per decode step (K, V once, Q, O)",
           height=380)
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(title="GB/s", rangemode="tozero")
    return fig


def accuracy_figure(results: Sequence) -> go.Figure:
    """Error against the float64 reference, in two panels sharing the x axis.

    Top: the tolerance ratio ``max |out − ref| / (atol + rtol·|ref|)`` (the
    result's ``max_tol_ratio``), with a line at 1: a result passes exactly when
    its bar stays below it. Bottom: the max absolute error with ``atol`` as a
    line. Relative error is not drawn: it is large wherever the reference is near
    zero, even for a correct output. Both axes are logarithmic.

    Exact results (error 0) are drawn a decade under the smallest other bar or
    line of their panel and labelled "0 (exact)"; NaN or inf at the top of the
    axis and labelled in the hover. A result without
    ``max_tol_ratio`` uses ``max_abs_err / atol``, an upper bound of it.

    Parameters
    ----------
    results : sequence of BenchResult

    Returns
    -------
    go.Figure
        Trace 0: "max abs error" (bottom panel, ``yaxis2``); trace 1:
        "error ÷ tolerance" (top panel, ``yaxis``); ``y`` floored and finite.
    """
    from plotly.subplots import make_subplots

    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def ratio(r) -> float:
        value = getattr(r, "max_tol_ratio", None)
        return r.max_abs_err / r.atol if value is None else value

    ratios = [ratio(r) for r in results]
    # Exact results (error 0) sit a decade under the smallest bar or line drawn,
    # not at ERROR_FLOOR: an all-exact run would otherwise span twelve decades.
    positive = [v for v in ratios if math.isfinite(v) and v > 0] + [1.0]
    ratio_floor = max(ERROR_FLOOR, min(positive) / 10)
    positive = [r.max_abs_err for r in results if math.isfinite(r.max_abs_err) and r.max_abs_err > 0]
    abs_floor = max(ERROR_FLOOR, min(positive + [results[0].atol if results else 1e-3]) / 10)

    def clean(v: float, floor: float = ERROR_FLOOR) -> float:
        if not math.isfinite(v):
            return 1e3
        return max(v, floor)

    def hover(v: float) -> str:
        if not math.isfinite(v):
            return "NaN/inf"
        return "0 (exact)" if v == 0 else f"{v:.3g}"

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(r.max_abs_err, abs_floor) for r in results], name="max abs error",
            text=["0 (exact)" if r.max_abs_err == 0 else "" for r in results], textposition="outside",
            marker=dict(color=[_alpha(c, 0.4) for c in colors], line=dict(color=colors, width=1.5)),
            showlegend=False,
            customdata=[hover(r.max_abs_err) for r in results],
            hovertemplate="%{x}<br>max |out − ref| = %{customdata}<extra></extra>",
        ),
        row=2, col=1,
    )
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(v, ratio_floor) for v in ratios], name="error ÷ tolerance", marker=dict(color=colors),
            text=["0 (exact)" if v == 0 else "" for v in ratios], textposition="outside",
            showlegend=False,
            customdata=np.array([[hover(v), hover(r.max_abs_err)] for v, r in zip(ratios, results)], dtype=object)
            if results else None,
            hovertemplate="%{x}<br>max |out − ref| / (atol + rtol·|ref|) = %{customdata[0]}"
            "<br>max |out − ref| = %{customdata[1]}<extra></extra>",
        ),
        row=1, col=1,
    )
    tol = "tolerance"
    if results:
        atol, rtol = results[0].atol, results[0].rtol
        tol += f" (atol = rtol = {atol:g})" if atol == rtol else f" (atol = {atol:g}, rtol = {rtol:g})"
    fig.add_hline(y=1, line=dict(color=FAIL_COLOR, dash="dash", width=1.2), row=1, col=1)
    # Annotations on a log axis take log10 coordinates (add_hline's own label does not).
    fig.add_annotation(x=0, xref="x domain", xanchor="left", y=0, yref="y", yanchor="bottom",
                       text=tol, showarrow=False, font=dict(color=FAIL_COLOR, size=12),
                       bgcolor="rgba(255,255,255,0.85)")
    if results:
        fig.add_hline(y=atol, line=dict(color=FAIL_COLOR, dash="dot", width=1.2), row=2, col=1)
        fig.add_annotation(x=0, xref="x2 domain", xanchor="left", y=math.log10(atol), yref="y2",
                           yanchor="bottom", text=f"atol = {atol:g}", showarrow=False,
                           font=dict(color=FAIL_COLOR, size=12), bgcolor="rgba(255,255,255,0.85)")
    for r in results:
        fig.add_annotation(
            x=r.label, xref="x", y=1, yref="y domain", yanchor="bottom", yshift=2, showarrow=False,
            text="✓ pass" if r.passed else "✗ FAIL",
            font=dict(size=13, color=PASS_COLOR if r.passed else FAIL_COLOR),
        )
    subtitle = "top: max of |out − ref| / (atol + rtol·|ref|), pass ≤ 1; bottom: max |out − ref|"
    _style(fig, "Error against the float64 reference", subtitle, height=480)
    # Room above the plot for the pass/fail marks.
    fig.update_layout(bargap=0.3, margin=dict(t=_margins(subtitle)[0] + 26), showlegend=False)
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title="error ÷ tol.", row=1, col=1)
    fig.update_yaxes(title="abs error", row=2, col=1)
    # Whole decades on both panels: the minor 2…9 labels of a short log axis crowd a panel this low.
    _log_range(fig, [clean(v, ratio_floor) for v in ratios] + [1.0], 0.4, 0.5, min_span=2, row=1, col=1)
    _log_range(fig, [clean(r.max_abs_err, abs_floor) for r in results] + ([results[0].atol] if results else []),
               0.4, 0.5, min_span=2, row=2, col=1)
    return fig


def history_figure(history: Sequence[Mapping]) -> go.Figure:
    """Median call latency of each implementation across the runs of a session.

    Parameters
    ----------
    history : sequence of mapping
        Each with ``"run"`` (int), ``"label"`` (config summary) and ``"results"``
        (list of BenchResult).

    Returns
    -------
    go.Figure
        One bar trace per implementation seen, grouped by run (log y).
    """
    order: list[tuple[str, str]] = []
    for h in history:
        for r in h["results"]:
            if (r.name, r.label) not in order:
                order.append((r.name, r.label))
    xs = [f"#{h['run']}" for h in history]
    fig = go.Figure()
    for name, label in order:
        ys, hovers = [], []
        for h in history:
            r = next((r for r in h["results"] if r.name == name), None)
            ys.append(r.median_ms if r else None)
            hovers.append(h["label"])
        fig.add_trace(
            go.Bar(
                x=xs, y=ys, name=label, marker=dict(color=impl_color(name)), customdata=hovers,
                text=[_fmt_ms(y) if y is not None else "" for y in ys], textposition="outside",
                textfont=dict(size=10), cliponaxis=False,
                hovertemplate=f"{label}<br>run %{{x}}: %{{y:.4g}} ms<br>%{{customdata}}<extra></extra>",
            )
        )
    _style(fig, "Runs in this session", "median call latency per run; hover a bar for its configuration", height=380)
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(title="median latency (ms)", type="log")
    _log_range(fig, [r.median_ms for h in history for r in h["results"]], 0.2, 0.3)
    fig.update_xaxes(title="run", type="category")
    return fig


# -- sweeps ----------------------------------------------------------------------

#: Line dash and marker of each source of a sweep chart (this session, then uploads).
SOURCE_DASHES: tuple[str, ...] = ("solid", "dash", "dot", "dashdot")
SOURCE_SYMBOLS: tuple[str, ...] = ("circle", "diamond", "square", "triangle-up")
SKIPPED_SYMBOL = "circle-open"
#: Log axes once the data spans this factor.
LOG_X_SPAN = 4
LOG_Y_SPAN = 10


def _sources(frame) -> list[str]:
    return list(dict.fromkeys(frame["source"].astype(str))) if len(frame) else []


def _impl_order(frame) -> list[str]:
    present = set(frame["implementation"].astype(str))
    known = [n for n in IMPL_COLORS if n in present]
    return known + sorted(present - set(known))


def _label(name: str) -> str:
    from paged_attention.implementations import LABELS

    return LABELS.get(name, name)


def _axis_title(frame) -> str:
    from explorer.sweep import AXES

    axes = frame["axis"].dropna().astype(str).unique().tolist() if len(frame) else []
    return AXES.get(axes[0], axes[0]) if axes else ""


def _fmt_value(v: float) -> str:
    v = int(v)
    if v >= 1024 and v % 1024 == 0:
        return f"{v // 1024}k"
    return compact(v)


def _sweep_x_axis(fig: go.Figure, values: Sequence[float], title: str, **kw) -> None:
    values = sorted({float(v) for v in values if v is not None and math.isfinite(v) and v > 0})
    log = len(values) > 1 and values[-1] / values[0] >= LOG_X_SPAN
    fig.update_xaxes(title=title, type="log" if log else "linear", zeroline=False, **kw)
    if values and len(values) <= 16:
        fig.update_xaxes(tickmode="array", tickvals=values, ticktext=[_fmt_value(v) for v in values], **kw)


def _y_log(fig: go.Figure, values: Sequence[float], span: float = LOG_Y_SPAN, **kw) -> bool:
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    log = len(finite) > 1 and max(finite) / min(finite) >= span
    fig.update_yaxes(type="log" if log else "linear", **kw)
    return log


def _trace_name(label: str, source: str, sources: Sequence[str]) -> str:
    return label if len(sources) <= 1 else f"{label} · {source}"


def _no_data(fig: go.Figure, text: str, title: str, height: int = 380) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, font=dict(size=14), x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _style(fig, title, height=height)


def sweep_latency_figure(frame) -> go.Figure:
    """Median call latency of each implementation across a sweep's axis.

    Log-log when the axis spans a factor of :data:`LOG_X_SPAN` and the times a
    factor of :data:`LOG_Y_SPAN`. Error bars span p10 to p90. Points the naive
    implementation skipped (over its time budget) are open circles at the
    predicted time, so they read as skipped, not missing.

    Parameters
    ----------
    frame : DataFrame
        Rows with the columns of :data:`~paged_attention.sweep.SWEEP_COLUMNS`
        (one or more ``source`` values: this session, uploads).

    Returns
    -------
    go.Figure
        Per source and implementation one ``"lines+markers"`` trace of timed points
        (``x`` = axis value, ``y`` = median ms, ``meta`` = ``{"implementation",
        "source", "kind": "timed"}``), and, where points were skipped, one marker
        trace with ``meta["kind"] == "skipped"`` (``y`` = predicted ms).
    """
    fig = go.Figure()
    title = "Latency across the sweep"
    if frame is None or not len(frame):
        return _no_data(fig, "No points yet.", title)
    sources = _sources(frame)
    ys: list[float] = []
    for si, source in enumerate(sources):
        part = frame[frame["source"].astype(str) == source]
        for name in _impl_order(part):
            rows = part[part["implementation"] == name].sort_values("value")
            color, label = impl_color(name), _label(name)
            ok = rows[rows["status"] == "ok"]
            if len(ok):
                med = ok["median_ms"].to_numpy(float)
                hi = np.nan_to_num(ok["p90_ms"].to_numpy(float) - med, nan=0.0).clip(min=0)
                lo = np.nan_to_num(med - ok["p10_ms"].to_numpy(float), nan=0.0).clip(min=0)
                ys += [*med, *(med + hi), *(med - lo)]
                fig.add_trace(go.Scatter(
                    x=ok["value"].to_numpy(float), y=med, mode="lines+markers", name=_trace_name(label, source, sources),
                    legendgroup=f"{name}", line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                    marker=dict(color=color, size=8, symbol=SOURCE_SYMBOLS[si % 4]),
                    error_y=dict(type="data", array=hi, arrayminus=lo, color=_alpha(color, 0.5), thickness=1.2, width=3),
                    customdata=np.stack([ok["p10_ms"].to_numpy(float), ok["p90_ms"].to_numpy(float)], axis=-1),
                    hovertemplate=f"{label} ({source})<br>%{{x:,}}: median %{{y:.4g}} ms"
                    "<br>p10–p90 %{customdata[0]:.4g}–%{customdata[1]:.4g} ms<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": "timed"},
                ))
            skipped = rows[rows["status"] == "skipped"]
            if len(skipped):
                pred = skipped["predicted_ms"].to_numpy(float)
                ys += list(pred[np.isfinite(pred)])
                fig.add_trace(go.Scatter(
                    x=skipped["value"].to_numpy(float), y=pred, mode="markers+text",
                    name=_trace_name(f"{label}: skipped (predicted time)", source, sources), legendgroup=f"{name}",
                    marker=dict(color=color, size=12, symbol=SKIPPED_SYMBOL, line=dict(width=2, color=color)),
                    text=["skipped"] * len(skipped), textposition="top center", textfont=dict(size=11, color=color),
                    customdata=skipped["note"].astype(str).to_numpy(),
                    hovertemplate=f"{label} ({source})<br>%{{x:,}}: %{{customdata}}<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": "skipped"},
                ))
    skipped_any = bool((frame["status"] == "skipped").any())
    subtitle = "median call latency; bars span p10–p90"
    if skipped_any:
        subtitle += "; ○ = skipped, drawn at its predicted time"
    if len(sources) > 1:
        subtitle += "; line style = source"
    _style(fig, title, subtitle, height=440)
    _sweep_x_axis(fig, frame["value"].tolist(), _axis_title(frame))
    if _y_log(fig, ys, title="latency (ms)"):
        _log_range(fig, ys, 0.2, 0.55 if skipped_any else 0.35)  # room for the "skipped" labels
    return fig


def _best_gbps(rows) -> np.ndarray:
    gpu = rows["gpu_gbps"].to_numpy(float)
    call = rows["gbps"].to_numpy(float)
    return np.where(np.isfinite(gpu), gpu, call)


def sweep_bandwidth_figure(frame) -> go.Figure:
    """Achieved bandwidth across a sweep against the device's ceiling (roofline style).

    Each point is the bytes a decode step must move over its time: GPU time
    (CUDA graph, no launch overhead) where measured, else call latency. Each
    source's measured copy bandwidth (the ``copy_gbps`` column) is drawn as its
    ceiling; without one (the CPU) a note says there is none.

    Returns
    -------
    go.Figure
        One ``"lines+markers"`` trace per source and implementation (``meta`` as in
        :func:`sweep_latency_figure`); one dashed line shape per ceiling, whose
        ``y0`` is the copy bandwidth in GB/s.
    """
    fig = go.Figure()
    title = "Achieved bandwidth and the copy ceiling"
    if frame is None or not len(frame):
        return _no_data(fig, "No points yet.", title)
    sources = _sources(frame)
    ys: list[float] = []
    ceilings: list[tuple[str, float, str]] = []
    for si, source in enumerate(sources):
        part = frame[frame["source"].astype(str) == source]
        copy = part["copy_gbps"].to_numpy(float)
        copy = copy[np.isfinite(copy) & (copy > 0)]
        if len(copy):
            device = part["device_name"].astype(str).iloc[0] if "device_name" in part else ""
            ceilings.append((source, float(np.median(copy)), device))
        for name in _impl_order(part):
            rows = part[(part["implementation"] == name) & (part["status"] == "ok")].sort_values("value")
            if not len(rows):
                continue
            color, label = impl_color(name), _label(name)
            gbps = _best_gbps(rows)
            ys += list(gbps)
            pct = 100 * gbps / ceilings[-1][1] if ceilings and ceilings[-1][0] == source else np.full(len(gbps), np.nan)
            fig.add_trace(go.Scatter(
                x=rows["value"].to_numpy(float), y=gbps, mode="lines+markers", name=_trace_name(label, source, sources),
                legendgroup=name, line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                marker=dict(color=color, size=8, symbol=SOURCE_SYMBOLS[si % 4]),
                customdata=pct,
                hovertemplate=f"{label} ({source})<br>%{{x:,}}: %{{y:,.4g}} GB/s"
                + ("<br>%{customdata:.0f}% of the ceiling" if np.isfinite(pct).any() else "") + "<extra></extra>",
                meta={"implementation": name, "source": source, "kind": "timed"},
            ))
    for i, (source, gbps, device) in enumerate(ceilings):
        ys.append(gbps)
        where = f" ({device})" if device else ""
        fig.add_hline(
            y=gbps, line=dict(color="#111827" if i == 0 else "#6B7280", dash="dash" if i == 0 else "dot", width=1.4),
            annotation_text=f"ceiling: copy bandwidth {gbps:,.0f} GB/s{where}"
            + (f" · {source}" if len(sources) > 1 else ""),
            # Alternate sides so that two close ceilings keep their labels apart.
            annotation_position="top left" if i % 2 == 0 else "bottom right", annotation_font=dict(size=12, color="#111827" if i == 0 else "#6B7280"),
        )
    if not ceilings:
        fig.add_annotation(
            text="No ceiling on the CPU (a GPU measure)",
            x=0, xref="paper", xanchor="left", y=1, yref="paper", yanchor="bottom", showarrow=False,
            font=dict(size=12, color="#92400E"), bgcolor="rgba(254,243,199,0.9)",
        )
    subtitle = "bytes a decode step must move ÷ time; GPU time where measured, else call latency"
    _style(fig, title, subtitle, height=440)
    _sweep_x_axis(fig, frame["value"].tolist(), _axis_title(frame))
    if _y_log(fig, ys, span=20, title="GB/s"):
        _log_range(fig, ys, 0.2, 0.3)
        _log_hline_labels(fig)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max(ys, default=1) * 1.15])
    if not ceilings:
        fig.update_layout(margin=dict(t=_margins(subtitle)[0] + 26))  # room for the note above the plot
    return fig


def sweep_speedup_figure(frame, target: str = "triton") -> go.Figure:
    """Speedup of ``target`` over every other implementation across a sweep:
    the other's median ÷ the target's at each point (above 1: target faster).

    Points where the other implementation was skipped use its predicted time and
    are drawn as open circles.

    Returns
    -------
    go.Figure
        Per source and other implementation a timed trace and, where skipped, a
        skipped trace (``meta`` as in :func:`sweep_latency_figure`).
    """
    fig = go.Figure()
    label_t = _label(target)
    title = f"Speedup of {label_t} over the others"
    if frame is None or not len(frame) or not ((frame["implementation"] == target) & (frame["status"] == "ok")).any():
        return _no_data(fig, f"No {label_t} result to compare against.", title, height=400)
    sources = _sources(frame)
    ys: list[float] = []
    for si, source in enumerate(sources):
        part = frame[frame["source"].astype(str) == source]
        base = part[(part["implementation"] == target) & (part["status"] == "ok")].set_index("value")["median_ms"]
        base = base[~base.index.duplicated()]
        for name in _impl_order(part):
            if name == target:
                continue
            rows = part[part["implementation"] == name].sort_values("value")
            rows = rows[rows["value"].isin(base.index)]
            color, label = impl_color(name), _label(name)
            for kind, status, column in (("timed", "ok", "median_ms"), ("skipped", "skipped", "predicted_ms")):
                sel = rows[rows["status"] == status]
                if not len(sel):
                    continue
                ratio = sel[column].to_numpy(float) / base.loc[sel["value"]].to_numpy(float)
                ys += list(ratio[np.isfinite(ratio)])
                timed = kind == "timed"
                fig.add_trace(go.Scatter(
                    x=sel["value"].to_numpy(float), y=ratio, mode="lines+markers" if timed else "markers",
                    name=_trace_name(f"vs {label}" if timed else f"vs {label}: skipped (predicted)", source, sources),
                    legendgroup=name, line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                    marker=dict(color=color, size=8 if timed else 12, symbol=SOURCE_SYMBOLS[si % 4] if timed
                                else SKIPPED_SYMBOL, line=dict(width=2, color=color)),
                    hovertemplate=f"{label_t} vs {label} ({source})<br>%{{x:,}}: %{{y:.3g}}× "
                    + ("faster" if timed else "(predicted; naive skipped)") + "<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": kind},
                ))
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1),
                  annotation_text="same speed", annotation_position="bottom right")
    _style(fig, title, f"median of each implementation ÷ median of {label_t}; above 1: {label_t} is faster",
           height=440)
    _sweep_x_axis(fig, frame["value"].tolist(), _axis_title(frame))
    if _y_log(fig, [*ys, 1.0], span=30, title="speedup (×)"):
        _log_range(fig, [*ys, 1.0], 0.25, 0.35)
        _log_hline_labels(fig)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max([*ys, 1.0]) * 1.15])
    return fig


def sweep_ratio_figure(frame, numerator: str, denominator: str) -> go.Figure:
    """Two sources side by side: each implementation's median at ``numerator``
    ÷ its median at ``denominator``, at the axis values both measured.

    Returns
    -------
    go.Figure
        One trace per implementation both sources timed (``meta["implementation"]``).
    """
    fig = go.Figure()
    title = "Time ratio between the two sweeps"
    ys: list[float] = []
    for name in _impl_order(frame):
        def medians(source: str):
            rows = frame[(frame["source"] == source) & (frame["implementation"] == name) & (frame["status"] == "ok")]
            series = rows.set_index("value")["median_ms"]
            return series[~series.index.duplicated()]

        a, b = medians(numerator), medians(denominator)
        common = sorted(set(a.index) & set(b.index))
        if not common:
            continue
        ratio = a.loc[common].to_numpy(float) / b.loc[common].to_numpy(float)
        ys += list(ratio)
        color, label = impl_color(name), _label(name)
        fig.add_trace(go.Scatter(
            x=np.array(common, dtype=float), y=ratio, mode="lines+markers", name=label,
            line=dict(color=color, width=2.2), marker=dict(color=color, size=8),
            hovertemplate=f"{label}<br>%{{x:,}}: %{{y:.3g}}× the time<extra></extra>",
            meta={"implementation": name},
        ))
    if not ys:
        return _no_data(fig, "The two sweeps share no measured point.", title)
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    _style(fig, title, f"median time in “{numerator}” ÷ in “{denominator}”; below 1: the first is faster",
           height=400)
    _sweep_x_axis(fig, frame["value"].tolist(), _axis_title(frame))
    if _y_log(fig, [*ys, 1.0], span=10, title="time ratio (×)"):
        _log_range(fig, [*ys, 1.0], 0.2, 0.3)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max([*ys, 1.0]) * 1.15])
    return fig


# -- serving simulation ----------------------------------------------------------

TAKEN_COLOR = "#FFFFFF"
FREED_COLOR = "#374151"
POOL_COLOR = "#2563EB"
WASTE_COLOR = "#F59E0B"
WAITING_COLOR = "#DC2626"
RUNNING_COLOR = "#0F766E"


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
    max_cells: int = MAX_POOL_CELLS,
) -> go.Figure:
    """The pool of a serving simulation at one step: :func:`pool_figure` (colour =
    owning ``seq_id``, grey = free, dot = partly filled last block) plus what the
    step changed: blocks taken (▲), taken again after an earlier sequence released
    them (recycled, ◆) and released (✕).

    Parameters
    ----------
    pool_owner : ndarray
        ``[num_blocks]``: owning ``seq_id``, ``-1`` free.
    block_tables, context_lens, block_size
        The running batch, as for :func:`pool_figure`.
    taken, freed, recycled : sequence of int
        Physical block ids (``recycled`` a subset of ``taken``).

    Returns
    -------
    go.Figure
        :func:`pool_figure`'s traces, then (exact view only) the traces
        ``"taken this step"``, ``"recycled this step"`` and ``"freed this step"``
        whose ``customdata[:, 0]`` are the block ids.
    """
    owner = np.asarray(pool_owner, dtype=np.int64)
    fig = pool_figure(owner, block_tables, context_lens, block_size, max_cells=max_cells)
    n_rows, n_cols, per_cell = pool_grid_shape(len(owner), max_cells)
    if step is not None:
        fig.update_layout(title_text=f"Physical block pool after step {step}")
    if per_cell > 1:
        return fig
    small = n_rows * n_cols <= 5000
    recycled_set = {int(b) for b in recycled}
    fresh = np.array([int(b) for b in taken if int(b) not in recycled_set], dtype=np.int64)
    marks = (
        ("taken this step", fresh, "triangle-up", TAKEN_COLOR, "#111827", -0.27),
        ("recycled this step", np.array(sorted(recycled_set), dtype=np.int64), "diamond", "#111827", "white", -0.27),
        ("freed this step", np.asarray(freed, dtype=np.int64), "x-thin", FREED_COLOR, FREED_COLOR, 0.0),
    )
    for name, blocks, symbol, color, line, dx in marks:
        fig.add_trace(go.Scatter(
            x=blocks % n_cols + dx, y=blocks // n_cols + (dx if dx else 0.0), mode="markers", name=name,
            marker=dict(symbol=symbol, size=8 if small else 5, color=color,
                        line=dict(color=line, width=1.5 if symbol == "x-thin" else 1)),
            customdata=np.stack([blocks, owner[blocks]], axis=-1) if len(blocks) else None,
            hovertemplate="block %{customdata[0]}: " + name + "<extra></extra>",
        ))
    return fig


def serving_timeline_figure(metrics, step: int | None = None, num_blocks: int | None = None) -> go.Figure:
    """A serving simulation over time, three panels sharing the step axis: blocks in
    use (against the pool), slots wasted in partly filled last blocks (internal
    fragmentation), and the running batch and waiting queue. A line marks ``step``.

    Parameters
    ----------
    metrics : DataFrame
        :func:`~paged_attention.serving.metrics_frame` (one row per step).
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

    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.09,
        subplot_titles=("Blocks in use", "Slots wasted in partly filled last blocks (internal fragmentation)",
                        "Running batch and waiting queue"),
    )
    x = metrics["step"].to_numpy()
    fig.add_trace(go.Scatter(
        x=x, y=metrics["blocks_in_use"].to_numpy(), name="blocks in use", mode="lines",
        line=dict(color=POOL_COLOR, width=1.8), fill="tozeroy", fillcolor=_alpha(POOL_COLOR, 0.15),
        customdata=metrics["free_blocks"].to_numpy(),
        hovertemplate="step %{x}: %{y:,} blocks in use, %{customdata:,} free<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["wasted_slots"].to_numpy(), name="wasted slots", mode="lines",
        line=dict(color=WASTE_COLOR, width=1.8), fill="tozeroy", fillcolor=_alpha(WASTE_COLOR, 0.18),
        customdata=100 * metrics["wasted_fraction"].to_numpy(float),
        hovertemplate="step %{x}: %{y:,} slots wasted (%{customdata:.1f}% of allocated)<extra></extra>",
    ), row=2, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["running"].to_numpy(), name="running", mode="lines", line=dict(color=RUNNING_COLOR, width=1.8),
        hovertemplate="step %{x}: %{y} running<extra></extra>",
    ), row=3, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=metrics["waiting"].to_numpy(), name="waiting", mode="lines", line=dict(color=WAITING_COLOR, width=1.8),
        fill="tozeroy", fillcolor=_alpha(WAITING_COLOR, 0.12),
        hovertemplate="step %{x}: %{y} waiting<extra></extra>",
    ), row=3, col=1)
    if num_blocks is not None:
        fig.add_trace(go.Scatter(
            x=[x[0], x[-1]] if len(x) else [], y=[num_blocks, num_blocks], name="pool size", mode="lines",
            line=dict(color="#111827", dash="dash", width=1), hovertemplate=f"pool: {num_blocks:,} blocks<extra></extra>",
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
    subtitle = "dotted line = the step shown above"
    _style(fig, "The pool over time", subtitle, height=620)
    fig.update_layout(margin=dict(t=_margins(subtitle)[0] + 6), hovermode="x unified")  # + the panel titles
    fig.update_annotations(font=dict(size=13), x=0, xanchor="left")
    fig.update_xaxes(**_int_ticks(x.min(initial=0), x.max(initial=0)))
    fig.update_xaxes(title="decode step", row=3, col=1)
    # Counts: whole-number ticks even when a short run never leaves 0 to 3.
    panel_px = (620 - 90 - 100) * (1 - 2 * 0.09) / 3
    def top(*columns: str) -> float:
        return max((float(metrics[c].max()) for c in columns), default=0.0) if len(x) else 0.0

    tops = {1: max(num_blocks or 0, top("blocks_in_use")), 2: top("wasted_slots"), 3: top("running", "waiting")}
    for r, name in ((1, "blocks"), (2, "slots"), (3, "requests")):
        fig.update_yaxes(title=name, rangemode="tozero", row=r, col=1, **_int_ticks(0, max(1, tops[r]), panel_px))
    return fig


def tradeoff_figure(table, latency_ms: Mapping[int, float] | None = None, current: int | None = None) -> go.Figure:
    """Block size trade-off on one request stream: memory wasted in partly filled
    last blocks (bars, left axis) against the Triton kernel's latency on each
    block size's busiest step (line, right axis, once measured).

    Parameters
    ----------
    table : DataFrame
        :func:`~paged_attention.serving.block_size_tradeoff`'s table.
    latency_ms : mapping, optional
        ``block_size -> milliseconds``.
    current : int, optional
        The block size chosen on the page (its bar is outlined).

    Returns
    -------
    go.Figure
        Trace 0: bars ``"wasted slots (%)"`` (``y`` = percent of allocated slots);
        trace 1 (when latencies are given): ``"Triton latency"`` on ``y2``.
    """
    sizes = table["block_size"].astype(int).tolist()
    x = [str(b) for b in sizes]
    waste = 100 * table["wasted_fraction"].to_numpy(float)
    custom = np.stack([table["mean_wasted_slots"].to_numpy(float), table["mean_blocks_in_use"].to_numpy(float),
                       table["mean_waiting"].to_numpy(float), table["stalled"].to_numpy(float)], axis=-1)
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=x, y=waste, name="wasted slots (%)", marker=dict(
            color=[_alpha(WASTE_COLOR, 0.85 if b == current else 0.55) for b in sizes],
            line=dict(color=["#111827" if b == current else WASTE_COLOR for b in sizes], width=[2 if b == current else 1 for b in sizes]),
        ),
        text=[f"{w:.1f}%" for w in waste], textposition="outside", cliponaxis=False, customdata=custom,
        hovertemplate="block size %{x}<br>%{y:.1f}% of allocated slots wasted (mean %{customdata[0]:,.0f} slots)"
        "<br>mean blocks in use %{customdata[1]:,.0f}<br>mean waiting %{customdata[2]:.1f}, "
        "stalled %{customdata[3]:,.0f} sequence-steps<extra></extra>",
    ))
    subtitle = "bars: slots allocated but unfilled, as % of allocated (mean over the run)"
    if latency_ms:
        measured = [b for b in sizes if b in latency_ms]
        fig.add_trace(go.Scatter(
            x=[str(b) for b in measured], y=[latency_ms[b] for b in measured], name="Triton latency",
            mode="lines+markers", yaxis="y2", line=dict(color=impl_color("triton"), width=2.4),
            marker=dict(size=9, color=impl_color("triton")),
            hovertemplate="block size %{x}<br>Triton decode %{y:.4g} ms on the busiest step<extra></extra>",
        ))
        subtitle += "; line: Triton decode latency on each block size's busiest step"
        fig.update_layout(yaxis2=dict(title="Triton latency (ms)", overlaying="y", side="right", rangemode="tozero",
                                      tickmode="auto", nticks=6,
                                      showgrid=False, color=impl_color("triton")))
    _style(fig, "Block size: memory waste against kernel latency", subtitle, height=420)
    fig.update_xaxes(title="block size (tokens)", type="category")
    # The waste axis only: update_yaxes would also reach the latency axis (y2).
    fig.update_layout(yaxis=dict(title="wasted slots (% of allocated)", rangemode="tozero",
                                 range=[0, max([*waste, 1]) * 1.2]),
                      margin=dict(r=70 if latency_ms else 20), bargap=0.35)
    return fig


#: Most frames :func:`pool_animation_figure` animates.
MAX_ANIMATION_FRAMES = 80


def pool_animation_figure(owners: np.ndarray, steps: Sequence[int], block_size: int) -> go.Figure:
    """The pool replayed step by step as a Plotly animation (Play, Pause and a step
    slider run in the browser), coloured as :func:`pool_figure`: grey free, one
    colour per ``seq_id`` (repeating every ``len(SEQUENCE_COLORS)`` sequences).

    Parameters
    ----------
    owners : ndarray
        ``[frames, num_blocks]``: the owning ``seq_id`` of each block at each
        frame, ``-1`` free; at most :data:`MAX_ANIMATION_FRAMES` frames and
        :data:`MAX_POOL_CELLS` blocks.
    steps : sequence of int
        The step of each frame.
    block_size : int

    Returns
    -------
    go.Figure
        Trace 0: the first frame's heatmap; ``frames``: one per step (named by the
        step), each a heatmap ``z`` of category codes (0 free,
        ``2 + seq_id % len(SEQUENCE_COLORS)``).

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
    height = int(min(720, max(360, 240 + 24 * n_rows)))
    # The bottom margin holds the play buttons and slider (see below).
    gaps = _gaps(n_rows, n_cols, height - _margins(subtitle)[0] - 110)
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
    slider_steps = [
        dict(method="animate", label=str(int(s)),
             args=[[str(int(s))], dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))])
        for s in steps
    ]
    fig.update_layout(
        updatemenus=[dict(
            type="buttons", direction="left", x=0, xanchor="left", y=-0.06, yanchor="top", showactive=False,
            pad=dict(r=10, t=0),
            buttons=[
                dict(label="▶ Play", method="animate",
                     args=[None, dict(frame=dict(duration=250, redraw=True), fromcurrent=True, transition=dict(duration=0))]),
                dict(label="❚❚ Pause", method="animate",
                     args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate", transition=dict(duration=0))]),
            ],
        )],
        sliders=[dict(active=0, steps=slider_steps, x=0.2, len=0.8, y=-0.02, yanchor="top",
                      currentvalue=dict(prefix="step ", font=dict(size=13)), pad=dict(t=0))],
    )
    _style(fig, "The pool, replayed", subtitle, height=height)
    fig.update_layout(showlegend=False, margin=dict(b=110))
    fig.update_xaxes(visible=False, range=[-0.5, n_cols - 0.5])
    fig.update_yaxes(visible=False, autorange="reversed")
    return fig

# -- inside the kernel -------------------------------------------------------------

#: A walk with more block segments than this is drawn one bar per tile.
MAX_WALK_SEGMENTS = 2000
SPLIT_COLORS = SEQUENCE_COLORS
#: Up to this many splits, each has a colour of :data:`SPLIT_COLORS` and a legend
#: entry; past it, colours run along :data:`SPLIT_COLORSCALE` with a colour bar.
MAX_SPLIT_LEGEND = 8
#: Plasma up to its pale yellow end (too faint on white), for many splits.
SPLIT_COLORSCALE: list[list] = [
    [float(x), c] for x, c in zip(np.linspace(0, 1, 9), sample_colorscale("Plasma", list(np.linspace(0, 0.85, 9))))
]
ERROR_FLOOR_F64 = 1e-18


def _split_colors(splits: Sequence[int]) -> dict[int, str]:
    """The colour of each split id in ``splits``: Triton's colour for one split,
    distinct palette colours up to :data:`MAX_SPLIT_LEGEND`, and past it a point
    of :data:`SPLIT_COLORSCALE` by split id (neighbours alike, none repeated)."""
    ids = sorted({int(s) for s in splits})
    if len(ids) <= 1:
        return {s: impl_color("triton") for s in ids}
    if len(ids) <= MAX_SPLIT_LEGEND:
        return {s: SPLIT_COLORS[i] for i, s in enumerate(ids)}
    lo, hi = ids[0], ids[-1]
    points = sample_colorscale(SPLIT_COLORSCALE, [(s - lo) / (hi - lo) for s in ids])
    return dict(zip(ids, points))


def _split_colorbar(fig: go.Figure, splits: Sequence[int], length_px: float, **where) -> None:
    """A colour bar of split ids (for more splits than :data:`MAX_SPLIT_LEGEND`)."""
    lo, hi = int(min(splits)), int(max(splits))
    fig.add_trace(go.Scatter(
        x=[None], y=[None], mode="markers", name="split colours", showlegend=False, hoverinfo="skip",
        marker=dict(color=[lo, hi], colorscale=SPLIT_COLORSCALE, cmin=lo, cmax=hi, showscale=True,
                    colorbar=dict(title=dict(text="split"), thickness=14, **_int_ticks(lo, hi, length_px))),
    ), **where)


def kernel_walk_figure(
    tiles, context_len: int, block_size: int, block_n: int, *, num_blocks: int | None = None,
    title: str = "The tiles the kernel walks",
) -> go.Figure:
    """The chunks of ``block_n`` tokens the Triton kernel walks for one row, in order.

    One bar per tile (top to bottom in walk order) spanning the logical tokens it
    covers, cut into the physical blocks it reads (colour = physical block id, the
    scale of :func:`block_table_figure`); the pale tail is the tile's masked lanes
    (past the context, past the split or padding). Each row is labelled with its
    distinct blocks and block-table lookups.

    Parameters
    ----------
    tiles : DataFrame
        :attr:`~paged_attention.walkthrough.KernelTrace.tiles`.
    context_len, block_size, block_n : int

    Returns
    -------
    go.Figure
        Trace 0: ``"tokens read"`` horizontal bars (``base`` = first token,
        ``x`` = tokens, ``y`` = tile row, ``customdata[:, 0]`` = physical block, or
        the split when more segments than :data:`MAX_WALK_SEGMENTS`); trace 1:
        ``"masked lanes"``; coloured by split with more than
        :data:`MAX_SPLIT_LEGEND` splits, trace 2 carries the colour bar of split ids.
    """
    fig = go.Figure()
    if tiles is None or not len(tiles):
        return _no_data(fig, "This sequence has no cached tokens: the kernel's programs return at once.", title, 300)
    t = tiles.reset_index(drop=True)
    n_tiles = len(t)
    num_splits = int(t["split"].nunique())
    segments = []  # (row, start, length, physical, split, tile)
    for row, tile in t.iterrows():
        phys = list(tile["physical_blocks"])
        k = 0
        for block in range(int(tile["first_block"]), int(tile["end_block"])):
            lo = max(block * block_size, int(tile["token_start"]))
            hi = min((block + 1) * block_size, int(tile["token_end"]))
            if hi > lo and k < len(phys):
                segments.append((row, lo, hi - lo, phys[k], int(tile["split"]), int(tile["tile"])))
                k += 1
    per_block = len(segments) <= MAX_WALK_SEGMENTS
    if num_blocks is None:
        num_blocks = max([s[3] for s in segments], default=0) + 1
    lookups = int(t["table_lookups"].sum())
    subtitle = (f"{count(n_tiles, 'tile')} of {block_n} lanes, {count(num_splits, 'split')}, "
                f"{count(lookups, 'block-table lookup')} for {count(context_len, 'token')}; "
                + ("colour = physical block" if per_block else "colour = split") + "; hatched = masked lanes")
    height = int(min(900, max(sum(_margins(subtitle)) + 170, 150 + 26 * min(n_tiles, 40) + (n_tiles > 40) * 200)))
    plot_height = _plot_height(height, subtitle)
    row_px = plot_height / n_tiles
    x_end = int((t["token_end"] + t["masked_lanes"]).max())
    # White outlines between segments and gaps between rows, only where the bars
    # are thick enough to keep them (a 1 px outline swallows a 1 px segment).
    px_per_token = PLOT_WIDTH_PX / max(x_end, 1)
    thick_rows = row_px >= MIN_GAP_CELL_PX
    if per_block:
        seg = np.array(segments, dtype=np.int64).reshape(-1, 6)
        # Block ids fit inside their segments when each digit gets ~8 px of a ~700 px wide axis.
        text_px_per_token = 700 / max(context_len, 1)
        text_on = len(seg) <= 160 and all(length * text_px_per_token >= 8 * len(str(p)) for _, _, length, p, _, _ in segments)
        outline = thick_rows and 0 < len(seg) <= 400 and seg[:, 2].min() * px_per_token >= MIN_GAP_CELL_PX
        fig.add_trace(go.Bar(
            orientation="h", y=seg[:, 0], x=seg[:, 2], base=seg[:, 1], name="tokens read",
            marker=dict(color=seg[:, 3], colorscale=BLOCK_COLORSCALE, cmin=0, cmax=max(1, num_blocks - 1),
                        line=dict(color="white", width=1 if outline else 0),
                        colorbar=dict(title=dict(text="physical<br>block id"), thickness=14,
                                      **_int_ticks(0, max(1, num_blocks - 1), _colorbar_px(plot_height)))),
            text=[str(p) for p in seg[:, 3]] if text_on else None, textposition="inside", insidetextanchor="middle",
            textfont=dict(size=10, color="white"),
            customdata=np.stack([seg[:, 3], seg[:, 1], seg[:, 1] + seg[:, 2] - 1, seg[:, 4], seg[:, 5]], axis=-1),
            hovertemplate="split %{customdata[3]}, tile %{customdata[4]}<br>tokens %{customdata[1]}–%{customdata[2]}"
            "<br>physical block %{customdata[0]}<extra></extra>",
        ))
    else:
        colors = _split_colors(t["split"])
        fig.add_trace(go.Bar(
            orientation="h", y=np.arange(n_tiles), x=(t["token_end"] - t["token_start"]).to_numpy(),
            base=t["token_start"].to_numpy(), name="tokens read",
            marker=dict(color=[colors[int(s)] for s in t["split"]], line=dict(width=0)),
            customdata=np.stack([t["split"].to_numpy(), t["token_start"].to_numpy(), t["token_end"].to_numpy() - 1,
                                 t["num_physical_blocks"].to_numpy()], axis=-1),
            hovertemplate="split %{customdata[0]}<br>tokens %{customdata[1]}–%{customdata[2]}"
            "<br>%{customdata[3]} physical blocks<extra></extra>",
        ))
    masked = t["masked_lanes"].to_numpy()
    fig.add_trace(go.Bar(
        orientation="h", y=np.arange(n_tiles), x=masked, base=t["token_end"].to_numpy(), name="masked lanes",
        marker=dict(color=UNALLOCATED_COLOR, line=dict(color="#CBD5E1", width=1 if n_tiles <= 100 and thick_rows else 0),
                    pattern=dict(shape="/", fgcolor="#CBD5E1", size=6)),
        customdata=masked, hovertemplate="%{customdata} of " + str(block_n) + " lanes masked<extra></extra>",
    ))
    if not per_block and num_splits > MAX_SPLIT_LEGEND:
        _split_colorbar(fig, t["split"], plot_height)
    labels = []
    for r in t.itertuples():
        name = (f"split {int(r.split)} · " if num_splits > 1 else "") + f"tile {int(r.tile)}"
        labels.append(f"{name}: {count(int(r.num_physical_blocks), 'block')}, "
                      f"{count(int(r.table_lookups), 'lookup')}")
    step = max(1, math.ceil(n_tiles / 40))
    fig.update_yaxes(tickmode="array", tickvals=list(range(0, n_tiles, step)), ticktext=labels[::step],
                     autorange="reversed", title=None, showgrid=False, zeroline=False)
    # Split boundaries, unless so many that the dotted lines would hatch the chart.
    if plot_height / num_splits >= 10:
        for s in sorted(t["split"].unique())[1:]:
            first = int(np.flatnonzero(t["split"].to_numpy() == s)[0])
            fig.add_hline(y=first - 0.5, line=dict(color="#9CA3AF", width=1, dash="dot"))
    _style(fig, title, subtitle, height=height)
    fig.update_xaxes(title="logical token position", rangemode="tozero", zeroline=False, **_int_ticks(0, x_end))
    fig.update_layout(barmode="overlay", bargap=0.25 if thick_rows else 0)
    fig.update_yaxes(automargin=True)
    return fig


def online_softmax_figure(tiles, final_error: float | None = None) -> go.Figure:
    """The online softmax state after each tile, one line per split, against the
    tokens seen: the running max ``m`` (with each tile's own max), the normalizer
    ``l``, and the distance of the partial output ``acc / l`` to the final answer
    (and to the exact answer of its own split).

    All values in the kernel's base-2 units (scores times ``scale * log2(e)``).

    Parameters
    ----------
    tiles : DataFrame
        :attr:`~paged_attention.walkthrough.KernelTrace.tiles`.
    final_error : float, optional
        Max abs error of the final (merged) output against the reference, drawn
        as a star at the end of the context.

    Returns
    -------
    go.Figure
        Per split: traces ``"m (split s)"``, ``"tile max (split s)"``,
        ``"l (split s)"``, ``"error vs final (split s)"``, ``"error vs split
        (split s)"`` (``x`` = ``token_end``); then ``"output"`` (the star) when
        ``final_error`` is given. Zero errors are drawn at :data:`ERROR_FLOOR_F64`.
        A legend entry per split up to :data:`MAX_SPLIT_LEGEND` splits; past
        that none, and a last trace ``"split colours"`` carries a colour bar of
        split ids.
    """
    from plotly.subplots import make_subplots

    title = "Online softmax, tile by tile"
    if tiles is None or not len(tiles):
        return _no_data(go.Figure(), "No tiles: the sequence is empty.", title, 300)
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.09,
        subplot_titles=("Running max m (log2 units)", "Normalizer l = Σ 2^(s − m)",
                        "Max |acc / l − final answer|"),
    )
    num_splits = int(tiles["split"].nunique())
    colors = _split_colors(tiles["split"])
    # One legend entry per split while few; past that a colour bar (a legend of
    # a hundred entries would squash the panels).
    legend = 1 < num_splits <= MAX_SPLIT_LEGEND
    for s, part in tiles.groupby("split", sort=True):
        color = colors[int(s)]
        sfx = f" (split {int(s)})"
        who = f"split {int(s)}: " if num_splits > 1 else ""
        x = part["token_end"].to_numpy(float)
        fig.add_trace(go.Scatter(
            x=x, y=part["m"].to_numpy(float), name="m" + sfx, mode="lines+markers", line=dict(color=color, shape="hv", width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=legend,
            customdata=np.stack([part["tile"].to_numpy(), part["alpha"].to_numpy(float)], axis=-1),
            hovertemplate=who + "after tile %{customdata[0]} (tokens < %{x:,}): m = %{y:.4g}"
            "<br>rescale α = 2^(m_old − m) = %{customdata[1]:.3g}<extra></extra>",
        ), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=x, y=part["tile_max"].to_numpy(float), name="tile max" + sfx, mode="markers",
            marker=dict(size=7, color=color, symbol="circle-open"), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "tile max %{y:.4g}<extra></extra>",
        ), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=x, y=part["l"].to_numpy(float), name="l" + sfx, mode="lines+markers", line=dict(color=color, width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "l = %{y:.5g}<extra></extra>",
        ), row=2, col=1)
        err = np.maximum(np.nan_to_num(part["err_vs_row"].to_numpy(float), nan=np.inf), ERROR_FLOOR_F64)
        fig.add_trace(go.Scatter(
            x=x, y=err, name="error vs final" + sfx, mode="lines+markers", line=dict(color=color, width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "vs the final answer: %{y:.3g}<extra></extra>",
        ), row=3, col=1)
        err_split = np.maximum(np.nan_to_num(part["err_vs_split"].to_numpy(float), nan=np.inf), ERROR_FLOOR_F64)
        fig.add_trace(go.Scatter(
            x=x, y=err_split, name="error vs split" + sfx, mode="lines", line=dict(color=color, width=1.2, dash="dot"),
            legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "vs this split's exact answer: %{y:.3g}<extra></extra>",
        ), row=3, col=1)
    if final_error is not None:
        merged = num_splits > 1
        fig.add_trace(go.Scatter(
            x=[float(tiles["token_end"].max())], y=[max(float(final_error), ERROR_FLOOR_F64)], name="output",
            mode="markers+text", marker=dict(symbol="star", size=14, color="#111827"),
            text=["merged output" if merged else "output"], textposition="top left", textfont=dict(size=11),
            hovertemplate=("after the merge" if merged else "the output") + ": %{y:.2g} from the full softmax"
            "<extra></extra>", showlegend=False,
        ), row=3, col=1)
    subtitle = "x axis: tokens seen; ○ = the tile's own max; dotted = distance to the split's own exact answer"
    if final_error is not None:
        subtitle += "; ★ = the output"
    if num_splits > MAX_SPLIT_LEGEND:
        _split_colorbar(fig, tiles["split"], _plot_height(640, subtitle), row=1, col=1)
    _style(fig, title, subtitle, height=640)
    fig.update_layout(margin=dict(t=_margins(subtitle)[0] + 24), showlegend=legend)  # + the panel titles
    fig.update_annotations(font=dict(size=13), x=0, xanchor="left")
    # From zero: one tile alone would otherwise get an axis of 39.5 to 40.5 tokens.
    fig.update_xaxes(rangemode="tozero", **_int_ticks(0, float(tiles["token_end"].max())))
    fig.update_xaxes(title="tokens seen (end of tile)", row=3, col=1)
    fig.update_yaxes(title="m", row=1, col=1)
    fig.update_yaxes(title="l", type="log", row=2, col=1)
    fig.update_yaxes(title="max abs error", type="log", exponentformat="power", row=3, col=1)
    return fig


def split_merge_figure(splits) -> go.Figure:
    """The split-K (flash-decoding) merge: each split's final running max ``m``, and
    its share of the softmax mass after rescaling, ``w·l / Σ w·l`` with
    ``w = 2^(m − max m)``.

    Returns
    -------
    go.Figure
        Trace 0: bars ``"m"`` (one per split, ``x`` = split label); trace 1: bars
        ``"share"`` (percent) on the second panel; ``customdata`` holds
        ``(l, weight, first token, last token)``.
    """
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("Each split's running max m", "Share of the softmax mass after the merge"))
    n = len(splits)
    x = [f"split {int(s)}" for s in splits["split"]]
    palette = _split_colors(splits["split"]) if n > 1 else {int(s): SPLIT_COLORS[0] for s in splits["split"]}
    colors = [palette[int(s)] for s in splits["split"]]
    # Values above the bars while they fit; the hover has them for many splits.
    labelled = n <= 16
    custom = np.stack([splits["l"].to_numpy(float), splits["weight"].to_numpy(float),
                       splits["token_start"].to_numpy(), splits["token_end"].to_numpy() - 1], axis=-1)
    m = splits["m"].to_numpy(float)
    share = 100 * splits["share"].to_numpy(float)
    fig.add_trace(go.Bar(
        x=x, y=m, name="m", marker=dict(color=colors, line=dict(width=0.5 if labelled else 0)), customdata=custom,
        text=[f"{v:.3g}" for v in m] if labelled else None, textposition="outside", cliponaxis=False,
        hovertemplate="%{x} (tokens %{customdata[2]}–%{customdata[3]})<br>m = %{y:.4g}, l = %{customdata[0]:.4g}"
        "<br>merge weight w = 2^(m − max m) = %{customdata[1]:.3g}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        x=x, y=share, name="share", marker=dict(color=colors, line=dict(width=0.5 if labelled else 0)),
        customdata=custom,
        text=[f"{v:.1f}%" for v in share] if labelled else None, textposition="outside", cliponaxis=False,
        hovertemplate="%{x}: %{y:.2f}% of Σ w·l<br>w = %{customdata[1]:.3g}, l = %{customdata[0]:.4g}<extra></extra>",
    ), row=1, col=2)
    if n:
        fig.add_hline(y=float(m.max()), line=dict(color="#111827", dash="dot", width=1), row=1, col=1,
                      annotation_text="max m", annotation_position="top left")
    subtitle = "out = Σ w·acc / Σ w·l with w = 2^(m − max m); each split rescaled to the common max"
    _style(fig, "Merging the splits", subtitle, height=400)
    fig.update_layout(showlegend=False, margin=dict(t=_margins(subtitle)[0] + 16))  # + the panel titles
    fig.update_annotations(font=dict(size=13))
    lo, hi = (float(m.min()), float(m.max())) if n else (0.0, 1.0)
    pad = max(1.0, 0.25 * (hi - lo))
    fig.update_yaxes(title="m (log2 units)", range=[min(0.0, lo - pad), hi + pad], row=1, col=1)
    fig.update_yaxes(title="% of softmax mass", range=[0, max([*share, 1]) * 1.2], row=1, col=2)
    return fig
