"""FlashInfer as a peer: its paged decode (``BatchDecodeWithPagedKVCacheWrapper``,
CUDA-core or tensor-core) and its two-level cascade for shared prefixes
(``MultiLevelCascadeAttentionWrapper``), on our pools, which are its NHD paged
layout; the index arrays of our block table as FlashInfer reads them. Each setup
plans outside the timing and returns the call that runs ``run()`` only."""

from __future__ import annotations

import torch

from benchmarks.peers import Skipped
from benchmarks.peers.options import unsupported
from paged_attention import cdiv

FLASHINFER_MISSING = "flashinfer not installed: pip install flashinfer-python, or see ../shared/tools/flashinfer-carry.sh"
#: FlashInfer's rows and the ``use_tensor_cores`` of each.
FLASHINFER = {"flashinfer": False, "flashinfer_tc": True}
#: Float workspace of a FlashInfer wrapper (split-KV partial results): its documented 128 MB.
FLASHINFER_WORKSPACE_BYTES = 128 << 20


def load_flashinfer():
    """``import flashinfer``, or None after printing one note (its rows are then skipped)."""
    try:
        import flashinfer
    except ModuleNotFoundError as exc:
        if exc.name == "flashinfer":
            print(FLASHINFER_MISSING, flush=True)
            return None
        print(f"flashinfer does not import (a package it needs is missing: {exc}); its rows are skipped", flush=True)
        return None
    except Exception as exc:  # installed but broken: a CUDA library, a torch it was not built for
        print(f"flashinfer does not import ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
              "its rows are skipped", flush=True)
        return None
    return flashinfer


