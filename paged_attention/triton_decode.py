"""Triton paged-attention decode: kernels and the wrappers that launch them.

Two kernels live here.

``_paged_decode_kernel`` (the default, ``triton_decode``) runs one program per
(sequence, KV head, split). The program serves every query head of its GQA group,
so each K/V byte is read from memory once, not once per query head. It walks its
share of the context one tile of ``BLOCK_N`` tokens at a time; a tile is aligned
with the paging (whole blocks when ``block_size <= BLOCK_N``, a slice of one block
otherwise), so each block-table entry is loaded once per block. Scores come from
``tl.dot`` on the ``[group, head_dim] x [head_dim, BLOCK_N]`` tile and feed an
online softmax (running max and normalizer). When the batch and KV heads are too
few to fill the GPU, the context is split across programs (split-K, known as
flash-decoding); each split writes its partial ``(max, sum, acc)`` and the last
split of each (sequence, KV head) to finish, found with an atomic arrival
counter, merges them (``_merge_group``), so no second kernel is launched.
``_merge_splits_kernel`` is that merge as a separate kernel, kept as the
baseline (``fused_merge=False``).

``_paged_decode_simple_kernel`` (``triton_decode_simple``) is the textbook
baseline: one program per (sequence, query head), one block-table lookup per
token. It is kept so the app can show what the grouped, split kernel buys.

The launch plan (tile size, split count, launch options) is chosen in
:mod:`paged_attention.launch_plan`; the wrappers here validate, allocate and launch.

References
----------
Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP 2023. Milakov & Gimelshein, "Online normalizer calculation
for softmax", 2018. Dao et al., "Flash-Decoding for long-context inference", 2023.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from . import runtime  # first: sets TRITON_INTERPRET before triton loads
import triton
import triton.language as tl

from .launch_plan import (  # noqa: F401  (LaunchPlan, plan_launch: part of this module's API)
    FUSED_MERGE_VALUES, LaunchPlan, _check_plan_fits, _fp32_dot, _next_pow2, plan_launch,
)
from .validation import check_decode_args

LOG2E = 1.4426950408889634


@triton.jit
def _attend_tile(
    q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, dims, dim_mask, scale_log2e,
    stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd,
    EVEN_D: tl.constexpr, FP32_DOT: tl.constexpr,
):
    """One online-softmax step over a tile of tokens for a group of query heads.

    ``physical`` and ``slot`` locate each token of the tile (int64 block ids, so
    block * stride cannot overflow); ``valid`` masks tokens past the context or the
    block. Returns the updated running max ``m_i`` (log2 units), normalizer ``l_i``
    and unnormalised output ``acc``.
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
    if FP32_DOT:
        scores = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
    else:
        scores = tl.dot(q, tl.trans(k))
    scores = tl.where(valid[None, :], scores * scale_log2e, float("-inf"))

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
def _paged_decode_kernel(
    out_ptr, part_ml_ptr, part_acc_ptr, counter_ptr, timeline_ptr,
    q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr,
    scale_log2e,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    stride_ob, stride_oh, stride_od,
    blocks_per_split, max_splits,
    QUERY_GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, SPLIT: tl.constexpr, FP32_DOT: tl.constexpr, EVEN_D: tl.constexpr,
    FUSED_MERGE: tl.constexpr, GROUP_POW2: tl.constexpr, MERGE_CHUNK: tl.constexpr,
    KV_HEADS_FIRST: tl.constexpr, TIMELINE: tl.constexpr,
):
    if TIMELINE:
        t_start = _globaltimer()
    if KV_HEADS_FIRST:
        # The KV heads of one (sequence, split) launch next to each other, so the
        # programs reading the same blocks (each a slice of every token row) run
        # in step.
        kv_head = tl.program_id(0)
        split = tl.program_id(1)
        num_kv_heads = tl.num_programs(0)
    else:
        split = tl.program_id(0)
        kv_head = tl.program_id(1)
        num_kv_heads = tl.num_programs(1)
    seq = tl.program_id(2).to(tl.int64)

    context_len = tl.load(context_lens_ptr + seq)
    needed_blocks = tl.cdiv(context_len, BLOCK_SIZE)
    first_block = split * blocks_per_split
    if SPLIT:
        if FUSED_MERGE:
            # Split 0 always runs, so an empty row still gets its zeros written.
            if split > 0 and first_block >= needed_blocks:
                return  # past the context: not counted in this row's active splits
        elif first_block >= needed_blocks:
            return  # this split lies past the context; the merge never reads it
    last_block = tl.minimum(first_block + blocks_per_split, needed_blocks)

    group = tl.arange(0, GROUP_PAD)
    heads = kv_head * QUERY_GROUP + group
    group_mask = group < QUERY_GROUP
    dims = tl.arange(0, HEAD_DIM_PAD)
    if EVEN_D:
        dim_mask = dims < HEAD_DIM_PAD  # all true; keeps every mask constant along head_dim
    else:
        dim_mask = dims < HEAD_DIM
    q = tl.load(
        q_ptr + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :] * stride_qd,
        mask=group_mask[:, None] & dim_mask[None, :],
        other=0.0,
    )

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM_PAD], tl.float32)

    table_row = block_tables_ptr + seq * stride_tb
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
        for t in range(first_block * SUBTILES, last_block * SUBTILES):
            block = t // SUBTILES
            physical = tl.load(table_row + block).to(tl.int64)
            slot = (t % SUBTILES) * SLOTS_PER_TILE + tile_slot
            valid = (slot < BLOCK_SIZE) & (block * BLOCK_SIZE + slot < context_len)
            m_i, l_i, acc = _attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, dims, dim_mask, scale_log2e,
                stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd, EVEN_D, FP32_DOT,
            )
    else:
        # Small blocks: each tile holds BLOCKS_PER_TILE whole blocks. Lanes of one
        # block read the same table entry: one memory transaction per block,
        # broadcast to its SLOTS_PER_TILE lanes.
        for block in range(first_block, last_block, BLOCKS_PER_TILE):
            logical = block + tile_block
            block_ok = logical < last_block
            physical = tl.load(table_row + logical, mask=block_ok, other=0).to(tl.int64)
            valid = block_ok & (tile_slot < BLOCK_SIZE) & (logical * BLOCK_SIZE + tile_slot < context_len)
            m_i, l_i, acc = _attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, tile_slot, valid, dims, dim_mask, scale_log2e,
                stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd, EVEN_D, FP32_DOT,
            )

    if TIMELINE:
        t_loop = _globaltimer()
    out_rows = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + dims[None, :] * stride_od
    out_mask = group_mask[:, None] & dim_mask[None, :]
    # Splits of this row that hold at least one block (the others returned above).
    # A context longer than the plan covers is cut at max_splits: without the cap
    # the last split would wait for splits that do not exist, and no one would merge.
    active = tl.minimum(tl.maximum(tl.cdiv(needed_blocks, blocks_per_split), 1), max_splits)
    if SPLIT and (not FUSED_MERGE or active > 1):
        # Partial results: part_ml[seq, head, split, 0:2] = (max, sum) in log2 units,
        # part_acc[seq, head, split, :] = unnormalised weighted sum of V.
        base = (seq * (QUERY_GROUP * num_kv_heads) + heads) * max_splits + split
        tl.store(part_ml_ptr + base * 2, m_i, mask=group_mask)
        tl.store(part_ml_ptr + base * 2 + 1, l_i, mask=group_mask)
        tl.store(part_acc_ptr + base[:, None] * HEAD_DIM_PAD + dims[None, :], acc, mask=out_mask)
        if FUSED_MERGE:
            # The last split of this (sequence, KV head) to finish merges all of them,
            # so no second kernel is launched. The barrier orders every thread's
            # stores before the counter's release; the acquire orders the counter
            # before the loads of the other splits' partials (read through L2).
            tl.debug_barrier()
            counter = counter_ptr + seq * num_kv_heads + kv_head
            finished = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if finished == active - 1:
                tl.debug_barrier()
                _merge_group(
                    out_ptr + seq * stride_ob + (kv_head * QUERY_GROUP) * stride_oh, stride_oh, stride_od,
                    part_ml_ptr, part_acc_ptr, (seq * (QUERY_GROUP * num_kv_heads) + kv_head * QUERY_GROUP) * max_splits,
                    max_splits, active,
                    QUERY_GROUP, GROUP_POW2, HEAD_DIM, HEAD_DIM_PAD, MERGE_CHUNK,
                )
                tl.atomic_xchg(counter, 0)  # ready for the next launch (and graph replay)
    else:
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=out_mask)
    if TIMELINE:
        # Benchmarks only (benchmarks/timeline.py): start, end of the tile loop, end,
        # and the SM, per program, in launch order.
        pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
        record = timeline_ptr + pid.to(tl.int64) * 4
        tl.store(record, t_start)
        tl.store(record + 1, t_loop)
        tl.store(record + 2, _globaltimer())
        tl.store(record + 3, _smid().to(tl.int64))


