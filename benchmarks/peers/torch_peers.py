"""The PyTorch peers of our kernels, each a setup that builds what it needs outside
the timing and returns the zero-argument call to time: SDPA on a cache that is
already contiguous (no paging at all), gather + SDPA (the usual PyTorch path), and
FlexAttention's paged decode."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from paged_attention import cdiv

def sdpa_contiguous(inputs, shape):
    """SDPA over a cache that is already contiguous per sequence (built outside the timing)."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh, group = shape.num_kv_heads, shape.query_group_size
    n = shape.max_context_len
    cols = cdiv(n, shape.block_size)
    k = k_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    v = v_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    q4 = q.reshape(b, kvh, group, d)
    mask = None
    if int(shape.context_lens.min()) != n:  # ragged: a length mask, as any padded layout needs
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :]
    return lambda: F.scaled_dot_product_attention(q4, k, v, attn_mask=mask, scale=shape.scale).reshape(b, h, d)


def gather_sdpa(inputs, shape):
    """Gather every sequence's pages into a padded contiguous cache, then SDPA (both timed)."""
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


_flex_compiled = None


def flex_paged(inputs, shape):
    """FlexAttention paged decode, using its own physical layout ``[1, kv_heads, pages * page_size, dim]``."""
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


#: Each PyTorch peer's setup, ``setup(inputs, shape) -> call``.
TORCH_PEERS = {"sdpa_contiguous": sdpa_contiguous, "gather_sdpa": gather_sdpa, "flex_paged": flex_paged}
