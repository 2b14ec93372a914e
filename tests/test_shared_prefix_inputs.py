"""Shared-prefix decode inputs (issue 15): a prefix group's tables point at the same
physical blocks for the prefix's whole blocks, each member's own block holds copies
of the prefix's last tokens, the byte counts count shared blocks once, and sharing
changes no attention output."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from paged_attention.inputs import FREE, OTHER, context_mask, first_members
from helpers import DTYPES, dtype_id, seed  # noqa: F401

SMALL = dict(num_heads=4, num_kv_heads=2, head_dim=8)

#: (block_size, context_lens, shared_prefix, prefix_groups): odd block sizes, a prefix
#: ending inside a block and on a block boundary, no prefix, prefix == context, groups of one.
CASES = [
    (5, (23, 30, 17, 40, 21), 17, 2),     # 3 shared blocks per group, 2 tokens copied
    (1, (9, 12, 7), 7, 1),                # block size 1: 7 shared blocks, nothing copied
    (256, (300, 600, 280, 700), 270, 2),  # 1 shared block, 14 tokens copied
    (16, (40, 33, 50), 0, 1),             # nothing shared
    (16, (48, 48, 48, 48), 48, 2),        # prefix == context on a boundary: no own blocks
    (16, (40, 40, 40), 40, 1),            # prefix == context inside a block: own tail block only
    (16, (70, 41, 90, 35), 35, 4),        # groups of one: nothing physically shared
    (16, (70, 41, 90, 35, 66, 64, 99), 35, 3),  # uneven groups (2, 2, 3)
    (7, (1, 20, 3), 1, 1),                # the prefix is one token
]


def case_id(case) -> str:
    bs, lens, prefix, groups = case
    return f"bs{bs}-P{prefix}-g{groups}-{len(lens)}seq"


def make_config(case, **changes) -> pa.DecodeConfig:
    bs, lens, prefix, groups = case
    return pa.DecodeConfig(batch_size=len(lens), context_lens=lens, block_size=bs, shared_prefix=prefix,
                           prefix_groups=groups, **SMALL, **changes)


def groups_of(config: pa.DecodeConfig) -> list[list[int]]:
    members: dict[int, list[int]] = {}
    for seq, group in enumerate(config.prefix_group_of):
        members.setdefault(group, []).append(seq)
    return list(members.values())


def raw(cache: torch.Tensor) -> torch.Tensor:
    """Bytes of a cache, so that fp8 (which has no equality on every build) compares too."""
    return cache.cpu().contiguous().view(torch.uint8)


def check_sharing(config: pa.DecodeConfig, tables: torch.Tensor, owner: torch.Tensor) -> None:
    """The whole-prefix columns of a group hold the same ids, groups share nothing,
    every other block serves one sequence, and ``pool_owner`` agrees."""
    tables, shared = tables.cpu(), config.shared_blocks
    needed = config.blocks_per_sequence
    seen_shared: set[int] = set()
    own: list[int] = []
    for members in groups_of(config):
        first = members[0]
        ids = tables[first, :shared].tolist()
        for seq in members:
            assert tables[seq, :shared].tolist() == ids
            assert bool((tables[seq, needed[seq]:] == -1).all())
            own += tables[seq, shared:needed[seq]].tolist()
            assert bool((owner[tables[seq, shared:needed[seq]].long()] == seq).all())
        assert not seen_shared & set(ids), "two groups share a block"
        seen_shared |= set(ids)
        assert bool((owner[torch.tensor(ids, dtype=torch.long)] == first).all())  # lowest member owns it
    assert len(set(own)) == len(own) and not set(own) & seen_shared
    assert len(seen_shared) + len(own) == config.num_blocks_used
    assert int(((owner != FREE) & (owner != OTHER)).sum()) == config.num_blocks_used
    assert all(0 <= i < config.num_blocks for i in seen_shared | set(own))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
def test_tables_share_exactly_the_whole_prefix_blocks_of_each_group(case, layout, seed):
    config = make_config(case, block_layout=layout, seed=seed)
    tables, owner = pa.assign_blocks(config)
    check_sharing(config, tables, owner)
    inputs = pa.build_decode_inputs(config)
    assert torch.equal(inputs.block_tables.cpu(), tables) and torch.equal(inputs.pool_owner, owner)


def test_contiguous_hands_out_a_groups_shared_blocks_then_each_members_own():
    config = pa.DecodeConfig(batch_size=4, context_lens=(40, 33, 50, 20), block_size=16, shared_prefix=20,
                             prefix_groups=2, block_layout="contiguous", spare_blocks=0, **SMALL)
    tables, owner = pa.assign_blocks(config)
    assert tables.tolist() == [[0, 1, 2, -1], [0, 3, 4, -1], [5, 6, 7, 8], [5, 9, -1, -1]]
    assert owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2, 3]


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("kv_dtype", [None, "float8_e4m3fn"])
def test_every_member_holds_the_first_members_prefix_tokens(case, kv_dtype, seed):
    config = make_config(case, kv_dtype=kv_dtype, seed=seed, block_layout="shuffled")
    inputs = pa.build_decode_inputs(config, poison=True)
    tables, first = inputs.block_tables.cpu().long(), first_members(config)
    bs, prefix = config.block_size, config.shared_prefix
    rest = prefix % bs
    t = torch.arange(prefix)
    for cache in (inputs.k_cache, inputs.v_cache):
        data = raw(cache)
        for seq, lead in enumerate(first):
            # The copied tail slots of the member's own block...
            if rest and seq != lead:
                mine, theirs = tables[seq, config.shared_blocks], tables[lead, config.shared_blocks]
                assert mine != theirs
                assert torch.equal(data[mine, :rest], data[theirs, :rest])
            # ...so every prefix token, shared block or copy, is the first member's.
            assert torch.equal(data[tables[seq, t // bs], t % bs], data[tables[lead, t // bs], t % bs])
    if kv_dtype:  # the float32 draws behind the fp8 cache were copied too, before quantization
        k, _ = pa.unquantized_cache(config)
        for seq, lead in enumerate(first):
            assert torch.equal(k[tables[seq, t // bs], t % bs], k[tables[lead, t // bs], t % bs])


def private_copy(inputs: pa.DecodeInputs) -> tuple[torch.Tensor, ...]:
    """The same step without sharing: every member but a group's first gets private
    copies of the shared blocks, appended to the pool."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    config, shared = inputs.config, inputs.config.shared_blocks
    tables = tables.clone()
    first = first_members(config)
    extra_k, extra_v = [k_cache], [v_cache]
    next_id = k_cache.shape[0]
    for seq, lead in enumerate(first):
        if seq == lead or shared == 0:
            continue
        ids = tables[seq, :shared].long()
        extra_k.append(k_cache[ids].clone())
        extra_v.append(v_cache[ids].clone())
        tables[seq, :shared] = torch.arange(next_id, next_id + shared, dtype=tables.dtype)
        next_id += shared
    k_view = [x.view(torch.uint8) if x.element_size() == 1 else x for x in extra_k]
    v_view = [x.view(torch.uint8) if x.element_size() == 1 else x for x in extra_v]
    k_priv = torch.cat(k_view).view(k_cache.dtype)
    v_priv = torch.cat(v_view).view(v_cache.dtype)
    return q, k_priv, v_priv, tables, lens


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("kv_dtype", [None, "float8_e5m2"])
def test_sharing_changes_no_reference_output(case, kv_dtype, seed):
    config = make_config(case, kv_dtype=kv_dtype, seed=seed, dtype="float32")
    inputs = pa.build_decode_inputs(config, poison=True)
    args = private_copy(inputs)
    if config.shared_blocks and config.prefix_groups < config.batch_size:
        assert not torch.equal(args[3], inputs.block_tables)
    shared = pa.reference_decode(*inputs.args(), **inputs.scales())
    private = pa.reference_decode(*args, **inputs.scales())
    assert torch.isfinite(shared).all()
    torch.testing.assert_close(shared, private, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(pa.IMPLEMENTATIONS))
