"""Figures of the paged cache: block table, pool, token and block walks, and grid sampling. They are pure: check the data they carry."""

import numpy as np
import pytest
from test_figures_style import _layout

from explorer import limits, style
from explorer.cache import figures as cache_figures
from explorer.cache import pool_figures
from explorer.cache import cell_style, sampling, sharing_figures, walk_figures
from explorer.cache import window as window_reads
from paged_attention import DecodeConfig, assign_blocks
from paged_attention.inputs import FREE, OTHER


def _layout(batch=3, lens=(5, 40, 16), block_size=16, layout="shuffled", seed=0):
    config = DecodeConfig(batch_size=batch, context_lens=lens, block_size=block_size, block_layout=layout, seed=seed)
    tables, owner = assign_blocks(config)
    return config, tables.numpy(), owner.numpy()


def test_block_table_heatmap_matches_table():
    config, tables, _ = _layout()
    fig = cache_figures.block_table_figure(tables, config.lengths, config.block_size, config.num_blocks)
    alloc, unalloc = fig.data[0], fig.data[1]
    z = np.array(alloc.z, dtype=float)
    assert z.shape == tables.shape
    assert np.array_equal(np.isnan(z), tables < 0)
    assert np.array_equal(z[tables >= 0], tables[tables >= 0])
    assert np.array_equal(~np.isnan(np.array(unalloc.z, dtype=float)), tables < 0)
    # customdata: seq, logical, first token, last token, physical, filled
    cd = np.array(alloc.customdata)
    assert cd[1, 2].tolist() == [1, 2, 32, 39, tables[1, 2], 8]
    assert cd[0, 0].tolist() == [0, 0, 0, 4, tables[0, 0], 5]
    assert "physical block" in alloc.hovertemplate and "slots filled" in alloc.hovertemplate
    assert alloc.zmax == config.num_blocks - 1
    assert "unallocated" in unalloc.hovertemplate


def test_block_table_samples_large_tables():
    tables = np.arange(256 * 2048, dtype=np.int64).reshape(256, 2048)
    fig = cache_figures.block_table_figure(tables, [2048 * 16] * 256, 16)
    z = np.array(fig.data[0].z)
    assert z.size <= limits.MAX_TABLE_CELLS
    grid = cache_figures.block_table_grid(256, 2048)
    assert grid.sampled and "every 2nd sequence" in grid.note("sequence", "logical block")
    assert "16 consecutive logical blocks" in grid.note("sequence", "logical block")
    edges, ys = np.array(fig.data[0].x), np.array(fig.data[0].y)
    assert np.array_equal(ys, grid.rows) and np.array_equal(edges, np.arange(0, 2049, 16) - 0.5)
    assert np.array_equal(z, tables[np.ix_(ys, np.arange(0, 2048, 16))])  # each column's first block, exact


def _marks(trace) -> np.ndarray:
    """The text a heatmap trace writes in each cell: Plotly fills its texttemplate
    for every cell, gaps included, so a constant template marks them all."""
    shape = np.shape(trace.z)
    if trace.texttemplate is None:
        return np.full(shape, "", dtype=object)
    if "%{text}" not in trace.texttemplate:
        return np.full(shape, trace.texttemplate, dtype=object)
    return np.array(trace.text, dtype=object).reshape(shape)


def test_unallocated_mark_only_in_unallocated_cells():
    config, tables, _ = _layout()
    fig = cache_figures.block_table_figure(tables, config.lengths, config.block_size, config.num_blocks)
    alloc, unalloc = fig.data[0], fig.data[1]
    assert alloc.texttemplate == "%{text}"  # the ids are written...
    assert np.array_equal(cell_style.cell_words(alloc.text)[tables >= 0], tables[tables >= 0].astype(str))
    marks = _marks(unalloc)
    assert np.array_equal(marks == "–", tables < 0)  # ...and only the -1 entries carry the dash
    assert set(marks[tables >= 0]) == {""}


