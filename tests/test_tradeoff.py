"""The block-size trade-off: one request stream replayed at several block sizes."""

from dataclasses import replace

import numpy as np
import pytest
from test_simulator import small_config

from explorer.serving.simulator import ServingSimulator
from explorer.serving.tradeoff import TRADEOFF_COLUMNS, block_size_tradeoff
from explorer.serving.traffic import ServingConfig


def test_tradeoff_under_memory_pressure():
    config = ServingConfig(num_blocks=512, block_size=16, arrival_rate=0.3, seed=1)
    result = block_size_tradeoff(config, steps=120)
    table = result.table.set_index("block_size")
    assert list(result.table.columns) == list(TRADEOFF_COLUMNS)
    assert (table["num_blocks"] * table.index == 512 * 16).all()  # same memory in tokens
    wasted = table["mean_wasted_slots"]
    assert wasted[1] == 0 < wasted[16] < wasted[256]
    assert table.loc[256, "wasted_fraction"] > 0.1
    assert table.loc[256, "mean_waiting"] >= table.loc[1, "mean_waiting"]

    # The representative snapshot is the busiest step of a plain run at that block size.
    for b in (1, 16, 256):
        snap = result.snapshots[b]
        replay = ServingSimulator(replace(config, block_size=b, num_blocks=512 * 16 // b))
        tokens = [s.tokens_stored for s in replay.run(120)]
        assert snap.step == table.loc[b, "busiest_step"] == int(np.argmax(tokens))
        assert snap.tokens_stored == max(tokens)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(block_sizes=()), "must not be empty"),
        (dict(block_sizes=(4, 4)), "distinct"),
        (dict(block_sizes=(0,)), "each block size"),
        (dict(steps=0), "steps"),
        (dict(pool_tokens=30), "block_size 1 with pool_tokens 30: the pool must hold"),
        (dict(pool_tokens=100), "block_size 128 with pool_tokens 100: num_blocks must be a positive"),
    ],
)
def test_tradeoff_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        block_size_tradeoff(small_config(), **kwargs)
