"""Optimized PyTorch decode: one gather for the whole batch, then batched float32 attention."""

from __future__ import annotations

import torch

from .validation import DecodeShape, check_decode_args


def vectorized_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Paged-attention decode with no Python loop over blocks or sequences.

    One advanced-indexing gather pulls every needed block of the whole batch (the
    first ``ceil(max_context_len / block_size)`` table columns) into a padded
    ``[batch, tokens, num_kv_heads, head_dim]`` tensor; a length mask hides the
    padding and the slots past each context; two batched products with float32
    results and a float32 softmax compute the step, with a true ``-inf`` mask
    (PyTorch's fused SDPA was tried: on CUDA its masked lanes beat real logits near
    -1e5 and read the padding). GQA costs no copy: the ``group`` query heads of one
    KV head are laid out as ``group`` query rows of that head.

    Parameters
    ----------
    query : Tensor
        ``[batch_size, num_heads, head_dim]``, float16, bfloat16 or float32.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    scale : float, optional
        Softmax scale, ``1 / sqrt(head_dim)`` by default.

    Returns
    -------
    Tensor
        ``[batch_size, num_heads, head_dim]`` in the query's dtype.

    Raises
    ------
    ValueError
        On invalid arguments (see :func:`paged_attention.validation.check_decode_args`).
    """
    shape = check_decode_args(query, k_cache, v_cache, block_tables, context_lens, scale)
    return vectorized_decode_unchecked(query, k_cache, v_cache, block_tables, context_lens, shape)


def vectorized_decode_unchecked(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    shape: DecodeShape,
) -> torch.Tensor:
    """:func:`vectorized_decode` after validation; no host synchronisation, so a CUDA
    graph can capture it."""
    batch, num_heads, head_dim = query.shape
    kv_heads, group, block_size = shape.num_kv_heads, shape.query_group_size, shape.block_size
    if shape.max_context_len == 0:
        return torch.zeros_like(query)
    cols = -(-shape.max_context_len // block_size)
    tokens = cols * block_size
    # Entries past a sequence's needed blocks may hold anything (-1, stale ids): point
    # them at block 0, whose values the length mask hides, instead of letting Python
    # indexing wrap -1 to the last block or run past the pool.
    needed = (context_lens.long() + block_size - 1) // block_size
    in_use = torch.arange(cols, device=query.device)[None, :] < needed[:, None]
    table = torch.where(in_use, block_tables[:, :cols].long(), 0)
    # Gather straight into [kv_heads * batch, tokens, head_dim]: one contiguous matrix
    # per (KV head, sequence), so the products below are plain strided batches.
    keys = k_cache.permute(2, 0, 1, 3)[:, table].reshape(kv_heads * batch, tokens, head_dim)
    values = v_cache.permute(2, 0, 1, 3)[:, table].reshape(kv_heads * batch, tokens, head_dim)
    # GQA without a copy of K/V: the group's query heads are rows of one product.
    q = query.reshape(batch, kv_heads, group, head_dim).transpose(0, 1).reshape(kv_heads * batch, group, head_dim)

    scores = _bmm_float32(q, keys.transpose(1, 2)) * shape.scale  # [kv_heads * batch, group, tokens]
    valid = torch.arange(tokens, device=query.device)[None, :] < context_lens[:, None]  # [batch, tokens]
    scores = scores.view(kv_heads, batch, group, tokens).masked_fill(~valid[None, :, None, :], float("-inf"))
    # A row with no valid key is all -inf: softmax gives NaN, zero by contract.
    weights = torch.softmax(scores, dim=-1).nan_to_num_(0.0).view(kv_heads * batch, group, tokens)
    # Like a fused kernel, the P.V product takes P in the cache's dtype.
    out = _bmm_float32(weights.to(values.dtype), values)  # [kv_heads * batch, group, head_dim]
    return out.view(kv_heads, batch, group, head_dim).transpose(0, 1).reshape(batch, num_heads, head_dim).to(query.dtype)


_OUT_DTYPE_BMM: dict[tuple[str, torch.dtype], bool] = {}


def _bmm_float32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (batched) with float32 accumulation and a float32 result.

    Scores of float16 inputs can exceed float16's range (65504), so the product must
    not be rounded to the input dtype. On CUDA ``torch.bmm(..., out_dtype=float32)``
    reads the 16-bit operands as they are; where that overload is missing (the CPU)
    the operands are upcast first.
    """
    if a.dtype == torch.float32:
        return torch.bmm(a, b)
    key = (a.device.type, a.dtype)
    if _OUT_DTYPE_BMM.get(key, True):
        try:
            out = torch.bmm(a, b, out_dtype=torch.float32)
            _OUT_DTYPE_BMM[key] = True
            return out
        except (RuntimeError, TypeError, NotImplementedError):
            _OUT_DTYPE_BMM[key] = False
    return torch.bmm(a.float(), b.float())
