"""Figures of the serving simulation: the pool at a step, the timeline, the block-size trade-off, the animation."""

from dataclasses import replace

import numpy as np
import pytest

from explorer import limits, style
from explorer.cache import cell_style, pool_figures, sampling, sharing_figures
from explorer.cache import figures as cache_figures
from explorer.formatting import MS_D3, line_count
from explorer.marks import Mark
from explorer.serving import figures as serving_figures
from explorer.serving import table_figures, tradeoff_figures, view
from explorer.serving.history import simulate
from explorer.serving.tradeoff import block_size_tradeoff
from explorer.serving.traffic import LengthDist, ServingConfig

SERVING = ServingConfig(num_blocks=48, block_size=4, max_batch_size=5, arrival_rate=0.6,
                        prompt_len=LengthDist("long-tail", 2, 40), output_len=LengthDist("uniform", 2, 20), seed=3)


@pytest.fixture(scope="module")
def history():
    return simulate(SERVING, 60)


def test_serving_pool_marks_what_the_step_changed(history):
    step = int(history.metrics["recycled"].to_numpy().argmax())
    record = history.records[step]
    c = history.changes(step)
    taken, freed, recycled = np.array(c.taken), np.array(c.freed), np.array(c.recycled)
    owner = record.pool_owner()
    fig = serving_figures.serving_pool_figure(owner, record.block_tables(), record.context_lens, 4, step=step,
                                      taken=taken, freed=freed, recycled=recycled)
    assert fig.layout.title.text == f"Physical block pool after step {step}"
    z = np.array(fig.data[0].z, dtype=float).ravel()[: len(owner)]
    assert np.array_equal(z == 0, owner == -1)
    _, n_cols, _ = sampling.pool_grid_shape(len(owner))
    marks = {t.name: t for t in fig.data}
    got = {int(b) for b in np.array(marks["recycled"].customdata)[:, 0]}
    assert got == set(recycled.tolist()) and len(got) > 0
    fresh = marks["taken"]
    fresh_ids = set() if fresh.customdata is None else {int(b) for b in np.array(fresh.customdata)[:, 0]}
    assert fresh_ids == set(taken.tolist()) - got
    b = min(got)  # marks are drawn in block order
    # In its cell's top-left quarter (issue 27: a corner clear of the centred id; its box: test_marks_clear_of_ids).
    assert b % n_cols - 0.5 < marks["recycled"].x[0] < b % n_cols and b // n_cols - 0.5 < marks["recycled"].y[0] < b // n_cols
    hover = np.array(fig.data[0].customdata).ravel()
    assert f"sequence {owner[b]}" in hover[b]


#: The serving page's CPU defaults: a 64-block pool, 5 rows of 14, six sequences running at the busiest step.
PAGE_POOL = ServingConfig(num_blocks=64, block_size=8, max_batch_size=6, arrival_rate=0.2,
                          prompt_len=LengthDist("long-tail", 4, 96), output_len=LengthDist("long-tail", 4, 48), seed=0)


def _legend(fig):
    return [t.name for t in fig.data if t.type != "heatmap" and t.showlegend is not False and t.name]


def _drawn_plot_height(fig, width_px=380):
    """The plot area's height as Plotly draws it in a column ``width_px`` wide: the
    legend hangs from the figure's bottom and pushes the margin when it needs more
    than the layout gives. A legend of several traceorder "grouped" legend groups
    (the click targets form one) stacks one entry a row."""
    layout, names = fig.layout, _legend(fig)
    grouped = layout.legend.traceorder in (None, "grouped") and any(t.legendgroup for t in fig.data)
    rows = len(names) if grouped else serving_figures.legend_rows(names, width_px, layout.legend.font.size)
    rows += line_count(layout.legend.title.text)  # the key ("colour = sequence") on rows of its own
    legend_px = rows * 1.75 * layout.legend.font.size
    return layout.height - layout.margin.t - max(layout.margin.b, 62 + legend_px), legend_px