def test_implementations_read_shared_blocks_as_the_reference_does(name, device, seed):
    config = pa.DecodeConfig(batch_size=5, context_lens=(40, 37, 70, 23, 51), block_size=8, shared_prefix=21,
                             prefix_groups=2, device=device, seed=seed, **SMALL)
    inputs = pa.build_decode_inputs(config, poison=True)
    out = pa.IMPLEMENTATIONS[name](*inputs.args())
    atol, rtol = pa.tolerance(inputs.query.dtype)
    torch.testing.assert_close(out.double(), pa.reference_decode(*inputs.args()), atol=atol, rtol=rtol)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_poison_leaves_every_prefix_slot_clean(case, seed):
    config = make_config(case, seed=seed)
    inputs = pa.build_decode_inputs(config, poison=True)
    covered = context_mask(inputs.block_tables, inputs.context_lens, config.num_blocks, config.block_size)
    assert int(covered.sum()) == config.unique_tokens
    for cache in (inputs.k_cache, inputs.v_cache):
        assert torch.isfinite(cache[covered]).all()
        assert not torch.isfinite(cache[~covered]).all() or not bool((~covered).any())
    needed = torch.tensor(config.blocks_per_sequence)
    past = torch.arange(config.max_num_blocks)[None, :] >= needed[:, None]
    assert torch.equal(inputs.block_tables[~past], pa.assign_blocks(config)[0][~past])


# -- byte counts ------------------------------------------------------------------------

