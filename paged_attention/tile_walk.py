"""The Triton helpers both decode kernels are made of: walk a sequence's blocks a
tile at a time with an online softmax, and merge partial results.

:func:`attend_tile` is one online-softmax step over a tile of tokens for a group
of query rows (scores from ``tl.dot``, running max and normalizer in base 2);
:func:`attend_blocks` walks a range of logical blocks of one block-table row a
tile at a time, the tile aligned with the paging
(:func:`~paged_attention.tiling.tile_shape`); :func:`merge_partials` merges the
split-K partials ``(max, sum, acc)`` of a group of query heads (flash-decoding);
:func:`normalize_output` divides by the softmax's denominator, an attention
sink's term included, wherever a row is finished; :func:`soft_cap_scores` caps
the logits. ``_paged_decode_kernel`` (:mod:`paged_attention.triton_decode`) and the
shared-prefix pass (:mod:`paged_attention.prefix_pass`) call them.
"""

from __future__ import annotations

import torch

from . import runtime  # first: sets TRITON_INTERPRET before triton loads
import triton
import triton.language as tl

#: ``log2(e)``: the kernels scale scores by ``scale * LOG2E`` and take ``exp2``.
LOG2E = 1.4426950408889634
#: The same, for ``@triton.jit`` code (which reads only ``tl.constexpr`` globals).
_LOG2E = tl.constexpr(LOG2E)


def fp32_dot(dtype: torch.dtype) -> bool:
    """Whether the kernels' dot products take float32 operands (IEEE precision),
    the ``FP32_DOT`` constexpr.

    Always for float32 inputs, so TF32 never rounds them. Also for bfloat16 under
    the interpreter, whose ``tl.dot`` mis-reads bfloat16 operands (Triton 3.9); on
    a GPU bfloat16 goes through the tensor cores like float16.
    """
    return dtype == torch.float32 or (runtime.TRITON_INTERPRET and dtype == torch.bfloat16)


@triton.jit
def soft_cap_scores(scores, soft_cap):
    """Logit soft-capping in the kernels' units: ``scores`` are ``s * log2(e)``
    for the scaled logits ``s``; returns ``soft_cap * tanh(s / soft_cap) * log2(e)``.

    ``tanh`` from one ``exp2`` of a non-positive argument, ``(1 - t) / (1 + t)``
    with ``t = exp(-2 |s| / soft_cap)``: no overflow, ``+-1`` for large ``|s|``,
    and the same code under the interpreter and compiled Triton (absolute error a
    few float32 ulps of 1).
    """
    t = tl.math.exp2(tl.abs(scores) * (-2.0 / soft_cap))
    magnitude = (1.0 - t) / (1.0 + t)
    return tl.where(scores < 0, -magnitude, magnitude) * (soft_cap * _LOG2E)


@triton.jit
def normalize_output(acc, m, l, sinks_ptr, heads, head_mask, HAS_SINKS: tl.constexpr):
    """A finished row: the unnormalised ``acc`` over the softmax's denominator.

    ``m`` (log2 units) and ``l`` are the row's running max and sum, shaped to
    broadcast against ``acc`` (``[rows, 1]`` for ``[rows, head_dim]``). With
    ``HAS_SINKS`` the denominator also holds ``exp(sinks[heads])``, the attention
    sink's term (its value is zero): ``acc * a / (l * a + exp2(sink - m'))`` with
    ``m' = max(m, sink)``, ``a = exp2(m - m')``, so nothing overflows and a row
    that saw no token (``m = -inf``, ``acc = 0``) is zero. Without, ``acc / l``
    (zero when ``l = 0``).
    """
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + heads, mask=head_mask, other=0.0) * _LOG2E
        m_new = tl.maximum(m, sink)
        alpha = tl.math.exp2(m - m_new)
        out = acc * alpha / (l * alpha + tl.math.exp2(sink - m_new))
    else:
        out = acc / tl.where(l > 0, l, 1.0)
    return out


