"""A faster :func:`~paged_attention.cache.assign_blocks` for the app's large views.

``cache._fragmented_free_list`` recounts the whole free mask after freeing each
run of blocks, which is quadratic in the pool size: about a minute for the
fragmented layout of a 256 x 32k-token batch (590k blocks). This module draws
the same random numbers in the same order and keeps a running count instead, so
it returns exactly the same block table and owners (``tests/test_layout_fast.py``
checks that) in well under a second.

Delete this module once ``cache._fragmented_free_list`` keeps a running count
itself; the app then calls ``assign_blocks`` directly.
"""

from __future__ import annotations

import torch

from .cache import FREE, OTHER, assign_blocks
from .config import DecodeConfig


def assign_blocks_fast(config: DecodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as :func:`paged_attention.cache.assign_blocks`, faster for the
    fragmented layout of large pools.

    Returns
    -------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32, ``-1`` past each sequence's last block.
    pool_owner : Tensor
        ``[num_blocks]`` int64: owning sequence, ``FREE`` (-1) or ``OTHER`` (-2).

    Raises
    ------
    ValueError
        If the configuration is invalid.
    """
    if config.block_layout != "fragmented":
        return assign_blocks(config)
    config.validate()
    gen = torch.Generator().manual_seed(config.seed)
    num_blocks = config.num_blocks
    owner = torch.full((num_blocks,), FREE, dtype=torch.int64)

    runs: list[tuple[int, int]] = []
    start = 0
    while start < num_blocks:
        length = int(torch.randint(1, 33, (1,), generator=gen))
        runs.append((start, min(start + length, num_blocks)))
        start += length
    free = torch.zeros(num_blocks, dtype=torch.bool)
    freed = 0
    for i in torch.randperm(len(runs), generator=gen).tolist():
        if freed >= config.num_blocks_used:
            break
        lo, hi = runs[i]
        free[lo:hi] = True
        freed += hi - lo  # runs are disjoint, so this is free.sum()
    owner[~free] = OTHER
    order = torch.nonzero(free).flatten()

    tables = torch.full((config.batch_size, config.max_num_blocks), -1, dtype=torch.int32)
    cursor = 0
    for seq, n in enumerate(config.blocks_per_sequence):
        ids = order[cursor : cursor + n]
        cursor += n
        tables[seq, :n] = ids.to(torch.int32)
        owner[ids] = seq
    return tables, owner
