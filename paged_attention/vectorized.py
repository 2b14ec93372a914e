"""Optimized PyTorch decode: one gather for the whole batch, then PyTorch's fused attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .validation import DecodeShape, check_decode_args, kv_scale_tensors


def vectorized_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Paged-attention decode with no Python loop over blocks or sequences.

    One ``index_select`` per cache pulls the whole batch's K/V (the first
    ``ceil(max_context_len / block_size)`` table columns of every sequence), viewed
    as ``[batch, num_kv_heads, tokens, head_dim]``; PyTorch's fused
    ``scaled_dot_product_attention`` (with ``enable_gqa``, so GQA/MQA cost no copy of
    K/V) computes the step. When the rows have equal lengths every block read is
    needed: whole blocks are gathered, the tail of the last is sliced off and no
    mask is needed. In a ragged batch token slots are gathered, each slot past a
    context reads that sequence's first token instead (so nothing the batch's
    contexts do not cover is ever read: ``0 * NaN`` cannot happen), and those slots
    get an additive ``-inf`` mask. The mask must be additive: with a boolean
    mask, PyTorch's CUDA kernel (cuDNN on an H200, torch 2.11) let the padding win
    when every real logit is near -1e5 (``benchmarks/extreme_logits.py``), while
    the additive ``-inf`` mask is exact there. A row with context length 0 is zero.

    Memory traffic is about three times the K/V bytes (the gather reads and writes
    them, the attention reads them again): the cost of paging without a paged
    kernel. An fp8 cache is gathered as bytes and dequantized (``stored * scale``)
    to float32, and the attention runs in float32: SDPA takes no fp8, and rounding
    the dequantized values to 16 bits would add an error the kernels do not make.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, the query's dtype or fp8.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    scale : float, optional
        Softmax scale, ``1 / sqrt(head_dim)`` by default.
    k_scale, v_scale : float or Tensor, optional
        Dequantization scales of an fp8 cache (see
        :func:`paged_attention.validation.check_decode_args`).

    Returns
    -------
    Tensor
        ``[batch_size, num_heads, head_dim]`` in the query's dtype.

    Raises
    ------
    ValueError
        On invalid arguments (see :func:`paged_attention.validation.check_decode_args`).
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale
    )
    scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    return vectorized_decode_unchecked(query, k_cache, v_cache, block_tables, context_lens, shape, *scales)


def vectorized_decode_unchecked(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    shape: DecodeShape,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`vectorized_decode` after validation; no host synchronisation, so a CUDA
    graph can capture it. ``k_scale``/``v_scale``: float32 ``[num_kv_heads]`` on the
    query's device, for an fp8 cache."""
    batch, num_heads, head_dim = query.shape
    kv_heads, block_size = shape.num_kv_heads, shape.block_size
    if shape.max_context_len == 0:
        return torch.zeros_like(query)
    longest = shape.max_context_len
    cols = -(-longest // block_size)
    tokens = cols * block_size
    # The host copy of the lengths says whether the rows differ in length. When they
    # do not, every table entry read is needed and the tail of the last block is
    # sliced off, so there is no padding, no mask, and SDPA takes its fastest kernel.
    ragged = shape.min_context_len != longest
    if shape.is_fp8:  # gather the bytes; dequantize after the gather
        k_cache, v_cache = k_cache.view(torch.uint8), v_cache.view(torch.uint8)
    if not ragged:
        # One gather of whole blocks (contiguous rows of the pool) per cache, viewed
        # as [batch, kv_heads, tokens, head_dim] without a copy.
        table = block_tables[:, :cols].reshape(-1)
        keys = k_cache.index_select(0, table)
        values = v_cache.index_select(0, table)
    else:
        keys, values = _gather_ragged(k_cache, v_cache, block_tables, context_lens, cols, block_size)
    if shape.is_fp8:
        # SDPA takes no fp8, and rounding ``stored * scale`` to a 16-bit dtype would
        # add an error the kernels do not make: attend in float32.
        keys = keys.view(shape.kv_dtype).float() * k_scale[:, None]
        values = values.view(shape.kv_dtype).float() * v_scale[:, None]
    keys = keys.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
    values = values.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
    bias = None
    if not ragged:
        keys, values = keys[:, :, :longest], values[:, :, :longest]
    else:
        # An additive -inf on padding slots. A boolean mask here let PyTorch's fused
        # kernel use a finite sentinel, which real logits near -1e5 fell below.
        padding = torch.arange(tokens, device=query.device)[None, :] >= context_lens[:, None]
        bias = torch.zeros(batch, 1, 1, tokens, dtype=keys.dtype, device=query.device)
        bias.masked_fill_(padding[:, None, None, :], float("-inf"))
    out = F.scaled_dot_product_attention(
        query[:, :, None, :].to(keys.dtype), keys, values, attn_mask=bias, scale=shape.scale, enable_gqa=True
    ).view(batch, num_heads, head_dim).to(query.dtype)
    if shape.min_context_len == 0:
        # A row with no valid key comes out NaN (0/0): zero by contract.
        out = out.masked_fill(context_lens.view(batch, 1, 1) == 0, 0.0)
    return out



def _gather_ragged(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    cols: int,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather ``cols * block_size`` token slots per sequence, padding included.

    Padding slots get weight 0 in the softmax, and ``0 * NaN = NaN``: what they
    read must be finite. So every slot past a sequence's context reads that
    sequence's first token (which its context covers) instead of the pool's
    memory there, which may hold anything: stale tails of the last block, and
    blocks that table entries past the context (-1, stale ids, ids past the pool)
    name. A row of length 0 is masked whole and zeroed after the attention, so any
    slot of the pool will do for it. One gather of token rows per cache.

    Returns
    -------
    keys, values : Tensor
        ``[batch_size * cols * block_size, num_kv_heads, head_dim]``.
    """
    num_blocks = k_cache.shape[0]
    device = block_tables.device
    tokens = torch.arange(cols * block_size, device=device)
    blocks = block_tables[:, :cols].long().repeat_interleave(block_size, dim=1)  # [batch, tokens]
    slots = tokens % block_size
    inside = tokens[None, :] < context_lens.long()[:, None]
    blocks = torch.where(inside, blocks, blocks[:, :1]).clamp_(0, num_blocks - 1).reshape(-1)
    slots = torch.where(inside, slots[None, :], 0).reshape(-1)
    gathered = []
    for cache in (k_cache, v_cache):
        if cache.stride(0) == block_size * cache.stride(1):  # (block, slot) folds into one dim
            flat = cache.as_strided((num_blocks * block_size, *cache.shape[2:]), cache.stride()[1:])
            gathered.append(flat.index_select(0, blocks * block_size + slots))
        else:
            gathered.append(cache[blocks, slots])
    return gathered[0], gathered[1]
