"""The serving page's history of a simulation: every snapshot reproduced, pool changes counted, its limits."""

import numpy as np
import pytest
import torch

from explorer.serving_history import MAX_STEP_BLOCKS, StepRecord, simulate, valid_block_sizes
from explorer.simulator import LengthDist, ServingConfig, ServingSimulator


SERVING = ServingConfig(num_blocks=48, block_size=4, max_batch_size=5, arrival_rate=0.6,
                        prompt_len=LengthDist("long-tail", 2, 40), output_len=LengthDist("uniform", 2, 20), seed=3)


def test_history_reproduces_every_snapshot():
    history = simulate(SERVING, 80)
    snapshots = ServingSimulator(SERVING).run(80)
    assert history.steps == 80
    for record, snap in zip(history.records, snapshots):
        assert record.step == snap.step
        np.testing.assert_array_equal(record.pool_owner(), snap.pool_owner.numpy())
        np.testing.assert_array_equal(record.block_tables(), snap.block_tables.numpy())
        back = record.snapshot()
        assert torch.equal(back.block_tables, snap.block_tables) and torch.equal(back.pool_owner, snap.pool_owner)
        assert back.metrics() == snap.metrics()


def test_history_counts_taken_freed_and_recycled_blocks():
    history = simulate(SERVING, 80)
    metrics = history.metrics
    assert metrics["recycled"].sum() > 0 and metrics["freed"].sum() > 0
    used = metrics["blocks_in_use"].to_numpy()
    np.testing.assert_array_equal(np.diff(used), (metrics["taken"] - metrics["freed"]).to_numpy()[1:])
    for step in (0, 10, 40, 79):
        taken, freed, recycled = history.changes(step)
        assert (len(taken), len(freed), len(recycled)) == tuple(metrics.loc[step, ["taken", "freed", "recycled"]])
        assert set(recycled) <= set(taken)
        owner = history.records[step].pool_owner()
        assert (owner[taken] >= 0).all() and (owner[freed] != history.records[step - 1].pool_owner()[freed]).all() \
            if step else len(freed) == 0


def test_history_limits_and_block_size_validity():
    with pytest.raises(ValueError, match="steps must be"):
        simulate(SERVING, 0)
    with pytest.raises(ValueError, match="records"):
        simulate(ServingConfig(num_blocks=MAX_STEP_BLOCKS), 2)
    ok, dropped = valid_block_sizes(SERVING, (1, 4, 16, 64, 256), pool_tokens=192)
    assert ok == [1, 4, 16, 64] and dropped == [256]  # 60 tokens fit in 3 blocks of 64, not in 0 of 256


def test_empty_step_record():
    record = StepRecord(0, 4, 8, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert record.block_tables().shape == (0, 1)
    assert (record.pool_owner() == -1).all()
