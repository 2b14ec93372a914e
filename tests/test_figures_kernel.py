"""Figures of the kernel trace: the walk over the blocks, the online softmax, the split merge."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from test_figures_style import _integer_ticks, _tiles

from explorer import formatting
from explorer.kernel import figures as kernel_figures
from explorer.kernel.view import launch_plan, trace_row
from paged_attention import DecodeConfig, build_decode_inputs


def kernel_trace(context_lens=(300, 97), block_size=16, **overrides):
    config = DecodeConfig(batch_size=len(context_lens), context_lens=context_lens, num_heads=4, num_kv_heads=2,
                          head_dim=16, block_size=block_size, dtype="float32", block_layout="shuffled")
    tables = build_decode_inputs(config).block_tables.numpy()
    plan = launch_plan(config, tables, **overrides)
    return config, tables, plan, trace_row(config, tables, 0, 1, plan=plan)


def test_kernel_walk_covers_every_token_once_in_its_physical_block():
    config, tables, plan, trace = kernel_trace(block_n=32, num_splits=3)
    fig = kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks)
    bars = fig.data[0]
    base, length = np.array(bars.base).astype(int), np.array(bars.x).astype(int)
    phys = np.array(bars.customdata)[:, 0].astype(int)
    covered = np.concatenate([np.arange(b, b + n) for b, n in zip(base, length)])
    assert np.array_equal(np.sort(covered), np.arange(300))  # every token read once
    assert np.array_equal(phys, tables[0][base // 16])  # from the block the table names
    assert len(base) == -(-300 // 16)  # one segment per block: 19 table lookups
    assert list(np.array(bars.y)) == list(np.repeat(trace.tiles.index, trace.tiles["num_physical_blocks"]))
    masked = fig.data[1]
    assert list(masked.x) == trace.tiles["masked_lanes"].tolist()
    assert "3 splits" in fig.layout.title.subtitle.text and "19 block-table lookups" in fig.layout.title.subtitle.text
    assert len(fig.layout.shapes) == 2  # two split boundaries
    assert fig.layout.yaxis.ticktext[0] == "split 0 · tile 0"  # short; the detail is in the hover
    first = trace.tiles.iloc[0]
    assert list(bars.customdata[0])[5:] == [first["num_physical_blocks"], first["table_lookups"]]
    assert "blocks %{customdata[5]}, lookups %{customdata[6]}" in bars.hovertemplate


def test_kernel_walk_of_a_long_row_draws_one_bar_per_tile():
    tiles = pd.DataFrame({
        "split": 0, "tile": range(3000), "subtile": 0, "first_block": range(3000), "end_block": range(1, 3001),
        "token_start": range(0, 3000), "token_end": range(1, 3001), "valid_tokens": 1, "masked_lanes": 15,
        "physical_blocks": [(i,) for i in range(3000)], "num_physical_blocks": 1, "table_lookups": 1,
    })
    fig = kernel_figures.kernel_walk_figure(tiles, 3000, 1, 16)
    assert len(fig.data[0].x) == 3000 and len(fig.layout.yaxis.tickvals) <= 41
    assert "colour = split" in fig.layout.title.subtitle.text


def test_kernel_walk_of_an_empty_row():
    fig = kernel_figures.kernel_walk_figure(pd.DataFrame(), 0, 16, 64)
    assert "no cached tokens" in fig.layout.annotations[0].text


def test_online_softmax_figure_follows_the_trace():
    _, _, _, trace = kernel_trace(block_n=16, num_splits=2)
    fig = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
    by_name = {t.name: t for t in fig.data}
    for s, part in trace.tiles.groupby("split"):
        assert list(by_name[f"split {s}"].y) == part["m"].tolist()
        assert list(by_name[f"l (split {s})"].y) == part["l"].tolist()
        assert list(by_name[f"split {s}"].x) == part["token_end"].tolist()
        err = np.array(by_name[f"error vs split (split {s})"].y)
        assert err[-1] < 1e-12 and err.min() >= 0  # the true distance: round-off at the split's end
    star = by_name["output"]
    assert list(star.x) == [300] and star.y[0] < 1e-12 and star.text[0] == "merged output"
    m0 = np.array(by_name["split 0"].y)
    assert np.all(np.diff(m0) >= 0)  # a running max never falls
    assert fig.layout.yaxis3.type == "linear" and fig.layout.yaxis3.range[0] == 0


def _share_of_panel(axis, low: float, high: float, data) -> float:
    """How much of a panel's height the values from ``low`` to ``high`` span, on its
    range or, unset, on Plotly's autorange of ``data``."""
    positive = [v for v in data if v > 0]
    if axis.type == "log":
        lo, hi = axis.range or (np.log10(min(positive)), np.log10(max(positive)))
        return (np.log10(high) - np.log10(low)) / (hi - lo)
    lo, hi = axis.range or (min(0, min(data)), max(data))
    return (high - low) / (hi - lo)


