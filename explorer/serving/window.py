"""Sliding-window attention in a paged KV cache: which blocks a sequence still reads.

With a window of ``W`` tokens the query at position ``context_len - 1`` attends to
positions ``max(0, context_len - W) .. context_len - 1``
(:attr:`paged_attention.validation.DecodeShape.window_starts`), so the block-table
entries before the window's first block, ``window_start // block_size``, are never
read again: the sequence only grows, its window only moves right. A serving engine
frees those blocks (vLLM's sliding-window manager does) and the decode kernel reads
``-1`` there. These functions are the arithmetic of it, in tokens and blocks; the
freeing itself is :meth:`explorer.serving.block_manager.BlockManager.free_out_of_window`.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Sequence

from paged_attention.inputs import FREE
from paged_attention.tiling import cdiv

if TYPE_CHECKING:
    from explorer.serving.block_manager import BlockManager


def first_block(context_len: int, window: int | None, block_size: int) -> int:
    """Logical index of the first block a sequence of ``context_len`` tokens reads:
    ``max(0, context_len - window) // block_size`` (0 without a window)."""
    if window is None:
        return 0
    return max(0, context_len - window) // block_size


def held_blocks(context_len: int, window: int | None, block_size: int) -> int:
    """Blocks a sequence of ``context_len`` tokens holds when the blocks before its
    window are freed: ``ceil(context_len / block_size) - first_block``. At most
    ``ceil(window / block_size) + 1`` (:func:`window_bound`)."""
    return cdiv(context_len, block_size) - first_block(context_len, window, block_size)


def window_bound(window: int, block_size: int) -> int:
    """The most blocks a window of ``window`` tokens spans: ``ceil(window / block_size) + 1``
    (a window that starts inside a block ends inside another)."""
    return cdiv(window, block_size) + 1


def peak_held(start_len: int, final_len: int, window: int | None, block_size: int) -> int:
    """The most blocks a sequence holds while it grows from ``start_len`` to
    ``final_len`` tokens (both included), freeing the blocks before its window.

    ``held_blocks`` rises while the context fits the window, then repeats with
    period ``block_size``, so at most ``block_size + 1`` lengths past the window are
    looked at.
    """
    if window is None or final_len <= window:
        return cdiv(final_len, block_size)
    past = max(start_len, window + 1)
    peak = cdiv(window, block_size) if start_len <= window else 0
    last = min(final_len, past + block_size - 1)
    return max(peak, *(held_blocks(n, window, block_size) for n in range(past, last + 1)))


def freed_entries(table: Sequence[int]) -> int:
    """Leading entries of a block table freed out of the window (``-1``)."""
    return next((i for i, b in enumerate(table) if b != FREE), len(table))


def free_out_of_window(manager: BlockManager, seq_id: int, window: int) -> list[int]:
    """Drop ``seq_id``'s blocks that its window no longer reaches.

    Its next decode query, at position ``context_len - 1``, attends to
    ``max(0, context_len - window) ..``; every table entry before that start's
    block (:func:`first_block`) is never read again. Each such block loses this
    sequence's reference: a block shared with another sequence (a fork, a prefix
    hit) stays in use until its last holder lets go, and a cached prefix block goes
    to the free list with its key, as a finished sequence's does (a later prompt's
    hit may revive it until the free list hands it out). The entry becomes ``-1``.
    Idempotent: a second call at the same length frees nothing.

    Parameters
    ----------
    manager : BlockManager
    seq_id : int
        A live sequence.
    window : int
        Tokens the query attends to, >= 1.

    Returns
    -------
    list of int
        The physical blocks that went back to the free list (last reference gone).

    Raises
    ------
    ValueError
        If ``seq_id`` is not live or ``window`` is not a positive integer.
    """
    if seq_id not in manager.block_tables:
        raise ValueError(f"cannot free the window of sequence {seq_id}: it is not live")
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive integer; got {window!r}")
    table = manager.block_tables[seq_id]
    freed = []
    for logical in range(freed_entries(table), first_block(manager.context_lens[seq_id], int(window),
                                                           manager.block_size)):
        block = table[logical]
        table[logical] = FREE
        manager._release(seq_id, block)
        if manager.ref_counts[block] == 0:
            freed.append(block)
    return freed
