"""Triton paged-attention decode: the kernel and the wrapper that launches it.

``_paged_decode_kernel`` (``triton_decode``) runs one program per (KV head, split,
sequence). The program serves every query head of its GQA group, so each K/V byte
is read from memory once, not once per query head. It walks its share of the
context one tile of ``BLOCK_N`` tokens at a time; a tile is aligned with the paging
(whole blocks when ``block_size <= BLOCK_N``, a slice of one block otherwise), so
each block-table entry is loaded once per block. Scores come from ``tl.dot`` on the
``[group, head_dim] x [head_dim, BLOCK_N]`` tile and feed an online softmax (running
max and normalizer, :func:`_attend_tile`). When the batch and KV heads are too few
to fill the GPU, the context is split across programs (split-K, known as
flash-decoding); each split writes its partial ``(max, sum, acc)`` and the last
split of each (sequence, KV head) to finish, found with an atomic arrival counter,
merges them (:func:`_merge_group`), so no second kernel is launched.

The file reads top to bottom: the two helpers, the kernel, then the wrapper. The
launch plan (tile size, split count, launch options) is chosen in
:mod:`paged_attention.launch_plan`; the wrapper validates, allocates and launches.
The textbook (sequence, query head)-grid kernel it is measured against lives in
:mod:`paged_attention.triton_decode_simple`.

References
----------
Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP 2023. Milakov & Gimelshein, "Online normalizer calculation
for softmax", 2018. Dao et al., "Flash-Decoding for long-context inference", 2023.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from . import runtime  # first: sets TRITON_INTERPRET before triton loads
import triton
import triton.language as tl

from .launch_plan import (  # noqa: F401  (LaunchPlan, plan_launch: part of this module's API)
    FUSED_MERGE_VALUES, LaunchPlan, _check_plan_fits, _fp32_dot, _next_pow2, plan_launch,
)
from .shared_prefix import (
    PrefixGroup, members_per_tile, own_shape, plan_prefix, prefix_work, resolve_shared_prefixes,
)
from .validation import check_decode_args, kv_scale_tensors
from .work_list import build_work_list

LOG2E = 1.4426950408889634


# -- helpers -------------------------------------------------------------------

@triton.jit
def _attend_tile(
    q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, score_ok, dims, dim_mask, scale_log2e,
    stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd,
    EVEN_D: tl.constexpr, FP32_DOT: tl.constexpr, KV_FP8: tl.constexpr,
):
    """One online-softmax step over a tile of tokens for a group of query heads.

    ``physical`` and ``slot`` locate each token of the tile (int64 block ids, so
    block * stride cannot overflow); ``valid`` masks the loads of tokens past the
    context or the block, ``score_ok`` the scores (``valid[None, :]``, or per row
    when the rows belong to sequences of different lengths). Returns the updated running max ``m_i`` (log2 units), normalizer ``l_i``
    and unnormalised output ``acc``. An fp8 tile is widened to the query's dtype in
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
    scores = tl.where(score_ok, scores * scale_log2e, float("-inf"))

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
def _attend_blocks(
    q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, table_row, first_block, last_block, context_len, row_lens,
    scale_log2e, dims, dim_mask,
    stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, EVEN_D: tl.constexpr, FP32_DOT: tl.constexpr, KV_FP8: tl.constexpr,
    PER_ROW: tl.constexpr,
):
    """Walk logical blocks ``[first_block, last_block)`` of one table row a tile at
    a time (:func:`_attend_tile`) for one KV head.

    Loads stop at ``context_len`` tokens; with ``PER_ROW`` each query row's scores
    stop at its own length ``row_lens[row]`` too (the rows of a shared-prefix tile
    belong to sequences of different lengths).
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
        for t in range(first_block * SUBTILES, last_block * SUBTILES):
            block = t // SUBTILES
            physical = tl.load(table_row + block).to(tl.int64)
            slot = (t % SUBTILES) * SLOTS_PER_TILE + tile_slot
            token = block * BLOCK_SIZE + slot
            valid = (slot < BLOCK_SIZE) & (token < context_len)
            if PER_ROW:
                score_ok = valid[None, :] & (token[None, :] < row_lens[:, None])
            else:
                score_ok = valid[None, :]
            m_i, l_i, acc = _attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, slot, valid, score_ok, dims, dim_mask, scale_log2e,
                stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd, EVEN_D, FP32_DOT, KV_FP8,
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
            if PER_ROW:
                score_ok = valid[None, :] & (token[None, :] < row_lens[:, None])
            else:
                score_ok = valid[None, :]
            m_i, l_i, acc = _attend_tile(
                q, m_i, l_i, acc, k_head, v_head, physical, tile_slot, valid, score_ok, dims, dim_mask,
                scale_log2e,
                stride_kb, stride_ks, stride_kd, stride_vb, stride_vs, stride_vd, EVEN_D, FP32_DOT, KV_FP8,
            )
    return m_i, l_i, acc


@triton.jit
def _merge_group(
    out_ptr, stride_oh, stride_od, part_ml_ptr, part_acc_ptr, first_row, split_stride, num_splits,
    QUERY_GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr, MERGE_CHUNK: tl.constexpr,
):
    """Merge the ``num_splits`` partial ``(max, sum, acc)`` of a group of query heads
    and store the group's output rows.

    ``out_ptr`` points at the group's first output row; ``first_row`` is the
    partial-buffer row of the group's first head in its first slot (head ``g`` of
    the group is ``g`` rows further, and each further slot ``split_stride`` rows
    further). ``MERGE_CHUNK`` slots are read at a time and
    folded in with the same rescaling as the online softmax. Loads bypass L1
    (``.cg``): other programs wrote the partials during this launch.
    """
    g = tl.arange(0, GROUP_POW2)
    g_ok = g < QUERY_GROUP
    rows = first_row + g.to(tl.int64)
    dims = tl.arange(0, HEAD_DIM_PAD)
    c = tl.arange(0, MERGE_CHUNK)
    m_run = tl.full([GROUP_POW2], float("-inf"), tl.float32)
    total = tl.zeros([GROUP_POW2], tl.float32)
    acc = tl.zeros([GROUP_POW2, HEAD_DIM_PAD], tl.float32)
    for start in range(0, num_splits, MERGE_CHUNK):
        r = rows[:, None] + (start + c).to(tl.int64)[None, :] * split_stride  # [GROUP_POW2, MERGE_CHUNK]
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


# -- kernel --------------------------------------------------------------------

@triton.jit
def _paged_decode_kernel(
    out_ptr, part_ml_ptr, part_acc_ptr, counter_ptr,
    q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr, k_scale_ptr, v_scale_ptr,
    items_ptr, sequences_ptr,
    scale_log2e,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    stride_ob, stride_oh, stride_od,
    QUERY_GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, SPLIT: tl.constexpr, FP32_DOT: tl.constexpr, EVEN_D: tl.constexpr,
    GROUP_POW2: tl.constexpr, MERGE_CHUNK: tl.constexpr, KV_FP8: tl.constexpr,
):
    # The KV heads of one work item launch next to each other, so the programs
    # reading the same blocks (each a slice of every token row) run in step.
    kv_head = tl.program_id(0)
    item = tl.program_id(1)
    num_kv_heads = tl.num_programs(0)
    num_heads = num_kv_heads * QUERY_GROUP

    seq = tl.load(items_ptr + item * 4).to(tl.int64)
    first_block = tl.load(items_ptr + item * 4 + 1)
    context_len = tl.load(context_lens_ptr + seq)
    needed_blocks = tl.cdiv(context_len, BLOCK_SIZE)
    last_block = tl.minimum(tl.load(items_ptr + item * 4 + 2), needed_blocks)

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
    if KV_FP8:
        # K's scale folds into the logits' scale; V's multiplies the accumulator once
        # at the end (every split of this KV head shares it, so the merge is unchanged).
        scale_log2e = scale_log2e * tl.load(k_scale_ptr + kv_head)

    m_i, l_i, acc = _attend_blocks(
        q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, block_tables_ptr + seq * stride_tb, first_block, last_block,
        context_len, context_len, scale_log2e, dims, dim_mask,
        stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
        BLOCK_SIZE, BLOCKS_PER_TILE, SLOTS_PER_TILE, SUBTILES, EVEN_D, FP32_DOT, KV_FP8, False,
    )
    if KV_FP8:
        acc = acc * tl.load(v_scale_ptr + kv_head)

    out_rows = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + dims[None, :] * stride_od
    out_mask = group_mask[:, None] & dim_mask[None, :]
    num_slots = tl.load(sequences_ptr + seq * 3 + 1)
    if SPLIT and num_slots > 1:
        # Partial results by slot: part_ml[slot, head, 0:2] = (max, sum) in log2
        # units, part_acc[slot, head, :] = unnormalised weighted sum of V.
        first_slot = tl.load(sequences_ptr + seq * 3)
        base = tl.load(items_ptr + item * 4 + 3).to(tl.int64) * num_heads + heads
        tl.store(part_ml_ptr + base * 2, m_i, mask=group_mask)
        tl.store(part_ml_ptr + base * 2 + 1, l_i, mask=group_mask)
        tl.store(part_acc_ptr + base[:, None] * HEAD_DIM_PAD + dims[None, :], acc, mask=out_mask)
        # The last of this (sequence, KV head)'s programs to finish merges every
        # slot, so no second kernel is launched. The barrier orders every thread's
        # stores before the counter's release; the acquire orders the counter before
        # the loads of the other programs' partials (read through L2).
        tl.debug_barrier()
        counter = counter_ptr + seq * num_kv_heads + kv_head
        finished = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if finished == tl.load(sequences_ptr + seq * 3 + 2) - 1:
            tl.debug_barrier()
            _merge_group(
                out_ptr + seq * stride_ob + (kv_head * QUERY_GROUP) * stride_oh, stride_oh, stride_od,
                part_ml_ptr, part_acc_ptr, first_slot.to(tl.int64) * num_heads + kv_head * QUERY_GROUP,
                num_heads, num_slots,
                QUERY_GROUP, GROUP_POW2, HEAD_DIM, HEAD_DIM_PAD, MERGE_CHUNK,
            )
            tl.atomic_xchg(counter, 0)  # ready for the next launch (and graph replay)
    else:
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def _prefix_decode_kernel(
    part_ml_ptr, part_acc_ptr,
    q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr, k_scale_ptr, v_scale_ptr,
    items_ptr, members_ptr, sequences_ptr,
    scale_log2e,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    QUERY_GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, MEMBERS: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, FP32_DOT: tl.constexpr, EVEN_D: tl.constexpr, KV_FP8: tl.constexpr,
):
    # One program: up to MEMBERS sequences of a shared-prefix group x the query
    # heads of one KV head, as MEMBERS * GROUP_POW2 rows of one tile, against one
    # piece of the group's shared blocks. Each row writes its partial result to its
    # sequence's slot; the decode kernel launched next merges them.
    kv_head = tl.program_id(0)
    item = tl.program_id(1)
    num_kv_heads = tl.num_programs(0)
    num_heads = num_kv_heads * QUERY_GROUP
    first_member = tl.load(items_ptr + item * 5)
    num_members = tl.load(items_ptr + item * 5 + 1)
    first_block = tl.load(items_ptr + item * 5 + 2)
    slot = tl.load(items_ptr + item * 5 + 4)

    rows = tl.arange(0, MEMBERS * GROUP_POW2)
    member = rows // GROUP_POW2
    g = rows % GROUP_POW2
    member_ok = member < num_members
    row_ok = member_ok & (g < QUERY_GROUP)
    seq = tl.load(members_ptr + first_member + member, mask=member_ok, other=0).to(tl.int64)
    row_lens = tl.load(context_lens_ptr + seq, mask=row_ok, other=0)
    longest = tl.max(row_lens, 0)
    last_block = tl.minimum(tl.load(items_ptr + item * 5 + 3), tl.cdiv(longest, BLOCK_SIZE))
    heads = kv_head * QUERY_GROUP + g
    dims = tl.arange(0, HEAD_DIM_PAD)
    if EVEN_D:
        dim_mask = dims < HEAD_DIM_PAD
    else:
        dim_mask = dims < HEAD_DIM
    q = tl.load(
        q_ptr + seq[:, None] * stride_qb + heads[:, None] * stride_qh + dims[None, :] * stride_qd,
        mask=row_ok[:, None] & dim_mask[None, :],
        other=0.0,
    )
    m_i = tl.full([MEMBERS * GROUP_POW2], float("-inf"), tl.float32)
    l_i = tl.zeros([MEMBERS * GROUP_POW2], tl.float32)
    acc = tl.zeros([MEMBERS * GROUP_POW2, HEAD_DIM_PAD], tl.float32)
    if KV_FP8:
        scale_log2e = scale_log2e * tl.load(k_scale_ptr + kv_head)
    # Every member maps the shared blocks alike: walk the first member's table row.
    table_row = block_tables_ptr + tl.load(members_ptr + first_member).to(tl.int64) * stride_tb
    m_i, l_i, acc = _attend_blocks(
        q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, table_row, first_block, last_block,
        longest, row_lens, scale_log2e, dims, dim_mask,
        stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
        BLOCK_SIZE, BLOCKS_PER_TILE, SLOTS_PER_TILE, SUBTILES, EVEN_D, FP32_DOT, KV_FP8, True,
    )
    if KV_FP8:
        acc = acc * tl.load(v_scale_ptr + kv_head)
    base = (tl.load(sequences_ptr + seq * 3, mask=row_ok, other=0) + slot).to(tl.int64) * num_heads + heads
    tl.store(part_ml_ptr + base * 2, m_i, mask=row_ok)
    tl.store(part_ml_ptr + base * 2 + 1, l_i, mask=row_ok)
    tl.store(part_acc_ptr + base[:, None] * HEAD_DIM_PAD + dims[None, :], acc,
             mask=row_ok[:, None] & dim_mask[None, :])


# -- wrapper -------------------------------------------------------------------

def _pinned(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Page-locked copies of host tensors, so their copies to the GPU do not wait
    on the stream (no synchronisation with earlier work)."""
    if not torch.cuda.is_available():
        return tensors
    return tuple(t.pin_memory() for t in tensors)


