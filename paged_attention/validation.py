"""Argument checks shared by every decode implementation.

Each implementation calls :func:`check_decode_args` before any kernel runs, so bad
input raises one clear ``ValueError`` naming the argument and the rule, whatever
implementation the caller chose.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import torch

from .tiling import cdiv

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX_DTYPES = (torch.int32, torch.int64)
#: 8-bit float KV-cache dtypes: the stored value times its scale is the value meant.
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


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
    kv_dtype: torch.dtype = torch.float16
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None
    window: int | None = None
    soft_cap: float | None = None
    sinks: torch.Tensor | None = None
    query_lens: torch.Tensor | None = None

    @property
    def is_fp8(self) -> bool:
        """True when the cache is stored in 8-bit floats (``k_scale``/``v_scale`` set)."""
        return self.kv_dtype in FP8_DTYPES

    @property
    def query_group_size(self) -> int:
        """Query heads per KV head (1 for MHA, ``num_heads`` for MQA)."""
        return self.num_heads // self.num_kv_heads

    @cached_property
    def max_context_len(self) -> int:
        """Longest context (0 for an empty batch); computed once."""
        return int(self.context_lens.max()) if self.batch_size else 0

    @cached_property
    def query_lens_or_ones(self) -> torch.Tensor:
        """``[batch_size]`` int64 on the CPU: each sequence's new (query) tokens,
        ones when ``query_lens`` was not given."""
        if self.query_lens is None:
            return torch.ones_like(self.context_lens)
        return self.query_lens

    @cached_property
    def max_query_len(self) -> int:
        """Most query tokens of one sequence (1 without ``query_lens``; 0 for an
        empty batch)."""
        return int(self.query_lens_or_ones.max()) if self.batch_size else 0

    @property
    def num_query_tokens(self) -> int:
        """Rows of the query and the output: ``sum(query_lens)`` (``batch_size``
        without ``query_lens``)."""
        return int(self.query_lens_or_ones.sum())

    @cached_property
    def query_starts(self) -> torch.Tensor:
        """``[batch_size + 1]`` int64 on the CPU: sequence ``b``'s query tokens are
        rows ``query_starts[b] ... query_starts[b + 1] - 1`` of the query."""
        return torch.cat([torch.zeros(1, dtype=torch.int64), self.query_lens_or_ones.cumsum(0)])

    @cached_property
    def window_starts(self) -> torch.Tensor:
        """``[batch_size]`` int64 on the CPU: each sequence's first attended
        position, that of its first query token's window,
        ``max(0, context_len - query_len + 1 - window)`` (0 without a window)."""
        if self.window is None:
            return torch.zeros_like(self.context_lens)
        return (self.context_lens - self.query_lens_or_ones + 1 - self.window).clamp_min(0)

    @cached_property
    def first_blocks(self) -> torch.Tensor:
        """``[batch_size]`` int64 on the CPU: each sequence's first needed logical
        block, the one holding its first attended position."""
        return self.window_starts // self.block_size

    @cached_property
    def attended_lens(self) -> torch.Tensor:
        """``[batch_size]`` int64 on the CPU: the positions a sequence's query
        tokens attend to together, ``context_len - window_start``
        (``min(context_len, window)`` for one query token)."""
        return self.context_lens - self.window_starts

    @property
    def has_options(self) -> bool:
        """True when a window, sinks or a soft-cap change the plain attention."""
        return self.window is not None or self.soft_cap is not None or self.sinks is not None

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
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
    allow_float64: bool = False,
) -> DecodeShape:
    """Validate the arguments of a decode step and return its sizes.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32; with
        ``query_lens``, ``[sum(query_lens), num_heads, head_dim]`` (sequence 0's
        query tokens first).
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]`` on the query's device,
        any strides. Either the query's dtype, or both ``torch.float8_e4m3fn`` or
        both ``torch.float8_e5m2`` (an fp8 cache, which needs ``k_scale`` and
        ``v_scale``).
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    scale : float, optional
        Softmax scale; ``1 / sqrt(head_dim)`` when ``None``.
    k_scale, v_scale : float or Tensor, optional
        Dequantization scales of an fp8 cache (the value of a stored element is
        ``stored * scale``): a positive finite number (one per tensor) or a float32
        tensor of shape ``[num_kv_heads]`` on the query's device (one per KV head).
        Required for an fp8 cache, refused for any other.
    window : int, optional
        Sliding-window attention: the query, at position ``context_len - 1``,
        attends to the last ``window`` positions,
        ``max(0, context_len - window) ... context_len - 1``; an integer >= 1.
        ``None`` (default): the whole context. Table entries before a window's
        first block are never read (an engine may have freed those blocks).
    sinks : Tensor, optional
        Attention sinks: float32 ``[num_heads]`` on the query's device, finite, one
        logit per query head that joins the softmax's denominator and attends to
        nothing, ``p_i = exp(s_i) / (exp(sinks[h]) + sum_j exp(s_j))`` (gpt-oss).
    soft_cap : float, optional
        Logit soft-capping: ``s <- soft_cap * tanh(s / soft_cap)`` on the scaled
        logits ``s = scale * q . k`` before the softmax (Gemma 2); finite, > 0.
    query_lens : Tensor, optional
        Several query tokens per sequence (draft tokens of speculative decoding,
        multi-token prediction): int32 or int64 ``[batch_size]`` on the query's
        device, ``1 <= query_lens[b] <= max(1, context_lens[b])``. The new tokens
        are already in the cache and counted in ``context_lens``: query token ``i``
        of sequence ``b`` sits at position ``p = context_lens[b] - query_lens[b] + i``
        and attends to positions ``0 ... p`` (causal among the new tokens; with a
        ``window``, ``max(0, p + 1 - window) ... p``). ``None`` (default): one
        query token per sequence, at ``context_lens[b] - 1``.
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
        finite and positive; an fp8 cache has both scales, each a positive finite
        number or a float32 ``[num_kv_heads]`` tensor of positive finite values on
        the query's device, and a cache of any other dtype has neither; ``window``
        is an integer >= 1 or None; ``sinks`` a finite float32 ``[num_heads]``
        tensor on the query's device or None; ``soft_cap`` a finite number > 0 or
        None; ``query_lens`` an integer ``[batch_size]`` tensor on the query's
        device with ``1 <= query_lens[b] <= max(1, context_lens[b])`` summing to the
        query's rows, or None.
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
        if t.dtype not in FP8_DTYPES and t.dtype != query.dtype:
            raise ValueError(
                f"{name} dtype ({t.dtype}) must match query dtype ({query.dtype}), "
                "or be float8_e4m3fn or float8_e5m2 with k_scale and v_scale"
            )
    if v_cache.dtype != k_cache.dtype:
        raise ValueError(f"k_cache and v_cache must share one dtype; got {k_cache.dtype} and {v_cache.dtype}")
    fp8 = k_cache.dtype in FP8_DTYPES
    for name, t in (("block_tables", block_tables), ("context_lens", context_lens)):
        if t.dtype not in INDEX_DTYPES:
            raise ValueError(f"{name} must be int32 or int64; got {t.dtype}")
    for name, t in zip(names[1:], tensors[1:]):
        if t.device != query.device:
            raise ValueError(
                f"{name} is on {t.device} but query is on {query.device}: all inputs must share one device"
            )

    num_query_tokens, num_heads, head_dim = query.shape
    batch_size = num_query_tokens if query_lens is None else context_lens.shape[0]
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
        source = "query has batch_size" if query_lens is None else "context_lens has batch_size"
        raise ValueError(f"block_tables has {block_tables.shape[0]} rows but {source} {batch_size}")
    if query_lens is None and context_lens.shape[0] != batch_size:
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

    k_scale = _check_kv_scale("k_scale", k_scale, fp8, k_cache.dtype, num_kv_heads, query.device)
    v_scale = _check_kv_scale("v_scale", v_scale, fp8, k_cache.dtype, num_kv_heads, query.device)

    window, soft_cap = check_window(window), check_soft_cap(soft_cap)
    sinks = _check_sinks(sinks, num_heads, query.device)

    lens = context_lens.detach().to("cpu", torch.int64)
    tables = block_tables.detach().to("cpu", torch.int64)
    if batch_size and int(lens.min()) < 0:
        seq = int(torch.argmin(lens))
        raise ValueError(f"context_lens must be non-negative; sequence {seq} has {int(lens[seq])}")
    q_lens = None if query_lens is None else _check_query_lens(query_lens, lens, num_query_tokens, query.device)
    max_num_blocks = tables.shape[1]
    needed = cdiv(lens, block_size)
    if batch_size and int(needed.max()) > max_num_blocks:
        seq = int(torch.argmax(needed))
        raise ValueError(
            f"context_lens[{seq}] = {int(lens[seq])} needs {int(needed[seq])} blocks of "
            f"block_size {block_size}, but block_tables holds only {max_num_blocks} per sequence"
        )
    ones = torch.ones_like(lens)
    first = ((lens - (ones if q_lens is None else q_lens) + 1 - window).clamp_min(0) // block_size
             if window is not None else torch.zeros_like(lens))
    cols = torch.arange(max_num_blocks)[None, :]
    used = (cols < needed[:, None]) & (cols >= first[:, None])
    bad = used & ((tables < 0) | (tables >= num_blocks))
    if bool(bad.any()):
        seq, col = (int(i) for i in torch.nonzero(bad)[0])
        needed_by = f"context_lens[{seq}] = {int(lens[seq])}" + ("" if window is None else f" with window {window}")
        raise ValueError(
            f"block_tables[{seq}, {col}] = {int(tables[seq, col])} is needed by {needed_by} "
            f"but must lie in [0, num_blocks={num_blocks})"
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
        kv_dtype=k_cache.dtype,
        k_scale=k_scale,
        v_scale=v_scale,
        window=window,
        soft_cap=soft_cap,
        sinks=sinks,
        query_lens=q_lens,
    )


