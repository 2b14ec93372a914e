"""Figures stay legible at the sizes the pages draw them: thin cells keep their
colour, colours stay distinct, integer axes get integer ticks, legends and titles
keep clear of the plot. Each test checks the Plotly spec."""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from explorer import style
from explorer.cache import figures as cache_figures
from explorer.cache import pool_figures
from explorer.cache import sampling, walk_figures
from explorer.kernel import figures as kernel_figures
from explorer.serving import figures as serving_figures
from explorer.sweep import figures as sweep_figures
from explorer.sweep import runs as sweep_runs
from helpers import job_rows
from paged_attention import DecodeConfig, assign_blocks


def _layout(batch, lens, block_size, layout="shuffled", seed=0):
    config = DecodeConfig(batch_size=batch, context_lens=lens, block_size=block_size, block_layout=layout, seed=seed)
    tables, owner = assign_blocks(config)
    return config, tables.numpy(), owner.numpy()


def _heatmaps(fig):
    return [t for t in fig.data if t.type == "heatmap"]


def _integer_ticks(axis) -> bool:
    """Ticks that can only fall on whole numbers."""
    if axis.tickmode == "linear":
        return float(axis.dtick).is_integer() and axis.dtick >= 1 and float(axis.tick0 or 0).is_integer()
    if axis.tickmode == "array":
        return all(float(v).is_integer() for v in axis.tickvals)
    return axis.tickformat is not None and axis.tickformat.endswith("d")


def _tiles(num_splits: int, tiles_per_split: int = 2, block: int = 16) -> pd.DataFrame:
    """A synthetic trace: ``num_splits`` splits of ``tiles_per_split`` one-block tiles."""
    n = num_splits * tiles_per_split
    rng = np.random.default_rng(0)
    start = np.arange(n) * block
    return pd.DataFrame({
        "split": np.repeat(np.arange(num_splits), tiles_per_split), "tile": np.tile(np.arange(tiles_per_split), num_splits),
        "subtile": 0, "first_block": np.arange(n), "end_block": np.arange(1, n + 1),
        "token_start": start, "token_end": start + block, "valid_tokens": block, "masked_lanes": 0,
        "physical_blocks": [(int(i),) for i in rng.permutation(n)], "num_physical_blocks": 1, "table_lookups": 1,
        "m": rng.normal(size=n), "tile_max": rng.normal(size=n), "alpha": 1.0, "l": rng.uniform(1, 5, n),
        "err_vs_row": rng.uniform(1e-3, 1, n), "err_vs_split": rng.uniform(1e-3, 1, n),
    })


# -- thin heatmap cells keep their colour ----------------------------------------------

def test_thin_block_table_columns_get_no_gap():
    config, tables, _ = _layout(3, 3855, 8)
    assert tables.shape[1] == 482
    fig = cache_figures.block_table_figure(tables, config.lengths, 8, config.num_blocks)
    for heat in _heatmaps(fig):
        assert heat.xgap == 0  # a 1 px gap would eat cells under 1 px wide
    assert fig.data[0].ygap == 1  # three rows are tall: keep the gap between them
    config, tables, _ = _layout(3, (5, 40, 16), 16)
    small = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks)
    assert (small.data[0].xgap, small.data[0].ygap) == (1, 1)


def test_token_walk_of_many_blocks_gets_no_row_gap():
    _, tables, _ = _layout(3, 3855, 8)
    fig = walk_figures.token_walk_figure(tables[1], 3855, 8)
    assert len(fig.data[0].y) == 482
    assert all(h.ygap == 0 for h in _heatmaps(fig))
    assert all(h.xgap == 1 for h in _heatmaps(fig))  # 8 slots are wide


def test_large_pool_cells_get_no_column_gap():
    owner = np.full(4096, -1)
    owner[:3000] = np.repeat(np.arange(30), 100)
    fig = serving_figures.serving_pool_figure(owner, np.zeros((0, 1), dtype=np.int64), [], 16)
    _, n_cols, per_cell = sampling.pool_grid_shape(4096)
    assert per_cell == 1 and n_cols > 100
    assert fig.data[0].xgap == 0
    anim = serving_figures.pool_animation_figure(np.stack([owner, owner]), [0, 1], 16)
    assert anim.data[0].xgap == 0 and anim.frames[1].data[0].xgap == 0


