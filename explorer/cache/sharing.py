"""A batch that shares its KV cache: n samples per request and a common system prompt.

The Block table page's sharing scenario. The batch's sequences (the sidebar's
lengths) are grouped into requests of ``samples`` consecutive sequences, the n
samples of one prompt. Every request's prompt starts with the same
``common_prompt`` tokens (a system prompt), then has tokens of its own; it is one
token shorter than its shortest sample, so every sample has generated at least its
first token. The batch is built as a serving engine builds it, with
:class:`~explorer.serving.block_manager.BlockManager`:

1. prefill each request's first sample with its prompt's tokens: full blocks of the
   common prompt that an earlier request cached are shared (prefix caching);
2. fork the other samples from it (each block's reference count + 1);
3. decode round-robin, one token per sample per step, until each sample holds its
   length: the first token written into a shared partly filled block copies it
   (copy-on-write).

Without sharing, the same batch would hold ``ceil(len / block_size)`` blocks per
sequence, as the unshared page shows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.formatting import count, format_bytes, format_percent
from explorer.serving.block_manager import BlockManager, blocks_for, check_int


@dataclass(frozen=True)
class SharedBatch:
    """A batch laid out with sharing, and what it saves.

    Attributes
    ----------
    block_tables : ndarray
        ``[batch_size, max_num_blocks]`` int32, ``-1`` unallocated.
    context_lens : tuple of int
        Tokens of each sequence (the sidebar's lengths).
    prompt_lens : tuple of int
        The prompt of each sequence's request (0 for an empty sequence).
    ref_counts : ndarray
        ``[num_blocks]`` int64: sequences holding each physical block, 0 free.
    pool_owner : ndarray
        ``[num_blocks]`` int64: the lowest sequence holding each block, ``-1`` free.
    blocks_unshared : int
        Blocks the same batch holds without sharing.
    cow_copies : int
        Copy-on-write events while decoding.
    prefix_hits, prefix_queries : int
        Full prompt blocks found in the prefix cache, and looked up.
    wasted_slots : int
        Empty slots in the blocks in use (each counted once, however many hold it).
    copied : tuple of int
        The physical blocks copy-on-write made (one per :attr:`cow_copies`): a
        sample's own copy of a shared partly filled block, taken at its first write.
    """

    block_tables: np.ndarray
    context_lens: tuple[int, ...]
    prompt_lens: tuple[int, ...]
    ref_counts: np.ndarray
    pool_owner: np.ndarray
    blocks_unshared: int
    cow_copies: int
    prefix_hits: int
    prefix_queries: int
    wasted_slots: int
    copied: tuple[int, ...] = ()

    @property
    def blocks_used(self) -> int:
        return int((self.ref_counts > 0).sum())

    @property
    def blocks_saved(self) -> int:
        return self.blocks_unshared - self.blocks_used

    @property
    def shared_blocks(self) -> int:
        """Physical blocks held by more than one sequence."""
        return int((self.ref_counts > 1).sum())

    def saving_note(self, block_bytes: int) -> str:
        """What sharing saves, in physical blocks (against one per logical block) and in
        bytes of K and V (``block_bytes`` per block), and what prefix caching and
        copy-on-write did: a Markdown line, each block count saying physical or logical."""
        saved, unshared, used = self.blocks_saved, self.blocks_unshared, self.blocks_used

        def size(blocks: int) -> str:
            return format_bytes(blocks * block_bytes, significant=3)

        return (
            f"**Sharing saves {count(saved, 'physical block')} of {unshared:,}** "
            f"({format_percent(saved / max(1, unshared))}, {size(saved)} of K and V): the batch holds "
            f"{count(used, 'physical block')} ({size(used)}) instead of {unshared:,}, one per logical block "
            f"({size(unshared)}). Physical blocks held by more than one sequence: {self.shared_blocks:,}. "
            f"Prefix caching found {self.prefix_hits:,} of {count(self.prefix_queries, 'full prompt block')}, "
            f"and decoding made {count(self.cow_copies, 'copy-on-write copy', 'copy-on-write copies')}."
        )


def table_ref_counts(block_tables: np.ndarray, num_blocks: int) -> np.ndarray:
    """``[num_blocks]`` int64: how many sequences' rows of ``block_tables``
    (``[batch_size, max_num_blocks]``, ``-1`` unallocated) hold each physical block,
    as a block manager counts references: more than 1 where a shared prefix's
    blocks stand in several rows."""
    tables = np.asarray(block_tables, dtype=np.int64)
    return np.bincount(tables[tables >= 0], minlength=int(num_blocks)).astype(np.int64)


def request_of(batch_size: int, samples: int) -> np.ndarray:
    """``[batch_size]``: the request of each sequence, ``samples`` consecutive ones each."""
    return np.arange(batch_size) // samples


def shared_prefix_batch(
    context_lens: Sequence[int], block_size: int, num_blocks: int, common_prompt: int, samples: int
) -> SharedBatch:
    """Lay out a batch of n-sample requests with a common prompt, sharing blocks.

    Parameters
    ----------
    context_lens : sequence of int
        Tokens of each sequence (0 leaves a sequence empty).
    block_size : int
        Tokens per block.
    num_blocks : int
        Pool size; at least the blocks the batch holds without sharing.
    common_prompt : int
        Tokens every request's prompt starts with (clipped to each prompt).
    samples : int
        Sequences per request (n); the last request may have fewer.

    Returns
    -------
    SharedBatch

    Raises
    ------
    ValueError
        If ``samples`` is not a positive integer, ``common_prompt`` is negative, or
        the pool is smaller than the unshared batch.
    """
    check_int("samples", samples, 1)
    check_int("common_prompt", common_prompt, 0)
    lengths = [int(n) for n in context_lens]
    unshared = sum(blocks_for(n, block_size) for n in lengths)
    if unshared > num_blocks:
        raise ValueError(f"the batch holds {unshared:,} blocks without sharing but the pool has {num_blocks:,}")
    bm = BlockManager(num_blocks, block_size)
    fresh = itertools.count(common_prompt)  # token ids nobody else uses
    prompt_lens = [0] * len(lengths)
    remaining: dict[int, int] = {}  # seq -> tokens still to generate
    copied: list[int] = []  # the blocks copy-on-write took
    for first in range(0, len(lengths), samples):
        rows = [s for s in range(first, min(first + samples, len(lengths))) if lengths[s] > 0]
        if not rows:
            continue
        prompt = max(1, min(lengths[s] for s in rows) - 1)
        common = min(common_prompt, prompt)
        bm.allocate(rows[0], tokens=[*range(common), *itertools.islice(fresh, prompt - common)])
        for s in rows[1:]:
            bm.fork(rows[0], s)
        for s in rows:
            prompt_lens[s] = prompt
            remaining[s] = lengths[s] - prompt
    while remaining:
        for s in list(remaining):
            if remaining[s] == 0:
                del remaining[s]
                continue
            before = bm.cow_copies
            block = bm.append_token(s, next(fresh))
            if bm.cow_copies > before:
                copied.append(int(block))
            remaining[s] -= 1
    width = max([1, *(blocks_for(n, block_size) for n in lengths)])
    tables = np.full((len(lengths), width), -1, dtype=np.int32)
    filled = np.zeros(num_blocks, dtype=np.int64)
    for s, table in bm.block_tables.items():
        tables[s, : len(table)] = table
        filled[table] = np.clip(lengths[s] - np.arange(len(table)) * block_size, 0, block_size)
    return SharedBatch(
        block_tables=tables, context_lens=tuple(lengths), prompt_lens=tuple(prompt_lens),
        ref_counts=bm.pool_ref_counts(), pool_owner=bm.pool_owner().numpy(), blocks_unshared=unshared,
        cow_copies=bm.cow_copies, prefix_hits=bm.prefix_hits, prefix_queries=bm.prefix_queries,
        wasted_slots=int(bm.num_used * block_size - filled.sum()), copied=tuple(copied),
    )
