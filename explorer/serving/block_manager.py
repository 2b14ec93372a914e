"""A serving engine's KV-cache block manager: who owns which physical block.

This is the memory side of paged attention, the part the decode kernel never sees.
:class:`BlockManager` is the allocator of vLLM and nano-vllm reduced to its core: a
free list (a deque of physical block ids), a block table per live sequence, and
two operations. Prefill takes ``ceil(prompt_len / block_size)`` blocks at once;
decode appends one token and takes one more block only when the token lands at
position ``t`` with ``t % block_size == 0`` (the last block is full). A finished
sequence returns all its blocks.

Paging's second idea is **sharing**, and the manager has it too, as vLLM's block
manager and prefix caching (and nano-vllm's ``BlockManager``) do it:

- every physical block has a **reference count**, the number of block-table
  entries pointing at it; freeing a sequence decrements its blocks' counts and a
  block goes back to the free list only at 0;
- :meth:`BlockManager.fork` gives a new sequence the table of a live one (n
  samples of one prompt, a beam that splits): same blocks, counts + 1;
- **prefix caching**: a sequence allocated with its prompt's ``tokens`` reuses every
  leading *full* block whose content is already cached, found by a hash of the
  block's tokens chained with the hash of everything before it (vLLM's
  ``hash_block_tokens``), so one block stands for one whole prefix. A freed block
  keeps its hash while it waits on the free list and is revived by a hit until the
  free list hands it out again (vLLM v1's evictable cached blocks);
- **copy-on-write**: a token appended into a shared, partly filled last block goes
  to a fresh block that first gets a copy of the shared block's filled slots; the
  shared block loses one reference and the other holders never see the write.

Keys and contents: :mod:`explorer.serving.prefix_cache`; this module: the free list,
the tables, the reference counts and the operations.

Without ``tokens`` sequences share nothing: a plain allocator, the pages' default.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np
import torch

from explorer.serving.prefix_cache import PrefixCache
from explorer.serving.window import freed_entries, out_of_window
from paged_attention.inputs import FREE
from paged_attention.tiling import cdiv


def check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {rule}; got {value!r}")


def blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks that hold ``num_tokens`` tokens: ``ceil(num_tokens / block_size)``."""
    return cdiv(num_tokens, block_size)