def _check_query_lens(
    query_lens: object, lens: torch.Tensor, num_query_tokens: int, device: torch.device
) -> torch.Tensor:
    """``query_lens`` checked against the (CPU int64) context lengths and the
    query's rows, returned as a CPU int64 copy."""
    if not isinstance(query_lens, torch.Tensor):
        raise ValueError(f"query_lens must be an integer tensor of shape [batch_size] or None; "
                         f"got {type(query_lens).__name__}")
    if query_lens.dtype not in INDEX_DTYPES or tuple(query_lens.shape) != tuple(lens.shape):
        raise ValueError(f"query_lens must be int32 or int64 of shape [batch_size] = [{lens.shape[0]}]; "
                         f"got {query_lens.dtype} of shape {list(query_lens.shape)}")
    if query_lens.device != device:
        raise ValueError(f"query_lens is on {query_lens.device} but query is on {device}: "
                         "all inputs must share one device")
    q = query_lens.detach().to("cpu", torch.int64)
    bad = (q < 1) | (q > lens.clamp_min(1))
    if bool(bad.any()):
        seq = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"query_lens[{seq}] = {int(q[seq])} must lie in [1, max(1, context_lens[{seq}]) = "
            f"{max(1, int(lens[seq]))}]: the new tokens are counted in the context"
        )
    if int(q.sum()) != num_query_tokens:
        raise ValueError(f"query has {num_query_tokens} rows but query_lens adds up to {int(q.sum())}: "
                         "one row per query token, sequence 0's first")
    return q


