"""The kernel trace with draft tokens (issue 25): every query token's traced row
equals ``reference_decode`` with ``query_lens`` and the Triton kernel's output,
under every plan (splits, tiles, subtiles, the balanced plan, a window shorter
than the draft, a shared prefix the pass leaves to each sequence); the tile's
(token, head) rows and, cell by cell, the mask of every tile where the rows'
masks differ, against the causal rule's definition; how the kernel walks; the
bad values the trace refuses, with the launcher's message where the launcher
refuses them."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from explorer.kernel.tile_rows import MASK_STATES, kernel_ranges, new_token_tiles, row_span, rows_differ
from explorer.kernel.trace import trace_decode
from explorer.kernel.view import launch_plan, trace_row
from helpers import assert_matches

SMALL = dict(num_heads=6, num_kv_heads=2, head_dim=20, dtype="float32")

#: (context lengths, query lengths, block size, extra DecodeConfig fields, plan overrides).
CASES = {
    # ragged q_len with 1 among them; 16 new tokens filling exactly block 2 (positions 32..47)
    "ragged-fill-one-block": ((48, 30, 1), (16, 2, 1), 16, {}, {}),
    # split-K over small tiles: the new tokens straddle a split boundary
    "split-k": ((75,), (9,), 4, {}, dict(num_splits=4, block_n=16)),
    # blocks larger than a tile (subtiles), with the window starting mid-block for each token
    "subtiles-window": ((100, 61), (6, 3), 64, dict(window=30), dict(block_n=16)),
    # a window shorter than the draft: the first tokens' windows end before the last's starts
    "window-shorter-than-draft": ((50, 37), (8, 6), 4, dict(window=3), dict(block_n=16)),
    # sinks and a soft-cap on a balanced plan of a ragged batch
    "sinks-cap-balanced": ((61, 40, 9), (5, 2, 3), 8, dict(sinks=True, soft_cap=2.0), dict(balanced=True)),
    # every token of the context is new
    "all-new": ((7, 12), (7, 12), 5, {}, {}),
}


def _inputs(lengths, q_lens, block_size, extra, seed=0):
    config = pa.DecodeConfig(batch_size=len(lengths), context_lens=lengths, query_lens=q_lens, block_size=block_size,
                             seed=seed, **{**SMALL, **extra})
    return pa.build_decode_inputs(config, poison=True)


@pytest.mark.parametrize("case", CASES)
def test_every_tokens_trace_equals_the_reference_and_the_kernel(case):
    lengths, q_lens, bs, extra, overrides = CASES[case]
    inputs = _inputs(lengths, q_lens, bs, extra)
    reference = pa.reference_decode(*inputs.args(), **inputs.kwargs())
    kernel = pa.prepare_triton_decode(*inputs.args(), **inputs.kwargs(), **overrides)()
    first = [0, *torch.tensor(q_lens).cumsum(0).tolist()]
    for seq, q in enumerate(q_lens):
        for token in range(q):
            for head in (0, 4):
                trace = trace_decode(inputs, seq, head, token=token, **overrides)
                row = first[seq] + token
                assert trace.query_len == q and trace.token == token and trace.row_len == lengths[seq] - q + 1 + token
                torch.testing.assert_close(trace.output, reference[row, head].cpu(), atol=1e-12, rtol=1e-12)
                assert trace.max_abs_error < 1e-12
                assert_matches(kernel[row : row + 1, head], inputs.query[row : row + 1, head],
                               trace.output[None].to(kernel.device))
                # the row scores each of its positions exactly once, over all its tiles
                start, length = row_span(lengths[seq], q, token, inputs.config.window)
                assert trace.tiles["valid_tokens"].sum() == length - start


def test_the_last_token_is_traced_by_default_and_equals_the_one_token_step():
    inputs = _inputs((40, 23), (3, 5), 8, {})
    default = trace_decode(inputs, 1, 2)
    assert default.token == 4 and default.position == 22
    one = pa.build_decode_inputs(inputs.config.with_(query_lens=1), poison=True)
    single = trace_decode(one, 1, 2)
    assert single.query_len == 1 and single.tile_rows is None and single.mask is None
    torch.testing.assert_close(default.output, single.output, atol=1e-12, rtol=0)


@pytest.mark.parametrize("case", ["ragged-fill-one-block", "split-k", "window-shorter-than-draft", "subtiles-window"])
def test_mask_cells_follow_the_causal_rule_and_the_traced_rows_tiles(case):
    lengths, q_lens, bs, extra, overrides = CASES[case]
    inputs = _inputs(lengths, q_lens, bs, extra)
    window = inputs.config.window
    seq = 0
    n, q = lengths[seq], q_lens[seq]
    token = q // 2
    trace = trace_decode(inputs, seq, 1, token=token, **overrides)
    mask = trace.mask
    assert set(mask["state"]) <= set(MASK_STATES) and set(mask["token"]) == set(range(q))
    load_from = max(0, n - q + 1 - window) if window is not None else 0
    for t, p, state in zip(mask["token"], mask["position"], mask["state"]):
        own = n - q + t  # token t's position
        if p >= n or p < load_from:
            assert state == "unloaded", (t, p)
        elif p > own:
            assert state == "causal", (t, p)  # a later new token
        elif window is not None and p < own + 1 - window:
            assert state == "window", (t, p)
        else:
            assert state == "scored", (t, p)
    # every tile is masked per row; those holding a new token's position are in the mask
    assert trace.tiles["per_row"].all()
    new = set(range(n - q, n))
    assert new <= set(mask["position"])
    drawn = set(zip(mask["split"], mask["tile"]))
    for tile in trace.tiles.itertuples():  # a tile left out is one where every row's mask is the same
        if (tile.split, tile.tile) not in drawn:
            assert tile.causal_masked == 0 and tile.valid_tokens == tile.loaded_tokens
    # the traced row's counts in each tile are its cells of the mask
    mine = mask[mask["token"] == token]
    for tile in trace.tiles[[(s, t) in drawn for s, t in zip(trace.tiles["split"], trace.tiles["tile"])]].itertuples():
        cells = mine[(mine["split"] == tile.split) & (mine["tile"] == tile.tile)]
        assert (cells["state"] == "scored").sum() == tile.valid_tokens
        assert (cells["state"] == "causal").sum() == tile.causal_masked
        assert (cells["state"] != "unloaded").sum() == tile.loaded_tokens
    assert new_token_tiles(mask, n, q) == sorted({(int(s), int(t)) for s, t, p in
                                                  zip(mask["split"], mask["tile"], mask["position"]) if p in new})


def test_tile_rows_hold_token_by_head():
    inputs = _inputs((29,), (4,), 4, dict(window=6))
    trace = trace_decode(inputs, 0, 5, token=2)  # query head 5: KV head 1 of 2, group of 3
    rows = trace.tile_rows
    assert trace.kv_head == 1 and len(rows) == 4 * 3
    assert (rows["token"] == rows["row"] // 3).all() and (rows["head"] == 3 + rows["row"] % 3).all()
    assert (rows["position"] == 25 + rows["token"]).all() and (rows["row_len"] == rows["position"] + 1).all()
    assert (rows["row_start"] == rows["row_len"] - 6).all()


def test_how_the_kernel_walks_and_where_the_rows_differ():
    # draft tokens in the batch: one loop, every tile masked per row (a sequence of one token too)
    assert kernel_ranges(0, 10, None, 4) == [(0, 10, True, False)]
    assert kernel_ranges(2, 10, 20, 8) == [(2, 10, True, True)]
    # one query token in the batch: the plain kernel's mask
    assert kernel_ranges(0, 10, 20, 1) == [(0, 10, False, True)]
    assert kernel_ranges(3, 3, None, 4) == []
    # 37 tokens, 4 new (positions 33..36): a tile differs from position 34 on (token 0's first masked one)
    assert not rows_differ(16, 33, 37, 4, None) and rows_differ(32, 34, 37, 4, None)
    # with a window of 20 also before the last token's window start (17)
    assert rows_differ(14, 20, 37, 4, 20) and not rows_differ(17, 32, 37, 4, 20)


def test_a_packed_row_walks_as_in_its_batch():
    """The page traces one sequence packed alone; a sequence of one token in a batch
    with draft tokens is walked in the kernel's three ranges all the same."""
    config = pa.DecodeConfig(batch_size=2, context_lens=(37, 37), query_lens=(1, 4), block_size=4, **SMALL)
    tables = pa.build_decode_inputs(config).block_tables.numpy()
    plan = launch_plan(config, tables, block_n=16)
    plain = trace_row(config, tables, 0, 4, plan=plan)
    assert plain.query_len == 1 and plain.tiles["per_row"].all()
    assert plain.max_abs_error < 1e-12
    drafts = trace_row(config, tables, 1, 4, plan=plan, token=0)
    assert drafts.token == 0 and drafts.max_abs_error < 1e-12
    assert set(drafts.tile_rows["head"]) == {3, 4, 5}  # KV head 1's query heads, as the configuration numbers them
    assert set(drafts.tiles["query_rows"]) == {4 * 3}


