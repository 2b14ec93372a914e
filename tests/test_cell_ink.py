"""The numbers written in the cache's cells read on their cells: each in the ink of more
WCAG contrast, at least 4.5:1, on every colour a cell can take (review 3: white ids on the
pool's lime sequence, grey #444 ids on the block table's mid-blue, Plotly's own choice)."""

from __future__ import annotations

import numpy as np
import pytest
from plotly.colors import sample_colorscale

from explorer import style
from explorer.cache import cell_style, pool_figures, sharing_figures, walk_figures
from explorer.cache import figures as cache_figures
from explorer.cache.sharing import shared_prefix_batch
from paged_attention import DecodeConfig, assign_blocks

#: Every colour a cell with a number can take: the block ids' scale (sampled finely, as
#: Plotly interpolates it), the sequences, the reference counts and levels, the greys.
CELL_COLOURS = (
    sample_colorscale(style.BLOCK_COLORSCALE, list(np.linspace(0, 1, 201)))
    + [*style.SEQUENCE_COLORS, *style.REF_COUNT_COLORS, *sharing_figures.REF_LEVEL_COLORS,
       *(sharing_figures.ref_color(k, 12) for k in range(1, 13)),
       style.FREE_COLOR, style.OTHER_COLOR, style.UNALLOCATED_COLOR]
)


def test_every_cell_colour_of_every_palette_gets_an_ink_of_contrast_4_5():
    worst = min((cell_style.contrast(c, cell_style.ink_on(c)), c) for c in CELL_COLOURS)
    assert worst[0] >= cell_style.MIN_INK_CONTRAST, worst
    # The ink is the one of more contrast, never the other.
    for c in CELL_COLOURS:
        other = ({cell_style.DARK_INK, cell_style.LIGHT_INK} - {cell_style.ink_on(c)}).pop()
        assert cell_style.contrast(c, cell_style.ink_on(c)) >= cell_style.contrast(c, other), c


def _cell_colours(heat, colours_of_z):
    z = np.asarray(heat.z, dtype=float)
    return np.vectorize(colours_of_z, otypes=[object])(z)


def _assert_readable(heat, colours):
    """Every number ``heat`` writes is inked, each ink 4.5:1 or more on its cell's colour."""
    assert heat.texttemplate == "%{text}"
    words, inks = cell_style.cell_words(heat.text), cell_style.cell_inks(heat.text)
    written = words != ""
    assert written.any() and (inks[written] != "").all()
    ratios = [cell_style.contrast(i, c) for i, c in zip(inks[written], colours[written])]
    assert min(ratios) >= cell_style.MIN_INK_CONTRAST, min(ratios)


@pytest.mark.parametrize("color_by", ["physical", "sequence"])
def test_the_block_table_inks_each_id_for_its_cell(color_by):
    config = DecodeConfig(batch_size=4, context_lens=(236, 118, 57, 200), block_size=16)
    tables, _ = (t.numpy() for t in assign_blocks(config))
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, color_by=color_by)
    heat, top = fig.data[0], config.num_blocks - 1
    if color_by == "physical":
        colours = _cell_colours(heat, lambda v: "" if np.isnan(v) else
                                sample_colorscale(style.BLOCK_COLORSCALE, [v / top])[0])
    else:
        colours = np.array([[style.SEQUENCE_COLORS[s % len(style.SEQUENCE_COLORS)]] * tables.shape[1]
                            for s in range(len(tables))], dtype=object)
    _assert_readable(heat, colours)


def test_the_pools_and_the_walk_ink_each_number_for_its_cell():
    config = DecodeConfig(batch_size=12, context_lens=(40,) * 12, block_size=16)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    pool = pool_figures.pool_figure(owner, tables, config.lengths, 16, fit_ids=True)
    palette = [style.FREE_COLOR, style.OTHER_COLOR, *style.SEQUENCE_COLORS]  # the owner codes' colours
    _assert_readable(pool.data[0], _cell_colours(pool.data[0], lambda v: palette[0 if np.isnan(v) else int(v)]))

    b = shared_prefix_batch((236, 118, 57, 200), 16, 45, 64, 2)
    shared = sharing_figures.pool_ref_count_figure(b.ref_counts, b.block_tables, 16, fit_ids=True)
    top = int(b.ref_counts.max())
    _assert_readable(shared.data[0], _cell_colours(
        shared.data[0], lambda v: style.FREE_COLOR if np.isnan(v) or v <= 0 else sharing_figures.ref_color(int(v), top)))

    walk = walk_figures.token_walk_figure(np.array([0, 20, 44]), 40, 16, num_blocks=45)
    heat = walk.data[0]
    _assert_readable(heat, _cell_colours(heat, lambda v: style.FREE_COLOR if np.isnan(v) else
                                         sample_colorscale(style.BLOCK_COLORSCALE, [(v - heat.zmin) / (heat.zmax - heat.zmin)])[0]))