@pytest.mark.parametrize("num_splits", [1, 2])
def test_online_softmax_reads_without_overlaps_and_shows_the_approach(num_splits):
    """The output's label sat on the line coming down to it; the rotated title "l"
    read as a dash; the error axis ran to the last tile's 1e-16 round-off, so the
    approach from 0.8 to 0.035 filled a tenth of the panel and looked flat."""
    _, _, _, trace = kernel_trace(block_n=16, num_splits=num_splits)
    fig = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
    star = next(t for t in fig.data if t.name == "output")
    x_end = float(trace.tiles["token_end"].max())
    # The label sits right of the star, where no line runs, in the right margin (test_figures_presentation.py).
    assert star.textposition == "middle right"
    assert all(max(t.x) <= x_end for t in fig.data if t.x is not None and t.name != "output")
    assert fig.layout.xaxis3.range[1] > x_end
    assert max(fig.layout.xaxis3.tickvals) <= x_end  # no ticks out in the label's room
    # Spelled-out y titles.
    assert fig.layout.yaxis2.title.text == "running sum l" and fig.layout.yaxis.title.text == "running max m"
    # The approach (every tile before the last of the split that ends the context) fills the panel.
    last = trace.tiles[trace.tiles["split"] == trace.tiles["split"].max()]
    approach = last["err_vs_row"].to_numpy(float)[:-1]
    errors = [t for t in fig.data if t.name.startswith("error vs")]
    data = [float(v) for t in errors for v in t.y] + [float(star.y[0])]
    assert _share_of_panel(fig.layout.yaxis3, approach.min(), approach.max(), data) >= 0.4


def test_split_merge_shares_sum_to_one_hundred():
    _, _, _, trace = kernel_trace(num_splits=3)
    fig = kernel_figures.split_merge_figure(trace.splits)
    m, share = fig.data
    assert list(m.y) == trace.splits["m"].tolist()
    assert sum(share.y) == pytest.approx(100)
    weights = np.array(share.customdata)[:, 1]
    assert weights.max() == pytest.approx(1.0)  # the split holding the max keeps weight 1
    assert list(m.x) == [f"split {s}" for s in trace.splits["split"]]


def test_online_softmax_of_one_tile_counts_tokens_from_zero():
    tiles = _tiles(1, 1)
    tiles["token_end"] = 40
    fig = kernel_figures.online_softmax_figure(tiles, final_error=1e-16)
    assert fig.layout.xaxis3.rangemode == "tozero" and fig.layout.xaxis3.range[0] == 0  # not 39.5 ... 40.5 tokens
    assert _integer_ticks(fig.layout.xaxis3)


def test_online_softmax_of_many_splits_has_a_colour_bar_not_a_legend():
    fig = kernel_figures.online_softmax_figure(_tiles(157), final_error=1e-9)
    assert fig.layout.showlegend is False
    assert not [t for t in fig.data if t.showlegend]
    (bar,) = [t for t in fig.data if t.name == "split colours"]
    assert bar.marker.showscale and (bar.marker.cmin, bar.marker.cmax) == (0, 156)
    assert _integer_ticks(bar.marker.colorbar)
    m = [t for t in fig.data if re.fullmatch(r"split \d+", t.name)]
    assert len({t.line.color for t in m}) == 157  # no colour repeats
    assert "split 3" in fig.data[5 * 3].hovertemplate


