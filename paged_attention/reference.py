"""The oracle: paged-attention decode in float64, written for clarity."""

from __future__ import annotations

import torch

from .validation import check_decode_args


def reference_decode(
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
    """One decode step of paged attention, computed in float64.

    For each sequence ``b`` and query head ``h``, token ``t < context_lens[b]`` lives at
    ``k_cache[block_tables[b, t // block_size], t % block_size, h // group]`` with
    ``group = num_heads // num_kv_heads``, and the output is
    ``softmax(scale * K q) @ V`` over those tokens. With ``query_lens``, query token
    ``i`` of sequence ``b`` (at position ``p = context_len - query_len + i``) does
    the same over positions ``0 ... p``. With a ``window`` only the last ``window``
    of those positions are read; with a ``soft_cap`` the scaled
    logits become ``soft_cap * tanh(s / soft_cap)``; with ``sinks`` the softmax runs
    over the logits and ``sinks[h]``, whose weight multiplies a zero value. An fp8 cache is dequantized in
    float64: with float32 scales the product ``stored * scale`` is exact (at most
    4 + 24 significant bits); a Python-float scale rounds once, at float64 precision.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16, float32 or float64;
        ``[sum(query_lens), num_heads, head_dim]`` with ``query_lens``.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, the query's dtype, or
        float8_e4m3fn / float8_e5m2 with ``k_scale`` and ``v_scale``.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; ``-1`` marks unallocated
        entries, which must lie past each sequence's last needed block.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64; 0 gives an all-zero output row.
    scale : float, optional
        Softmax scale, ``1 / sqrt(head_dim)`` by default.
    k_scale, v_scale : float or Tensor, optional
        Dequantization scales of an fp8 cache: a number, or float32
        ``[num_kv_heads]`` (see :func:`~paged_attention.validation.check_decode_args`).
    window : int, optional
        Sliding window: the last ``window`` positions of each context.
    sinks : Tensor, optional
        float32 ``[num_heads]``: one attention-sink logit per query head.
    soft_cap : float, optional
        Logit soft-capping of the scaled logits.
    query_lens : Tensor, optional
        int32 or int64 ``[batch_size]``: query tokens per sequence (see
        :func:`~paged_attention.validation.check_decode_args`); ``None``: one each.

    Returns
    -------
    Tensor
        The query's shape, float64 on the query's device.

    Raises
    ------
    ValueError
        On invalid arguments (see :func:`paged_attention.validation.check_decode_args`).
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale,
        k_scale=k_scale, v_scale=v_scale, window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens,
        allow_float64=True,
    )
    group = shape.query_group_size
    out = torch.zeros(query.shape, dtype=torch.float64, device=query.device)
    if shape.is_fp8:  # [num_kv_heads, 1] scales, broadcast over tokens and dims
        k_scales, v_scales = (s.to(query.device)[:, None] for s in (shape.k_scale, shape.v_scale))
    for b in range(shape.batch_size):
        n, q_len = int(shape.context_lens[b]), int(shape.query_lens_or_ones[b])
        for i in range(q_len):
            row = int(shape.query_starts[b]) + i
            end = n - q_len + 1 + i  # this query token sees positions start .. end - 1
            start = 0 if shape.window is None else max(0, end - shape.window)
            if end == 0:
                continue
            tokens = torch.arange(start, end)
            blocks = shape.block_tables[b, tokens // shape.block_size].to(query.device)
            slots = (tokens % shape.block_size).to(query.device)
            keys = k_cache[blocks, slots].double()  # [tokens, num_kv_heads, head_dim]
            values = v_cache[blocks, slots].double()
            if shape.is_fp8:
                keys, values = keys * k_scales, values * v_scales
            # Query head h = kv * group + g reads KV head kv.
            q = query[row].double().reshape(shape.num_kv_heads, group, shape.head_dim)
            scores = torch.einsum("kgd,nkd->kgn", q, keys) * shape.scale
            if shape.soft_cap is not None:
                scores = shape.soft_cap * torch.tanh(scores / shape.soft_cap)
            if shape.sinks is not None:  # one more logit per head, attending to nothing
                sink = shape.sinks.to(query.device).reshape(shape.num_kv_heads, group, 1)
                scores = torch.cat([scores, sink], dim=-1)
            weights = torch.softmax(scores, dim=-1)[..., : len(tokens)]
            out[row] = torch.einsum("kgn,nkd->kgd", weights, values).reshape(shape.num_heads, shape.head_dim)
    return out
