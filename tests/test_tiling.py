"""The tile arithmetic the launch plans share (cdiv, next_pow2, the tile over the
paging, the even cut), and whole plans and work lists computed by hand from it:
what the launcher decides (``plan_triton_decode``), column by named column."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from paged_attention import runtime
from paged_attention.launch_plan import LaunchPlan, plan_launch, spread_merge
from paged_attention.shared_prefix import PrefixGroup, members_per_tile, plan_prefix
from paged_attention.tiling import TileShape, cdiv, dot_pad, even_cut, next_pow2, tile_shape
from paged_attention.triton_launch import plan_triton_decode
from paged_attention.work_list import (
    ITEM_FIRST_BLOCK, ITEM_LAST_BLOCK, ITEM_SEQ, ITEM_SLOT, ITEM_WIDTH, PREFIX_FIRST_BLOCK, PREFIX_FIRST_MEMBER,
    PREFIX_LAST_BLOCK, PREFIX_NUM_MEMBERS, PREFIX_SLOT, PREFIX_WIDTH, SEQUENCE_FIRST_SLOT, SEQUENCE_NUM_ITEMS,
    SEQUENCE_NUM_SLOTS, SEQUENCE_WIDTH, TO_CONTEXT_END, prefix_work,
)

END = TO_CONTEXT_END


@pytest.fixture
def four_sms(monkeypatch):
    """Plans as the interpreter makes them (4 SMs), on any machine."""
    monkeypatch.setattr(runtime, "num_sms", lambda device: 4)


@pytest.mark.parametrize("a, b, expected", [(0, 16, 0), (1, 16, 1), (16, 16, 1), (17, 16, 2), (300, 16, 19),
                                            (5000, 1, 5000)])
def test_cdiv(a, b, expected):
    assert cdiv(a, b) == expected
    assert cdiv(torch.tensor([a, a]), b).tolist() == [expected, expected]


@pytest.mark.parametrize("n, expected", [(0, 1), (1, 1), (2, 2), (3, 4), (24, 32), (32, 32), (129, 256)])
def test_next_pow2(n, expected):
    assert next_pow2(n) == expected
    assert dot_pad(n) == max(16, expected)


@pytest.mark.parametrize("block_n, block_size, expected", [
    (64, 16, (4, 16, 1)),  # 4 whole blocks
    (64, 12, (4, 16, 1)),  # blocks padded to 16 slots, 4 masked in each
    (16, 1, (16, 1, 1)),
    (64, 64, (1, 64, 1)),
    (64, 256, (1, 64, 4)),  # 4 tiles walk one block
    (128, 300, (1, 128, 4)),  # 300 tokens padded to 512
])
def test_tile_shape(block_n, block_size, expected):
    assert tile_shape(block_n, block_size) == TileShape(*expected)


@pytest.mark.parametrize("first, stop, cap, unit, expected", [
    (0, 9, 4, 1, [(0, 3), (3, 6), (6, 9)]),  # 3 pieces of 3, not 4 + 4 + 1
    (0, 19, 12, 4, [(0, 12), (12, 19)]),  # 2 pieces of 10, rounded up to whole tiles of 4
    (0, 19, 12, 2, [(0, 10), (10, 19)]),
    (5, 6, 8, 2, [(5, 6)]),
    (64, 113, 16, 2, [(64, 78), (78, 92), (92, 106), (106, 113)]),  # 49 blocks past a prefix: 4 pieces of 13 -> 14
    (3, 3, 4, 1, []),
])
def test_even_cut(first, stop, cap, unit, expected):
    assert even_cut(first, stop, cap, unit) == expected


def plan(**fields) -> LaunchPlan:
    base = dict(block_n=64, blocks_per_tile=4, slots_per_tile=16, subtiles=1, num_splits=2, blocks_per_split=12,
                num_warps=4, num_stages=3, block_size=16)
    return LaunchPlan(**{**base, **fields})


def test_sequence_items_cut_at_splits_or_evenly():
    # 300 tokens: 19 blocks. Split boundaries every blocks_per_split, from the first block on ...
    assert plan(blocks_per_split=5).sequence_items(300) == [(0, 5), (5, 10), (10, 15), (15, 19)]
    assert plan(blocks_per_split=5).sequence_items(300, 3) == [(3, 8), (8, 13), (13, 18), (18, 19)]
    # ... or, balanced, as few pieces as the cap allows, of about equal length in whole tiles.
    assert plan(balanced=True).sequence_items(300) == [(0, 12), (12, 19)]
    assert plan(balanced=True, blocks_per_tile=2).sequence_items(300) == [(0, 10), (10, 19)]
    assert plan().sequence_items(0) == [(0, 0)]  # every sequence has a program
    assert plan().sequence_items(40, 3) == [(3, 3)]  # all prefix: an empty one


def test_decode_plan_and_work_list_by_hand(four_sms):
    """One sequence of 300 tokens, one KV head, float16, head_dim 128, blocks of 16, on 4 SMs: the split count
    grows while programs stay within the SMs (1, 2, 3, 4 programs), so 4 splits; 19 blocks in 4 splits of 5;
    128-token tiles (head_dim <= 128) of 8 blocks of 16 slots; 4 warps, 3 stages."""
    config = pa.DecodeConfig(batch_size=1, context_lens=300, num_heads=4, num_kv_heads=1, head_dim=128,
                             block_size=16, dtype="float16", device="cpu")
    inputs = pa.build_decode_inputs(config)
    launch = plan_triton_decode(*inputs.args())
    assert launch.plan == LaunchPlan(block_n=128, blocks_per_tile=8, slots_per_tile=16, subtiles=1, num_splits=4,
                                     blocks_per_split=5, num_warps=4, num_stages=3, block_size=16, balanced=False)
    assert launch.plan == plan_launch(launch.shape, torch.device("cpu"), torch.float16)
    items = launch.work.items
    assert items.shape == (4, ITEM_WIDTH) and launch.work.sequences.shape == (1, SEQUENCE_WIDTH)
    rows = items.tolist()
    assert [r[ITEM_SEQ] for r in rows] == [0, 0, 0, 0]
    assert [r[ITEM_FIRST_BLOCK] for r in rows] == [0, 5, 10, 15]
    assert [r[ITEM_LAST_BLOCK] for r in rows] == [5, 10, 15, END]  # the last reads to the context's end
    assert [r[ITEM_SLOT] for r in rows] == [0, 1, 2, 3]
    (sequence,) = launch.work.sequences.tolist()
    assert (sequence[SEQUENCE_FIRST_SLOT], sequence[SEQUENCE_NUM_SLOTS], sequence[SEQUENCE_NUM_ITEMS]) == (0, 4, 4)
    assert launch.prefix is None and launch.prefix_plan is None and launch.members_per_tile == 0


def test_prefix_plan_and_work_by_hand(four_sms):
    """Three sequences sharing 48 blocks of 16 tokens, 3 query heads per KV head, 2 KV heads, float32, head_dim
    40: 32-token tiles (float32) of 2 blocks, 2 stages; 64 rows per tile hold 64 // 4 = 16 members, so one tile
    for the group; within 2 programs per SM (8), pieces of at least 256 tokens (16 blocks): 2 KV heads x 3
    pieces of 16 blocks = 6 programs."""
    shape = pa.DecodeShape(batch_size=3, num_heads=6, num_kv_heads=2, head_dim=40, num_blocks=1, block_size=16,
                           max_num_blocks=1, scale=1.0, context_lens=torch.tensor([800, 810, 790]),
                           block_tables=None, kv_dtype=torch.float32)
    groups = (PrefixGroup((0, 1, 2), 48),)
    prefix_plan = plan_prefix(shape, groups, torch.device("cpu"), torch.float32)
    assert prefix_plan == LaunchPlan(block_n=32, blocks_per_tile=2, slots_per_tile=16, subtiles=1, num_splits=3,
                                     blocks_per_split=16, num_warps=4, num_stages=2, block_size=16, balanced=True,
                                     query_rows=64)
    members = members_per_tile(prefix_plan.query_rows, shape.query_group_size)
    assert members == 16
    work = prefix_work(groups, 3, members, prefix_plan.blocks_per_split, prefix_plan.blocks_per_tile)
    assert work.items.shape == (3, PREFIX_WIDTH)
    rows = work.items.tolist()
    assert [(r[PREFIX_FIRST_MEMBER], r[PREFIX_NUM_MEMBERS]) for r in rows] == [(0, 3)] * 3
    assert [(r[PREFIX_FIRST_BLOCK], r[PREFIX_LAST_BLOCK], r[PREFIX_SLOT]) for r in rows] == [
        (0, 16, 0), (16, 32, 1), (32, 48, 2)]
    assert work.members.tolist() == [0, 1, 2]
    assert work.first_blocks == [48, 48, 48] and work.prefix_slots == [3, 3, 3]


@pytest.mark.parametrize(
    ("query_len", "block_n", "num_stages"),
    [
        (1, 64, 3),  # one token: 128-token tiles halved for 3+ programs per SM, 3 stages
        (2, 64, 2),  # 8 rows (2 tokens x GQA group 4): halved tiles, 2 stages
        (4, 64, 2),  # 16 rows
        (8, 128, 2),  # 32 rows: tiles not halved
        (16, 64, 3),  # 64 rows: 64-token tiles, 3 stages
    ],
)
def test_draft_token_plan_follows_the_tile_rows(four_sms, query_len, block_n, num_stages):
    """Draft tokens change the tile and the pipeline by the tile's rows (query tokens x GQA group): the choices
    of docs/benchmarks.md, "Several query tokens per sequence". 4 sequences x 8 KV heads = 32 programs, at least
    3 per SM on 4 SMs, of 4096 tokens (one split each)."""
    config = pa.DecodeConfig(batch_size=4, context_lens=4096, num_heads=32, num_kv_heads=8, head_dim=128,
                             block_size=16, dtype="float16", device="cpu", query_lens=query_len)
    inputs = pa.build_decode_inputs(config)
    plan = plan_triton_decode(*inputs.args(), **inputs.kwargs()).plan
    assert (plan.block_n, plan.num_stages, plan.num_warps, plan.num_splits) == (block_n, num_stages, 4, 1)


@pytest.mark.parametrize("max_slots, merge_rows, head_dim_pad, spread", [
    (32, 4, 128, False),  # (1, 32768), one token x group 4 over 32 splits: 64 KB, fused
    (32, 16, 128, True),  # 4 draft tokens: 256 KB
    (32, 32, 128, True),  # 8 draft tokens: 512 KB
    (8, 32, 128, False),  # (4, 2048) at 8 tokens, 8 splits: 128 KB, not more
    (1, 64, 256, False),  # one slot: nothing to merge
])
def test_spread_merge_past_128_kb_of_partials(max_slots, merge_rows, head_dim_pad, spread):
    """The split-K merge leaves the last program for a launch of its own when it would read more than
    SPREAD_MERGE_BYTES of float32 partials per (sequence, KV head)."""
    assert spread_merge(max_slots, merge_rows, head_dim_pad) is spread


@pytest.mark.parametrize(("block_size", "soft_cap", "kv_dtype", "query_len", "num_warps"), [
    (256, 50.0, None, 1, 8),  # soft-cap, tiles inside one block: 8 warps
    (256, None, None, 1, 4),  # no cap
    (16, 50.0, None, 1, 4),  # tiles of several blocks
    (256, 50.0, None, 4, 4),  # draft rows: their own plan
    (256, 50.0, "float8_e4m3fn", 1, 4),  # fp8 cache (4-warp plan: too few rows for one warp): unmeasured, unchanged
])
def test_soft_cap_on_big_blocks_runs_eight_warps(four_sms, block_size, soft_cap, kv_dtype, query_len, num_warps):
    """A soft-capped one-token step whose tiles lie inside one block runs
    SOFT_CAP_BIG_BLOCK_WARPS warps (docs/performance.md, "Soft-cap on big blocks"); everything else keeps 4."""
    config = pa.DecodeConfig(batch_size=2, context_lens=2048, num_heads=16, num_kv_heads=8, head_dim=128,
                             block_size=block_size, dtype="float16", device="cpu", soft_cap=soft_cap,
                             kv_dtype=kv_dtype, query_lens=query_len)
    inputs = pa.build_decode_inputs(config)
    plan = plan_triton_decode(*inputs.args(), **inputs.kwargs()).plan
    assert plan.num_warps == num_warps
    assert plan_triton_decode(*inputs.args(), **inputs.kwargs(), num_warps=2).plan.num_warps == 2
