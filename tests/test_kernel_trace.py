"""The kernel trace: its trace reproduces the Triton kernel's plan and the reference."""

import math
import sys
from dataclasses import replace

import pytest
import torch

from explorer.kernel.trace import SPLIT_COLUMNS, TILE_COLUMNS, KernelTrace, trace_decode
from paged_attention import (
    DecodeConfig,
    build_decode_inputs,
    default_device,
    plan_launch,
    reference_decode,
    tolerance,
    triton_decode,
)
from paged_attention.shared_prefix import PrefixGroup, find_shared_prefixes, plan_prefix
from paged_attention.triton_decode import prepare_triton_decode
from paged_attention.triton_launch import plan_triton_decode
from paged_attention.validation import check_decode_args
from paged_attention.work_list import (
    ITEM_FIRST_BLOCK,
    ITEM_LAST_BLOCK,
    ITEM_SEQ,
    ITEM_SLOT,
    PREFIX_FIRST_BLOCK,
    PREFIX_FIRST_MEMBER,
    PREFIX_LAST_BLOCK,
    PREFIX_NUM_MEMBERS,
    PREFIX_SLOT,
    SEQUENCE_FIRST_SLOT,
)

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


# -- the trace plans with the launcher's own function ---------------------------

def _other_block_size_plan(inputs):
    other = make_inputs(8, context_lens=PREFIX_LENS)
    return plan_launch(check_decode_args(*other.args()), other.query.device, other.query.dtype)


def _short_plan(inputs):
    short = make_inputs(16, context_lens=(100,) * len(PREFIX_LENS))
    return plan_launch(check_decode_args(*short.args()), short.query.device, short.query.dtype, num_splits=1)


def _prefix_plan(inputs, **changes):
    shape = check_decode_args(*inputs.args())
    groups = find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size)
    return replace(plan_prefix(shape, groups, inputs.query.device, inputs.query.dtype), **changes)


#: Every rule the launcher checks, as the arguments that break it.
BAD_ARGUMENTS = {
    "plan and overrides": lambda inputs: dict(plan=_short_plan(inputs), num_splits=2),
    "plan for another block size": lambda inputs: dict(plan=_other_block_size_plan(inputs)),
    "plan too short for the contexts": lambda inputs: dict(plan=_short_plan(inputs)),
    "num_splits not positive": lambda inputs: dict(num_splits=0),
    "block_n not a power of two": lambda inputs: dict(block_n=24),
    "num_warps too many": lambda inputs: dict(num_warps=32),
    "balanced not a bool": lambda inputs: dict(balanced="yes"),
    "prefix_plan with too few rows": lambda inputs: dict(shared_prefixes="detect",
                                                         prefix_plan=_prefix_plan(inputs, query_rows=8)),
    "prefix_plan for another block size": lambda inputs: dict(shared_prefixes="detect",
                                                              prefix_plan=_prefix_plan(inputs, block_size=8)),
    "prefix_plan without shared_prefixes": lambda inputs: dict(prefix_plan=_prefix_plan(inputs)),
    "shared_prefixes an unknown string": lambda inputs: dict(shared_prefixes="all"),
    "groups that do not share": lambda inputs: dict(shared_prefixes=[PrefixGroup((0, 3), 64)]),
    "a group member out of range": lambda inputs: dict(shared_prefixes=[PrefixGroup((0, 9), 1)]),
    "scale not positive": lambda inputs: dict(scale=-1.0),
    "k_scale for a cache that is not fp8": lambda inputs: dict(k_scale=1.0, v_scale=1.0),
}


@pytest.mark.parametrize("rule", BAD_ARGUMENTS)
def test_the_trace_refuses_what_the_launcher_refuses_in_its_words(rule):
    inputs = prefix_inputs()
    kwargs = BAD_ARGUMENTS[rule](inputs)
    with pytest.raises(ValueError) as launcher:
        prepare_triton_decode(*inputs.args(), **kwargs)
    with pytest.raises(ValueError) as trace:
        trace_decode(inputs, 0, 0, **kwargs)
    assert str(trace.value) == str(launcher.value)


