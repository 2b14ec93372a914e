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
) -> torch.Tensor:
    """One decode step of paged attention, computed in float64.

    For each sequence ``b`` and query head ``h``, token ``t < context_lens[b]`` lives at
    ``k_cache[block_tables[b, t // block_size], t % block_size, h // group]`` with
    ``group = num_heads // num_kv_heads``, and the output is
    ``softmax(scale * K q) @ V`` over those tokens. An fp8 cache is dequantized in
    float64: with float32 scales the product ``stored * scale`` is exact (at most
    4 + 24 significant bits); a Python-float scale rounds once, at float64 precision.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16, float32 or float64.
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

    Returns
    -------
    Tensor
        ``[batch_size, num_heads, head_dim]`` float64 on the query's device.

    Raises
    ------
    ValueError
        On invalid arguments (see :func:`paged_attention.validation.check_decode_args`).
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale,
        k_scale=k_scale, v_scale=v_scale, allow_float64=True,
    )
    group = shape.query_group_size
    out = torch.zeros(query.shape, dtype=torch.float64, device=query.device)
    if shape.is_fp8:  # [num_kv_heads, 1] scales, broadcast over tokens and dims
        k_scales, v_scales = (s.to(query.device)[:, None] for s in (shape.k_scale, shape.v_scale))
    for b in range(shape.batch_size):
        n = int(shape.context_lens[b])
        if n == 0:
            continue
        tokens = torch.arange(n)
        blocks = shape.block_tables[b, tokens // shape.block_size].to(query.device)
        slots = (tokens % shape.block_size).to(query.device)
        keys = k_cache[blocks, slots].double()  # [n, num_kv_heads, head_dim]
        values = v_cache[blocks, slots].double()
        if shape.is_fp8:
            keys, values = keys * k_scales, values * v_scales
        # Query head h = kv * group + g reads KV head kv.
        q = query[b].double().reshape(shape.num_kv_heads, group, shape.head_dim)
        scores = torch.einsum("kgd,nkd->kgn", q, keys) * shape.scale
        weights = torch.softmax(scores, dim=-1)
        out[b] = torch.einsum("kgn,nkd->kgd", weights, values).reshape(shape.num_heads, shape.head_dim)
    return out
