"""The kernel page's view of the trace: one row traced like the full trace, size limits, the split note."""

import numpy as np
import pandas as pd
import pytest

from explorer import limits
from explorer.kernel import notes
from explorer.kernel import view as kernel_view
from explorer.kernel.trace import trace_decode
from helpers import SWEEP_BASE as BASE
from paged_attention import DecodeConfig, build_decode_inputs, plan_launch
from paged_attention.shared_prefix import own_shape
from paged_attention.validation import check_decode_args


@pytest.mark.parametrize("block_size, overrides", [(16, {}), (3, {"num_splits": 3}), (16, {"block_n": 16, "num_splits": 2}),
                                                    (64, {"block_n": 16})])
def test_row_trace_walks_like_the_full_trace(block_size, overrides):
    config = DecodeConfig(batch_size=3, context_lens=(300, 97, 1), num_heads=6, num_kv_heads=2, head_dim=24,
                          block_size=block_size, dtype="float32", block_layout="shuffled", seed=2)
    inputs = build_decode_inputs(config)
    tables = inputs.block_tables.numpy()
    plan = kernel_view.launch_plan(config, tables, **overrides)
    assert plan == plan_launch(check_decode_args(*inputs.args()), inputs.query.device, inputs.query.dtype, **overrides)
    walk = ["split", "tile", "subtile", "first_block", "end_block", "token_start", "token_end", "valid_tokens",
            "masked_lanes", "physical_blocks", "table_lookups"]
    for seq, head in [(0, 0), (0, 5), (1, 3), (2, 2)]:
        full = trace_decode(inputs, seq, head, plan=plan)
        row = kernel_view.trace_row(config, tables, seq, head, plan=plan)
        pd.testing.assert_frame_equal(row.tiles[walk], full.tiles[walk])
        assert (row.seq, row.head, row.kv_head) == (seq, head, head // 3)
        assert row.max_abs_error < 1e-12
        assert kernel_view.row_tiles(plan, config.lengths[seq]) == len(row.tiles)


def test_trace_size_limits():
    plan = kernel_view.launch_plan(BASE, np.zeros((2, 3), np.int64), block_n=16)
    assert kernel_view.trace_size_error(37, plan) is None
    assert "at most" in kernel_view.trace_size_error(limits.MAX_TRACE_TOKENS + 1, plan)
    long = BASE.with_(context_lens=limits.MAX_TRACE_TOKENS)
    plan = kernel_view.launch_plan(long, np.zeros((2, long.max_num_blocks), np.int64), block_n=16, num_splits=1)
    assert "tiles" in kernel_view.trace_size_error(long.lengths[0], plan)
    with pytest.raises(ValueError, match="seq must lie"):
        kernel_view.trace_row(BASE, np.zeros((2, 3), np.int64), 2, 0, plan=plan)


def test_split_note_says_when_and_why_the_split_count_was_capped():
    config = DecodeConfig(batch_size=3, context_lens=(0, 5000, 31), block_size=16)
    tables = np.zeros((3, config.max_num_blocks), np.int64)
    plan = kernel_view.launch_plan(config, tables, num_splits=256)
    assert plan.num_splits == 157
    note = kernel_view.split_note(config, 256, plan)
    assert note.startswith("Splits capped from 256 to 157: the longest sequence has 313 blocks of 16 tokens")
    assert "256 splits need 2 blocks each" in note
    assert kernel_view.split_note(config, 7, kernel_view.launch_plan(config, tables, num_splits=7)) is None
    short = config.with_(context_lens=(100, 50, 3))
    plan = kernel_view.launch_plan(short, tables[:, :7], num_splits=256)
    assert kernel_view.split_note(short, 256, plan) == (
        "Splits capped from 256 to 7: the longest sequence has 7 blocks of 16 tokens, and a split covers at "
        "least one block.")
    ones = config.with_(context_lens=(0, 5000, 31), block_size=1)
    plan = kernel_view.launch_plan(ones, np.zeros((3, 5000), np.int64), num_splits=10_000)
    assert "has 5,000 blocks of 1 token," in kernel_view.split_note(ones, 10_000, plan)  # not "1 tokens"


@pytest.mark.parametrize("lengths, block_size, expected", [
    ((236, 57), 16, (4, 32)),  # 15 blocks: 4 splits of 4, 3 with BLOCK_N = 32 give 2 tiles each
    ((30000,), 16, (4, 256)),  # long: the largest tile that still gives each split 2 tiles
    ((20, 3), 16, (2, 16)),  # 2 blocks: 2 splits of one tile each, the most this row can show
    ((16,), 16, None),  # one block: nothing to split
    ((0, 0), 16, None),
])
def test_showcase_plan_splits_the_row_into_several_tiles(lengths, block_size, expected):
    config = DecodeConfig(batch_size=len(lengths), context_lens=lengths, block_size=block_size, device="cpu")
    tables = np.array([[b for b in range(-(-max(lengths) // block_size) or 1)]] * len(lengths))
    assert kernel_view.showcase_plan(config, tables, 0) == expected
    if expected:
        plan = kernel_view.launch_plan(config, tables, num_splits=expected[0], block_n=expected[1])
        assert kernel_view.row_splits(plan, lengths[0]) >= 2



@pytest.mark.parametrize("kv_dtype", [None, "float8_e4m3fn"])
def test_the_page_plans_as_the_kernel_does_for_the_cache_dtype(kv_dtype):
    """The page's plan is the one triton_decode picks for this cache: an fp8 batch of
    64+ (sequence, KV head) rows that splits of 128 tokens make 1024 programs runs one warp per program
    (launch_plan)."""
    config = DecodeConfig(batch_size=64, context_lens=600, num_heads=8, num_kv_heads=4, head_dim=32, block_size=16,
                          kv_dtype=kv_dtype)
    inputs = build_decode_inputs(config)
    shape = check_decode_args(*inputs.args(), **inputs.scales())
    expected = plan_launch(shape, inputs.query.device, inputs.query.dtype)
    assert kernel_view.launch_plan(config, inputs.block_tables.numpy()) == expected
    assert expected.num_warps == (1 if kv_dtype else 4)


def test_row_trace_with_a_shared_prefix_walks_like_the_full_trace():
    """The page's row trace of a shared-prefix batch: the prefix pass's tiles and the row's own, the group-mates
    of each prefix program, and the merge equal to the reference, as the full trace of the whole batch."""
    config = DecodeConfig(batch_size=5, context_lens=(1400, 1100, 1024, 1800, 1040), num_heads=6, num_kv_heads=2,
                          head_dim=24, block_size=16, dtype="float32", block_layout="shuffled", seed=2,
                          shared_prefix=1024, prefix_groups=2)
    inputs = build_decode_inputs(config)
    tables = inputs.block_tables.numpy()
    groups = kernel_view.prefix_groups(config, tables)
    assert [g.sequences for g in groups] == [(0, 1, 2), (3, 4)]
    plan = kernel_view.launch_plan(config, tables, groups=groups)
    prefix = kernel_view.prefix_plan(config, tables, groups)
    shape = check_decode_args(*inputs.args())
    assert plan == plan_launch(own_shape(shape, groups), inputs.query.device, inputs.query.dtype)
    walk = ["split", "pass", "sequences", "query_rows", "tile", "first_block", "end_block", "token_start",
            "token_end", "valid_tokens", "masked_lanes", "physical_blocks", "table_lookups"]
    for seq, head in [(0, 0), (2, 5), (4, 3)]:
        full = trace_decode(inputs, seq, head, plan=plan, shared_prefixes=groups, prefix_plan=prefix)
        row = kernel_view.trace_row(config, tables, seq, head, plan=plan, groups=groups, prefix=prefix)
        pd.testing.assert_frame_equal(row.tiles[walk], full.tiles[walk])
        pd.testing.assert_frame_equal(row.splits[["split", "pass", "sequences"]], full.splits[["split", "pass", "sequences"]])
        assert row.prefix_group == full.prefix_group and row.max_abs_error < 1e-12
        assert set(row.tiles.loc[row.tiles["pass"] == "prefix", "sequences"]) == {len(row.prefix_group.sequences)}
        # Shared blocks: the same physical ids in every member's prefix tiles.
        mate = row.prefix_group.sequences[0]
        assert set(row.tiles.loc[row.tiles["pass"] == "prefix", "physical_blocks"].sum()) == set(tables[mate][:64])
    assert kernel_view.showcase_plan(config, tables, 0, groups) is None  # the prefix pass already makes a merge
    with pytest.raises(ValueError, match="prefix="):
        kernel_view.trace_row(config, tables, 0, 0, plan=plan, groups=groups)


@pytest.mark.parametrize("block_size, overrides", [(16, {"num_splits": 3}), (64, {"block_n": 16})])
def test_row_trace_with_options_plans_and_walks_like_the_full_trace(block_size, overrides):
    config = DecodeConfig(batch_size=3, context_lens=(300, 97, 1), num_heads=6, num_kv_heads=2, head_dim=24,
                          block_size=block_size, dtype="float32", block_layout="shuffled", seed=2, window=45,
                          sinks=True, soft_cap=2.0)
    inputs = build_decode_inputs(config, poison=True)
    tables = inputs.block_tables.numpy()
    plan = kernel_view.launch_plan(config, tables, **overrides)
    # The launcher's own plan for the window's lengths.
    assert plan == plan_launch(own_shape(check_decode_args(*inputs.args(), **inputs.kwargs()), ()),
                               inputs.query.device, inputs.query.dtype, **overrides)
    walk = ["split", "tile", "subtile", "first_block", "end_block", "token_start", "token_end", "valid_tokens",
            "masked_lanes", "physical_blocks", "table_lookups"]
    for seq, head in [(0, 0), (1, 3), (2, 2)]:
        full = trace_decode(inputs, seq, head, plan=plan)
        row = kernel_view.trace_row(config, tables, seq, head, plan=plan)
        pd.testing.assert_frame_equal(row.tiles[walk], full.tiles[walk])
        assert row.max_abs_error < 1e-12 and row.window_start == full.window_start
        assert row.sink is not None and row.sink_term > 0 and (row.logits["capped"].abs() <= 2.0).all()
    work = kernel_view.work_list(plan, config.lengths, window_starts=config.window_starts)
    own = work[work["seq"] == 0]
    assert own["first_block"].min() == 255 // block_size == kernel_view.window_block(config, 0)


def test_showcase_note_counts_the_walk_the_trace_shows_with_a_window():
    """Issue 27: with a window of 1 and 16 draft tokens the kernel's own plan (1 split) walks sequence 0 from its
    window's first block as 1 split of 1 tile; the note said "8 splits of 8 tiles", the whole context's count."""
    config = DecodeConfig(batch_size=4, context_lens=(236, 114, 57, 205), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32", window=1, query_lens=16, seed=0)
    tables = build_decode_inputs(config).block_tables.numpy()
    own = kernel_view.launch_plan(config, tables)
    assert (own.block_n, own.num_splits, kernel_view.window_block(config, 0)) == (32, 1, 13)
    row = kernel_view.trace_row(config, tables, 0, 0, plan=own)
    assert kernel_view.row_walk(config, own, 0) == (row.splits["split"].nunique(), len(row.tiles)) == (1, 1)
    assert kernel_view.showcase_plan(config, tables, 0) is not None  # the page opens overridden: the note shows
    assert ("walks sequence 0 from block 13 (its window's first) as 1 split of 1 tile in all: nothing to merge."
            in notes.showcase_note(own, config, 0))
    # Without a window the count is the whole context's, and agrees with the trace as well.
    plain = config.with_(window=None, query_lens=1)
    plan = kernel_view.launch_plan(plain, tables, num_splits=2, block_n=64)
    row = kernel_view.trace_row(plain, tables, 0, 0, plan=plan)
    assert kernel_view.row_walk(plain, plan, 0) == (row.splits["split"].nunique(), len(row.tiles)) == (2, 4)
    assert "walks sequence 0 as 2 splits of 4 tiles in all. To show" in notes.showcase_note(plan, plain, 0)
