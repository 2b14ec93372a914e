"""The Block table page's sharing scenario: n samples per request with a common prompt,
laid out by the sharing block manager, against the same batch without sharing."""

import numpy as np
import pytest

from explorer.cache.sharing import request_of, shared_prefix_batch
from explorer.serving.block_manager import blocks_for


def test_two_requests_of_two_samples_share_the_common_prompt_and_their_own():
    # Requests (0, 1) and (2, 3); prompts 113 and 56 tokens, the first 64 common.
    b = shared_prefix_batch((236, 114, 57, 205), 16, 45, common_prompt=64, samples=2)
    assert b.prompt_lens == (113, 113, 56, 56)
    t = b.block_tables
    assert (t[0, :7] == t[1, :7]).all()  # request 0's 7 full prompt blocks
    assert (t[2, :3] == t[0, :3]).all()  # request 1 finds the common prompt's 3 full blocks of its 56 tokens
    assert t[2, 3] != t[3, 3]  # their partly filled prompt block was copied on write
    assert (b.prefix_hits, b.prefix_queries, b.cow_copies) == (3, 10, 2)
    assert b.blocks_unshared == 40 and b.blocks_used == 27 and b.blocks_saved == 13
    refs = np.bincount(t[t >= 0], minlength=45)
    assert np.array_equal(refs, b.ref_counts)
    assert b.shared_blocks == int((refs > 1).sum()) == 7


@pytest.mark.parametrize("lengths, bs, common, n", [
    ((17, 300, 1, 64, 0, 33), 16, 0, 1), ((17, 300, 1, 64, 0, 33), 4, 40, 3), ((50,) * 7, 8, 1000, 7),
    ((5, 5, 5), 1, 2, 2),
])
def test_sharing_never_holds_more_than_the_unshared_batch(lengths, bs, common, n):
    b = shared_prefix_batch(lengths, bs, sum(blocks_for(x, bs) for x in lengths) + 3, common, n)
    t = b.block_tables
    assert [int((row >= 0).sum()) for row in t] == [blocks_for(x, bs) for x in lengths]
    assert np.array_equal(np.bincount(t[t >= 0], minlength=len(b.ref_counts)), b.ref_counts)
    assert b.blocks_used <= b.blocks_unshared
    assert b.pool_owner[b.ref_counts == 0].tolist() == [-1] * int((b.ref_counts == 0).sum())
    if n == 1 and common == 0:
        assert b.blocks_saved == 0 and b.shared_blocks == 0 and b.cow_copies == 0
    used = b.ref_counts > 0
    filled = np.zeros(len(b.ref_counts), dtype=int)
    for s, row in enumerate(t):
        held = row[row >= 0]
        filled[held] = np.clip(lengths[s] - np.arange(len(held)) * bs, 0, bs)
    assert b.wasted_slots == int((bs - filled[used]).sum())


def test_uniform_samples_share_everything_but_what_they_generated():
    b = shared_prefix_batch((40,) * 4, 16, 12, common_prompt=0, samples=4)  # one request, prompt 39
    # Blocks 0, 1 shared by all four; the partly filled third block copied by three of them.
    assert b.ref_counts[:2].tolist() == [4, 4] and b.cow_copies == 3 and b.blocks_used == 2 + 4
    assert request_of(5, 2).tolist() == [0, 0, 1, 1, 2]


def test_shared_prefix_batch_errors():
    with pytest.raises(ValueError, match="samples must be a positive integer"):
        shared_prefix_batch((4,), 4, 4, 0, 0)
    with pytest.raises(ValueError, match="common_prompt must be an integer >= 0"):
        shared_prefix_batch((4,), 4, 4, -1, 1)
    with pytest.raises(ValueError, match="holds 3 blocks without sharing but the pool has 2"):
        shared_prefix_batch((4, 8), 4, 2, 0, 1)