@pytest.mark.parametrize("config, color_by", [
    (PAGE_POOL, "sequence"),
    (replace(PAGE_POOL, num_blocks=96, system_prompt=20, samples=3, arrival_rate=0.3), "sequence"),
    (replace(PAGE_POOL, num_blocks=96, system_prompt=20, samples=3, arrival_rate=0.3), "reference count"),
    (replace(PAGE_POOL, num_blocks=1024, block_size=16, max_batch_size=32, arrival_rate=0.28), "sequence"),
])
@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_serving_pool_is_readable_at_1280_px(config, color_by, scale):
    """Issue 27: the pool was a strip (5 rows in ~40 px) under a one-column legend taller than it, with a
    scroll bar. Its plot area now grows with its rows (at least MIN_POOL_PLOT_PX), the legend names a few
    sequences and folds the rest, lies in rows under the grid within the figure's margin (never pushing
    into the grid, never half the figure, which is where Plotly scrolls it), and cell numbers are >= 12 px.
    Presentation mode (review at 1280x720): the legend stood one entry a row, 389 px beside a 300 px grid,
    and the block ids were left out of 24 px cells that hold two 18 px digits."""
    history = simulate(config, 150)
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax())
    record, c = history.records[step], history.changes(step)
    assert record.num_running > serving_figures.POOL_LEGEND_SEQUENCES  # more sequences than the legend names
    with style.presentation(scale):
        fig = serving_figures.serving_pool_figure(
            record.pool_owner(), record.block_tables(), record.context_lens, config.block_size, step=step,
            taken=c.taken, freed=c.freed, recycled=c.recycled, copied=c.copied, revived=c.revived,
            color_by=color_by, sharing=config.shares, seq_ids=record.seq_ids)
        column = style.plot_width_px(380)  # the pool's plot at 1280 px, in this mode
        cell_px = style.font_px("cell")
        n_rows, n_cols, _ = sampling.pool_grid_shape(config.num_blocks)
        plot_px, legend_px = _drawn_plot_height(fig, column)
        ids_fit = cell_style.cell_text_fits(n_rows, n_cols, 2, 380, plot_px)
    assert plot_px >= scale * max(serving_figures.MIN_POOL_PLOT_PX, min(28 * n_rows, serving_figures.MAX_POOL_PLOT_PX))
    assert legend_px < fig.layout.height / 2 and legend_px <= plot_px  # never taller than the grid
    names = _legend(fig)
    assert len(names) <= 12 and max(map(len, names)) <= serving_figures.LEGEND_NAME_CHARS
    # Two entries a row in the narrowest column, at this mode's legend size.
    font = fig.layout.legend.font.size
    assert font == serving_figures.POOL_LEGEND_FONT * scale >= (12 if scale == 1 else 18)
    assert serving_figures.legend_rows(names, column, font) <= -(-len(names) // 2)
    named = [n for n in names if n.startswith("sequence ")]
    assert len(named) <= serving_figures.POOL_LEGEND_SEQUENCES
    if color_by == "sequence":
        assert f"+{record.num_running - len(named)} sequences" in names
    heat = fig.data[0]
    assert heat.textfont.size == cell_px
    if config.num_blocks == 64:  # 14 columns of two-digit ids: 2 x 0.56 x 18 px + 2 <= 340 / 14 in either mode
        assert heat.texttemplate == "%{text}" and ids_fit
    elif config.num_blocks == 1024:  # aggregated cells: no ids
        assert heat.texttemplate is None


def _page_tables(history, step, num_blocks, color_by, **kwargs):
    """The running block tables as the page draws them (sharing on)."""
    record = history.records[step]
    refs = np.bincount(record.blocks, minlength=num_blocks)
    return table_figures.running_tables_figure(record.block_tables(), record.context_lens, history.config.block_size,
                                               num_blocks, seq_ids=record.seq_ids, color_by=color_by,
                                               ref_counts=refs, **kwargs)


@pytest.mark.parametrize("color_by", serving_figures.POOL_COLOR_MODES)
def test_serving_block_tables_take_the_pools_colouring_and_say_so(color_by):
    """Issue 27: with sharing, the pool by reference count reused the sequence palette's blue, amber and red
    beside the block table coloured by sequence; then, the pool in reference-count oranges, the tables stayed in
    sequence colours under "colour = sequence, as in the pool", a key the pool no longer gave. Built as the page
    builds them, the tables take the pool's colouring: each cell the pool's colour of its block, the key true."""
    from test_colour_language import colours, legend_colours

    config = replace(PAGE_POOL, num_blocks=96, system_prompt=20, samples=3, arrival_rate=0.3)
    history = simulate(config, 120)
    step = int(history.metrics["copied"].to_numpy().argmax())
    record = history.records[step]
    c = history.changes(step)
    pool = serving_figures.serving_pool_figure(
        record.pool_owner(), record.block_tables(), record.context_lens, config.block_size, step=step,
        taken=c.taken, freed=c.freed, recycled=c.recycled, copied=c.copied, revived=c.revived,
        seq_ids=record.seq_ids, color_by=color_by, sharing=True)
    table = _page_tables(history, step, config.num_blocks, color_by)
    subtitle = table.layout.title.subtitle.text.replace("<br>", " ")
    assert table_figures.TABLE_KEYS[color_by] in subtitle and subtitle.count("colour = ") == 1
    squares = colours(pool.data[0].colorscale, legend_colours(pool, lambda t: True))
    assert colours(table.data[0].colorscale) <= squares | colours(style.SEQUENCE_COLORS)
    if color_by == "sequence":  # one meaning, one palette: the pool's sequences in the table's colours
        assert table.data[0].colorscale == pool.data[0].colorscale
    else:  # every cell in the pool's colour level of its block, the levels named under the key
        levels = np.array(pool.data[0].z, dtype=float).ravel()
        z, blocks = np.array(table.data[0].z, dtype=float), np.array(table.data[0].customdata)[..., 4]
        held = ~np.isnan(z)
        assert held.any() and (z[held] > 1).any()
        assert np.array_equal(z[held], levels[blocks[held]])
        assert table.data[0].colorscale == pool.data[0].colorscale
        assert table.layout.legend.title.text == cell_style.POOL_REF_COUNT_KEY
        named = legend_colours(table, lambda t: bool(t.meta and "level" in t.meta))
        assert colours([sharing_figures.REF_LEVEL_COLORS[int(v) - 1] for v in np.unique(z[held])]) <= colours(named)
        # The levels the pool's legend lists, present at this step or not (issue 27: the two legends disagreed).
        assert colours(named) == colours(legend_colours(pool, lambda t: bool(t.meta and "level" in t.meta)))
        assert "colour = sequence," not in subtitle
    assert pool.layout.legend.title.text and "colour = " in pool.layout.title.subtitle.text
    assert ("colour in the pool" in view.table_caption(True, color_by)) == (color_by == "sequence")


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_serving_shared_block_diamonds_grow_with_the_cell_text(scale):
    """Issue 27: the shared-block diamonds were about 4 px in presentation mode (a share of cells 9 px wide),
    their white fill lost in their outline, the legend's a black diamond under a caption saying white. They
    are sized with the cell text of now, white inside a dark outline as the caption says. A later review
    found the 7 x scale least size covering the ids (and the next cell) in columns about 15 px wider than
    their id: the mark now fits its cell's corner with a margin, clear of the id
    (tests/test_marks_clear_of_ids.py), as large as that room holds and at least 2.5 px (presentation mode's
    two-digit ids fill its narrow columns, leaving a thin band above them)."""
    config = replace(PAGE_POOL, num_blocks=64, system_prompt=32, samples=3, arrival_rate=0.2)
    history = simulate(config, 120)
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax())
    with style.presentation(scale):
        table = _page_tables(history, step, config.num_blocks, "sequence")
        text_px = style.font_px("cell")
    marks = next(t for t in table.data if t.name == "shared block (2+ sequences)")
    assert len(marks.x) > 0
    assert 2.5 <= marks.marker.size <= 0.75 * text_px  # was 3 px; at most the cell text's share
    assert marks.marker.size - 2 * marks.marker.line.width >= 0.6 * marks.marker.size  # the white shows
    assert (marks.marker.color, marks.marker.line.color) == ("#FFFFFF", "#111827")
    assert marks.marker.symbol == "diamond"
    assert "white diamond outlined in black" in view.table_caption(True, "sequence")


