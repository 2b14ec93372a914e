"""The block manager: allocation on block boundaries, freeing, errors and its invariants."""

import pytest

from explorer.block_manager import BlockManager


def test_block_manager_allocates_on_block_boundaries_and_frees_everything():
    bm = BlockManager(num_blocks=6, block_size=4)
    assert bm.allocate(seq_id=7, num_tokens=5) == [0, 1]  # ceil(5 / 4) blocks at once
    bm.check_invariants()
    assert [bm.append_token(7) for _ in range(3)] == [None, None, None]  # positions 5, 6, 7
    assert bm.append_token(7) == 2  # position 8: 8 % 4 == 0, the last block is full
    assert bm.context_lens[7] == 9 and bm.block_tables[7] == [0, 1, 2]
    bm.allocate(8, 4)
    bm.check_invariants()
    bm.free(7)
    bm.check_invariants()
    # Freed blocks go to the back of the free list: the next allocation skips them.
    assert list(bm.free_blocks) == [4, 5, 0, 1, 2]
    assert bm.pool_owner().tolist() == [-1, -1, -1, 8, -1, -1]
    assert bm.block_table([8]).tolist() == [[3]]


def test_block_manager_errors():
    bm = BlockManager(2, 4)
    bm.allocate(0, 8)
    with pytest.raises(ValueError, match="already holds"):
        bm.allocate(0, 1)
    with pytest.raises(RuntimeError, match="free"):
        bm.allocate(1, 1)
    with pytest.raises(RuntimeError, match="free list is empty"):
        bm.append_token(0)
    with pytest.raises(ValueError, match="num_blocks must be a positive integer"):
        BlockManager(0, 4)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        BlockManager(4, 0)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda bm: bm.block_tables[0].append(bm.free_blocks[0]), "conservation"),
        (lambda bm: bm.free_blocks.append(bm.block_tables[0][0]) or bm.free_blocks.popleft(), "listed twice"),
        (lambda bm: bm._owner.__setitem__(bm.free_blocks[0], 0), "pool owner"),
        (lambda bm: bm.context_lens.__setitem__(0, 9), r"expected ceil\(9/4\)"),
        (lambda bm: bm.block_tables[0].__setitem__(1, 99), "outside the pool"),
    ],
)
def test_check_invariants_names_the_broken_rule(corrupt, message):
    bm = BlockManager(8, 4)
    bm.allocate(0, 6)
    bm.allocate(1, 3)
    bm.check_invariants()
    corrupt(bm)
    with pytest.raises(AssertionError, match=message):
        bm.check_invariants()