def flashinfer_page_indices(
    block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Our block table as FlashInfer's paged-KV index arrays (CSR over the batch).

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64. Only each sequence's first
        ``ceil(context_len / block_size)`` entries are read; those past them may hold
        anything (-1, stale ids).
    context_lens : Tensor
        ``[batch_size]`` int32 or int64, each at most ``max_num_blocks * block_size``.
    block_size : int
        Tokens per block (FlashInfer's ``page_size``).

    Returns
    -------
    kv_indptr : Tensor
        ``[batch_size + 1]`` int32: sequence ``b``'s pages are
        ``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]``.
    kv_indices : Tensor
        ``[kv_indptr[-1]]`` int32: the physical block ids of every sequence's needed
        blocks, in table order, sequence after sequence.
    kv_last_page_len : Tensor
        ``[batch_size]`` int32: tokens in each sequence's last page, 1 to
        ``block_size``; 0 for an empty sequence, which gets no pages. FlashInfer
        reads a request with no pages as length 0 and writes it a zero row, as the
        reference does (0.7.4's sources: ``paged_kv_t::get_length`` and the decode
        state's normalisation); the accuracy check confirms it on the GPU.

    All three on ``block_tables``' device.
    """
    device = block_tables.device
    lens = context_lens.to(device, torch.int64)
    needed = cdiv(lens, block_size)
    used = torch.arange(block_tables.shape[1], device=device)[None, :] < needed[:, None]
    kv_indices = block_tables[used].to(torch.int32)  # row-major: sequence by sequence
    kv_indptr = torch.zeros(lens.numel() + 1, dtype=torch.int32, device=device)
    kv_indptr[1:] = needed.cumsum(0)
    kv_last_page_len = torch.where(lens > 0, (lens - 1) % block_size + 1, 0).to(torch.int32)
    return kv_indptr, kv_indices, kv_last_page_len


def flashinfer_decode(flashinfer, inputs, shape, scales, attn=None, *, use_tensor_cores: bool):
    """FlashInfer's paged decode on our cache, planned here; the callable runs ``run()`` only.

    Our ``[num_blocks, block_size, num_kv_heads, head_dim]`` pools are FlashInfer's
    NHD paged layout and go in as a ``(k_cache, v_cache)`` tuple. ``plan()`` gets the
    query's dtype as ``q_data_type`` and the cache's as ``kv_data_type`` (an fp8
    dtype for an fp8 cache). ``run()`` takes an fp8 cache's per-tensor scales as
    floats: FlashInfer multiplies its softmax scale by ``k_scale`` and, in a second
    elementwise kernel inside the timed call, the output by ``v_scale``.

    The attention keywords ``attn`` (:mod:`benchmarks.peers.options`) go to
    ``plan()``, only those given: a window of W tokens as ``window_left=W - 1``
    (FlashInfer's window is the tokens left of the query besides its own; its mask
    keeps ``kv_idx + window_left >= kv_len - 1``, 0.7.4's ``variants.cuh``), a soft
    cap as ``logits_soft_cap`` (``cap * tanh(scale * q.k / cap)``, the same).

    Raises
    ------
    Skipped
        A float32 query, per-head scales (FlashInfer's decode takes one float each
        for K and V), or sinks (its fa2 and CUDA-core decode do not apply them).
    """
    q, k_cache, v_cache, tables, lens = inputs.args()
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise Skipped(f"FlashInfer's decode takes float16 or bfloat16 queries, not {str(q.dtype).removeprefix('torch.')}")
    attn = attn or {}
    note = unsupported(attn, "FlashInfer's decode wrapper (fa2 and CUDA-core paths)", window=True, soft_cap=True,
                       sinks=False)
    if note:
        raise Skipped(note)
    plan_kw = {}
    if "window" in attn:
        plan_kw["window_left"] = attn["window"] - 1
    if "soft_cap" in attn:
        plan_kw["logits_soft_cap"] = attn["soft_cap"]
    run_kw = {}
    if scales:
        if any(isinstance(s, torch.Tensor) for s in scales.values()):
            raise Skipped("FlashInfer's decode takes one k_scale and one v_scale per tensor (floats), not per KV head")
        run_kw = {name: float(value) for name, value in scales.items()}
    kv_indptr, kv_indices, kv_last_page_len = flashinfer_page_indices(tables, lens, shape.block_size)
    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_tensor_cores=use_tensor_cores)
    wrapper.plan(
        kv_indptr, kv_indices, kv_last_page_len, shape.num_heads, shape.num_kv_heads, shape.head_dim,
        shape.block_size, q_data_type=q.dtype, kv_data_type=k_cache.dtype, sm_scale=shape.scale, **plan_kw,
    )
    out = torch.empty_like(q)
    cache = (k_cache, v_cache)
    run = lambda: wrapper.run(q, cache, out=out, **run_kw)  # noqa: E731
    run.backend = getattr(wrapper, "resolved_backend", None)
    return run


def cascade_page_indices(
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    block_size: int,
    shared_blocks: int,
    prefix_group_of: tuple[int, ...],
) -> dict[str, list[torch.Tensor]]:
    """Our shared-prefix block table as the index arrays of FlashInfer's
    ``MultiLevelCascadeAttentionWrapper.plan`` (CSR per level).

    Level 0 holds each prefix group's ``shared_blocks`` shared pages once (the
    group's first member's first table columns), as one request whose query rows
    are all the group's sequences; level 1 holds each sequence's own pages, the
    table columns from ``shared_blocks`` to its last needed block (the block with
    the prefix's last tokens included), one query row each. FlashInfer merges the
    two levels' partial softmax states. Without shared blocks (``shared_blocks``
    0) there is one level: every sequence's pages.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; entries past each
        sequence's needed blocks may hold anything.
    context_lens : Tensor
        ``[batch_size]``; each at least ``shared_blocks * block_size``.
    block_size : int
        Tokens per block (FlashInfer's ``page_size``).
    shared_blocks : int
        Whole prefix blocks each group shares (``DecodeConfig.shared_blocks``).
    prefix_group_of : tuple of int
        Every sequence's prefix group, non-decreasing (groups are runs of
        consecutive sequences; ``DecodeConfig.prefix_group_of``).

    Returns
    -------
    dict of lists, one tensor per level, all int32 on ``block_tables``' device
        ``qo_indptr``: ``[requests + 1]``, query rows of each request;
        ``kv_indptr``: ``[requests + 1]``; ``kv_indices``: the pages;
        ``kv_last_page_len``: ``[requests]``, tokens in each request's last page
        (``block_size`` for shared pages; 0 for a request with no pages). The
        keys follow ``plan()``'s first four arguments in order.

    Raises
    ------
    ValueError
        If the groups are not runs of consecutive sequences.
    """
    device = block_tables.device
    lens = context_lens.to(device, torch.int64)
    batch = lens.numel()
    groups = torch.tensor(prefix_group_of, dtype=torch.int64, device=device)
    if groups.numel() != batch or bool((groups[1:] < groups[:-1]).any()):
        raise ValueError("prefix_group_of must give one non-decreasing group per sequence")
    own_lens = lens - shared_blocks * block_size
    own_pages = cdiv(own_lens, block_size)
    cols = torch.arange(block_tables.shape[1], device=device)[None, :]
    own = (cols >= shared_blocks) & (cols < shared_blocks + own_pages[:, None])
    unique_level = dict(
        qo_indptr=torch.arange(batch + 1, dtype=torch.int32, device=device),
        kv_indptr=torch.cat([own_pages.new_zeros(1), own_pages.cumsum(0)]).to(torch.int32),
        kv_indices=block_tables[own].to(torch.int32),
        kv_last_page_len=torch.where(own_lens > 0, (own_lens - 1) % block_size + 1, 0).to(torch.int32),
    )
    levels = [unique_level]
    if shared_blocks > 0:
        first = torch.ones(batch, dtype=torch.bool, device=device)
        first[1:] = groups[1:] != groups[:-1]
        starts = torch.nonzero(first).flatten()
        sizes = torch.diff(torch.cat([starts, torch.tensor([batch], device=device)]))
        num_groups = starts.numel()
        levels.insert(0, dict(
            qo_indptr=torch.cat([sizes.new_zeros(1), sizes.cumsum(0)]).to(torch.int32),
            kv_indptr=(torch.arange(num_groups + 1, device=device) * shared_blocks).to(torch.int32),
            kv_indices=block_tables[starts, :shared_blocks].reshape(-1).to(torch.int32),
            kv_last_page_len=torch.full((num_groups,), block_size, dtype=torch.int32, device=device),
        ))
    return {key: [level[key] for level in levels] for key in unique_level}


def flashinfer_cascade(flashinfer, inputs, shape, scales, attn=None):
    """FlashInfer's ``MultiLevelCascadeAttentionWrapper`` on our shared-prefix cache,
    planned here; the callable runs ``run()`` only.

    Two levels (:func:`cascade_page_indices`): each group's shared pages with all
    its query rows attached, then each sequence's own pages; one level when nothing
    is shared. NHD layout, the pools as a ``(k_cache, v_cache)`` tuple,
    ``q_data_type`` and ``kv_data_type`` the query's and the cache's dtypes,
    ``causal=False`` (one query row per sequence, after every cached token).

    Raises
    ------
    Skipped
        A float32 query, an fp8 cache (the cascade's ``run()`` takes no scales), or
        any attention option (not wired here).
    """
    q, k_cache, v_cache, tables, lens = inputs.args()
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise Skipped(f"FlashInfer's cascade takes float16 or bfloat16 queries, not {str(q.dtype).removeprefix('torch.')}")
    if scales:
        raise Skipped("FlashInfer's cascade run() takes no k_scale or v_scale (no fp8 cache)")
    note = unsupported(attn or {}, "this FlashInfer cascade setup", window=False, soft_cap=False, sinks=False)
    if note:
        raise Skipped(note)
    config = inputs.config
    levels = cascade_page_indices(tables, lens, shape.block_size, config.shared_blocks, config.prefix_group_of)
    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.MultiLevelCascadeAttentionWrapper(len(levels["qo_indptr"]), workspace, "NHD")
    wrapper.plan(
        levels["qo_indptr"], levels["kv_indptr"], levels["kv_indices"], levels["kv_last_page_len"],
        shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size,
        causal=False, sm_scale=shape.scale, q_data_type=q.dtype, kv_data_type=k_cache.dtype,
    )
    cache = (k_cache, v_cache)
    return lambda: wrapper.run(q, cache)
