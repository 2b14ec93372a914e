"""DecodeConfig: validation, derived sizes, memory estimates (over the attended tokens), ragged lengths and
whole-number fields."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

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


# -- validation ------------------------------------------------------------------

BASE_CONFIG = dict(batch_size=2, context_lens=(5, 9), num_heads=4, num_kv_heads=2, head_dim=16, block_size=4,
                   dtype="float32", device="cpu")

BAD_CONFIGS = {
    "batch-zero": (dict(batch_size=0, context_lens=3), r"batch_size must be a positive integer; got 0"),
    "batch-negative": (dict(batch_size=-2, context_lens=3), r"batch_size must be a positive integer"),
    "batch-float": (dict(batch_size=2.0), r"batch_size must be a positive integer; got 2.0"),
    "batch-bool": (dict(batch_size=True, context_lens=3), r"batch_size must be a positive integer; got True"),
    "heads-zero": (dict(num_heads=0), r"num_heads must be a positive integer"),
    "kv-heads-zero": (dict(num_kv_heads=0), r"num_kv_heads must be a positive integer"),
    "head-dim-zero": (dict(head_dim=0), r"head_dim must be a positive integer"),
    "head-dim-too-big": (dict(head_dim=513), r"head_dim must be at most 512; got 513"),
    "block-size-zero": (dict(block_size=0), r"block_size must be a positive integer"),
    "block-size-too-big": (dict(block_size=4097), r"block_size must be at most 4096; got 4097"),
    "heads-not-multiple": (dict(num_heads=6, num_kv_heads=4), r"num_heads \(6\) must be a multiple of num_kv_heads \(4\)"),
    "lens-count": (dict(context_lens=(1, 2, 3)), r"context_lens must hold one value per sequence: got 3 for batch_size 2"),
    "lens-negative-scalar": (dict(context_lens=-1), r"context_lens must be non-negative integers; got -1"),
    "lens-negative-entry": (dict(context_lens=(4, -3)), r"context_lens must be non-negative integers; got -3"),
    "dtype-float64": (dict(dtype="float64"), r"dtype must be one of float16, bfloat16, float32; got 'float64'"),
    "dtype-torch-float64": (dict(dtype=torch.float64), r"dtype must be one of"),
    "dtype-unknown": (dict(dtype="fp8"), r"dtype must be one of"),
    "layout-unknown": (dict(block_layout="random"), r"block_layout must be one of contiguous, shuffled, fragmented"),
    "spare-negative": (dict(spare_blocks=-1), r"spare_blocks must be a non-negative integer; got -1"),
    "spare-float": (dict(spare_blocks=1.5), r"spare_blocks must be a non-negative integer"),
    "device-unknown": (dict(device="tpu"), r"device must be 'cpu' or 'cuda'; got 'tpu'"),
    "device-mps": (dict(device="mps"), r"device must be 'cpu' or 'cuda'"),
    "window-zero": (dict(window=0), r"window must be an integer >= 1 \(the positions each query attends to\) or None; got 0"),
    "window-float": (dict(window=4.5), r"window must be an integer >= 1 .* or None; got 4.5"),
    "soft-cap-negative": (dict(soft_cap=-1.0), r"soft_cap must be a finite number > 0 or None; got -1.0"),
    "soft-cap-nan": (dict(soft_cap=math.nan), r"soft_cap must be a finite number > 0 or None; got nan"),
    "sinks-not-a-bool": (dict(sinks=1), r"sinks must be True or False; got 1"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_bad_config_raises(case):
    changes, message = BAD_CONFIGS[case]
    config = pa.DecodeConfig(**{**BASE_CONFIG, **changes})
    with pytest.raises(ValueError, match=message):
        config.validate()
    with pytest.raises(ValueError, match=message):
        pa.build_decode_inputs(config)
    with pytest.raises(ValueError, match=message):
        pa.assign_blocks(config)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_config_without_a_gpu_raises(device):
    config = pa.DecodeConfig(**{**BASE_CONFIG, "device": device})
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        config.validate()
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        pa.build_decode_inputs(config)


@pytest.mark.parametrize(
    "changes",
    [
        dict(head_dim=512),
        dict(head_dim=1),
        dict(block_size=4096, num_kv_heads=1, head_dim=8),
        dict(context_lens=(0, 0)),
        dict(context_lens=0),
        dict(spare_blocks=0),
        dict(num_heads=7, num_kv_heads=7),
        dict(num_heads=7, num_kv_heads=1),
        dict(dtype=torch.bfloat16),
        dict(context_lens=[3, 4]),  # a list becomes a tuple
        dict(window=1, soft_cap=1e-3, sinks=True),
        dict(window=10**9, soft_cap=1e9),
    ],
    ids=["head-dim-512", "head-dim-1", "block-4096", "empty-contexts", "empty-scalar", "no-spare",
         "mha-7", "mqa-7", "torch-dtype", "list-lengths", "tiny-options", "huge-options"],
)
def test_boundary_configs_are_valid(changes):
    config = pa.DecodeConfig(**{**BASE_CONFIG, **changes})
    assert config.validate() is config
    hash(config)  # usable as a cache key
    inputs = pa.build_decode_inputs(config)
    assert inputs.query.shape == (2, config.num_heads, config.head_dim)
    assert tuple(inputs.context_lens.tolist()) == config.lengths


def test_tolerance_rejects_unsupported_dtypes():
    for dtype in (torch.float64, torch.int32, torch.float8_e4m3fn):
        with pytest.raises(ValueError, match="dtype must be one of float16, bfloat16, float32"):
            pa.tolerance(dtype)


def test_tolerance_values():
    assert pa.tolerance(torch.float32) == (1e-4, 1e-4)
    assert pa.tolerance(torch.float16) == (2e-3, 2e-3)
    assert pa.tolerance(torch.bfloat16) == (1.6e-2, 1.6e-2)


# -- with a sliding window: bytes of the attended tokens only ------------------------------

def test_window_byte_counts_by_hand():
    # block 16, prefix 35 (2 shared blocks), groups {0, 1} and {2, 3}; window 20
    config = pa.DecodeConfig(batch_size=4, context_lens=(40, 45, 37, 50), block_size=16, shared_prefix=35,
                             prefix_groups=2, num_heads=8, num_kv_heads=2, head_dim=64, window=20)
    assert config.window_starts == (20, 25, 17, 30) and config.attended_lengths == (20,) * 4
    # Shared positions 0..31: group 0 reads 20..31 once, group 1 reads 17..31 once.
    assert config.unique_read_tokens == (8 + 13 + 5 + 18) + 12 + 15
    assert config.unique_tokens == 172 - 2 * 32  # what the pool holds does not change
    per_token = 2 * 2 * 64 * 2
    qo = 2 * 4 * 8 * 64 * 2
    assert config.needed_kv_bytes() == 80 * per_token and config.decode_bytes() == 80 * per_token + qo
    assert config.unique_kv_bytes() == 71 * per_token and config.unique_decode_bytes() == 71 * per_token + qo
    wide = config.with_(window=50)  # no shorter than any context: as without a window
    plain = config.with_(window=None)
    assert (wide.needed_kv_bytes(), wide.unique_kv_bytes()) == (plain.needed_kv_bytes(), plain.unique_kv_bytes())
    assert pa.DecodeConfig(batch_size=2, context_lens=(0, 9), window=4).attended_lengths == (0, 4)


@pytest.mark.parametrize("window", [1, 7, 16, 21, 40, 100])
@pytest.mark.parametrize("shared_prefix, groups", [(0, 1), (35, 2), (48, 1)])
def test_window_bytes_count_each_read_slot_once(window, shared_prefix, groups, seed):
    """The unique bytes are the slots the windows cover in the built pool (a shared
    block once); the logical bytes every attended token; both scale with the window."""
    config = pa.DecodeConfig(batch_size=5, context_lens=(48, 60, 75, 90, 51), num_heads=4, num_kv_heads=2,
                             head_dim=8, block_size=16, shared_prefix=shared_prefix, prefix_groups=groups,
                             seed=seed, window=window)
    inputs = pa.build_decode_inputs(config, poison=True)
    starts = torch.tensor(config.window_starts)
    read = pa.poison.context_mask(pa.assign_blocks(config)[0], inputs.context_lens, config.num_blocks, 16, starts)
    per_token = 2 * 2 * 8 * 2
    assert config.unique_kv_bytes() == int(read.sum()) * per_token
    assert config.needed_kv_bytes() == sum(min(n, window) for n in config.lengths) * per_token
    assert torch.isfinite(inputs.k_cache[read]).all() and not torch.isfinite(inputs.k_cache[~read]).all()
    assert math.isclose(config.needed_kv_bytes() / config.with_(window=None).needed_kv_bytes(),
                        sum(min(n, window) for n in config.lengths) / sum(config.lengths))
