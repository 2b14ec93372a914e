"""The kernel trace: its trace reproduces the Triton kernel's plan and the reference."""

import math

import pytest
import torch

from paged_attention import (
    default_device,
    DecodeConfig, build_decode_inputs, plan_launch, reference_decode, tolerance, triton_decode,
)
from paged_attention.shared_prefix import plan_prefix
from paged_attention.shared_prefix import PrefixGroup, find_shared_prefixes
from paged_attention.validation import check_decode_args
from explorer.kernel_trace import SPLIT_COLUMNS, TILE_COLUMNS, KernelTrace, trace_decode

F64_ATOL = 1e-12


def make_inputs(block_size, context_lens=(300, 97, 1), dtype="float32", **kw):
    config = DecodeConfig(
        batch_size=len(context_lens), context_lens=context_lens, num_heads=kw.pop("num_heads", 6),
        num_kv_heads=kw.pop("num_kv_heads", 2), head_dim=kw.pop("head_dim", 24), block_size=block_size,
        dtype=dtype, seed=kw.pop("seed", 0), **kw,
    )
    return build_decode_inputs(config)


def expected_counts(plan, context_len):
    """Tiles, table lookups and running splits that the plan implies for one row."""
    needed = math.ceil(context_len / plan.block_size)
    tiles = lookups = splits = 0
    for split in range(plan.num_splits):
        first = split * plan.blocks_per_split
        if first >= needed:
            continue
        blocks = min(first + plan.blocks_per_split, needed) - first
        splits += 1
        lookups += blocks
        tiles += math.ceil(blocks / plan.blocks_per_tile) * plan.subtiles
    return tiles, lookups, splits


@pytest.mark.parametrize("block_size", [1, 3, 16, 256])
@pytest.mark.parametrize("num_splits", [None, 1, 2, 5])
def test_trace_matches_reference_and_plan(block_size, num_splits):
    inputs = make_inputs(block_size)
    overrides = {} if num_splits is None else {"num_splits": num_splits}
    ref = reference_decode(*inputs.args())
    shape = check_decode_args(*inputs.args())
    plan = plan_launch(shape, inputs.query.device, inputs.query.dtype, **overrides)
    for seq, head in [(0, 0), (0, 5), (1, 3), (2, 2)]:
        trace = trace_decode(inputs, seq, head, **overrides)
        assert trace.plan == plan
        n = int(inputs.context_lens[seq])
        torch.testing.assert_close(trace.output, ref[seq, head], atol=F64_ATOL, rtol=0)
        torch.testing.assert_close(trace.reference, ref[seq, head], atol=F64_ATOL, rtol=0)
        assert trace.max_abs_error < F64_ATOL

        tiles, lookups, splits = expected_counts(plan, n)
        assert trace.num_tiles == tiles
        assert trace.table_lookups == lookups == math.ceil(n / block_size)
        assert len(trace.splits) == splits
        assert trace.splits["num_tiles"].tolist() == trace.tiles.groupby("split").size().tolist()
        assert trace.splits["table_lookups"].sum() == lookups


