"""The draft tokens' tile figure of Inside the kernel (issue 25): one row per
(token, head) of the tile, or per token past MAX_MASK_ROWS; each cell's state as
the trace's mask says; the traced row outlined; the own-token rings on the
staircase; its colours: greys for what is masked, the kept scores a colour no
other meaning on the page has."""

from __future__ import annotations

import numpy as np
import pytest
from test_colour_language import apart, colours

from explorer import limits, style
from explorer.kernel import mask_figures
from explorer.kernel.tile_rows import MASK_STATES
from explorer.marks import Mark
from explorer.kernel.view import launch_plan, trace_row
from explorer.style import presentation
from paged_attention import DecodeConfig, build_decode_inputs


def drafts_trace(num_heads=4, num_kv_heads=2, query_lens=4, context=37, token=1, head=1, **config):
    config = DecodeConfig(batch_size=1, context_lens=context, query_lens=query_lens, num_heads=num_heads,
                          num_kv_heads=num_kv_heads, head_dim=16, block_size=8, dtype="float32", **config)
    tables = build_decode_inputs(config).block_tables.numpy()
    plan = launch_plan(config, tables, block_n=16)
    return trace_row(config, tables, 0, head, plan=plan, token=token)


def test_each_row_of_the_tile_and_each_cell_as_the_trace_masks_it():
    trace = drafts_trace()
    fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=37, token=1, head=1)
    heat = fig.data[0]
    assert list(heat.y) == ["t0 · h0", "t0 · h1", "t1 · h0", "t1 · h1", "t2 · h0", "t2 · h1", "t3 · h0", "t3 · h1"]
    tiles = heat.meta["tiles"]
    cells = trace.mask[[(s, t) in tiles for s, t in zip(trace.mask["split"], trace.mask["tile"])]]
    assert set(cells.loc[cells["position"] >= 37, "state"]) == {"unloaded"}
    for row, label in enumerate(heat.y):
        token = int(label[1])
        mine = cells[cells["token"] == token].set_index("position")["state"]
        assert [MASK_STATES[int(c)] for c in heat.z[row]] == [mine[p] for p in heat.x]
    # the staircase: each token keeps its own position and masks the later ones
    for row, label in enumerate(heat.y):
        token = int(label[1])
        states = dict(zip(heat.x, (MASK_STATES[int(c)] for c in heat.z[row])))
        assert states[33 + token] == "scored" and all(states[p] == "causal" for p in range(34 + token, 37))
    diamonds = next(t for t in fig.data if t.name == "own token")
    assert list(diamonds.x) == [33, 33, 34, 34, 35, 35, 36, 36]
    (outline,) = [s for s in fig.layout.shapes if s.name == "traced row"]
    assert (outline.y0, outline.y1) == (2.5, 3.5)  # t1 · h1
    legend = {t.meta["state"]: t.marker.color for t in fig.data if t.meta and "state" in t.meta}
    assert legend == {s: mask_figures.STATE_COLORS[s] for s in ("scored", "causal")}
    assert list(heat.x) == list(range(32, 37))  # the tile's lanes 37..39 lie past the context
    assert "its lanes 37–39 past the context left out" in fig.layout.title.subtitle.text.replace("<br>", " ")
    # The subtitle names the mark as drawn (issue 27: "◆", filled black, over a white diamond).
    subtitle = fig.layout.title.subtitle.text.replace("<br>", " ")
    drawn = Mark("own token", diamonds.marker.symbol, diamonds.marker.color, diamonds.marker.line.color)
    assert f"{drawn.words} = the row's own token" in subtitle and "◆" not in subtitle
    assert " × " in subtitle and " x " not in subtitle  # review 3: "×" as in the cards and tables
    assert drawn.words == "black ring"


def test_no_mark_symbol_means_two_things_across_pages():
    """Issue 27, review 3: the causal mask's "row's own token" was a white diamond outlined in black,
    the Block table and Serving pages' "shared block" mark. Every mark of every page is in
    :data:`~explorer.marks.ALL_MARKS`, each with a symbol of its own, and the mask draws its own."""
    from explorer import marks

    defined = [v for v in vars(marks).values() if isinstance(v, marks.Mark)]
    defined += [m for v in vars(marks).values() if isinstance(v, dict) for m in v.values() if isinstance(m, marks.Mark)]
    assert set(defined) == set(marks.ALL_MARKS)
    meanings: dict[str, set[str]] = {}
    for mark in marks.ALL_MARKS:
        meanings.setdefault(mark.symbol, set()).add(mark.name)
    trace = drafts_trace()
    fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=37, token=1, head=1)
    (own,) = [t for t in fig.data if t.name == "own token"]
    meanings.setdefault(own.marker.symbol, set()).add(own.name)
    assert all(len(names) == 1 for names in meanings.values()), meanings
    assert (own.marker.symbol, own.marker.color, own.marker.line.color) == (
        marks.OWN_TOKEN_MARK.symbol, marks.OWN_TOKEN_MARK.fill, marks.OWN_TOKEN_MARK.line)


def test_a_window_masks_cells_before_each_rows_window():
    trace = drafts_trace(query_lens=6, context=40, token=0, window=3)
    fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=40, token=0, head=1)
    states = {MASK_STATES[int(c)] for c in np.ravel(fig.data[0].z)}
    assert {"scored", "causal", "window"} <= states
    assert "window" in [t.meta["state"] for t in fig.data if t.meta and "state" in t.meta]


def test_many_rows_are_drawn_one_per_token():
    trace = drafts_trace(num_heads=16, num_kv_heads=1, query_lens=4, head=9, token=2)
    assert len(trace.tile_rows) == 64 > limits.MAX_MASK_ROWS
    fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=37, token=2, head=9)
    assert list(fig.data[0].y) == [f"t{t} · h0–15" for t in range(4)]
    (outline,) = [s for s in fig.layout.shapes if s.name == "traced row"]
    assert (outline.y0, outline.y1) == (1.5, 2.5)


def test_one_new_token_has_no_mask_to_draw():
    trace = drafts_trace(query_lens=1, token=0)
    assert trace.tile_rows is None
    fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=37, token=0, head=1)
    assert not fig.data and "One new token" in fig.layout.annotations[0].text


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_the_figure_builds_in_presentation_mode(scale):
    trace = drafts_trace()
    with presentation(scale):
        fig = mask_figures.tile_mask_figure(trace.tile_rows, trace.mask, context_len=37, token=1, head=1)
    assert fig.layout.height >= 150 and fig.layout.xaxis.title.text == "position in the context"


def test_masked_cells_are_grey_and_kept_scores_have_their_own_colour():
    def chroma(color: str) -> int:
        r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
        return max(r, g, b) - min(r, g, b)

    masked = [mask_figures.STATE_COLORS[s] for s in ("causal", "window", "unloaded")]
    assert all(chroma(c) <= 40 for c in masked)
    scored = colours([mask_figures.STATE_COLORS["scored"]])
    for palette in (style.BLOCK_COLORSCALE, style.SPLIT_COLORS, style.SPLIT_COLORSCALE, style.LAUNCH_ORDER_COLORSCALE):
        assert apart(scored, colours(palette)) >= 20