class BlockManager:
    """Free list, block tables and reference counts of a paged KV cache.

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
        A free block may still hold a cached prefix (see :meth:`cached_blocks`).
    block_tables : dict
        ``seq_id -> list`` of physical block ids, in logical order; ``-1``
        (:data:`~paged_attention.inputs.FREE`) for a block freed because it fell out
        of a sliding window (:meth:`free_out_of_window`), always a leading run.
    context_lens : dict
        ``seq_id ->`` tokens stored.
    ref_counts : ndarray
        ``[num_blocks]`` int64: block-table entries pointing at each block, 0 free.
    prefix_cache : PrefixCache
        The blocks' contents and prefix keys
        (:class:`~explorer.serving.prefix_cache.PrefixCache`).
    slot_tokens : ndarray or None
        ``prefix_cache.slot_tokens``: ``[num_blocks, block_size]`` int64, the token
        id whose K and V each slot holds (:data:`~explorer.serving.prefix_cache.EMPTY_SLOT` if none), created on
        the first allocation with ``tokens``.
    prefix_queries, prefix_hits : int
        Full prompt blocks looked up in the prefix cache, and found.
    cow_copies : int
        Copy-on-write events: appends that copied a shared partly filled block.

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
        self.ref_counts = np.zeros(self.num_blocks, dtype=np.int64)
        self.prefix_cache = PrefixCache(self.num_blocks, self.block_size)
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.cow_copies = 0
        # Reverse map of the block tables, kept so a snapshot is one array copy. A
        # shared block's owner is the lowest seq_id holding it.
        self._owner = np.full(self.num_blocks, FREE, dtype=np.int64)

    @property
    def slot_tokens(self) -> np.ndarray | None:
        return self.prefix_cache.slot_tokens

    @property
    def num_free(self) -> int:
        return len(self.free_blocks)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_blocks)

    # -- taking and dropping references ------------------------------------------
    def _take(self, seq_id: int) -> int:
        """A fresh block from the head of the free list (evicting its cached prefix)."""
        block = self.free_blocks.popleft()
        self.prefix_cache.evict(block)
        self.ref_counts[block] = 1
        self._owner[block] = seq_id
        self.block_tables[seq_id].append(block)
        return block

    def _share(self, seq_id: int, block: int) -> None:
        """One more reference to ``block``, from the end of ``seq_id``'s table."""
        if self.ref_counts[block] == 0:  # a cached block waiting on the free list
            self.free_blocks.remove(block)
            self._owner[block] = seq_id
        else:
            self._owner[block] = min(int(self._owner[block]), seq_id)
        self.ref_counts[block] += 1
        self.block_tables[seq_id].append(block)

    def _release(self, seq_id: int, block: int) -> None:
        """One reference to ``block`` fewer (``seq_id`` no longer holds it)."""
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self._owner[block] = FREE
            self.free_blocks.append(block)
        elif self._owner[block] == seq_id:
            self._owner[block] = min(s for s, t in self.block_tables.items() if s != seq_id and block in t)

    # -- prefix cache ------------------------------------------------------------
    def _prefix_hits(self, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """``(key, block)`` of each leading full block of ``tokens`` that is cached."""
        return self.prefix_cache.lookup(tokens)

    def blocks_needed(self, num_tokens: int | None = None, *, tokens: Sequence[int] | None = None) -> int:
        """Free-list blocks that ``allocate(seq_id, num_tokens, tokens=tokens)`` would take.

        Without ``tokens``, ``ceil(num_tokens / block_size)``; with them, the blocks
        the prefix cache does not hold, plus the cached ones now on the free list
        (a hit revives them from it).
        """
        n = self._prompt_len(num_tokens, tokens)
        needed = blocks_for(n, self.block_size)
        if tokens is None:
            return needed
        hits = self._prefix_hits(tokens)
        return needed - sum(1 for _, b in hits if self.ref_counts[b] > 0)

    @staticmethod
    def _prompt_len(num_tokens: int | None, tokens: Sequence[int] | None) -> int:
        if tokens is None:
            if num_tokens is None:
                raise ValueError("allocate needs num_tokens or tokens")
            check_int("num_tokens", num_tokens, 1)
            return int(num_tokens)
        if num_tokens is not None and num_tokens != len(tokens):
            raise ValueError(f"num_tokens is {num_tokens} but {len(tokens)} tokens were given")
        check_int("len(tokens)", len(tokens), 1)
        for t in tokens:
            check_int("a token id", t, 0)
        return len(tokens)

    # -- the operations ----------------------------------------------------------
    def allocate(self, seq_id: int, num_tokens: int | None = None, *, tokens: Sequence[int] | None = None) -> list[int]:
        """Prefill: store the prompt of a new sequence.

        Parameters
        ----------
        seq_id : int
            A sequence that is not live.
        num_tokens : int, optional
            Prompt length (may be left out when ``tokens`` is given).
        tokens : sequence of int, optional
            The prompt's token ids (non-negative). With them the sequence takes part
            in prefix caching: its leading full blocks that are cached are shared
            (counts + 1), its other full blocks are cached for later sequences, and
            later appends need a token id.

        Returns
        -------
        list of int
            The sequence's ``ceil(num_tokens / block_size)`` physical blocks, in order
            (shared ones included; :attr:`prefix_hits` counts those).

        Raises
        ------
        ValueError
            If ``seq_id`` is already live, the prompt is empty, a token id is not a
            non-negative integer, or ``num_tokens`` disagrees with ``tokens``.
        RuntimeError
            If the free list holds too few blocks (check :meth:`blocks_needed` first).
        """
        if seq_id in self.block_tables:
            raise ValueError(f"sequence {seq_id} already holds blocks")
        n = self._prompt_len(num_tokens, tokens)
        needed = self.blocks_needed(n, tokens=tokens)
        if needed > self.num_free:
            raise RuntimeError(f"sequence {seq_id} needs {needed} blocks but {self.num_free} are free")
        self.block_tables[seq_id] = []
        self.context_lens[seq_id] = n
        if tokens is None:
            return [self._take(seq_id) for _ in range(needed)]

        cache = self.prefix_cache
        cache.start()
        bs = self.block_size
        hits = self._prefix_hits(tokens)
        self.prefix_queries += n // bs
        self.prefix_hits += len(hits)
        cache.sequence_keys[seq_id] = [key for key, _ in hits]
        # Revive the hits first: taking fresh blocks could otherwise evict one of them.
        for _, block in hits:
            self._share(seq_id, block)
        for logical in range(len(hits), blocks_for(n, bs)):
            block = self._take(seq_id)
            chunk = tokens[logical * bs : (logical + 1) * bs]
            cache.write(block, 0, chunk)
            if len(chunk) == bs:
                cache.block_full(seq_id, block, self.ref_counts)
        return list(self.block_tables[seq_id])

    def fork(self, parent: int, child: int) -> list[int]:
        """A new sequence ``child`` that shares every block of ``parent``.

        The n samples of one prompt, or a beam that splits (vLLM's ``fork``): the
        child's table is a copy of the parent's, each block's count goes up by
        one, and no block is taken. The first append of either into their shared
        partly filled last block copies it (copy-on-write).

        Returns
        -------
        list of int
            The child's block table.

        Raises
        ------
        ValueError
            If ``parent`` is not live or ``child`` is.
        """
        if parent not in self.block_tables:
            raise ValueError(f"cannot fork sequence {parent}: it is not live")
        if child in self.block_tables:
            raise ValueError(f"cannot fork into sequence {child}: it already holds blocks")
        self.block_tables[child] = []
        for block in self.block_tables[parent]:
            if block == FREE:  # freed out of the parent's window: the child does not read it either
                self.block_tables[child].append(FREE)
            else:
                self._share(child, block)
        self.context_lens[child] = self.context_lens[parent]
        keys = self.prefix_cache.sequence_keys
        if parent in keys:
            keys[child] = list(keys[parent])
        return list(self.block_tables[child])

    def can_allocate(self, num_blocks: int) -> bool:
        return num_blocks <= self.num_free

    def needs_block(self, seq_id: int) -> bool:
        """Whether the next token of ``seq_id`` takes a block from the free list.

        The token goes to position ``t = context_len``; it needs a new block when
        ``t % block_size == 0`` (the last block is full) or when the last block is
        shared (copy-on-write).
        """
        if self.context_lens[seq_id] % self.block_size == 0:
            return True
        return bool(self.ref_counts[self.block_tables[seq_id][-1]] > 1)

    def append_token(self, seq_id: int, token: int | None = None) -> int | None:
        """Decode: store one more token of ``seq_id``.

        Parameters
        ----------
        seq_id : int
            A live sequence.
        token : int, optional
            Its token id: required for a sequence allocated with ``tokens`` (or
            forked from one), refused for the others.

        Returns
        -------
        int or None
            The physical block taken (a new last block, or the copy of a shared one),
            or ``None`` if the token fit in the sequence's own last block.

        Raises
        ------
        ValueError
            If ``seq_id`` is not live, or ``token`` is missing, not a non-negative
            integer, or given for a sequence without tokens.
        RuntimeError
            If a block is needed and the free list is empty.
        """
        if seq_id not in self.block_tables:
            raise ValueError(f"cannot append to sequence {seq_id}: it is not live")
        with_tokens = seq_id in self.prefix_cache.sequence_keys
        if with_tokens:
            if token is None:
                raise ValueError(f"sequence {seq_id} was allocated with tokens; append_token needs its token id")
            check_int("token", token, 0)
        elif token is not None:
            raise ValueError(f"sequence {seq_id} was allocated without tokens; append_token takes no token id")
        table = self.block_tables[seq_id]
        n = self.context_lens[seq_id]
        slot = n % self.block_size
        block = None
        if slot == 0 or self.ref_counts[table[-1]] > 1:
            if not self.free_blocks:
                raise RuntimeError(f"sequence {seq_id} needs a block but the free list is empty")
            if slot == 0:
                block = self._take(seq_id)
            else:  # copy-on-write: the filled slots go to a fresh block first
                shared = table.pop()
                block = self._take(seq_id)
                self.prefix_cache.copy(shared, block, slot)
                self._release(seq_id, shared)
                self.cow_copies += 1
        self.context_lens[seq_id] = n + 1
        if with_tokens:
            self.prefix_cache.write(table[-1], slot, [token])
            if slot == self.block_size - 1:
                self.prefix_cache.block_full(seq_id, table[-1], self.ref_counts)
        return block

    def free(self, seq_id: int) -> None:
        """Drop ``seq_id``: each of its blocks loses a reference, and returns to
        the free list when none is left.

        A sequence with tokens returns its blocks last first (vLLM v1 does the same),
        so the free list evicts a cached prefix's tail before its head.

        Raises
        ------
        ValueError
            If ``seq_id`` is not live.
        """
        if seq_id not in self.block_tables:
            raise ValueError(f"cannot free sequence {seq_id}: it is not live")
        table = self.block_tables.pop(seq_id)
        keys = self.prefix_cache.sequence_keys
        for block in reversed(table) if seq_id in keys else table:
            if block != FREE:
                self._release(seq_id, block)
        del self.context_lens[seq_id]
        keys.pop(seq_id, None)

    def free_out_of_window(self, seq_id: int, window: int) -> list[int]:
        """Sliding window: ``seq_id``'s entries out of its window
        (:func:`~explorer.serving.window.out_of_window`) become ``-1`` and lose this
        sequence's reference (a shared block stays in use, a cached one keeps its key);
        returns the blocks that went back to the free list. Idempotent. Raises
        ``ValueError`` if ``seq_id`` is not live or ``window`` is not a positive integer."""
        if seq_id not in self.block_tables:
            raise ValueError(f"cannot free the window of sequence {seq_id}: it is not live")
        table, freed = self.block_tables[seq_id], []
        for logical in out_of_window(table, self.context_lens[seq_id], window, self.block_size):
            block, table[logical] = table[logical], FREE
            self._release(seq_id, block)
            if self.ref_counts[block] == 0:
                freed.append(block)
        return freed

    # -- views ---------------------------------------------------------------
    def pool_owner(self) -> torch.Tensor:
        """``[num_blocks]`` int64: the ``seq_id`` owning each block (the lowest of a
        shared block's holders), ``-1`` if free."""
        return torch.from_numpy(self._owner.copy())

    def pool_ref_counts(self) -> np.ndarray:
        """``[num_blocks]`` int64: a copy of each block's reference count."""
        return self.ref_counts.copy()

    def cached_blocks(self) -> list[int]:
        """Blocks that hold a cached full-block prefix (live or on the free list), by id."""
        return self.prefix_cache.cached_blocks()

    def sequence_tokens(self, seq_id: int) -> list[int]:
        """The token ids ``seq_id`` reads through its block table, in order.

        Raises
        ------
        ValueError
            If ``seq_id`` is not live or was allocated without tokens.
        """
        if seq_id not in self.prefix_cache.sequence_keys:
            raise ValueError(f"sequence {seq_id} is not live or was allocated without tokens")
        if freed_entries(self.block_tables[seq_id]):
            raise ValueError(f"sequence {seq_id} freed the blocks before its window: their tokens are gone")
        n = self.context_lens[seq_id]
        flat = self.slot_tokens[self.block_tables[seq_id]].reshape(-1)
        return [int(t) for t in flat[:n]]

    def block_table(self, seq_ids: Sequence[int]) -> torch.Tensor:
        """Dense block table of ``seq_ids``.

        Returns
        -------
        Tensor
            ``[len(seq_ids), max_blocks]`` int32, ``max_blocks`` the most blocks any
            of them holds (at least 1), ``-1`` past each sequence's last block and
            where a block before its window was freed.
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
            Naming the first broken invariant: every block is either on the free
            list or in at least one block table (``free + held == num_blocks``, ids
            in range, nothing listed twice, no block twice in one table); each
            block's reference count is the number of table entries pointing at it;
            the owner map names the lowest holder of each block; each sequence holds
            exactly ``ceil(context_len / block_size)`` table entries, those freed
            out of a window (``-1``) a leading run that leaves its last block; only
            full blocks are cached, each under one key.
        """
        free = list(self.free_blocks)
        holders: dict[int, list[int]] = {}
        for seq_id, table in self.block_tables.items():
            held = table[freed_entries(self.block_tables[seq_id]):]
            assert held and FREE not in held, f"sequence {seq_id}'s freed entries are not a leading run: {table}"
            assert len(set(held)) == len(held), f"sequence {seq_id} holds a block twice: {table}"
            for b in held:
                holders.setdefault(b, []).append(seq_id)
        assert len(free) + len(holders) == self.num_blocks, (
            f"conservation: {len(free)} free + {len(holders)} held != num_blocks {self.num_blocks}"
        )
        everything = free + list(holders)
        assert all(0 <= b < self.num_blocks for b in everything), "a block id lies outside the pool"
        assert len(set(everything)) == self.num_blocks, (
            "a block is listed twice (on the free list and in a block table, or twice free)"
        )
        expected_refs = np.zeros(self.num_blocks, dtype=np.int64)
        for b, seqs in holders.items():
            expected_refs[b] = len(seqs)
        wrong = np.flatnonzero(expected_refs != self.ref_counts)
        assert wrong.size == 0, (
            f"reference count of block {wrong[0]} is {self.ref_counts[wrong[0]]}, but "
            f"{expected_refs[wrong[0]]} table entries point at it" if wrong.size else ""
        )
        expected = np.full(self.num_blocks, FREE, dtype=np.int64)
        for b, seqs in holders.items():
            expected[b] = min(seqs)
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
        self.prefix_cache.check_invariants(self.context_lens)