def test_online_softmax_of_few_splits_has_one_legend_entry_each():
    fig = kernel_figures.online_softmax_figure(_tiles(3), final_error=1e-9)
    # Review 3 (issue 27): "m (split 0)" named one panel's line; the colour is the split's in all three.
    assert [t.name for t in fig.data if t.showlegend] == ["split 0", "split 1", "split 2"]
    assert fig.layout.showlegend is True
    assert not [t for t in fig.data if t.name == "split colours"]


def test_split_merge_and_kernel_walk_of_many_splits():
    splits = pd.DataFrame({"split": range(157), "m": np.linspace(0, 3, 157), "l": 1.0, "weight": 1.0,
                           "share": np.full(157, 1 / 157), "token_start": np.arange(157) * 32,
                           "token_end": np.arange(1, 158) * 32})
    fig = kernel_figures.split_merge_figure(splits)
    assert len(set(fig.data[0].marker.color)) == 157 and fig.data[0].text is None
    assert fig.layout.showlegend is False
    walk = kernel_figures.kernel_walk_figure(_tiles(157, 16), 157 * 16 * 16, 16, 16)  # > MAX_WALK_SEGMENTS: colour = split
    assert "colour = split" in walk.layout.title.subtitle.text
    assert len(set(walk.data[0].marker.color)) == 157
    (bar,) = [t for t in walk.data if t.name == "split colours"]
    assert _integer_ticks(bar.marker.colorbar)


def _bar_label_tops(fig, m, plot_px: float) -> list[float]:
    """The top of each outside value label of the merge's bars of heights ``m``, in
    the left panel's data units: one line of its font above the bar's end (from zero
    for a bar below it)."""
    lo, hi = fig.layout.yaxis.range
    size = fig.data[0].textfont.size or fig.layout.font.size
    line = 1.3 * size * (hi - lo) / plot_px
    return [max(v, 0) + line for v in m]


@pytest.mark.parametrize("presentation", [False, True])
def test_split_merge_keeps_the_max_note_off_the_bar_labels(presentation):
    """Review at 1280x720: the "max" note sat on the 3.66 bar's label (first a label
    on the dotted line, then a "max" line over the largest bar's value); and in
    presentation mode "% of softmax mass" (the right panel's axis title) lay on the
    left panel's last bar. The note is the left panel's title, above the plot area;
    the bars' labels are values only, inside the panel."""
    from explorer import style

    _, _, _, trace = kernel_trace(num_splits=4)
    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        fig = kernel_figures.split_merge_figure(trace.splits)
    m = trace.splits["m"].to_numpy(float)
    assert all("max" not in t for t in fig.data[0].text)
    assert list(fig.data[0].text) == [formatting.sig3(v) for v in m]
    notes = [a for a in fig.layout.annotations if "max" in a.text]
    assert [a.text.replace("<br>", " ") for a in notes] == [kernel_figures.MERGE_MAX_TITLE]
    (note,) = notes
    # The note hangs above the left panel's plot area; no annotation sits inside a panel.
    assert note.yref == "paper" and note.yanchor == "bottom" and note.y >= fig.layout.yaxis.domain[1]
    assert note.xref == "paper" and note.x <= fig.layout.xaxis.domain[1]
    assert not [a for a in fig.layout.annotations if a.yref not in ("paper", None)]
    # Every bar's value label ends inside the panel: below the note.
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    lo, hi = fig.layout.yaxis.range
    assert max(_bar_label_tops(fig, m, plot_px)) <= hi
    # Between the panels (the plot as drawn at 1280 px): the right axis' tick
    # labels ("30"), title line and Plotly's standoffs.
    share = fig.layout.xaxis.domain[1] - fig.layout.xaxis.domain[0]
    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        width = kernel_figures.merge_panel_px() / share
    gap = (fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]) * width
    size = fig.layout.yaxis2.title.font.size or fig.layout.font.size
    tick = fig.layout.yaxis2.tickfont.size or fig.layout.font.size
    assert gap >= 1.3 * size + 2 * 0.6 * tick + 20, gap