def test_short_sequences_show_beside_a_huge_one():
    """A one-block and a four-block sequence beside a million-token one: every k-th
    column of 65,536 drew their blocks a tenth of a pixel wide, so both rows looked
    empty. Aggregated columns keep each row's blocks at least MIN_COLUMN_PX wide."""
    lens = (5, 1_048_576, 57)
    config = DecodeConfig(batch_size=3, context_lens=lens, block_size=16, block_layout="shuffled", seed=0)
    tables = assign_blocks(config)[0].numpy()
    assert tables.shape == (3, 65536)
    for plot_width in (style.PLOT_WIDTH_PX, 180):
        fig = cache_figures.block_table_figure(tables, lens, 16, config.num_blocks, plot_width=plot_width)
        z = np.array(fig.data[0].z, dtype=float)
        edges = np.array(fig.data[0].x, dtype=float)
        assert len(edges) == z.shape[1] + 1 and edges[0] == -0.5 and edges[-1] == 65535.5
        px_per_block = plot_width / 65536
        for row, blocks in zip(range(3), (1, 65536, 4)):
            drawn = ~np.isnan(z[row])
            width_px = (np.diff(edges)[drawn]).sum() * px_per_block
            assert width_px >= style.MIN_COLUMN_PX  # visible, not a sliver under a pixel
            assert z[row, 0] == tables[row, 0]  # coloured by the row's first block
        cd = np.array(fig.data[0].customdata)
        assert cd[0, 0, 5] == 1 and cd[2, 0, 5] == 4  # hover: "1 of k", "4 of k blocks allocated"
        assert "blocks allocated" in fig.data[0].hovertemplate
        assert "logical blocks per column" in fig.layout.title.subtitle.text.replace("<br>", " ")


def test_block_table_aggregation_is_vectorised():
    """The app allows a million blocks: the aggregated view is numpy, not a loop per block."""
    import time
    tables = np.arange(1_000_000, dtype=np.int64).reshape(1, -1)
    t0 = time.perf_counter()
    fig = cache_figures.block_table_figure(tables, [16_000_000], 16, 1_000_000)
    assert time.perf_counter() - t0 < 2.0
    assert np.array(fig.data[0].z).size <= style.PLOT_WIDTH_PX


@pytest.mark.parametrize("rows, cols, cap", [(1, 1, 10), (4, 65536, 20000), (4096, 3, 1000), (300, 300, 20000)])
def test_sample_grid_respects_cap(rows, cols, cap):
    grid = sampling.sample_grid(rows, cols, cap)
    assert grid.cells <= cap
    assert grid.rows[0] == 0 and grid.cols[0] == 0
    assert (grid.cells == rows * cols) == (not grid.sampled)


def test_pool_figure_categories_and_partial_marks():
    config, tables, owner = _layout(batch=4, lens=(5, 40, 16, 900), layout="fragmented", seed=1)
    assert (owner == OTHER).any() and (owner == FREE).any()
    fig = pool_figures.pool_figure(owner, tables, config.lengths, config.block_size)
    heat = fig.data[0]
    z = np.array(heat.z, dtype=float).ravel()[: len(owner)]
    assert np.all(z[owner == FREE] == 0)
    assert np.all(z[owner == OTHER] == 1)
    assert np.array_equal(z[owner >= 0], 2 + owner[owner >= 0] % len(style.SEQUENCE_COLORS))
    names = [t.name for t in fig.data]
    assert "free" in names and "other sequences (not in batch)" in names
    partial = next(t for t in fig.data if t.name == "partly filled last block")
    # lens 5, 40 and 900 leave partly filled last blocks; 16 fills its block exactly
    marked = {int(b) for b in np.array(partial.customdata)[:, 0]}
    assert marked == {int(tables[0, 0]), int(tables[1, 2]), int(tables[3, 56])}
    hover = np.array(heat.customdata).ravel()
    assert "sequence 1, logical block 2" in hover[tables[1, 2]] and "8/16" in hover[tables[1, 2]]


def test_pool_figure_aggregates_large_pools():
    config, tables, owner = _layout(batch=64, lens=8192, block_size=1)
    assert len(owner) > limits.MAX_POOL_CELLS
    fig = pool_figures.pool_figure(owner, tables, config.lengths, config.block_size)
    z = np.array(fig.data[0].z, dtype=float)
    assert z.size <= limits.MAX_POOL_CELLS
    share = z[~np.isnan(z)]
    assert share.min() >= 0 and share.max() <= 1
    counts = np.array(fig.data[0].customdata)[..., 2:].sum(-1).sum()
    assert counts == len(owner)  # every block counted once