def test_serving_pool_aggregated_has_no_step_marks():
    owner = np.full(limits.MAX_POOL_CELLS * 2, -1)
    owner[:10] = 1
    fig = serving_figures.serving_pool_figure(owner, np.array([np.arange(10)]), [40], 4, taken=[1, 2], freed=[20])
    assert not {"taken", "freed"} & {t.name for t in fig.data}


def test_serving_timeline(history):
    m = history.metrics
    fig = serving_figures.serving_timeline_figure(m, step=30, num_blocks=48)
    by_name = {t.name: t for t in fig.data if t.name}
    for name, col in (("blocks in use", "blocks_in_use"), ("wasted slots", "wasted_slots"),
                      ("running", "running"), ("waiting", "waiting")):
        assert list(by_name[name].y) == m[col].tolist()
    assert list(by_name["pool size"].y) == [48, 48]
    assert [s.x0 for s in fig.layout.shapes] == [30, 30, 30]
    assert by_name["wasted slots"].yaxis == "y2" and by_name["waiting"].yaxis == "y3"
    assert fig.layout.yaxis.title.text == "physical blocks"  # issue 27: every count says logical or physical


def test_tradeoff_figure():
    result = block_size_tradeoff(SERVING, (1, 4, 16), steps=40, pool_tokens=192)
    fig = tradeoff_figures.tradeoff_figure(result.table, current=4)
    bars = fig.data[0]
    assert list(bars.x) == ["1", "4", "16"]
    assert list(bars.y) == pytest.approx(100 * result.table["wasted_fraction"].to_numpy())
    assert bars.y[0] == 0  # one-token blocks waste nothing
    assert list(bars.marker.line.width) == [1, 2, 1]
    assert len(fig.data) == 1
    with_latency = tradeoff_figures.tradeoff_figure(result.table, {1: 0.5, 16: 0.2}, unit="ms")
    line = with_latency.data[1]
    assert list(line.x) == ["1", "16"] and list(line.y) == [0.5, 0.2] and line.yaxis == "y2"
    y2 = with_latency.layout.yaxis2
    assert y2.title.text == "Triton latency (ms)" and y2.range is None and y2.overlaying == "y"
    assert with_latency.layout.yaxis.title.text.startswith("wasted slots")
    assert "%{y:" + MS_D3 + "} ms" in line.hovertemplate  # three significant digits, as everywhere


