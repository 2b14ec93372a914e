"""What memory no sequence reads holds in the tests' inputs, and which memory that is.

Physical blocks that the batch does not read, the unfilled tail slots of each
sequence's last block, and with a sliding window the slots before each window, are
filled with :data:`LOUD_VALUE` rather than zeros, so a kernel that reads a wrong
block or slot gets a visibly wrong answer. With ``poison=True`` (what the tests use)
they hold NaN, ±Inf, a huge finite value and a denormal instead, as a recycled block
or a fresh ``torch.empty`` pool can: a finite fill hides the classic bug of a masked
slot multiplied by a zero weight (``0 * NaN = NaN``), and the block table's entries
no sequence needs (past each context, before a window's first block) hold -1, stale
block ids and ids past the pool.
"""

from __future__ import annotations

import math

import torch

from .tiling import cdiv

#: Fill value of every K/V slot that no sequence's context covers. Exact in
#: float16, bfloat16 and float32, and large enough that one stray read moves
#: the softmax (as a key) or the weighted sum (as a value) far past tolerance.
LOUD_VALUE = 64.0

#: What ``poison=True`` writes into memory no context covers, slot by slot in
#: turn: NaN, +Inf, -Inf, a large finite value (exact in float16) and, last, a
#: denormal of the cache's dtype.
POISON_VALUES: tuple[float, ...] = (math.nan, math.inf, -math.inf, 6e4)


def context_mask(
    block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int, block_size: int,
    window_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Which ``(physical block, slot)`` pairs some sequence attends to.

    Vectorised on the tables' device (no loop over sequences or blocks), so it
    serves pools of millions of blocks. Entries past a context, and before the
    block of its window's start, are never read.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; needed entries lie in
        ``[0, num_blocks)``.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    num_blocks, block_size : int
        Size of the pool.
    window_starts : Tensor, optional
        ``[batch_size]``: each sequence's first attended position (a window's
        start, ``max(0, context_len - window)``); 0 when not given.

    Returns
    -------
    Tensor
        ``[num_blocks, block_size]`` bool on ``block_tables``' device: positions
        ``window_starts[b] .. context_lens[b] - 1`` of every sequence ``b``.
    """
    device = block_tables.device
    tables = block_tables.long()
    lens = context_lens.to(device=device, dtype=torch.long)
    starts = torch.zeros_like(lens) if window_starts is None else window_starts.to(device=device, dtype=torch.long)
    mask = torch.zeros(num_blocks, block_size, dtype=torch.bool, device=device)
    if tables.numel() == 0:
        return mask
    cols = torch.arange(tables.shape[1], device=device)
    whole = (cols[None, :] >= cdiv(starts, block_size)[:, None]) & (cols[None, :] < (lens // block_size)[:, None])
    mask[tables[whole]] = True  # every slot of a block wholly inside
    rows = torch.nonzero(lens > starts).flatten()
    slots = torch.arange(block_size, device=device)
    for col in (starts[rows] // block_size, (lens[rows] - 1) // block_size):  # the blocks at the two ends
        used = (slots[None, :] >= (starts[rows] - col * block_size)[:, None]) & (
            slots[None, :] < (lens[rows] - col * block_size)[:, None])
        block = tables[rows, col]
        mask[block[:, None].expand_as(used)[used], slots.expand_as(used)[used]] = True
    return mask


def fill_uncovered(
    k_cache: torch.Tensor, v_cache: torch.Tensor, covered: torch.Tensor, *, poison: bool = False
) -> None:
    """Overwrite, in place, every K/V slot that ``covered`` marks False.

    The one place that decides what memory no context covers holds.

    Parameters
    ----------
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]`` floating point.
    covered : Tensor
        ``[num_blocks, block_size]`` bool, from :func:`context_mask`.
    poison : bool
        False: :data:`LOUD_VALUE` everywhere (in an fp8 cache the format's
        largest value, which dequantizes to the data's absolute maximum). True: uncovered slot
        ``i`` (counted over the flattened pool) holds
        ``(*POISON_VALUES, denormal)[i % 5]`` in every head and dimension, so each
        kind of dirt lands in tail slots and in whole blocks alike. float8_e4m3fn
        has no infinity: ±Inf and 6e4 are stored as ±448, its largest value.
    """
    uncovered = ~covered.to(k_cache.device)
    for cache in (k_cache, v_cache):
        finfo = torch.finfo(cache.dtype)
        if not poison:
            # An fp8 cache's largest value (448 or 57344) is as loud as it gets: its
            # scale maps the data's absolute maximum there.
            values = torch.tensor([finfo.max if finfo.bits == 8 else LOUD_VALUE], dtype=cache.dtype)
        else:
            values = torch.tensor((*POISON_VALUES, finfo.tiny / 4), dtype=cache.dtype)
        values = values.to(cache.device)
        if finfo.bits == 8:  # PyTorch fills no fp8 tensor through a mask: write the bytes
            cache, values = cache.view(torch.uint8), values.view(torch.uint8)
        slot = torch.arange(uncovered.numel(), device=cache.device).view(uncovered.shape)
        cache[uncovered] = values[slot[uncovered] % len(values)][:, None, None]


def poison_table(
    block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int, block_size: int, *, seed: int = 0,
    window_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """A copy of ``block_tables`` whose entries past each sequence's needed blocks
    (and, with ``window_starts``, before the block of its window's start, which an
    engine may have freed) hold what an engine's table can: ``-1``, stale ids of other
    blocks in the pool, ``num_blocks`` and ``2**31 - 1`` (past the pool), in turn by
    column.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]``.
    num_blocks, block_size : int
        Size of the pool.
    seed : int
        Seed of the stale ids.
    window_starts : Tensor, optional
        ``[batch_size]``: each sequence's first attended position (with a sliding
        window, :attr:`~paged_attention.config.DecodeConfig.window_starts`); None:
        every entry up to the last needed one is kept.

    Returns
    -------
    Tensor
        Same shape, dtype and device; needed entries unchanged.
    """
    device = block_tables.device
    lens = context_lens.to(device=device, dtype=torch.long)
    needed = cdiv(lens, block_size)
    cols = torch.arange(block_tables.shape[1], device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    stale = torch.randint(0, max(num_blocks, 1), block_tables.shape, generator=gen, device=device)
    kinds = torch.stack([torch.full_like(stale, -1), stale, torch.full_like(stale, num_blocks),
                         torch.full_like(stale, 2**31 - 1)])
    garbage = kinds.gather(0, (cols % 4).expand_as(stale)[None]).squeeze(0).to(block_tables.dtype)
    unneeded = cols[None, :] >= needed[:, None]
    if window_starts is not None:
        unneeded |= cols[None, :] < (window_starts.to(device=device, dtype=torch.long) // block_size)[:, None]
    return torch.where(unneeded, garbage, block_tables)
