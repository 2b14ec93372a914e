"""A sliding window over the block table: which logical blocks a decode step reads.

With a window of ``W`` tokens, the query of a sequence of ``n`` cached tokens (at
position ``n - 1``) attends to positions ``max(0, n - W) .. n - 1`` only (the
rule of :func:`paged_attention.validation.check_decode_args`, whose
``DecodeShape.window_starts`` and ``first_blocks`` the kernels use). With ``q``
new tokens (draft tokens) the first of them, at ``n - q``, reaches back furthest:
the step reads from ``max(0, n - q + 1 - W)``. Its table entries before the
window's first block are held (an engine may free them) but not read: the Block table page draws them hatched and counts the blocks read
against those held (:func:`window_reads`): logical blocks (table entries, each
sequence's own), and, where blocks are shared, the physical blocks behind them (a
shared one once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.formatting import count, format_number
from paged_attention.tiling import cdiv


def window_starts(context_lens: Sequence[int], window: int | None,
                  query_lens: Sequence[int] | None = None) -> np.ndarray:
    """``[batch_size]`` int64: each sequence's first position a step reads, that of its
    first new token's window, ``max(0, n - q + 1 - window)`` (``q`` = 1 without
    ``query_lens``; 0 for all without a window): ``DecodeConfig.window_starts``."""
    lengths = np.asarray(context_lens, dtype=np.int64)
    if window is None:
        return np.zeros_like(lengths)
    q = np.ones_like(lengths) if query_lens is None else np.asarray(query_lens, dtype=np.int64)
    return np.maximum(lengths - q + 1 - window, 0)


def first_read_blocks(context_lens: Sequence[int], block_size: int, window: int | None,
                      query_lens: Sequence[int] | None = None) -> np.ndarray:
    """``[batch_size]`` int64: each sequence's first logical block inside the window of
    its first new token, ``window_starts(...) // block_size`` (0 for all without a window)."""
    return window_starts(context_lens, window, query_lens) // block_size


@dataclass(frozen=True)
class WindowReads:
    """Logical blocks (table entries) and tokens a decode step reads, against those
    held; with the block tables, the distinct physical blocks behind them too."""

    window: int | None
    #: Logical blocks: a sequence's table entries, a block shared by k sequences counted k times.
    blocks_read: int
    blocks_held: int
    tokens_read: int
    tokens_held: int
    #: Whether a sequence has more than one new token (its first one's window reaches back furthest).
    drafts: bool = False
    #: Distinct physical blocks behind the logical ones read and held (a shared one once);
    #: None when not counted (no block tables given).
    physical_read: int | None = None
    physical_held: int | None = None

    @property
    def blocks_unread(self) -> int:
        return self.blocks_held - self.blocks_read

    @property
    def shares(self) -> bool:
        """Whether the physical blocks were counted and differ from the logical ones
        (some block read or held is shared)."""
        return self.physical_held is not None and (self.physical_read, self.physical_held) != (
            self.blocks_read, self.blocks_held)

    def note(self) -> str:
        """``"Logical blocks read: 12 of 40 (window 64)"``; ``"Logical blocks read: 40
        of 40 (no window)"``: table entries, each sequence's own."""
        window = f"window {format_number(self.window)}" if self.window is not None else "no window"
        return (f"Logical blocks read: {format_number(self.blocks_read)} of {format_number(self.blocks_held)} "
                f"({window})")

    def physical_note(self) -> str | None:
        """The physical blocks behind :meth:`note`'s, where blocks are shared:
        ``"physical blocks: 9 of 13, a shared block counted once"``; None where each
        logical block is its own physical block (or the tables were not given)."""
        if not self.shares:
            return None
        return (f"physical blocks: {format_number(self.physical_read)} of {format_number(self.physical_held)}, "
                "a shared block counted once")

    def detail(self) -> str:
        """The tokens behind :meth:`note`: ``"each sequence reads its last 64 tokens: 256 of 1,000 tokens"``."""
        if self.window is None:
            return f"each sequence reads its whole context: {count(self.tokens_held, 'token')}"
        if self.tokens_read == self.tokens_held:
            return (f"the window of {count(self.window, 'token')} covers every context, so every token is read: "
                    f"{count(self.tokens_held, 'token')}")
        if self.drafts:
            return (f"each new token reads the {count(self.window, 'token')} up to itself, so a sequence reads "
                    f"from its first new token's window on: {format_number(self.tokens_read)} of "
                    f"{count(self.tokens_held, 'token')}")
        return (f"each sequence reads its last {count(self.window, 'token')} (all of a shorter context): "
                f"{format_number(self.tokens_read)} of {count(self.tokens_held, 'token')}")

    def explain_unread(self) -> str:
        """The sentence under the block table's note: what the hatched cells are, or that
        there are none."""
        if self.blocks_unread == 0:
            return "No block lies before its sequence's window: the table has no hatched cells."
        return ("The hatched cells come before each sequence's sliding window (it starts at the bold line): held in "
                "the table, not read by a decode step.")


def window_reads(context_lens: Sequence[int], block_size: int, window: int | None,
                 query_lens: Sequence[int] | None = None, block_tables=None) -> WindowReads:
    """The logical blocks and tokens of sequences of ``context_lens`` (with
    ``query_lens`` new tokens each, default 1) that a window of ``window`` tokens
    (None: the whole context) reads, and those they hold.

    Parameters
    ----------
    context_lens : sequence of int
        Each sequence's cached tokens.
    block_size : int
        Tokens per block.
    window : int or None
        The sliding window (tokens); None reads the whole context.
    query_lens : sequence of int, optional
        Each sequence's new tokens this step (default 1 each).
    block_tables : array-like, optional
        ``[batch_size, max_num_blocks]`` physical block ids (``-1`` unallocated): with
        them the distinct physical blocks behind the logical ones read and held are
        counted too (``physical_read``, ``physical_held``).

    Returns
    -------
    WindowReads
    """
    lengths = np.asarray(context_lens, dtype=np.int64)
    held = cdiv(lengths, block_size)
    first = first_read_blocks(lengths, block_size, window, query_lens)
    read = held - first
    tokens = lengths - window_starts(lengths, window, query_lens)
    drafts = query_lens is not None and bool((np.asarray(query_lens) > 1).any())
    physical = (None, None)
    if block_tables is not None:
        tables = np.asarray(block_tables)
        col = np.arange(tables.shape[1])[None, :]
        in_use = (col < held[:, None]) & (tables >= 0)
        physical = (len(np.unique(tables[in_use & (col >= first[:, None])])), len(np.unique(tables[in_use])))
    return WindowReads(window, int(read.sum()), int(held.sum()), int(tokens.sum()), int(lengths.sum()), drafts,
                       *physical)
