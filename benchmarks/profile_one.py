"""Run one decode configuration a few times, for a profiler such as ``ncu`` to attach to.

Usage::

    ncu --clock-control none -k regex:paged_decode -c 1 python -m benchmarks.profile_one --batch 32 --context 2048
"""

from __future__ import annotations

import argparse
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs, prepare


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_one", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-heads", type=int, default=32)
    p.add_argument("--query-len", type=int, default=1, help="query (draft) tokens per sequence")
    p.add_argument("--impl", default="triton")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks.profile_one needs a CUDA GPU (it times GPU kernels); none is visible here")
    cfg = DecodeConfig(batch_size=args.batch, context_lens=args.context, num_heads=args.num_heads, num_kv_heads=8,
                       head_dim=128, block_size=args.block_size, dtype="float16", device="cuda", block_layout="shuffled",
                       query_lens=args.query_len)
    inputs = build_decode_inputs(cfg)
    run = prepare(args.impl, *inputs.args(), **inputs.kwargs())
    for _ in range(3):
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