@pytest.mark.parametrize("block_size", [1, 3, 16, 256, 300])
def test_tiles_partition_the_context_in_order(block_size):
    inputs = make_inputs(block_size, context_lens=(700,), num_heads=2, num_kv_heads=1)
    trace = trace_decode(inputs, 0, 1, num_splits=3)
    tiles = trace.tiles
    assert list(tiles.columns) == list(TILE_COLUMNS)
    assert tiles["token_start"].iloc[0] == 0 and tiles["token_end"].iloc[-1] == 700
    # Each tile starts where the previous one ended: no token skipped or read twice.
    assert (tiles["token_start"].iloc[1:].to_numpy() == tiles["token_end"].iloc[:-1].to_numpy()).all()
    assert tiles["valid_tokens"].sum() == 700
    assert ((tiles["valid_tokens"] + tiles["masked_lanes"]) == trace.plan.block_n).all()
    table = inputs.block_tables[0].tolist()
    for row in tiles.itertuples():
        if row.valid_tokens:
            blocks = range(row.token_start // block_size, (row.token_end - 1) // block_size + 1)
            assert row.physical_blocks == tuple(table[b] for b in blocks)
        else:
            assert row.physical_blocks == ()
        assert row.table_lookups == ((row.end_block - row.first_block) if row.subtile == 0 else 0)


def test_partials_converge_to_split_and_row_answers():
    inputs = make_inputs(16, context_lens=(1000,), num_heads=1, num_kv_heads=1)
    trace = trace_decode(inputs, 0, 0, num_splits=3)
    for split, group in trace.tiles.groupby("split"):
        # The running max never decreases, and the last tile of a split has its exact answer.
        assert group["m"].is_monotonic_increasing
        assert group["err_vs_split"].iloc[-1] < F64_ATOL
        assert group["err_vs_split"].iloc[0] > 1e-6
    assert trace.splits["share"].sum() == pytest.approx(1.0, abs=1e-12)
    assert trace.splits["weight"].max() == 1.0
    assert trace.merged


def test_single_split_needs_no_merge():
    inputs = make_inputs(16, context_lens=(200,))
    trace = trace_decode(inputs, 0, 0, num_splits=1)
    assert not trace.merged
    assert trace.splits[["weight", "share"]].iloc[0].tolist() == [1.0, 1.0]
    assert trace.tiles["err_vs_row"].iloc[-1] < F64_ATOL


def test_large_scores_stay_finite():
    # scale 40 puts scores near 2**200: without the running max exp2 would overflow.
    inputs = make_inputs(4, context_lens=(257,), num_heads=1, num_kv_heads=1)
    trace = trace_decode(inputs, 0, 0, scale=40.0, num_splits=4)
    ref = reference_decode(*inputs.args(), scale=40.0)[0, 0]
    assert torch.isfinite(trace.output).all()
    torch.testing.assert_close(trace.output, ref, atol=F64_ATOL, rtol=0)


def test_short_sequence_skips_splits_past_its_context():
    inputs = make_inputs(16, context_lens=(1024, 40))
    trace = trace_decode(inputs, 1, 0, num_splits=4)
    assert trace.plan.num_splits == 4
    assert trace.splits["split"].tolist() == [0]
    assert trace.merged  # the merge kernel still runs, over one split


@pytest.mark.parametrize("seq", [0, 1])
def test_empty_context_gives_empty_trace_and_zero_output(seq):
    inputs = make_inputs(16, context_lens=(0, 0) if seq else (0, 50))
    trace = trace_decode(inputs, seq, 1)
    assert isinstance(trace, KernelTrace)
    assert trace.tiles.empty and list(trace.tiles.columns) == list(TILE_COLUMNS)
    assert trace.splits.empty and list(trace.splits.columns) == list(SPLIT_COLUMNS)
    assert trace.num_tiles == 0 and trace.table_lookups == 0
    assert torch.equal(trace.output, torch.zeros(24, dtype=torch.float64))
    assert trace.max_abs_error == 0.0


def test_accepts_tensors_and_float64():
    inputs = make_inputs(8, context_lens=(90,))
    args64 = tuple(t.double() if t.is_floating_point() else t for t in inputs.args())
    trace = trace_decode(args64, 0, 4, num_splits=2)
    torch.testing.assert_close(trace.output, reference_decode(*args64)[0, 4], atol=F64_ATOL, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_trace_agrees_with_the_triton_kernel(dtype):
    inputs = make_inputs(3, context_lens=(150, 61), dtype=dtype, head_dim=16, device=default_device())
    out = triton_decode(*inputs.args()).cpu()
    atol, rtol = tolerance(inputs.query.dtype)
    for seq, head in [(0, 0), (1, 5)]:
        trace = trace_decode(inputs, seq, head)
        torch.testing.assert_close(trace.output.cpu(), out[seq, head].double(), atol=atol, rtol=rtol)


def test_bad_arguments_raise_value_error():
    inputs = make_inputs(16, context_lens=(50,))
    with pytest.raises(ValueError, match="seq must lie"):
        trace_decode(inputs, 1, 0)
    with pytest.raises(ValueError, match="head must lie"):
        trace_decode(inputs, 0, 6)
    shape = check_decode_args(*inputs.args())
    plan = plan_launch(shape, inputs.query.device, inputs.query.dtype)
    with pytest.raises(ValueError, match="not both"):
        trace_decode(inputs, 0, 0, plan=plan, num_splits=2)
    other = make_inputs(8, context_lens=(50,))
    with pytest.raises(ValueError, match="block_size"):
        trace_decode(other, 0, 0, plan=plan)
    with pytest.raises(ValueError, match="inputs must be"):
        trace_decode(inputs.args()[:4], 0, 0)


PREFIX_LENS = (1400, 1100, 1024, 1800, 1040)


def prefix_inputs(dtype="float32", **kw):
    # Two groups sharing 1024 tokens (64 blocks); sequence 2 is all prefix (no block of its own).
    return make_inputs(16, context_lens=PREFIX_LENS, dtype=dtype, shared_prefix=1024, prefix_groups=2, **kw)


@pytest.mark.parametrize("seq, head", [(0, 0), (1, 4), (2, 5), (3, 2), (4, 3)])
@pytest.mark.parametrize("prefix_rows", [None, 16])
def test_prefix_pass_partials_merge_to_the_reference(seq, head, prefix_rows):
    inputs = prefix_inputs()
    ref = reference_decode(*inputs.args())
    shape = check_decode_args(*inputs.args())
    groups = find_shared_prefixes(shape.block_tables, shape.context_lens, 16)
    assert [g.sequences for g in groups] == [(0, 1, 2), (3, 4)] and {g.num_blocks for g in groups} == {64}
    prefix = plan_prefix(shape, groups, inputs.query.device, inputs.query.dtype, query_rows=prefix_rows,
                         max_programs=8)  # 2 KV heads x 2 groups x 2 pieces
    assert prefix.blocks_per_split == 32
    trace = trace_decode(inputs, seq, head, shared_prefixes="detect", prefix_plan=prefix)
    torch.testing.assert_close(trace.output, ref[seq, head], atol=F64_ATOL, rtol=0)
    group = next(g for g in groups if seq in g.sequences)
    assert trace.prefix_group == group and trace.merged
    # The row's partials: the prefix pass's pieces first (its first slots), then its own programs.
    pieces = -(-group.num_blocks // prefix.blocks_per_split)
    own = [(a, b) for a, b in trace.plan.sequence_items(PREFIX_LENS[seq], group.num_blocks) if b > a]
    splits = trace.splits
    assert list(splits["pass"]) == ["prefix"] * pieces + ["own"] * len(own)
    assert list(splits["split"]) == list(range(pieces + len(own)))
    assert pieces == 2 and list(splits["end_block"].iloc[:pieces]) == [32, 64]
    assert (splits["first_block"].iloc[pieces:] >= 64).all()
    assert splits["share"].sum() == pytest.approx(1.0)
    # A prefix tile holds the rows of every member in it (16 rows: 4 members of 3 query heads padded to 4).
    members = min(len(group.sequences), (prefix_rows or 64) // 4)
    tiles = trace.tiles
    pre = tiles["pass"] == "prefix"
    assert set(tiles.loc[pre, "sequences"]) == {members} and set(tiles.loc[pre, "query_rows"]) == {3 * members}
    assert set(tiles.loc[~pre, "sequences"]) <= {1}
    assert tiles.loc[pre, "valid_tokens"].sum() == 1024 and tiles["valid_tokens"].sum() == PREFIX_LENS[seq]
    assert (tiles.loc[pre, "valid_tokens"] + tiles.loc[pre, "masked_lanes"] == prefix.block_n).all()


def test_trace_without_groups_or_outside_a_group_has_no_prefix_pass():
    inputs = prefix_inputs()
    trace = trace_decode(inputs, 0, 0)
    assert trace.prefix_group is None and set(trace.tiles["pass"]) == {"own"}
    assert trace.tiles["first_block"].min() == 0
    plain = make_inputs(16, context_lens=(300, 97))
    trace = trace_decode(plain, 0, 0, shared_prefixes="detect")  # nothing shared: the plain walk
    assert trace.prefix_group is None and trace.prefix_plan is None
    assert trace.tiles.equals(trace_decode(plain, 0, 0).tiles)


def test_prefix_trace_agrees_with_the_prefix_aware_triton_kernel():
    inputs = prefix_inputs(head_dim=16, device=default_device())
    out = triton_decode(*inputs.args(), shared_prefixes="detect").cpu()
    atol, rtol = tolerance(inputs.query.dtype)
    for seq, head in [(0, 1), (2, 4), (4, 5)]:
        trace = trace_decode(inputs, seq, head, shared_prefixes="detect")
        torch.testing.assert_close(trace.output.cpu(), out[seq, head].double(), atol=atol, rtol=rtol)


def test_bad_groups_raise_value_error():
    inputs = prefix_inputs()
    with pytest.raises(ValueError, match="shared_prefixes must be"):
        trace_decode(inputs, 0, 0, shared_prefixes="all")
    with pytest.raises(ValueError, match="shared_prefixes\\[0\\]"):
        trace_decode(inputs, 0, 0, shared_prefixes=[PrefixGroup((0, 3), 64)])  # different blocks
    shape = check_decode_args(*inputs.args())
    with pytest.raises(ValueError, match="prefix_plan"):
        trace_decode(inputs, 0, 0, shared_prefixes="detect", prefix_plan=plan_launch(shape, inputs.query.device,
                                                                            inputs.query.dtype))
