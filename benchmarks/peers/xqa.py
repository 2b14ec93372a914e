"""FlashInfer's XQA decode kernel as a peer (``flashinfer_xqa``):
``flashinfer.decode.trtllm_batch_decode_with_kv_cache(..., kv_layout="NHD",
backend="xqa")`` on our pools, which are its NHD paged layout, with our block
table made safe for it (:func:`xqa_block_table`). The setup builds everything and
compiles the kernel outside the timing; the callable runs the one call.

What FlashInfer 0.7.4's sources say of the call (``flashinfer/decode.py``,
``flashinfer/xqa.py``, ``csrc/xqa/mha.cu``):

* the logits are ``bmm1_scale * q . k_stored`` and the output ``bmm2_scale *
  sum p v_stored``: so ``bmm1_scale = scale * k_scale`` and ``bmm2_scale =
  v_scale`` (1 for a 16-bit cache); one float each, no per-head scales;
* ``window_left`` is the tokens left of the query it sees besides its own
  (``sliding_win_size = window_left + 1``): a window of W tokens is
  ``window_left = W - 1``, -1 for none;
* ``sinks`` is a float32 ``[num_heads]`` logit per query head (reshaped to
  ``[num_kv_heads, group]``, our head order), added as ``exp(sink - max)`` to the
  denominator: our definition;
* there is no logit soft cap;
* pages of 16, 32, 64 or 128 tokens; float16 or bfloat16 queries; a cache in the
  query's dtype or ``float8_e4m3fn`` (any other dtype is read as the query's);
* the workspace holds an 8 MB semaphore area that must be zero at first use, then
  the multi-block scratch; it reads ``block_tables`` up to its last column
  (``max_seq_len`` comes from its width).
"""

from __future__ import annotations

import torch

from benchmarks.peers import Skipped, first_line
from benchmarks.peers.options import unsupported
from paged_attention import cdiv

#: Workspace of the XQA call: its 8 MB of semaphores and the multi-block scratch,
#: zeroed once (FlashInfer's tests use 128 to 256 MB).
XQA_WORKSPACE_BYTES = 128 << 20
#: Page sizes XQA compiles for.
XQA_PAGE_SIZES = (16, 32, 64, 128)


def xqa_block_table(block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int) -> torch.Tensor:
    """A copy of our block table that XQA can read to its last column.

    XQA reads a table as wide as it is given; ours may hold ``-1`` or stale ids
    past a sequence's needed blocks. The copy keeps each sequence's needed
    entries and writes block 0 (a valid id) everywhere after them.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64.
    context_lens : Tensor
        ``[batch_size]``, each at most ``max_num_blocks * block_size``.
    block_size : int
        Tokens per block.

    Returns
    -------
    Tensor
        ``[batch_size, max(1, ceil(max(context_lens) / block_size))]`` int32,
        contiguous, on ``block_tables``' device; ``block_tables`` is not changed.
    """
    device = block_tables.device
    lens = context_lens.to(device, torch.int64)
    needed = cdiv(lens, block_size)
    cols = max(int(needed.max()) if lens.numel() else 0, 1)
    used = torch.arange(cols, device=device)[None, :] < needed[:, None]
    table = block_tables[:, :cols].to(torch.int32)
    return torch.where(used, table, torch.zeros((), dtype=torch.int32, device=device)).contiguous()


def flashinfer_xqa(flashinfer, inputs, shape, scales, attn):
    """FlashInfer's XQA decode on our cache; the callable runs the one call.

    Parameters
    ----------
    flashinfer : module
        ``import flashinfer``.
    inputs, shape : DecodeInputs, DecodeShape
        The configuration's inputs and their checked shape.
    scales : dict
        ``k_scale``/``v_scale`` of an fp8 cache (floats), or empty.
    attn : dict
        The attention keywords (``window``, ``sinks``; :mod:`benchmarks.peers.options`).

    Raises
    ------
    Skipped
        A float32 query, a page size XQA does not compile for, an fp8 format other
        than e4m3, per-head scales, a soft cap, or any error of the first call
        (compilation included), named.
    """
    q, k_cache, v_cache, tables, lens = inputs.args()
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise Skipped(f"XQA takes float16 or bfloat16 queries, not {str(q.dtype).removeprefix('torch.')}")
    if shape.block_size not in XQA_PAGE_SIZES:
        raise Skipped(f"XQA takes pages of 16, 32, 64 or 128 tokens, not {shape.block_size}")
    if k_cache.dtype not in (q.dtype, torch.float8_e4m3fn):
        raise Skipped(f"XQA's fp8 cache is float8_e4m3fn, not {str(k_cache.dtype).removeprefix('torch.')}")
    if any(isinstance(s, torch.Tensor) for s in scales.values()):
        raise Skipped("XQA takes one k_scale and one v_scale per tensor (floats), not per KV head")
    note = unsupported(attn, "XQA", window=True, soft_cap=False, sinks=True)
    if note:
        raise Skipped(note)
    decode = flashinfer.decode.trtllm_batch_decode_with_kv_cache
    workspace = torch.zeros(XQA_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    table = xqa_block_table(tables, lens, shape.block_size)
    seq_lens = lens.to(torch.int32).contiguous()
    cache = (k_cache, v_cache)
    out = torch.empty_like(q)
    kw = dict(
        bmm1_scale=shape.scale * float(scales.get("k_scale", 1.0)), bmm2_scale=float(scales.get("v_scale", 1.0)),
        window_left=attn["window"] - 1 if "window" in attn else -1, sinks=attn.get("sinks"), out=out,
        kv_layout="NHD", backend="xqa",
    )
    max_seq_len = int(shape.max_context_len)
    run = lambda: decode(q, cache, workspace, table, seq_lens, max_seq_len, **kw)  # noqa: E731
    try:
        run()  # compiles this variant (dtypes, page size, group, window) outside the timing
    except Exception as exc:
        raise Skipped(f"XQA raised {first_line(exc)}") from None
    run.backend = "xqa"
    return run
