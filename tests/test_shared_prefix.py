"""The prefix-aware Triton decode (``shared_prefixes=``): groups of sequences whose
block tables start with the same physical blocks attend to them together in a
prefix pass, then each sequence's own blocks, merged. Compared with the float64
reference on tables built to share blocks, with memory no context covers (the
blocks sharing left unreferenced included) poisoned with NaN and Inf; plus the
detection of groups in a table and the errors for groups that do not share."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from paged_attention.inputs import context_mask, fill_uncovered
from paged_attention.shared_prefix import (
    PREFIX_ROWS, PrefixGroup, find_shared_prefixes, plan_prefix, resolve_shared_prefixes,
)
from paged_attention.triton_launch import plan_triton_decode
from paged_attention.work_list import prefix_work
from helpers import assert_matches, build, seed  # noqa: F401
from window_support import option_sets, poison_outside_windows


def shared(device, seed, lengths, groups, **changes):
    """``build``'s inputs with each group's first ``num_blocks`` table columns made
    the first member's: those physical blocks are shared (the first member must
    cover every slot another member reads). Blocks no table points at any more are
    poisoned again."""
    inputs = build(device, seed, context_lens=lengths, **changes)
    tables = inputs.block_tables.clone()
    for g in groups:
        first = g.sequences[0]
        for seq in g.sequences[1:]:
            tables[seq, : g.num_blocks] = tables[first, : g.num_blocks]
    inputs.block_tables.copy_(tables)
    cfg = inputs.config
    covered = context_mask(inputs.block_tables, inputs.context_lens, cfg.num_blocks, cfg.block_size)
    fill_uncovered(inputs.k_cache, inputs.v_cache, covered, poison=True)
    return inputs


def check(inputs, groups, options=None, **kw):
    args = inputs.args()
    scales = {**inputs.scales(), **(options or {})}
    expected = pa.reference_decode(*args, **scales)
    launch = pa.prepare_triton_decode(*args, **scales, shared_prefixes=groups, **kw)
    for _ in range(2):  # counters reset and prefix partials rewritten: a second launch is exact too
        launch().fill_(float("nan"))
        out = launch()
        assert_matches(out, inputs.query, expected)
    for b, n in enumerate(inputs.context_lens.tolist()):
        if n == 0:
            assert torch.equal(out[b], torch.zeros_like(out[b]))
    return out


G = PrefixGroup

CASES = {
    # lengths, groups, block_size
    "one-group-whole-blocks": ((700, 650, 900, 640), [G((0, 1, 2, 3), 40)], 16),
    "forked-prefix-ends-inside-a-block": ((37, 37, 37), [G((0, 1, 2), 3)], 16),
    "members-end-at-different-slots-of-the-last-shared-block": ((37, 35, 40, 33), [G((2, 0, 1, 3), 3)], 16),
    "group-of-one": ((300, 90, 17), [G((0,), 10)], 16),
    "many-groups-singles-and-an-empty-row": (
        (400, 0, 390, 130, 410, 77, 385, 140), [G((0, 2, 6), 24), G((3, 7), 8), G((4,), 20)], 16),
    "block-size-5": ((121, 133, 101, 0, 128), [G((0, 1, 2, 4), 20)], 5),
    "big-blocks": ((700, 530, 600), [G((0, 1, 2), 2)], 256),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_prefix_pass_is_exact(case, dtype, merge, device, seed):
    lengths, groups, block_size = CASES[case]
    inputs = shared(device, seed, lengths, groups, block_size=block_size, dtype=dtype)
    check(inputs, groups)


def windowed(inputs, window):
    """``inputs`` with memory outside every window poisoned and table entries
    before each window's first block freed (in place)."""
    inputs.block_tables.copy_(poison_outside_windows(inputs.args(), window)[3])
    return inputs


WINDOW_CASES = {
    # lengths, groups, block_size, window
    # Windows start at 440, 390, 640 (the shared blocks' end: sequence 2 leaves the
    # group) and 380 (inside a block): the pass reads from block 23.
    "window-inside-the-prefix": ((700, 650, 900, 640), [G((0, 1, 2, 3), 40)], 16, 260),
    "window-past-the-prefix-for-two": ((700, 650, 900, 640), [G((0, 1, 2, 3), 40)], 16, 60),
    "window-on-a-block-boundary": ((700, 650, 900, 640), [G((0, 1, 2, 3), 40)], 16, 316),
    "window-from-0": ((700, 650, 900, 640), [G((0, 1, 2, 3), 40)], 16, 1000),
    "forked-prefix-ends-inside-a-block": ((37, 37, 37), [G((0, 1, 2), 3)], 16, 10),
    "block-size-5": ((121, 133, 101, 0, 128), [G((0, 1, 2, 4), 20)], 5, 37),
    # Windows from 400, 230, 300: inside 256-token blocks, in their later subtiles.
    "big-blocks": ((700, 530, 600), [G((0, 1, 2), 2)], 256, 300),
}


def expected_groups(groups, shape):
    """The groups as a window leaves them: members whose window starts inside the
    shared blocks, groups with any."""
    first = shape.first_blocks
    kept = (G(tuple(s for s in g.sequences if int(first[s]) < g.num_blocks), g.num_blocks) for g in groups)
    return tuple(g for g in kept if g.sequences)


