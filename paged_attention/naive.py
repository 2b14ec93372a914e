"""Naive PyTorch decode: a Python loop over sequences and blocks. Slow on purpose."""

from __future__ import annotations

import torch

from .tiling import cdiv
from .validation import check_decode_args, kv_scale_tensors


def naive_decode(
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
    """Paged-attention decode, the way one first writes it.

    Walks each sequence's block table block by block in Python, gathers the blocks
    with ``torch.cat``, pads every sequence to the longest context, and runs masked
    ``torch.matmul`` attention in float32. An fp8 cache is dequantized in float32
    after the gather (``stored * scale``).

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
    batch, num_heads, head_dim = query.shape
    num_kv_heads, group = shape.num_kv_heads, shape.query_group_size
    max_len = shape.max_context_len
    device = query.device

    keys = torch.zeros(batch, max_len, num_kv_heads, head_dim, dtype=torch.float32, device=device)
    values = torch.zeros_like(keys)
    for b in range(batch):
        n = int(shape.context_lens[b])
        if n == 0:
            continue
        k_blocks, v_blocks = [], []
        for i in range(cdiv(n, shape.block_size)):
            block_id = int(shape.block_tables[b, i])
            k_blocks.append(k_cache[block_id])  # [block_size, num_kv_heads, head_dim]
            v_blocks.append(v_cache[block_id])
        keys[b, :n] = torch.cat(k_blocks, dim=0)[:n].float()
        values[b, :n] = torch.cat(v_blocks, dim=0)[:n].float()

    if shape.is_fp8:
        k_scales, v_scales = kv_scale_tensors(shape, k_scale, v_scale, device)
        keys *= k_scales[:, None]
        values *= v_scales[:, None]

    # Each query head h reads KV head h // group.
    keys = keys.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)  # [b, heads, len, dim]
    values = values.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)
    scores = torch.matmul(keys, query.float().unsqueeze(-1)).squeeze(-1) * shape.scale
    valid = torch.arange(max_len, device=device)[None, :] < shape.context_lens.to(device)[:, None]
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # empty rows: all -inf -> NaN -> 0
    out = torch.matmul(weights.unsqueeze(-2), values).squeeze(-2)
    return out.to(query.dtype)