@pytest.mark.parametrize("presentation", [False, True])
def test_split_merge_value_labels_stay_off_the_max_line(presentation):
    """Review at 1280x720 (issue 27): "3.62", the label over a bar just under the
    max (3.66), sat on the dotted max-m line; then it went inside its bar, and review 3
    read labels some inside, some above as two rules. Every label is above its bar
    (``textposition="outside"``, on both panels) and the dotted line breaks where it
    would cross one."""
    from explorer import style
    from explorer.kernel.merge_layout import value_label_px

    m = np.array([3.62, 1.71, 3.66, 2.71])  # the page's 4 splits at 1280: two bars near the max
    splits = pd.DataFrame({"split": range(4), "m": m, "l": [10.6, 19.6, 12.0, 8.0], "weight": 2.0 ** (m - m.max()),
                           "share": [0.341, 0.168, 0.321, 0.170], "token_start": np.arange(4) * 64,
                           "token_end": np.arange(1, 5) * 64})
    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        fig = kernel_figures.split_merge_figure(splits)
        slot, cell = kernel_figures.merge_panel_px() / len(m), style.font_px("cell")
    assert [t.textposition for t in fig.data] == ["outside", "outside"]
    segments = [(s.x0, s.x1) for s in fig.layout.shapes if s.name == "max m"]
    assert segments and all(s.y0 == s.y1 == m.max() for s in fig.layout.shapes if s.name == "max m")
    assert min(x0 for x0, _ in segments) == -0.5 and max(x1 for _, x1 in segments) == len(m) - 0.5
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    crossed = 0
    for i, (v, top, text) in enumerate(zip(m, _bar_label_tops(fig, m, plot_px), fig.data[0].text)):
        if v < m.max() < top:  # its label's line crosses the max: no dotted segment under it
            crossed += 1
            half = value_label_px(text, cell) / 2 / slot
            assert all(x1 <= i - half or x0 >= i + half for x0, x1 in segments), (v, segments)
    assert crossed >= 1


def option_trace(block_n=16, num_splits=3, **options):
    config = DecodeConfig(batch_size=2, context_lens=(300, 97), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32", block_layout="shuffled", **options)
    tables = build_decode_inputs(config).block_tables.numpy()
    plan = launch_plan(config, tables, block_n=block_n, num_splits=num_splits)
    return config, plan, trace_row(config, tables, 0, 1, plan=plan)


def test_kernel_walk_greys_the_blocks_before_a_window():
    config, plan, trace = option_trace(window=45)  # tokens 255..299: blocks 15..18, the first from slot 15
    assert trace.window_start == 255 and trace.first_block == 15
    fig = kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks,
                                            window_start=trace.window_start)
    names = [t.name for t in fig.data]
    band = fig.data[names.index(kernel_figures.OUTSIDE_WINDOW)]
    assert max(band.x) == 255 and min(band.x) == 0 and band.customdata[0] == 15
    bars = fig.data[0]
    assert min(bars.base) == 255 and sum(bars.x) == 45
    # The first tile's 15 lanes before token 255 are drawn before it, the rest of the masked lanes after.
    head = fig.data[names.index("masked before the window")]
    assert list(head.x)[0] == 15 and sum(head.x) == 15 and list(head.x[0] + head.base[:1]) == [255]
    assert sum(fig.data[1].x) + sum(head.x) == trace.tiles["masked_lanes"].sum()
    assert any(a.text and "not read" in a.text for a in fig.layout.annotations)
    assert fig.layout.xaxis.range[0] <= 15 * 16 and "outside the window" in fig.layout.title.subtitle.text


