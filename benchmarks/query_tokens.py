"""Several query tokens per sequence (draft tokens): what verifying q_len tokens costs.

For each classic configuration (32 query heads, 8 KV heads, head_dim 128,
block_size 16, float16, shuffled pool; every sequence brings ``q_len`` new tokens,
already in the cache and counted in its context), in one process, this times (GPU
time of CUDA-graph replays with L2 flushed before each call,
``paged_attention.timing.gpu_time``):

* ``triton``           our kernel (``prepare("triton", ..., query_lens=...)``): a
                       program's tile holds the q_len x GQA-group rows of its KV head,
                       so each K/V byte is read once per sequence;
* ``flashinfer_fa2`` / ``flashinfer_fa3``  FlashInfer's paged prefill wrapper
                       (``BatchPrefillWithPagedKVCacheWrapper``, causal, ``qo_indptr``),
                       each backend that runs;
* ``flashinfer_xqa``   ``trtllm_batch_decode_with_kv_cache(..., backend="xqa",
                       q_len_per_req=q_len)`` where it takes the step;
* ``sdpa_contiguous``  PyTorch SDPA on a contiguous copy of the KV (made outside the
                       timing) with a causal mask aligned to the context's end.

Every output is compared with the float64 reference (``reference_decode`` with
``query_lens``): the max error is in the table, ``correct`` says whether it is
within the float16 tolerance. Achieved GB/s counts the bytes the step must read
(``DecodeConfig.decode_bytes()``: K and V once, the query and output rows) over the
GPU time; ``vs_q1`` is the GPU time over the same kernel's at q_len 1, ``us_per_token``
the GPU time per query token of the batch. ``call_us`` is a prepared call's median
time between CUDA events around it (L2 flushed, ``time_calls``: what a caller
waits), ``host_us`` the host time one call takes (``host_time``).

Usage::

    python -m benchmarks.query_tokens [--q-lens 1 2 4 8 16] [--out docs/data/query_tokens.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys

import torch

import paged_attention as pa
from benchmarks.peers import Skipped, first_line
from benchmarks.peers.flashinfer import FLASHINFER_WORKSPACE_BYTES, flashinfer_page_indices, load_flashinfer
from benchmarks.peers.xqa import XQA_WORKSPACE_BYTES, xqa_block_table
from paged_attention.timing import L2Flusher, gpu_time, host_time, measure_copy_bandwidth, time_calls

#: (batch, context): the classic configurations of docs/benchmarks.md (the last two under 100 MB).
CONFIGS = ((32, 2048), (64, 4096), (8, 8192), (128, 1024), (256, 512), (1, 32768), (4, 2048))
Q_LENS = (1, 2, 4, 8, 16)
BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype="float16", device="cuda")


def ours(inputs: pa.DecodeInputs):
    return pa.prepare("triton", *inputs.args(), **inputs.kwargs())


def flashinfer_prefill(flashinfer, inputs: pa.DecodeInputs, backend: str):
    """FlashInfer's paged prefill (append) wrapper, causal, on our NHD pools; planned here."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    config = inputs.config
    q_lens = torch.tensor(config.query_lengths, dtype=torch.int32, device=q.device)
    qo_indptr = torch.zeros(config.batch_size + 1, dtype=torch.int32, device=q.device)
    qo_indptr[1:] = q_lens.cumsum(0)
    kv_indptr, kv_indices, kv_last = flashinfer_page_indices(tables, lens, config.block_size)
    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    try:
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend=backend)
        wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_last, config.num_heads, config.num_kv_heads,
                     config.head_dim, config.block_size, causal=True, sm_scale=1 / math.sqrt(config.head_dim),
                     q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    except Exception as exc:  # a backend this GPU or build does not have
        raise Skipped(f"{backend}: {first_line(exc)}") from None
    out = torch.empty_like(q)
    cache = (k_cache, v_cache)
    return lambda: wrapper.run(q, cache, out=out)


