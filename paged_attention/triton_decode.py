"""Triton paged-attention decode: the kernel and the wrapper that launches it.

``_paged_decode_kernel`` (``triton_decode``) runs one program per (KV head, split,
sequence). The program serves every query head of its GQA group, so each K/V byte
is read from memory once, not once per query head. It walks its share of the
context one tile of ``BLOCK_N`` tokens at a time; a tile is aligned with the paging
(whole blocks when ``block_size <= BLOCK_N``, a slice of one block otherwise), so
each block-table entry is loaded once per block. Scores come from ``tl.dot`` on the
``[group, head_dim] x [head_dim, BLOCK_N]`` tile and feed an online softmax (running
max and normalizer, :func:`~paged_attention.tile_walk.attend_tile`). When the batch
and KV heads are too few to fill the GPU, the context is split across programs
(split-K, known as flash-decoding); each split writes its partial ``(max, sum,
acc)`` and the last split of each (sequence, KV head) to finish, found with an
atomic arrival counter, merges them (:func:`~paged_attention.tile_walk.merge_partials`),
so no second kernel is launched; where that one program would read many partials
(draft tokens over many splits, :func:`~paged_attention.launch_plan.spread_merge`)
``_merge_splits_kernel`` merges them instead, one program per (sequence, query
token, KV head), launched right after.

Three options change the attention, each behind a ``tl.constexpr`` so the plain
kernel is compiled as before: a sliding ``window`` (the work list starts each
sequence at its window's first block, the kernel masks the positions before it),
``sinks`` (one logit per query head in the denominator, added where a row is
finished: the unsplit store or the merge) and a logit ``soft_cap``.

The file reads top to bottom: the kernel, then the wrapper. Its helpers, shared
with the shared-prefix pass (:mod:`paged_attention.prefix_pass`), are in
:mod:`paged_attention.tile_walk`. What a call launches (both passes' plans and
programs) is decided, and its arguments checked, in
:mod:`paged_attention.triton_launch` (the tile size, split count and launch
options in :mod:`paged_attention.launch_plan`); the wrapper allocates and launches.
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

from .launch_plan import FUSED_MERGE_VALUES, LaunchPlan, plan_launch, spread_merge  # noqa: F401  (plan_launch: API)
from .prefix_pass import prepare_prefix_pass
from .shared_prefix import PrefixGroup
from .tile_walk import LOG2E, attend_blocks, fp32_dot, merge_partials, normalize_output
from .tiling import dot_pad, next_pow2
from .triton_launch import plan_triton_decode
from .validation import kv_scale_tensors
from .work_list import (
    ITEM_FIRST_BLOCK, ITEM_LAST_BLOCK, ITEM_SEQ, ITEM_SLOT, ITEM_WIDTH, SEQUENCE_FIRST_SLOT, SEQUENCE_NUM_ITEMS,
    SEQUENCE_NUM_SLOTS, SEQUENCE_WIDTH,
)


# -- kernel --------------------------------------------------------------------

@triton.jit
def _paged_decode_kernel(
    out_ptr, part_ml_ptr, part_acc_ptr, counter_ptr,
    q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr, k_scale_ptr, v_scale_ptr, sinks_ptr,
    items_ptr, sequences_ptr, query_starts_ptr,
    scale_log2e, soft_cap, window,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    stride_ob, stride_oh, stride_od,
    QUERY_GROUP: tl.constexpr, ROWS_PAD: tl.constexpr, QUERY_TOKENS: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, SPLIT: tl.constexpr, FP32_DOT: tl.constexpr, EVEN_D: tl.constexpr,
    MERGE_ROWS: tl.constexpr, MERGE_CHUNK: tl.constexpr, FUSED_MERGE: tl.constexpr, KV_FP8: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFT_CAP: tl.constexpr, HAS_SINKS: tl.constexpr,
):
    # The KV heads of one work item launch next to each other, so the programs
    # reading the same blocks (each a slice of every token row) run in step.
    kv_head = tl.program_id(0)
    item = tl.program_id(1)
    num_kv_heads = tl.num_programs(0)
    num_heads = num_kv_heads * QUERY_GROUP

    item_row = items_ptr + item * ITEM_WIDTH
    seq = tl.load(item_row + ITEM_SEQ).to(tl.int64)
    first_block = tl.load(item_row + ITEM_FIRST_BLOCK)
    context_len = tl.load(context_lens_ptr + seq)
    needed_blocks = tl.cdiv(context_len, BLOCK_SIZE)
    last_block = tl.minimum(tl.load(item_row + ITEM_LAST_BLOCK), needed_blocks)

    # Row r of the tile: query head g of the GQA group for the sequence's query
    # token t (several with QUERY_TOKENS > 1: draft tokens, each seeing the context
    # up to itself, so every row has its own length).
    rows = tl.arange(0, ROWS_PAD)
    if QUERY_TOKENS > 1:
        t = rows // QUERY_GROUP
        g = rows % QUERY_GROUP
        q_first = tl.load(query_starts_ptr + seq).to(tl.int64)
        num_tokens = tl.load(query_starts_ptr + seq + 1) - q_first
        row_ok = t < num_tokens
        row_lens = context_len - num_tokens + 1 + t
    else:
        t = rows * 0
        g = rows
        q_first = seq
        num_tokens = 1
        row_ok = rows < QUERY_GROUP
        row_lens = context_len
    if HAS_WINDOW:
        # From the live length (a context may have grown since planning): no
        # table entry before the first token's window's first block is read, no
        # position before a row's window scored.
        window_start = tl.maximum(context_len - num_tokens + 1 - window, 0)
        row_starts = tl.maximum(row_lens - window, 0)
        first_block = tl.maximum(first_block, window_start // BLOCK_SIZE)
    else:
        window_start = 0
        row_starts = row_lens  # unread

    heads = kv_head * QUERY_GROUP + g
    q_rows = q_first + t
    dims = tl.arange(0, HEAD_DIM_PAD)
    if EVEN_D:
        dim_mask = dims < HEAD_DIM_PAD  # all true; keeps every mask constant along head_dim
    else:
        dim_mask = dims < HEAD_DIM
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_qb + heads[:, None] * stride_qh + dims[None, :] * stride_qd,
        mask=row_ok[:, None] & dim_mask[None, :],
        other=0.0,
    )

    m_i = tl.full([ROWS_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS_PAD], tl.float32)
    acc = tl.zeros([ROWS_PAD, HEAD_DIM_PAD], tl.float32)
    if KV_FP8:
        # K's scale folds into the logits' scale; V's multiplies the accumulator once
        # at the end (every split of this KV head shares it, so the merge is unchanged).
        scale_log2e = scale_log2e * tl.load(k_scale_ptr + kv_head)

    m_i, l_i, acc = attend_blocks(
        q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, block_tables_ptr + seq * stride_tb, first_block, last_block,
        context_len, row_lens, window_start, row_starts, scale_log2e, soft_cap, dims, dim_mask,
        stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
        BLOCK_SIZE, BLOCKS_PER_TILE, SLOTS_PER_TILE, SUBTILES, EVEN_D, FP32_DOT, KV_FP8, QUERY_TOKENS > 1,
        HAS_WINDOW, SOFT_CAP,
    )
    if KV_FP8:
        acc = acc * tl.load(v_scale_ptr + kv_head)

    out_rows = out_ptr + q_rows[:, None] * stride_ob + heads[:, None] * stride_oh + dims[None, :] * stride_od
    out_mask = row_ok[:, None] & dim_mask[None, :]
    sequence_row = sequences_ptr + seq * SEQUENCE_WIDTH
    num_slots = tl.load(sequence_row + SEQUENCE_NUM_SLOTS)
    if SPLIT and num_slots > 1:
        # Partial results by slot and query token: part_ml[slot, t, head, 0:2] =
        # (max, sum) in log2 units, part_acc[slot, t, head, :] = unnormalised
        # weighted sum of V.
        base = (tl.load(item_row + ITEM_SLOT).to(tl.int64) * QUERY_TOKENS + t) * num_heads + heads
        tl.store(part_ml_ptr + base * 2, m_i, mask=row_ok)
        tl.store(part_ml_ptr + base * 2 + 1, l_i, mask=row_ok)
        tl.store(part_acc_ptr + base[:, None] * HEAD_DIM_PAD + dims[None, :], acc, mask=out_mask)
    if SPLIT and FUSED_MERGE and num_slots > 1:
        # The last of this (sequence, KV head)'s programs to finish merges every
        # slot, so no second kernel is launched. The barrier orders every thread's
        # stores before the counter's release; the acquire orders the counter before
        # the loads of the other programs' partials (read through L2).
        tl.debug_barrier()
        first_slot = tl.load(sequence_row + SEQUENCE_FIRST_SLOT)
        counter = counter_ptr + seq * num_kv_heads + kv_head
        finished = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if finished == tl.load(sequence_row + SEQUENCE_NUM_ITEMS) - 1:
            tl.debug_barrier()
            merge_partials(
                out_ptr + q_first * stride_ob + (kv_head * QUERY_GROUP) * stride_oh, stride_ob, stride_oh, stride_od,
                part_ml_ptr, part_acc_ptr,
                first_slot.to(tl.int64) * QUERY_TOKENS * num_heads + kv_head * QUERY_GROUP,
                num_heads, QUERY_TOKENS * num_heads, num_slots, num_tokens, sinks_ptr + kv_head * QUERY_GROUP,
                QUERY_GROUP, MERGE_ROWS, HEAD_DIM, HEAD_DIM_PAD, MERGE_CHUNK, HAS_SINKS,
            )
            tl.atomic_xchg(counter, 0)  # ready for the next launch (and graph replay)
    if not SPLIT or num_slots <= 1:
        out = normalize_output(acc, m_i[:, None], l_i[:, None], sinks_ptr, heads[:, None], row_ok[:, None],
                               HAS_SINKS)
        tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def _merge_splits_kernel(
    out_ptr, part_ml_ptr, part_acc_ptr, sequences_ptr, query_starts_ptr, sinks_ptr,
    stride_ob, stride_oh, stride_od,
    QUERY_GROUP: tl.constexpr, QUERY_TOKENS: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    MERGE_ROWS: tl.constexpr, MERGE_CHUNK: tl.constexpr, HAS_SINKS: tl.constexpr,
):
    # The spread merge (launch_plan.spread_merge): one program per (sequence, query
    # token, KV head) merges that token's group of heads over every slot.
    seq = (tl.program_id(0) // QUERY_TOKENS).to(tl.int64)
    t = tl.program_id(0) % QUERY_TOKENS
    kv_head = tl.program_id(1)
    num_heads = tl.num_programs(1) * QUERY_GROUP
    sequence_row = sequences_ptr + seq * SEQUENCE_WIDTH
    num_slots = tl.load(sequence_row + SEQUENCE_NUM_SLOTS)
    if QUERY_TOKENS > 1:
        q_first = tl.load(query_starts_ptr + seq).to(tl.int64)
        num_tokens = tl.load(query_starts_ptr + seq + 1) - q_first
    else:
        q_first = seq
        num_tokens = 1
    if num_slots > 1 and t < num_tokens:  # else the decode kernel stored the rows (or there are none)
        first_slot = tl.load(sequence_row + SEQUENCE_FIRST_SLOT).to(tl.int64)
        merge_partials(
            out_ptr + (q_first + t) * stride_ob + (kv_head * QUERY_GROUP) * stride_oh, stride_ob, stride_oh,
            stride_od, part_ml_ptr, part_acc_ptr, (first_slot * QUERY_TOKENS + t) * num_heads + kv_head * QUERY_GROUP,
            num_heads, QUERY_TOKENS * num_heads, num_slots, 1, sinks_ptr + kv_head * QUERY_GROUP,
            QUERY_GROUP, MERGE_ROWS, HEAD_DIM, HEAD_DIM_PAD, MERGE_CHUNK, HAS_SINKS,
        )


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
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
    plan: LaunchPlan | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
    prefix_plan: LaunchPlan | None = None,
    **plan_overrides: int,
) -> Callable[[], torch.Tensor]:
    """Validate and plan once (:func:`~paged_attention.triton_launch.plan_triton_decode`),
    allocate the output and split buffers, and return a launcher.

    The returned zero-argument callable launches the kernel and returns the output
    tensor (the same tensor on every call). It does no host synchronisation, so a
    CUDA graph can capture it; the benchmarks time it that way.

    Parameters
    ----------
    query, k_cache, v_cache, block_tables, context_lens, scale, k_scale, v_scale, window, sinks, soft_cap, query_lens
        As for :func:`triton_decode`.
    plan : LaunchPlan, optional
        A fixed launch plan; by default :func:`plan_launch` picks one (for the
        blocks each sequence's own programs read: past the shared prefixes, from
        its window's first block).
    shared_prefixes : "detect" or sequence of PrefixGroup, optional
        Run a prefix pass first (:mod:`paged_attention.prefix_pass`): each group's query
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
        ``launch() -> Tensor`` of the query's shape.

    Raises
    ------
    ValueError
        On any argument :func:`~paged_attention.triton_launch.plan_triton_decode`
        refuses (invalid inputs, an override the kernel cannot take, a ``plan`` or
        ``prefix_plan`` that does not fit the inputs), or CPU inputs to compiled
        Triton, before anything is launched.
    TypeError
        On an override :func:`plan_launch` does not know.

    Notes
    -----
    The launcher is bound to the inputs it was prepared with: the work list (which
    program reads which blocks) comes from the context lengths, windows and shared
    prefixes at this call, and so are the query tokens' rows (``query_lens``, read
    once here). Tensors may be refilled in place between launches (a
    CUDA graph replays this way; ``sinks`` and the fp8 scales too): each
    sequence's last program reads on to its context's end, so a context that grew
    is read in full, only less evenly spread, and a window follows the live length
    (programs before it read nothing); prepare again when the lengths change much,
    and whenever the shared blocks change. Launches
    of one launcher must not overlap (they share the split buffers and the merge's
    arrival counters); launches in one stream never do.
    """
    planned = plan_triton_decode(
        query, k_cache, v_cache, block_tables, context_lens, scale=scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens, plan=plan,
        shared_prefixes=shared_prefixes, prefix_plan=prefix_plan, **plan_overrides,
    )
    runtime.check_triton_device(query.device)
    shape, plan, work, prefix = planned.shape, planned.plan, planned.work, planned.prefix
    # The kernels index the table row by row and the lengths as a vector.
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    batch, num_heads, head_dim = shape.batch_size, shape.num_heads, shape.head_dim
    out = torch.empty_like(query)
    if batch == 0 or shape.max_context_len == 0:
        return out.zero_  # every launch writes the zeros again (nothing to attend to)

    group = shape.query_group_size
    tokens = shape.max_query_len  # query tokens per sequence, at most: rows of one tile per group member
    merge_rows = next_pow2(tokens * group)
    head_dim_pad = dot_pad(head_dim)
    split = work.needs_merge
    if split:
        part_ml = torch.empty(work.num_slots * tokens, num_heads, 2, dtype=torch.float32, device=query.device)
        part_acc = torch.empty(work.num_slots * tokens, num_heads, head_dim_pad, dtype=torch.float32,
                               device=query.device)
    else:
        part_ml = part_acc = out  # unused
    # One arrival counter per (sequence, KV head); the merging program resets it.
    counters = torch.zeros(batch * shape.num_kv_heads if split else 1, dtype=torch.int32, device=query.device)
    host = (work.items, work.sequences, shape.query_starts.to(torch.int32))
    host += (prefix.items, prefix.members) if prefix else ()
    items, sequences, query_starts, *prefix_tensors = (t.to(query.device, non_blocking=True) for t in _pinned(*host))
    scale_log2e = shape.scale * LOG2E
    grid = (shape.num_kv_heads, work.num_items)
    slots_pad = max(2, next_pow2(int(work.sequences[:, int(SEQUENCE_NUM_SLOTS)].max())))
    # The merge reads [rows, chunk, head_dim] float32 at a time: at most
    # FUSED_MERGE_VALUES values unless one slot's rows are more.
    merge_chunk = max(1, min(slots_pad, FUSED_MERGE_VALUES // (merge_rows * head_dim_pad)))
    spread = split and spread_merge(int(work.sequences[:, int(SEQUENCE_NUM_SLOTS)].max()), merge_rows, head_dim_pad)
    group_rows = next_pow2(group)  # the spread merge's rows: one query token's heads
    spread_chunk = max(1, min(slots_pad, FUSED_MERGE_VALUES // (group_rows * head_dim_pad)))
    k_scales, v_scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    if k_scales is None:
        k_scales = v_scales = counters  # unused: not an fp8 cache
    # Read at every launch, so a refill in place changes the next one.
    sink_logits = counters if shape.sinks is None else sinks.contiguous()
    cap = 0.0 if shape.soft_cap is None else shape.soft_cap  # unread without a cap
    window_len = 0 if shape.window is None else shape.window  # unread without a window
    launch_prefix = None
    if prefix is not None and prefix.num_items:
        launch_prefix = prepare_prefix_pass(
            planned, part_ml, part_acc, query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales,
            *prefix_tensors, sequences,
        )
    options = dict(
        QUERY_GROUP=group, ROWS_PAD=dot_pad(tokens * group), QUERY_TOKENS=tokens,
        HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
        BLOCK_SIZE=shape.block_size, BLOCKS_PER_TILE=plan.blocks_per_tile,
        SLOTS_PER_TILE=plan.slots_per_tile, SUBTILES=plan.subtiles,
        SPLIT=split, FP32_DOT=fp32_dot(query.dtype), EVEN_D=head_dim == head_dim_pad,
        MERGE_ROWS=merge_rows, MERGE_CHUNK=merge_chunk, FUSED_MERGE=not spread, KV_FP8=shape.is_fp8,
        HAS_WINDOW=shape.window is not None, SOFT_CAP=shape.soft_cap is not None, HAS_SINKS=shape.sinks is not None,
        num_warps=plan.num_warps, num_stages=plan.num_stages,
    )

    def launch() -> torch.Tensor:
        if launch_prefix is not None:
            launch_prefix()
        _paged_decode_kernel[grid](
            out, part_ml, part_acc, counters,
            query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales, sink_logits,
            items, sequences, query_starts,
            scale_log2e, cap, window_len,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            **options,
        )
        if spread:
            _merge_splits_kernel[(batch * tokens, shape.num_kv_heads)](
                out, part_ml, part_acc, sequences, query_starts, sink_logits, *out.stride(),
                QUERY_GROUP=group, QUERY_TOKENS=tokens, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad,
                MERGE_ROWS=group_rows, MERGE_CHUNK=spread_chunk, HAS_SINKS=shape.sinks is not None, num_warps=4,
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
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
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
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32;
        ``[sum(query_lens), num_heads, head_dim]`` with ``query_lens``.
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
    window : int, optional
        Sliding window: each query attends to the last ``window`` positions,
        ``max(0, context_len - window) ... context_len - 1``; the plan and the
        programs follow those lengths, and no table entry before a window's first
        block is read (it may be ``-1``). ``None`` (default): the whole context.
    sinks : Tensor, optional
        float32 ``[num_heads]`` on the query's device: one attention-sink logit per
        query head in the softmax's denominator (its value is zero), applied once
        per row where the row is finished (the store, or the split-K merge).
    soft_cap : float, optional
        Logit soft-capping, ``s <- soft_cap * tanh(s / soft_cap)`` on the scaled
        logits (after K's dequantization scale), before the softmax.
    query_lens : Tensor, optional
        int32 or int64 ``[batch_size]`` on the query's device: several query tokens
        per sequence (draft tokens), causal among themselves (see
        :func:`~paged_attention.validation.check_decode_args`). A program's tile
        holds every query token x query head of its KV head, so each K/V byte is
        still read once per sequence, not once per token. ``None``: one each.
    shared_prefixes : "detect" or sequence of PrefixGroup, optional
        Read the blocks that groups of sequences share once per group in a prefix
        pass (see :func:`prepare_triton_decode`); ``None`` (default) reads every
        sequence's blocks on their own.

    Returns
    -------
    Tensor
        The query's shape and dtype; accumulation is
        float32 (IEEE for float32 inputs). An empty context gives a zero row (with
        sinks too).

    Raises
    ------
    ValueError
        On invalid arguments (:func:`~paged_attention.validation.check_decode_args`),
        before any kernel runs.
    """
    return prepare_triton_decode(
        query, k_cache, v_cache, block_tables, context_lens, scale=scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens, shared_prefixes=shared_prefixes,
    )()