@pytest.mark.parametrize("spec", ["given", "detect"])
@pytest.mark.parametrize("case", list(WINDOW_CASES))
def test_prefix_pass_with_a_window_is_exact(case, spec, device, seed):
    """A window that starts inside the shared blocks, past them for some members,
    on a block boundary, inside a (large) block or at 0: each prefix row scores from
    its own window's start, the pass skips the shared blocks before every member's,
    and the table entries before each window (freed: -1, 2**31 - 1) are never read,
    so given groups and detection on the freed table both work."""
    lengths, groups, block_size, window = WINDOW_CASES[case]
    inputs = windowed(shared(device, seed, lengths, groups, block_size=block_size, dtype="float32"), window)
    shape = pa.check_decode_args(*inputs.args(), window=window)
    expected = expected_groups(groups, shape)
    if spec == "detect":
        assert resolve_shared_prefixes("detect", shape) == tuple(g for g in expected if len(g.sequences) > 1)
    else:
        assert resolve_shared_prefixes(groups, shape) == expected
    launch = plan_triton_decode(*inputs.args(), window=window, shared_prefixes=spec if spec == "detect" else groups)
    assert len(launch.groups) == 1  # every case keeps one group: its pieces start at its earliest window
    assert int(launch.prefix.items[:, 2].min()) == min(int(shape.first_blocks[s]) for s in launch.groups[0].sequences)
    check(inputs, spec if spec == "detect" else groups, options=dict(window=window))


@pytest.mark.parametrize("kv_dtype", [None, "float8_e4m3fn"], ids=["fp16", "fp8-per-head"])
def test_prefix_pass_with_every_option(kv_dtype, device, seed):
    """Window, sinks and soft-cap together over a prefix pass in pieces: the sinks
    join once, in the merge of prefix and own partials."""
    lengths = (800, 810, 0, 790, 30)
    groups = [G((0, 1, 3), 48)]
    fp8 = dict(kv_dtype=kv_dtype, kv_scale="per_head") if kv_dtype else {}
    inputs = windowed(shared(device, seed, lengths, groups, dtype="float16", **fp8), 300)
    options = {**option_sets(8, inputs.query.device, seed)["all"], "window": 300}
    shape = pa.check_decode_args(*inputs.args(), **inputs.scales(), window=300)
    prefix_plan = plan_prefix(shape, tuple(groups), inputs.query.device, inputs.query.dtype, max_programs=8)
    check(inputs, groups, options=options, prefix_plan=prefix_plan)
    check(inputs, "detect", options=options)


def test_given_groups_with_a_window_compare_only_the_windows_columns(device, seed):
    """Members' tables may differ before a member's window (freed entries), not
    inside it."""
    lengths, groups = (700, 650, 640), [G((0, 1, 2), 40)]
    inputs = windowed(shared(device, seed, lengths, groups), 260)
    args = inputs.args()
    pa.prepare_triton_decode(*args, window=260, shared_prefixes=groups)  # differ only before the windows
    tables = inputs.block_tables.clone()
    tables[1, 39] = tables[1, 40]  # inside sequence 1's window (from block 24)
    with pytest.raises(ValueError, match="map logical block 39 to physical blocks"):
        pa.prepare_triton_decode(*args[:3], tables, args[4], window=260, shared_prefixes=groups)


@pytest.mark.parametrize("num_heads, num_kv_heads", [(2, 2), (8, 2), (8, 1)], ids=["mha", "gqa4", "mqa"])
def test_prefix_pass_more_members_than_one_tile_holds(num_heads, num_kv_heads, device, seed):
    """More rows than PREFIX_ROWS: the group is walked in several member tiles."""
    per_tile = PREFIX_ROWS // (1 << (num_heads // num_kv_heads - 1).bit_length())
    members = per_tile + 3
    lengths = tuple(34 + 7 * (i % 5) for i in range(members))  # 2 shared blocks of 16, own tails of 2..30
    groups = [G(tuple(range(members)), 2)]
    inputs = shared(device, seed, lengths, groups, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=24)
    check(inputs, groups)


@pytest.mark.parametrize("kv_dtype", ["float8_e5m2", "float8_e4m3fn"])
def test_prefix_pass_fp8_per_head_scales(kv_dtype, device, seed):
    lengths = (260, 300, 270, 5)
    groups = [G((0, 1, 2), 16)]
    inputs = shared(device, seed, lengths, groups, kv_dtype=kv_dtype, kv_scale="per_head", dtype="float16")
    check(inputs, groups)