def test_kernel_walk_drops_outlines_and_gaps_of_thin_bars():
    tiles = _tiles(157)
    fig = kernel_figures.kernel_walk_figure(tiles, int(tiles["token_end"].max()), 16, 16)
    assert fig.data[0].marker.line.width == 0  # 16 of 5,024 tokens is about 1 px
    assert fig.layout.bargap == 0  # 314 rows in ~700 px
    assert not fig.layout.shapes  # 156 dotted split lines would hatch the chart
    few = kernel_figures.kernel_walk_figure(_tiles(2), 64, 16, 16)
    assert few.data[0].marker.line.width == 1 and few.layout.bargap == 0.25 and len(few.layout.shapes) == 1


# -- sequence colours ------------------------------------------------------------------

def _lab(hex_color: str) -> np.ndarray:
    rgb = np.array([int(hex_color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]) / 255
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    f = np.cbrt(np.maximum(xyz / np.array([0.95047, 1.0, 1.08883]), 0.008856))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_sequence_colours_are_many_distinct_and_not_grey():
    colors = style.SEQUENCE_COLORS
    assert len(colors) >= 12 and len(set(colors)) == len(colors)
    # Chosen for their distances (tests/test_colour_language.py), no longer from plotly's qualitative
    # palettes: those colours in the hues the other meanings leave came at best 16.6 apart in CIEDE2000.
    labs = [_lab(c) for c in colors]
    assert min(np.hypot(*lab[1:]) for lab in labs) >= 30  # chroma: no greys
    closest = min(np.linalg.norm(a - b) for i, a in enumerate(labs) for b in labs[i + 1:])
    assert closest >= 25  # the old #76B7B2 and #86BCB6 were 4 apart
    for grey in (style.FREE_COLOR, style.OTHER_COLOR):
        assert min(np.linalg.norm(_lab(grey) - lab) for lab in labs) >= 20


def test_pool_legend_names_each_of_few_sequences():
    config, tables, owner = _layout(6, (50, 90, 30, 120, 64, 10), 16, "fragmented", 1)
    fig = pool_figures.pool_figure(owner, tables, config.lengths, 16)
    entries = [t for t in fig.data if t.meta and "sequence" in t.meta]
    assert [t.name for t in entries] == [f"sequence {s}" for s in range(6)]
    for t in entries:
        assert t.marker.color == style.SEQUENCE_COLORS[t.meta["sequence"] % len(style.SEQUENCE_COLORS)]
    assert "free" in [t.name for t in fig.data]


def test_pool_of_many_sequences_says_colours_repeat():
    config, tables, owner = _layout(20, tuple(range(20, 420, 20)), 16, "shuffled", 3)
    fig = pool_figures.pool_figure(owner, tables, config.lengths, 16)
    assert not [t for t in fig.data if t.meta and "sequence" in t.meta]
    assert "repeating" in fig.layout.title.subtitle.text
    hover = np.array(fig.data[0].customdata).ravel()
    b = int(np.flatnonzero(owner == 19)[0])
    assert "sequence 19" in hover[b]  # the hover names the owner the colour cannot
    anim = serving_figures.pool_animation_figure(owner[None, :], [0], 16)
    assert "repeating" in anim.layout.title.subtitle.text


# -- integer ticks on integer axes -----------------------------------------------------

def test_block_table_of_two_blocks_has_integer_ticks():
    config, tables, _ = _layout(1, 20, 16)
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, 2)
    assert list(fig.layout.xaxis.tickvals) == [0, 1]
    assert list(fig.data[0].colorbar.tickvals) == [0, 1]  # physical block ids 0 and 1, not 0, 0.5, 1
    wide = cache_figures.block_table_figure(*_layout(3, 3855, 8)[1:2], [3855] * 3, 8)
    assert _integer_ticks(wide.layout.xaxis) and _integer_ticks(wide.data[0].colorbar)