@triton.jit
def attend_tile(
    q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, score_ok, dims, dim_mask, scale_log2e, soft_cap,
    stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd,
    EVEN_D: tl.constexpr, FP32_DOT: tl.constexpr, KV_FP8: tl.constexpr, SOFT_CAP: tl.constexpr,
):
    """One online-softmax step over a tile of tokens for a group of query heads.

    ``physical`` and ``slot`` locate each token of the tile (int64 block ids, so
    block * stride cannot overflow); ``valid`` masks the loads of tokens past the
    context or the block, ``score_ok`` the scores (``valid[None, :]``, or per row
    when the rows belong to sequences of different lengths or windows). With
    ``SOFT_CAP`` the scaled logits are capped at ``soft_cap``
    (:func:`soft_cap_scores`) before the mask. Returns the updated running max
    ``m_i`` (log2 units), normalizer ``l_i`` and unnormalised output ``acc``. An fp8 tile is widened to the query's dtype in
    registers (exact: every e4m3 and e5m2 value is a float16 and a bfloat16); its
    scales are applied by the caller.
    """
    if EVEN_D:
        kv_mask = valid[:, None]  # constant along head_dim: keeps 16-byte loads
    else:
        kv_mask = valid[:, None] & dim_mask[None, :]
    # Issue the V load next to the K load so both are in flight together.
    k = tl.load(k_head + (physical * stride_kb + slot * stride_ks)[:, None] + dims[None, :] * stride_kd,
                mask=kv_mask, other=0.0)
    v = tl.load(v_head + (physical * stride_vb + slot * stride_vs)[:, None] + dims[None, :] * stride_vd,
                mask=kv_mask, other=0.0)
    if KV_FP8:
        k = k.to(q.dtype)
        v = v.to(q.dtype)
    if FP32_DOT:
        scores = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
    else:
        scores = tl.dot(q, tl.trans(k))
    scores = scores * scale_log2e
    if SOFT_CAP:
        scores = soft_cap_scores(scores, soft_cap)
    scores = tl.where(score_ok, scores, float("-inf"))

    m_new = tl.maximum(m_i, tl.max(scores, 1))
    # Rows that have seen no valid token keep max -inf; shift by 0 so the
    # exponentials are exp2(-inf) = 0 rather than exp2(nan).
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.math.exp2(m_i - m_safe)
    p = tl.math.exp2(scores - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    if FP32_DOT:
        acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def attend_blocks(
    q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, table_row, first_block, last_block, context_len, row_lens,
    window_start, row_starts, scale_log2e, soft_cap, dims, dim_mask,
    stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, EVEN_D: tl.constexpr, FP32_DOT: tl.constexpr, KV_FP8: tl.constexpr,
    PER_ROW: tl.constexpr, HAS_WINDOW: tl.constexpr, SOFT_CAP: tl.constexpr,
):
    """Walk logical blocks ``[first_block, last_block)`` of one table row a tile at
    a time (:func:`attend_tile`) for one KV head.

    Loads stop at ``context_len`` tokens; with ``PER_ROW`` each query row's scores
    stop at its own length ``row_lens[row]`` too (the rows of a shared-prefix tile
    belong to sequences of different lengths). With ``HAS_WINDOW`` loads start at
    token ``window_start`` (the caller starts ``first_block`` at or past its
    block, so no table entry before it is read, and the subtiles of a large block
    that end before it are skipped) and, with ``PER_ROW``, each row's scores at
    its own ``row_starts[row]``. ``soft_cap`` is read with ``SOFT_CAP`` only.
    """
    k_head = k_ptr + kv_head.to(tl.int64) * stride_kh
    v_head = v_ptr + kv_head.to(tl.int64) * stride_vh
    # A tile is BLOCKS_PER_TILE blocks x SLOTS_PER_TILE slots of tokens, flattened.
    n = tl.arange(0, BLOCKS_PER_TILE * SLOTS_PER_TILE)
    tile_block = n // SLOTS_PER_TILE
    tile_slot = n % SLOTS_PER_TILE

    if BLOCKS_PER_TILE == 1:
        # Blocks at least as large as a tile: SUBTILES tiles walk each block, and the
        # block's table entry is one scalar load (an L1 hit after the first subtile).
        # One flat loop, not a nested one, so the software pipeliner sees a single
        # stream of K/V loads to prefetch.
        t_first = first_block * SUBTILES
        if HAS_WINDOW:
            t_first = tl.maximum(t_first, (window_start // BLOCK_SIZE) * SUBTILES
                                 + (window_start % BLOCK_SIZE) // SLOTS_PER_TILE)
        for t in range(t_first, last_block * SUBTILES):
            block = t // SUBTILES
            physical = tl.load(table_row + block).to(tl.int64)
            slot = (t % SUBTILES) * SLOTS_PER_TILE + tile_slot
            token = block * BLOCK_SIZE + slot
            valid = (slot < BLOCK_SIZE) & (token < context_len)
            if HAS_WINDOW:
                valid = valid & (token >= window_start)
            if PER_ROW:
                score_ok = valid[None, :] & (token[None, :] < row_lens[:, None])
                if HAS_WINDOW:
                    score_ok = score_ok & (token[None, :] >= row_starts[:, None])
            else:
                score_ok = valid[None, :]
            m_i, l_i, acc = attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, score_ok, dims, dim_mask, scale_log2e,
                soft_cap, stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd,
                EVEN_D, FP32_DOT, KV_FP8, SOFT_CAP,
            )
    else:
        # Small blocks: each tile holds BLOCKS_PER_TILE whole blocks. Lanes of one
        # block read the same table entry: one memory transaction per block,
        # broadcast to its SLOTS_PER_TILE lanes.
        for block in range(first_block, last_block, BLOCKS_PER_TILE):
            logical = block + tile_block
            block_ok = logical < last_block
            physical = tl.load(table_row + logical, mask=block_ok, other=0).to(tl.int64)
            token = logical * BLOCK_SIZE + tile_slot
            valid = block_ok & (tile_slot < BLOCK_SIZE) & (token < context_len)
            if HAS_WINDOW:
                valid = valid & (token >= window_start)
            if PER_ROW:
                score_ok = valid[None, :] & (token[None, :] < row_lens[:, None])
                if HAS_WINDOW:
                    score_ok = score_ok & (token[None, :] >= row_starts[:, None])
            else:
                score_ok = valid[None, :]
            m_i, l_i, acc = attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, tile_slot, valid, score_ok, dims, dim_mask,
                scale_log2e, soft_cap,
                stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd, EVEN_D, FP32_DOT, KV_FP8, SOFT_CAP,
            )
    return m_i, l_i, acc


@triton.jit
def merge_partials(
    out_ptr, stride_ot, stride_oh, stride_od, part_ml_ptr, part_acc_ptr, first_row, token_stride, split_stride,
    num_splits, num_tokens, sinks_ptr,
    QUERY_GROUP: tl.constexpr, MERGE_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr, MERGE_CHUNK: tl.constexpr, HAS_SINKS: tl.constexpr,
):
    """Merge the ``num_splits`` partial ``(max, sum, acc)`` of a group of query heads
    (for each of ``num_tokens`` query tokens) and store the group's output rows.

    Row ``r`` of the ``MERGE_ROWS`` (a power of two, at least ``num_tokens *
    QUERY_GROUP``) is head ``g = r % QUERY_GROUP`` of the group for query token
    ``t = r // QUERY_GROUP``. ``out_ptr`` points at the first token's first head's
    output row (token ``t`` is ``t * stride_ot`` further); ``first_row`` is the
    partial-buffer row of that head and token in the first slot (token ``t``, head
    ``g`` is ``t * token_stride + g`` rows further, each further slot
    ``split_stride`` rows further). ``MERGE_CHUNK`` slots are read at a time and
    folded in with the same rescaling as the online softmax. Loads bypass L1
    (``.cg``): other programs wrote the partials during this launch. With
    ``HAS_SINKS``, ``sinks_ptr`` points at the group's first head's sink, which
    joins the denominator once, here (:func:`normalize_output`).
    """
    r = tl.arange(0, MERGE_ROWS)
    t = r // QUERY_GROUP
    g = r % QUERY_GROUP
    g_ok = t < num_tokens
    rows = first_row + (t * token_stride + g).to(tl.int64)
    dims = tl.arange(0, HEAD_DIM_PAD)
    c = tl.arange(0, MERGE_CHUNK)
    m_run = tl.full([MERGE_ROWS], float("-inf"), tl.float32)
    total = tl.zeros([MERGE_ROWS], tl.float32)
    acc = tl.zeros([MERGE_ROWS, HEAD_DIM_PAD], tl.float32)
    for start in range(0, num_splits, MERGE_CHUNK):
        rr = rows[:, None] + (start + c).to(tl.int64)[None, :] * split_stride  # [MERGE_ROWS, MERGE_CHUNK]
        ok = g_ok[:, None] & ((start + c)[None, :] < num_splits)
        m_c = tl.load(part_ml_ptr + rr * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        l_c = tl.load(part_ml_ptr + rr * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        a = tl.load(part_acc_ptr + rr[:, :, None] * HEAD_DIM_PAD + dims[None, None, :],
                    mask=ok[:, :, None], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_run, tl.max(m_c, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m_run - m_safe)
        w = tl.math.exp2(m_c - m_safe[:, None])
        total = total * alpha + tl.sum(w * l_c, 1)
        acc = acc * alpha[:, None] + tl.sum(a * w[:, :, None], 1)
        m_run = m_new
    out = normalize_output(acc, m_run[:, None], total[:, None], sinks_ptr, g[:, None], g_ok[:, None], HAS_SINKS)
    tl.store(out_ptr + t[:, None].to(tl.int64) * stride_ot + g[:, None] * stride_oh + dims[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=g_ok[:, None] & (dims[None, :] < HEAD_DIM))
