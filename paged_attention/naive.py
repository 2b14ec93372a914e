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
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
) -> torch.Tensor:
    """Paged-attention decode, the way one first writes it.

    Walks each sequence's block table block by block in Python, gathers the blocks
    with ``torch.cat``, pads every sequence to the longest context, and runs masked
    ``torch.matmul`` attention in float32. An fp8 cache is dequantized in float32
    after the gather (``stored * scale``). With a ``window`` the walk starts at the
    block holding the window's first position, so no table entry before it is read;
    the soft-cap applies to the scaled logits and the sink logit joins the softmax
    as one more column, whose weight is dropped.

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
    window : int, optional
        Attend to the last ``window`` positions of each context only.
    sinks : Tensor, optional
        float32 ``[num_heads]`` on the query's device: one attention-sink logit
        per query head.
    soft_cap : float, optional
        Logit soft-capping, ``s <- soft_cap * tanh(s / soft_cap)``.

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
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap,
    )
    batch, num_heads, head_dim = query.shape
    num_kv_heads, group = shape.num_kv_heads, shape.query_group_size
    # Sequence b attends to positions start .. n - 1 (start 0 without a window),
    # held at rows 0 .. n - start - 1 of its padded K/V.
    lens = shape.attended_lens
    max_len = int(lens.max()) if batch else 0
    device = query.device

    keys = torch.zeros(batch, max_len, num_kv_heads, head_dim, dtype=torch.float32, device=device)
    values = torch.zeros_like(keys)
    for b in range(batch):
        n, first = int(shape.context_lens[b]), int(shape.first_blocks[b])
        if n == 0:
            continue
        k_blocks, v_blocks = [], []
        for i in range(first, cdiv(n, shape.block_size)):
            block_id = int(shape.block_tables[b, i])
            k_blocks.append(k_cache[block_id])  # [block_size, num_kv_heads, head_dim]
            v_blocks.append(v_cache[block_id])
        skip = int(shape.window_starts[b]) - first * shape.block_size  # the first block's slots before the window
        end = n - first * shape.block_size
        keys[b, : int(lens[b])] = torch.cat(k_blocks, dim=0)[skip:end].float()
        values[b, : int(lens[b])] = torch.cat(v_blocks, dim=0)[skip:end].float()

    if shape.is_fp8:
        k_scales, v_scales = kv_scale_tensors(shape, k_scale, v_scale, device)
        keys *= k_scales[:, None]
        values *= v_scales[:, None]

    # Each query head h reads KV head h // group.
    keys = keys.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)  # [b, heads, len, dim]
    values = values.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)
    scores = torch.matmul(keys, query.float().unsqueeze(-1)).squeeze(-1) * shape.scale
    if shape.soft_cap is not None:
        scores = shape.soft_cap * torch.tanh(scores / shape.soft_cap)
    valid = torch.arange(max_len, device=device)[None, :] < lens.to(device)[:, None]
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    if sinks is not None:  # one more logit per head, whose value is zero: drop its weight
        scores = torch.cat([scores, sinks.float()[None, :, None].expand(batch, num_heads, 1)], dim=-1)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)[..., :max_len]  # empty rows: all -inf -> NaN -> 0
    out = torch.matmul(weights.unsqueeze(-2), values).squeeze(-2)
    return out.to(query.dtype)
