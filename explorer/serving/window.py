"""Sliding-window attention in a paged KV cache: which blocks a sequence still reads.

With a window of ``W`` tokens the query at position ``context_len - 1`` attends to
positions ``max(0, context_len - W) .. context_len - 1``
(:attr:`paged_attention.validation.DecodeShape.window_starts`), so the block-table
entries before the window's first block, ``window_start // block_size``, are never
read again: the sequence only grows, its window only moves right. A serving engine
frees those blocks (vLLM's sliding-window manager does) and the decode kernel reads
``-1`` there. These functions are the arithmetic of it, in tokens and blocks; the
freeing itself (the reference counts) is
:meth:`explorer.serving.block_manager.BlockManager.free_out_of_window`.
"""

from __future__ import annotations

import numbers
from typing import Sequence

from paged_attention.inputs import FREE
from paged_attention.tiling import cdiv


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


def out_of_window(table: Sequence[int], context_len: int, window: int, block_size: int) -> range:
    """Logical entries of a block table that a sliding window no longer reaches and
    that are not freed yet.

    The next decode query, at position ``context_len - 1``, attends to
    ``max(0, context_len - window) ..``; every entry before that start's block
    (:func:`first_block`) is never read again. Entries already freed (the leading
    ``-1`` run, :func:`freed_entries`) are left out, so freeing is idempotent.

    Parameters
    ----------
    table : sequence of int
        One sequence's block table, logical order.
    context_len : int
        Tokens the sequence holds.
    window : int
        Tokens the query attends to, >= 1.
    block_size : int
        Tokens per block.

    Returns
    -------
    range
        Logical indices, ascending (empty when nothing left the window).

    Raises
    ------
    ValueError
        If ``window`` is not a positive integer.
    """
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive integer; got {window!r}")
    return range(freed_entries(table), first_block(context_len, int(window), block_size))