def test_token_walk_maps_tokens_to_blocks_and_slots():
    config, tables, _ = _layout()
    fig = walk_figures.token_walk_figure(tables[1], 40, 16, seq=1, num_blocks=config.num_blocks)
    z = np.array(fig.data[0].z, dtype=float)
    assert z.shape == (3, 16)
    cd = np.array(fig.data[0].customdata)
    token = 37
    row, slot = token // 16, token % 16
    assert cd[row, slot].tolist() == [token, row, tables[1, row], slot]
    assert z[row, slot] == tables[1, row]
    empty = ~np.isnan(np.array(fig.data[1].z, dtype=float))
    assert empty.sum() == 3 * 16 - 40 and empty[2, 8:].all()


def test_token_walk_and_pool_name_what_their_cells_count():
    """Issue 27: the walk writes token positions in cells coloured like the block
    table's physical block ids; its subtitle says so. The pool's reference-count key
    counts the sequences holding the physical block (legend or colour bar)."""
    config, tables, _ = _layout()
    walk = walk_figures.token_walk_figure(tables[1], 40, 16, seq=1, num_blocks=config.num_blocks)
    assert "cell numbers: token position" in walk.layout.title.subtitle.text
    assert cell_style.cell_words(walk.data[0].text)[2, 5] == "37"  # token 37 = block 2, slot 5: its position
    b = _shared_example()
    stepped = sharing_figures.pool_ref_count_figure(b.ref_counts, b.block_tables, 16)
    assert stepped.layout.legend.title.text == "colour = sequences holding the physical block"
    many = sharing_figures.pool_ref_count_figure(np.array([0, 1, 30]), np.zeros((30, 1), dtype=int) + 2, 4)
    assert (many.data[0].colorbar.title.text.replace(cell_style.COLORBAR_TITLE_GAP, "").replace("<br>", " ")
            == "colour = sequences holding the physical block")

def test_token_walk_scale_follows_a_sequence_lost_in_a_huge_pool():
    fig = walk_figures.token_walk_figure(np.arange(1000, 1064), 64 * 16, 16, num_blocks=500_000)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (1000, 1063)
    assert "this sequence's blocks" in fig.layout.title.subtitle.text
    config, tables, _ = _layout()
    small = walk_figures.token_walk_figure(tables[1], 40, 16, num_blocks=config.num_blocks)
    assert (small.data[0].zmin, small.data[0].zmax) == (0, config.num_blocks - 1)


def test_token_walk_of_an_empty_sequence():
    fig = walk_figures.token_walk_figure(np.array([-1]), 0, 16, seq=2)
    assert "no cached tokens" in fig.layout.annotations[0].text


def test_block_walk_follows_the_row():
    config, tables, _ = _layout()
    fig = walk_figures.block_walk_figure(tables[1], 40, 16, seq=1)
    assert list(fig.data[0].x) == [0, 1, 2]
    assert list(fig.data[0].y) == tables[1, :3].tolist()


def test_numbers_in_cells_only_when_they_fit():
    config, tables, _ = _layout()
    fig = cache_figures.block_table_figure(tables, config.lengths, config.block_size, config.num_blocks)
    assert fig.data[0].texttemplate == "%{text}"
    wide = walk_figures.token_walk_figure(np.arange(12), 363, 32, num_blocks=108)
    assert wide.data[0].texttemplate is None  # 32 slots of 3-digit token ids would overlap


def test_block_walk_of_an_empty_sequence_says_so():
    fig = walk_figures.block_walk_figure(np.array([-1]), 0, 16, seq=3)
    assert not fig.data
    assert fig.layout.annotations[0].text == "Sequence 3 has no cached tokens."
    assert fig.layout.xaxis.visible is False


@pytest.mark.parametrize("context_len", [1, 20, 40])
def test_token_walk_y_title_fits_beside_few_rows(context_len):
    config, tables, _ = _layout(1, context_len, 16)
    fig = walk_figures.token_walk_figure(tables[0], context_len, 16, 0, config.num_blocks)
    plot_height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert 7.5 * len(fig.layout.yaxis.title.text) <= plot_height  # ~7.5 px a character at 13 px