@pytest.mark.parametrize("window", [None, 20])
def test_a_shared_prefix_beside_draft_tokens_is_read_by_each_sequence(window):
    """With draft tokens the launcher runs no prefix pass ("detect" finds no group):
    each sequence's own programs read its shared blocks, and the trace says so."""
    inputs = _inputs((33, 40, 40, 50), (3, 1, 4, 2), 4, dict(shared_prefix=30, prefix_groups=2, window=window,
                                                             sinks=True))
    reference = pa.reference_decode(*inputs.args(), **inputs.kwargs())
    for seq, row in ((0, 1), (1, 3), (2, 5), (3, 9)):
        trace = trace_decode(inputs, seq, 3, token=row - [0, 3, 4, 8][seq], shared_prefixes="detect")
        assert trace.prefix_group is None and (trace.tiles["pass"] == "own").all()
        torch.testing.assert_close(trace.output, reference[row, 3], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kwargs, rule", [
    (dict(token=4), r"token must lie in \[0, query_lens\[0\]=4\); got 4"),
    (dict(token=-1), r"token must lie in \[0, query_lens\[0\]=4\)"),
    (dict(token=1.0), r"token must lie in"),
    (dict(query_tokens=2), r"query_tokens must be an integer of at least the inputs' most query tokens of one "
                           r"sequence \(4\); got 2"),
    (dict(query_lens=torch.tensor([4, 2], dtype=torch.int32)), "adds up to 6"),  # the launcher's own check
    (dict(query_lens=torch.tensor([1, 6], dtype=torch.int32)),
     r"query_lens\[1\] = 6 must lie in \[1, max\(1, context_lens\[1\]\) = 5\]"),
    (dict(shared_prefixes=[pa.PrefixGroup((0, 1), 1)]), "the prefix pass takes one query token per sequence"),
])
def test_bad_values_are_refused_before_any_trace(kwargs, rule):
    inputs = _inputs((9, 5), (4, 3), 4, {})
    with pytest.raises(ValueError, match=rule):
        trace_decode(inputs, 0, 0, **kwargs)
