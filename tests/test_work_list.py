"""The balanced launch plan for ragged batches: how each sequence becomes programs
(the work list), the program budget, and exact results on the geometry that breaks
such plans (lengths 0 and 1 next to long ones, one long row among many empty ones),
with memory no context covers poisoned with NaN and Inf."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

import paged_attention as pa
from paged_attention import launch_plan as lp
from paged_attention import work_list as wl
from paged_attention.triton_launch import plan_decode
from helpers import assert_matches, build, seed  # noqa: F401
from window_support import option_sets, poison_outside_windows


def shape_for(lengths, *, block_size=16, num_kv_heads=8, dtype=torch.float16, window=None):
    return pa.DecodeShape(
        batch_size=len(lengths), num_heads=4 * num_kv_heads, num_kv_heads=num_kv_heads, head_dim=128,
        num_blocks=1, block_size=block_size, max_num_blocks=1, scale=1.0,
        context_lens=torch.tensor(lengths, dtype=torch.int64), block_tables=None, kv_dtype=dtype, window=window,
    )


def plan_for(lengths, *, block_size=16, num_kv_heads=8, num_sms=132, dtype=torch.float16, monkeypatch=None, **kw):
    shape = shape_for(lengths, block_size=block_size, num_kv_heads=num_kv_heads, dtype=dtype)
    monkeypatch.setattr(pa.runtime, "num_sms", lambda device: num_sms)
    return lp.plan_launch(shape, torch.device("cpu"), dtype, **kw), shape.context_lens


def check_work_list(plan, lens, work, first_blocks=None):
    """Every needed block of every sequence (from its window's first block, when
    ``first_blocks`` are given) is read by exactly one program; each sequence has at
    least one program and consecutive slots; pieces respect the cap."""
    items = work.items.tolist()
    seqs = work.sequences.tolist()
    assert len(seqs) == len(lens)
    covered = {s: [] for s in range(len(lens))}
    slots = set()
    for seq, first, last, slot in items:
        needed = -(-int(lens[seq]) // plan.block_size)
        stop = needed if last == wl.TO_CONTEXT_END else last
        assert first <= stop <= max(needed, first)
        assert stop - first <= plan.blocks_per_split
        covered[seq].append((first, stop, last == wl.TO_CONTEXT_END))
        first_slot, num_slots, num_items = seqs[seq]
        assert first_slot <= slot < first_slot + num_slots
        assert slot not in slots
        slots.add(slot)
    assert len(slots) == work.num_slots == sum(s[1] for s in seqs)
    for seq, ranges in covered.items():
        ranges.sort()
        needed = -(-int(lens[seq]) // plan.block_size)
        assert len(ranges) == seqs[seq][2] >= 1
        assert [r[2] for r in ranges] == [False] * (len(ranges) - 1) + [True]  # only the last runs on
        blocks = [b for first, stop, _ in ranges for b in range(first, stop)]
        start = 0 if first_blocks is None else int(first_blocks[seq])
        assert blocks == list(range(start, needed))
        assert ranges[0][0] == min(start, needed) or needed <= start
        for first, stop, last in ranges[:-1]:  # every piece but the last ends on a tile boundary
            assert (stop - first) % plan.blocks_per_tile == 0 or not plan.balanced


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.one_of(st.just(0), st.just(1), st.integers(0, 40000)), min_size=1, max_size=70),
       block_size=st.sampled_from([1, 5, 16, 64, 256]), num_kv_heads=st.sampled_from([1, 2, 8]))
def test_work_list_covers_every_block_once(lengths, block_size, num_kv_heads, monkeypatch_session):
    plan, lens = plan_for(lengths, block_size=block_size, num_kv_heads=num_kv_heads, monkeypatch=monkeypatch_session)
    work = wl.build_work_list(plan, lens)
    check_work_list(plan, lens, work)
    if plan.balanced:
        sizes = [min(last, -(-int(lens[s]) // block_size)) - first for s, first, last, _ in work.items.tolist()]
        assert sizes == sorted(sizes, reverse=True)  # longest first


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.one_of(st.just(0), st.just(1), st.integers(0, 40000)), min_size=1, max_size=40),
       window=st.one_of(st.just(1), st.integers(1, 50000)), block_size=st.sampled_from([1, 5, 16, 256]))
def test_windowed_work_list_covers_each_window_once_and_follows_the_attended_lengths(
        lengths, window, block_size, monkeypatch_session):
    """With a window, each sequence's programs start at its window's first block and
    read on to its end, once; plan and programs are those of a plain batch whose
    contexts are the attended lengths rounded out to that block (so a split count,
    a balanced budget and the number of programs follow ``min(window, context)``)."""
    monkeypatch_session.setattr(pa.runtime, "num_sms", lambda device: 132)
    shape = shape_for(lengths, block_size=block_size, window=window)
    launch = plan_decode(shape, torch.device("cpu"), torch.float16)
    first = shape.first_blocks
    check_work_list(launch.plan, shape.context_lens, launch.work, first_blocks=first)
    plain = plan_decode(shape_for((shape.context_lens - first * block_size).tolist(), block_size=block_size),
                        torch.device("cpu"), torch.float16)
    assert launch.plan == plain.plan
    shifted = launch.work.items.clone().long()
    seqs = shifted[:, int(wl.ITEM_SEQ)]
    shifted[:, int(wl.ITEM_FIRST_BLOCK)] -= first[seqs]
    not_last = shifted[:, int(wl.ITEM_LAST_BLOCK)] != wl.TO_CONTEXT_END
    shifted[not_last, int(wl.ITEM_LAST_BLOCK)] -= first[seqs[not_last]]
    assert torch.equal(shifted, plain.work.items.long())
    assert torch.equal(launch.work.sequences, plain.work.sequences)


def test_a_window_cuts_the_programs_of_long_contexts(monkeypatch):
    """Four sequences of 32768 tokens under a window of 4001 (starting at a block's
    last slot) get the split plan and programs of 4016-token contexts: splits an
    eighth as long, each sequence's first program at its window's block; a ragged
    batch's balanced plan gets the budget and pieces of its attended lengths."""
    monkeypatch.setattr(pa.runtime, "num_sms", lambda device: 132)
    whole = plan_decode(shape_for([32768] * 4), torch.device("cpu"), torch.float16)
    windowed = plan_decode(shape_for([32768] * 4, window=4001), torch.device("cpu"), torch.float16)
    short = plan_decode(shape_for([4016] * 4), torch.device("cpu"), torch.float16)
    assert windowed.plan == short.plan and windowed.work.num_items == short.work.num_items
    assert windowed.plan.blocks_per_split * 8 == whole.plan.blocks_per_split
    firsts = {}
    for seq, first, *_ in windowed.work.items.tolist():
        firsts[seq] = min(first, firsts.get(seq, first))
    assert firsts == {seq: (32768 - 4001) // 16 for seq in range(4)}
    ragged = [30000, 100, 200, 5000]
    whole = plan_decode(shape_for(ragged), torch.device("cpu"), torch.float16)
    windowed = plan_decode(shape_for(ragged, window=900), torch.device("cpu"), torch.float16)
    short = plan_decode(shape_for([912, 100, 200, 912]), torch.device("cpu"), torch.float16)
    assert whole.plan.balanced and windowed.plan == short.plan
    assert windowed.work.sequences.tolist() == short.work.sequences.tolist()
    assert windowed.work.num_items < whole.work.num_items


@pytest.fixture(scope="module")
def monkeypatch_session():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_ragged_batches_get_the_balanced_plan_and_uniform_ones_keep_splits(monkeypatch):
    plan, _ = plan_for([8192] * 8, monkeypatch=monkeypatch)
    assert not plan.balanced
    plan, lens = plan_for([30000, 100, 200, 5000], monkeypatch=monkeypatch)
    assert plan.balanced
    work = wl.build_work_list(plan, lens)
    per_seq = work.sequences[:, 2].tolist()
    assert per_seq[0] > per_seq[3] > 1 and per_seq[1] == per_seq[2] == 1  # pieces follow length
    # A split count given by the caller means the split plan, unless balanced is asked for too.
    assert not plan_for([30000, 100], monkeypatch=monkeypatch, num_splits=4)[0].balanced
    assert plan_for([30000, 100], monkeypatch=monkeypatch, num_splits=4, balanced=True)[0].balanced


@pytest.mark.parametrize("budget", [64, 264, 1056])
def test_balanced_plan_keeps_within_its_program_budget(budget, monkeypatch):
    lengths = [32000, 17, 0, 9000, 1, 25000, 300, 8000]
    plan, lens = plan_for(lengths, monkeypatch=monkeypatch, max_programs=budget)
    work = wl.build_work_list(plan, lens)
    assert work.num_items * 8 <= budget
    # The cap is the smallest that fits: one tile less would need more programs.
    smaller = plan.blocks_per_split - plan.blocks_per_tile
    if smaller * plan.block_size >= lp.BALANCED_MIN_TOKENS:
        needed = (lens + plan.block_size - 1) // plan.block_size
        assert 8 * int(((needed + smaller - 1) // smaller).clamp(min=1).sum()) > budget


def test_balanced_budget_follows_rows_and_work(monkeypatch):
    few, many_rows = lp.balanced_budget(torch.tensor([30000, 100, 5000]), 8, 132)
    assert not many_rows and 2 * 132 <= few <= 8 * 132
    many, many_rows = lp.balanced_budget(torch.tensor([5000, 10] * 16), 8, 132)
    assert many_rows and many == 4 * 32 * 8
    assert lp.balanced_budget(torch.tensor([5000, 10] * 64), 8, 132)[0] == 8 * 132
    # A long-tailed batch of 32 (a few long among many short) has few effective rows.
    long_tail = torch.tensor(pa.ragged_lengths(32, 1, 32768, seed=1, spread="long-tail"))
    budget, many_rows = lp.balanced_budget(long_tail, 8, 132)
    assert not many_rows and budget % 132 == 0


@pytest.mark.parametrize(
    "lengths",
    [(0, 1, 900, 0, 1), (0,) * 12 + (700,), (1, 600, 64, 0, 300, 17)],
    ids=["zero-one-long", "one-long-among-empty", "mixed"],
)
@pytest.mark.parametrize("block_size", [16, 5])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_balanced_plan_is_exact_on_dirty_memory(lengths, block_size, dtype, device, seed):
    inputs = build(device, seed, context_lens=lengths, block_size=block_size, dtype=dtype,
                   num_heads=6, num_kv_heads=2, head_dim=40)
    args = inputs.args()
    launch = pa.prepare_triton_decode(*args, balanced=True, max_programs=12, block_n=32)
    plan = pa.plan_launch(pa.check_decode_args(*args), inputs.query.device, inputs.query.dtype,
                          balanced=True, max_programs=12, block_n=32)
    assert plan.balanced
    for _ in range(2):  # the merge's counters reset: a second launch merges again
        launch().fill_(float("nan"))
        out = launch()
        assert_matches(out, inputs.query, pa.reference_decode(*args))
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.equal(out[b], torch.zeros_like(out[b]))


@pytest.mark.parametrize("block_size", [16, 5])
def test_balanced_plan_with_options_is_exact_on_dirty_memory(block_size, device, seed):
    """The balanced plan's longest-first pieces, with a window (each sequence's
    pieces from its first block), sinks and a soft-cap."""
    lengths = (1, 600, 64, 0, 300, 17)
    inputs = build(device, seed, context_lens=lengths, block_size=block_size, dtype="float16",
                   num_heads=6, num_kv_heads=2, head_dim=40)
    kw = {**option_sets(6, inputs.query.device, seed)["all"], "window": 130}
    args = poison_outside_windows(inputs.args(), kw["window"])
    launch = pa.prepare_triton_decode(*args, **kw, balanced=True, max_programs=12, block_n=32)
    expected = pa.reference_decode(*args, **kw)
    for _ in range(2):
        launch().fill_(float("nan"))
        out = launch()
        assert_matches(out, inputs.query, expected)
    assert torch.equal(out[3], torch.zeros_like(out[3]))


def test_balanced_override_must_be_a_bool(device, seed):
    inputs = build(device, seed, context_lens=(30, 4), dtype="float32")
    with pytest.raises(ValueError, match="balanced must be True, False or None"):
        pa.prepare_triton_decode(*inputs.args(), balanced=1)
    with pytest.raises(ValueError, match="max_programs must be a positive whole number"):
        pa.prepare_triton_decode(*inputs.args(), max_programs=0)
