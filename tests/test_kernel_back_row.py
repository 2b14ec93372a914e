"""Inside the kernel as the back row of a room sees it (issue 27, back row): the online softmax's marks
registered with one meaning each, a small sink's bracket readable and labelled with its value, an empty
sequence visible in the work list, and a window's skipped tokens drawn from token 0."""

from __future__ import annotations

import itertools

import pytest
from test_figures_kernel import kernel_trace, option_trace

from explorer import marks, style
from explorer.formatting import sig3
from explorer.kernel import figures as kernel_figures
from explorer.kernel import mask_figures, option_figures, work_list_figures
from explorer.kernel import view as kernel_view
from explorer.kernel.walk_layout import BREAK_GAP, SKIPPED_SHARE
from explorer.panel_layout import panel_heights
from paged_attention import DecodeConfig, build_decode_inputs

SCALES = [1.0, style.PRESENTATION_SCALE]


def _drawn_symbols(fig) -> dict[str, set[str]]:
    """Each marker symbol ``fig`` draws (squares: colour keys and click targets, not marks), with the
    names of the traces drawing it."""
    drawn: dict[str, set[str]] = {}
    for t in fig.data:
        if t.type == "scatter" and "markers" in (t.mode or "") and t.marker.symbol not in (None, "square"):
            drawn.setdefault(t.marker.symbol, set()).add(t.name)
    return drawn


def test_the_output_and_the_tiles_own_max_are_registered_marks_of_their_own():
    """The output was a black star (the new draft tokens' shape) outside the registry, and each tile's
    own max a ring (the causal mask's own token). Both are marks of ALL_MARKS, no symbol of which another
    mark takes, and the online softmax draws them so and names them by their words; no mark of the page
    shares a symbol with another meaning (the softmax, the causal mask, the walk, the work list)."""
    assert {marks.OUTPUT_MARK, marks.TILE_MAX_MARK} <= set(marks.ALL_MARKS)
    assert len({m.symbol for m in marks.ALL_MARKS}) == len(marks.ALL_MARKS)
    config, _, plan, trace = kernel_trace(num_splits=3, block_n=32)
    softmax = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
    (output,) = [t for t in softmax.data if t.name == "output"]
    assert (output.marker.symbol, output.marker.color, output.marker.line.color) == (
        marks.OUTPUT_MARK.symbol, marks.OUTPUT_MARK.fill, marks.OUTPUT_MARK.line)
    assert output.marker.line.width >= 2  # a line-only mark: its outline is all there is of it
    tile_max = [t for t in softmax.data if t.name.startswith("tile max")]
    assert len(tile_max) == 3 and {t.marker.symbol for t in tile_max} == {marks.TILE_MAX_MARK.symbol}
    assert all(t.marker.line.color == t.marker.color and t.marker.line.width > 0 for t in tile_max)  # its split's
    subtitle = softmax.layout.title.subtitle.text.replace("<br>", " ")
    assert f"{marks.OUTPUT_MARK.words} = the output" in subtitle
    assert f"{marks.SHAPE_WORDS[marks.TILE_MAX_MARK.symbol]} = the tile's own max" in subtitle
    # One meaning per symbol across the page's charts, each registered symbol drawn as its mark.
    drafts = DecodeConfig(batch_size=2, context_lens=(37, 20), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32", query_lens=3)
    d_tables = build_decode_inputs(drafts).block_tables.numpy()
    d_trace = kernel_view.trace_row(drafts, d_tables, 0, 1, token=1,
                                    plan=kernel_view.launch_plan(drafts, d_tables, num_splits=1, block_n=16))
    mask = mask_figures.tile_mask_figure(d_trace.tile_rows, d_trace.mask, context_len=37, token=1, head=1)
    walk = kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks)
    work = work_list_figures.work_list_figure(kernel_view.work_list(plan, config.lengths), config.lengths, 16)
    meanings: dict[str, set[str]] = {}
    for fig in (softmax, mask, walk, work):
        for symbol, names in _drawn_symbols(fig).items():
            meanings.setdefault(symbol, set()).update(
                "tile max" if name.startswith("tile max") else name for name in names)
    assert all(len(names) == 1 for names in meanings.values()), meanings
    registered = {m.symbol: m for m in marks.ALL_MARKS}
    assert meanings[marks.OUTPUT_MARK.symbol] == {"output"} and meanings[marks.OWN_TOKEN_MARK.symbol] == {"own token"}
    assert marks.NEW_TOKEN_MARK.symbol not in meanings  # the star is the new tokens' alone
    assert set(meanings) <= set(registered) | {"line-ns"}  # line-ns: the work list's empty programs


