"""The decode-input builder: block layouts, loud values in unused slots (past each context, before each window),
seeding, sink logits, and the built cache holding each attended token once."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paged_attention as pa
from paged_attention.inputs import FREE, OTHER
from paged_attention.poison import context_mask, fill_uncovered
from helpers import DTYPES, dtype_id, seed  # noqa: F401


def needed_blocks(config: pa.DecodeConfig) -> list[int]:
    return [math.ceil(n / config.block_size) for n in config.lengths]


def check_table(config: pa.DecodeConfig, tables: torch.Tensor, owner: torch.Tensor) -> None:
    """Every needed entry is in range, no physical block serves two sequences (or two
    positions of one), entries past the end are -1, and pool_owner agrees."""
    tables, owner = tables.cpu(), owner.cpu()
    assert tables.dtype == torch.int32
    assert tables.shape == (config.batch_size, config.max_num_blocks)
    assert owner.dtype == torch.int64 and owner.shape == (config.num_blocks,)
    used = []
    for b, n in enumerate(needed_blocks(config)):
        ids = tables[b, :n].long()
        assert bool(((ids >= 0) & (ids < config.num_blocks)).all())
        assert bool((tables[b, n:] == -1).all())
        assert bool((owner[ids] == b).all())
        assert int((owner == b).sum()) == n
        used += ids.tolist()
    assert len(set(used)) == len(used) == config.num_blocks_used
    assert set(owner.tolist()) <= {FREE, OTHER, *range(config.batch_size)}


# -- block layouts ----------------------------------------------------------------

LAYOUT_CONFIGS = [
    dict(batch_size=3, context_lens=(5, 40, 17), block_size=8),
    dict(batch_size=5, context_lens=(0, 1, 16, 17, 300), block_size=16, spare_blocks=30),
    dict(batch_size=2, context_lens=(700, 3), block_size=1, spare_blocks=0),
    dict(batch_size=4, context_lens=(0, 0, 0, 0), block_size=16),
    dict(batch_size=6, context_lens=(256, 512, 1, 255, 257, 100), block_size=256),
]


@pytest.mark.parametrize("fields", LAYOUT_CONFIGS, ids=lambda f: f"b{f['block_size']}-{f['context_lens']}")
@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
def test_layouts_give_valid_tables(layout, fields, seed):
    config = pa.DecodeConfig(**fields, block_layout=layout, seed=seed)
    tables, owner = pa.assign_blocks(config)
    check_table(config, tables, owner)
    if layout != "fragmented":
        assert not bool((owner == OTHER).any())
    inputs = pa.build_decode_inputs(config)
    assert torch.equal(inputs.block_tables.cpu(), tables)
    assert torch.equal(inputs.pool_owner, owner)


def test_contiguous_hands_out_blocks_in_order(seed):
    config = pa.DecodeConfig(batch_size=3, context_lens=(5, 40, 17), block_size=8, block_layout="contiguous", seed=seed)
    tables, _ = pa.assign_blocks(config)
    ids = [i for row, n in zip(tables.tolist(), needed_blocks(config)) for i in row[:n]]
    assert ids == list(range(config.num_blocks_used))


def test_shuffled_really_permutes(seed):
    config = pa.DecodeConfig(batch_size=4, context_lens=(100, 37, 64, 200), block_size=8,
                             block_layout="shuffled", spare_blocks=20, seed=seed)
    tables, _ = pa.assign_blocks(config)
    ids = [i for row, n in zip(tables.tolist(), needed_blocks(config)) for i in row[:n]]
    assert ids != sorted(ids)  # not in order
    assert max(ids) >= config.num_blocks_used  # spread over the pool, spares included
    again, _ = pa.assign_blocks(config)
    assert torch.equal(again, tables)  # the seed decides
    other, _ = pa.assign_blocks(config.with_(seed=seed + 1))
    assert not torch.equal(other, tables)


def test_fragmented_interleaves_other_sequences(seed):
    config = pa.DecodeConfig(batch_size=4, context_lens=(300, 170, 64, 400), block_size=8,
                             block_layout="fragmented", spare_blocks=120, seed=seed)
    tables, owner = pa.assign_blocks(config)
    check_table(config, tables, owner)
    ids = [i for row, n in zip(tables.tolist(), needed_blocks(config)) for i in row[:n]]
    # The free list is handed out in ascending order...
    assert ids == sorted(ids)
    # ...and blocks still held by sequences outside the batch lie between ours.
    others = torch.nonzero(owner == OTHER).flatten().tolist()
    assert any(min(ids) < o < max(ids) for o in others)
    gaps = [
        any(row[i] < o < row[i + 1] for o in others)
        for row, n in zip(tables.tolist(), needed_blocks(config))
        for i in range(n - 1)
    ]
    assert any(gaps)  # some sequence's consecutive blocks straddle another's


# -- loud values --------------------------------------------------------------------

def coverage(tables: torch.Tensor, lens: torch.Tensor, num_blocks: int, block_size: int,
             window: int | None = None) -> torch.Tensor:
    """How many attended tokens of the batch (all, or each context's last ``window``)
    each (physical block, slot) holds."""
    count = torch.zeros(num_blocks, block_size, dtype=torch.int64)
    for b, n in enumerate(lens.tolist()):
        for t in range(0 if window is None else max(0, n - window), n):
            count[int(tables[b, t // block_size]), t % block_size] += 1
    return count


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
def test_uncovered_slots_are_loud(layout, dtype, device, seed):
    config = pa.DecodeConfig(batch_size=4, context_lens=(5, 40, 17, 0), num_heads=4, num_kv_heads=2, head_dim=8,
                             block_size=8, dtype=dtype_id(dtype), block_layout=layout, spare_blocks=5,
                             device=device, seed=seed)
    inputs = pa.build_decode_inputs(config)
    for t in inputs.args():
        assert t.device.type == torch.device(device).type
    assert inputs.query.dtype == inputs.k_cache.dtype == inputs.v_cache.dtype == dtype
    assert inputs.context_lens.dtype == torch.int32 and inputs.context_lens.tolist() == [5, 40, 17, 0]
    assert inputs.k_cache.shape == inputs.v_cache.shape == (config.num_blocks, 8, 2, 8)
    covered = coverage(inputs.block_tables.cpu(), inputs.context_lens.cpu(), config.num_blocks, 8) > 0
    for cache in (inputs.k_cache.cpu(), inputs.v_cache.cpu()):
        assert bool((cache[~covered] == pa.LOUD_VALUE).all())  # spare blocks and tail slots
        assert not bool((cache[covered] == pa.LOUD_VALUE).any())
    # The tail of sequence 0's only block (5 of 8 slots used) and of sequence 2's last.
    tail = inputs.k_cache[int(inputs.block_tables[0, 0]), 5:]
    assert bool((tail == pa.LOUD_VALUE).all())
    tail = inputs.v_cache[int(inputs.block_tables[2, 2]), 1:]
    assert bool((tail == pa.LOUD_VALUE).all())
    assert not bool((inputs.query == pa.LOUD_VALUE).any())


def test_loud_value_is_exact_in_every_dtype():
    for dtype in DTYPES:
        assert torch.tensor(pa.LOUD_VALUE, dtype=dtype).item() == pa.LOUD_VALUE


def test_same_seed_same_inputs_other_seed_other_inputs(seed):
    config = pa.DecodeConfig(batch_size=2, context_lens=(5, 20), num_heads=4, num_kv_heads=2, head_dim=8,
                             block_size=4, dtype="float32", seed=seed)
    a, b = pa.build_decode_inputs(config), pa.build_decode_inputs(config)
    c = pa.build_decode_inputs(config.with_(seed=seed + 1))
    for x, y in zip(a.args(), b.args()):
        assert torch.equal(x, y)
    assert not torch.equal(a.query, c.query)


# -- property: the cache holds each token once, and the reference is plain attention --

def dense_attention(inputs: pa.DecodeInputs, scale: float) -> torch.Tensor:
    """Gather each sequence's attended tokens through its block table, then
    attention in float64, soft-capped logits and sinks included, in plain Python."""
    q, k, v, tables, lens = (t.cpu() for t in inputs.args())
    window, cap = inputs.config.window, inputs.config.soft_cap
    batch, num_heads, head_dim = q.shape
    group = num_heads // k.shape[2]
    block_size = k.shape[1]
    out = torch.zeros(batch, num_heads, head_dim, dtype=torch.float64)
    for b in range(batch):
        n = int(lens[b])
        tokens = range(0 if window is None else max(0, n - window), n)
        if n == 0:
            continue
        keys = torch.stack([k[int(tables[b, t // block_size]), t % block_size] for t in tokens]).double()
        values = torch.stack([v[int(tables[b, t // block_size]), t % block_size] for t in tokens]).double()
        for h in range(num_heads):
            logits = [scale * float(keys[i, h // group] @ q[b, h].double()) for i in range(len(tokens))]
            logits = [x if cap is None else cap * math.tanh(x / cap) for x in logits]
            sink = [] if inputs.sinks is None else [float(inputs.sinks[h])]
            top = max(logits + sink)
            weights = torch.tensor([math.exp(x - top) for x in logits], dtype=torch.float64)
            total = float(weights.sum()) + sum(math.exp(x - top) for x in sink)
            out[b, h] = (weights / total) @ values[:, h // group]
    return out


@st.composite
def small_configs(draw):
    batch = draw(st.integers(1, 4))
    num_kv_heads = draw(st.integers(1, 3))
    return pa.DecodeConfig(
        batch_size=batch,
        context_lens=tuple(draw(st.lists(st.integers(0, 40), min_size=batch, max_size=batch))),
        num_heads=num_kv_heads * draw(st.integers(1, 3)),
        num_kv_heads=num_kv_heads,
        head_dim=draw(st.integers(1, 12)),
        block_size=draw(st.integers(1, 9)),
        dtype=draw(st.sampled_from(["float32", "float16", "bfloat16"])),
        block_layout=draw(st.sampled_from(pa.BLOCK_LAYOUTS)),
        spare_blocks=draw(st.one_of(st.none(), st.integers(0, 6))),
        seed=draw(st.integers(0, 2**31 - 1)),
        window=draw(st.one_of(st.none(), st.integers(1, 45))),
        soft_cap=draw(st.one_of(st.none(), st.floats(0.05, 20.0))),
        sinks=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=small_configs(), scale=st.one_of(st.none(), st.floats(0.01, 4.0)))
def test_property_every_token_once_and_reference_is_dense_attention(config, scale):
    inputs = pa.build_decode_inputs(config)
    check_table(config, inputs.block_tables, inputs.pool_owner)
    count = coverage(inputs.block_tables, inputs.context_lens, config.num_blocks, config.block_size, config.window)
    assert count.numel() == 0 or int(count.max()) <= 1  # no slot holds two tokens
    assert int(count.sum()) == sum(config.attended_lengths)  # every attended token has a slot
    for cache in (inputs.k_cache, inputs.v_cache):
        assert bool((cache[count == 0] == pa.LOUD_VALUE).all())
    expected = dense_attention(inputs, config.head_dim ** -0.5 if scale is None else scale)
    torch.testing.assert_close(pa.reference_decode(*inputs.args(), scale=scale, **inputs.options()), expected,
                               atol=1e-12, rtol=1e-12)


# -- dirty memory (poison) -------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
def test_poisoned_inputs_hold_nan_and_inf_wherever_no_context_reads(layout, dtype, device, seed):
    config = pa.DecodeConfig(batch_size=4, context_lens=(5, 40, 17, 0), num_heads=4, num_kv_heads=2, head_dim=8,
                             block_size=8, dtype=dtype_id(dtype), block_layout=layout, spare_blocks=5,
                             device=device, seed=seed)
    clean, dirty = pa.build_decode_inputs(config), pa.build_decode_inputs(config, poison=True)
    tables = clean.block_tables.cpu()
    covered = coverage(tables, clean.context_lens.cpu(), config.num_blocks, 8) > 0
    for cache, same in ((dirty.k_cache.cpu(), clean.k_cache.cpu()), (dirty.v_cache.cpu(), clean.v_cache.cpu())):
        assert torch.equal(cache[covered], same[covered])  # what the contexts hold is unchanged
        dirt = cache[~covered]
        assert torch.isnan(dirt).any() and torch.isposinf(dirt).any() and torch.isneginf(dirt).any()
        finite = dirt[torch.isfinite(dirt)]
        assert (finite.abs() >= 6e4).any() and ((finite != 0) & (finite.abs() < torch.finfo(dtype).tiny)).any()
    needed = torch.tensor(config.blocks_per_sequence)
    past = torch.arange(tables.shape[1])[None, :] >= needed[:, None]
    dirty_tables = dirty.block_tables.cpu()
    assert torch.equal(dirty_tables[~past], tables[~past])
    garbage = set(dirty_tables[past].tolist())
    assert {-1, config.num_blocks, 2**31 - 1} <= garbage  # -1, ids past the pool
    assert any(0 <= g < config.num_blocks for g in garbage)  # and stale ids
    assert torch.equal(pa.reference_decode(*dirty.args()), pa.reference_decode(*clean.args()))


@pytest.mark.parametrize("window", [None, 1, 3, 8, 9, 17, 30])
def test_context_mask_matches_a_token_by_token_count_with_shared_blocks(window):
    tables = torch.tensor([[3, 1, -1], [3, 0, 2], [4, 7, 9], [-1, -1, -1]], dtype=torch.int32)
    lens = torch.tensor([10, 20, 3, 0])  # rows 0 and 1 share block 3; row 0 fills block 1 partly
    starts = None if window is None else (lens - window).clamp_min(0)
    mask = context_mask(tables, lens, 10, 8, starts)
    assert torch.equal(mask, coverage(tables, lens, 10, 8, window) > 0)


def test_context_mask_and_poison_serve_a_pool_of_a_million_blocks():
    """Vectorised: no host loop over blocks or sequences (a loop would take minutes here)."""
    batch, blocks = 4096, 256
    tables = torch.arange(batch * blocks, dtype=torch.int32).view(batch, blocks)
    lens = torch.randint(0, blocks, (batch,), generator=torch.Generator().manual_seed(0)) * 1 + 1
    mask = context_mask(tables, lens, batch * blocks + 5, 1)
    assert int(mask.sum()) == int(lens.sum())
    k = torch.zeros(batch * blocks + 5, 1, 1, 1)
    v = torch.zeros_like(k)
    fill_uncovered(k, v, mask, poison=True)
    assert torch.isnan(k).any() and bool((k[mask] == 0).all())


# -- attention options: the window's poison, the sink logits ----------------------------

@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
def test_memory_before_a_window_is_dirty_and_its_table_entries_freed(layout, poison, device, seed):
    """With a window, the slots before it hold loud values or poison like those past
    the context, and the table entries before its first block hold garbage; what
    the windows read, and the reference's answer, are those of the clean inputs."""
    config = pa.DecodeConfig(batch_size=4, context_lens=(5, 40, 17, 0), num_heads=4, num_kv_heads=2, head_dim=8,
                             block_size=8, dtype="float32", block_layout=layout, spare_blocks=5, device=device,
                             seed=seed, window=6)
    clean, dirty = pa.build_decode_inputs(config.with_(window=None)), pa.build_decode_inputs(config, poison=poison)
    tables = clean.block_tables.cpu()
    read = coverage(tables, clean.context_lens.cpu(), config.num_blocks, 8, window=6) > 0
    held = coverage(tables, clean.context_lens.cpu(), config.num_blocks, 8) > 0
    assert int(read.sum()) == sum(config.attended_lengths) == 5 + 6 + 6 and bool((held & ~read).any())
    for cache, same in ((dirty.k_cache.cpu(), clean.k_cache.cpu()), (dirty.v_cache.cpu(), clean.v_cache.cpu())):
        assert torch.equal(cache[read], same[read])
        dirt = cache[held & ~read]  # slots the contexts hold but no window reads
        if poison:
            assert torch.isnan(dirt).any() and torch.isinf(dirt).any()
        else:
            assert bool((dirt == pa.LOUD_VALUE).all())
    first = torch.tensor(config.window_starts) // 8  # 0, 4, 1, 0
    cols = torch.arange(tables.shape[1])[None, :]
    needed = (cols >= first[:, None]) & (cols < torch.tensor(config.blocks_per_sequence)[:, None])
    dirty_tables = dirty.block_tables.cpu()
    assert torch.equal(dirty_tables[needed], tables[needed])
    if poison:
        assert {-1, config.num_blocks, 2**31 - 1} <= set(dirty_tables[1, :4].tolist())  # before its window
    expected = pa.reference_decode(*clean.args(), window=6)
    assert torch.equal(pa.reference_decode(*dirty.args(), **dirty.options()), expected)


def test_sinks_are_drawn_last_and_options_are_the_decode_keywords(device, seed):
    config = pa.DecodeConfig(batch_size=2, context_lens=(5, 20), num_heads=6, num_kv_heads=2, head_dim=8,
                             block_size=4, dtype="float16", device=device, seed=seed)
    plain = pa.build_decode_inputs(config)
    assert plain.sinks is None and plain.options() == {} and plain.kwargs() == {}
    sinks = pa.build_decode_inputs(config.with_(sinks=True, soft_cap=30.0))
    for x, y in zip(plain.args(), sinks.args()):  # the same tensors: the sinks are drawn after them
        assert torch.equal(x, y)
    assert sinks.sinks.dtype == torch.float32 and sinks.sinks.shape == (6,)
    assert sinks.sinks.device.type == torch.device(device).type
    assert torch.isfinite(sinks.sinks).all() and sinks.sinks.std() > 0.5  # 2 * N(0, 1)
    assert sinks.options() == {"sinks": sinks.sinks, "soft_cap": 30.0}
    fp8 = pa.build_decode_inputs(config.with_(kv_dtype="float8_e5m2", window=7))
    assert fp8.kwargs() == {"k_scale": fp8.k_scale, "v_scale": fp8.v_scale, "window": 7}
