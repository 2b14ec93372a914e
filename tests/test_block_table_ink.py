"""Issue 27, the back row on the Block table page (1280x720, normal and presentation mode):
neighbouring sequences' colours told apart by lightness alone (sequences 1 and 3 two purples),
the sliding window's hatch drawn through the cells' ids, the Sharing KV card's whole pool beside
the saving line's batch, and the unallocated cells' "–" at 2.3:1. Each checked from the figures'
and cards' own values, the colours' distances and contrasts computed here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_colour_language import HUE_APART, SEQUENCES_APART_DE00, ciede2000, lch, rgb
from test_colour_window import _cell_colour

from explorer import style
from explorer.bench.readouts import memory_summary
from explorer.cache import cell_style, pool_figures
from explorer.cache import figures as cache_figures
from explorer.cache.sharing import shared_prefix_batch
from explorer.cache.view import KV_BATCH_CARD, KV_CARD, table_cards
from explorer.formatting import format_bytes
from paged_attention import DecodeConfig, assign_blocks

#: Two sequences this close in the batch differ in CIELAB hue by HUE_APART or more; next-door
#: ones by NEIGHBOUR_HUE_APART (the old palette: sequences 0 and 2 20 degrees apart, 1 and 3 one).
NEAR, NEIGHBOUR_HUE_APART = 2, 45
#: A small batch (up to this many sequences) has as many hues as sequences.
FIRST_HUES = 6


def _hue_turn(a: str, b: str) -> float:
    turn = abs(lch(rgb(a))[2] - lch(rgb(b))[2]) % 360
    return min(turn, 360 - turn)


def _hex(colour: str) -> str:
    return "#" + "".join(f"{v:02X}" for v in rgb(colour))


def _sequence_colours(batch: int):
    """Each sequence's colour as the pool and the table coloured by sequence draw it, and the
    two heatmaps with the colours under their cells."""
    config = DecodeConfig(batch_size=batch, context_lens=(40,) * batch, block_size=16)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    pool = pool_figures.pool_figure(owner, tables, config.lengths, 16, fit_ids=True)
    table = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, color_by="sequence")
    heat, n_cols = pool.data[0], np.shape(pool.data[0].z)[1]
    pool_cells = np.vectorize(lambda r, c: _cell_colour(heat, r, c) or style.FREE_COLOR, otypes=[object])(
        *np.indices(np.shape(heat.z)))
    table_cells = np.vectorize(lambda r, c: _cell_colour(table.data[0], r, c) or "", otypes=[object])(
        *np.indices(tables.shape))
    colours = {}
    for s in range(batch):
        in_pool = {_hex(pool_cells[b // n_cols, b % n_cols]) for b in np.nonzero(owner == s)[0]}
        in_table = {_hex(table_cells[s, c]) for c in np.nonzero(tables[s] >= 0)[0]}
        assert len(in_pool) == 1 and in_pool == in_table, (s, in_pool, in_table)  # one colour, both charts
        colours[s] = in_pool.pop()
    return colours, (pool.data[0], pool_cells), (table.data[0], table_cells)


def test_nearby_sequences_differ_in_hue_and_their_ids_read():
    batch = len(style.SEQUENCE_COLORS) + 2  # the colours wrap: sequence 12 sits next to 11
    colours, *heatmaps = _sequence_colours(batch)
    assert _hue_turn(colours[1], colours[3]) >= HUE_APART  # the review's two purples
    for i, j in itertools.combinations(range(batch), 2):
        if j - i <= NEAR:
            assert _hue_turn(colours[i], colours[j]) >= (NEIGHBOUR_HUE_APART if j - i == 1 else HUE_APART), (i, j)
            assert ciede2000(colours[i], colours[j]) >= SEQUENCES_APART_DE00 * (2 if j - i == 1 else 1), (i, j)
    for i, j in itertools.combinations(range(FIRST_HUES), 2):
        assert _hue_turn(colours[i], colours[j]) >= HUE_APART, (i, j)
    # every id written on them in the ink of 4.5:1 or more on its cell
    for heat, cells in heatmaps:
        words, inks = cell_style.cell_words(heat.text), cell_style.cell_inks(heat.text)
        written = (words != "") & (cells != "")
        assert heat.texttemplate == "%{text}" and written.any()
        worst = min(cell_style.contrast(i, c) for i, c in zip(inks[written], cells[written]))
        assert worst >= cell_style.MIN_INK_CONTRAST, worst


def _hatch_and_ids(fig):
    """The hatch's rectangles and the hatched cells' id boxes ``[n, 4]`` (x0, x1, y0, y1, px in the
    narrowest plot the page draws the table in: its column at 1280 px), the ids' cells, and the
    cells' boxes. An id's box: its digits at 0.6 of the font size each, a font size high."""
    (bars,) = [t for t in fig.data if t.type == "bar" and t.name == cell_style.OUTSIDE_WINDOW
               and t.showlegend is False]
    (ids,) = [t for t in fig.data if t.name == cell_style.OUTSIDE_WINDOW + " ids"]
    bare = not fig.data[0].showscale  # the colour bar gives way where the ids fit only without it
    plot_w = style.plot_width_px(cell_style.TABLE_BARE_PLOT_PX if bare else cell_style.WIDE_PLOT_PX)
    (x_lo, x_hi), (y_lo, y_hi) = fig.layout.xaxis.range, fig.layout.yaxis.range
    px_x = plot_w / abs(x_hi - x_lo)
    px_y = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / abs(y_hi - y_lo)
    x0 = np.asarray(bars.x, dtype=float) + np.asarray(bars.offset, dtype=float)
    y0 = np.asarray(bars.base, dtype=float)
    rects = np.stack([x0, x0 + np.asarray(bars.width), y0, y0 + np.asarray(bars.y)], -1) * [px_x, px_x, px_y, px_y]
    font = ids.textfont.size
    cx, cy = np.asarray(ids.x, dtype=float) * px_x, np.asarray(ids.y, dtype=float) * px_y
    half_w = np.array([len(t) * 0.6 * font / 2 for t in ids.text])
    boxes = np.stack([cx - half_w, cx + half_w, cy - font / 2, cy + font / 2], -1)
    cells = np.stack([cx - px_x / 2, cx + px_x / 2, cy - px_y / 2, cy + px_y / 2], -1)
    return rects, boxes, cells


def _overlap(a, b) -> float:
    """The area two boxes ``[x0, x1, y0, y1]`` share."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[2], b[2]))


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("color_by", ["physical", "sequence"])
def test_the_window_hatch_keeps_clear_of_the_ids(scale, color_by):
    # /block_table?batch=4&ctx_mode=ragged&lo=40&hi=200&window=64, as the review saw it
    config = DecodeConfig(batch_size=4, context_lens=(200, 146, 93, 180), block_size=16, window=64)
    tables = assign_blocks(config)[0].numpy()
    with style.presentation(scale):
        fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=64,
                                               color_by=color_by)
    if color_by == "sequence" and scale > 1:  # presentation mode's ids outgrow these cells: none written
        assert fig.data[0].texttemplate is None
        assert not [t for t in fig.data if t.name == cell_style.OUTSIDE_WINDOW + " ids"]
        return
    rects, boxes, cells = _hatch_and_ids(fig)
    assert len(boxes) > 0 and fig.data[0].texttemplate == "%{text}"  # ids written in the hatched cells
    worst = max(_overlap(r, b) for r in rects for b in boxes)
    assert worst < 1e-6, worst
    # ... and each hatched cell still reads hatched: strips inside it, some 3 px or more across
    for cell in cells:
        mine = [r for r in rects if _overlap(r, cell) > 1e-6]
        assert mine and all(r[0] >= cell[0] - 1e-6 and r[1] <= cell[1] + 1e-6 for r in mine)
        assert max(min(r[1] - r[0], r[3] - r[2]) for r in mine) >= 3
        assert sum((r[1] - r[0]) * (r[3] - r[2]) for r in mine) >= 0.25 * (cell[1] - cell[0]) * (cell[3] - cell[2])


