"""Where Optimized PyTorch spends its time on a GPU: a torch.profiler table of one
configuration, and its parts (the gather, SDPA with and without a mask) timed alone.

Usage::

    python -m benchmarks.profile_vectorized --batch 32 --context 2048
"""

from __future__ import annotations

import argparse
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs, cdiv, prepare
from paged_attention.timing import L2Flusher, gpu_time


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_vectorized", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--dtype", default="float16")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks.profile_vectorized needs a CUDA GPU; none is visible here")
    dev = torch.device("cuda")
    cfg = DecodeConfig(batch_size=args.batch, context_lens=args.context, num_heads=32, num_kv_heads=8, head_dim=128,
                       block_size=16, dtype=args.dtype, device="cuda", block_layout="shuffled")
    inputs = build_decode_inputs(cfg)
    q, k, v, tables, lens = inputs.args()
    run = prepare("vectorized", *inputs.args())
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            run()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=70))

    flush = L2Flusher(dev)
    cols = cdiv(args.context, cfg.block_size)
    idx = tables[:, :cols].reshape(-1)
    b, n = args.batch, cols * cfg.block_size
    keys = k.index_select(0, idx).view(b, n, cfg.num_kv_heads, cfg.head_dim).transpose(1, 2)
    values = v.index_select(0, idx).view(b, n, cfg.num_kv_heads, cfg.head_dim).transpose(1, 2)
    bias = torch.zeros(b, 1, 1, n, dtype=q.dtype, device=dev)
    bias[..., n - 1] = float("-inf")
    q4 = q[:, :, None, :]
    candidates = {
        "index_select (K)": lambda: k.index_select(0, idx),
        "advanced indexing k[idx] (K)": lambda: k[idx.long()],
        "SDPA, no mask": lambda: torch.nn.functional.scaled_dot_product_attention(q4, keys, values, enable_gqa=True),
        "SDPA, additive -inf mask": lambda: torch.nn.functional.scaled_dot_product_attention(
            q4, keys, values, attn_mask=bias, enable_gqa=True),
    }
    kv_mb = cfg.needed_kv_bytes() / 2 / 1e6
    print(f"\nK alone: {kv_mb:.1f} MB")
    for name, fn in candidates.items():
        ms = gpu_time(fn, device=dev, flush=flush)
        print(f"{name:40s} {ms * 1e3:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
