"""The textbook Triton paged-attention decode, kept as the baseline of :mod:`.triton_decode`.

``_paged_decode_simple_kernel`` runs one program per (sequence, query head) and looks
up the block table once per token. Each query head re-reads its KV head, and a long
context with a small batch leaves most SMs idle: what the grouped, split kernel of
:func:`~paged_attention.triton_decode.triton_decode` fixes. The app and the
benchmarks show the two side by side.
"""

from __future__ import annotations

from typing import Callable

import torch

from . import runtime  # first: sets TRITON_INTERPRET before triton loads
import triton
import triton.language as tl

from .tile_walk import LOG2E, normalize_output, soft_cap_scores
from .tiling import next_pow2
from .validation import check_decode_args, kv_scale_tensors


@triton.jit
def _paged_decode_simple_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr, k_scale_ptr, v_scale_ptr, sinks_ptr,
    token_seqs_ptr, scale_log2e, soft_cap, window,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    stride_ob, stride_oh, stride_od,
    QUERY_GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, KV_FP8: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFT_CAP: tl.constexpr, HAS_SINKS: tl.constexpr, MULTI_QUERY: tl.constexpr,
):
    """Baseline: one program per (query token, query head), a table lookup per token.

    With ``MULTI_QUERY`` (several query tokens per sequence) program row ``r``
    reads sequence ``token_seqs[r]``'s table row, and ``context_lens_ptr`` holds
    each query token's own length (the positions it sees, causal among the new
    tokens). With ``HAS_WINDOW`` the walk starts at the window's first position (so no table
    entry before it is read), ``SOFT_CAP`` caps the logits, ``HAS_SINKS`` adds
    the head's sink to the denominator (:func:`~paged_attention.tile_walk.normalize_output`).
    """
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    kv_head = (head // QUERY_GROUP).to(tl.int64)
    if MULTI_QUERY:
        seq = tl.load(token_seqs_ptr + row).to(tl.int64)
    else:
        seq = row
    context_len = tl.load(context_lens_ptr + row)

    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_mask = dims < HEAD_DIM
    q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims * stride_qd, mask=dim_mask, other=0.0)
    q = q.to(tl.float32) * scale_log2e
    if KV_FP8:  # an fp8 cache: K's scale folds into the query, V's into the output
        q = q * tl.load(k_scale_ptr + kv_head)

    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], tl.float32)
    offs = tl.arange(0, BLOCK_N)
    if HAS_WINDOW:
        window_start = tl.maximum(context_len - window, 0)
    else:
        window_start = 0
    for start in range(window_start, context_len, BLOCK_N):
        token = start + offs
        valid = token < context_len
        physical = tl.load(block_tables_ptr + seq * stride_tb + token // BLOCK_SIZE, mask=valid, other=0)
        physical = physical.to(tl.int64)
        slot = token % BLOCK_SIZE
        mask = valid[:, None] & dim_mask[None, :]
        k = tl.load(
            k_ptr + physical[:, None] * stride_kb + slot[:, None] * stride_ks
            + kv_head * stride_kh + dims[None, :] * stride_kd,
            mask=mask, other=0.0,
        )
        scores = tl.sum(k.to(tl.float32) * q[None, :], 1)
        if SOFT_CAP:
            scores = soft_cap_scores(scores, soft_cap)
        scores = tl.where(valid, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 0))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(scores - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        v = tl.load(
            v_ptr + physical[:, None] * stride_vb + slot[:, None] * stride_vs
            + kv_head * stride_vh + dims[None, :] * stride_vd,
            mask=mask, other=0.0,
        )
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        m_i = m_new
    if KV_FP8:
        acc = acc * tl.load(v_scale_ptr + kv_head)
    out = normalize_output(acc, m_i, l_i, sinks_ptr, head, head >= 0, HAS_SINKS)
    tl.store(out_ptr + row * stride_ob + head * stride_oh + dims * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=dim_mask)



# -- wrappers ------------------------------------------------------------------

def triton_decode_simple(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Baseline Triton decode: grid ``(batch_size, num_heads)``, a lookup per token
    (``(sum(query_lens), num_heads)`` with ``query_lens``: each query token re-reads
    its context too).

    Each query head re-reads its KV head, so under GQA the cache is read
    ``num_heads / num_kv_heads`` times; with one program per (sequence, head) a
    long context with a small batch leaves most SMs idle. Kept to show, next to
    :func:`~paged_attention.triton_decode.triton_decode`, what grouping and split-K
    buy.

    Parameters, returns and raised errors are those of
    :func:`~paged_attention.triton_decode.triton_decode` (accumulation is float32).
    """
    return prepare_triton_decode_simple(
        query, k_cache, v_cache, block_tables, context_lens, scale=scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens,
    )()


def prepare_triton_decode_simple(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
) -> Callable[[], torch.Tensor]:
    """Validate once, allocate the output, and return a launcher.

    Parameters are those of :func:`triton_decode_simple`; ``sinks`` is read at
    every launch (a refill in place changes the next); ``query_lens`` is read
    here (each query token's sequence and length are copied to the device once).

    Returns
    -------
    callable
        ``launch() -> Tensor`` of the query's shape, the
        same tensor on every call; no host synchronisation, so a CUDA graph can
        capture it.

    Raises
    ------
    ValueError
        On invalid arguments, before anything is launched.
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens,
    )
    runtime.check_triton_device(query.device)
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    rows, num_heads, head_dim = query.shape
    out = torch.empty_like(query)
    if rows == 0:
        return lambda: out
    multi = shape.query_lens is not None
    token_seqs = context_lens  # unread with one query token per sequence
    if multi:  # each query token's sequence, and its length as its context
        q_lens = shape.query_lens
        token_seqs = torch.repeat_interleave(torch.arange(shape.batch_size), q_lens)
        first = torch.repeat_interleave(shape.query_starts[:-1], q_lens)
        ends = (shape.context_lens - q_lens)[token_seqs] + 1 + torch.arange(rows) - first
        token_seqs, context_lens = (t.to(torch.int32).to(query.device) for t in (token_seqs, ends))
    head_dim_pad = next_pow2(head_dim)
    block_n = 64 if head_dim_pad <= 128 else 32
    scale_log2e = shape.scale * LOG2E
    k_scales, v_scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    if k_scales is None:
        k_scales = v_scales = context_lens  # unused: not an fp8 cache
    sink_logits = context_lens if shape.sinks is None else sinks.contiguous()  # unread without sinks
    cap = 0.0 if shape.soft_cap is None else shape.soft_cap
    window_len = 0 if shape.window is None else shape.window

    def launch() -> torch.Tensor:
        _paged_decode_simple_kernel[(rows, num_heads)](
            out, query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales, sink_logits,
            token_seqs, scale_log2e, cap, window_len,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            QUERY_GROUP=shape.query_group_size,
            HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
            BLOCK_SIZE=shape.block_size, BLOCK_N=block_n, KV_FP8=shape.is_fp8,
            HAS_WINDOW=shape.window is not None, SOFT_CAP=shape.soft_cap is not None,
            HAS_SINKS=shape.sinks is not None, MULTI_QUERY=multi,
            num_warps=4,
        )
        return out

    return launch