def test_the_unallocated_dash_reads_on_its_cell():
    config = DecodeConfig(batch_size=3, context_lens=(200, 40, 120), block_size=16)
    tables = assign_blocks(config)[0].numpy()
    for scale in (1.0, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks)
        (empty,) = [t for t in fig.data if t.type == "heatmap" and t.name == "unallocated (-1)"]
        assert (np.asarray(empty.text) == "–").sum() == (tables < 0).sum() > 0 and empty.texttemplate
        cell = {c for _, c in empty.colorscale}
        assert cell == {style.UNALLOCATED_COLOR}
        assert cell_style.contrast(empty.textfont.color, cell.pop()) >= cell_style.MIN_INK_CONTRAST


@pytest.mark.parametrize("num_layers", [None, 32])
def test_with_sharing_the_kv_card_counts_the_batchs_blocks_and_names_the_pools(num_layers):
    """The review (?batch=4&ctx=100&block=16, Sharing on): the saving line said "the batch holds 12
    physical blocks (786 kB)" and the card beside it 2.03 MB, the whole pool's. The card now counts
    the batch's blocks; the pool's bytes are in its note, said to be the pool's. Counted by hand here:
    the distinct physical ids in the tables, times 2 (K and V) x KV heads x head_dim x block tokens x
    bytes per value."""
    config = DecodeConfig(batch_size=4, context_lens=(100,) * 4, block_size=16, num_kv_heads=8, head_dim=128)
    mem = memory_summary(config)
    shared = shared_prefix_batch(config.lengths, 16, config.num_blocks, 64, 2)
    held = len(np.unique(shared.block_tables[shared.block_tables >= 0]))
    block_bytes = 2 * 8 * 128 * 16 * config.kv_element_size
    pool = len(shared.pool_owner)
    cards = {c.label: c for c in table_cards(config, mem, shared, True, pool_blocks=pool, num_layers=num_layers)}
    assert KV_CARD not in cards
    card = cards[KV_BATCH_CARD]
    assert card.value == format_bytes(held * block_bytes) == format_bytes(shared.blocks_used * mem.block_bytes)
    assert f"holds {held} physical blocks ({card.value})" in shared.saving_note(mem.block_bytes)  # one count
    assert held < pool and cards["Blocks used (physical)"].value == str(held)
    pool_note, layers = card.delta.split("  \n")
    assert pool_note == f"of {format_bytes(pool * block_bytes)} in the pool"
    assert layers == (f"{format_bytes(32 * held * block_bytes)} for 32 layers" if num_layers
                      else f"{format_bytes(block_bytes)} per block")
    assert f"{held * block_bytes:,} bytes" in card.help and f"{pool * block_bytes:,} bytes" in card.help
    # without Sharing, the card counts the sidebar's whole pool, as the sidebar's memory line does
    plain = {c.label: c for c in table_cards(config, mem, None, False, pool_blocks=config.num_blocks)}
    assert KV_BATCH_CARD not in plain and plain[KV_CARD].value == format_bytes(mem.kv_cache_bytes)
