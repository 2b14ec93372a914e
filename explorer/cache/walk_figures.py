"""A sequence's walk through its tokens and blocks: the two figures that follow one
row of the block table from logical tokens to physical blocks.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from explorer.cache.cell_style import (
    BLOCK_KEY,
    NARROW_PLOT_PX,
    WALK_CELL_KEY,
    WIDE_PLOT_PX,
    add_legend_square,
    add_new_token_marks,
    cell_text_fits,
    colorbar_title,
    inked,
    scale_inks,
)
from explorer.cache.sampling import sample_grid
from explorer.formatting import count, ordinal
from explorer.limits import MAX_WALK_CELLS, MAX_WALK_POINTS
from explorer.style import (
    BLOCK_COLORSCALE,
    NARROW_FIGURE_PX,
    UNALLOCATED_COLOR,
    apply_style,
    cell_gaps,
    colorbar_length_px,
    font_px,
    integer_ticks,
    plot_area_height,
    plot_width_px,
    scaled,
)


def token_walk_figure(
    table_row: np.ndarray,
    context_len: int,
    block_size: int,
    seq: int = 0,
    num_blocks: int | None = None,
    *,
    max_cells: int = MAX_WALK_CELLS,
    query_len: int | None = None,
) -> go.Figure:
    """Where each token of one sequence lands: one row per logical block, one
    column per slot, coloured by the physical block (the scale of
    :func:`block_table_figure`), with the token index in each cell when small.

    Slots past the context in the last block are drawn pale ("empty"). With
    ``query_len`` (this step's new tokens, the sequence's last ``query_len``
    positions, already in the cache), each drawn slot of one gets a star in its
    top-right corner (:func:`~.cell_style.add_new_token_marks`), its hover saying
    which query row it is and what it sees; None (the plain decode step): no stars.

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
        ``(token, logical block, physical block, slot)``; trace 1: empty slots;
        then its legend square, and with ``query_len`` the trace
        :data:`~.cell_style.NEW_TOKENS` (``customdata`` = token, its place among
        the new tokens from 1, physical block, slot).
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
    new = 0 if query_len is None else max(0, min(int(query_len), n))

    def layout(cell_key: bool) -> tuple[str, int, float]:
        """The subtitle (naming the cells' numbers when ``cell_key``), the figure's
        height and its plot area's."""
        subtitle = f"{count(n, 'token')} in {count(needed, 'block')} of {block_size}; {BLOCK_KEY}"
        subtitle += f"; {WALK_CELL_KEY}" if cell_key else ""
        if own_scale:
            subtitle += f" (scale: this sequence's blocks {lo:,}–{hi:,})"
        if query_len is not None:
            subtitle += f" · ★ the last {count(new, 'new token')}"
        if grid.sampled:
            subtitle += f" · sampled: {grid.strides('logical block', 'slot')} shown"
        # Tall enough for the y axis title beside even one or two rows.
        height = int(min(720, max(320, 140 + 22 * len(logical))))
        height += max(0, int(scaled(160)) - plot_area_height(height, subtitle))  # a longer subtitle keeps the plot's room
        return subtitle, height, plot_area_height(height, subtitle)

    # The subtitle names the cells' numbers only where they are written (issue 27: it
    # promised them at the default settings, where the cells are too small for any).
    subtitle, height, plot_height = layout(cell_key=True)
    text_on = cell_text_fits(len(logical), len(slots), len(str(n - 1)), WIDE_PLOT_PX, plot_height)
    if not text_on:
        subtitle, height, plot_height = layout(cell_key=False)
    gaps = cell_gaps(len(logical), len(slots), plot_height)
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=slots,
            y=logical,
            customdata=custom,
            # None past the context: the empty slots' trace covers those cells, but not the 1 px gaps.
            text=inked(np.where(valid, token.astype(str), ""),  # each in the ink of more contrast on its cell
                       scale_inks((np.nan_to_num(z) - zmin) / max(zmax - zmin, 1e-9), BLOCK_COLORSCALE)),
            texttemplate="%{text}" if text_on else None,
            textfont=dict(size=font_px("cell")),
            colorscale=BLOCK_COLORSCALE,
            zmin=zmin,
            zmax=zmax,
            colorbar=dict(title=colorbar_title(BLOCK_KEY), thickness=14,
                          **integer_ticks(zmin, zmax, colorbar_length_px(plot_height))),
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
    add_legend_square(fig, UNALLOCATED_COLOR, "empty slot (wasted)", line="#CBD5E1")
    if query_len is not None:
        # In the cell's top-right corner beside its token number, or across the cell when no number fits.
        r, c = np.nonzero(valid & (token >= n - new))
        corner = 0.3 if text_on else 0.0
        cell_px = min(plot_height / max(1, len(logical)), plot_width_px(WIDE_PLOT_PX) / max(1, len(slots)))
        add_new_token_marks(
            fig, slots[c] + corner * grid.col_stride, logical[r] - corner * grid.row_stride,
            np.stack([token[r, c], token[r, c] - (n - new) + 1, phys[r], slots[c]], axis=-1),
            f"token %{{customdata[0]}}: new token %{{customdata[1]}} of {new} (a query row)"
            "<br>attends to positions 0–%{customdata[0]} (causal)"
            "<br>physical block %{customdata[2]}, slot %{customdata[3]}<extra></extra>",
            cell_px, share=0.45 if text_on else 0.75,
        )
    apply_style(fig, f"Token walk of sequence {seq}", subtitle, height=height)
    fig.update_xaxes(title="slot within block", showgrid=False, zeroline=False, **integer_ticks(0, block_size - 1))
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False)
    if len(logical) <= 40:
        fig.update_yaxes(title="logical → physical", tickmode="array", tickvals=logical,
                         ticktext=[f"{j} → {p}" for j, p in zip(logical, phys)])
    else:
        fig.update_yaxes(title="logical block", **integer_ticks(0, needed - 1, plot_height))
    return fig


def _no_tokens(fig: go.Figure, seq: int, title: str) -> go.Figure:
    """The figure of a sequence without tokens: a note, no axes."""
    fig.add_annotation(text=f"Sequence {seq} has no cached tokens.", showarrow=False, font=dict(size=font_px("note")))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_style(fig, title, height=260)


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
            # Outlined: the scale's pale end (block 0) would fade into the white background.
            marker=dict(size=7, color=phys, colorscale=BLOCK_COLORSCALE, cmin=0, cmax=top,
                        line=dict(color=BLOCK_COLORSCALE[-1][1], width=1)),
            customdata=np.stack([start, end], axis=-1) if len(logical) else None,
            cliponaxis=False,
            hovertemplate="logical block %{x} (tokens %{customdata[0]}–%{customdata[1]})"
            "<br>→ physical block %{y}<extra></extra>",
            name="block",
        )
    )
    subtitle = "straight line = contiguous; jumps = scattered blocks"
    if stride > 1:
        subtitle += f" · every {ordinal(stride)} block"
    apply_style(fig, title, subtitle, height=380, width_px=NARROW_FIGURE_PX)  # two fifths of the page
    # Spaced for the narrow column's plot, not the default 400 px: at 224 logical blocks
    # "80100120140" ran together (issue 27).
    fig.update_xaxes(title="logical block", zeroline=False, **integer_ticks(0, needed - 1, plot_width=NARROW_PLOT_PX))
    fig.update_yaxes(title="physical block id", zeroline=False, rangemode="tozero",
                     **integer_ticks(0, int(phys.max()), plot_area_height(380, subtitle, width_px=NARROW_FIGURE_PX)))
    fig.update_layout(showlegend=False)
    return fig