def prepare_triton_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    plan: LaunchPlan | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
    prefix_plan: LaunchPlan | None = None,
    **plan_overrides: int,
) -> Callable[[], torch.Tensor]:
    """Validate once, allocate the output and split buffers, and return a launcher.

    The returned zero-argument callable launches the kernel and returns the output
    tensor (the same tensor on every call). It does no host synchronisation, so a
    CUDA graph can capture it; the benchmarks time it that way.

    Parameters
    ----------
    query, k_cache, v_cache, block_tables, context_lens, scale, k_scale, v_scale
        As for :func:`triton_decode`.
    plan : LaunchPlan, optional
        A fixed launch plan; by default :func:`plan_launch` picks one (for the
        lengths past the shared prefixes, when there are any).
    shared_prefixes : "detect" or sequence of PrefixGroup, optional
        Run a prefix pass first (:func:`_prefix_decode_kernel`): each group's query
        rows attend to its shared blocks together, every shared byte read once per
        group (per tile of ``prefix_plan.query_rows`` rows), and the
        decode kernel merges those partials with each sequence's own. ``"detect"``
        finds the groups in the block table
        (:func:`~paged_attention.shared_prefix.find_shared_prefixes`, from the host
        copy validation makes); given groups are checked against the table
        (:func:`~paged_attention.shared_prefix.check_shared_prefixes`). ``None``
        (default): no prefix pass.
    prefix_plan : LaunchPlan, optional
        The prefix pass's tile and pieces; by default
        :func:`~paged_attention.shared_prefix.plan_prefix` picks them.
    **plan_overrides
        ``num_splits``, ``block_n``, ``num_warps``, ``num_stages``, ``balanced``,
        ``max_programs`` for :func:`plan_launch` (not with ``plan``).

    Returns
    -------
    callable
        ``launch() -> Tensor`` of shape ``[batch_size, num_heads, head_dim]``.

    Raises
    ------
    ValueError
        On invalid arguments, an override the kernel cannot take, or a ``plan`` that
        does not fit the inputs, before anything is launched.
    TypeError
        On an override :func:`plan_launch` does not know.

    Notes
    -----
    The launcher is bound to the inputs it was prepared with: the work list (which
    program reads which blocks) comes from the context lengths and shared prefixes
    at this call. Tensors may be refilled in place between launches (a CUDA graph
    replays this way): each sequence's last program reads on to its context's end,
    so a context that grew is read in full, only less evenly spread; prepare again
    when the lengths change much, and whenever the shared blocks change. Launches
    of one launcher must not overlap (they share the split buffers and the merge's
    arrival counters); launches in one stream never do.
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale
    )
    runtime.check_triton_device(query.device)
    # The kernels index the table row by row and the lengths as a vector.
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    groups = resolve_shared_prefixes(shared_prefixes, shape)
    if plan is None:
        # For what the prefix pass leaves: each sequence's own blocks.
        plan = plan_launch(own_shape(shape, groups), query.device, query.dtype, **plan_overrides)
    elif plan_overrides:
        raise ValueError(f"pass either plan or overrides of it, not both (got {', '.join(plan_overrides)})")
    else:
        _check_plan_fits(plan, shape)
    batch, num_heads, head_dim = query.shape
    out = torch.empty_like(query)
    if batch == 0 or shape.max_context_len == 0:
        return out.zero_  # every launch writes the zeros again (nothing to attend to)

    group = shape.query_group_size
    group_pow2 = _next_pow2(group)
    head_dim_pad = max(16, _next_pow2(head_dim))
    prefix = None
    if groups:
        if prefix_plan is None:
            prefix_plan = plan_prefix(shape, groups, query.device, query.dtype)
        elif prefix_plan.query_rows < 16 or prefix_plan.block_size != shape.block_size:
            raise ValueError("prefix_plan must come from plan_prefix for these inputs (query_rows >= 16, the "
                             f"cache's block_size {shape.block_size}); got {prefix_plan}")
        members = members_per_tile(prefix_plan, group)
        prefix = prefix_work(groups, batch, members, prefix_plan.blocks_per_split,
                             prefix_plan.blocks_per_tile)
    elif prefix_plan is not None:
        raise ValueError("prefix_plan needs shared_prefixes")
    work = build_work_list(plan, shape.context_lens, first_blocks=prefix.first_blocks if prefix else None,
                           prefix_slots=prefix.prefix_slots if prefix else None)
    split = work.needs_merge
    if split:
        part_ml = torch.empty(work.num_slots, num_heads, 2, dtype=torch.float32, device=query.device)
        part_acc = torch.empty(work.num_slots, num_heads, head_dim_pad, dtype=torch.float32, device=query.device)
    else:
        part_ml = part_acc = out  # unused
    # One arrival counter per (sequence, KV head); the merging program resets it.
    counters = torch.zeros(batch * shape.num_kv_heads if split else 1, dtype=torch.int32, device=query.device)
    host = (work.items, work.sequences) + ((prefix.items, prefix.members) if prefix else ())
    items, sequences, *prefix_tensors = (t.to(query.device, non_blocking=True) for t in _pinned(*host))
    scale_log2e = shape.scale * LOG2E
    grid = (shape.num_kv_heads, work.num_items)
    slots_pad = max(2, _next_pow2(int(work.sequences[:, 1].max())))
    # The merge reads [group, chunk, head_dim] float32 at a time: at most
    # FUSED_MERGE_VALUES values unless one slot's group is larger.
    merge_chunk = max(1, min(slots_pad, FUSED_MERGE_VALUES // (group_pow2 * head_dim_pad)))
    k_scales, v_scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    if k_scales is None:
        k_scales = v_scales = counters  # unused: not an fp8 cache
    fp32_dot, even_d = _fp32_dot(query.dtype), head_dim == head_dim_pad

    def launch_prefix() -> None:
        _prefix_decode_kernel[(shape.num_kv_heads, prefix.num_items)](
            part_ml, part_acc,
            query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales,
            prefix_tensors[0], prefix_tensors[1], sequences,
            scale_log2e,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            QUERY_GROUP=group, GROUP_POW2=group_pow2, MEMBERS=members,
            HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
            BLOCK_SIZE=shape.block_size, BLOCKS_PER_TILE=prefix_plan.blocks_per_tile,
            SLOTS_PER_TILE=prefix_plan.slots_per_tile, SUBTILES=prefix_plan.subtiles,
            FP32_DOT=fp32_dot, EVEN_D=even_d, KV_FP8=shape.is_fp8,
            num_warps=prefix_plan.num_warps, num_stages=prefix_plan.num_stages,
        )

    def launch() -> torch.Tensor:
        if prefix is not None and prefix.num_items:
            launch_prefix()
        _paged_decode_kernel[grid](
            out, part_ml, part_acc, counters,
            query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales,
            items, sequences,
            scale_log2e,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            QUERY_GROUP=group, GROUP_PAD=max(16, _next_pow2(group)),
            HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
            BLOCK_SIZE=shape.block_size, BLOCKS_PER_TILE=plan.blocks_per_tile,
            SLOTS_PER_TILE=plan.slots_per_tile, SUBTILES=plan.subtiles,
            SPLIT=split, FP32_DOT=fp32_dot, EVEN_D=even_d,
            GROUP_POW2=group_pow2, MERGE_CHUNK=merge_chunk, KV_FP8=shape.is_fp8,
            num_warps=plan.num_warps, num_stages=plan.num_stages,
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
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
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
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, any strides; the
        query's dtype, or float8_e4m3fn / float8_e5m2 (read as 8 bits, widened in
        registers, K's scale folded into the logits and V's into the output).
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; entries past a sequence's
        last needed block are ignored.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64; a 0 gives an all-zero row.
    scale : float, optional
        Softmax scale, ``1 / sqrt(head_dim)`` by default.
    k_scale, v_scale : float or Tensor, optional
        Dequantization scales of an fp8 cache: a positive number (per tensor) or a
        float32 ``[num_kv_heads]`` tensor (per KV head); see
        :func:`~paged_attention.validation.check_decode_args`.
    shared_prefixes : "detect" or sequence of PrefixGroup, optional
        Read the blocks that groups of sequences share once per group in a prefix
        pass (see :func:`prepare_triton_decode`); ``None`` (default) reads every
        sequence's blocks on their own.

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
        query, k_cache, v_cache, block_tables, context_lens, scale=scale, k_scale=k_scale, v_scale=v_scale,
        shared_prefixes=shared_prefixes,
    )()
