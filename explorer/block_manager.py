"""A serving engine's KV-cache block manager: who owns which physical block.

This is the memory side of paged attention, the part the decode kernel never sees.
:class:`BlockManager` is the allocator of vLLM and nano-vllm reduced to its core: a
free list (a deque of physical block ids), a block table per live sequence, and
two operations. Prefill takes ``ceil(prompt_len / block_size)`` blocks at once;
decode appends one token and takes one more block only when the token lands at
position ``t`` with ``t % block_size == 0`` (the last block is full). A finished
sequence returns all its blocks.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np
import torch

from paged_attention.inputs import FREE


def check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {rule}; got {value!r}")


def blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks that hold ``num_tokens`` tokens: ``ceil(num_tokens / block_size)``."""
    return -(-num_tokens // block_size)


class BlockManager:
    """Free list and block tables of a paged KV cache.

    Parameters
    ----------
    num_blocks : int
        Physical blocks in the pool, ids ``0 .. num_blocks - 1``.
    block_size : int
        Tokens per block.

    Attributes
    ----------
    free_blocks : deque of int
        The free list. Blocks are taken from the left and returned on the right,
        so a freed block is reused last; after some churn a new sequence's blocks
        are scattered over the pool, which is exactly what the block table is for.
    block_tables : dict
        ``seq_id -> list`` of physical block ids, in logical order.
    context_lens : dict
        ``seq_id ->`` tokens stored.

    Raises
    ------
    ValueError
        If ``num_blocks`` or ``block_size`` is not a positive integer.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        check_int("num_blocks", num_blocks, 1)
        check_int("block_size", block_size, 1)
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.free_blocks: deque[int] = deque(range(self.num_blocks))
        self.block_tables: dict[int, list[int]] = {}
        self.context_lens: dict[int, int] = {}
        # Reverse map of the block tables, kept so a snapshot is one array copy.
        self._owner = np.full(self.num_blocks, FREE, dtype=np.int64)

    @property
    def num_free(self) -> int:
        return len(self.free_blocks)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_blocks)

    def _take(self, seq_id: int) -> int:
        block = self.free_blocks.popleft()
        self._owner[block] = seq_id
        self.block_tables[seq_id].append(block)
        return block

    def allocate(self, seq_id: int, num_tokens: int) -> list[int]:
        """Prefill: store ``num_tokens`` tokens of a new sequence.

        Returns
        -------
        list of int
            The ``ceil(num_tokens / block_size)`` physical blocks taken, in order.

        Raises
        ------
        ValueError
            If ``seq_id`` is already live or ``num_tokens < 1``.
        RuntimeError
            If the free list holds too few blocks (check :meth:`can_allocate` first).
        """
        if seq_id in self.block_tables:
            raise ValueError(f"sequence {seq_id} already holds blocks")
        check_int("num_tokens", num_tokens, 1)
        needed = blocks_for(num_tokens, self.block_size)
        if needed > self.num_free:
            raise RuntimeError(f"sequence {seq_id} needs {needed} blocks but {self.num_free} are free")
        self.block_tables[seq_id] = []
        self.context_lens[seq_id] = int(num_tokens)
        return [self._take(seq_id) for _ in range(needed)]

    def can_allocate(self, num_blocks: int) -> bool:
        return num_blocks <= self.num_free

    def needs_block(self, seq_id: int) -> bool:
        """Whether the next token of ``seq_id`` starts a new block.

        The token goes to position ``t = context_len``; its block is new when
        ``t % block_size == 0``, i.e. when the last block is full.
        """
        return self.context_lens[seq_id] % self.block_size == 0

    def append_token(self, seq_id: int) -> int | None:
        """Decode: store one more token of ``seq_id``.

        Returns
        -------
        int or None
            The physical block taken, or ``None`` if the token fit in the last block.

        Raises
        ------
        RuntimeError
            If a new block is needed and the free list is empty.
        """
        block = None
        if self.needs_block(seq_id):
            if not self.free_blocks:
                raise RuntimeError(f"sequence {seq_id} needs a block but the free list is empty")
            block = self._take(seq_id)
        self.context_lens[seq_id] += 1
        return block

    def free(self, seq_id: int) -> None:
        """Return every block of ``seq_id`` to the free list and forget it."""
        for block in self.block_tables.pop(seq_id):
            self._owner[block] = FREE
            self.free_blocks.append(block)
        del self.context_lens[seq_id]

    # -- views ---------------------------------------------------------------
    def pool_owner(self) -> torch.Tensor:
        """``[num_blocks]`` int64: the ``seq_id`` owning each block, ``-1`` if free."""
        return torch.from_numpy(self._owner.copy())

    def block_table(self, seq_ids: Sequence[int]) -> torch.Tensor:
        """Dense block table of ``seq_ids``.

        Returns
        -------
        Tensor
            ``[len(seq_ids), max_blocks]`` int32, ``max_blocks`` the most blocks any
            of them holds (at least 1), ``-1`` past each sequence's last block.
        """
        rows = [self.block_tables[s] for s in seq_ids]
        width = max([1, *map(len, rows)])
        # Built in NumPy: small torch ops cost more in dispatch than in work.
        table = np.full((len(rows), width), -1, dtype=np.int32)
        for i, row in enumerate(rows):
            table[i, : len(row)] = row
        return torch.from_numpy(table)

    def check_invariants(self) -> None:
        """Check the allocator's bookkeeping.

        Raises
        ------
        AssertionError
            Naming the first broken invariant: every block is free or owned by
            exactly one live sequence (``free + owned == num_blocks``, no duplicates,
            ids in range); the owner map agrees with the free list and the block
            tables; each sequence holds exactly ``ceil(context_len / block_size)``
            blocks.
        """
        free = list(self.free_blocks)
        owned = [b for table in self.block_tables.values() for b in table]
        assert len(free) + len(owned) == self.num_blocks, (
            f"conservation: {len(free)} free + {len(owned)} owned != num_blocks {self.num_blocks}"
        )
        everything = free + owned
        assert all(0 <= b < self.num_blocks for b in everything), "a block id lies outside the pool"
        assert len(set(everything)) == self.num_blocks, (
            "a block is listed twice (free and owned, or owned twice)"
        )
        # With no duplicates, the owner map must be exactly the inverse of the tables.
        expected = np.full(self.num_blocks, FREE, dtype=np.int64)
        for seq_id, table in self.block_tables.items():
            expected[table] = seq_id
        wrong = np.flatnonzero(expected != self._owner)
        assert wrong.size == 0, (
            f"pool owner of block {wrong[0]} is {self._owner[wrong[0]]}, but the free list and "
            f"block tables say {expected[wrong[0]]}" if wrong.size else ""
        )
        assert self.block_tables.keys() == self.context_lens.keys(), (
            "block tables and context_lens name different sequences"
        )
        for seq_id, table in self.block_tables.items():
            n = self.context_lens[seq_id]
            assert n >= 1, f"live sequence {seq_id} stores {n} tokens"
            assert len(table) == blocks_for(n, self.block_size), (
                f"sequence {seq_id} stores {n} tokens in {len(table)} blocks; "
                f"expected ceil({n}/{self.block_size}) = {blocks_for(n, self.block_size)}"
            )
