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
    query_lens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Paged-attention decode, the way one first writes it.

    Walks each sequence's block table block by block in Python, gathers the blocks
    with ``torch.cat``, pads every sequence to the longest context, and runs masked
    ``torch.matmul`` attention in float32. An fp8 cache is dequantized in float32
    after the gather (``stored * scale``). With a ``window`` the walk starts at the
    block holding the window's first position, so no table entry before it is read;
    the soft-cap applies to the scaled logits and the sink logit joins the softmax
    as one more column, whose weight is dropped. Several query tokens per
    sequence (``query_lens``) are padded per sequence too and masked causally.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32;
        ``[sum(query_lens), num_heads, head_dim]`` with ``query_lens``.
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
    query_lens : Tensor, optional
        int32 or int64 ``[batch_size]``: query tokens per sequence (see
        :func:`~paged_attention.validation.check_decode_args`); ``None``: one each.

    Returns
    -------
    Tensor
        The query's shape and dtype.

    Raises
    ------
    ValueError
        On invalid arguments (see :func:`paged_attention.validation.check_decode_args`).
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens,
    )
    batch, num_heads, head_dim = shape.batch_size, shape.num_heads, shape.head_dim
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

    # Query token t of sequence b (row query_starts[b] + t) sees positions
    # starts[b, t] .. ends[b, t] - 1; slot j of b's padded K/V holds window_starts[b] + j.
    q_lens, max_q = shape.query_lens_or_ones, max(shape.max_query_len, 1)
    rows = torch.zeros(batch, max_q, num_heads, head_dim, dtype=torch.float32, device=device)
    for b in range(batch):
        first_row = int(shape.query_starts[b])
        rows[b, : int(q_lens[b])] = query[first_row : first_row + int(q_lens[b])].float()
    ends = shape.context_lens[:, None] - q_lens[:, None] + 1 + torch.arange(max_q)[None, :]  # [batch, max_q]
    starts = torch.zeros_like(ends) if shape.window is None else (ends - shape.window).clamp_min(0)
    positions = shape.window_starts[:, None] + torch.arange(max_len)[None, :]  # [batch, max_len]
    valid = ((positions[:, None, :] < ends[:, :, None]) & (positions[:, None, :] >= starts[:, :, None])
             & (torch.arange(max_len)[None, None, :] < lens[:, None, None]))  # [batch, max_q, max_len]

    # Each query head h reads KV head h // group.
    keys = keys.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)  # [b, heads, len, dim]
    values = values.repeat_interleave(group, dim=2).permute(0, 2, 1, 3)
    scores = torch.matmul(rows.permute(0, 2, 1, 3), keys.transpose(-1, -2)) * shape.scale  # [b, heads, max_q, len]
    if shape.soft_cap is not None:
        scores = shape.soft_cap * torch.tanh(scores / shape.soft_cap)
    scores = scores.masked_fill(~valid[:, None].to(device), float("-inf"))
    if sinks is not None:  # one more logit per head, whose value is zero: drop its weight
        scores = torch.cat([scores, sinks.float()[None, :, None, None].expand(batch, num_heads, max_q, 1)], dim=-1)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)[..., :max_len]  # empty rows: all -inf -> NaN -> 0
    padded = torch.matmul(weights, values)  # [b, heads, max_q, dim]
    out = torch.empty(query.shape, dtype=query.dtype, device=device)
    for b in range(batch):
        first_row = int(shape.query_starts[b])
        out[first_row : first_row + int(q_lens[b])] = padded[b, :, : int(q_lens[b])].transpose(0, 1).to(query.dtype)
    return out
