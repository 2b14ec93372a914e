"""The serving simulator with a sliding window: blocks before each window freed every
step (use bounded per sequence), or kept (use grows), and the decode on a windowed
snapshot against the float64 reference."""

import numpy as np
import pytest
import torch

from explorer.serving.history import simulate
from explorer.serving.simulator import ServingSimulator
from explorer.serving.traffic import LengthDist, ServingConfig
from explorer.serving.window import window_bound
from paged_attention import default_device, reference_decode, tolerance, triton_decode


def long_config(**changes):
    """Few long requests: their contexts run far past the window."""
    base = dict(num_blocks=200, block_size=4, max_batch_size=4, arrival_rate=0.3, seed=1,
                prompt_len=LengthDist("uniform", 2, 30), output_len=LengthDist("uniform", 40, 120), window=10)
    return ServingConfig(**{**base, **changes})


@pytest.mark.parametrize("changes", [{}, dict(system_prompt=9, samples=2), dict(block_size=1, window=3)])
def test_freeing_bounds_each_sequences_blocks_by_the_window(changes):
    config = long_config(**changes)
    sim = ServingSimulator(config)
    bound = window_bound(config.window, config.block_size)
    longest = 0
    for _ in range(120):
        snap = sim.step()
        sim.check_invariants()
        tables = snap.block_tables
        held = (tables >= 0).sum(dim=1)
        assert (held <= bound).all(), (held.tolist(), bound)
        # every entry the kernel reads is held, every one before the window's first block is freed
        first = (snap.context_lens - config.window).clamp_min(0) // config.block_size
        columns = torch.arange(tables.shape[1])
        assert ((tables >= 0) == ((columns >= first[:, None]) & (columns < -(-snap.context_lens[:, None] // config.block_size)))).all()
        assert snap.blocks_in_use <= snap.num_running * bound
        assert 0 <= snap.wasted_slots
        longest = max(longest, int(snap.context_lens.max()) if snap.num_running else 0)
    assert longest > 4 * config.window  # the window did move


def test_without_freeing_blocks_grow_with_the_context_and_the_schedule_is_the_plain_one():
    kept = simulate(long_config(free_window=False), 120)
    plain = simulate(long_config(window=None), 120)
    freed = simulate(long_config(), 120)
    assert kept.metrics.equals(plain.metrics)  # a window alone changes what the kernel reads, not the pool
    assert all(r.freed is None for r in kept.records)
    per_seq_kept = (kept.metrics["blocks_in_use"] / kept.metrics["running"].clip(lower=1)).max()
    bound = window_bound(10, 4)
    assert per_seq_kept > 2 * bound  # kept blocks follow the context
    peak_freed, peak_kept = freed.metrics["blocks_in_use"].max(), kept.metrics["blocks_in_use"].max()
    assert peak_freed <= 4 * bound < peak_kept
    assert any(r.freed is not None for r in freed.records)
    assert sum(len(r.changes.freed) for r in freed.records) > sum(len(r.changes.freed) for r in kept.records)


def test_a_full_pool_admits_more_with_freeing():
    tight = dict(num_blocks=64, max_batch_size=16, arrival_rate=0.6, output_len=LengthDist("uniform", 100, 200))
    freed, kept = simulate(long_config(**tight), 150), simulate(long_config(free_window=False, **tight), 150)
    assert freed.metrics["running"].mean() > kept.metrics["running"].mean()
    assert freed.metrics["finished"].iloc[-1] > kept.metrics["finished"].iloc[-1]


def test_step_records_rebuild_the_windowed_tables():
    history = simulate(long_config(), 80)
    sim = ServingSimulator(long_config())
    for record, snap in zip(history.records, sim.run(80)):
        assert np.array_equal(record.block_tables(), snap.block_tables.numpy())
        assert np.array_equal(record.pool_owner(), snap.pool_owner.numpy())
        assert record.snapshot().window == 10


def test_decode_on_a_windowed_snapshot_matches_the_reference():
    history = simulate(long_config(max_batch_size=3), 100)
    step = max(range(100), key=lambda s: (history.records[s].freed is not None, history.records[s].num_running))
    snap = history.records[step].snapshot()
    assert snap.num_running > 1 and (snap.block_tables[:, 0] == -1).any()
    inputs = snap.decode_inputs(num_heads=4, num_kv_heads=2, head_dim=16, dtype="float32", device=default_device())
    assert inputs.config.window == 10 and inputs.kwargs() == {"window": 10}
    # the kernel reads no -1 entry: slots outside each window hold the loud value, so reading one would show
    out = triton_decode(*inputs.args(), **inputs.kwargs())
    atol, rtol = tolerance(torch.float32)
    expected = reference_decode(*inputs.args(), **inputs.kwargs())
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, atol=atol, rtol=rtol)


def test_window_rule():
    with pytest.raises(ValueError, match="window must be a positive integer"):
        long_config(window=0).validate()