def test_token_walk_sampling_note_names_the_sampled_axis():
    row = np.arange(64)
    slots = walk_figures.token_walk_figure(row, 64 * 256, 256, num_blocks=64)  # 16,384 cells: every 2nd slot
    grid = sampling.sample_grid(64, 256, limits.MAX_WALK_CELLS)
    assert grid.col_stride == 2 and grid.row_stride == 1
    assert list(slots.data[0].x) == list(grid.cols)  # drawn as the page's caption says
    assert "every 2nd slot" in slots.layout.title.subtitle.text
    assert "logical block" not in slots.layout.title.subtitle.text.split("sampled")[-1]
    rows = walk_figures.token_walk_figure(np.arange(4096), 4096 * 4, 4, num_blocks=4096)
    assert "every 2nd logical block shown" in rows.layout.title.subtitle.text
    assert "slot" not in rows.layout.title.subtitle.text.split("sampled")[-1]
    table = cache_figures.block_table_figure(np.arange(256 * 2048).reshape(256, 2048), [2048 * 16] * 256, 16)
    assert "every 2nd row shown" in table.layout.title.subtitle.text  # not "every 2th row"
    assert "16 logical blocks per column" in table.layout.title.subtitle.text


def test_block_table_in_sequence_colours_matches_the_pool():
    # One colour language: coloured by sequence, a row's cells take the colour its
    # blocks have in the pool, and the physical id stays in the cell.
    from paged_attention import DecodeConfig, assign_blocks

    config = DecodeConfig(batch_size=3, context_lens=(5, 40, 17), block_size=8, block_layout="fragmented")
    tables, owner = (t.numpy() for t in assign_blocks(config))
    seq_ids = np.array([7, 12, 30])  # names, as a serving simulation's seq_id
    owner_ids = np.where(owner >= 0, seq_ids[np.clip(owner, 0, None)], owner)
    table = cache_figures.block_table_figure(tables, config.lengths, 8, config.num_blocks, seq_ids=seq_ids,
                                       color_by="sequence")
    pool = pool_figures.pool_figure(owner_ids, tables, config.lengths, 8)
    codes, text = np.asarray(table.data[0].z, dtype=float), cell_style.cell_words(table.data[0].text)
    pool_codes = np.asarray(pool.data[0].z, dtype=float).ravel()
    allocated = tables >= 0
    assert np.array_equal(codes[allocated], pool_codes[tables[allocated]])
    assert np.isnan(codes[~allocated]).all()
    assert [list(map(int, t[a])) for t, a in zip(text, allocated)] == [list(r[a]) for r, a in zip(tables, allocated)]
    assert table.data[0].colorscale == pool.data[0].colorscale and table.data[0].showscale is False
    assert "colour = sequence, as in the pool" in table.layout.title.subtitle.text
    with pytest.raises(ValueError, match="color_by"):
        cache_figures.block_table_figure(tables, config.lengths, 8, color_by="owner")


# -- sharing ---------------------------------------------------------------------------

def _shared_example():
    from explorer.cache.sharing import shared_prefix_batch

    return shared_prefix_batch((236, 114, 57, 205), 16, 45, common_prompt=64, samples=2)


def test_block_table_marks_exactly_the_cells_of_shared_blocks():
    b = _shared_example()
    fig = cache_figures.block_table_figure(b.block_tables, b.context_lens, 16, 45, ref_counts=b.ref_counts)
    marks = fig.data[-1]
    assert marks.name == "shared block (2+ sequences)"
    cells = {(int(s), int(j)) for s, j, _, _ in marks.customdata}
    t = b.block_tables
    assert cells == {(s, j) for s, j in zip(*np.nonzero(t >= 0)) if b.ref_counts[t[s, j]] > 1}
    assert all(int(p) == t[s, j] and int(k) == b.ref_counts[p] for s, j, p, k in marks.customdata)
    # Without counts, no marks; with counts but nothing shared, an empty trace.
    plain = cache_figures.block_table_figure(b.block_tables, b.context_lens, 16, 45)
    assert all("shared" not in (d.name or "") for d in plain.data)
    lone = cache_figures.block_table_figure(t[:1], (236,), 16, 45, ref_counts=np.ones(45, dtype=int))
    assert lone.data[-1].customdata is None


def test_pool_ref_count_figure_colours_each_block_by_its_holders():
    b = _shared_example()
    fig = sharing_figures.pool_ref_count_figure(b.ref_counts, b.block_tables, 16)
    z = fig.data[0].z.ravel()
    assert np.array_equal(z[:45], b.ref_counts) and np.isnan(z[45:]).all()
    assert [d.name for d in fig.data[1:]] == ["free", "1 sequence", "2 sequences", "4 sequences",
                                            "click targets"]
    assert fig.data[0].showscale is False
    holders = fig.data[0].customdata.ravel()
    assert holders[0] == "block 0<br>held by 4 sequences: 0, 1, 2, 3" and holders[44] == "block 44<br>free"
    # Many holders: a colour bar instead of one legend entry per count.
    many = sharing_figures.pool_ref_count_figure(np.array([0, 1, 30]), np.zeros((30, 1), dtype=int) + 2, 4)
    assert many.data[0].showscale is True and [d.name for d in many.data[1:]] == ["free", "1 sequence",
                                                                                     "click targets"]