@pytest.mark.parametrize("scale", SCALES)
def test_a_small_sink_term_gets_a_bracket_of_readable_height_labelled_with_its_value(scale):
    """The sink's bracket was drawn to scale: a term of 0.0096 on an l axis of 45 was a bracket of a
    fraction of a px, lost between its caps at 1280x720. It is now at least SINK_MIN_PX tall (grown with
    the scale) inside the l panel, its label giving the term's value and saying it is not to scale, the
    hover the term itself; a term as tall as that stays to scale."""
    _, _, trace = option_trace(sinks=True)
    with style.presentation(scale):
        fig = kernel_figures.online_softmax_figure(trace.tiles, trace.max_abs_error, l_final=trace.l_final,
                                                   sink_term=trace.sink_term)
        large = kernel_figures.online_softmax_figure(trace.tiles, trace.max_abs_error, l_final=trace.l_final,
                                                     sink_term=trace.l_final)
        least, label_px = option_figures.SINK_MIN_PX * scale, style.font_px("label")
    for f, term, enlarged in ((fig, trace.sink_term, True), (large, trace.l_final, False)):
        (sink,) = [t for t in f.data if t.name == "sink"]
        lo, hi = f.layout.yaxis2.range
        panel = panel_heights(f)[1]
        low, high = sink.y
        assert low == pytest.approx(trace.l_final) and high <= hi  # the whole bracket inside its panel
        assert (high - low) / (hi - lo) * panel >= least - 1e-6
        assert sink.customdata[0][1] == pytest.approx(term)  # the hover's term is the true one
        (label,) = [a for a in f.layout.annotations if a.name == "sink label"]
        assert sig3(term) in label.text and ("not to scale" in label.text) == enlarged
        assert label.font.size >= label_px and label.y == high
        caps = [s for s in f.layout.shapes if s.name == "sink cap"]
        assert sorted(c.y0 for c in caps) == pytest.approx([low, high])
        assert all(c.xsizemode == "pixel" and c.x1 - c.x0 >= option_figures.SINK_CAP_PX * scale - 1e-6 for c in caps)
    assert trace.sink_term / (fig.layout.yaxis2.range[1]) * panel_heights(fig)[1] < 1  # the case: under 1 px
    (sink,) = [t for t in large.data if t.name == "sink"]
    assert sink.y[1] - sink.y[0] == pytest.approx(trace.l_final)  # tall enough: to scale


