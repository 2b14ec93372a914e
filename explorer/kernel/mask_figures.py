"""The draft tokens' tile on Inside the kernel: its rows as (query token, query head)
and, cell by cell, which (row, position) scores the kernel keeps and which it masks
(from a trace's ``tile_rows`` and ``mask``, :class:`~explorer.kernel.trace.KernelTrace`).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.cache.cell_style import add_legend_square, legend_key
from explorer.formatting import count
from explorer.kernel.tile_rows import MASK_STATES, new_token_tiles
from explorer.kernel.work_list_figures import HIGHLIGHT_LINE
from explorer.limits import MAX_MASK_ROWS
from explorer.marks import OWN_TOKEN_MARK
from explorer.style import (
    UNALLOCATED_COLOR,
    apply_style,
    cell_gaps,
    integer_ticks,
    no_data_figure,
    plot_area_height,
    scaled,
)

#: One colour per state of a score: kept has a colour of its own; masked and
#: unloaded lanes are greys, as masked lanes are everywhere on the page.
STATE_COLORS: dict[str, str] = {"scored": "#0F766E", "causal": "#94A3B8", "window": "#CBD5E1",
                                "unloaded": UNALLOCATED_COLOR}
#: What each state means, in the legend and the hover.
STATE_NAMES: dict[str, str] = {
    "scored": "scored",
    "causal": "masked: a later token (causal)",
    "window": "masked: before the row's window",
    "unloaded": "not loaded (past the context)",
}
#: What a cell's colour means, in the legend.
MASK_KEY = "colour = what the row does with the score"
#: Height of a drawn row (px) while few, and the least it shrinks to.
_ROW_PX, _MIN_ROW_PX = 26, 9


def _drawn_rows(tile_rows, query_len: int) -> tuple[list[str], list[int], list[tuple[int, ...]]]:
    """The rows the figure draws: labels, the query token of each, and the tile rows
    (token, head) each stands for: every row while there are at most
    :data:`~explorer.limits.MAX_MASK_ROWS`, else one per token (its heads share its mask)."""
    if len(tile_rows) <= MAX_MASK_ROWS:
        return ([f"t{t} · h{h}" for t, h in zip(tile_rows["token"], tile_rows["head"])],
                tile_rows["token"].astype(int).tolist(), [(int(r),) for r in tile_rows["row"]])
    labels, tokens, rows = [], [], []
    for token in range(query_len):
        mine = tile_rows[tile_rows["token"] == token]
        labels.append(f"t{token} · h{int(mine['head'].min())}–{int(mine['head'].max())}")
        tokens.append(token)
        rows.append(tuple(int(r) for r in mine["row"]))
    return labels, tokens, rows


def tile_mask_figure(
    tile_rows, mask, *, context_len: int, token: int, head: int, title: str = "The tile's rows and the causal mask",
) -> go.Figure:
    """The decode kernel's tile for a sequence with draft tokens: one row per (query
    token, query head) it holds (row ``r``: token ``r // group``, head ``kv_head *
    group + r % group``), one column per position of the tiles that hold the new
    tokens up to the context's end (the lanes past it load nothing: the subtitle
    says which), each cell coloured by what the row does with that score
    (:data:`STATE_COLORS`): token ``t`` scores the positions up to its own (a
    ring, :data:`~explorer.marks.OWN_TOKEN_MARK`) and masks the later new tokens', so the kept cells form a staircase.
    The traced row (``token``, ``head``) is outlined.

    Parameters
    ----------
    tile_rows, mask : DataFrame
        :attr:`~explorer.kernel.trace.KernelTrace.tile_rows` and ``mask``.
    context_len : int
        The sequence's tokens (its last ``query_len`` are the new ones).
    token, head : int
        The traced row.

    Returns
    -------
    go.Figure
        Trace 0: the heatmap (``x`` = positions, ``y`` = row labels, ``z`` = the
        index of each cell's state in :data:`~explorer.kernel.tile_rows.MASK_STATES`,
        ``meta`` = ``{"tiles": [(split, tile), ...], "rows": [tile rows per drawn row]}``);
        ``"own token"``: a ring at each drawn row's own position; then a legend
        square per state present. The traced row's outline is a shape named
        ``"traced row"``.
    """
    fig = go.Figure()
    query_len = int(tile_rows["token"].max()) + 1 if tile_rows is not None and len(tile_rows) else 0
    tiles = new_token_tiles(mask, context_len, query_len)
    if query_len < 2 or not tiles:
        return no_data_figure(fig, "One new token per sequence: every row of the tile scores the same positions.",
                              title, 300)
    picked = mask[[(int(s), int(t)) in tiles for s, t in zip(mask["split"], mask["tile"])]]
    past = sorted(set(picked.loc[picked["position"] >= context_len, "position"].astype(int)))
    picked = picked[picked["position"] < context_len]  # a tile's lanes past the context load nothing: said, not drawn
    positions = sorted(set(picked["position"].astype(int)))
    column = {p: i for i, p in enumerate(positions)}
    labels, tokens, rows = _drawn_rows(tile_rows, query_len)
    code = {s: i for i, s in enumerate(MASK_STATES)}
    by_token = {t: np.full(len(positions), code["unloaded"]) for t in range(query_len)}
    for t, p, state in zip(picked["token"], picked["position"], picked["state"]):
        by_token[int(t)][column[int(p)]] = code[state]
    z = np.stack([by_token[t] for t in tokens])
    hover = np.array([[f"{label}, position {p:,}: {STATE_NAMES[MASK_STATES[c]]}" for p, c in zip(positions, line)]
                      for label, line in zip(labels, z)])
    n = len(MASK_STATES)
    colorscale = [[k / n + e, STATE_COLORS[s]] for k, s in enumerate(MASK_STATES) for e in (0, 1 / n)]
    colorscale[-1][0] = 1.0
    height = 230 + max(_MIN_ROW_PX, min(_ROW_PX, 480 // max(len(labels), 1))) * len(labels)
    beyond = f", its lanes {past[0]:,}–{past[-1]:,} past the context left out" if past else ""
    subtitle = (f"{count(query_len, 'new token')} × {count(len(tile_rows) // query_len, 'query head')} = "
                f"{count(len(tile_rows), 'row')} of one tile; positions {positions[0]:,}–{positions[-1]:,} "
                f"({count(len(tiles), 'tile')}{beyond}); {OWN_TOKEN_MARK.words} = the row's own token")
    plot_h = plot_area_height(height, subtitle)
    fig.add_trace(go.Heatmap(
        x=positions, y=labels, z=z, zmin=-0.5, zmax=n - 0.5, colorscale=colorscale, showscale=False,
        text=hover, hovertemplate="%{text}<extra></extra>", **cell_gaps(len(labels), len(positions), plot_h),
        meta={"tiles": tiles, "rows": rows},
    ))
    own = [(context_len - query_len + t, label) for t, label in zip(tokens, labels)]
    fig.add_trace(go.Scatter(
        x=[p for p, _ in own], y=[label for _, label in own], mode="markers", name="own token", showlegend=False,
        marker=dict(symbol=OWN_TOKEN_MARK.symbol, size=scaled(9), color=OWN_TOKEN_MARK.fill,
                    line=dict(color=OWN_TOKEN_MARK.line, width=scaled(2))),
        hovertemplate="%{y}: its own position %{x:,}<extra></extra>",
    ))
    for state in MASK_STATES:
        if (z == code[state]).any():
            add_legend_square(fig, STATE_COLORS[state], STATE_NAMES[state], line="#94A3B8",
                              meta={"state": state})
    legend_key(fig, MASK_KEY)
    traced = next(i for i, (t, members) in enumerate(zip(tokens, rows))
                  if t == token and any(int(tile_rows.loc[tile_rows["row"] == r, "head"].iloc[0]) == head
                                        for r in members))
    fig.add_shape(type="rect", x0=positions[0] - 0.5, x1=positions[-1] + 0.5, y0=traced - 0.5, y1=traced + 0.5,
                  xref="x", yref="y", line=dict(color=HIGHLIGHT_LINE, width=2.5), name="traced row")
    for s, t in tiles[1:]:  # where one tile ends and the next begins
        first = int(picked[(picked["split"] == s) & (picked["tile"] == t)]["position"].min())
        fig.add_vline(x=first - 0.5, line=dict(color="#111827", dash="dot", width=1))
    apply_style(fig, title, subtitle, height=height)
    fig.update_xaxes(title="position in the context", **integer_ticks(positions[0], positions[-1]))
    # Every row named (Plotly would thin the category ticks out on short rows).
    fig.update_yaxes(autorange="reversed", title=None, type="category", tickmode="array", tickvals=labels,
                     ticktext=labels)
    return fig
