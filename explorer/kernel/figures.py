"""Figures of the Triton kernel's trace (a :class:`~explorer.kernel.trace.KernelTrace`):
its walk over the blocks, the online softmax tile by tile and the split merge.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.cache.cell_style import BLOCK_KEY, colorbar_title, legend_key
from explorer.category_ticks import set_category_ticks
from explorer.formatting import RATIO_D3, SIG3_D3, TRACE_D3, count, format_percent, sig3
from explorer.kernel.merge_layout import MERGE_GAP, max_line_segments, panel_px, tick_gap_px, value_label_px
from explorer.kernel.option_figures import L_HEADROOM, SINK_COLOR, add_sink_bracket
from explorer.kernel.walk_layout import (
    BREAK_GAP, SKIPPED_SHARE, WALK_PLOT_PX, break_walk_axis, set_walk_margins, walk_ids_fit, walk_labels, window_band,
)
from explorer.legend_layout import fit_legend
from explorer.marks import OUTPUT_MARK, SHAPE_WORDS, TILE_MAX_MARK
from explorer.limits import MAX_SPLIT_LEGEND, MAX_WALK_SEGMENTS, MAX_WALK_TEXT
from explorer.panel_layout import stacked_panels
from explorer.style import (
    BLOCK_COLORSCALE, MARGIN_L, MARGIN_R, MIN_GAP_CELL_PX, PRESENTATION_SCALE, SPLIT_COLORS,
    SPLIT_COLORSCALE, UNALLOCATED_COLOR, apply_style, colorbar_length_px, font_px, integer_ticks, no_data_figure,
    plot_area_height, presentation_scale, scaled, title_margins,
)

#: The online-softmax chart's x axis runs this fraction past the context: room for
#: half the output's mark. Its label goes in the right margin, in pixels
#: (:func:`_label_margin`), which presentation mode grows with the text; a share of
#: the axis did not, and cut "merged output" to "merged outp".
OUTPUT_ROOM = 0.04
#: Width of a character of the chart's sans-serif font, as a share of its size
#: (generous: "m" and "w" are wider than the average).
_CHAR_WIDTH = 0.62
#: The output's mark (:data:`~explorer.marks.OUTPUT_MARK`) and each tile's own max
#: (:data:`~explorer.marks.TILE_MAX_MARK`): sizes and line widths (px).
OUTPUT_SIZE, OUTPUT_LINE = 16, 2.5
TILE_MAX_SIZE, TILE_MAX_LINE = 10, 1.5
#: The walk's label of the tokens before a sliding window.
OUTSIDE_WINDOW = "outside the window: not read"
#: What a split's colour means, in the legends and colour bars.
SPLIT_KEY = "colour = split"


def _split_colors(splits: Sequence[int]) -> dict[int, str]:
    """The colour of each split id in ``splits``: distinct palette colours up to
    :data:`MAX_SPLIT_LEGEND`, and past it a point of
    :data:`~explorer.style.SPLIT_COLORSCALE` by split id (neighbours alike, none repeated)."""
    ids = sorted({int(s) for s in splits})
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
                    colorbar=dict(title=colorbar_title(SPLIT_KEY), thickness=14,
                                  **integer_ticks(lo, hi, length_px))),
    ), **where)


def kernel_walk_figure(
    tiles, context_len: int, block_size: int, block_n: int, *, num_blocks: int | None = None,
    title: str = "The tiles the kernel walks", window_start: int = 0,
) -> go.Figure:
    """The chunks of ``block_n`` tokens the Triton kernel walks for one row, in order.

    One bar per tile (top to bottom in walk order) spanning the logical tokens it
    covers, cut into the physical blocks it reads (colour = physical block id, the
    scale of :func:`~explorer.cache.figures.block_table_figure`), each with its id
    written in it where 12 px text fits; the pale tail is the tile's masked lanes
    (past the context, past the split or padding). Each row is labelled with its
    split and tile, its hover adding its distinct blocks and block-table lookups
    (:mod:`explorer.kernel.walk_layout`: the margins hold the labels and colour bar at
    presentation size in either mode). Tiles of a shared-prefix pass (``pass``
    ``"prefix"``) are labelled ``prefix s`` and sit on a grey band. With a sliding
    window starting at ``window_start``, the tokens before it are a grey band
    named :data:`OUTSIDE_WINDOW` (never read; written across it where it fits), and
    the masked lanes of a tile before the window's start are drawn where they lie.

    Parameters
    ----------
    tiles : DataFrame
        :attr:`~explorer.kernel.trace.KernelTrace.tiles`.
    context_len, block_size, block_n : int

    Returns
    -------
    go.Figure
        Trace 0: ``"tokens read"`` horizontal bars (``base`` = first token,
        ``x`` = tokens, ``y`` = tile row, ``customdata[:, 0]`` = physical block, or
        the split when more segments than :data:`MAX_WALK_SEGMENTS`); trace 1:
        ``"masked lanes"``; with ``window_start``, then ``"masked before the
        window"`` (bars ending at the window's start) and :data:`OUTSIDE_WINDOW`
        (a filled band over ``[0, window_start)``, ``customdata`` = the skipped
        blocks); coloured by split with more than :data:`MAX_SPLIT_LEGEND` splits,
        the last trace carries the colour bar of split ids.
    """
    fig = go.Figure()
    if tiles is None or not len(tiles):
        return no_data_figure(fig, "This sequence has no cached tokens: the kernel's programs return at once.", title, 300)
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
    prefix = (t["pass"] == "prefix").to_numpy() if "pass" in t else np.zeros(n_tiles, bool)
    lanes = (t["valid_tokens"] + t["masked_lanes"]).to_numpy()
    labels = walk_labels(t, num_splits, prefix)
    # The prefix pass has its own tile size; name both when they differ.
    sizes = (f"{int(lanes[prefix][0])} (prefix pass) and {block_n}" if prefix.any() and int(lanes[prefix][0]) != block_n
             else f"{block_n}")
    subtitle = (f"{count(n_tiles, 'tile')} of {sizes} lanes, {count(num_splits, 'split')}, "
                f"{count(lookups, 'block-table lookup')} for {count(context_len, 'token')}; "
                + (BLOCK_KEY if per_block else SPLIT_KEY) + "; hatched = masked lanes"
                + ("; grey band = the prefix pass's tiles, each read once for its whole group" if prefix.any() else "")
                + (f"; grey before token {window_start:,} = {OUTSIDE_WINDOW}" if window_start else ""))
    height = int(min(900, max(sum(title_margins(subtitle)) + 170, 150 + 26 * min(n_tiles, 40) + (n_tiles > 40) * 200)))
    plot_height = plot_area_height(height, subtitle)
    row_px = plot_height / n_tiles
    x_end = int((t["token_end"] + t["masked_lanes"]).max())
    # White outlines between segments and gaps between rows, only where the bars
    # are thick enough to keep them (a 1 px outline swallows a 1 px segment).
    px_per_token = WALK_PLOT_PX / max(x_end, 1)
    thick_rows = row_px >= MIN_GAP_CELL_PX
    bargap = 0.25 if thick_rows else 0
    if per_block:
        seg = np.array(segments, dtype=np.int64).reshape(-1, 6)
        outline = thick_rows and 0 < len(seg) <= 400 and seg[:, 2].min() * px_per_token >= MIN_GAP_CELL_PX
        fig.add_trace(go.Bar(
            orientation="h", y=seg[:, 0], x=seg[:, 2], base=seg[:, 1], name="tokens read",
            marker=dict(color=seg[:, 3], colorscale=BLOCK_COLORSCALE, cmin=0, cmax=max(1, num_blocks - 1),
                        line=dict(color="white", width=1 if outline else 0),
                        colorbar=dict(title=colorbar_title(BLOCK_KEY), thickness=14,
                                      **integer_ticks(0, max(1, num_blocks - 1), colorbar_length_px(plot_height)))),
            # No font colour: Plotly picks black or white against each block's blue. Upright, in all or none.
            text=[str(p) for p in seg[:, 3]] if len(seg) <= MAX_WALK_TEXT and walk_ids_fit(
                row_px * (1 - bargap), seg[:, 2].min(initial=x_end) * px_per_token,
                len(str(seg[:, 3].max(initial=0)))) else None,
            textposition="inside", textangle=0, insidetextanchor="middle", textfont=dict(size=font_px("cell")),
            customdata=np.stack([seg[:, 3], seg[:, 1], seg[:, 1] + seg[:, 2] - 1, seg[:, 4], seg[:, 5],
                                 t["num_physical_blocks"].to_numpy()[seg[:, 0]], t["table_lookups"].to_numpy()[seg[:, 0]]],
                                axis=-1),
            hovertemplate="split %{customdata[3]}, tile %{customdata[4]}: blocks %{customdata[5]}, lookups %{customdata[6]}"
            "<br>tokens %{customdata[1]}–%{customdata[2]}<br>physical block %{customdata[0]}<extra></extra>",
        ))
    else:
        colors = _split_colors(t["split"])
        fig.add_trace(go.Bar(
            orientation="h", y=np.arange(n_tiles), x=(t["token_end"] - t["token_start"]).to_numpy(),
            base=t["token_start"].to_numpy(), name="tokens read",
            marker=dict(color=[colors[int(s)] for s in t["split"]], line=dict(width=0)),
            customdata=np.stack([t["split"].to_numpy(), t["token_start"].to_numpy(), t["token_end"].to_numpy() - 1,
                                 t["num_physical_blocks"].to_numpy(), t["table_lookups"].to_numpy()], axis=-1),
            hovertemplate="split %{customdata[0]}: blocks %{customdata[3]}, lookups %{customdata[4]}"
            "<br>tokens %{customdata[1]}–%{customdata[2]}"
            "<extra></extra>",
        ))
    masked = t["masked_lanes"].to_numpy()
    # A window's first tiles: the lanes before its start are masked at the head of the tile.
    lane_first = t["first_block"].to_numpy() * block_size + t["subtile"].to_numpy() * lanes
    head = np.clip(window_start - lane_first, 0, masked) if window_start else np.zeros(n_tiles, np.int64)
    fig.add_trace(go.Bar(
        orientation="h", y=np.arange(n_tiles), x=masked - head, base=t["token_end"].to_numpy(), name="masked lanes",
        legendgroup="masked",
        marker=dict(color=UNALLOCATED_COLOR, line=dict(color="#CBD5E1", width=1 if n_tiles <= 100 and thick_rows else 0),
                    pattern=dict(shape="/", fgcolor="#CBD5E1", size=6)),
        customdata=np.stack([masked, lanes], axis=-1),
        hovertemplate="%{customdata[0]} of %{customdata[1]} lanes masked<extra></extra>",
    ))
    x_start = 0
    if window_start:
        fig.add_trace(go.Bar(
            orientation="h", y=np.arange(n_tiles), x=head, base=t["token_start"].to_numpy() - head,
            name="masked before the window", legendgroup="masked", showlegend=False,  # the masked lanes' key
            hovertemplate="%{x} lanes before the window's start: masked<extra></extra>",
            marker=dict(color=UNALLOCATED_COLOR, line=dict(width=0), pattern=dict(shape="/", fgcolor="#CBD5E1", size=6)),
        ))
        skipped = window_start // block_size
        read_from = min(int((t["token_start"].to_numpy() - head).min()), window_start)  # the first lane drawn
        # From token 0: the axis broken where more tokens are skipped than read (the tiles would be slivers).
        x_start = window_band(fig, window_start, read_from, x_end, n_tiles, f"tokens 0–{window_start - 1} "
                              f"({count(skipped, 'block')}): outside the window, not read", OUTSIDE_WINDOW,
                              plot_height, skipped)
    if not per_block and num_splits > MAX_SPLIT_LEGEND:
        _split_colorbar(fig, t["split"], plot_height)
    step = max(1, math.ceil(n_tiles / 40))
    fig.update_yaxes(tickmode="array", tickvals=list(range(0, n_tiles, step)), ticktext=labels[::step],
                     autorange="reversed", title=None, showgrid=False, zeroline=False)
    # Split boundaries, unless so many that the dotted lines would hatch the chart.
    if plot_height / num_splits >= 10:
        for s in sorted(t["split"].unique())[1:]:
            first = int(np.flatnonzero(t["split"].to_numpy() == s)[0])
            fig.add_hline(y=first - 0.5, line=dict(color="#9CA3AF", width=1, dash="dot"))
    if prefix.any():
        last = int(np.flatnonzero(prefix)[-1])
        fig.add_shape(type="rect", xref="paper", x0=0, x1=1, y0=-0.5, y1=last + 0.5, line=dict(width=0),
                      fillcolor="rgba(100,116,139,0.14)", layer="below")
    apply_style(fig, title, subtitle, height=height)
    # Broken, the tiles' axis has the plot's right part (its ticks as far apart as on a whole one).
    ticks = integer_ticks(x_start, x_end, **({"plot_width": WALK_PLOT_PX * (1 - SKIPPED_SHARE - BREAK_GAP)}
                                             if x_start else {}))
    fig.update_layout(xaxis=dict(title="logical token position", rangemode="tozero", zeroline=False, **ticks,
                                 **({"range": [x_start, x_end]} if window_start else {})))
    if x_start:
        break_walk_axis(fig, x_start)
    # A block id too long for its segment is left out, not shrunk below legibility.
    fig.update_layout(barmode="overlay", bargap=bargap,
                      uniformtext=dict(minsize=font_px("cell"), mode="hide"))
    # The room of presentation mode's labels and colour bar in either mode: the plot keeps
    # its width when the text grows (at 18 px, "split 0 · tile 0: 2 blocks, 2 lookups" took
    # 35 px of it). Automargin stays, should a label be wider than estimated.
    return set_walk_margins(fig, labels, colorbar=per_block or num_splits > MAX_SPLIT_LEGEND,
                            colorbar_ids=num_blocks - 1 if per_block else int(t["split"].max()),
                            key=BLOCK_KEY if per_block else SPLIT_KEY)


def online_softmax_figure(tiles, final_error: float | None = None, *, l_final: float | None = None,
                          sink_term: float = 0.0) -> go.Figure:
    """The online softmax state after each tile, one line per split, against the
    tokens seen: the running max ``m`` (with each tile's own max), the normalizer
    ``l``, and the distance of the partial output ``acc / l`` to the final answer
    (and to the exact answer of its own split).

    All values in the kernel's base-2 units (scores times ``scale * log2(e)``).
    The error panel's axis is linear from zero: the trace computes in float64, so
    the last tile lands at round-off (1e-16), and a log axis running down to it
    flattened the whole approach into its top decade. The x axis runs on past the
    context to hold the output's label clear of the lines.

    Parameters
    ----------
    tiles : DataFrame
        :attr:`~explorer.kernel.trace.KernelTrace.tiles`.
    final_error : float, optional
        Max abs error of the final (merged) output against the reference, drawn
        as :data:`~explorer.marks.OUTPUT_MARK` at the end of the context.
    l_final, sink_term : float, optional
        With attention sinks: the finished row's denominator before the sink (on
        the common max) and the sink's term, drawn as a bracket up from ``l_final``
        at the end of the context, at least a readable height, labelled with its value
        (:func:`~explorer.kernel.option_figures.add_sink_bracket`).

    Returns
    -------
    go.Figure
        Per split: traces ``"split s"`` (its running max ``m``, and its legend entry: the colour
        is the split's in all three panels), ``"tile max (split s)"``,
        ``"l (split s)"``, ``"error vs final (split s)"``, ``"error vs split
        (split s)"`` (``x`` = ``token_end``; NaN errors are gaps); then
        ``"output"`` (its mark, ``y`` = ``final_error``) when it is given.
        A legend entry per split up to :data:`MAX_SPLIT_LEGEND` splits; past
        that none, and a last trace ``"split colours"`` carries a colour bar of
        split ids.
    """
    from plotly.subplots import make_subplots

    title = "Online softmax, tile by tile"
    if tiles is None or not len(tiles):
        return no_data_figure(go.Figure(), "No tiles: the sequence is empty.", title, 300)
    subtitle = (f"x axis: tokens seen; {SHAPE_WORDS[TILE_MAX_MARK.symbol]} = the tile's own max; "
                "dotted = distance to the split's own exact answer")
    if final_error is not None:
        subtitle += f"; {OUTPUT_MARK.words} = the output"
    panels = stacked_panels(3, subtitle, above_plot=24)  # 24: room for the panel titles
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=panels.spacing,
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
        name = f"{'prefix' if 'pass' in part and part['pass'].iloc[0] == 'prefix' else 'split'} {int(s)}"
        sfx = f" ({name})"
        who = f"{name}: " if num_splits > 1 else ""
        x = part["token_end"].to_numpy(float)
        fig.add_trace(go.Scatter(
            # Named by its split alone: its legend entry's colour is the split's in all three panels.
            x=x, y=part["m"].to_numpy(float), name=name, mode="lines+markers", line=dict(color=color, shape="hv", width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=legend,
            customdata=np.stack([part["tile"].to_numpy(), part["alpha"].to_numpy(float)], axis=-1),
            hovertemplate=who + "after tile %{customdata[0]} (tokens < %{x:,}): m = %{y:" + TRACE_D3 + "}"
            "<br>rescale α = 2^(m_old − m) = %{customdata[1]:" + RATIO_D3 + "}<extra></extra>",
        ), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=x, y=part["tile_max"].to_numpy(float), name="tile max" + sfx, mode="markers",
            marker=dict(size=TILE_MAX_SIZE, color=color, symbol=TILE_MAX_MARK.symbol,
                        line=dict(color=color, width=TILE_MAX_LINE)), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "tile max %{y:" + TRACE_D3 + "}<extra></extra>",
        ), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=x, y=part["l"].to_numpy(float), name="l" + sfx, mode="lines+markers", line=dict(color=color, width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "l = %{y:" + TRACE_D3 + "}<extra></extra>",
        ), row=2, col=1)
        err = part["err_vs_row"].to_numpy(float)
        fig.add_trace(go.Scatter(
            x=x, y=err, name="error vs final" + sfx, mode="lines+markers", line=dict(color=color, width=2),
            marker=dict(size=6, color=color), legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "vs the final answer: %{y:" + RATIO_D3 + "}<extra></extra>",
        ), row=3, col=1)
        err_split = part["err_vs_split"].to_numpy(float)
        fig.add_trace(go.Scatter(
            x=x, y=err_split, name="error vs split" + sfx, mode="lines", line=dict(color=color, width=1.2, dash="dot"),
            legendgroup=f"s{s}", showlegend=False,
            hovertemplate=who + "vs this split's exact answer: %{y:" + RATIO_D3 + "}<extra></extra>",
        ), row=3, col=1)
    x_end = float(tiles["token_end"].max())
    label = "merged output" if num_splits > 1 else "output"
    if final_error is not None:
        merged = num_splits > 1
        # The label goes right of the mark, past the context where no line runs
        # (above or left of it, it sat on the line coming down to the answer).
        fig.add_trace(go.Scatter(
            x=[x_end], y=[float(final_error)], name="output",
            mode="markers+text", marker=dict(symbol=OUTPUT_MARK.symbol, size=OUTPUT_SIZE, color=OUTPUT_MARK.fill,
                                             line=dict(color=OUTPUT_MARK.line, width=OUTPUT_LINE)),
            text=[label], textposition="middle right", textfont=dict(size=font_px("label")),
            cliponaxis=False,
            hovertemplate=("after the merge" if merged else "the output") + ": %{y:" + RATIO_D3 + "} from the full softmax"
            "<extra></extra>", showlegend=False,
        ), row=3, col=1)
    if num_splits > MAX_SPLIT_LEGEND:
        _split_colorbar(fig, tiles["split"], plot_area_height(panels.height, subtitle, 24), row=1, col=1)
    if legend:
        legend_key(fig, SPLIT_KEY)
    apply_style(fig, title, subtitle, height=panels.height, above_plot=24)
    fig.update_layout(showlegend=legend)
    if legend:  # the figure taller by the rows its legend takes (a second row at 1280 px took 8 px of each panel)
        fit_legend(fig)
    if final_error is not None:
        fig.update_layout(margin=dict(r=_label_margin(label)))
    fig.update_annotations(font=dict(size=font_px("body")), x=0, xanchor="left")
    # From zero (one tile alone would otherwise get an axis of 39.5 to 40.5 tokens),
    # and on past the context by half the output's mark when there is one.
    # From a window's start: the tokens before it are not seen.
    left = float(tiles["token_start"].min())
    right = x_end + (x_end - left) * OUTPUT_ROOM if final_error is not None else x_end
    ticks = integer_ticks(left, x_end)
    if final_error is not None and ticks["tickmode"] == "auto":
        # Whole-number ticks over the context only: none out in the label's room.
        span = x_end - left
        step = next(m * 10 ** e for e in range(int(math.log10(max(span, 1))) + 1) for m in (1, 2, 5)
                    if span / (m * 10 ** e) <= 7)
        ticks = dict(tickmode="array", tickvals=list(range(math.ceil(left / step) * step, int(x_end) + 1, step)),
                     tickformat=",d")
    fig.update_xaxes(rangemode="tozero", range=[left, right], **ticks)
    fig.update_xaxes(title="tokens seen (end of tile)", ticklabelstandoff=8, row=3, col=1)  # clear of the mark at 0
    # Spelled out: a rotated one-letter "l" read as a dash.
    fig.update_yaxes(title="running max m", row=1, col=1)
    fig.update_yaxes(title="running sum l", rangemode="tozero", row=2, col=1)
    if sink_term > 0 and l_final is not None:  # the layout final: the bracket's least height is in px
        add_sink_bracket(fig, x_end, l_final, sink_term, float(tiles["l"].max()))
    errors = np.concatenate([tiles["err_vs_row"].to_numpy(float), tiles["err_vs_split"].to_numpy(float),
                             [float(final_error)] if final_error is not None else []])
    errors = errors[np.isfinite(errors)]
    top = float(errors.max()) if len(errors) and errors.max() > 0 else 1.0
    fig.update_yaxes(title="max abs error", type="linear", range=[0, top * L_HEADROOM], row=3, col=1)
    return fig


def _label_margin(label: str) -> int:
    """Right margin (px) that holds the output's ``label`` right of its mark at the
    end of the axis: the mark's other half, Plotly's gap and the text, at presentation
    mode's size in either mode (or the current one if larger), so that the plot is no
    narrower in presentation mode (it lost 49 px to this label's growth, issue 27)."""
    size = font_px("label") / presentation_scale() * max(presentation_scale(), PRESENTATION_SCALE)
    return math.ceil((OUTPUT_SIZE + OUTPUT_LINE) / 2 + 6 + len(label) * size * _CHAR_WIDTH) + 4


#: The merge's left panel's title, which names the dotted line.
MERGE_MAX_TITLE = "m per split (dotted: max m)"


def merge_panel_px() -> float:
    """Pixels across one panel of :func:`split_merge_figure` at 1280 px now (:func:`~explorer.kernel.merge_layout.panel_px`)."""
    return panel_px(presentation_scale(), PRESENTATION_SCALE)


def split_merge_figure(splits, *, sink_m: float | None = None, sink_share: float = 0.0) -> go.Figure:
    """The split-K (flash-decoding) merge: each split's final running max ``m``, and
    its share of the softmax mass after rescaling, ``w·l / Σ w·l`` with
    ``w = 2^(m − max m)``. With attention sinks, a last bar ``"sink"``: its logit
    ``sink_m`` (log2 units) and its share of the mass, ``sink_share``.

    Returns
    -------
    go.Figure
        Trace 0: bars ``"m"`` (one per split, ``x`` = split label); trace 1: bars
        ``"share"`` (percent) on the second panel; ``customdata`` holds
        ``(l, weight, first token, last token)``.
    """
    from plotly.subplots import make_subplots

    # MERGE_GAP between the panels: the right panel's tick labels and axis title.
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=MERGE_GAP,
                        subplot_titles=(MERGE_MAX_TITLE, "Share after the merge"))
    n = len(splits)
    prefix = (splits["pass"] == "prefix").to_numpy() if "pass" in splits else np.zeros(n, bool)
    x = [f"{'prefix' if p else 'split'} {int(s)}" for s, p in zip(splits["split"], prefix)]
    palette = _split_colors(splits["split"])
    colors = [palette[int(s)] for s in splits["split"]]
    m = splits["m"].to_numpy(float)
    share = 100 * splits["share"].to_numpy(float)
    custom = np.stack([splits["l"].to_numpy(float), splits["weight"].to_numpy(float),
                       splits["token_start"].to_numpy(), splits["token_end"].to_numpy() - 1], axis=-1)
    if sink_m is not None:  # the sink's term: one more logit in the denominator, with no value
        x, colors, n = [*x, "sink"], [*colors, SINK_COLOR], n + 1
        custom = np.vstack([custom, [math.nan, 2.0 ** (sink_m - float(m.max())), -1, -1]])
        m, share = np.append(m, sink_m), np.append(share, 100 * sink_share)
    m_text, share_text = [sig3(v) for v in m], [format_percent(v / 100) for v in share]
    # Values above the bars, every one, where they fit a bar's slot at the size of now, drawn
    # whole (constraintext="none": uniformtext hid what was wider than its bar);
    # the hover has them otherwise.
    slot = merge_panel_px() / max(n, 1)

    def fits(texts: list[str]) -> bool:
        return n <= 16 and all(value_label_px(t, font_px("cell")) <= slot for t in texts)

    m_text, share_text = (texts if fits(texts) else None for texts in (m_text, share_text))
    outlined = n <= 16  # thin bars get no outline
    fig.add_trace(go.Bar(
        x=x, y=m, name="m", marker=dict(color=colors, line=dict(width=0.5 if outlined else 0)), customdata=custom,
        text=m_text, textposition="outside", cliponaxis=False, constraintext="none",
        hovertemplate="%{x} (tokens %{customdata[2]}–%{customdata[3]})<br>m = %{y:" + TRACE_D3 + "}, l = %{customdata[0]:" + TRACE_D3 + "}"
        "<br>merge weight w = 2^(m − max m) = %{customdata[1]:" + RATIO_D3 + "}<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        x=x, y=share, name="share", marker=dict(color=colors, line=dict(width=0.5 if outlined else 0)),
        customdata=custom,
        text=share_text, textposition="outside", cliponaxis=False, constraintext="none",
        hovertemplate="%{x}: %{y:" + SIG3_D3 + "}% of Σ w·l<br>w = %{customdata[1]:" + RATIO_D3 + "}, l = %{customdata[0]:" + TRACE_D3 + "}<extra></extra>",
    ), row=1, col=2)
    subtitle = ("out = Σ w·acc / Σ w·l with w = 2^(m − max m); each split rescaled to the common max"
                if sink_m is None else "out = Σ w·acc / (Σ w·l + 2^(sink − max m)): the sink joins the denominator")
    apply_style(fig, "Merging the splits", subtitle, height=400, above_plot=16)  # + the panel titles
    fig.update_layout(showlegend=False, uniformtext=dict(minsize=font_px("cell"), mode="hide"))
    fig.update_annotations(font=dict(size=font_px("body")))
    lo, hi = (float(m.min()), float(m.max())) if n else (0.0, 1.0)
    pad = max(1.0, 0.25 * (hi - lo))
    bottom = min(0.0, lo - pad)
    # Headroom for the largest bar's value label, as a share of the panel.
    room = min((font_px("cell") * 1.3 + scaled(8)) / plot_area_height(400, subtitle), 0.5)
    top = max(hi + pad, (hi - room * bottom) / (1 - room))
    fig.update_yaxes(ticklabelstandoff=tick_gap_px(font_px("tick")))  # the first bar's value label clear of them
    fig.update_yaxes(title="m (log2 units)", range=[bottom, top], row=1, col=1)
    fig.update_yaxes(title="% of softmax mass", range=[0, max([*share, 1]) * 1.2], row=1, col=2)
    if n:
        # The max m, dotted: named in the panel's title, above the plot (a label on the line, or
        # "max" over the largest bar's value, sat on that bar's value label).
        label_data = (font_px("cell") * 1.3 + scaled(4)) * (top - bottom) / plot_area_height(400, subtitle, 16)
        line = float(m[: len(splits)].max())
        for x0, x1 in max_line_segments(m, line, m_text, slot, label_data, font_px("cell"), scaled(4)):
            fig.add_shape(type="line", x0=x0, x1=x1, y0=line, y1=line, xref="x", yref="y", layer="below",
                          line=dict(color="#111827", dash="dot", width=1), name="max m")
    numbered = n <= 16 and all(re.fullmatch(r"split \d+|sink", t) for t in x)
    for col in (1, 2):  # upright: Plotly tilted "split 0", "split 1", ... at presentation size
        if numbered:  # the split's number under its bar, "split" once under the axis: one row at any size
            fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[t.removeprefix("split ") for t in x],
                             tickangle=0, title="split", row=1, col=col)
        else:  # thinned to the panel as drawn (plot_width_px takes the grown margins off again)
            set_category_ticks(fig, x, merge_panel_px() + (presentation_scale() - 1) * (MARGIN_L + MARGIN_R),
                               row=1, col=col)
    return fig
