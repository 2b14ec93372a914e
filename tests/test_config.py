"""DecodeConfig: derived sizes, memory estimates, ragged lengths and whole-number fields."""

from __future__ import annotations


import numpy as np
import pytest

import paged_attention as pa
from helpers import DTYPES, dtype_id, seed  # noqa: F401
from test_inputs import coverage


def test_derived_sizes():
    config = pa.DecodeConfig(batch_size=3, context_lens=(5, 40, 17), block_size=16, spare_blocks=3)
    assert config.lengths == (5, 40, 17)
    assert config.blocks_per_sequence == (1, 3, 2)
    assert config.max_num_blocks == 3
    assert config.num_blocks_used == 6
    assert config.num_blocks == 9
    assert config.wasted_slots == 6 * 16 - 62
    assert pa.DecodeConfig(batch_size=3, context_lens=7).lengths == (7, 7, 7)
    assert pa.DecodeConfig(batch_size=2, context_lens=0).max_num_blocks == 1
    # Default spare pool: an eighth of the needed blocks, at least one.
    assert pa.DecodeConfig(batch_size=3, context_lens=(5, 40, 17), block_size=16).num_blocks == 7
    assert pa.DecodeConfig(batch_size=5, context_lens=256, block_size=16).num_blocks == 80 + 10


@pytest.mark.parametrize(
    "dtype, kv, needed, decode, memory",
    [
        # blocks (1, 3, 2) + 3 spare = 9; 62 tokens; 2 KV heads of 64; query 3 x 8 x 64
        ("float16", 2 * 9 * 16 * 2 * 64 * 2, 2 * 62 * 2 * 64 * 2, 31744 + 6144, 73728 + 6144 + 4 * 3 * 4),
        ("bfloat16", 73728, 31744, 37888, 79920),
        ("float32", 147456, 63488, 63488 + 12288, 147456 + 12288 + 48),
    ],
)
def test_memory_estimates_by_hand(dtype, kv, needed, decode, memory):
    config = pa.DecodeConfig(batch_size=3, context_lens=(5, 40, 17), num_heads=8, num_kv_heads=2, head_dim=64,
                             block_size=16, dtype=dtype, spare_blocks=3)
    assert config.element_size == {"float16": 2, "bfloat16": 2, "float32": 4}[dtype]
    assert config.kv_cache_bytes() == kv
    assert config.needed_kv_bytes() == needed
    assert config.decode_bytes() == decode
    assert config.memory_bytes() == memory


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_memory_estimates_match_the_built_tensors(dtype, seed):
    config = pa.DecodeConfig(batch_size=5, context_lens=(0, 1, 33, 64, 100), num_heads=12, num_kv_heads=4,
                             head_dim=24, block_size=16, dtype=dtype_id(dtype), seed=seed)
    inputs = pa.build_decode_inputs(config)
    q, k, v, tables, lens = inputs.args()
    assert config.kv_cache_bytes() == k.nbytes + v.nbytes
    assert config.memory_bytes() == 2 * q.nbytes + k.nbytes + v.nbytes + tables.nbytes + lens.nbytes
    covered = coverage(tables, lens, config.num_blocks, config.block_size)
    per_slot = 2 * config.num_kv_heads * config.head_dim * config.element_size
    assert config.needed_kv_bytes() == int(covered.sum()) * per_slot
    assert config.decode_bytes() == config.needed_kv_bytes() + 2 * q.nbytes


@pytest.mark.parametrize("spread", ["uniform", "long-tail"])
@pytest.mark.parametrize("low, high", [(0, 0), (0, 10), (1, 4096), (17, 17), (100, 101)])
def test_ragged_lengths_stay_in_bounds(spread, low, high, seed):
    for s in range(seed, seed + 20):
        lengths = pa.ragged_lengths(9, low, high, seed=s, spread=spread)
        assert isinstance(lengths, tuple) and len(lengths) == 9
        assert all(isinstance(n, int) and low <= n <= high for n in lengths)


@pytest.mark.parametrize("spread", ["uniform", "long-tail"])
def test_ragged_lengths_follow_the_seed(spread, seed):
    a = pa.ragged_lengths(16, 1, 4096, seed=seed, spread=spread)
    assert a == pa.ragged_lengths(16, 1, 4096, seed=seed, spread=spread)
    assert a != pa.ragged_lengths(16, 1, 4096, seed=seed + 1, spread=spread)


def test_ragged_lengths_long_tail_is_skewed(seed):
    uniform = sorted(pa.ragged_lengths(400, 1, 4096, seed=seed))
    tail = sorted(pa.ragged_lengths(400, 1, 4096, seed=seed, spread="long-tail"))
    assert tail[200] < 500 < uniform[200]  # most sequences short...
    assert tail[-1] > 2000  # ...and a few long


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((0, 1, 5), {}, "batch_size must be a positive integer"),
        ((3, 5, 4), {}, r"need 0 <= low <= high"),
        ((3, -1, 4), {}, r"need 0 <= low <= high"),
        ((3, 1, 4), {"spread": "zipf"}, r"spread must be 'uniform' or 'long-tail'"),
    ],
)
def test_ragged_lengths_reject_bad_ranges(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        pa.ragged_lengths(*args, **kwargs)


def test_numpy_integers_are_whole_numbers():
    config = pa.DecodeConfig(batch_size=2, context_lens=[np.int64(3), 4]).validate()
    assert config.context_lens == (3, 4) and all(type(n) is int for n in config.context_lens)
    config = pa.DecodeConfig(batch_size=np.int32(2), context_lens=np.array([5, 0]), num_heads=np.int64(8),
                          num_kv_heads=np.uint8(2), head_dim=np.int16(24), block_size=np.int64(16),
                          spare_blocks=np.int64(1)).validate()
    assert config == pa.DecodeConfig(batch_size=2, context_lens=(5, 0), num_heads=8, num_kv_heads=2, head_dim=24,
                                  spare_blocks=1)
    assert type(config.batch_size) is int and hash(config) == hash(config.with_())
    for bad, match in [(dict(context_lens=[1.5, 2]), "context_lens"), (dict(context_lens=[True, 2]), "context_lens"),
                       (dict(batch_size=np.float64(2.0)), "batch_size"), (dict(spare_blocks=True), "spare_blocks")]:
        with pytest.raises(ValueError, match=match):
            pa.DecodeConfig(**{"batch_size": 2, "context_lens": 4, **bad}).validate()
