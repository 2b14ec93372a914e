"""Build the inputs of one decode step: query, paged K/V cache, block table, lengths.

Physical blocks that the batch does not read, and the unfilled tail slots of each
sequence's last block, are filled with :data:`LOUD_VALUE` rather than zeros, so a
kernel that reads a wrong block or slot gets a visibly wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import DecodeConfig

#: Fill value of every K/V slot that no sequence's context covers. Exact in
#: float16, bfloat16 and float32, and large enough that one stray read moves
#: the softmax (as a key) or the weighted sum (as a value) far past tolerance.
LOUD_VALUE = 64.0

#: ``pool_owner`` codes besides a sequence index.
FREE = -1
OTHER = -2


@dataclass
class DecodeInputs:
    """The tensors of one decode step, as every implementation takes them.

    Attributes
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32; ``-1`` marks an unallocated entry.
    context_lens : Tensor
        ``[batch_size]`` int32.
    pool_owner : Tensor
        ``[num_blocks]`` int64 on the CPU: the sequence that owns each physical
        block, ``FREE`` (-1) for a free block, ``OTHER`` (-2) for a block held by a
        sequence outside this batch (fragmented layout).
    config : DecodeConfig
        The configuration these were built from.
    """

    query: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor
    pool_owner: torch.Tensor
    config: DecodeConfig

    def args(self) -> tuple[torch.Tensor, ...]:
        """``(query, k_cache, v_cache, block_tables, context_lens)``."""
        return (self.query, self.k_cache, self.v_cache, self.block_tables, self.context_lens)


def assign_blocks(config: DecodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand out physical blocks to the sequences of ``config`` by its block layout.

    Parameters
    ----------
    config : DecodeConfig
        Uses ``batch_size``, ``context_lens``, ``block_size``, ``num_blocks``,
        ``block_layout`` and ``seed``.

    Returns
    -------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 on the CPU, ``-1`` past each
        sequence's last block.
    pool_owner : Tensor
        ``[num_blocks]`` int64 on the CPU (see :class:`DecodeInputs`).

    Raises
    ------
    ValueError
        If the configuration is invalid.
    """
    config.validate()
    gen = torch.Generator().manual_seed(config.seed)
    needed = config.blocks_per_sequence
    num_blocks = config.num_blocks
    owner = torch.full((num_blocks,), FREE, dtype=torch.int64)

    if config.block_layout == "contiguous":
        order = torch.arange(num_blocks)
    elif config.block_layout == "shuffled":
        order = torch.randperm(num_blocks, generator=gen)
    else:  # fragmented
        order = _fragmented_free_list(num_blocks, config.num_blocks_used, gen, owner)

    tables = torch.full((config.batch_size, config.max_num_blocks), -1, dtype=torch.int32)
    cursor = 0
    for seq, n in enumerate(needed):
        ids = order[cursor : cursor + n]
        cursor += n
        tables[seq, :n] = ids.to(torch.int32)
        owner[ids] = seq
    return tables, owner


def _fragmented_free_list(
    num_blocks: int, num_needed: int, gen: torch.Generator, owner: torch.Tensor
) -> torch.Tensor:
    """The free list a block manager has after churn.

    Sequences of mixed lengths (1 to 32 blocks) fill the pool in order; then a
    random subset of them finishes and frees its blocks until ``num_needed``
    blocks are free. The returned free list is in ascending block order, as a
    simple allocator would hand it out, so a new sequence's blocks interleave
    with blocks still held by others (marked ``OTHER`` in ``owner``).
    """
    runs: list[tuple[int, int]] = []
    start = 0
    while start < num_blocks:
        length = int(torch.randint(1, 33, (1,), generator=gen))
        runs.append((start, min(start + length, num_blocks)))
        start += length
    free = torch.zeros(num_blocks, dtype=torch.bool)
    freed = 0  # runs never overlap, so a running count replaces re-summing the mask
    for i in torch.randperm(len(runs), generator=gen).tolist():
        if freed >= num_needed:
            break
        lo, hi = runs[i]
        free[lo:hi] = True
        freed += hi - lo
    owner[~free] = OTHER
    return torch.nonzero(free).flatten()


def build_decode_inputs(config: DecodeConfig) -> DecodeInputs:
    """Random inputs for one decode step of ``config``.

    The query and every K/V slot that a sequence's context covers are standard
    normal; all other slots hold :data:`LOUD_VALUE`.

    Parameters
    ----------
    config : DecodeConfig
        Sizes, dtype, device, seed and block layout.

    Returns
    -------
    DecodeInputs
        Tensors on ``config.device`` (``pool_owner`` on the CPU).

    Raises
    ------
    ValueError
        If the configuration is invalid.

    Examples
    --------
    >>> inputs = build_decode_inputs(DecodeConfig(batch_size=2, context_lens=(5, 40)))
    >>> out = reference_decode(*inputs.args())
    """
    config.validate()
    block_tables, owner = assign_blocks(config)
    dtype, device = config.torch_dtype, torch.device(config.device)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    shape = (config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim)

    query = torch.randn(
        config.batch_size, config.num_heads, config.head_dim, generator=gen, device=device
    ).to(dtype)
    k_cache = torch.randn(shape, generator=gen, device=device).to(dtype)
    v_cache = torch.randn(shape, generator=gen, device=device).to(dtype)
    filled = context_mask(block_tables, torch.tensor(config.lengths), config.num_blocks, config.block_size)
    filled = filled.to(device)
    k_cache[~filled] = LOUD_VALUE
    v_cache[~filled] = LOUD_VALUE
    return DecodeInputs(
        query=query,
        k_cache=k_cache,
        v_cache=v_cache,
        block_tables=block_tables.to(device),
        context_lens=torch.tensor(config.lengths, dtype=torch.int32, device=device),
        pool_owner=owner,
        config=config,
    )


def context_mask(
    block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int, block_size: int
) -> torch.Tensor:
    """Which ``(physical block, slot)`` pairs some sequence's context covers.

    Returns
    -------
    Tensor
        ``[num_blocks, block_size]`` bool on the CPU.
    """
    mask = torch.zeros(num_blocks, block_size, dtype=torch.bool)
    tables = block_tables.cpu().long()
    for seq, n in enumerate(context_lens.cpu().tolist()):
        if n == 0:
            continue
        tokens = torch.arange(n)
        mask[tables[seq, tokens // block_size], tokens % block_size] = True
    return mask
