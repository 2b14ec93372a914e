"""The shared-prefix pass: its Triton kernel and its launch.

``triton_decode(..., shared_prefixes=...)`` runs this pass before the decode
kernel. A program holds up to ``MEMBERS`` sequences of one shared-prefix group x
the query heads of one KV head as the rows of one tile, and attends them to one
piece of the group's shared blocks, so each shared byte is read once per tile of
rows rather than once per sequence. Every row writes its partial ``(max, sum,
acc)`` to its sequence's slot; the decode kernel merges them with the sequence's
own (and adds the sinks there). With a window each row scores only the positions
its window holds, and the pieces skip the shared blocks before every member's.
The groups and the pass's plan are made on the host in
:mod:`paged_attention.shared_prefix`, its programs in
:func:`~paged_attention.work_list.prefix_work`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from . import runtime  # noqa: F401  (first: sets TRITON_INTERPRET before triton loads)
import triton
import triton.language as tl

from .tile_walk import LOG2E, attend_blocks, fp32_dot
from .tiling import dot_pad, next_pow2
from .work_list import (
    PREFIX_FIRST_BLOCK, PREFIX_FIRST_MEMBER, PREFIX_LAST_BLOCK, PREFIX_NUM_MEMBERS, PREFIX_SLOT, PREFIX_WIDTH,
    SEQUENCE_FIRST_SLOT, SEQUENCE_WIDTH,
)

if TYPE_CHECKING:
    from .triton_launch import TritonLaunch


@triton.jit
def _prefix_decode_kernel(
    part_ml_ptr, part_acc_ptr,
    q_ptr, k_ptr, v_ptr, block_tables_ptr, context_lens_ptr, k_scale_ptr, v_scale_ptr,
    items_ptr, members_ptr, sequences_ptr,
    scale_log2e, soft_cap, window,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_tb,
    QUERY_GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, MEMBERS: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCKS_PER_TILE: tl.constexpr, SLOTS_PER_TILE: tl.constexpr,
    SUBTILES: tl.constexpr, FP32_DOT: tl.constexpr, EVEN_D: tl.constexpr, KV_FP8: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFT_CAP: tl.constexpr,
):
    # One program: up to MEMBERS sequences of a shared-prefix group x the query
    # heads of one KV head, as MEMBERS * GROUP_POW2 rows of one tile, against one
    # piece of the group's shared blocks. Each row writes its partial result to its
    # sequence's slot; the decode kernel launched next merges them.
    kv_head = tl.program_id(0)
    item = tl.program_id(1)
    num_kv_heads = tl.num_programs(0)
    num_heads = num_kv_heads * QUERY_GROUP
    item_row = items_ptr + item * PREFIX_WIDTH
    first_member = tl.load(item_row + PREFIX_FIRST_MEMBER)
    num_members = tl.load(item_row + PREFIX_NUM_MEMBERS)
    first_block = tl.load(item_row + PREFIX_FIRST_BLOCK)
    slot = tl.load(item_row + PREFIX_SLOT)

    rows = tl.arange(0, MEMBERS * GROUP_POW2)
    member = rows // GROUP_POW2
    g = rows % GROUP_POW2
    member_ok = member < num_members
    row_ok = member_ok & (g < QUERY_GROUP)
    seq = tl.load(members_ptr + first_member + member, mask=member_ok, other=0).to(tl.int64)
    row_lens = tl.load(context_lens_ptr + seq, mask=row_ok, other=0)
    longest = tl.max(row_lens, 0)
    last_block = tl.minimum(tl.load(item_row + PREFIX_LAST_BLOCK), tl.cdiv(longest, BLOCK_SIZE))
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
    if HAS_WINDOW:
        # Each row scores from its own window's start (live lengths); the tile
        # loads from the earliest, and walks the table row of a member whose window
        # starts there: it needs, so holds valid ids for, every shared block from
        # there on (the others' entries before their windows may be freed, -1).
        row_starts = tl.maximum(row_lens - window, 0)
        starts = tl.where(row_ok, row_starts, 2**31 - 1)
        earliest = tl.min(starts, 0)
        first_block = tl.maximum(first_block, earliest // BLOCK_SIZE)
        table_seq = tl.min(tl.where(row_ok & (starts == earliest), seq, 2**62), 0)
    else:
        row_starts = row_lens  # unread
        earliest = 0
        # Every member maps the shared blocks alike: walk the first member's table row.
        table_seq = tl.load(members_ptr + first_member).to(tl.int64)
    table_row = block_tables_ptr + table_seq * stride_tb
    m_i, l_i, acc = attend_blocks(
        q, m_i, l_i, acc, k_ptr, v_ptr, kv_head, table_row, first_block, last_block,
        longest, row_lens, earliest, row_starts, scale_log2e, soft_cap, dims, dim_mask,
        stride_kb, stride_ks, stride_kh, stride_kd, stride_vb, stride_vs, stride_vh, stride_vd,
        BLOCK_SIZE, BLOCKS_PER_TILE, SLOTS_PER_TILE, SUBTILES, EVEN_D, FP32_DOT, KV_FP8, True,
        HAS_WINDOW, SOFT_CAP,
    )
    if KV_FP8:
        acc = acc * tl.load(v_scale_ptr + kv_head)
    first_slot = tl.load(sequences_ptr + seq * SEQUENCE_WIDTH + SEQUENCE_FIRST_SLOT, mask=row_ok, other=0)
    base = (first_slot + slot).to(tl.int64) * num_heads + heads
    tl.store(part_ml_ptr + base * 2, m_i, mask=row_ok)
    tl.store(part_ml_ptr + base * 2 + 1, l_i, mask=row_ok)
    tl.store(part_acc_ptr + base[:, None] * HEAD_DIM_PAD + dims[None, :], acc,
             mask=row_ok[:, None] & dim_mask[None, :])


def prepare_prefix_pass(
    launch: TritonLaunch,
    part_ml: torch.Tensor,
    part_acc: torch.Tensor,
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    k_scales: torch.Tensor,
    v_scales: torch.Tensor,
    items: torch.Tensor,
    members: torch.Tensor,
    sequences: torch.Tensor,
) -> Callable[[], None]:
    """Bind the prefix pass of ``launch`` to its buffers; return its launcher.

    Parameters
    ----------
    launch : TritonLaunch
        From :func:`~paged_attention.triton_launch.plan_triton_decode`, with a
        prefix pass (``launch.prefix`` set).
    part_ml, part_acc : Tensor
        The split buffers, float32 ``[num_slots, num_heads, 2]`` and ``[num_slots,
        num_heads, head_dim_pad]``, on the query's device.
    query, k_cache, v_cache, block_tables, context_lens : Tensor
        The decode inputs (table and lengths contiguous).
    k_scales, v_scales : Tensor
        float32 ``[num_kv_heads]`` for an fp8 cache; any tensor otherwise (unread).
    items, members, sequences : Tensor
        ``launch.prefix.items``, ``launch.prefix.members`` and
        ``launch.work.sequences`` on the query's device.

    Returns
    -------
    callable
        ``launch_prefix() -> None``: one launch of ``_prefix_decode_kernel``,
        grid ``(num_kv_heads, launch.prefix.num_items)``.
    """
    shape, plan = launch.shape, launch.prefix_plan
    head_dim_pad = dot_pad(shape.head_dim)
    grid = (shape.num_kv_heads, launch.prefix.num_items)
    scale_log2e = shape.scale * LOG2E
    options = dict(
        QUERY_GROUP=shape.query_group_size, GROUP_POW2=next_pow2(shape.query_group_size),
        MEMBERS=launch.members_per_tile, HEAD_DIM=shape.head_dim, HEAD_DIM_PAD=head_dim_pad,
        BLOCK_SIZE=shape.block_size, BLOCKS_PER_TILE=plan.blocks_per_tile, SLOTS_PER_TILE=plan.slots_per_tile,
        SUBTILES=plan.subtiles, FP32_DOT=fp32_dot(query.dtype), EVEN_D=shape.head_dim == head_dim_pad,
        KV_FP8=shape.is_fp8, HAS_WINDOW=shape.window is not None, SOFT_CAP=shape.soft_cap is not None,
        num_warps=plan.num_warps, num_stages=plan.num_stages,
    )
    cap = 0.0 if shape.soft_cap is None else shape.soft_cap  # unread without a cap
    window_len = 0 if shape.window is None else shape.window  # unread without a window

    def launch_prefix() -> None:
        _prefix_decode_kernel[grid](
            part_ml, part_acc,
            query, k_cache, v_cache, block_tables, context_lens, k_scales, v_scales,
            items, members, sequences,
            scale_log2e, cap, window_len,
            *query.stride(), *k_cache.stride(), *v_cache.stride(),
            block_tables.stride(0),
            **options,
        )

    return launch_prefix
