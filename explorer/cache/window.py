"""A sliding window over the block table: which logical blocks a decode step reads.

With a window of ``W`` tokens, the query of a sequence of ``n`` cached tokens (at
position ``n - 1``) attends to positions ``max(0, n - W) .. n - 1`` only (the
rule of :func:`paged_attention.validation.check_decode_args`, whose
``DecodeShape.window_starts`` and ``first_blocks`` the kernels use). Its table
entries before the window's first block are held (an engine may free them) but
not read: the Block table page draws them greyed and counts the blocks read
against those held (:func:`window_reads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.formatting import count, format_number
from paged_attention.tiling import cdiv


def first_read_blocks(context_lens: Sequence[int], block_size: int, window: int | None) -> np.ndarray:
    """``[batch_size]`` int64: each sequence's first logical block inside the window,
    ``max(0, n - window) // block_size`` (0 for all without a window)."""
    lengths = np.asarray(context_lens, dtype=np.int64)
    if window is None:
        return np.zeros_like(lengths)
    return np.maximum(lengths - window, 0) // block_size


@dataclass(frozen=True)
class WindowReads:
    """Logical blocks (table entries) and tokens a decode step reads, against those held."""

    window: int | None
    blocks_read: int
    blocks_held: int
    tokens_read: int
    tokens_held: int

    @property
    def blocks_unread(self) -> int:
        return self.blocks_held - self.blocks_read

    def note(self) -> str:
        """``"Blocks read: 12 of 40 (window 64)"``; ``"Blocks read: 40 of 40 (no window)"``."""
        window = f"window {format_number(self.window)}" if self.window is not None else "no window"
        return f"Blocks read: {format_number(self.blocks_read)} of {format_number(self.blocks_held)} ({window})"

    def detail(self) -> str:
        """The tokens behind :meth:`note`: ``"each sequence reads its last 64 tokens: 256 of 1,000 tokens"``."""
        if self.window is None:
            return f"each sequence reads its whole context: {count(self.tokens_held, 'token')}"
        if self.tokens_read == self.tokens_held:
            return (f"the window of {count(self.window, 'token')} covers every context, so every token is read: "
                    f"{count(self.tokens_held, 'token')}")
        return (f"each sequence reads its last {count(self.window, 'token')} (all of a shorter context): "
                f"{format_number(self.tokens_read)} of {count(self.tokens_held, 'token')}")

    def explain_unread(self) -> str:
        """The sentence under the block table's note: what the grey cells are, or that
        there are none."""
        if self.blocks_unread == 0:
            return "No block lies before its sequence's window: the table has no grey cells."
        return ("The grey cells come before each sequence's sliding window (it starts at the bold line): held in "
                "the table, not read by a decode step.")


def window_reads(context_lens: Sequence[int], block_size: int, window: int | None) -> WindowReads:
    """The logical blocks and tokens of sequences of ``context_lens`` that a window of
    ``window`` tokens (None: the whole context) reads, and those they hold."""
    lengths = np.asarray(context_lens, dtype=np.int64)
    held = cdiv(lengths, block_size)
    read = held - first_read_blocks(lengths, block_size, window)
    tokens = lengths if window is None else np.minimum(lengths, window)
    return WindowReads(window, int(read.sum()), int(held.sum()), int(tokens.sum()), int(lengths.sum()))