def test_byte_counts_by_hand():
    # block 16, prefix 35 (2 shared blocks, 3 copied tokens), groups {0, 1} and {2, 3}
    config = pa.DecodeConfig(batch_size=4, context_lens=(40, 45, 37, 50), block_size=16, shared_prefix=35,
                             prefix_groups=2, num_heads=8, num_kv_heads=2, head_dim=64, spare_blocks=0)
    assert config.prefix_group_of == (0, 0, 1, 1) and config.shared_blocks == 2
    assert config.blocks_per_sequence == (3, 3, 3, 4)  # logical
    assert config.num_blocks_used == 13 - 2 * 2 == config.num_blocks
    assert config.unique_tokens == 172 - 2 * 32
    assert config.wasted_slots == 9 * 16 - 108
    per_token = 2 * 2 * 64 * 2  # K and V, 2 heads of 64, float16
    qo = 2 * 4 * 8 * 64 * 2
    assert config.needed_kv_bytes() == 172 * per_token
    assert config.decode_bytes() == 172 * per_token + qo
    assert config.unique_kv_bytes() == 108 * per_token
    assert config.unique_decode_bytes() == 108 * per_token + qo
    assert config.kv_cache_bytes() == 9 * 16 * per_token
    fp8 = config.with_(kv_dtype="float8_e4m3fn")
    assert fp8.unique_kv_bytes() == 108 * per_token // 2


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_unique_bytes_count_each_filled_slot_once(case):
    config = make_config(case)
    inputs = pa.build_decode_inputs(config)
    covered = context_mask(inputs.block_tables, inputs.context_lens, config.num_blocks, config.block_size)
    per_token = 2 * config.num_kv_heads * config.head_dim * config.kv_element_size
    assert config.unique_kv_bytes() == int(covered.sum()) * per_token
    assert config.needed_kv_bytes() == sum(config.lengths) * per_token
    if config.prefix_groups == config.batch_size or config.shared_blocks == 0:
        assert config.unique_decode_bytes() == config.decode_bytes()
    else:
        assert config.unique_decode_bytes() < config.decode_bytes()


# -- defaults and validation ---------------------------------------------------------------

def legacy_assign(config: pa.DecodeConfig) -> torch.Tensor:
    """The block table as built before shared prefixes: sequence after sequence."""
    gen = torch.Generator().manual_seed(config.seed)
    assert config.block_layout == "shuffled"
    order = torch.randperm(config.num_blocks, generator=gen)
    tables = torch.full((config.batch_size, config.max_num_blocks), -1, dtype=torch.int32)
    cursor = 0
    for seq, n in enumerate(config.blocks_per_sequence):
        tables[seq, :n] = order[cursor:cursor + n].to(torch.int32)
        cursor += n
    return tables


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_defaults_change_nothing(dtype, seed):
    fields = dict(batch_size=4, context_lens=(5, 40, 17, 0), block_size=8, dtype=dtype_id(dtype), seed=seed, **SMALL)
    config = pa.DecodeConfig(**fields)
    assert (config.shared_prefix, config.prefix_groups) == (0, 1)
    inputs = pa.build_decode_inputs(config)
    assert torch.equal(inputs.block_tables, legacy_assign(config))
    # The same draws in the same order as before: query, K pool, V pool.
    gen = torch.Generator().manual_seed(seed)
    shape = (config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim)
    assert torch.equal(inputs.query, torch.randn(4, 4, 8, generator=gen).to(dtype))
    covered = context_mask(inputs.block_tables, inputs.context_lens, config.num_blocks, config.block_size)
    assert torch.equal(inputs.k_cache[covered], torch.randn(shape, generator=gen).to(dtype)[covered])
    assert torch.equal(inputs.v_cache[covered], torch.randn(shape, generator=gen).to(dtype)[covered])
    # Groups without a prefix change nothing either.
    other = pa.build_decode_inputs(config.with_(prefix_groups=3))
    for a, b in zip(inputs.args(), other.args()):
        assert torch.equal(a, b)
    assert config.num_blocks_used == sum(config.blocks_per_sequence)
    assert config.unique_decode_bytes() == config.decode_bytes()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(shared_prefix=-1), "shared_prefix must be a non-negative integer; got -1"),
        (dict(shared_prefix=1.5), "shared_prefix must be a non-negative integer; got 1.5"),
        (dict(shared_prefix=True), "shared_prefix must be a non-negative integer; got True"),
        (dict(shared_prefix=18), r"shared_prefix \(18\) must be at most every context length; sequence 2 holds only 17"),
        (dict(prefix_groups=0), r"prefix_groups must be an integer from 1 to batch_size \(3\); got 0"),
        (dict(prefix_groups=4), r"prefix_groups must be an integer from 1 to batch_size \(3\); got 4"),
        (dict(prefix_groups=2.0), r"prefix_groups must be an integer from 1 to batch_size \(3\); got 2.0"),
        (dict(prefix_groups=None), r"prefix_groups must be an integer from 1 to batch_size \(3\); got None"),
    ],
)
def test_validation_names_the_rule(changes, message):
    config = pa.DecodeConfig(batch_size=3, context_lens=(20, 40, 17), block_size=8, **SMALL).with_(**changes)
    with pytest.raises(ValueError, match=message):
        config.validate()
    with pytest.raises(ValueError, match=message):
        pa.build_decode_inputs(config)


def test_numpy_integers_are_whole_numbers():
    import numpy as np

    config = pa.DecodeConfig(batch_size=4, context_lens=64, shared_prefix=np.int64(20), prefix_groups=np.int32(2))
    assert type(config.shared_prefix) is int and type(config.prefix_groups) is int
    assert config.validate() is config