def test_token_and_block_walks_have_integer_ticks():
    config, tables, _ = _layout(1, 20, 16)
    walk = walk_figures.token_walk_figure(tables[0], 20, 16, 0, 2)
    assert list(walk.data[0].colorbar.tickvals) == [0, 1] and _integer_ticks(walk.layout.xaxis)
    one_slot = walk_figures.token_walk_figure(np.arange(3), 3, 1, 0, 3)
    assert list(one_slot.layout.xaxis.tickvals) == [0]  # not -0.4 ... 0.4 around the one slot
    path = walk_figures.block_walk_figure(tables[0], 20, 16, 0, 3)
    assert list(path.layout.xaxis.tickvals) == [0, 1] and _integer_ticks(path.layout.yaxis)
    long = walk_figures.block_walk_figure(np.arange(500), 8000, 16, 0, 500)
    assert _integer_ticks(long.layout.xaxis) and _integer_ticks(long.layout.yaxis)


def test_pool_timeline_and_kernel_axes_have_integer_ticks():
    config, tables, owner = _layout(3, (5, 40, 16), 16)
    pool = pool_figures.pool_figure(owner, tables, config.lengths, 16)
    assert _integer_ticks(pool.layout.xaxis)
    metrics = pd.DataFrame({"step": [0, 1, 2], "blocks_in_use": [1, 2, 2], "free_blocks": [3, 2, 2],
                            "wasted_slots": [3, 1, 0], "wasted_fraction": [0.2, 0.1, 0], "running": [1, 1, 2],
                            "waiting": [0, 1, 0]})
    timeline = serving_figures.serving_timeline_figure(metrics, 1, 4)
    for axis in (timeline.layout.xaxis, timeline.layout.xaxis3, timeline.layout.yaxis, timeline.layout.yaxis2,
                 timeline.layout.yaxis3):
        assert _integer_ticks(axis)
    walk = kernel_figures.kernel_walk_figure(_tiles(1, 1), 16, 16, 16)
    assert _integer_ticks(walk.layout.xaxis) and _integer_ticks(walk.data[0].marker.colorbar)


# -- legends and line labels keep clear of the plot ------------------------------------

def test_legend_hangs_from_the_figure_bottom():
    both = pd.concat([sweep_runs.rows_frame(job_rows(copy=4.0), "this session"),
                      sweep_runs.rows_frame(job_rows(copy=4.0), "uploaded: h200.csv")], ignore_index=True)
    fig = sweep_figures.sweep_bandwidth_figure(both)
    legend = fig.layout.legend
    # Anchored to the container, a legend of several rows pushes the plot up
    # rather than sliding under the x axis title.
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
    assert fig.layout.yaxis.type == "log"
    lo, hi = fig.layout.yaxis.range
    ceilings = [a for a in fig.layout.annotations if "ceiling" in a.text]
    assert len(ceilings) == 2
    for a in ceilings:  # log axes place annotations in log10 units
        assert lo <= a.y <= hi and a.y == pytest.approx(math.log10(4.0))


# -- grammar ---------------------------------------------------------------------------

def _subtitle(fig) -> str:
    """A figure's subtitle on one line (it is broken into lines that fit the chart)."""
    return fig.layout.title.subtitle.text.replace("<br>", " ")


def test_block_table_subtitles_multiply_with_a_times_sign_and_empty_sequences_hold_no_block():
    """Review 3: the table's subtitle said "4 sequences x 15 logical blocks" where cards and tables write
    "×", and all-zero lengths read "3 sequences x 1 logical block" though a sequence of 0 tokens holds none
    (the table keeps one empty column)."""
    config, tables, _ = _layout(4, (236, 118, 57, 200), 16)
    table = _subtitle(cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks))
    assert table.startswith(f"4 sequences × {tables.shape[1]} logical blocks of 16 tokens;") and " x " not in table
    note = sampling.sample_grid(300, 3000, 1000).note("sequence", "logical block")
    assert "×" in note and " x " not in note
    empty = np.full((3, 1), -1, dtype=np.int32)
    zero = _subtitle(cache_figures.block_table_figure(empty, (0, 0, 0), 16, 8))
    assert zero.startswith("3 sequences of 0 tokens: no logical blocks;") and "1 logical block" not in zero


