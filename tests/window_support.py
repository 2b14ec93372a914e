"""Inputs for the attention options' tests of the Triton kernels: memory outside every
sliding window poisoned, table entries before each window's first block freed, and
one sink logit per query head."""

from __future__ import annotations

from typing import Sequence

import torch

from paged_attention.inputs import fill_uncovered

#: What an engine leaves in a table entry it freed, in turn by column: -1, and an id
#: far past any pool (a read of it faults on a GPU, or reads garbage).
FREED_ENTRIES = (-1, 2**31 - 1)


def poison_outside_windows(args: Sequence[torch.Tensor], window: int) -> tuple[torch.Tensor, ...]:
    """``args`` (``query, k_cache, v_cache, block_tables, context_lens``) with every
    K/V slot that no sequence's window covers poisoned in place (NaN, ±Inf, huge,
    denormal: :func:`~paged_attention.inputs.fill_uncovered`) and the table entries
    before each window's first block freed (:data:`FREED_ENTRIES`), in a new table.

    A slot a window covers stays, whichever sequence's (blocks shared by a prefix
    group keep what any member's window reads). Returns the five tensors.
    """
    query, k_cache, v_cache, block_tables, context_lens = args
    block_size = k_cache.shape[1]
    tables = block_tables.cpu().long()
    lens = context_lens.cpu().long()
    starts = (lens - window).clamp(min=0)
    covered = torch.zeros(k_cache.shape[:2], dtype=torch.bool)
    for b in range(len(lens)):
        tokens = torch.arange(int(starts[b]), int(lens[b]))
        covered[tables[b, tokens // block_size], tokens % block_size] = True
    fill_uncovered(k_cache, v_cache, covered, poison=True)
    freed = tables.clone()
    for b in range(len(lens)):
        first = int(starts[b]) // block_size
        for col in range(first):
            freed[b, col] = FREED_ENTRIES[col % len(FREED_ENTRIES)]
    freed = freed.to(device=block_tables.device, dtype=block_tables.dtype)
    return query, k_cache, v_cache, freed, context_lens


def random_sinks(num_heads: int, device: torch.device | str, seed: int = 0) -> torch.Tensor:
    """float32 ``[num_heads]`` sink logits, standard normal times 2 (some above the
    scores, some below), on ``device``."""
    gen = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(num_heads, generator=gen)).to(device)


def option_sets(num_heads: int, device: torch.device | str, seed: int = 0) -> dict[str, dict]:
    """The option combinations the kernels' tests run, by id: a window, sinks, a
    soft-cap, and all three (the window is None where not set)."""
    sinks = random_sinks(num_heads, device, seed)
    return {
        "window": dict(window=37),
        "sinks": dict(sinks=sinks),
        "soft-cap": dict(soft_cap=1.5),
        "all": dict(window=50, sinks=sinks, soft_cap=2.0),
    }
