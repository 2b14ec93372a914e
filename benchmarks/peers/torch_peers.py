"""The PyTorch peers of our kernels, each a setup that builds what it needs outside
the timing and returns the zero-argument call to time: SDPA on a cache that is
already contiguous (no paging at all), gather + SDPA (the usual PyTorch path), and
FlexAttention's paged decode."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.peers import Skipped
from benchmarks.peers.options import unsupported
from paged_attention import cdiv


def sdpa_contiguous(inputs, shape, attn=None):
    """SDPA over a cache that is already contiguous per sequence (built outside the timing).

    With a window or sinks in the attention keywords ``attn``
    (:mod:`benchmarks.peers.options`) the mask is :func:`sdpa_bias`, an additive
    float mask built here, outside the timing; with sinks the cache gets one more
    key and value, both zero, whose logit the mask sets to the sink.

    Raises
    ------
    Skipped
        A soft cap (SDPA cannot apply one).
    """
    attn = attn or {}
    note = unsupported(attn, "SDPA", window=True, soft_cap=False, sinks=True)
    if note:
        raise Skipped(note)
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh, group = shape.num_kv_heads, shape.query_group_size
    n = shape.max_context_len
    cols = cdiv(n, shape.block_size)
    # entries past a sequence's blocks may hold anything (-1, ids past the pool): block 0 there, masked
    used = torch.arange(cols, device=q.device)[None, :] < cdiv(lens.long(), shape.block_size)[:, None]
    idx = torch.where(used, tables[:, :cols].long(), 0)
    # slots past a context hold zeros, as a contiguous cache's padding would: finite under an additive mask
    pad = (torch.arange(n, device=q.device)[None, :] >= lens[:, None].long())[:, None, :, None]
    k = k_cache[idx].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).masked_fill(pad, 0).contiguous()
    v = v_cache[idx].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).masked_fill(pad, 0).contiguous()
    q4 = q.reshape(b, kvh, group, d)
    mask = None
    if "window" in attn or "sinks" in attn:
        mask = sdpa_bias(lens, n, kvh, group, window=attn.get("window"), sinks=attn.get("sinks")).to(q.dtype)
        if "sinks" in attn:  # the sink's key: zero, so its logit is the mask's entry alone; its value zero
            k = torch.cat([k, k.new_zeros(b, kvh, 1, d)], dim=2)
            v = torch.cat([v, v.new_zeros(b, kvh, 1, d)], dim=2)
    elif int(shape.context_lens.min()) != n:  # ragged: a length mask, as any padded layout needs
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :]
    run = lambda: F.scaled_dot_product_attention(q4, k, v, attn_mask=mask, scale=shape.scale).reshape(b, h, d)  # noqa: E731
    if mask is not None and mask.dtype != torch.bool:
        run.note = "window or sinks as an additive float mask, built outside the timing"
    return run


def sdpa_bias(context_lens: torch.Tensor, n: int, num_kv_heads: int, group: int, *, window: int | None = None,
              sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The additive float mask of SDPA on a contiguous cache of ``n`` slots per
    sequence, for a sliding window and/or sink logits.

    Sequence ``b`` keeps slots ``max(0, len_b - window) .. len_b - 1`` (all of
    ``0 .. len_b - 1`` without a window) at 0 and the others at ``-inf``. With
    ``sinks`` a last column, the logit of an extra key whose vector is zero, holds
    ``sinks[h]`` for query head ``h = kv_head * group + g`` (``q.reshape(b,
    num_kv_heads, group, d)``'s order): ``exp(sink)`` joins the softmax
    denominator and, with a zero value, nothing else.

    Parameters
    ----------
    context_lens : Tensor
        ``[batch_size]`` int32 or int64.
    n : int
        Slots per sequence of the contiguous cache (the longest context).
    num_kv_heads, group : int
        KV heads and query heads per KV head.
    window : int, optional
        Tokens each query sees, the last of its context.
    sinks : Tensor, optional
        ``[num_kv_heads * group]`` float32 sink logits.

    Returns
    -------
    Tensor
        float32 on ``context_lens``' device: ``[batch_size, 1, 1, n]`` without
        sinks, ``[batch_size, num_kv_heads, group, n + 1]`` with them.
    """
    lens = context_lens.long()[:, None]
    t = torch.arange(n, device=context_lens.device)[None, :]
    keep = t < lens
    if window is not None:
        keep &= t >= lens - window
    bias = torch.zeros(keep.shape, dtype=torch.float32, device=keep.device).masked_fill(~keep, -torch.inf)
    bias = bias[:, None, None, :]
    if sinks is None:
        return bias
    b = bias.shape[0]
    column = sinks.to(bias.device, torch.float32).reshape(1, num_kv_heads, group, 1).expand(b, -1, -1, -1)
    return torch.cat([bias.expand(-1, num_kv_heads, group, -1), column], dim=-1).contiguous()