def test_prefix_pass_in_pieces_and_odd_head_dim(merge, device, seed):
    """A long prefix cut into several pieces per group (each a partial slot), head_dim 40."""
    lengths = (800, 810, 790)
    groups = [G((0, 1, 2), 48)]
    inputs = shared(device, seed, lengths, groups, head_dim=40, dtype="float32")
    shape = pa.check_decode_args(*inputs.args())
    prefix_plan = plan_prefix(shape, tuple(groups), inputs.query.device, inputs.query.dtype, max_programs=8)
    assert -(-48 // prefix_plan.blocks_per_split) > 1
    check(inputs, groups, prefix_plan=prefix_plan)


def test_detected_groups_and_the_prefix_aware_implementation(device, seed):
    lengths = (600, 610, 5, 640, 0, 620)
    groups = [G((0, 1, 3), 30), G((2,), 0)]
    inputs = shared(device, seed, lengths, groups[:1])
    shape = pa.check_decode_args(*inputs.args())
    found = find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size)
    assert found == (G((0, 1, 3), 30),)  # seq 5 has its own blocks; 2 and 4 share nothing
    assert find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size, min_tokens=481) == ()
    out = pa.prepare("triton_prefix", *inputs.args())()
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args()))
    assert_matches(pa.triton_decode(*inputs.args(), shared_prefixes="detect"), inputs.query,
                   pa.reference_decode(*inputs.args()))


def test_prefix_work_gives_each_member_its_pieces():
    groups = [G((4, 1, 7), 10), G((0,), 3), G((2, 3), 0)]
    work = prefix_work(groups, 8, members_per_tile=2, chunk_blocks=4, unit=2)
    assert work.first_blocks == [3, 10, 0, 0, 10, 0, 0, 10]
    assert work.prefix_slots == [1, 3, 0, 0, 3, 0, 0, 3]
    items = work.items.tolist()
    members = work.members.tolist()
    covered = {}
    for first, n, start, stop, slot in items:
        for seq in members[first : first + n]:
            covered.setdefault(seq, []).append((start, stop, slot))
    for seq, ranges in covered.items():
        ranges.sort()
        blocks = [b for start, stop, _ in ranges for b in range(start, stop)]
        assert blocks == list(range(work.first_blocks[seq]))
        assert [slot for *_, slot in ranges] == list(range(work.prefix_slots[seq]))


@pytest.mark.parametrize(
    "groups, message",
    [
        ([G((0, 1), 3)], "map logical block 0 to physical blocks"),
        ([G((0, 1), 30)], "which needs only"),
        ([G((0,), 1), G((0, 2), 1)], "sequence 0 is in two shared-prefix groups"),
        ([G((5,), 1)], "names sequence 5; the batch has 3"),
        ([G((), 1)], "has no sequences"),
        ([G((0,), -1)], "num_blocks must be a non-negative integer"),
        ([(0, 1)], "must be a PrefixGroup"),
        ("auto", "shared_prefixes must be 'detect'"),
    ],
)
def test_groups_that_do_not_share_are_refused(groups, message, device, seed):
    inputs = build(device, seed, context_lens=(100, 90, 40))
    with pytest.raises(ValueError, match=message):
        pa.prepare_triton_decode(*inputs.args(), shared_prefixes=groups)


def test_prefix_plan_needs_shared_prefixes(device, seed):
    inputs = build(device, seed, context_lens=(100, 90))
    shape = pa.check_decode_args(*inputs.args())
    plan = plan_prefix(shape, (G((0, 1), 1),), inputs.query.device, inputs.query.dtype)
    with pytest.raises(ValueError, match="prefix_plan needs shared_prefixes"):
        pa.prepare_triton_decode(*inputs.args(), prefix_plan=plan)


@pytest.mark.parametrize("shared_prefix, prefix_groups, block_size", [(300, 1, 16), (290, 2, 16), (128, 3, 64)])
def test_prefix_aware_decode_on_shared_prefix_configs(shared_prefix, prefix_groups, block_size, device, seed):
    """DecodeConfig's shared prefixes (whole blocks shared, the tail block each
    sequence's own copy): detection finds every group, and the result is exact."""
    cfg = pa.DecodeConfig(batch_size=6, context_lens=(330, 400, 310, 512, 300, 350), num_heads=8, num_kv_heads=2,
                          head_dim=32, block_size=block_size, shared_prefix=shared_prefix,
                          prefix_groups=prefix_groups, device=device, seed=seed)
    inputs = pa.build_decode_inputs(cfg, poison=True)
    shape = pa.check_decode_args(*inputs.args())
    found = find_shared_prefixes(shape.block_tables, shape.context_lens, block_size, min_tokens=1)
    assert len(found) == prefix_groups
    assert all(g.num_blocks == shared_prefix // block_size for g in found)
    check(inputs, list(found))


def test_detection_finds_a_prefix_of_a_few_blocks(device, seed):
    """Any shared block counts: a 64-token prefix (4 blocks) gets a prefix pass."""
    cfg = pa.DecodeConfig(batch_size=4, context_lens=100, num_heads=4, num_kv_heads=2, head_dim=32,
                          block_size=16, shared_prefix=64, device=device, seed=seed)
    inputs = pa.build_decode_inputs(cfg, poison=True)
    shape = pa.check_decode_args(*inputs.args())
    assert find_shared_prefixes(shape.block_tables, shape.context_lens, 16) == (G((0, 1, 2, 3), 4),)
    assert_matches(pa.prepare("triton_prefix", *inputs.args())(), inputs.query, pa.reference_decode(*inputs.args()))