@pytest.mark.parametrize("unit, factor", [(None, 1e-3), ("ms", 1.0), ("s", 1e-3)])
def test_tradeoff_latency_in_the_pages_one_unit(unit, factor):
    """The latency line in the unit the page writes every Triton latency in (issue 27:
    the step card said "1.16 s" while this axis read "Triton latency (ms)", 0 to 1,500);
    by default the latencies' own unit (1,200 and 1,500 ms: seconds)."""
    result = block_size_tradeoff(SERVING, (1, 4, 16), steps=40, pool_tokens=192)
    fig = tradeoff_figures.tradeoff_figure(result.table, {1: 1200.0, 16: 1500.0}, unit=unit)
    shown = unit or "s"
    line = fig.data[1]
    assert list(line.y) == pytest.approx([1200.0 * factor, 1500.0 * factor])
    assert fig.layout.yaxis2.title.text == f"Triton latency ({shown})"
    assert line.hovertemplate.split("<br>")[1].startswith("Triton decode %{y:" + MS_D3 + "} " + shown + " ")


def test_pool_animation(history):
    steps = [0, 20, 40, 59]
    owners = np.stack([history.records[s].pool_owner() for s in steps])
    fig = serving_figures.pool_animation_figure(owners, steps, 4)
    assert [f.name for f in fig.frames] == ["0", "20", "40", "59"]
    z = np.array(fig.frames[2].data[0].z, dtype=float).ravel()[: owners.shape[1]]
    assert np.array_equal(z == 0, owners[2] == -1)
    assert np.array_equal(z[owners[2] >= 0], 2 + owners[2][owners[2] >= 0] % len(style.SEQUENCE_COLORS))
    assert fig.layout.updatemenus[0].buttons[0].label == "▶ Play"
    with pytest.raises(ValueError, match="frames"):
        serving_figures.pool_animation_figure(np.zeros((limits.MAX_ANIMATION_FRAMES + 1, 8)), list(range(81)), 4)