def gather_sdpa(inputs, shape, attn=None):
    """Gather every sequence's pages into a padded contiguous cache, then SDPA (both timed).

    Raises
    ------
    Skipped
        Any attention option (not wired here: the SDPA peer is ``sdpa_contiguous``).
    """
    skip_options(attn, "gather + SDPA")
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh = shape.num_kv_heads
    cols = cdiv(shape.max_context_len, shape.block_size)
    n = cols * shape.block_size
    # Slots past a context (a ragged batch, or a partly filled last block) need a mask.
    ragged = bool((shape.context_lens != n).any())

    def run():
        idx = tables[:, :cols].long().clamp_min(0)
        k = k_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        v = v_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :] if ragged else None
        return F.scaled_dot_product_attention(
            q[:, :, None, :], k, v, attn_mask=mask, scale=shape.scale, enable_gqa=True
        ).reshape(b, h, d)

    return run


def skip_options(attn, who: str) -> None:
    """Raise :class:`Skipped` naming what ``who`` takes none of, when ``attn`` holds any option."""
    note = unsupported(attn or {}, who, window=False, soft_cap=False, sinks=False)
    if note:
        raise Skipped(note)


_flex_compiled = None


def flex_paged(inputs, shape, attn=None):
    """FlexAttention paged decode, using its own physical layout ``[1, kv_heads, pages * page_size, dim]``.

    Raises
    ------
    Skipped
        Any attention option (not wired here).
    """
    skip_options(attn, "this FlexAttention setup")
    global _flex_compiled
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _flex_compiled is None:
        _flex_compiled = torch.compile(flex_attention, fullgraph=True)
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    num_blocks, bs, kvh, _ = k_cache.shape
    dev = q.device
    k_flex = k_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()
    v_flex = v_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()

    paged = PagedAttention(num_blocks, bs, b, device=str(dev))
    cols = cdiv(shape.max_context_len, bs)
    table = tables[:, :cols].long()
    needed = cdiv(lens.long(), bs)
    used = torch.arange(cols, device=dev)[None, :] < needed[:, None]
    paged.page_table[:, :cols] = torch.where(used, table, -1)
    rows, logical = torch.nonzero(used, as_tuple=True)
    paged.physical_to_logical[rows, table[rows, logical]] = logical
    paged.capacity[:] = needed * bs

    def causal_free(bi, hi, qi, ki):
        return ki < lens[bi]

    # The block mask's KV block must equal the page size; its query block is padded.
    logical_mask = create_block_mask(causal_free, b, None, 1, cols * bs, device=dev, BLOCK_SIZE=bs)
    block_mask = paged.convert_logical_block_mask(logical_mask, torch.arange(b, device=dev), kv_len=lens.long())
    q4 = q[:, :, None, :]
    errors = []
    for options in FLEX_KERNEL_OPTIONS:
        run = lambda options=options: _flex_compiled(  # noqa: E731
            q4, k_flex, v_flex, block_mask=block_mask, scale=shape.scale, enable_gqa=True,
            kernel_options=options or None,
        ).reshape(b, h, d)
        try:
            run()
        except Exception as exc:  # this torch's flex decoding rejects these tile options
            errors.append(f"{options}: {str(exc).splitlines()[0][:100]}")
            continue
        return run
    raise RuntimeError("FlexAttention paged decode failed with every kernel option tried: " + " | ".join(errors))


#: Tile options tried in order until FlexAttention compiles for page size 16 (its
#: default tiles do not divide a 16-token page for some shapes).
FLEX_KERNEL_OPTIONS = ({}, {"BLOCK_M": 16, "BLOCK_N": 16})


#: Each PyTorch peer's setup, ``setup(inputs, shape, attn) -> call``.
TORCH_PEERS = {"sdpa_contiguous": sdpa_contiguous, "gather_sdpa": gather_sdpa, "flex_paged": flex_paged}
