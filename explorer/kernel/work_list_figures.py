"""The launch's work list: which program reads which logical blocks of which
sequence (a DataFrame of :data:`~explorer.kernel.view.WORK_COLUMNS`, from
:func:`~explorer.kernel.view.work_list`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.cache.sampling import sample_grid
from explorer.formatting import count
from explorer.kernel.figures import OUTSIDE_WINDOW
from explorer.kernel.walk_layout import WINDOW_LABEL_BG
from explorer.limits import MAX_WORK_ROWS
from explorer.style import (
    FULL_FIGURE_PX,
    LAUNCH_ORDER_COLORSCALE,
    MARGIN_L,
    MARGIN_R,
    OTHER_COLOR,
    UNALLOCATED_COLOR,
    apply_style,
    font_px,
    integer_ticks,
    no_data_figure,
    plot_width_px,
    scaled,
    title_margins,
    with_alpha,
)
from paged_attention.tiling import cdiv

#: Height of a drawn row (px) while few, and the least it shrinks to: enough for
#: the launch-order labels (a thinner bar hides them).
_ROW_PX, _MIN_ROW_PX = 30, 22
#: An empty sequence's (0 tokens) bar: its least width (px at scale 1, on the narrowest plot the figure is
#: drawn on) and its label. Its one program returns at once: drawn where it would read, a zero-width
#: sliver at block 0 (issue 27, back row).
EMPTY_BAR_PX = 14
EMPTY_LABEL = "0 tokens: no work"
#: The traced sequence's band.
HIGHLIGHT_LINE = "#F59E0B"
HIGHLIGHT_FILL = with_alpha(HIGHLIGHT_LINE, 0.28)


def work_rows(batch_size: int, highlight: int | None = None, max_rows: int = MAX_WORK_ROWS) -> tuple[list[int], str]:
    """The sequences :func:`work_list_figure` draws, and a note saying what was
    sampled (``""`` when every sequence is drawn).

    Every ``k``-th sequence (:func:`~explorer.cache.sampling.sample_grid` over
    the rows) and ``highlight``, when it is not among them.
    """
    grid = sample_grid(batch_size, 1, max_rows)
    rows = [int(r) for r in grid.rows] if batch_size else []
    if highlight is not None and 0 <= highlight < batch_size and highlight not in rows:
        rows = sorted([*rows, int(highlight)])
    if not grid.sampled:
        return rows, ""
    extra = " and the traced one" if highlight is not None and highlight % grid.row_stride else ""
    return rows, f"sampled for the browser: {grid.strides('sequence', 'block')}{extra} ({len(rows):,} of {batch_size:,})"


def work_list_figure(
    work, context_lens: Sequence[int], block_size: int, *, highlight: int | None = None,
    max_rows: int = MAX_WORK_ROWS, title: str = "Which program reads which blocks",
) -> go.Figure:
    """Each sequence as a row of logical blocks, each program's piece of it as a bar
    labelled by its launch order (per KV head; every KV head launches the same list).

    Parameters
    ----------
    work : DataFrame
        :func:`~explorer.kernel.view.work_list`: columns ``seq``, ``pass``,
        ``order``, ``slot``, ``first_block``, ``end_block``, ``sequences``.
    context_lens : sequence of int
        ``[batch_size]`` tokens per sequence.
    block_size : int
        Tokens per block.
    highlight : int, optional
        The traced sequence: its row is banded and outlined, and its label marked.
    max_rows : int
        Most sequences drawn (:func:`work_rows` picks them).

    Returns
    -------
    go.Figure
        Trace ``"programs"``: horizontal bars of the decode kernel's programs
        (``y`` = drawn row, ``base`` = first block, ``x`` = blocks, ``text`` =
        launch order, ``customdata`` = ``(seq, order, slot, first_block,
        end_block - 1)``), coloured by launch order
        (:data:`~explorer.style.LAUNCH_ORDER_COLORSCALE`); ``"prefix pass"``: the
        shared-prefix programs' pieces on every member's row, labelled ``P`` and
        their order; ``"empty sequences"``: a cross-hatched bar :data:`EMPTY_BAR_PX` wide (grown with the
        scale) on each row of 0 tokens, ``"empty sequence label"`` writing :data:`EMPTY_LABEL` beside it;
        ``"empty programs"``: markers for the other programs with no blocks (a
        sequence read whole by the prefix pass);
        :data:`~explorer.kernel.figures.OUTSIDE_WINDOW`: grey bars over the blocks
        before a row's first read one (a sliding window's), the tiles chart's grey
        band as drawn (:data:`~explorer.kernel.walk_layout.WINDOW_LABEL_BG`). The
        y axis's tick labels name the sequences.
    """
    fig = go.Figure()
    lens = [int(n) for n in context_lens]
    if not lens or not max(lens, default=0):
        return no_data_figure(fig, "Every context is empty: no program reads a block.", title, 300)
    rows, note = work_rows(len(lens), highlight, max_rows)
    row_of = {seq: i for i, seq in enumerate(rows)}
    drawn = work[work["seq"].isin(row_of)]
    y = drawn["seq"].map(row_of).to_numpy()
    needed = [cdiv(n, block_size) for n in lens]
    x_end = max(needed[s] for s in rows) if rows else 1

    own = drawn["pass"].to_numpy() == "own"
    length = (drawn["end_block"] - drawn["first_block"]).to_numpy()
    full = length > 0
    orders = drawn["order"].to_numpy()
    top = max(int(work.loc[work["pass"] == "own", "order"].max()), 1) if (work["pass"] == "own").any() else 1
    custom = np.stack([drawn["seq"], orders, drawn["slot"], drawn["first_block"], drawn["end_block"] - 1], axis=-1)
    pick = own & full
    colors = sample_colorscale(LAUNCH_ORDER_COLORSCALE, list(orders[pick] / top)) if pick.any() else []
    fig.add_trace(go.Bar(
        orientation="h", y=y[pick], base=drawn["first_block"].to_numpy()[pick], x=length[pick], name="programs",
        marker=dict(color=colors, line=dict(color="white", width=1)),
        # No font colour: Plotly picks black or white against each program's green.
        text=[str(int(o)) for o in orders[pick]], textposition="inside", insidetextanchor="middle", textangle=0,
        textfont=dict(size=font_px("cell")), constraintext="inside",
        customdata=custom[pick],
        hovertemplate="sequence %{customdata[0]}: program %{customdata[1]} (launch order)<br>blocks "
        "%{customdata[3]}–%{customdata[4]}, partial slot %{customdata[2]}<extra></extra>",
    ))
    pre = ~own & full
    if pre.any():
        sharing = drawn["sequences"].to_numpy()[pre]
        fig.add_trace(go.Bar(
            orientation="h", y=y[pre], base=drawn["first_block"].to_numpy()[pre], x=length[pre], name="prefix pass",
            marker=dict(color=with_alpha(OTHER_COLOR, 0.35), line=dict(color=OTHER_COLOR, width=1),
                        pattern=dict(shape="/", fgcolor=OTHER_COLOR, size=8)),
            text=[f"P{int(o)}" for o in orders[pre]], textposition="inside", insidetextanchor="middle", textangle=0,
            textfont=dict(color="#111827", size=font_px("cell")), constraintext="inside",
            customdata=np.column_stack([custom[pre], sharing]),
            hovertemplate="sequence %{customdata[0]}: prefix-pass program P%{customdata[1]}, one tile for "
            "%{customdata[5]} sequences<br>shared blocks %{customdata[3]}–%{customdata[4]}, partial slot "
            "%{customdata[2]}<extra></extra>",
        ))
    # The blocks before a row's first read one (a sliding window's): grey as on the tiles chart
    # (the traced row's cream band showed through them unexplained, issue 27 review 3).
    first = drawn[full].groupby("seq")["first_block"].min()
    first = first[first > 0]
    if len(first):
        fig.add_trace(go.Bar(
            orientation="h", y=first.index.map(row_of).to_numpy(), base=np.zeros(len(first)), x=first.to_numpy(),
            name=OUTSIDE_WINDOW, marker=dict(color=WINDOW_LABEL_BG, line=dict(color="white", width=1)),
            customdata=np.column_stack([first.index.to_numpy(), first.to_numpy() - 1]),
            hovertemplate="sequence %{customdata[0]}: blocks 0–%{customdata[1]}, outside the window: not read"
            "<extra></extra>",
        ))
    no_tokens = np.array([lens[int(q)] == 0 for q in drawn["seq"]], bool)
    # An empty sequence: a cross-hatched bar of a readable width (a prefix program's hatch is "/"),
    # and the words beside it, on its row (no key needed).
    if no_tokens.any():
        rows_empty = np.unique(y[no_tokens])
        per_px = x_end / plot_width_px(FULL_FIGURE_PX - MARGIN_L - MARGIN_R)  # blocks per px of the plot now
        width = scaled(EMPTY_BAR_PX) * per_px
        seqs = [rows[int(r)] for r in rows_empty]
        fig.add_trace(go.Bar(
            orientation="h", y=rows_empty, base=np.zeros(len(rows_empty)), x=np.full(len(rows_empty), width),
            name="empty sequences", customdata=seqs,
            marker=dict(color=UNALLOCATED_COLOR, line=dict(color="#94A3B8", width=1),
                        pattern=dict(shape="x", fgcolor="#94A3B8", size=6)),
            hovertemplate="sequence %{customdata}: 0 tokens, no block to read<br>(its program returns at once; "
            "the output is zero)<extra></extra>",
        ))
        fig.add_trace(go.Scatter(
            x=np.full(len(rows_empty), width + scaled(4) * per_px), y=rows_empty, mode="text", name="empty sequence label",
            text=[EMPTY_LABEL] * len(rows_empty), textposition="middle right", cliponaxis=False,
            textfont=dict(size=font_px("label"), color="#334155"), hoverinfo="skip",
        ))
    empty = own & ~full & ~no_tokens
    if empty.any():
        fig.add_trace(go.Scatter(
            x=drawn["first_block"].to_numpy()[empty], y=y[empty], mode="markers", name="empty programs",
            marker=dict(symbol="line-ns", size=14, line=dict(width=2, color="#111827")),
            customdata=custom[empty],
            hovertemplate="sequence %{customdata[0]}: program %{customdata[1]} reads no block of its own"
            "<br>(it writes the output, merging any prefix partials)<extra></extra>",
        ))

    labels = [f"seq {s}" for s in rows]
    if highlight in row_of:
        i = row_of[highlight]
        labels[i] = f"<b>▶ seq {highlight}</b>"
        # A band behind the row and an outline over it: a row read in full hides the band.
        fig.add_shape(type="rect", xref="paper", x0=0, x1=1, y0=i - 0.5, y1=i + 0.5, line=dict(width=0),
                      fillcolor=HIGHLIGHT_FILL, layer="below")
        fig.add_shape(type="rect", x0=0, x1=max(needed[highlight], 1), y0=i - 0.5, y1=i + 0.5,
                      line=dict(color=HIGHLIGHT_LINE, width=3), fillcolor="rgba(0,0,0,0)", layer="above")
    programs = int(work.loc[work["pass"] == "own", "order"].nunique())
    subtitle = (f"{count(len(lens), 'sequence')}, {count(programs, 'program')} per KV head; bar = the blocks one "
                "program reads; colour and number = launch order (dark first)")
    if pre.any():
        subtitle += "; hatched P# = a prefix-pass program, one read for its group"
    if len(first):
        subtitle += f"; grey = {OUTSIDE_WINDOW}"
    if note:
        subtitle += f"; {note}"
    row_px = max(_MIN_ROW_PX, min(_ROW_PX, 700 / max(len(rows), 1)))
    height = int(sum(title_margins(subtitle, FULL_FIGURE_PX)) + 20 + row_px * len(rows))
    apply_style(fig, title, subtitle, height=height, width_px=FULL_FIGURE_PX)  # across the page
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), ticktext=labels, autorange="reversed",
                     showgrid=False, zeroline=False, title=None, automargin=True)
    fig.update_xaxes(title=f"logical block ({count(block_size, 'token')} each)", range=[0, x_end],
                     zeroline=False, **integer_ticks(0, x_end))
    fig.update_layout(barmode="overlay", bargap=0.2, showlegend=False,
                      uniformtext=dict(minsize=font_px("cell"), mode="hide"))
    return fig