def test_block_table_names_rows_by_seq_id():
    tables = np.array([[3, 4, -1], [0, -1, -1]])
    fig = cache_figures.block_table_figure(tables, [20, 5], 16, 8, seq_ids=[17, 42], title="Running")
    cd = np.array(fig.data[0].customdata)
    assert cd[1, 0, 0] == 42 and cd[0, 1, 0] == 17
    assert list(fig.layout.yaxis.ticktext) == ["17", "42"] and fig.layout.title.text == "Running"


def test_serving_block_table_of_long_sequences_is_not_empty():
    tables = np.arange(8 * 600).reshape(8, 600)
    fig = cache_figures.block_table_figure(tables, [600 * 4] * 8, 4, 16384, seq_ids=range(100, 108), title="Running")
    assert fig.data[0].xgap == 0


@pytest.mark.parametrize("num_steps, max_frames", [(120, 80), (1000, 80), (81, 80), (80, 80), (60, 4), (2, 80), (1, 80)])
def test_animation_steps_land_on_round_steps_with_first_and_last(num_steps, max_frames):
    """An even spread rounded to steps gave 0, 2, 3, 5, 6, ...: frames now fall on
    every k-th step (k = 1, 2, 5, 10, 20, 25, ...) from 0, then the last."""
    steps = serving_figures.animation_steps(num_steps, max_frames)
    assert steps[0] == 0 and steps[-1] == num_steps - 1 and len(steps) <= max_frames
    strides = set(np.diff(steps[:-1]).tolist())
    assert len(strides) <= 1 and strides <= {1, 2, 5, 10, 20, 25, 50}
    assert all(np.diff(steps) > 0)  # the last step once, after the last round one
    if num_steps == 120:
        assert steps == [*range(0, 120, 2), 119]


def test_pool_animation_controls_axes_and_legend(history):
    """The slider's "step 0" sat under the Pause button ("tep 0"); the grid had no
    axis titles and no legend."""
    steps = [0, 20, 40, 59]
    owners = np.stack([history.records[s].pool_owner() for s in steps])
    fig = serving_figures.pool_animation_figure(owners, steps, 4)
    layout = fig.layout
    plot_height = layout.height - layout.margin.t - layout.margin.b
    (menu,), (slider,) = layout.updatemenus, layout.sliders
    # Buttons on their own row under the axis; the slider and its label on the next one.
    assert menu.yanchor == slider.yanchor == "top" and menu.x == slider.x == 0
    assert (menu.y - slider.y) * plot_height >= 36  # a button row (~32 px) above the slider
    assert -menu.y * plot_height >= 50  # under the x axis' ticks and title
    assert slider.currentvalue.xanchor == "left" and slider.currentvalue.prefix == "step"  # the label's pad the space
    assert layout.margin.b >= -slider.y * plot_height + 70  # the slider's rail and labels, then the legend
    pad = serving_figures.SLIDER_LABEL_PAD
    assert [s.label for s in slider.steps] == [f"{pad}{s}{pad}" for s in steps]
    assert layout.xaxis.visible is not False and layout.xaxis.title.text == "+ offset within row"
    assert layout.yaxis.visible is not False and layout.yaxis.title.text == "first block"
    assert layout.showlegend is True
    names = [t.name for t in fig.data if t.showlegend is not False and t.type == "scatter"]
    assert names[0] == "free" and len(names) > 1


# -- with sharing: the pool by reference count, and the copy-on-write and prefix-cache marks --------------

SHARED = ServingConfig(num_blocks=64, block_size=4, max_batch_size=6, arrival_rate=0.1,
                       prompt_len=LengthDist("uniform", 2, 12), output_len=LengthDist("uniform", 2, 16), seed=0,
                       system_prompt=9, samples=2)


def _pool(history, step, **kwargs):
    record, c = history.records[step], history.changes(step)
    return serving_figures.serving_pool_figure(
        record.pool_owner(), record.block_tables(), record.context_lens, 4, step=step, taken=c.taken,
        freed=c.freed, recycled=c.recycled, copied=c.copied, revived=c.revived, seq_ids=record.seq_ids, **kwargs)


