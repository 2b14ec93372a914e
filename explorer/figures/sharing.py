"""Figures of a KV cache that shares blocks: the physical pool coloured by how many
sequences hold each block (the block table's marks are :func:`block_table_figure`'s
``ref_counts``)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.formatting import compact, count
from .paged_cache import _legend_square
from .sampling import pool_grid_shape
from .style import FREE_COLOR, MAX_POOL_CELLS, _fits_text, _gaps, _int_ticks, _plot_height, _style

#: One sequence: pale blue; two or more: amber to deep red, darker with more holders.
ONE_HOLDER_COLOR = "#BFDBFE"
SHARED_COLORS = ("#FCD34D", "#F97316", "#B91C1C", "#581C87")
#: Past this many holders the colour bar is a gradient rather than one step per count.
MAX_STEPPED_REFS = 12


def ref_color(k: int, top: int) -> str:
    """The colour of a block ``k`` sequences hold, in a pool whose most is ``top``."""
    if k <= 0:
        return FREE_COLOR
    if k == 1:
        return ONE_HOLDER_COLOR
    warm = [[i / (len(SHARED_COLORS) - 1), c] for i, c in enumerate(SHARED_COLORS)]
    return sample_colorscale(warm, [(k - 2) / max(1, top - 2)])[0]


def _ref_colorscale(top: int) -> list:
    """Colour scale over ``z`` in ``[-0.5, top + 0.5]``: one step per count up to
    :data:`MAX_STEPPED_REFS`, past that grey, blue, then a warm gradient."""
    span = top + 1
    if top <= MAX_STEPPED_REFS:
        return [[(k + j) / span, ref_color(k, top)] for k in range(span) for j in (0, 1)]
    edge = 1.5 / span
    return [[0.0, FREE_COLOR], [0.5 / span, FREE_COLOR], [0.5 / span, ONE_HOLDER_COLOR], [edge, ONE_HOLDER_COLOR],
            *[[edge + (1 - edge) * i / (len(SHARED_COLORS) - 1), c] for i, c in enumerate(SHARED_COLORS)]]


def pool_ref_count_figure(
    ref_counts: np.ndarray, block_tables: np.ndarray, block_size: int, *, max_cells: int = MAX_POOL_CELLS
) -> go.Figure:
    """The physical pool coloured by reference count: how many sequences hold each block.

    Free blocks are grey, blocks of one sequence pale blue, shared blocks warm,
    darker the more sequences hold them. Pools larger than ``max_cells`` blocks are
    aggregated: each cell covers consecutive blocks and is coloured by the most
    holders among them.

    Parameters
    ----------
    ref_counts : ndarray
        ``[num_blocks]`` integers, 0 free.
    block_tables : ndarray
        ``[batch_size, max_num_blocks]``, ``-1`` unallocated (the holders in the hover).
    block_size : int

    Returns
    -------
    go.Figure
        Trace 0 is the heatmap; its ``z`` is the reference count of each block
        (the most in each cell when aggregated; NaN past the pool), ``zmin=-0.5``
        and ``zmax = max + 0.5``. Legend-only squares ``"free"``, ``"one sequence"``
        and, up to :data:`MAX_STEPPED_REFS` holders, ``"k sequences"``
        (``meta={"refs": k}``) for each count present follow; past that a colour bar.
    """
    refs = np.asarray(ref_counts, dtype=np.int64)
    num_blocks = len(refs)
    n_rows, n_cols, per_cell = pool_grid_shape(num_blocks, max_cells)
    cells = n_rows * n_cols
    padded = np.full(cells * per_cell, -1, dtype=np.int64)
    padded[:num_blocks] = refs
    groups = padded.reshape(cells, per_cell)
    z = groups.max(1).astype(float)
    z[groups.max(1) < 0] = np.nan
    top = max(2, int(refs.max(initial=0)))
    shared = int((refs > 1).sum())
    subtitle = (f"{count(num_blocks, 'block')}, {count(shared, 'shared block')}; colour = sequences holding it"
                if per_cell == 1 else
                f"{count(num_blocks, 'block')}, {per_cell} per cell; colour = most sequences holding one")
    stepped = top <= MAX_STEPPED_REFS
    counts = np.unique(refs[refs > 1]) if stepped else np.array([], dtype=np.int64)
    # Grow the figure by its legend (Plotly stacks these entries one a row in a
    # narrow column) rather than let it squeeze the grid.
    extra = 22 * (1 + len(counts))
    height = int(min(720, max(320, 190 + 24 * n_rows)) + extra)
    plot_height = _plot_height(height, subtitle) - extra
    if per_cell == 1:
        holders: list[list[int]] = [[] for _ in range(num_blocks)]
        tables = np.asarray(block_tables, dtype=np.int64)
        for seq, col in zip(*np.nonzero(tables >= 0)):
            holders[tables[seq, col]].append(int(seq))
        hover = [f"block {b}<br>free" if not h else
                 f"block {b}<br>held by {count(len(h), 'sequence')}: "
                 + ", ".join(map(str, h[:8])) + (", …" if len(h) > 8 else "")
                 for b, h in enumerate(holders)] + [""] * (cells - num_blocks)
        custom = np.array(hover, dtype=object).reshape(n_rows, n_cols)
        template = "%{customdata}<extra></extra>"
        text = np.array([str(i) if i < num_blocks else "" for i in range(cells)], dtype=object)
        text_on = _fits_text(cells, n_cols, num_blocks - 1)
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
            textfont=dict(size=9),
            colorscale=_ref_colorscale(top),
            zmin=-0.5,
            zmax=top + 0.5,
            showscale=not stepped,
            colorbar=dict(title=dict(text="sequences<br>holding it"), thickness=14,
                          **_int_ticks(0, top, plot_height)),
            hoverongaps=False,
            hovertemplate=template,
            **_gaps(n_rows, n_cols, plot_height),
            name="blocks",
        )
    )
    _legend_square(fig, FREE_COLOR, "free")
    _legend_square(fig, ONE_HOLDER_COLOR, "one sequence")
    if stepped:  # one entry per count present; a colour bar of a few steps is too short to read
        for k in counts:
            _legend_square(fig, ref_color(int(k), top), f"{k} sequences", meta={"refs": int(k)})
    _style(fig, "Physical block pool: sharing", subtitle, height=height)
    fig.update_xaxes(title=f"+ offset within row ({per_cell} blocks per cell)" if per_cell > 1
                     else "+ offset within row", showgrid=False, zeroline=False, **_int_ticks(0, n_cols - 1))
    step = max(1, math.ceil(n_rows / 10))
    tick_rows = list(range(0, n_rows, step))
    fig.update_yaxes(title="first block", autorange="reversed", showgrid=False, zeroline=False,
                     tickmode="array", tickvals=tick_rows, ticktext=[compact(r * n_cols * per_cell) for r in tick_rows])
    return fig