def flashinfer_xqa(flashinfer, inputs: pa.DecodeInputs):
    """XQA with ``q_len_per_req``: a uniform number of query tokens only."""
    config = inputs.config
    if len(set(config.query_lengths)) != 1:
        raise Skipped("XQA takes one q_len_per_req for the batch")
    q, k_cache, v_cache, tables, lens = inputs.args()
    table = xqa_block_table(tables, lens, config.block_size)
    workspace = torch.zeros(XQA_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    out = torch.empty_like(q)
    kwargs = dict(bmm1_scale=1 / math.sqrt(config.head_dim), bmm2_scale=1.0, kv_layout="NHD", backend="xqa",
                  q_len_per_req=config.query_lengths[0], out=out)
    call = lambda: flashinfer.decode.trtllm_batch_decode_with_kv_cache(  # noqa: E731
        q, (k_cache, v_cache), workspace, table, lens, table.shape[1] * config.block_size, **kwargs)
    try:
        call()
        torch.cuda.synchronize()
    except Exception as exc:
        raise Skipped(f"xqa: {first_line(exc)}") from None
    return call


def sdpa_contiguous(inputs: pa.DecodeInputs):
    """SDPA on a contiguous copy of every sequence's KV (equal contexts), with an
    additive causal mask whose last row is the context's last position."""
    config = inputs.config
    if len(set(config.lengths)) != 1 or len(set(config.query_lengths)) != 1:
        raise Skipped("equal contexts and query lengths only")
    q, k_cache, v_cache, tables, lens = inputs.args()
    n, q_len = config.lengths[0], config.query_lengths[0]
    blocks = pa.cdiv(n, config.block_size)

    def contiguous(cache):
        gathered = cache[tables[:, :blocks].long()].reshape(config.batch_size, blocks * config.block_size,
                                                            config.num_kv_heads, config.head_dim)
        return gathered[:, :n].transpose(1, 2).contiguous()

    k, v = contiguous(k_cache), contiguous(v_cache)
    rows = q.view(config.batch_size, q_len, config.num_heads, config.head_dim).transpose(1, 2)
    positions = torch.arange(n, device=q.device)
    ends = n - q_len + torch.arange(q_len, device=q.device)
    bias = torch.zeros(q_len, n, dtype=q.dtype, device=q.device)
    bias.masked_fill_(positions[None, :] > ends[:, None], float("-inf"))
    scale = 1 / math.sqrt(config.head_dim)
    return lambda: torch.nn.functional.scaled_dot_product_attention(rows, k, v, attn_mask=bias, scale=scale,
                                                                    enable_gqa=True)


def flatten(out: torch.Tensor, config: pa.DecodeConfig) -> torch.Tensor:
    """A peer's output as ``[num_query_tokens, num_heads, head_dim]``."""
    if out.dim() == 4:  # SDPA: [batch, heads, q_len, dim]
        return out.transpose(1, 2).reshape(config.num_query_tokens, config.num_heads, config.head_dim)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--q-lens", type=int, nargs="+", default=list(Q_LENS))
    parser.add_argument("--only", nargs="+", default=None, help="batch,context pairs, e.g. 32,2048")
    parser.add_argument("--impl", nargs="+", default=None,
                        help="only these rows (triton, flashinfer_fa2, flashinfer_fa3, flashinfer_xqa, sdpa_contiguous)")
    parser.add_argument("--out", help="CSV file for the table (rewritten after every row)")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    copy = measure_copy_bandwidth(device)
    flush = L2Flusher(device)
    flashinfer = load_flashinfer()
    print(f"# {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
          f"flashinfer {getattr(flashinfer, '__version__', 'missing')}, copy {copy:.0f} GB/s", flush=True)
    header = ("batch", "context", "q_len", "impl", "gpu_ms", "call_us", "host_us", "us_per_token", "gbps", "pct_of_copy", "mb",
              "vs_q1", "max_err", "correct")
    print(" ".join(f"{h:>14}" for h in header), flush=True)
    rows, ok_all, q1 = [], True, {}
    configs = CONFIGS if args.only is None else [tuple(int(x) for x in pair.split(",")) for pair in args.only]
    for batch, context in configs:
        for q_len in args.q_lens:
            config = pa.DecodeConfig(batch_size=batch, context_lens=context, query_lens=q_len, **BASE)
            inputs = pa.build_decode_inputs(config, poison=True)
            expected = pa.reference_decode(*inputs.args(), **inputs.kwargs())
            atol, rtol = pa.tolerance(inputs.query.dtype)
            impls = [("triton", ours, (inputs,))]
            if flashinfer is not None:
                impls += [(f"flashinfer_{b}", flashinfer_prefill, (flashinfer, inputs, b)) for b in ("fa2", "fa3")]
                impls.append(("flashinfer_xqa", flashinfer_xqa, (flashinfer, inputs)))
            impls.append(("sdpa_contiguous", sdpa_contiguous, (inputs,)))
            for name, setup, setup_args in impls:
                if args.impl and name not in args.impl:
                    continue
                try:
                    run = setup(*setup_args)
                    out = flatten(run(), config).clone()
                except Skipped as why:
                    print(f"  {name} at ({batch}, {context}) q_len {q_len}: skipped ({why})", flush=True)
                    continue
                err = float((out.double() - expected).abs().max())
                ok = bool(torch.isfinite(out).all()) and torch.allclose(out.double(), expected, atol=atol, rtol=rtol)
                ok_all &= ok or name != "triton"
                ms = gpu_time(run, device=device, flush=flush)
                call_us = 1e3 * statistics.median(time_calls(run, device=device, warmup=10, iters=100, flush=flush))
                host_us = 1e3 * statistics.median(host_time(run, device=device))
                key = (batch, context, name)
                if q_len == 1:
                    q1[key] = ms
                gbps = config.decode_bytes() / ms / 1e6
                row = (batch, context, q_len, name, f"{ms:.4f}", f"{call_us:.1f}", f"{host_us:.1f}",
                       f"{1e3 * ms / config.num_query_tokens:.3f}", f"{gbps:.0f}", f"{100 * gbps / copy:.0f}",
                       f"{config.decode_bytes() / 1e6:.1f}", f"{ms / q1[key]:.3f}" if key in q1 else "",
                       f"{err:.2e}", "yes" if ok else "NO")
                rows.append(row)
                print(" ".join(f"{str(v):>14}" for v in row), flush=True)
                if args.out:
                    with open(args.out, "w", newline="") as f:
                        writer = csv.writer(f)
                        writer.writerow(header)
                        writer.writerows(rows)
            impls = inputs = expected = None
            torch.cuda.empty_cache()
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