def test_logits_figure_draws_raw_and_capped_logits_under_the_cap():
    from explorer.kernel.option_figures import logits_figure

    _, _, trace = option_trace(soft_cap=0.5)
    fig = logits_figure(trace.logits, 0.5)
    raw, capped = fig.data
    assert raw.name == "raw logit" and capped.name == "soft-capped" and len(capped.y) == 300
    assert np.abs(np.array(capped.y)).max() <= 0.5 < np.abs(np.array(raw.y)).max()
    assert sorted(s.y0 for s in fig.layout.shapes) == [-0.5, 0.5]
    assert len(logits_figure(trace.logits, None).data) == 1


@pytest.mark.parametrize("raw, words", [([0.1, -0.2], "0 raw logits lie past the cap"),
                                        ([0.1, 0.9], "1 raw logit lies past the cap"),
                                        ([2.0, -0.9, 0.7], "3 raw logits lie past the cap")])
def test_logits_subtitle_counts_the_raw_logits_past_the_cap(raw, words):
    """Review 3 (issue 27): the subtitle read "0 raw lie past the cap", the noun missing."""
    from explorer.kernel.option_figures import logits_figure

    raw = np.array(raw)
    logits = pd.DataFrame({"token": np.arange(len(raw)), "raw": raw, "capped": 0.5 * np.tanh(raw / 0.5)})
    subtitle = logits_figure(logits, 0.5).layout.title.subtitle.text.replace("<br>", " ")
    assert subtitle.endswith(words), subtitle


def test_the_sink_joins_the_denominator_and_the_merge():
    _, _, trace = option_trace(sinks=True)
    assert trace.sink is not None and trace.sink_term > 0
    fig = kernel_figures.online_softmax_figure(trace.tiles, trace.max_abs_error, l_final=trace.l_final,
                                               sink_term=trace.sink_term)
    (sink,) = [t for t in fig.data if t.name == "sink"]
    # From l_final up, by the sink's term or more (tests/test_kernel_back_row.py): the term itself in the hover.
    assert sink.y[0] == pytest.approx(trace.l_final) and sink.y[1] >= trace.l_final + trace.sink_term
    assert list(sink.customdata[0]) == pytest.approx([trace.l_final, trace.sink_term])
    # One cap, one width at both ends (a small diamond under a large one read as a glitch, issue 27 review 3).
    caps = [s for s in fig.layout.shapes if s.name == "sink cap"]
    assert len({c.x1 - c.x0 for c in caps}) == 1 and {c.line.color for c in caps} == {kernel_figures.SINK_COLOR}
    merge = kernel_figures.split_merge_figure(trace.splits, sink_m=trace.sink_m, sink_share=trace.sink_share)
    assert list(merge.data[0].x)[-1] == "sink" and merge.data[0].y[-1] == pytest.approx(trace.sink_m)
    assert sum(merge.data[1].y) == pytest.approx(100) and "sink" in merge.layout.title.subtitle.text
    plain = kernel_figures.online_softmax_figure(option_trace()[2].tiles)
    assert all(t.name != "sink" for t in plain.data)


@pytest.mark.parametrize("presentation", [False, True])
def test_logits_cap_labels_sit_inside_the_plot_with_one_minus_sign(presentation):
    """The soft-cap's labels ran into the y tick labels ("+cap = +50" into "60", at the
    plot's left edge) and "−cap = -50" mixed U+2212 with a hyphen; now each sits inside
    the plot at its line's right end, beyond the line, within the y range, and writes
    Plotly's minus sign."""
    from explorer import style
    from explorer.kernel.option_figures import HEIGHT, logits_figure

    _, _, trace = option_trace(soft_cap=50.0)
    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        fig = logits_figure(trace.logits, 50.0)
        plot_px = style.plot_area_height(HEIGHT, fig.layout.title.subtitle.text.replace("<br>", " "))
        label_px = style.LINE_HEIGHT * style.font_px("label")
    labels = {a.text: a for a in fig.layout.annotations}
    assert set(labels) == {"+cap = 50", "\u2212cap = \u221250"}
    assert not any("-" in text for text in labels)
    low, high = fig.layout.yaxis.range
    per_px = (high - low) / plot_px
    for a in labels.values():
        assert (a.xref, a.x, a.xanchor) == ("paper", 1, "right")  # at the right end, away from the tick labels
        up = a.y > 0
        assert a.yanchor == ("bottom" if up else "top") and (a.yshift > 0) == up  # beyond its line
        edge = a.y + (a.yshift + label_px) * per_px * (1 if up else -1)
        assert low <= edge <= high, (a.text, edge, low, high)  # whole within the plot