def test_pool_ref_count_figure_aggregates_a_large_pool_by_the_most_holders():
    refs = np.zeros(50_000, dtype=int)
    refs[:10] = 3
    refs[10:100] = 1
    fig = sharing_figures.pool_ref_count_figure(refs, np.full((1, 1), -1), 16)
    z = fig.data[0].z.ravel()
    assert z[0] == 3 and z[2] == 1 and np.nanmax(z) == 3 and "5 per cell" in fig.layout.title.subtitle.text


def test_block_table_axes_hold_the_grid_not_its_markers():
    """Review at 1280x720: a "-1" tick on the block table's x axis (a "-2" in
    presentation mode), where the markers of the shared-block marks and click targets
    padded Plotly's autorange past the grid."""
    from explorer.cache.picking import GRID_PAD

    b = _shared_example()
    fig = cache_figures.block_table_figure(b.block_tables, b.context_lens, 16, 45, ref_counts=b.ref_counts)
    width = b.block_tables.shape[1]
    assert tuple(fig.layout.xaxis.range) == (-0.5 - GRID_PAD, width - 0.5 + GRID_PAD)
    assert tuple(fig.layout.yaxis.range) == (3.5 + GRID_PAD, -0.5 - GRID_PAD)  # 4 rows, the first on top
    assert fig.layout.xaxis.range[0] > -1 and fig.layout.xaxis.range[1] < width  # no room for a tick past the grid


def test_token_walk_writes_no_token_past_the_context():
    """The empty slots' cells carried the token ids past the context, whose glyphs
    showed in the 1 px gaps of the trace covering them."""
    fig = walk_figures.token_walk_figure(np.arange(7), 100, 16, num_blocks=31)
    text = cell_style.cell_words(fig.data[0].text)
    assert fig.data[0].texttemplate == "%{text}"
    assert text[6, 3] == "99" and set(text[6, 4:]) == {""}


# -- sliding window ----------------------------------------------------------------------

def _by_name(fig, name):
    return [t for t in fig.data if t.name == name]