def test_serving_pool_by_reference_count_in_few_levels():
    history = simulate(SHARED, 150)
    step = int(history.metrics["copied"].to_numpy().argmax())
    record = history.records[step]
    fig = _pool(history, step, color_by="reference count", sharing=True)
    refs = np.bincount(record.blocks, minlength=64)
    assert refs.max() > 1
    z = np.array(fig.data[0].z, dtype=float).ravel()[:64]
    expected = np.select([refs == 0, refs == 1, refs == 2, refs <= 4], [0, 1, 2, 3], 4)  # free, 1, 2, 3-4, 5+
    np.testing.assert_array_equal(z, expected)
    names = [t.name for t in fig.data]
    # Every level in the legend, present or not, so it never moves while scrubbing; large enough for a room.
    assert names[1:6] == ["free", "1 sequence", "2 sequences", "3–4 sequences", "5+ sequences"]
    assert fig.layout.legend.font.size == serving_figures.POOL_LEGEND_FONT >= 13
    assert fig.layout.title.text == f"Physical block pool after step {step}"
    shared = int(np.flatnonzero(refs > 1)[0])
    holders = [s for s, row in zip(record.seq_ids, record.block_tables()) if shared in row]
    hover = np.array(fig.data[0].customdata).ravel()[shared]
    assert hover.endswith(", ".join(map(str, holders)))  # the holders by seq_id, not by row


def test_serving_pool_marks_copies_and_prefix_cache_hits_apart_from_new_blocks():
    history = simulate(SHARED, 150)
    m = history.metrics
    copy, revived = (serving_figures.POOL_CHANGE_MARKS[k].name for k in ("copied", "revived"))
    for column, name in (("copied", copy), ("revived", revived)):
        step = int(m[column].to_numpy().argmax())
        c = history.changes(step)
        for color_by in serving_figures.POOL_COLOR_MODES:
            marks = {t.name: t for t in _pool(history, step, color_by=color_by, sharing=True).data}
            ids = {n: set() if t.customdata is None else {int(b) for b in np.array(t.customdata)[:, 0]}
                   for n, t in marks.items() if n in {v.name for v in serving_figures.POOL_CHANGE_MARKS.values()}}
            assert ids[name] == set(getattr(c, column)) and ids[name]
            assert ids["taken"] == set(c.taken) - set(c.recycled) - set(c.copied)
            assert ids["recycled"] == set(c.recycled) - set(c.copied)
            assert ids["freed"] == set(c.freed)
    # A step that copies nothing still lists both sharing marks (a steady legend) when sharing is on, not when off.
    quiet = int(np.flatnonzero((m["copied"] == 0) & (m["revived"] == 0))[0])
    assert copy in {t.name for t in _pool(history, quiet, sharing=True).data}
    assert copy not in {t.name for t in _pool(history, quiet).data}
    with pytest.raises(ValueError, match="color_by"):
        _pool(history, quiet, color_by="owner")


def test_pool_ref_count_levels_are_checked():
    with pytest.raises(ValueError, match="levels"):
        sharing_figures.pool_ref_count_figure(np.array([1, 2]), np.array([[0, 1]]), 4, levels=(2, 3))
    assert sharing_figures.ref_level_names((1, 2, 3, 5)) == ["1 sequence", "2 sequences", "3–4 sequences", "5+ sequences"]


#: A run whose step 195 recycles, copies and revives blocks at once (the screenshot's).
ALL_MARKS = replace(PAGE_POOL, arrival_rate=0.05, prompt_len=LengthDist("long-tail", 4, 40),
                    output_len=LengthDist("long-tail", 4, 24), system_prompt=16, samples=2)


def test_serving_pool_caption_names_each_mark_as_the_pool_draws_it():
    """Issue 27 review: the caption's "⬟" and "★" were black glyphs for the pool's green pentagon and yellow star.
    The caption names each mark by its colour and shape, read here off the drawn traces' markers."""
    history = simulate(ALL_MARKS, 200)
    c = history.changes(195)
    assert c.recycled and c.copied and c.revived
    record = history.records[195]
    fig = serving_figures.serving_pool_figure(
        record.pool_owner(), record.block_tables(), record.context_lens, 8, step=195, taken=c.taken, freed=c.freed,
        recycled=c.recycled, copied=c.copied, revived=c.revived, sharing=True, seq_ids=record.seq_ids)
    caption = view.pool_caption("sequence", True, ALL_MARKS.num_blocks)
    drawn = [t for t in fig.data if t.type == "scatter" and t.marker.symbol not in (None, "square")]
    assert {t.name for t in drawn} >= {"recycled", "copy-on-write", "revived", "taken", "freed"}
    for t in drawn:
        words = Mark(t.name, t.marker.symbol, t.marker.color, t.marker.line.color).words
        assert f"a {words} = " in caption, t.name
    assert "black pentagon = revived" in caption and "yellow plus = a copy-on-write copy" in caption
    assert not set("▲◆★⬟✕●") & set(caption)  # no glyph that draws otherwise than the mark