def test_the_trace_refuses_an_unknown_override_as_the_launcher_does():
    inputs = prefix_inputs()
    with pytest.raises(TypeError, match="num_split"):
        prepare_triton_decode(*inputs.args(), num_split=2)
    with pytest.raises(TypeError, match="num_split"):
        trace_decode(inputs, 0, 0, num_split=2)


def _record_launches(monkeypatch):
    """The TritonLaunch of every prepare_triton_decode call, as the launcher planned it."""
    module = sys.modules["paged_attention.triton_decode"]
    planned = []

    def recording(*args, **kwargs):
        planned.append(plan_triton_decode(*args, **kwargs))
        return planned[-1]

    monkeypatch.setattr(module, "plan_triton_decode", recording)
    return planned


@pytest.mark.parametrize("geometry", ["ragged", "shared prefix", "fp8"])
def test_the_trace_walks_the_launchers_plan_and_work_list(geometry, monkeypatch):
    if geometry == "ragged":
        inputs, kwargs = make_inputs(16, context_lens=(3000, 40, 17, 900, 0)), {}
    elif geometry == "shared prefix":
        inputs, kwargs = prefix_inputs(), {"shared_prefixes": "detect"}
    else:
        inputs, kwargs = make_inputs(16, context_lens=(700, 260, 5), dtype="float16", kv_dtype="float8_e4m3fn",
                                     kv_scale="per_head"), {}
    planned = _record_launches(monkeypatch)
    prepare_triton_decode(*inputs.args(), **inputs.scales(), **kwargs)
    (launch,) = planned
    if geometry == "ragged":
        assert launch.plan.balanced
    ref = reference_decode(*inputs.args(), **inputs.scales())
    items, sequences = launch.work.items.tolist(), launch.work.sequences.tolist()
    members = launch.prefix.members.tolist() if launch.prefix is not None else []
    for seq in range(len(sequences)):
        head = (5 * seq) % inputs.config.num_heads
        trace = trace_decode(inputs, seq, head, **kwargs)
        assert trace.plan == launch.plan
        torch.testing.assert_close(trace.output, ref[seq, head], atol=F64_ATOL, rtol=0)
        needed = -(-int(inputs.context_lens[seq]) // inputs.config.block_size)
        first_slot = sequences[seq][SEQUENCE_FIRST_SLOT]
        own = sorted((row[ITEM_SLOT] - first_slot, row[ITEM_FIRST_BLOCK], min(row[ITEM_LAST_BLOCK], needed))
                     for row in items if row[ITEM_SEQ] == seq)
        prefix = sorted((row[PREFIX_SLOT], row[PREFIX_FIRST_BLOCK], row[PREFIX_LAST_BLOCK])
                        for row in (launch.prefix.items.tolist() if launch.prefix is not None else [])
                        if seq in members[row[PREFIX_FIRST_MEMBER]: row[PREFIX_FIRST_MEMBER] + row[PREFIX_NUM_MEMBERS]])
        expected = [("prefix", *p) for p in prefix] + [("own", *o) for o in own if o[1] < o[2]]
        walked = list(trace.splits[["pass", "split", "first_block", "end_block"]].itertuples(index=False, name=None))
        assert walked == expected
        assert trace.prefix_plan == (launch.prefix_plan if prefix else None)


def test_a_plan_made_for_the_blocks_past_the_prefixes_fits_them():
    """The default plan of a shared-prefix batch covers only the blocks past the prefixes; given back, the
    launcher takes it and plans the same launch."""
    inputs = prefix_inputs()
    default = plan_triton_decode(*inputs.args(), shared_prefixes="detect")
    needed = -(-max(PREFIX_LENS) // 16)
    assert default.plan.num_splits * default.plan.blocks_per_split < needed  # not enough for the whole contexts
    again = plan_triton_decode(*inputs.args(), shared_prefixes="detect", plan=default.plan,
                               prefix_plan=default.prefix_plan)
    assert (again.plan, again.prefix_plan, again.groups) == (default.plan, default.prefix_plan, default.groups)
    for work in ("work", "prefix"):
        assert torch.equal(getattr(again, work).items, getattr(default, work).items)
