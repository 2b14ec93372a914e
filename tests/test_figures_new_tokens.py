"""This step's new tokens (draft tokens, issue 25) in the paged-cache figures: the
block table's and the token walk's stars on exactly the cells and slots that hold
a sequence's last ``q`` positions, none with one token (today's view), a window
read from the first new token's, and the stars' colour apart from every palette
of the Block table page."""

from __future__ import annotations

import numpy as np
import pytest
from test_colour_language import assert_disjoint, colours

from explorer import style
from explorer.cache import cell_style, walk_figures
from explorer.cache import figures as cache_figures
from explorer.cache import window
from paged_attention import DecodeConfig, assign_blocks, build_decode_inputs
from paged_attention.validation import check_decode_args


def _stars(fig):
    found = [t for t in fig.data if t.name == cell_style.NEW_TOKENS]
    assert len(found) <= 1
    return found[0] if found else None


def _config(lens, q, block_size=16, **more):
    return DecodeConfig(batch_size=len(lens), context_lens=lens, query_lens=q, block_size=block_size, num_heads=2,
                        num_kv_heads=1, head_dim=8, dtype="float32", **more)


@pytest.mark.parametrize("lens, q, block_size", [
    ((5, 40, 16), 4, 16),               # inside one block, across a block edge at 32 (36..39 stay in block 2)
    ((33, 17, 48, 0), (4, 2, 16, 1), 16),  # 33: positions 29..32 span blocks 1 and 2; 16 fill block 2 of 48; empty
    ((7, 12), (7, 12), 5),              # every token new, odd block size
])
def test_block_table_stars_the_cells_that_hold_new_tokens(lens, q, block_size):
    config = _config(lens, q, block_size)
    tables = assign_blocks(config)[0].numpy()
    fig = cache_figures.block_table_figure(tables, config.lengths, block_size, config.num_blocks,
                                           query_lens=config.query_lengths)
    stars = _stars(fig)
    custom = np.asarray(stars.customdata).reshape(-1, 6)
    # token by token: the distinct blocks of positions n - q .. n - 1 of every sequence
    want = {(b, p // block_size) for b, (n, k) in enumerate(zip(config.lengths, config.query_lengths))
            for p in range(n - k, n) if n}
    assert {(int(s), int(j)) for s, j in custom[:, :2]} == want and len(custom) == len(want)
    for s, j, first, last, k, total in custom:  # each cell's new positions, and the sequence's count
        n = config.lengths[s]
        new = [p for p in range(n - config.query_lengths[s], n) if p // block_size == j]
        assert (first, last, k, total) == (new[0], new[-1], len(new), config.query_lengths[s])
    # in each cell's bottom-right corner (the y axis runs down), the legend naming them
    assert np.allclose(np.asarray(stars.x), custom[:, 1] + 0.3) and np.allclose(np.asarray(stars.y), custom[:, 0] + 0.28)
    assert stars.showlegend is not False and stars.marker.color == cell_style.NEW_TOKEN_COLOR
    assert "positions %{customdata[2]}–%{customdata[3]}" in stars.hovertemplate
    assert "★ new tokens" in fig.layout.title.subtitle.text


def test_one_token_per_sequence_draws_no_stars():
    """Without query_lens (the page passes none for one token): today's figure, trace for trace."""
    config = _config((5, 40, 16), 1)
    tables = assign_blocks(config)[0].numpy()
    plain = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks)
    assert _stars(plain) is None and "★" not in plain.layout.title.subtitle.text
    walk = walk_figures.token_walk_figure(tables[1], 40, 16, 1, config.num_blocks)
    assert _stars(walk) is None and "★" not in walk.layout.title.subtitle.text


def test_an_aggregated_column_is_starred_where_it_holds_new_tokens():
    """A table wider than the plot draws k blocks a column: the star is on the column
    of the last block, its hover on that block's new positions."""
    lens = (5, 1_048_576, 57)
    config = _config(lens, 8)
    tables = assign_blocks(config)[0].numpy()
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks,
                                           query_lens=config.query_lengths)
    grid = cache_figures.block_table_grid(*tables.shape)
    assert grid.col_stride > 1
    custom = np.asarray(_stars(fig).customdata).reshape(-1, 6)
    by_seq = {int(row[0]): row for row in custom}
    assert sorted(by_seq) == [0, 1, 2] and len(custom) == 3
    assert by_seq[1][2:5].tolist() == [1_048_568, 1_048_575, 8]
    assert by_seq[1][1] == (65_535 // grid.col_stride) * grid.col_stride  # the first block of the last column


def test_token_walk_stars_the_last_q_slots():
    config = _config((5, 40), (3, 6))
    tables = assign_blocks(config)[0].numpy()
    fig = walk_figures.token_walk_figure(tables[1], 40, 16, 1, config.num_blocks, query_len=6)
    stars = _stars(fig)
    custom = np.asarray(stars.customdata).reshape(-1, 4)
    assert custom[:, 0].tolist() == list(range(34, 40)) and custom[:, 1].tolist() == [1, 2, 3, 4, 5, 6]
    assert custom[:, 2].tolist() == [tables[1, 2]] * 6 and custom[:, 3].tolist() == list(range(2, 8))
    # beside each token's number, in the cell's top-right corner (the y axis runs down)
    assert fig.data[0].texttemplate == "%{text}"
    assert np.allclose(np.asarray(stars.x), custom[:, 3] + 0.3) and np.allclose(np.asarray(stars.y), 2 - 0.3)
    assert "attends to positions 0–%{customdata[0]}" in stars.hovertemplate and "of 6" in stars.hovertemplate
    assert "★ the last 6 new tokens" in fig.layout.title.subtitle.text
    # cells too small for a number: the star takes the cell's centre, larger
    wide = _config((40,), 4, block_size=256)
    fig = walk_figures.token_walk_figure(assign_blocks(wide)[0].numpy()[0], 40, 256, 0, wide.num_blocks, query_len=4)
    centred = _stars(fig)
    assert fig.data[0].texttemplate is None and list(centred.x) == [36, 37, 38, 39] and list(centred.y) == [0] * 4
    # more new tokens than the context holds: every token, no more
    short = walk_figures.token_walk_figure(tables[0], 5, 16, 0, config.num_blocks, query_len=9)
    assert np.asarray(_stars(short).customdata).reshape(-1, 4)[:, 0].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("w", [1, 3, 16, 17, 64, 300])
def test_a_window_is_read_from_the_first_new_tokens(w):
    """The blocks and tokens read with draft tokens follow the library's rule
    (DecodeShape.first_blocks and attended_lens with query_lens)."""
    config = _config((0, 10, 100, 300, 17), (1, 4, 8, 16, 17))
    inputs = build_decode_inputs(config)
    shape = check_decode_args(*inputs.args(), window=w, query_lens=inputs.query_lens)
    q = config.query_lengths
    assert window.first_read_blocks(config.lengths, 16, w, q).tolist() == shape.first_blocks.tolist()
    reads = window.window_reads(config.lengths, 16, w, q)
    tokens = [range(max(0, n - k + 1 - w), n) for n, k in zip(config.lengths, q)]  # the first new token's window on
    assert reads.blocks_read == sum(len({t // 16 for t in r}) for r in tokens)
    assert reads.tokens_read == sum(len(r) for r in tokens) == int(shape.attended_lens.sum())
    assert window.window_reads(config.lengths, 16, w, [1] * 5) == window.window_reads(config.lengths, 16, w)


def test_window_words_with_draft_tokens():
    reads = window.window_reads((10, 100, 300), 16, 64, (1, 4, 4))
    assert reads.detail() == ("each new token reads the 64 tokens up to itself, so a sequence reads from its first "
                              "new token's window on: 144 of 410 tokens")
    # the block table greys only what the first new token's window leaves out
    config = _config((10, 100, 300), (1, 4, 4))
    tables = assign_blocks(config)[0].numpy()
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=64,
                                           query_lens=config.query_lengths)
    hatch = next(t for t in fig.data if t.name == cell_style.OUTSIDE_WINDOW)
    first = np.array([0, 33 // 16, 233 // 16])  # max(0, n - q + 1 - 64) // 16
    outside = (np.arange(tables.shape[1])[None, :] < first[:, None]) & (tables >= 0)
    assert {(round(b + h / 2), float(round(x))) for x, b, h in zip(hatch.x, hatch.base, hatch.y)} == {
        (int(r), float(c)) for r, c in zip(*np.nonzero(outside))}


def test_the_stars_colour_is_apart_from_every_palette_of_the_block_table_page():
    assert_disjoint({
        "new tokens": colours([cell_style.NEW_TOKEN_COLOR]),
        "physical block id": colours(style.BLOCK_COLORSCALE),
        "sequence": colours(style.SEQUENCE_COLORS),
        "sequences holding the block": colours(style.REF_COUNT_COLORS),
    })
