"""Argument checks shared by every decode implementation.

Each implementation calls :func:`check_decode_args` before any kernel runs, so bad
input raises one clear ``ValueError`` naming the argument and the rule, whatever
implementation the caller chose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass(frozen=True)
class DecodeShape:
    """Sizes read off validated decode arguments.

    ``context_lens`` and ``block_tables`` are CPU copies: the launch heuristics
    need the longest context on the host, and the check needed them anyway.
    """

    batch_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    max_num_blocks: int
    scale: float
    context_lens: torch.Tensor
    block_tables: torch.Tensor

    @property
    def query_group_size(self) -> int:
        """Query heads per KV head (1 for MHA, ``num_heads`` for MQA)."""
        return self.num_heads // self.num_kv_heads

    @cached_property
    def max_context_len(self) -> int:
        """Longest context (0 for an empty batch); computed once."""
        return int(self.context_lens.max()) if self.batch_size else 0

    @cached_property
    def min_context_len(self) -> int:
        """Shortest context (0 for an empty batch); computed once."""
        return int(self.context_lens.min()) if self.batch_size else 0


def check_decode_args(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float | None = None,
    *,
    allow_float64: bool = False,
) -> DecodeShape:
    """Validate the arguments of a decode step and return its sizes.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, same dtype and device as
        ``query``. Any strides are accepted.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    scale : float, optional
        Softmax scale; ``1 / sqrt(head_dim)`` when ``None``.
    allow_float64 : bool
        Accept float64 tensors (the reference does; kernels do not).

    Returns
    -------
    DecodeShape

    Raises
    ------
    ValueError
        If any of these rules is broken: tensors are ``torch.Tensor`` with the ranks
        above; ``query``, ``k_cache`` and ``v_cache`` share dtype and device with
        ``block_tables`` and ``context_lens``; ``k_cache`` and ``v_cache`` have the
        same shape; head_dim matches; num_heads is a multiple of num_kv_heads; the
        batch sizes agree; lengths are non-negative and fit the block table; every
        block-table entry a context needs lies in ``[0, num_blocks)``; scale is
        finite and positive.
    """
    names = ("query", "k_cache", "v_cache", "block_tables", "context_lens")
    tensors = (query, k_cache, v_cache, block_tables, context_lens)
    for name, t in zip(names, tensors):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    for name, t, rank, layout in (
        ("query", query, 3, "[batch_size, num_heads, head_dim]"),
        ("k_cache", k_cache, 4, "[num_blocks, block_size, num_kv_heads, head_dim]"),
        ("v_cache", v_cache, 4, "[num_blocks, block_size, num_kv_heads, head_dim]"),
        ("block_tables", block_tables, 2, "[batch_size, max_num_blocks]"),
        ("context_lens", context_lens, 1, "[batch_size]"),
    ):
        if t.dim() != rank:
            raise ValueError(f"{name} must have shape {layout}; got {tuple(t.shape)}")

    allowed = FLOAT_DTYPES if allow_float64 else FLOAT_DTYPES[:3]
    if query.dtype not in allowed:
        raise ValueError(
            f"query dtype must be one of {', '.join(str(d) for d in allowed)}; got {query.dtype}"
        )
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype != query.dtype:
            raise ValueError(f"{name} dtype ({t.dtype}) must match query dtype ({query.dtype})")
    for name, t in (("block_tables", block_tables), ("context_lens", context_lens)):
        if t.dtype not in INDEX_DTYPES:
            raise ValueError(f"{name} must be int32 or int64; got {t.dtype}")
    for name, t in zip(names[1:], tensors[1:]):
        if t.device != query.device:
            raise ValueError(
                f"{name} is on {t.device} but query is on {query.device}: all inputs must share one device"
            )

    batch_size, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, kv_head_dim = k_cache.shape
    if v_cache.shape != k_cache.shape:
        raise ValueError(
            f"v_cache shape {tuple(v_cache.shape)} must equal k_cache shape {tuple(k_cache.shape)}"
        )
    if kv_head_dim != head_dim:
        raise ValueError(f"k_cache head_dim ({kv_head_dim}) must equal query head_dim ({head_dim})")
    if min(num_heads, head_dim, block_size, num_kv_heads) < 1:
        raise ValueError(
            "num_heads, head_dim, block_size and num_kv_heads must all be at least 1; got "
            f"{num_heads}, {head_dim}, {block_size}, {num_kv_heads}"
        )
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
        )
    if block_tables.shape[0] != batch_size:
        raise ValueError(
            f"block_tables has {block_tables.shape[0]} rows but query has batch_size {batch_size}"
        )
    if context_lens.shape[0] != batch_size:
        raise ValueError(
            f"context_lens has {context_lens.shape[0]} entries but query has batch_size {batch_size}"
        )

    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise ValueError(f"scale must be a finite positive number; got {scale!r}") from None
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a finite positive number; got {scale}")

    lens = context_lens.detach().to("cpu", torch.int64)
    tables = block_tables.detach().to("cpu", torch.int64)
    if batch_size and int(lens.min()) < 0:
        seq = int(torch.argmin(lens))
        raise ValueError(f"context_lens must be non-negative; sequence {seq} has {int(lens[seq])}")
    max_num_blocks = tables.shape[1]
    needed = (lens + block_size - 1) // block_size
    if batch_size and int(needed.max()) > max_num_blocks:
        seq = int(torch.argmax(needed))
        raise ValueError(
            f"context_lens[{seq}] = {int(lens[seq])} needs {int(needed[seq])} blocks of "
            f"block_size {block_size}, but block_tables holds only {max_num_blocks} per sequence"
        )
    used = torch.arange(max_num_blocks)[None, :] < needed[:, None]
    bad = used & ((tables < 0) | (tables >= num_blocks))
    if bool(bad.any()):
        seq, col = (int(i) for i in torch.nonzero(bad)[0])
        raise ValueError(
            f"block_tables[{seq}, {col}] = {int(tables[seq, col])} is needed by context_lens[{seq}] = "
            f"{int(lens[seq])} but must lie in [0, num_blocks={num_blocks})"
        )
    return DecodeShape(
        batch_size=batch_size,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        num_blocks=num_blocks,
        block_size=block_size,
        max_num_blocks=max_num_blocks,
        scale=scale,
        context_lens=lens,
        block_tables=tables,
    )