def test_counts_of_one_are_singular():
    config, tables, owner = _layout(1, 1, 1)
    table = _subtitle(cache_figures.block_table_figure(tables, config.lengths, 1, config.num_blocks))
    assert table.startswith("1 sequence × 1 logical block of 1 token;")
    pool = _subtitle(pool_figures.pool_figure(owner, tables, config.lengths, 1))
    assert "of 1 slot," in pool and "1 slots" not in pool
    walk = _subtitle(walk_figures.token_walk_figure(tables[0], 1, 1))
    assert walk.startswith("1 token in 1 block of 1;")
    anim = _subtitle(serving_figures.pool_animation_figure(owner[None, :], [0], 1))
    assert "of 1 slot;" in anim
    kernel = _subtitle(kernel_figures.kernel_walk_figure(_tiles(1, 1), 16, 16, 16))
    assert kernel.startswith("1 tile of 16 lanes, 1 split, 1 block-table lookup for 16 tokens")


# -- log axes and subtitles ------------------------------------------------------------

def test_log_axes_never_label_more_than_about_six_decades():
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1e-12, 1.0]))
    style.log_axis_range(fig, [1e-12, 1.0], 0.4, 0.5)
    lo, hi = fig.layout.yaxis.range
    assert (hi - lo) / fig.layout.yaxis.dtick <= 7


def test_long_subtitles_wrap_at_their_separators_and_make_room():
    """Plotly does not wrap a title: a long subtitle was cut off at the chart's edge
    on a 1280 px page. It breaks at its separators, and the top margin grows."""
    long = "8 sequences x 482 logical blocks; colour = physical block id · sampled: every 2nd row shown"
    fig = style.apply_style(go.Figure(), "t", long)
    text = fig.layout.title.subtitle.text
    lines = text.split("<br>")
    assert all(len(line) <= style.line_chars("subtitle") for line in lines)
    assert lines == ["8 sequences x 482 logical blocks;", "colour = physical block id · sampled: every 2nd row shown"]
    with style.presentation():  # larger text, shorter lines: the parts go on lines of their own
        lines = style.apply_style(go.Figure(), "t", long).layout.title.subtitle.text.split("<br>")
    assert lines == ["8 sequences x 482 logical blocks;", "colour = physical block id", "sampled: every 2nd row shown"]
    assert fig.layout.margin.t > style.apply_style(go.Figure(), "t", "short").layout.margin.t
    assert style.apply_style(go.Figure(), "t", "short").layout.title.subtitle.text == "short"


@pytest.mark.parametrize("num_blocks", [150_000, 1_048_576])
def test_pool_block_ids_are_written_whole_upright_and_apart(num_blocks):
    """Issue 27's leftovers: past 100,000 blocks the pool's "first block" ticks read
    "105k", "524k": block ids are labels, not quantities. Each is the exact id of its
    row's first block with thousands separators, upright, and neighbours at least a
    line and a half of tick text apart, in both modes (with and without sharing)."""
    from explorer.cache import sharing_figures
    from explorer.formatting import format_number

    owner = np.full(num_blocks, -1)
    owner[:50] = 0
    tables = np.array([list(range(50))])
    refs = np.r_[np.full(50, 2), np.zeros(num_blocks - 50, dtype=int)]
    for scale in (1, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            figures = [pool_figures.pool_figure(owner, tables, [800], 16),
                       sharing_figures.pool_ref_count_figure(refs, tables, 16)]
        for fig in figures:
            y, heat = fig.layout.yaxis, fig.data[0]
            n_rows, n_cols = np.shape(heat.z)
            per_row = int(heat.customdata[1][0][0])  # the first block of row 1 (a cell's blocks, first to last)
            assert list(y.ticktext) == [format_number(int(r) * per_row) for r in y.tickvals]
            assert not any(c.isalpha() for t in y.ticktext for c in t) and y.tickangle == 0
            plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
            apart = (y.tickvals[1] - y.tickvals[0]) * plot_px / n_rows
            assert apart >= (style.LINE_HEIGHT + 0.5) * y.tickfont.size, (scale, apart)
            assert len(y.tickvals) <= 10
