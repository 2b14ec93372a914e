"""The serving page's history of a simulation: every snapshot reproduced, pool changes counted, its limits."""

import numpy as np
import pytest
import torch

from explorer.serving.history import (
    MAX_STEP_BLOCKS,
    StepRecord,
    simulate,
    valid_block_sizes,
)
from explorer.serving.simulator import ServingSimulator
from explorer.serving.traffic import LengthDist, ServingConfig

SERVING = ServingConfig(num_blocks=48, block_size=4, max_batch_size=5, arrival_rate=0.6,
                        prompt_len=LengthDist("long-tail", 2, 40), output_len=LengthDist("uniform", 2, 20), seed=3)
SHARED = ServingConfig(num_blocks=64, block_size=4, max_batch_size=6, arrival_rate=0.1,
                       prompt_len=LengthDist("uniform", 2, 12), output_len=LengthDist("uniform", 2, 16), seed=0,
                       system_prompt=9, samples=2)


@pytest.mark.parametrize("config", [SERVING, SHARED], ids=["plain", "sharing"])
def test_history_reproduces_every_snapshot(config):
    """With sharing too: a shared block's owner is its lowest holder in the record, as in the snapshot."""
    history = simulate(config, 80)
    snapshots = ServingSimulator(config).run(80)
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
    assert (metrics["copied"] == 0).all() and (metrics["revived"] == 0).all()  # nothing shared
    for step in (0, 10, 40, 79):
        c = history.changes(step)
        taken, freed, recycled = np.array(c.taken, dtype=int), np.array(c.freed, dtype=int), c.recycled
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


# -- pool changes under sharing: a block that gains or loses a reference is neither taken nor freed --------



def _holders(record: StepRecord) -> list[set[int]]:
    """The seq_ids holding each block at the end of ``record``'s step."""
    held: list[set[int]] = [set() for _ in range(record.num_blocks)]
    for seq, row in zip(record.seq_ids.tolist(), record.block_tables()):
        for b in row[row >= 0]:
            held[b].add(seq)
    return held


def test_pool_changes_under_sharing_follow_reference_counts():
    history = simulate(SHARED, 150)
    m = history.metrics
    assert m["copied"].sum() > 0 and m["revived"].sum() > 0 and m["recycled"].sum() > 0
    # Every block that enters or leaves use is one event: the blocks in use add up.
    np.testing.assert_array_equal(np.diff(m["blocks_in_use"].to_numpy(), prepend=0),
                                  (m["taken"] + m["revived"] - m["freed"]).to_numpy())
    np.testing.assert_array_equal(m["copied"].cumsum().to_numpy(), m["cow_copies"].to_numpy())
    kept_with_new_owner = 0
    for step in range(1, history.steps):
        c = history.changes(step)
        before, after = _holders(history.records[step - 1]), _holders(history.records[step])
        assert set(c.recycled) <= set(c.taken) and set(c.copied) <= set(c.taken)
        assert not set(c.revived) & set(c.taken)
        for b in c.revived:  # a cached block back from the free list, not a block in use gaining a reference
            assert not before[b] and after[b]
        for b in range(SHARED.num_blocks):
            if before[b] & after[b]:  # some sequence held it all step long: it never went back to the free list
                assert b not in (*c.taken, *c.freed, *c.revived), (step, b, c)
                kept_with_new_owner += min(before[b]) != min(after[b])
        for b in c.freed:  # freed only when its last reference goes (or taken again within the step)
            assert not after[b] or b in (*c.taken, *c.revived)
        for b in c.copied:  # a copy-on-write copy is a new block, held by the sequence that wrote
            assert len(after[b]) == 1 or b in c.freed
    # The owner map names a shared block's lowest holder: it changes when that holder leaves, the block stays.
    assert kept_with_new_owner > 0


def test_pool_changes_of_the_plain_pool_are_the_owner_map_differences():
    """Without sharing, the events are what comparing the pools of two steps shows, plus the blocks of a
    sequence admitted and finished within the step (taken and freed, invisible in either pool)."""
    history = simulate(SERVING, 80)
    within = 0
    for step in range(1, 80):
        owner, before = history.records[step].pool_owner(), history.records[step - 1].pool_owner()
        c = history.changes(step)
        taken = set(np.flatnonzero((owner >= 0) & (owner != before)).tolist())
        freed = set(np.flatnonzero((before >= 0) & (owner != before)).tolist())
        assert taken <= set(c.taken) and freed <= set(c.freed)
        assert set(c.taken) - taken == set(c.freed) - freed == set(c.taken) & set(c.freed) - taken - freed
        within += len(set(c.taken) - taken)
        assert not c.copied and not c.revived
    assert within > 0