@pytest.mark.parametrize("max_batch, expected", [
    (4, ["1 sequence", "2 sequences", "3–4 sequences"]),
    (6, ["1 sequence", "2 sequences", "3–4 sequences", "5–6 sequences"]),
    (2, ["1 sequence", "2 sequences"]),
])
def test_serving_pool_and_tables_list_the_same_possible_reference_levels(max_batch, expected):
    """Issue 27 review: with a max batch of 4 the pool's legend listed "5+ sequences", which cannot occur, while
    the block tables beside it stopped at the levels the step showed ("3–4 sequences"). Both list every level
    that can occur under the max batch, the last closed at it, and so do both captions."""
    from dataclasses import replace

    history = simulate(replace(SHARED, max_batch_size=max_batch), 150)
    step = int(history.metrics["copied"].to_numpy().argmax())
    record = history.records[step]
    pool = _pool(history, step, color_by="reference count", sharing=True, max_holders=max_batch)
    refs = np.bincount(record.blocks, minlength=64)
    table = table_figures.running_tables_figure(record.block_tables(), record.context_lens, 4, 64,
                                                seq_ids=record.seq_ids, color_by="reference count",
                                                ref_counts=refs, max_holders=max_batch)

    def levels(fig):
        return [t.name for t in fig.data if isinstance(t.meta, dict) and "level" in t.meta]

    assert levels(pool) == levels(table) == expected
    assert refs.max() <= max_batch and len(set(refs[refs > 0])) < len(expected) + 1
    words = ", ".join(expected)
    assert f"(its reference count: {words})" in view.pool_caption("reference count", True, 64, max_batch)
    assert f"({words})" in view.table_caption(True, "reference count", max_batch)
    # The colours stay the levels' own: level k in the k-th level colour.
    z = np.array(pool.data[0].z, dtype=float).ravel()[:64]
    np.testing.assert_array_equal(z, np.searchsorted(np.asarray(view.REF_LEVELS), refs, side="right"))


def test_view_ref_levels_are_the_figures():
    assert view.REF_LEVELS == sharing_figures.REF_LEVELS
    assert view.ref_levels()[1] == sharing_figures.ref_level_names()


def test_serving_pool_partly_filled_dot_grows_with_presentation_mode(history):
    """Issue 27 review at 1920x1080: in presentation mode the pool's cells grew to about 55 px while its partly
    filled dots stayed about 5 px. They grow by the presentation scale, as the step's marks do."""
    step = int(history.metrics["recycled"].to_numpy().argmax())
    record, c = history.records[step], history.changes(step)

    def sizes(scale):
        with style.presentation(scale):
            fig = serving_figures.serving_pool_figure(
                record.pool_owner(), record.block_tables(), record.context_lens, history.config.block_size,
                step=step, taken=c.taken, freed=c.freed, recycled=c.recycled)
        return {t.name: (t.marker.size, t.marker.line.width) for t in fig.data
                if t.type == "scatter" and t.marker.symbol not in (None, "square")}

    plain, big = sizes(1.0), sizes(style.PRESENTATION_SCALE)
    assert serving_figures._PARTIAL_NAME in plain and "recycled" in plain
    # They grow with the cells, as large as a corner clear of the id holds (tests/test_marks_clear_of_ids.py).
    for name in (serving_figures._PARTIAL_NAME, "recycled", "taken"):
        assert big[name][0] >= style.PRESENTATION_SCALE * pool_figures.MIN_POOL_MARK_PX, name  # the floor grows
    assert big[serving_figures._PARTIAL_NAME][0] > plain[serving_figures._PARTIAL_NAME][0]
    assert big[serving_figures._PARTIAL_NAME][1] == pytest.approx(style.PRESENTATION_SCALE)  # its outline too