@pytest.mark.parametrize("window", [1, 16, 17, 64, 299, 300])
def test_first_read_blocks_follow_the_librarys_rule(window):
    from paged_attention import build_decode_inputs
    from paged_attention.validation import check_decode_args

    config = DecodeConfig(batch_size=5, context_lens=(0, 10, 100, 300, 17), block_size=16, num_heads=2,
                          num_kv_heads=1, head_dim=8, dtype="float32")
    shape = check_decode_args(*build_decode_inputs(config).args(), window=window)
    assert window_reads.first_read_blocks(config.lengths, 16, window).tolist() == shape.first_blocks.tolist()
    # the blocks read, counted token by token: the distinct blocks of positions max(0, n - W) .. n - 1
    reads = window_reads.window_reads(config.lengths, 16, window)
    tokens = [range(max(0, n - window), n) for n in config.lengths]
    assert reads.blocks_read == sum(len({t // 16 for t in r}) for r in tokens)
    assert reads.tokens_read == sum(len(r) for r in tokens) == int(shape.attended_lens.sum())
    assert (reads.blocks_held, reads.tokens_held) == (sum(config.blocks_per_sequence), 427)


def test_window_readout_words():
    reads = window_reads.window_reads((10, 100, 300), 16, 64)
    assert reads.note() == "Logical blocks read: 11 of 27 (window 64)"
    assert reads.detail() == "each sequence reads its last 64 tokens (all of a shorter context): 138 of 410 tokens"
    assert reads.blocks_unread == 16 and "hatched" in reads.explain_unread()
    assert window_reads.window_reads((10, 100), 16, None).note() == "Logical blocks read: 8 of 8 (no window)"
    covered = window_reads.window_reads((10, 60), 16, 64)  # a window past every context greys nothing
    assert covered.blocks_unread == 0 and covered.tokens_read == covered.tokens_held == 70
    assert "covers every context" in covered.detail() and "no hatched cells" in covered.explain_unread()


@pytest.mark.parametrize("prefix, window", [(0, 64), (40, 64), (40, 8), (64, 300), (40, None)])
def test_window_reads_count_the_physical_blocks_behind_the_logical_ones(prefix, window):
    """Review: "Blocks read: 15 of 21" did not say logical or physical. They are table
    entries (logical); with shared blocks the distinct physical blocks behind them are
    fewer, counted token by token here from the table."""
    config = DecodeConfig(batch_size=4, context_lens=(70, 100, 130, 64), block_size=16, shared_prefix=prefix)
    tables = assign_blocks(config)[0].numpy()
    reads = window_reads.window_reads(config.lengths, 16, window, block_tables=tables)
    starts = [max(0, n - (window or n)) for n in config.lengths]
    read = {(s, t // 16) for s, n in enumerate(config.lengths) for t in range(starts[s], n)}
    held = {(s, t // 16) for s, n in enumerate(config.lengths) for t in range(n)}
    assert (reads.blocks_read, reads.blocks_held) == (len(read), len(held))
    physical = (len({tables[c] for c in read}), len({tables[c] for c in held}))
    assert (reads.physical_read, reads.physical_held) == physical
    assert reads.shares == (physical != (len(read), len(held))) == (prefix >= 16)  # a full block shared or none
    note = reads.physical_note() or ""
    assert note.startswith(f"physical blocks: {physical[0]} of {physical[1]}") == reads.shares != (note == "")
    assert window_reads.window_reads(config.lengths, 16, window).physical_note() is None  # no tables, no count


def _hatched(fig):
    """The cells (sequence row, column centre) the outside-window hatch covers."""
    bars = [t for t in fig.data if t.type == "bar" and t.name == cell_style.OUTSIDE_WINDOW and t.showlegend is False]
    return bars, {(round(b + h / 2), x) for bar in bars for x, b, h in zip(bar.x, bar.base, bar.y)}


def test_block_table_hatches_the_blocks_before_each_window():
    config, tables, _ = _layout(lens=(10, 100, 300))
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=64)
    first = np.array([0, 2, 14])  # blocks of max(0, n - 64) // 16
    outside = (np.arange(tables.shape[1])[None, :] < first[:, None]) & (tables >= 0)
    # Issue 27: filled grey they read as the pool's free blocks. They keep their own
    # blue (trace 0) under a white hatch that covers exactly them; the legend names it.
    (hatch,), cells = _hatched(fig)  # strips around each id (tests/test_block_table_ink.py): a cell's own
    assert {(r, float(round(x))) for r, x in cells} == {(int(r), float(c)) for r, c in zip(*np.nonzero(outside))} and outside.sum() == 16
    assert hatch.marker.pattern.shape == "/" and hatch.marker.pattern.fgcolor == "#FFFFFF"
    (key,) = [t for t in fig.data if t.type == "bar" and t.showlegend is not False]
    assert key.name == "outside the window: held, not read" and key.showlegend is not False
    assert key.marker.pattern.shape == "/"
    # ids written above the hatch, none under it in trace 0
    (ids,) = _by_name(fig, cell_style.OUTSIDE_WINDOW + " ids")
    assert sorted(zip(ids.y, ids.x, map(int, ids.text))) == sorted(
        (float(r), float(c), int(tables[r, c])) for r, c in zip(*np.nonzero(outside)))
    assert ids.textfont.size == style.font_px("cell")
    assert not np.array(fig.data[0].text)[outside].any()
    assert not [t for t in fig.data if "stroke" in (t.name or "")]
    # a bold line down the cell edge where each window starts (rows 1 and 2; row 0 reads all)
    (start,) = _by_name(fig, "window start")
    assert [x for x in start.x if x is not None] == [1.5, 1.5, 13.5, 13.5]
    assert [y for y in start.y if y is not None] == [0.5, 1.5, 1.5, 2.5]
    targets = _by_name(fig, "click targets")[0]
    cells = np.stack([targets.customdata[:, 0], targets.customdata[:, 1]], -1)  # (sequence, logical block)
    marked = np.array([cell_style.OUTSIDE_WINDOW in t for t in targets.text])
    assert np.array_equal(marked, outside[cells[:, 0], cells[:, 1]]) and "%{text}" in targets.hovertemplate
    assert "before the sliding window of 64 tokens" in fig.layout.title.subtitle.text
    # the allocated cells keep their colour under the hatch
    assert np.array_equal(np.array(fig.data[0].z, dtype=float)[tables >= 0], tables[tables >= 0])


@pytest.mark.parametrize("window", [None, 300, 10**6])
def test_a_window_that_leaves_nothing_out_marks_nothing(window):
    config, tables, _ = _layout(lens=(10, 100, 300))
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=window)
    assert not _by_name(fig, cell_style.OUTSIDE_WINDOW)
    assert "sliding window" not in fig.layout.title.subtitle.text


def test_an_aggregated_column_is_outside_only_when_all_its_blocks_are():
    lens = [2048 * 16, 2048 * 16 - 16]
    tables = np.arange(2 * 2048, dtype=np.int64).reshape(2, 2048)
    window = 2048 * 16 - 48 * 16  # the windows start at logical blocks 48 and 47
    fig = cache_figures.block_table_figure(tables, lens, 16, window=window)
    edges = np.array(fig.data[0].x)
    per_col = int(edges[1] - edges[0])
    assert per_col == 16
    marked = np.zeros((2, len(edges) - 1), bool)
    for row, x in _hatched(fig)[1]:
        marked[row, int((x - edges[0]) // per_col)] = True
    # columns of blocks 0-15, 16-31, 32-47 lie before block 48; before 47 only the first two (32-47 is partly read)
    assert marked[0].nonzero()[0].tolist() == [0, 1, 2] and marked[1].nonzero()[0].tolist() == [0, 1]


# -- issue 27's back row: ticks spaced for the plot as drawn ---------------------

#: The pool's plot area beside its colour bar as Chromium drew it at 1280 px
#: (``?batch=4096``): 146 px wide, 137 px in presentation mode.
POOL_BAR_DRAWN_PX = {1.0: 146, style.PRESENTATION_SCALE: 137}


def _tick_gap_px(ticks, n_cols, plot_px):
    values = list(ticks)
    return (values[1] - values[0]) * plot_px / n_cols


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_big_pool_x_ticks_stay_apart_in_the_plot_as_drawn(scale):
    num_blocks = 27_385  # the sidebar's pool at ?batch=4096: aggregated, 3 blocks a cell
    owner = np.where(np.arange(num_blocks) % 9 == 0, FREE, np.arange(num_blocks) % 4096)
    tables = np.arange(4096 * 6).reshape(4096, 6) % num_blocks
    refs = np.bincount(tables.ravel(), minlength=num_blocks)
    refs[:40] = 40  # many holders: a colour bar beside the grid
    with style.presentation(scale):
        figs = [pool_figures.pool_figure(owner, tables, [90] * 4096, 16),
                sharing_figures.pool_ref_count_figure(refs, tables, 16)]
        size = style.font_px("tick")
    for fig in figs:
        n_cols = sampling.pool_grid_shape(num_blocks)[1]
        assert fig.data[0].showscale is not False  # a colour bar takes the column's width
        ticks = fig.layout.xaxis.tickvals
        widest = max(len(t) for t in fig.layout.xaxis.ticktext) * style.DIGIT_WIDTH * size
        assert len(ticks) >= 2
        assert _tick_gap_px(ticks, n_cols, POOL_BAR_DRAWN_PX[scale]) >= widest + 0.5 * size, fig.layout.title.text


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_big_table_y_ticks_a_line_apart_round_and_with_separators(scale):
    lens = [90 + (i * 37) % 200 for i in range(4096)]
    tables = np.arange(4096 * 16).reshape(4096, 16)
    with style.presentation(scale):
        fig = cache_figures.block_table_figure(tables, lens, 16, 4096 * 16)
        line = style.LINE_HEIGHT * style.font_px("tick")
        plot_height = style.plot_area_height(fig.layout.height, fig.layout.title.text.split("<br>", 1)[-1],
                                             width_px=style.HALF_FIGURE_PX)
    rows = np.asarray(fig.data[0].y)
    vals = list(fig.layout.yaxis.tickvals)
    per_row = plot_height / len(rows)
    assert (vals[1] - vals[0]) / (rows[1] - rows[0]) * per_row >= line * 0.95
    assert (vals[1] - vals[0]) in (20, 40, 50, 100, 200, 250, 500, 1000)
    assert "1,000" in fig.layout.yaxis.ticktext or "2,000" in fig.layout.yaxis.ticktext
    assert all("," in t for t, v in zip(fig.layout.yaxis.ticktext, vals) if v >= 1000)

