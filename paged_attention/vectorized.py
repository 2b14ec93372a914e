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
    scales = kv_scale_tensors(shape, k_scale, v_scale, query.device)
    return vectorized_decode_unchecked(query, k_cache, v_cache, block_tables, context_lens, shape, *scales, sinks)


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
) -> torch.Tensor:
    """:func:`vectorized_decode` after validation; no host synchronisation, so a CUDA
    graph can capture it. ``k_scale``/``v_scale``: float32 ``[num_kv_heads]`` on the
    query's device, for an fp8 cache; ``sinks``: float32 ``[num_heads]`` on the
    query's device when ``shape.sinks`` is set. The window and the soft-cap are read
    from ``shape``.

    Raises
    ------
    ValueError
        If ``sinks`` is given without ``shape.sinks`` or missing with it.
    """
    if (sinks is None) != (shape.sinks is None):
        raise ValueError("sinks must be the device tensor of the sinks check_decode_args accepted, and only then")
    batch, num_heads, head_dim = query.shape
    kv_heads, block_size = shape.num_kv_heads, shape.block_size
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
    if shape.is_fp8:
        # SDPA takes no fp8, and rounding ``stored * scale`` to a 16-bit dtype would
        # add an error the kernels do not make: attend in float32.
        keys = keys.view(shape.kv_dtype).float() * k_scale[:, None]
        values = values.view(shape.kv_dtype).float() * v_scale[:, None]
    keys = keys.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
    values = values.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
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
        out = _attend_with_options(query, keys, values, bias, shape, sinks)
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

    ``keys``/``values``: ``[batch, num_kv_heads, tokens, head_dim]``; ``bias``:
    ``[batch, 1, 1, tokens]`` or None. Returns ``[batch, num_heads, head_dim]`` in
    the query's dtype."""
    batch, num_heads, head_dim = query.shape
    kv_heads, group = shape.num_kv_heads, shape.query_group_size
    q = query.float().reshape(batch, kv_heads, group, head_dim)
    scores = torch.matmul(q, keys.float().transpose(-1, -2)) * shape.scale  # [batch, kv_heads, group, tokens]
    if shape.soft_cap is not None:
        scores = shape.soft_cap * torch.tanh(scores / shape.soft_cap)
    if bias is not None:
        scores = scores + bias.float()
    tokens = scores.shape[-1]
    if sinks is not None:
        sink = sinks.float().reshape(1, kv_heads, group, 1).expand(batch, kv_heads, group, 1)
        scores = torch.cat([scores, sink], dim=-1)
    weights = torch.softmax(scores, dim=-1)[..., :tokens]
    out = torch.matmul(weights, values.float())  # [batch, kv_heads, group, head_dim]
    return out.reshape(batch, num_heads, head_dim).to(query.dtype)


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
