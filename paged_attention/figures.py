"""Plotly figures of the explorer: data in, ``go.Figure`` out.

Two families:

* the paged cache, drawn from the block table alone (no KV tensors):
  :func:`block_table_figure`, :func:`pool_figure`, :func:`token_walk_figure`,
  :func:`block_walk_figure`;
* benchmark results (lists of :class:`~paged_attention.bench.BenchResult`):
  :func:`latency_figure`, :func:`speedup_figure`, :func:`bandwidth_figure`,
  :func:`accuracy_figure`, :func:`history_figure`.

A browser draws a few tens of thousands of heatmap cells comfortably. Past that
the cache figures sample (every k-th row and column, exact values in the cells
shown) or aggregate (the pool: k consecutive blocks per cell), and
:func:`sample_grid` tells the page what was done so it can say so.

Every implementation keeps one colour in every chart (:data:`IMPL_COLORS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

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
#: Sequence colours in the pool view (no greys: grey means free or foreign).
SEQUENCE_COLORS: tuple[str, ...] = (
    "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
    "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F", "#86BCB6",
)
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

_FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13, color="#1F2937")

FREE = -1
OTHER = -2


def _fits_text(n_cells: int, n_cols: int, max_value: int) -> bool:
    """Whether numbers fit inside heatmap cells: few cells, and narrow enough rows."""
    return n_cells <= MAX_TEXT_CELLS and n_cols * len(str(max(0, int(max_value)))) <= 48


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


def _style(fig: go.Figure, title: str, subtitle: str | None = None, height: int = 420) -> go.Figure:
    top, bottom = (84 if subtitle else 56), 100
    # The legend sits under the x axis title: a fixed number of pixels below the
    # plot area, whatever the figure's height.
    legend_y = -66 / max(height - top - bottom, 40)
    fig.update_layout(
        template="plotly_white",
        font=_FONT,
        title=dict(text=title, x=0, xanchor="left", font=dict(size=16), subtitle=dict(text=subtitle or "")),
        height=height,
        margin=dict(l=60, r=20, t=top, b=bottom),
        legend=dict(orientation="h", yanchor="top", y=legend_y, xanchor="left", x=0, font=dict(size=12)),
        hoverlabel=dict(font=dict(family=_FONT["family"])),
    )
    return fig


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

    def note(self, row_name: str, col_name: str) -> str:
        """A caption saying what was sampled, or ``""`` when nothing was."""
        if not self.sampled:
            return ""
        parts = []
        if self.row_stride > 1:
            parts.append(f"every {_ordinal(self.row_stride)} {row_name}")
        if self.col_stride > 1:
            parts.append(f"every {_ordinal(self.col_stride)} {col_name}")
        return (
            f"Sampled for the browser: showing {' and '.join(parts)} "
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
    seq = np.broadcast_to(rows[:, None], sub.shape)
    logical = np.broadcast_to(cols[None, :], sub.shape)
    seq_len = lengths[rows][:, None]
    start = logical * block_size
    end = np.minimum(seq_len, start + block_size) - 1
    filled = _filled(seq_len, logical, block_size)
    custom = np.stack([seq, logical, start, end, sub, filled], axis=-1).astype(np.int32)

    z = np.where(unalloc, np.nan, sub).astype(float)
    small = grid.cells <= 5000
    text_on = _fits_text(grid.cells, len(cols), num_blocks - 1)
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
            colorbar=dict(title=dict(text="physical<br>block id"), thickness=14),
            hoverongaps=False,
            hovertemplate=(
                "sequence %{customdata[0]}<br>logical block %{customdata[1]}"
                "<br>tokens %{customdata[2]}–%{customdata[3]}"
                "<br>physical block %{customdata[4]}"
                f"<br>slots filled %{{customdata[5]}}/{block_size}<extra></extra>"
            ),
            texttemplate="%{z}" if text_on else None,
            textfont=dict(size=10),
            xgap=1 if small else 0,
            ygap=1 if small else 0,
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
            xgap=1 if small else 0,
            ygap=1 if small else 0,
            name="unallocated (-1)",
        )
    )
    _legend_square(fig, UNALLOCATED_COLOR, "unallocated (-1)", line="#CBD5E1")
    subtitle = f"{batch:,} sequences x {width:,} logical blocks of {block_size} tokens; colour = physical block id"
    if grid.sampled:
        subtitle += f" · sampled: every {grid.row_stride}th row, every {grid.col_stride}th column"
    _style(fig, "Block table", subtitle, height=int(min(720, max(300, 140 + 26 * len(rows)))))
    fig.update_xaxes(title="logical block", showgrid=False, zeroline=False)
    fig.update_yaxes(title="sequence", autorange="reversed", showgrid=False, zeroline=False)
    if len(rows) <= 40:
        fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=[str(r) for r in rows])
    return fig


def _legend_square(fig: go.Figure, color: str, name: str, line: str | None = None) -> None:
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

    Returns
    -------
    go.Figure
        Trace 0 is the heatmap; its ``z`` is the category code (exact view:
        0 free, 1 other, ``2 + seq % 10`` a sequence) or the in-batch share
        (aggregated view).
    """
    owner = np.asarray(pool_owner, dtype=np.int64)
    num_blocks = len(owner)
    n_rows, n_cols, per_cell = pool_grid_shape(num_blocks, max_cells)
    fig = go.Figure()
    if per_cell == 1:
        _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols)
        subtitle = f"{num_blocks:,} physical blocks of {block_size} slots, {n_cols} per row; colour = owning sequence"
    else:
        _pool_aggregated(fig, owner, n_rows, n_cols, per_cell)
        subtitle = f"{num_blocks:,} blocks, {per_cell} per cell; colour = share held by this batch"
    _style(fig, "Physical block pool", subtitle, height=int(min(720, max(320, 190 + 24 * n_rows))))
    fig.update_xaxes(title=f"+ offset within row ({per_cell} block{'s' if per_cell > 1 else ''} per cell)"
                     if per_cell > 1 else "+ offset within row", showgrid=False, zeroline=False)
    fig.update_yaxes(title="first block of row", autorange="reversed", showgrid=False, zeroline=False)
    step = max(1, math.ceil(n_rows / 10))
    rows = list(range(0, n_rows, step))
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=[compact(r * n_cols * per_cell) for r in rows])
    return fig