@pytest.mark.parametrize("per_block", [True, False])
def test_kernel_walk_keeps_its_plot_width_in_presentation_mode(per_block):
    """At 1280 px the walk's plot lost 35 px in presentation mode (307 to 272): its
    long row labels and colour bar grew at 18 px into it. Its margins now hold them at
    presentation size in both modes: the same in both, and each wide enough for the
    labels and the colour bar's title at the size of its mode."""
    from explorer import style
    from explorer.cache.cell_style import BLOCK_KEY
    from explorer.kernel.walk_layout import walk_margins

    config, _, plan, trace = kernel_trace(block_n=16, num_splits=3)
    tiles = trace.tiles
    if not per_block:  # more segments than MAX_WALK_SEGMENTS: bars coloured by split
        tiles = _tiles(3000, 1, 1)
    figs = {}
    for scale in (1, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            figs[scale] = fig = kernel_figures.kernel_walk_figure(tiles, int(tiles["token_end"].max()), 16, 16,
                                                                 num_blocks=config.num_blocks)
            tick = style.font_px("tick")
        labels = list(fig.layout.yaxis.ticktext)
        assert fig.layout.yaxis.tickfont.size == tick
        assert fig.layout.margin.l >= max(map(len, labels)) * style.CHAR_WIDTH * tick + 8, scale
        if per_block:
            assert fig.layout.margin.r >= len("physical") * style.CHAR_WIDTH * tick + 20, scale
    normal, big = figs[1].layout, figs[style.PRESENTATION_SCALE].layout
    assert (big.margin.l, big.margin.r) == (normal.margin.l, normal.margin.r)  # the same plot width
    assert list(big.yaxis.ticktext) == list(normal.yaxis.ticktext)
    if per_block:  # the plot of WALK_PLOT_PX fits the 577 px chart (3,000 splits have longer labels)
        assert normal.margin.l + normal.margin.r <= 577 - kernel_figures.WALK_PLOT_PX
    assert walk_margins(["tile 0"], colorbar=False)["r"] < walk_margins(["tile 0"], colorbar=True, key=BLOCK_KEY)["r"]


def _windowed_walk(window_start: int):
    """The reviewer's walk (issue 27): a window of 1 and 16 draft tokens, sequence 0 of 236 tokens as 2 splits of
    one 16-lane tile, the window from token 220; ``window_start`` 0 draws the same tiles without the window."""
    config = DecodeConfig(batch_size=4, context_lens=(236, 114, 57, 205), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32", window=1, query_lens=16)
    tables = build_decode_inputs(config).block_tables.numpy()
    trace = trace_row(config, tables, 0, 0, plan=launch_plan(config, tables, num_splits=2, block_n=16))
    assert trace.window_start == 220 and len(trace.tiles) == 2
    return kernel_figures.kernel_walk_figure(trace.tiles, 236, 16, 16, num_blocks=config.num_blocks,
                                             window_start=window_start and trace.window_start)


@pytest.mark.parametrize("presentation", [False, True])
def test_kernel_walk_with_a_window_keeps_its_plot_height_and_a_level_label(presentation):
    """Review at 1280x720 (issue 27): with a window the walk's plot was 132 px of a 406 px chart, its four legend
    entries and three subtitle lines taking the height, and "outside the window: not read" stood on its side in the
    grey band. The masked lanes before the window share the masked lanes' entry, the figure grows by the legend rows
    its bottom margin lacks (as fit_legend plans them), so the plot is as tall as without a window; the band's label
    is level, written where it fits the band (in normal mode here), else left to the legend and subtitle."""
    from explorer import style
    from explorer.legend_layout import axis_block_px, legend_grid

    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        fig, plain = _windowed_walk(220), _windowed_walk(0)
        grid = legend_grid([t.name for t in fig.data if t.showlegend is not False],
                           kernel_figures.WALK_PLOT_PX + (style.presentation_scale() - 1) * (style.MARGIN_L + style.MARGIN_R))
        axis = axis_block_px()
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["tokens read", "masked lanes", kernel_figures.OUTSIDE_WINDOW]
    (head,) = [t for t in fig.data if t.name == "masked before the window"]
    assert head.legendgroup == fig.data[1].legendgroup == "masked"
    assert fig.layout.margin.b >= grid.height_px + axis and fig.layout.legend.entrywidth == math.ceil(grid.text_px)

    def plot_px(f):
        return f.layout.height - f.layout.margin.t - f.layout.margin.b

    assert plot_px(fig) >= plot_px(plain) - 1 and plot_px(fig) >= 170 * (1.5 if presentation else 1) - 1
    labels = [a for a in fig.layout.annotations if a.text and "not read" in a.text]
    assert all(a.textangle in (0, None) for a in labels)
    assert len(labels) == (0 if presentation else 1)  # 18 px text does not fit the band (~105 px) with its margins
    if labels:  # level, in the middle of the band's part on the axis it is written on (the broken axis' left one)
        axis = fig.layout.xaxis2 if labels[0].xref == "x2" else fig.layout.xaxis
        (lo, hi), (d0, d1) = axis.range, axis.domain or (0, 1)
        band_px = (min(hi, 220) - lo) / (hi - lo) * (d1 - d0) * kernel_figures.WALK_PLOT_PX
        widest = max(len(line) for line in labels[0].text.split("<br>"))
        assert labels[0].x == (lo + min(hi, 220)) / 2 and band_px >= widest * style.LABEL_CHAR_WIDTH * 12


@pytest.mark.parametrize("presentation", [False, True])
def test_kernel_walk_and_merge_leave_a_gap_that_grows_with_the_tick_labels(presentation):
    """Review at 1280x720 in presentation mode (issue 27): the walk's row label "split 0 · tile 0" touched its first
    tile and the merge's "34.1%" over its first bar touched the y tick "35". The y tick labels of both stand off
    their plot by TICK_GAP of their size, which the walk's left margin holds; a merge value label, no wider than its
    bar's slot (centred in it), then ends at least that far from the tick labels."""
    from explorer import style
    from explorer.kernel.merge_layout import TICK_GAP, value_label_px

    _, _, plan, trace = kernel_trace(num_splits=4, block_n=16)
    with style.presentation(style.PRESENTATION_SCALE if presentation else 1):
        walk = kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n)
        merge = kernel_figures.split_merge_figure(trace.splits)
        tick, cell, slot = style.font_px("tick"), style.font_px("cell"), kernel_figures.merge_panel_px() / len(trace.splits)
    gap = TICK_GAP * tick
    assert walk.layout.yaxis.ticklabelstandoff >= gap and walk.layout.yaxis.tickfont.size == tick
    present_tick = tick / (style.PRESENTATION_SCALE if presentation else 1) * style.PRESENTATION_SCALE
    label_px = max(map(len, walk.layout.yaxis.ticktext)) * style.CHAR_WIDTH * present_tick
    assert walk.layout.margin.l >= label_px + TICK_GAP * present_tick  # the gap at presentation size, in both modes
    for axis in (merge.layout.yaxis, merge.layout.yaxis2):
        assert axis.ticklabelstandoff >= gap
    first = merge.data[1].text[0]  # the right panel's first value label, over its first bar
    assert first.endswith("%") and value_label_px(first, cell) <= slot
    assert (slot - value_label_px(first, cell)) / 2 + merge.layout.yaxis2.ticklabelstandoff >= gap
