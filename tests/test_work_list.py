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
from helpers import assert_matches, build, seed  # noqa: F401


def plan_for(lengths, *, block_size=16, num_kv_heads=8, num_sms=132, dtype=torch.float16, monkeypatch=None, **kw):
    lens = torch.tensor(lengths, dtype=torch.int64)
    shape = pa.DecodeShape(
        batch_size=len(lengths), num_heads=4 * num_kv_heads, num_kv_heads=num_kv_heads, head_dim=128,
        num_blocks=1, block_size=block_size, max_num_blocks=1, scale=1.0, context_lens=lens,
        block_tables=None, kv_dtype=dtype,
    )
    monkeypatch.setattr(pa.runtime, "num_sms", lambda device: num_sms)
    return lp.plan_launch(shape, torch.device("cpu"), dtype, **kw), lens


def check_work_list(plan, lens, work):
    """Every needed block of every sequence is read by exactly one program; each
    sequence has at least one program and consecutive slots; pieces respect the cap."""
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
        assert blocks == list(range(needed))
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


def test_balanced_override_must_be_a_bool(device, seed):
    inputs = build(device, seed, context_lens=(30, 4), dtype="float32")
    with pytest.raises(ValueError, match="balanced must be True, False or None"):
        pa.prepare_triton_decode(*inputs.args(), balanced=1)
    with pytest.raises(ValueError, match="max_programs must be a positive whole number"):
        pa.prepare_triton_decode(*inputs.args(), max_programs=0)
