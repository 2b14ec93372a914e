"""The block manager under sliding-window attention: freeing the blocks before each
window (counts, reference-counted shared blocks, prefix-cache blocks, ``-1`` table
entries, the invariants), and the window's block arithmetic."""

import pytest

from explorer.serving.block_manager import BlockManager
from explorer.serving.window import first_block, held_blocks, peak_held, window_bound


# -- sliding window: freeing the blocks before the window ------------------------------

def test_free_out_of_window_frees_the_blocks_before_the_windows_first_block():
    bm = BlockManager(num_blocks=8, block_size=4)
    bm.allocate(1, 10)  # positions 0..9 in blocks 0, 1, 2
    assert bm.free_out_of_window(1, window=6) == [0]  # window 4..9: block 0 (0..3) is never read again
    assert bm.block_tables[1] == [-1, 1, 2] and bm.block_table([1]).tolist() == [[-1, 1, 2]]
    assert bm.num_used == 2 and bm.ref_counts[0] == 0 and list(bm.free_blocks)[-1] == 0
    bm.check_invariants()
    assert bm.free_out_of_window(1, window=6) == []  # idempotent at the same length
    for _ in range(3):
        bm.append_token(1)  # 13 tokens: window 7..12 starts in block 1, already held
    assert bm.free_out_of_window(1, window=6) == []
    for _ in range(3):
        bm.append_token(1)  # 16 tokens: window 10..15, first block 2
    assert bm.free_out_of_window(1, window=6) == [1]
    assert bm.block_tables[1] == [-1, -1, 2, 3] and bm.num_used == 2
    bm.check_invariants()
    assert bm.free_out_of_window(1, window=100) == []  # a window longer than the context frees nothing
    bm.free(1)  # the -1 entries are skipped
    assert bm.num_free == 8
    bm.check_invariants()
    with pytest.raises(ValueError, match="not live"):
        bm.free_out_of_window(1, 4)
    bm.allocate(2, 3)
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="window must be a positive integer"):
            bm.free_out_of_window(2, bad)


def test_free_out_of_window_keeps_a_shared_block_until_its_last_holder_lets_go():
    bm = BlockManager(num_blocks=10, block_size=4)
    bm.allocate(1, 9)  # blocks 0, 1, 2
    bm.fork(1, 2)  # every block held twice
    assert bm.free_out_of_window(1, window=1) == []  # 1 drops blocks 0 and 1, but 2 still reads them
    assert bm.block_tables[1] == [-1, -1, 2] and bm.block_tables[2] == [0, 1, 2]
    assert bm.ref_counts[:3].tolist() == [1, 1, 2] and bm.num_used == 3
    assert bm.pool_owner().tolist()[:3] == [2, 2, 1]  # the owner moves to the remaining holder
    bm.check_invariants()
    assert bm.free_out_of_window(2, window=1) == [0, 1]  # the last holder: back to the free list
    assert bm.num_used == 1
    bm.check_invariants()
    bm.fork(2, 3)  # a fork of a windowed table keeps its -1 entries
    assert bm.block_tables[3] == [-1, -1, 2] and bm.ref_counts[2] == 3
    bm.check_invariants()
    bm.append_token(3)  # copy-on-write of the shared partly filled last block
    assert bm.block_tables[3][:2] == [-1, -1] and bm.ref_counts[2] == 2
    bm.check_invariants()


def test_free_out_of_window_leaves_a_freed_prefix_block_cached_for_a_later_prompt():
    bm = BlockManager(num_blocks=8, block_size=2)
    bm.allocate(1, tokens=[5, 6, 7, 8, 9])  # full blocks [5, 6] and [7, 8] are cached
    assert bm.free_out_of_window(1, window=2) == [0]  # window 3..4: block 0 goes, with its key
    assert 0 in bm.cached_blocks() and 0 in bm.free_blocks
    bm.check_invariants()
    with pytest.raises(ValueError, match="freed the blocks before its window"):
        bm.sequence_tokens(1)
    # A prompt that starts the same way revives the freed block, and shares block 1 with sequence 1.
    assert bm.allocate(2, tokens=[5, 6, 7, 8, 1])[:2] == [0, 1] and bm.prefix_hits == 2
    assert bm.ref_counts[:2].tolist() == [1, 2]
    bm.check_invariants()
    bm.append_token(1, token=3)  # sequence 1 goes on: keys and contents stay consistent
    assert bm.free_out_of_window(1, window=2) == []  # block 1 is still sequence 2's
    assert bm.block_tables[1][:2] == [-1, -1] and bm.ref_counts[1] == 1
    bm.check_invariants()


def test_check_invariants_catches_a_freed_entry_that_is_not_a_leading_run():
    bm = BlockManager(num_blocks=6, block_size=2)
    bm.allocate(1, 6)
    assert bm.free_out_of_window(1, window=4) == [0]
    bm.check_invariants()
    table = bm.block_tables[1]
    table[0], table[1] = table[1], table[0]  # a hole after a held block
    with pytest.raises(AssertionError, match="leading run"):
        bm.check_invariants()
    bm = BlockManager(num_blocks=6, block_size=2)
    bm.allocate(1, 6)
    bm.block_tables[1][0] = -1  # dropped without releasing: the block is lost
    with pytest.raises(AssertionError, match="conservation"):
        bm.check_invariants()


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
@pytest.mark.parametrize("window", [1, 2, 5, 16, 17, 40])
def test_peak_held_is_the_most_blocks_held_on_the_way_and_within_the_bound(block_size, window):
    for start in range(1, 50, 3):
        for final in range(start, 90, 7):
            held = [held_blocks(n, window, block_size) for n in range(start, final + 1)]
            assert peak_held(start, final, window, block_size) == max(held)
            assert max(held) <= window_bound(window, block_size)
    assert first_block(10, None, 4) == 0 and held_blocks(10, None, 4) == 3
    assert first_block(10, 6, 4) == 1 and held_blocks(10, 6, 4) == 2
