"""The arithmetic of tiles and pieces that the launch plans share.

:func:`tile_shape` lays a tile of ``BLOCK_N`` tokens over the paging (whole blocks,
or a slice of one block) for the decode kernel's plan and the prefix pass's;
:func:`even_cut` cuts a run of blocks into about equal pieces of whole tiles, as
both the balanced plan and the prefix pass do. :func:`cdiv` and :func:`next_pow2`
are the two roundings everything here is made of. Plain Python: nothing here
launches a kernel.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import torch

Count = TypeVar("Count", int, torch.Tensor)


def cdiv(a: Count, b: int) -> Count:
    """``ceil(a / b)`` in integers, as ``triton.cdiv`` (and ``tl.cdiv`` in a kernel).

    Parameters
    ----------
    a : int or Tensor
        A non-negative count, or an integer tensor of them (element-wise).
    b : int
        A positive divisor.

    Returns
    -------
    int or Tensor
        Of ``a``'s type.

    Examples
    --------
    >>> cdiv(300, 16)
    19
    """
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two at least ``n`` (1 for ``n <= 1``).

    Examples
    --------
    >>> next_pow2(24), next_pow2(32), next_pow2(0)
    (32, 32, 1)
    """
    return 1 << max(0, int(n) - 1).bit_length()


def dot_pad(n: int) -> int:
    """``n`` padded to an extent ``tl.dot`` takes: a power of two, at least 16.

    The kernels pad ``head_dim`` and the query rows of a tile this way.
    """
    return max(16, next_pow2(n))


class TileShape(NamedTuple):
    """A tile of ``block_n`` lanes over the paging.

    Attributes
    ----------
    blocks_per_tile : int
        Physical blocks in one tile (1 when a block is at least a tile).
    slots_per_tile : int
        Lanes per block in the tile: the block size rounded up to a power of two,
        or ``block_n`` when a block is larger than a tile.
    subtiles : int
        Tiles that walk one block (1 unless a block is larger than a tile).
    """

    blocks_per_tile: int
    slots_per_tile: int
    subtiles: int


def tile_shape(block_n: int, block_size: int) -> TileShape:
    """Lay a tile of ``block_n`` tokens over blocks of ``block_size`` tokens.

    The tile is aligned with the paging, so each block-table entry is loaded once
    per block: ``block_n // P`` whole blocks of ``P = next_pow2(block_size)`` slots
    (the slots past ``block_size`` masked), or, when a block is larger than the
    tile, ``P // block_n`` tiles per block.

    Parameters
    ----------
    block_n : int
        Lanes per tile, a power of two.
    block_size : int
        Tokens per physical block.

    Returns
    -------
    TileShape

    Examples
    --------
    >>> tile_shape(64, 12)  # 4 blocks of 12 tokens in 16 slots each
    TileShape(blocks_per_tile=4, slots_per_tile=16, subtiles=1)
    >>> tile_shape(64, 256)  # 4 tiles walk one block
    TileShape(blocks_per_tile=1, slots_per_tile=64, subtiles=4)
    """
    padded = next_pow2(block_size)
    if padded <= block_n:
        return TileShape(block_n // padded, padded, 1)
    return TileShape(1, block_n, padded // block_n)


def even_cut(first: int, stop: int, cap: int, unit: int = 1) -> list[tuple[int, int]]:
    """Cut blocks ``[first, stop)`` into as few pieces of at most ``cap`` blocks as
    it takes, of about equal length, every piece but the last a whole multiple of
    ``unit`` blocks (one tile).

    Parameters
    ----------
    first, stop : int
        The run of logical blocks.
    cap : int
        Most blocks in a piece; a multiple of ``unit`` (else a piece may exceed it by
        the rounding to ``unit``).
    unit : int
        Blocks per tile.

    Returns
    -------
    list of (int, int)
        The pieces ``[start, end)`` in order; empty when ``stop <= first``.

    Examples
    --------
    >>> even_cut(0, 9, 4)  # 3 pieces of 3 blocks, not 4 + 4 + 1
    [(0, 3), (3, 6), (6, 9)]
    >>> even_cut(0, 9, 8, unit=2)  # 2 pieces of 5 blocks, rounded up to whole tiles of 2
    [(0, 6), (6, 9)]
    """
    blocks = stop - first
    if blocks <= 0:
        return []
    per = cdiv(blocks, cdiv(blocks, cap))
    per = cdiv(per, unit) * unit
    return [(start, min(start + per, stop)) for start in range(first, stop, per)]