def check_window(window: object) -> int | None:
    """``window`` (the positions each query attends to, ending at its own; None:
    all) as a Python int >= 1, or None.

    Raises
    ------
    ValueError
        If ``window`` is not an integer >= 1 (a bool is not) nor None.
    """
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(
            f"window must be an integer >= 1 (the positions each query attends to) or None; got {window!r}"
        )
    return int(window)


def check_soft_cap(soft_cap: object) -> float | None:
    """``soft_cap`` (logits become ``cap * tanh(s / cap)``; None: none) as a
    Python float, finite and > 0, or None.

    Raises
    ------
    ValueError
        If ``soft_cap`` is not a finite real number > 0 (a bool is not) nor None.
    """
    if soft_cap is None:
        return None
    if isinstance(soft_cap, bool) or not isinstance(soft_cap, numbers.Real) or not (
        math.isfinite(float(soft_cap)) and float(soft_cap) > 0
    ):
        raise ValueError(f"soft_cap must be a finite number > 0 or None; got {soft_cap!r}")
    return float(soft_cap)


def _check_sinks(sinks: object, num_heads: int, device: torch.device) -> torch.Tensor | None:
    """``sinks`` checked and returned as a float64 CPU copy, or None."""
    if sinks is None:
        return None
    if not isinstance(sinks, torch.Tensor):
        raise ValueError(f"sinks must be a float32 tensor of shape [num_heads] or None; got {type(sinks).__name__}")
    if sinks.dtype != torch.float32 or tuple(sinks.shape) != (num_heads,):
        raise ValueError(
            f"sinks must be float32 of shape [num_heads] = [{num_heads}]; got {sinks.dtype} of shape "
            f"{list(sinks.shape)}"
        )
    if sinks.device != device:
        raise ValueError(f"sinks is on {sinks.device} but query is on {device}: all inputs must share one device")
    host = sinks.detach().to("cpu", torch.float64)
    bad = ~torch.isfinite(host)
    if bool(bad.any()):
        head = int(torch.nonzero(bad)[0])
        raise ValueError(f"sinks must be finite; query head {head} has {float(host[head])}")
    return host


