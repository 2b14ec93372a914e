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
    padding and the slots past each context; batched float32 products (``einsum``)
    and a softmax compute the step. GQA costs no copy: the ``group`` query heads of
    one KV head are laid out as ``group`` query rows of that head.

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
    cols = max(1, -(-shape.max_context_len // block_size))
    tokens = cols * block_size
    # Entries past a sequence's needed blocks may be -1: point them at block 0 (masked
    # below) instead of letting Python-style indexing wrap them to the last block.
    table = block_tables[:, :cols].long().clamp_min(0)
    keys = k_cache[table].reshape(batch, tokens, kv_heads, head_dim)
    values = v_cache[table].reshape(batch, tokens, kv_heads, head_dim)
    valid = torch.arange(tokens, device=query.device)[None, :] < context_lens[:, None]
    # Scores and softmax in float32 with a true -inf mask. (PyTorch's fused SDPA was
    # tried here: on CUDA its masked lanes won over real logits near -1e5, reading
    # the loud padding values, so it failed the very-negative-logits test.)
    q = query.reshape(batch, kv_heads, group, head_dim).float()
    scores = torch.einsum("bkgd,btkd->bkgt", q, keys.float()) * shape.scale
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    # A row with no valid key is all -inf: softmax gives NaN, zero by contract.
    weights = torch.softmax(scores, dim=-1).nan_to_num_(0.0)
    out = torch.einsum("bkgt,btkd->bkgd", weights, values.float())
    return out.reshape(batch, num_heads, head_dim).to(query.dtype)
