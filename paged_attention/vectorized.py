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
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
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

    With a ``window`` the gather starts at each row's window (equal lengths: at the
    window's first block, whose leading slots are sliced off), so table entries
    before it are never read and the gather shrinks with the window. SDPA takes no
    soft-cap and no sink: with either, the attention is computed in plain float32
    matmuls and a softmax over the logits and the sink.

    With ``query_lens`` each sequence's query tokens are padded to the longest
    run (``[batch, num_heads, max_query_len, head_dim]``, gathered on the device)
    and attend to the sequence's K/V, gathered once, under an additive causal mask
    (each token's own window with a ``window``); the rows are gathered back.

    Memory traffic is about three times the K/V bytes (the gather reads and writes
    them, the attention reads them again): the cost of paging without a paged
    kernel. An fp8 cache is gathered as bytes and dequantized (``stored * scale``)
    to float32, and the attention runs in float32: SDPA takes no fp8, and rounding
    the dequantized values to 16 bits would add an error the kernels do not make.

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
    scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    return vectorized_decode_unchecked(query, k_cache, v_cache, block_tables, context_lens, shape, *scales, sinks,
                                       query_lens)


def vectorized_decode_unchecked(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    shape: DecodeShape,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
    query_lens: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`vectorized_decode` after validation; no host synchronisation, so a CUDA
    graph can capture it. ``k_scale``/``v_scale``: float32 ``[num_kv_heads]`` on the
    query's device, for an fp8 cache; ``sinks``: float32 ``[num_heads]`` and
    ``query_lens`` (``[batch_size]``) on the query's device when ``shape.sinks`` and
    ``shape.query_lens`` are set. The window and the soft-cap are read from ``shape``.

    Raises
    ------
    ValueError
        If ``sinks`` or ``query_lens`` is given without its ``shape`` field or
        missing with it.
    """
    if (sinks is None) != (shape.sinks is None):
        raise ValueError("sinks must be the device tensor of the sinks check_decode_args accepted, and only then")
    if (query_lens is None) != (shape.query_lens is None):
        raise ValueError("query_lens must be the device tensor check_decode_args accepted, and only then")
    if query_lens is not None:
        return _decode_query_tokens(query, k_cache, v_cache, block_tables, context_lens, shape, k_scale, v_scale,
                                    sinks, query_lens)
    batch, num_heads, head_dim = query.shape
    block_size = shape.block_size
    if shape.max_context_len == 0:
        return torch.zeros_like(query)
    longest = shape.max_context_len
    # The host copy of the lengths says whether the rows differ in length. When they
    # do not, every table entry read is needed and the tail of the last block is
    # sliced off, so there is no padding, no mask, and SDPA takes its fastest kernel.
    ragged = shape.min_context_len != longest
    windowed = shape.window is not None
    span = int(shape.attended_lens.max()) if windowed else longest  # the most positions a query attends to
    # Equal lengths (equal windows) gather whole blocks from the window's first; a
    # ragged batch gathers each row's positions from its own window start.
    first = int(shape.first_blocks[0]) if windowed and not ragged else 0
    cols = -(-longest // block_size) - first if not ragged else -(-span // block_size)
    tokens = cols * block_size
    if shape.is_fp8:  # gather the bytes; dequantize after the gather
        k_cache, v_cache = k_cache.view(torch.uint8), v_cache.view(torch.uint8)
    starts = None
    if not ragged:
        # One gather of whole blocks (contiguous rows of the pool) per cache, viewed
        # as [batch, kv_heads, tokens, head_dim] without a copy.
        table = block_tables[:, first : first + cols].reshape(-1)
        keys = k_cache.index_select(0, table)
        values = v_cache.index_select(0, table)
    else:
        if windowed:  # on the device: no host synchronisation
            starts = (context_lens.long() - shape.window).clamp_min(0)
        keys, values = _gather_ragged(k_cache, v_cache, block_tables, context_lens, cols, block_size, starts)
    keys, values = _per_kv_head(keys, values, shape, k_scale, v_scale, batch, tokens)
    bias = None
    if not ragged:
        skip = int(shape.window_starts[0]) - first * block_size if windowed else 0  # slots before the window
        keys, values = keys[:, :, skip : skip + span], values[:, :, skip : skip + span]
    else:
        # An additive -inf on padding slots. A boolean mask here let PyTorch's fused
        # kernel use a finite sentinel, which real logits near -1e5 fell below.
        attended = context_lens if starts is None else context_lens - starts
        padding = torch.arange(tokens, device=query.device)[None, :] >= attended[:, None]
        bias = torch.zeros(batch, 1, 1, tokens, dtype=keys.dtype, device=query.device)
        bias.masked_fill_(padding[:, None, None, :], float("-inf"))
    if shape.soft_cap is None and sinks is None:
        out = F.scaled_dot_product_attention(
            query[:, :, None, :].to(keys.dtype), keys, values, attn_mask=bias, scale=shape.scale, enable_gqa=True
        ).view(batch, num_heads, head_dim).to(query.dtype)
    else:
        out = _attend_with_options(query[:, :, None], keys, values, bias, shape, sinks)[:, :, 0]
    if shape.min_context_len == 0:
        # A row with no valid key comes out NaN (0/0): zero by contract.
        out = out.masked_fill(context_lens.view(batch, 1, 1) == 0, 0.0)
    return out


def _attend_with_options(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor | None,
    shape: DecodeShape, sinks: torch.Tensor | None,
) -> torch.Tensor:
    """Attention with a soft-cap or sinks, which SDPA takes neither of: the logits
    in float32 (a capped logit rounded to 16 bits would be off by more than the
    tolerance), capped, masked, the sink logit as one more column whose weight is
    dropped (its value is zero). GQA by a view: query heads ``kv * group + g``
    against KV head ``kv``, K/V not repeated per query head.

    ``query``: ``[batch, num_heads, rows, head_dim]`` (rows: query tokens per
    sequence); ``keys``/``values``: ``[batch, num_kv_heads, tokens, head_dim]``;
    ``bias``: ``[batch, 1, 1 or rows, tokens]`` or None. Returns ``[batch,
    num_heads, rows, head_dim]`` in the query's dtype."""
    batch, num_heads, rows, head_dim = query.shape
    kv_heads, group = shape.num_kv_heads, shape.query_group_size
    q = query.float().reshape(batch, kv_heads, group * rows, head_dim)
    scores = torch.matmul(q, keys.float().transpose(-1, -2)) * shape.scale  # [batch, kv_heads, group * rows, tokens]
    if shape.soft_cap is not None:
        scores = shape.soft_cap * torch.tanh(scores / shape.soft_cap)
    tokens = scores.shape[-1]
    scores = scores.view(batch, kv_heads, group, rows, tokens)
    if bias is not None:
        scores = scores + bias.float()[:, :, None]
    if sinks is not None:
        sink = sinks.float().reshape(1, kv_heads, group, 1, 1).expand(batch, kv_heads, group, rows, 1)
        scores = torch.cat([scores, sink], dim=-1)
    weights = torch.softmax(scores, dim=-1)[..., :tokens].reshape(batch, kv_heads, group * rows, tokens)
    out = torch.matmul(weights, values.float())  # [batch, kv_heads, group * rows, head_dim]
    return out.reshape(batch, num_heads, rows, head_dim).to(query.dtype)


def _decode_query_tokens(
    query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
    context_lens: torch.Tensor, shape: DecodeShape, k_scale: torch.Tensor | None, v_scale: torch.Tensor | None,
    sinks: torch.Tensor | None, query_lens: torch.Tensor,
) -> torch.Tensor:
    """:func:`vectorized_decode_unchecked` with several query tokens per sequence:
    each sequence's K/V gathered once from its first token's window (token slots,
    as for a ragged batch), its query rows padded to ``max_query_len``, an additive
    causal (and window) mask per row, and the rows gathered back; all on the
    device."""
    total, num_heads, head_dim = query.shape
    batch, block_size = shape.batch_size, shape.block_size
    if shape.max_context_len == 0 or total == 0:
        return torch.zeros_like(query)
    device, max_q = query.device, shape.max_query_len
    lens, q_lens = context_lens.long(), query_lens.long()
    windowed = shape.window is not None
    starts = (lens - q_lens + 1 - shape.window).clamp_min(0) if windowed else None
    span = int(shape.attended_lens.max())
    cols = -(-span // block_size)
    tokens = cols * block_size
    if shape.is_fp8:
        k_cache, v_cache = k_cache.view(torch.uint8), v_cache.view(torch.uint8)
    keys, values = _gather_ragged(k_cache, v_cache, block_tables, context_lens, cols, block_size, starts)
    keys, values = _per_kv_head(keys, values, shape, k_scale, v_scale, batch, tokens)
    # Token t of sequence b: query row first_rows[b] + t, position ends[b, t] - 1.
    first_rows = q_lens.cumsum(0) - q_lens
    t = torch.arange(max_q, device=device)
    padded = query[(first_rows[:, None] + t[None, :]).clamp_(max=total - 1)]  # [batch, max_q, heads, dim]
    ends = (lens - q_lens)[:, None] + 1 + t[None, :]
    positions = torch.arange(tokens, device=device)[None, :] + (0 if starts is None else starts[:, None])
    seen = positions[:, None, :] < ends[:, :, None]  # [batch, max_q, tokens]
    if windowed:
        seen &= positions[:, None, :] >= (ends - shape.window)[:, :, None]
    bias = torch.zeros(batch, 1, max_q, tokens, dtype=keys.dtype, device=device)
    bias.masked_fill_(~seen[:, None], float("-inf"))
    rows = padded.transpose(1, 2)  # [batch, heads, max_q, dim]
    if shape.soft_cap is None and sinks is None:
        out = F.scaled_dot_product_attention(rows.to(keys.dtype), keys, values, attn_mask=bias, scale=shape.scale,
                                             enable_gqa=True).to(query.dtype)
    else:
        out = _attend_with_options(rows, keys, values, bias, shape, sinks)
    seq = torch.repeat_interleave(torch.arange(batch, device=device), q_lens, output_size=total)
    out = out[seq, :, torch.arange(total, device=device) - first_rows[seq]]  # [total, heads, dim]
    if shape.min_context_len == 0:
        # A token that sees nothing (an empty context) comes out NaN (0/0): zero by contract.
        out = out.masked_fill((lens[seq] == 0)[:, None, None], 0.0)
    return out


def _per_kv_head(
    keys: torch.Tensor, values: torch.Tensor, shape: DecodeShape, k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None, batch: int, tokens: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered token rows (``[batch * tokens, num_kv_heads, head_dim]``, an fp8
    cache's as bytes) as ``[batch, num_kv_heads, tokens, head_dim]`` views. An fp8
    cache is dequantized to float32 (``stored * scale``): SDPA takes no fp8, and
    rounding the product to a 16-bit dtype would add an error the kernels do not
    make."""
    if shape.is_fp8:
        keys = keys.view(shape.kv_dtype).float() * k_scale[:, None]
        values = values.view(shape.kv_dtype).float() * v_scale[:, None]
    keys = keys.view(batch, tokens, shape.num_kv_heads, shape.head_dim).transpose(1, 2)
    values = values.view(batch, tokens, shape.num_kv_heads, shape.head_dim).transpose(1, 2)
    return keys, values


def _gather_ragged(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    cols: int,
    block_size: int,
    starts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather ``cols * block_size`` token slots per sequence, padding included.

    Slot ``t`` of sequence ``b`` holds position ``starts[b] + t`` (``t`` without a
    window). Padding slots get weight 0 in the softmax, and ``0 * NaN = NaN``: what
    they read must be finite. So every slot past a sequence's context reads that
    sequence's first attended token (which its context covers) instead of the pool's
    memory there, which may hold anything: stale tails of the last block, and
    blocks that table entries past the context (-1, stale ids, ids past the pool)
    name. No slot reads a table entry before the window's first block (an engine may
    have freed it). A row of length 0 is masked whole and zeroed after the
    attention, so any slot of the pool will do for it. One gather of token rows per
    cache.

    Returns
    -------
    keys, values : Tensor
        ``[batch_size * cols * block_size, num_kv_heads, head_dim]``.
    """
    num_blocks = k_cache.shape[0]
    device = block_tables.device
    tokens = torch.arange(cols * block_size, device=device)
    if starts is None:
        blocks = block_tables[:, :cols].long().repeat_interleave(block_size, dim=1)  # [batch, tokens]
        slots = (tokens % block_size)[None, :]
        inside = tokens[None, :] < context_lens.long()[:, None]
    else:
        positions = starts[:, None] + tokens[None, :]  # [batch, tokens]
        columns = (positions // block_size).clamp_(max=block_tables.shape[1] - 1)
        blocks = block_tables.long().gather(1, columns)
        slots = positions % block_size
        inside = positions < context_lens.long()[:, None]
    blocks = torch.where(inside, blocks, blocks[:, :1]).clamp_(0, num_blocks - 1).reshape(-1)
    slots = torch.where(inside, slots, slots[:, :1]).reshape(-1)
    gathered = []
    for cache in (k_cache, v_cache):
        if cache.stride(0) == block_size * cache.stride(1):  # (block, slot) folds into one dim
            flat = cache.as_strided((num_blocks * block_size, *cache.shape[2:]), cache.stride()[1:])
            gathered.append(flat.index_select(0, blocks * block_size + slots))
        else:
            gathered.append(cache[blocks, slots])
    return gathered[0], gathered[1]