def _check_kv_scale(
    name: str, value: object, fp8: bool, kv_dtype: torch.dtype, num_kv_heads: int, device: torch.device
) -> torch.Tensor | None:
    """A dequantization scale checked and returned as a float64 CPU tensor of shape
    ``[num_kv_heads]`` (exact for a Python float and for float32 values), or None
    for a cache that is not fp8."""
    if not fp8:
        if value is not None:
            raise ValueError(
                f"{name} is only for an fp8 cache (float8_e4m3fn or float8_e5m2); this cache is {kv_dtype}"
            )
        return None
    if value is None:
        raise ValueError(
            f"the cache is {kv_dtype}: pass k_scale and v_scale (stored value * scale = value), "
            "each a positive number or a float32 tensor of shape [num_kv_heads]"
        )
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.float32 or tuple(value.shape) != (num_kv_heads,):
            raise ValueError(
                f"{name} as a tensor must be float32 of shape [num_kv_heads] = [{num_kv_heads}]; "
                f"got {value.dtype} of shape {list(value.shape)}"
            )
        if value.device != device:
            raise ValueError(f"{name} is on {value.device} but query is on {device}: all inputs must share one device")
        host = value.detach().to("cpu", torch.float64)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        host = torch.full((num_kv_heads,), float(value), dtype=torch.float64)
    else:
        raise ValueError(f"{name} must be a positive finite number or a float32 tensor; got {type(value).__name__}")
    bad = ~(torch.isfinite(host) & (host > 0))
    if bool(bad.any()):
        head = int(torch.nonzero(bad)[0])
        raise ValueError(f"{name} must be positive and finite; KV head {head} has {float(host[head])}")
    return host



def kv_scale_tensors(
    shape: DecodeShape, k_scale: float | torch.Tensor | None, v_scale: float | torch.Tensor | None,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
    """Checked dequantization scales as the kernels take them.

    Parameters
    ----------
    shape : DecodeShape
        From :func:`check_decode_args`, which accepted ``k_scale`` and ``v_scale``.
    k_scale, v_scale : float or Tensor or None
        As given to :func:`check_decode_args`.
    device : torch.device
        The query's device.

    Returns
    -------
    (Tensor, Tensor) or (None, None)
        float32 ``[num_kv_heads]`` tensors on ``device`` for an fp8 cache, else
        ``(None, None)``. A contiguous tensor is returned as given, so refilling it
        in place changes what a prepared launcher (or a CUDA graph replay) reads.
    """
    if not shape.is_fp8:
        return None, None

    def as_tensor(value: float | torch.Tensor) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.contiguous()
        return torch.full((shape.num_kv_heads,), float(value), dtype=torch.float32, device=device)

    return as_tensor(k_scale), as_tensor(v_scale)
