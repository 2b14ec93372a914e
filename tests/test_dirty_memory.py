"""Dirty memory: an implementation's output depends only on the K/V slots the
reference reads.

A recycled block holds whatever its last owner left, and a fresh ``torch.empty``
pool can hold NaN bit patterns. So every slot no context covers holds NaN, +Inf,
-Inf, a huge finite value or a denormal, and every block-table entry past a
context holds -1, a stale id or an id past the pool; the geometry is drawn by
hypothesis (ragged lengths with 0 and exact block multiples, block sizes 1..256,
GQA/MQA, odd head_dim, shuffled tables, sequences sharing physical blocks,
including a partly filled last block that another sequence fills further), and so
are the attention options: with a sliding window the slots before each window are
dirty too and the table entries before its first block freed (-1, stale, past the
pool). Every implementation, and the Triton kernel's split-K path, must stay finite
and within tolerance of the float64 reference.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paged_attention as pa
from paged_attention.poison import context_mask
from helpers import DTYPES, IMPLS, assert_matches, paged_inputs, sink_logits


@st.composite
def dirty_batches(draw, *, max_batch: int, max_blocks: int, max_head_dim: int, device: str):
    """``(args, num_splits, options)``: poisoned decode inputs of a drawn geometry, a
    split count for the Triton kernel's split-K path, and drawn attention options."""
    block_size = draw(st.one_of(st.sampled_from([1, 3, 16, 17, 100, 256]), st.integers(1, 256)))
    batch = draw(st.integers(1, max_batch))
    lengths = []
    for _ in range(batch):
        blocks = draw(st.integers(0, max_blocks))
        # 0, exact block multiples, and contexts that end inside their last block
        cut = draw(st.sampled_from([0, 0, 1, block_size - 1])) if blocks else 0
        lengths.append(max(0, blocks * block_size - min(cut, block_size - 1)))
    needed = [-(-n // block_size) for n in lengths]
    num_kv_heads = draw(st.sampled_from([1, 1, 2, 3]))
    group = draw(st.sampled_from([1, 2, 4]))  # num_kv_heads 1 and group > 1: MQA
    head_dim = draw(st.one_of(st.sampled_from([1, 5, 24, 33]), st.integers(1, max_head_dim)))
    spare = draw(st.integers(0, 4))
    num_blocks = max(1, sum(needed) + spare)
    order = draw(st.permutations(range(num_blocks)))  # shuffled physical ids
    block_ids, cursor = [], 0
    for b, n in enumerate(needed):
        ids = list(order[cursor : cursor + n])
        cursor += n
        if b and n and needed[0] and draw(st.booleans()):
            # share a prefix of sequence 0's blocks (forked / prefix-cached), the
            # last shared one possibly partly filled by either sequence
            shared = draw(st.integers(1, min(n, needed[0])))
            ids[:shared] = block_ids[0][:shared]
        block_ids.append(ids)
    extra_cols = draw(st.integers(0, 3))  # entries past every context: -1, stale, past the pool
    window = draw(st.one_of(st.none(), st.integers(1, max(1, max(lengths) + 2))))
    seed = draw(st.integers(0, 2**31 - 1))
    args = paged_inputs(
        lengths, block_ids, num_blocks=num_blocks, block_size=block_size,
        num_heads=num_kv_heads * group, num_kv_heads=num_kv_heads, head_dim=head_dim,
        dtype=draw(st.sampled_from(DTYPES)), device=device, seed=seed,
        table_cols=max(1, max(needed) + extra_cols), window=window,
    )
    options = dict(window=window, soft_cap=draw(st.one_of(st.none(), st.floats(0.1, 20.0))),
                   sinks=sink_logits(num_kv_heads * group, device, seed) if draw(st.booleans()) else None)
    return args, draw(st.integers(1, 4)), {k: v for k, v in options.items() if v is not None}


def check_every_implementation(args: tuple[torch.Tensor, ...], num_splits: int, options: dict) -> None:
    q = args[0]
    expected = pa.reference_decode(*args, **options)
    assert torch.isfinite(expected).all()
    runs = {name: (lambda fn=fn: fn(*args, **options)) for name, fn in IMPLS.items()}
    runs["triton split-K"] = pa.prepare_triton_decode(*args, num_splits=num_splits, **options)
    for name, run in runs.items():
        out = run()
        assert torch.isfinite(out).all(), f"{name} wrote NaN or Inf"
        assert_matches(out, q, expected)


def test_the_strategy_really_poisons():
    """The geometry above is dirty: uncovered slots hold NaN and ±Inf, and the
    table has garbage past the contexts (a test that cannot fail is a defect)."""
    q, k, v, tables, lens = paged_inputs([3, 0], [[2], []], num_blocks=4, block_size=4, table_cols=4)
    covered = context_mask(tables, lens, 4, 4)
    dirt = k[~covered]
    assert torch.isnan(dirt).any() and torch.isposinf(dirt).any() and torch.isneginf(dirt).any()
    assert set(tables[0, 1:].tolist()) >= {4, 2**31 - 1}  # past its one block: past the pool
    assert set(tables[1].tolist()) >= {-1, 4, 2**31 - 1}  # an empty sequence's whole row
    # A window of 3 over 10 tokens in blocks of 4 reads positions 7..9: slot 3 of the
    # second block and the third block's first two; the first block's entry is freed.
    q, k, v, tables, lens = paged_inputs([10], [[1, 3, 0]], num_blocks=4, block_size=4, window=3)
    covered = context_mask(tables, lens, 4, 4, torch.tensor([7]))
    assert covered.sum() == 3 and covered[3, 3] and covered[0, :2].all()
    assert tables[0, 0] == -1 and not torch.isfinite(k[3, :3]).all() and torch.isnan(k[1]).any()
    assert torch.isfinite(k[covered]).all()


#: The small variant runs wherever the suite runs (Triton interpreted on a CPU).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=dirty_batches(max_batch=4, max_blocks=3, max_head_dim=40, device=DEVICE))
def test_dirty_memory_never_reaches_the_output(batch):
    check_every_implementation(*batch)


@pytest.mark.gpu
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=dirty_batches(max_batch=12, max_blocks=40, max_head_dim=256, device="cuda"))
def test_gpu_dirty_memory_never_reaches_the_output(batch):
    check_every_implementation(*batch)
