"""The block manager's prefix cache: what each block holds, and which full blocks
a later prompt can reuse.

A full block is cached under a key made of its tokens chained to the key of the
block before it (vLLM's ``hash_block_tokens``), so one key stands for one whole
prefix. :class:`PrefixCache` keeps the two maps (key to block, block to key), the
pool's contents as token ids (a stand-in for the K and V in each slot, which
copy-on-write copies and a hit is checked against), and the keys of each
sequence's full blocks, in order. It never touches the free list or the
reference counts: :class:`~explorer.serving.block_manager.BlockManager` decides
which block is taken, shared or released, and tells the cache.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: ``slot_tokens`` value of a slot no token has been written to.
EMPTY_SLOT = -1


def block_hash(parent: int | None, tokens: Sequence[int]) -> int:
    """The prefix-cache key of one full block: its tokens chained to its prefix.

    ``parent`` is the key of the block before it (``None`` for a sequence's first
    block), so equal keys mean equal *prefixes*, not only equal blocks, as in
    vLLM's ``hash_block_tokens``. A hit is also checked against the block's stored
    tokens (as nano-vllm does), so only two different prefixes whose parents'
    64-bit keys collide could be confused.
    """
    return hash((parent, tuple(int(t) for t in tokens)))


class PrefixCache:
    """Block contents and prefix keys of a pool of ``num_blocks`` blocks of
    ``block_size`` slots.

    Attributes
    ----------
    slot_tokens : ndarray or None
        ``[num_blocks, block_size]`` int64, the token id whose K and V each slot
        holds (:data:`EMPTY_SLOT` if none), created by :meth:`start` (the first
        sequence with tokens).
    sequence_keys : dict
        ``seq_id ->`` the keys of its full blocks, in logical order, for each live
        sequence whose tokens are known.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.slot_tokens: np.ndarray | None = None
        self.sequence_keys: dict[int, list[int]] = {}
        # The cache, both ways: key -> block, and block -> its key.
        self._cached: dict[int, int] = {}
        self._key_of: dict[int, int] = {}

    def start(self) -> None:
        """Create the contents array (on the first sequence with tokens)."""
        if self.slot_tokens is None:
            self.slot_tokens = np.full((self.num_blocks, self.block_size), EMPTY_SLOT, dtype=np.int64)

    def lookup(self, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """``(key, block)`` of each leading full block of ``tokens`` that is cached.

        Stops at the first miss, as vLLM's longest-cache-hit search does.
        """
        hits: list[tuple[int, int]] = []
        key = None
        bs = self.block_size
        for start in range(0, len(tokens) - bs + 1, bs):
            chunk = tokens[start : start + bs]
            key = block_hash(key, chunk)
            block = self._cached.get(key)
            if block is None or self.slot_tokens is None or list(self.slot_tokens[block]) != list(chunk):
                break
            hits.append((key, block))
        return hits

    def evict(self, block: int) -> None:
        """``block`` leaves the free list for new contents: forget its prefix and empty it."""
        key = self._key_of.pop(block, None)
        if key is not None:
            del self._cached[key]
        if self.slot_tokens is not None:
            self.slot_tokens[block] = EMPTY_SLOT

    def write(self, block: int, start: int, tokens: Sequence[int]) -> None:
        """Store ``tokens`` in ``block`` from slot ``start`` on."""
        self.slot_tokens[block, start : start + len(tokens)] = tokens

    def copy(self, source: int, target: int, slots: int) -> None:
        """Copy-on-write: the first ``slots`` slots of ``source`` into ``target``."""
        if self.slot_tokens is not None:
            self.slot_tokens[target, :slots] = self.slot_tokens[source, :slots]

    def block_full(self, seq_id: int, block: int, ref_counts: np.ndarray) -> None:
        """``seq_id``'s last block, ``block``, has just filled: cache it under its
        prefix key and add the key to the sequence's.

        A key already held by a live block (``ref_counts > 0``) stays with it (the
        new block is a duplicate nobody will be sent to); one held by a free block
        moves to the new block, so every prefix that a live sequence holds stays
        findable.
        """
        keys = self.sequence_keys[seq_id]
        key = block_hash(keys[-1] if keys else None, self.slot_tokens[block])
        keys.append(key)
        old = self._cached.get(key)
        if old is not None:
            if ref_counts[old] > 0:
                return
            del self._key_of[old]
        self._cached[key] = block
        self._key_of[block] = key

    def cached_blocks(self) -> list[int]:
        """Blocks that hold a cached full-block prefix (live or on the free list), by id."""
        return sorted(self._key_of)

    def check_invariants(self, context_lens: dict[int, int]) -> None:
        """Check the cache against the live sequences' lengths ``context_lens``.

        Raises
        ------
        AssertionError
            Naming the first broken invariant: every sequence with keys is live
            and has one key per full block; the two maps agree; only full blocks
            are cached.
        """
        assert self.sequence_keys.keys() <= context_lens.keys(), "a sequence with tokens is not live"
        for seq_id, keys in self.sequence_keys.items():
            assert len(keys) == context_lens[seq_id] // self.block_size, (
                f"sequence {seq_id} has {len(keys)} prefix keys for {context_lens[seq_id]} tokens"
            )
        assert len(self._cached) == len(self._key_of) and all(
            self._key_of.get(b) == k for k, b in self._cached.items()
        ), "the prefix cache's two maps disagree"
        for b in self._key_of:
            assert self.slot_tokens is not None and (self.slot_tokens[b] != EMPTY_SLOT).all(), (
                f"cached block {b} is not full"
            )