def _pool_exact(fig, owner, block_tables, context_lens, block_size, n_rows, n_cols) -> None:
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
            text=ids.reshape(n_rows, n_cols),
            texttemplate="%{text}" if _fits_text(cells, n_cols, num_blocks - 1) else None,
            textfont=dict(size=9),
            colorscale=scale,
            zmin=-0.5,
            zmax=k - 0.5,
            showscale=False,
            hoverongaps=False,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=1 if small else 0,
            ygap=1 if small else 0,
            name="blocks",
        )
    )
    _legend_square(fig, FREE_COLOR, "free")
    if (owner == OTHER).any():
        _legend_square(fig, OTHER_COLOR, "other sequences (not in batch)")
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


def _pool_aggregated(fig, owner, n_rows, n_cols, per_cell) -> None:
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
        fig.add_annotation(text=f"Sequence {seq} has no cached tokens.", showarrow=False, font=dict(size=14))
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return _style(fig, f"Token walk of sequence {seq}", height=260)
    grid = sample_grid(needed, block_size, max_cells)
    logical = grid.rows
    slots = np.arange(block_size)
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
    text_on = _fits_text(cells, block_size, n - 1)
    small = cells <= 5000
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
            colorbar=dict(title=dict(text="physical<br>block id"), thickness=14),
            hoverongaps=False,
            hovertemplate="token %{customdata[0]}<br>logical block %{customdata[1]}, slot %{customdata[3]}"
            "<br>→ physical block %{customdata[2]}, slot %{customdata[3]}<extra></extra>",
            xgap=1 if small else 0,
            ygap=1 if small else 0,
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
            xgap=1 if small else 0,
            ygap=1 if small else 0,
            name="empty slot",
        )
    )
    _legend_square(fig, UNALLOCATED_COLOR, "empty slot (wasted)", line="#CBD5E1")
    subtitle = f"{n:,} tokens in {needed:,} blocks of {block_size}; colour = physical block id"
    if own_scale:
        subtitle += f" (scale: this sequence's blocks {lo:,}–{hi:,})"
    if grid.sampled:
        subtitle += f" · every {grid.row_stride}th logical block shown"
    _style(fig, f"Token walk of sequence {seq}", subtitle, height=int(min(720, max(280, 140 + 22 * len(logical)))))
    fig.update_xaxes(title="slot within block", showgrid=False, zeroline=False)
    fig.update_yaxes(title="logical block → physical block", autorange="reversed", showgrid=False, zeroline=False)
    if len(logical) <= 40:
        fig.update_yaxes(tickmode="array", tickvals=logical, ticktext=[f"{j} → {p}" for j, p in zip(logical, phys)])
    return fig


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
        (every k-th block when there are more than ``MAX_WALK_POINTS``).
    """
    row = np.asarray(table_row, dtype=np.int64)
    needed = math.ceil(int(context_len) / block_size)
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
            marker=dict(size=7, color=phys, colorscale=BLOCK_COLORSCALE, cmin=0,
                        cmax=max(1, (num_blocks or int(row.max(initial=0)) + 1) - 1)),
            customdata=np.stack([start, end], axis=-1) if len(logical) else None,
            hovertemplate="logical block %{x} (tokens %{customdata[0]}–%{customdata[1]})"
            "<br>→ physical block %{y}<extra></extra>",
            name="block",
        )
    )
    subtitle = "straight line = contiguous; jumps = scattered blocks"
    if stride > 1:
        subtitle += f" · every {stride}th block"
    _style(fig, f"Sequence {seq} through the pool", subtitle, height=380)
    fig.update_xaxes(title="logical block", zeroline=False)
    fig.update_yaxes(title="physical block id", zeroline=False, rangemode="tozero")
    fig.update_layout(showlegend=False)
    return fig


# -- benchmark results ---------------------------------------------------------

def _fmt_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:,.0f} ms"
    if ms >= 1:
        return f"{ms:.2f} ms"
    return f"{ms * 1e3:.1f} µs"


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


def _log_range(fig: go.Figure, values: Sequence[float | None], below: float, above: float) -> None:
    """Fit a log y axis to ``values`` with margins (in decades); label only powers
    of ten when the data spans several, so the minor 2s and 5s do not clutter it."""
    values = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not values:
        return
    lo, hi = math.log10(min(values)) - below, math.log10(max(values)) + above
    fig.update_yaxes(range=[lo, hi])
    if hi - lo >= 2:
        fig.update_yaxes(dtick=1)


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
    _style(fig, "Achieved memory bandwidth", f"{bytes_moved / 1e6:,.2f} MB moved per decode step (K, V once, Q, O)",
           height=380)
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(title="GB/s", rangemode="tozero")
    return fig


def accuracy_figure(results: Sequence) -> go.Figure:
    """Max absolute and relative error against the float64 reference (log axis),
    with the dtype's tolerance as a line and pass/fail above each group.

    Exact results (error 0) are drawn at :data:`ERROR_FLOOR`; NaN or inf at the
    top of the axis and labelled.

    Returns
    -------
    go.Figure
        Trace 0: "max abs error"; trace 1: "max rel error" (``y`` floored, finite).
    """
    labels = [r.label for r in results]
    colors = [impl_color(r.name) for r in results]

    def clean(v: float) -> float:
        if not math.isfinite(v):
            return 1e3
        return max(v, ERROR_FLOOR)

    def hover(v: float) -> str:
        if not math.isfinite(v):
            return "NaN/inf"
        return "0 (exact)" if v == 0 else f"{v:.3g}"

    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(r.max_abs_err) for r in results], name="max abs error",
            marker=dict(color=colors),
            customdata=[hover(r.max_abs_err) for r in results],
            hovertemplate="%{x}<br>max |out − ref| = %{customdata}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=labels, y=[clean(r.max_rel_err) for r in results], name="max rel error",
            marker=dict(color=[_alpha(c, 0.4) for c in colors], line=dict(color=colors, width=1.5),
                        pattern=dict(shape="/", fgcolor="white")),
            customdata=[hover(r.max_rel_err) for r in results],
            hovertemplate="%{x}<br>max |out − ref| / |ref| = %{customdata}<extra></extra>",
        )
    )
    if results:
        atol, rtol = results[0].atol, results[0].rtol
        lines = [(atol, "dash", f"atol = rtol = {atol:g}" if atol == rtol else f"atol = {atol:g}")]
        if rtol != atol:
            lines.append((rtol, "dot", f"rtol = {rtol:g}"))
        for value, dash, text in lines:
            fig.add_hline(y=value, line=dict(color=FAIL_COLOR, dash=dash, width=1.2))
            # Annotations on a log axis take log10 coordinates (add_hline's own label does not).
            fig.add_annotation(x=0, xref="paper", xanchor="left", y=math.log10(value), yanchor="bottom",
                               text=text, showarrow=False, font=dict(color=FAIL_COLOR, size=12),
                               bgcolor="rgba(255,255,255,0.85)")
    for r in results:
        fig.add_annotation(
            x=r.label, y=1, yref="paper", yanchor="bottom", showarrow=False,
            text="✓ pass" if r.passed else "✗ FAIL",
            font=dict(size=13, color=PASS_COLOR if r.passed else FAIL_COLOR),
        )
    _style(fig, "Error against the float64 reference",
           "pass: |out − ref| ≤ atol + rtol·|ref| everywhere; rel error is large where ref ≈ 0", height=380)
    fig.update_layout(barmode="group", bargap=0.3, margin=dict(t=100))
    fig.update_yaxes(title="error (log scale)", type="log", exponentformat="power")
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
                hovertemplate=f"{label}<br>run %{{x}}: %{{y:.4g}} ms<br>%{{customdata}}<extra></extra>",
            )
        )
    _style(fig, "Runs in this session", "median call latency per run; hover a bar for its configuration", height=380)
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(title="median latency (ms)", type="log")
    _log_range(fig, [r.median_ms for h in history for r in h["results"]], 0.2, 0.3)
    fig.update_xaxes(title="run", type="category")
    return fig