@triton.jit
def _globaltimer():
    """Nanoseconds of the GPU's global timer (compiled GPU code only)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid():
    """The SM this program runs on (compiled GPU code only)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _merge_group(
    out_ptr, stride_oh, stride_od, part_ml_ptr, part_acc_ptr, first_row, max_splits, num_splits,
    QUERY_GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr, MERGE_CHUNK: tl.constexpr,
):
    """Merge the ``num_splits`` partial ``(max, sum, acc)`` of a group of query heads
    and store the group's output rows.

    ``out_ptr`` points at the group's first output row; ``first_row`` is the
    partial-buffer row of the group's first head at split 0 (head ``g`` of the group
    is ``g * max_splits`` rows further). ``MERGE_CHUNK`` splits are read at a time and
    folded in with the same rescaling as the online softmax. Loads bypass L1
    (``.cg``): other programs wrote the partials during this launch.
    """
    g = tl.arange(0, GROUP_POW2)
    g_ok = g < QUERY_GROUP
    rows = first_row + g.to(tl.int64) * max_splits
    dims = tl.arange(0, HEAD_DIM_PAD)
    c = tl.arange(0, MERGE_CHUNK)
    m_run = tl.full([GROUP_POW2], float("-inf"), tl.float32)
    total = tl.zeros([GROUP_POW2], tl.float32)
    acc = tl.zeros([GROUP_POW2, HEAD_DIM_PAD], tl.float32)
    for start in range(0, num_splits, MERGE_CHUNK):
        r = rows[:, None] + (start + c)[None, :]  # [GROUP_POW2, MERGE_CHUNK]
        ok = g_ok[:, None] & ((start + c)[None, :] < num_splits)
        m_c = tl.load(part_ml_ptr + r * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        l_c = tl.load(part_ml_ptr + r * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        a = tl.load(part_acc_ptr + r[:, :, None] * HEAD_DIM_PAD + dims[None, None, :],
                    mask=ok[:, :, None], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_run, tl.max(m_c, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m_run - m_safe)
        w = tl.math.exp2(m_c - m_safe[:, None])
        total = total * alpha + tl.sum(w * l_c, 1)
        acc = acc * alpha[:, None] + tl.sum(a * w[:, :, None], 1)
        m_run = m_new
    out = acc / tl.where(total > 0, total, 1.0)[:, None]
    tl.store(out_ptr + g[:, None] * stride_oh + dims[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=g_ok[:, None] & (dims[None, :] < HEAD_DIM))


@triton.jit
def _merge_splits_kernel(
    out_ptr, part_ml_ptr, part_acc_ptr, context_lens_ptr,
    stride_ob, stride_oh, stride_od,
    tokens_per_split, max_splits,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    SPLITS_PAD: tl.constexpr, MERGE_CHUNK: tl.constexpr,
):
    """Combine the partial (max, sum, acc) of each split into the output row."""
    head = tl.program_id(0)
    seq = tl.program_id(1).to(tl.int64)
    num_heads = tl.num_programs(0)
    context_len = tl.load(context_lens_ptr + seq)
    num_splits = tl.minimum(tl.cdiv(context_len, tokens_per_split), max_splits)  # a longer context is cut short
    base = (seq * num_heads + head) * max_splits

    splits = tl.arange(0, SPLITS_PAD)
    split_ok = splits < num_splits
    m = tl.load(part_ml_ptr + (base + splits) * 2, mask=split_ok, other=float("-inf"))
    m_max = tl.max(m, 0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)

    dims = tl.arange(0, HEAD_DIM_PAD)
    chunk = tl.arange(0, MERGE_CHUNK)
    acc = tl.zeros([HEAD_DIM_PAD], tl.float32)
    total = tl.zeros([MERGE_CHUNK], tl.float32)
    for start in range(0, num_splits, MERGE_CHUNK):
        idx = start + chunk
        ok = idx < num_splits
        m_c = tl.load(part_ml_ptr + (base + idx) * 2, mask=ok, other=float("-inf"))
        l_c = tl.load(part_ml_ptr + (base + idx) * 2 + 1, mask=ok, other=0.0)
        w = tl.math.exp2(m_c - m_max)
        total += w * l_c
        a = tl.load(part_acc_ptr + (base + idx)[:, None] * HEAD_DIM_PAD + dims[None, :], mask=ok[:, None], other=0.0)
        acc += tl.sum(a * w[:, None], 0)
    l_sum = tl.sum(total, 0)
    out = acc / tl.where(l_sum > 0, l_sum, 1.0)
    tl.store(
        out_ptr + seq * stride_ob + head * stride_oh + dims * stride_od,
        out.to(out_ptr.dtype.element_ty),
        mask=dims < HEAD_DIM,
    )


@triton.jit
def _paged_decode_simple_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr,
    scale_log2e,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    stride_ob, stride_oh, stride_od,
    QUERY_GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Baseline: one program per (sequence, query head), a table lookup per token."""
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    kv_head = (head // QUERY_GROUP).to(tl.int64)
    context_len = tl.load(context_lens_ptr + seq)

    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_mask = dims < HEAD_DIM
    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + dims * stride_qd, mask=dim_mask, other=0.0)
    q = q.to(tl.float32) * scale_log2e

    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], tl.float32)
    offs = tl.arange(0, BLOCK_N)
    for start in range(0, context_len, BLOCK_N):
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
    out = acc / tl.where(l_i > 0, l_i, 1.0)
    tl.store(out_ptr + seq * stride_ob + head * stride_oh + dims * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=dim_mask)


# -- wrappers ------------------------------------------------------------------

def _check_triton_device(query: torch.Tensor) -> None:
    if query.device.type != "cuda" and not runtime.TRITON_INTERPRET:
        raise ValueError(
            f"the Triton kernel runs compiled here, so its inputs must be CUDA tensors; got "
            f"{query.device} (set TRITON_INTERPRET=1 before importing to run it on the CPU)"
        )


def prepare_triton_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    plan: LaunchPlan | None = None,
    timeline: torch.Tensor | None = None,
    **plan_overrides: int,
) -> Callable[[], torch.Tensor]:
    """Validate once, allocate the output and split buffers, and return a launcher.

    The returned zero-argument callable launches the kernel and returns the output
    tensor (the same tensor on every call). It does no host synchronisation, so a
    CUDA graph can capture it; the benchmarks time it that way.

    Parameters
    ----------
    query, k_cache, v_cache, block_tables, context_lens, scale
        As for :func:`triton_decode`.
    plan : LaunchPlan, optional
        A fixed launch plan; by default :func:`plan_launch` picks one.
    timeline : Tensor, optional
        Compiled GPU runs only: an int64 ``[programs, 4]`` tensor on the query's
        device that each launch fills with every program's start, end of its tile
        loop, end (global-timer nanoseconds) and SM, in launch order
        (``benchmarks/timeline.py``). Untouched when every context is empty.
    **plan_overrides
        ``num_splits``, ``block_n``, ``num_warps``, ``num_stages``, ``fused_merge``,
        ``kv_heads_first`` for :func:`plan_launch` (not with ``plan``).

    Returns
    -------
    callable
        ``launch() -> Tensor`` of shape ``[batch_size, num_heads, head_dim]``.

    Raises
    ------
    ValueError
        On invalid arguments, an override the kernel cannot take, a ``plan`` that
        does not fit the inputs, or a ``timeline`` without a GPU, before anything is
        launched.

    Notes
    -----
    The launcher is bound to the inputs it was prepared with: the split plan comes
    from the context lengths at this call. Tensors may be refilled in place between
    launches (a CUDA graph replays this way), but a context that grows past
    ``num_splits * blocks_per_split`` blocks is cut short; prepare again when the
    lengths grow. Launches of one launcher must not overlap (they share the split
    buffers and the fused merge's arrival counters); launches in one stream never
    do.
    """
    shape = check_decode_args(query, k_cache, v_cache, block_tables, context_lens, scale)
    _check_triton_device(query)
    # The kernels index the table row by row and the lengths as a vector.
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    if plan is None:
        plan = plan_launch(shape, query.device, query.dtype, **plan_overrides)
    elif plan_overrides:
        raise ValueError(f"pass either plan or overrides of it, not both (got {', '.join(plan_overrides)})")
    else:
        _check_plan_fits(plan, shape)
    if timeline is not None:
        if runtime.TRITON_INTERPRET:
            raise ValueError("timeline reads the GPU's global timer: it needs the compiled kernel on a CUDA GPU")
        if timeline.dtype != torch.int64 or timeline.device != query.device:
            raise ValueError(f"timeline must be an int64 tensor on {query.device}; got {timeline.dtype} on "
                             f"{timeline.device}")
    batch, num_heads, head_dim = query.shape
    out = torch.empty_like(query)
    if batch == 0 or shape.max_context_len == 0:
        return out.zero_  # every launch writes the zeros again (nothing to attend to)

    group = shape.query_group_size
    head_dim_pad = max(16, _next_pow2(head_dim))
    split = plan.num_splits > 1
    if split:
        part_ml = torch.empty(batch, num_heads, plan.num_splits, 2, dtype=torch.float32, device=query.device)
        part_acc = torch.empty(
            batch, num_heads, plan.num_splits, head_dim_pad, dtype=torch.float32, device=query.device
        )
    else:
        part_ml = part_acc = out  # unused
    fused = split and plan.fused_merge
    # One arrival counter per (sequence, KV head); the merging program resets it.
    counters = torch.zeros(batch * shape.num_kv_heads if fused else 1, dtype=torch.int32, device=query.device)
    scale_log2e = shape.scale * LOG2E
    if plan.kv_heads_first:
        grid = (shape.num_kv_heads, plan.num_splits, batch)
    else:
        grid = (plan.num_splits, shape.num_kv_heads, batch)
    splits_pad = max(2, _next_pow2(plan.num_splits))
    merge_chunk = min(splits_pad, 64)  # one round of loads up to 64 splits
    group_pow2 = _next_pow2(group)
    # The fused merge reads [group, chunk, head_dim] float32 at a time: at most
    # FUSED_MERGE_VALUES values unless one split's group is larger.
    fused_chunk = max(1, min(splits_pad, FUSED_MERGE_VALUES // (group_pow2 * head_dim_pad)))

    if timeline is not None and timeline.numel() < 4 * math.prod(grid):
        raise ValueError(f"timeline needs {math.prod(grid)} x 4 int64 entries, one row per program")

    def launch() -> torch.Tensor:
        _paged_decode_kernel[grid](
            out, part_ml, part_acc, counters, counters if timeline is None else timeline,
            query, k_cache, v_cache, block_tables, context_lens,
            scale_log2e,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            plan.blocks_per_split, plan.num_splits,
            QUERY_GROUP=group, GROUP_PAD=max(16, _next_pow2(group)),
            HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
            BLOCK_SIZE=shape.block_size, BLOCKS_PER_TILE=plan.blocks_per_tile,
            SLOTS_PER_TILE=plan.slots_per_tile, SUBTILES=plan.subtiles,
            SPLIT=split, FP32_DOT=_fp32_dot(query.dtype), EVEN_D=head_dim == head_dim_pad,
            FUSED_MERGE=fused, GROUP_POW2=group_pow2, MERGE_CHUNK=fused_chunk,
            KV_HEADS_FIRST=plan.kv_heads_first, TIMELINE=timeline is not None,
            num_warps=plan.num_warps, num_stages=plan.num_stages,
        )
        if split and not fused:
            _merge_splits_kernel[(num_heads, batch)](
                out, part_ml, part_acc, context_lens,
                *out.stride(),
                plan.tokens_per_split, plan.num_splits,
                HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
                SPLITS_PAD=splits_pad, MERGE_CHUNK=merge_chunk,
                num_warps=4,
            )
        return out

    return launch


def triton_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Paged-attention decode in one Triton kernel launch.

    One program per (sequence, KV head, split) serves all query heads of the GQA
    group, so each K/V byte is read once; tiles follow the paging so each block-table
    entry is loaded once per block; an online softmax keeps the working set to one
    tile; long contexts with few sequences are split across programs
    (flash-decoding), and the last split of each (sequence, KV head) to finish
    merges the partial results.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, any strides.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; entries past a sequence's
        last needed block are ignored.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64; a 0 gives an all-zero row.
    scale : float, optional
        Softmax scale, ``1 / sqrt(head_dim)`` by default.

    Returns
    -------
    Tensor
        ``[batch_size, num_heads, head_dim]`` in the query's dtype; accumulation is
        float32 (IEEE for float32 inputs).

    Raises
    ------
    ValueError
        On invalid arguments, before any kernel runs.
    """
    return prepare_triton_decode(
        query, k_cache, v_cache, block_tables, context_lens, scale=scale
    )()


def triton_decode_simple(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Baseline Triton decode: grid ``(batch_size, num_heads)``, a lookup per token.

    Each query head re-reads its KV head, so under GQA the cache is read
    ``num_heads / num_kv_heads`` times; with one program per (sequence, head) a
    long context with a small batch leaves most SMs idle. Kept to show, next to
    :func:`triton_decode`, what grouping and split-K buy.

    Parameters, returns and raised errors are those of :func:`triton_decode`.
    """
    return prepare_triton_decode_simple(
        query, k_cache, v_cache, block_tables, context_lens, scale=scale
    )()


def prepare_triton_decode_simple(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    block_n: int | None = None,
) -> Callable[[], torch.Tensor]:
    """Validate once and return a launcher for :func:`triton_decode_simple`."""
    shape = check_decode_args(query, k_cache, v_cache, block_tables, context_lens, scale)
    _check_triton_device(query)
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    batch, num_heads, head_dim = query.shape
    out = torch.empty_like(query)
    if batch == 0:
        return lambda: out
    head_dim_pad = _next_pow2(head_dim)
    if block_n is None:
        block_n = 64 if head_dim_pad <= 128 else 32
    scale_log2e = shape.scale * LOG2E

    def launch() -> torch.Tensor:
        _paged_decode_simple_kernel[(batch, num_heads)](
            out, query, k_cache, v_cache, block_tables, context_lens,
            scale_log2e,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            QUERY_GROUP=shape.query_group_size,
            HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
            BLOCK_SIZE=shape.block_size, BLOCK_N=block_n,
            num_warps=4,
        )
        return out

    return launch