@pytest.mark.parametrize("scale", SCALES)
def test_a_sequence_of_no_tokens_is_drawn_in_the_work_list_with_its_words(scale):
    """A sequence of 0 tokens was a zero-width sliver at block 0 of its row. Its row holds a
    cross-hatched bar at least EMPTY_BAR_PX wide (grown with the scale) on the narrowest plot the page
    draws, and "0 tokens: no work" right of it; a sequence with tokens has neither."""
    config = DecodeConfig(batch_size=3, context_lens=(0, 40, 97), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32")
    tables = build_decode_inputs(config).block_tables.numpy()
    plan = kernel_view.launch_plan(config, tables)
    with style.presentation(scale):
        fig = work_list_figures.work_list_figure(kernel_view.work_list(plan, config.lengths), config.lengths, 16,
                                                 highlight=2)
    (bar,) = [t for t in fig.data if t.name == "empty sequences"]
    (words,) = [t for t in fig.data if t.name == "empty sequence label"]
    assert list(bar.y) == [0] and list(bar.base) == [0] and list(bar.customdata) == [0]
    lo, hi = fig.layout.xaxis.range
    plot_px = style.FULL_FIGURE_PX - fig.layout.margin.l - fig.layout.margin.r
    assert bar.x[0] / (hi - lo) * plot_px >= work_list_figures.EMPTY_BAR_PX * scale - 1e-6
    assert bar.marker.pattern.shape == "x"  # not the prefix pass's "/"
    assert list(words.text) == [work_list_figures.EMPTY_LABEL] and list(words.y) == [0]
    assert words.x[0] > bar.x[0] and words.textposition == "middle right" and words.textfont.size >= style.font_px(
        "label") / style.presentation_scale() * scale
    drawn = [t for t in fig.data if t.name == "empty programs"]
    assert all(0 not in list(t.y) for t in drawn)  # the empty sequence's program is the bar's, once
    plain = work_list_figures.work_list_figure(
        kernel_view.work_list(plan, (5, 40, 97)), (5, 40, 97), 16)
    assert all(t.name not in ("empty sequences", "empty sequence label") for t in plain.data)


@pytest.mark.parametrize("scale", SCALES)
def test_the_walk_with_a_window_draws_the_skipped_tokens_from_token_0(scale):
    """With a window, the walk's axis began near the window (180 of 300 tokens here, the window from 255):
    the skipped tokens before that were not drawn. It now starts at token 0: with more tokens skipped
    than read, broken, the tokens before the first read lane grey (and named) in a left panel with its
    tick at 0, the break's mark between, the tiles to scale on the rest of the plot, wider than before."""
    config, plan, trace = option_trace(window=45)  # reads tokens 255..299 from block 15 (token 240)
    with style.presentation(scale):
        fig = kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks,
                                                window_start=trace.window_start)
    left, main = fig.layout.xaxis2, fig.layout.xaxis
    assert tuple(left.range) == (0, 240) and list(left.tickvals) == [0] and tuple(main.range) == (240, 304)
    assert left.domain[1] + BREAK_GAP <= main.domain[0] and main.domain[1] == 1
    assert main.domain[1] - main.domain[0] >= 1 - SKIPPED_SHARE - BREAK_GAP - 1e-9 > 0.5
    assert fig.layout.yaxis.anchor == "free" and fig.layout.yaxis.position == 0  # row labels left of both
    (before,) = [t for t in fig.data if t.xaxis == "x2"]
    (band,) = [t for t in fig.data if t.name == kernel_figures.OUTSIDE_WINDOW]
    assert (min(before.x), max(before.x)) == (0, 240) and before.fill == "toself" and before.showlegend is False
    assert (min(band.x), max(band.x)) == (0, 255)  # on through the main panel to the window's start
    assert before.fillcolor == band.fillcolor and list(before.customdata) == list(band.customdata)
    (mark,) = [a for a in fig.layout.annotations if a.name == "axis break"]
    assert left.domain[1] < mark.x < main.domain[0]
    ticks = list(main.tickvals)
    assert ticks and min(ticks) >= 240 and all(b - a >= 10 for a, b in itertools.pairwise(ticks))
    # Few tokens skipped: one axis from 0, to scale.
    _, plan, short = option_trace(window=250)
    assert short.window_start < 300 - short.window_start
    with style.presentation(scale):
        whole = kernel_figures.kernel_walk_figure(short.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks,
                                                  window_start=short.window_start)
    assert whole.layout.xaxis.range[0] == 0 and "xaxis2" not in whole.layout
    assert not [t for t in whole.data if t.xaxis == "x2"]
    (band,) = [t for t in whole.data if t.name == kernel_figures.OUTSIDE_WINDOW]
    assert (min(band.x), max(band.x)) == (0, short.window_start)
