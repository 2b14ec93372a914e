"""Sweep the Triton kernel's launch parameters on a GPU and print the best per shape.

For each configuration, every combination of the given split counts, ``block_n``,
``num_warps`` and ``num_stages`` is timed as in ``paged_attention.bench.gpu_time``
(CUDA graphs, L2 flushed by a read before each call) and checked against the
float64 reference. The heuristic in ``paged_attention.triton_decode.plan_launch``
is set from these results; the default plan's time is printed beside the best.

Usage::

    python -m benchmarks.tune_triton --only large --out tune.csv
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.results import check_accuracy, gbps
from paged_attention.timing import L2Flusher, gpu_time
from paged_attention.config import ragged_lengths
from paged_attention.triton_decode import plan_launch, prepare_triton_decode
from paged_attention.validation import check_decode_args

from benchmarks.peers.configs import BASE, CONFIGS


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m benchmarks.tune_triton", description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="float16")
    p.add_argument("--kv-dtype", default=None, choices=["float8_e4m3fn", "float8_e5m2"],
                   help="an fp8 cache (default: the cache has --dtype)")
    p.add_argument("--kv-scale", default="per_tensor", choices=["per_tensor", "per_head"])
    p.add_argument("--only", nargs="+", choices=["large", "small", "ragged", "uniform"],
                   help="kinds of the configurations of docs/benchmarks.md to run (uniform: none of them, only the "
                        "--uniform and --ragged batches)")
    p.add_argument("--configs", type=int, nargs="+", help="indices into decode_peers.CONFIGS")
    p.add_argument("--head-dim", type=int, default=BASE["head_dim"])
    p.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32],
                   help="split counts; 0 stands for the heuristic's")
    p.add_argument("--block-n", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--stages", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--max-programs", type=int, nargs="+", default=[0],
                   help="balanced-plan program budgets (each forces the balanced plan, with --splits ignored); "
                        "0: the plan's own choice of plan and budget")
    p.add_argument("--ragged", nargs="+", default=[], metavar="BATCH:MAX",
                   help="extra ragged batches: BATCH lengths spread over 1..MAX (e.g. 16:32768, or 32:32768:long-tail)")
    p.add_argument("--uniform", nargs="+", default=[], metavar="BATCH:CONTEXT",
                   help="extra uniform batches: BATCH sequences of CONTEXT tokens (e.g. 16:256)")
    p.add_argument("--query-lens", type=int, nargs="+", default=[1],
                   help="query (draft) tokens per sequence, each a run of its own (default: 1)")
    p.add_argument("--soft-cap", type=float, default=None, help="logit soft-cap of every run (default: none)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    extra = []
    for spec in args.uniform:
        batch, context = spec.split(":")
        extra.append(("uniform", int(batch), int(context), {}))
    for spec in args.ragged:
        batch, longest, *spread = spec.split(":")
        spread = spread[0] if spread else "uniform"
        extra.append((spread if spread != "uniform" else "ragged", int(batch),
                      ragged_lengths(int(batch), 1, int(longest), seed=1, spread=spread), {}))
    if not torch.cuda.is_available():
        sys.exit("benchmarks.tune_triton needs a CUDA GPU (it times GPU kernels); none is visible here")
    dev = torch.device("cuda")
    flush = L2Flusher(dev)
    rows = []
    runs = [(index, c, q) for index, c in enumerate(CONFIGS + extra) for q in args.query_lens]
    for index, (kind, batch, lens, over), q_len in runs:
        if index < len(CONFIGS) and ((args.only and kind not in args.only) or (args.configs and index not in args.configs)):
            continue
        cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype=args.dtype, device="cuda", seed=3,
                           kv_dtype=args.kv_dtype, kv_scale=args.kv_scale, query_lens=q_len, soft_cap=args.soft_cap,
                           **{**BASE, "head_dim": args.head_dim, **over})
        inputs = build_decode_inputs(cfg)
        shape = check_decode_args(*inputs.args(), **inputs.kwargs())
        ref = reference_decode(*inputs.args(), **inputs.kwargs())
        nbytes = cfg.decode_bytes()
        base = dict(kind=kind, batch=batch, context=max(cfg.lengths), block_size=cfg.block_size, head_dim=cfg.head_dim,
                    kv_dtype=str(cfg.kv_torch_dtype).removeprefix("torch."), query_len=q_len,
                    soft_cap=args.soft_cap)

        def measure(**kw):
            try:
                run = prepare_triton_decode(*inputs.args(), **inputs.kwargs(), **kw)
                ok = check_accuracy(run().clone(), ref).passed
                ms = gpu_time(run, device=dev, flush=flush, calls_per_graph=5, replays=10)
            except Exception as exc:  # an invalid combination (e.g. too much shared memory)
                return dict(base, **kw, error=f"{type(exc).__name__}: {str(exc)[:80]}")
            return dict(base, **kw, gpu_ms=ms, gbps=gbps(nbytes, ms), correct=ok)

        auto = plan_launch(shape, dev, cfg.torch_dtype)
        default = measure()
        combos = itertools.product(args.max_programs, args.splits, args.block_n, args.warps, args.stages)
        grid = [measure(num_splits=s or None, block_n=b, num_warps=w, num_stages=st) if not mp else
                measure(balanced=True, max_programs=mp, block_n=b, num_warps=w, num_stages=st)
                for mp, s, b, w, st in combos if not (mp and s != args.splits[0])]
        rows += [dict(default, default=True)] + grid
        good = sorted((r for r in grid if "gpu_ms" in r and r["correct"]), key=lambda r: r["gpu_ms"])
        print(f"{kind:6s} B={batch:4d} ctx={base['context']:6d} bs={cfg.block_size:3d} q={q_len:2d}: default "
              f"({'balanced, cap ' + str(auto.blocks_per_split) + ' blocks, ' if auto.balanced else ''}splits={auto.num_splits} "
              f"block_n={auto.block_n} warps={auto.num_warps} stages={auto.num_stages}) "
              f"{default.get('gpu_ms', float('nan')):.4f} ms {default.get('gbps', 0):.0f} GB/s", flush=True)
        for r in good[:4]:
            how = f"balanced max_programs={r['max_programs']}" if r.get("max_programs") else f"splits={r['num_splits']}"
            print(f"    {r['gpu_ms']:.4f} ms {r['gbps']:.0f} GB/s {how} block_n={r['block_n']} "
                  f"warps={r['num_warps']} stages={r['num_stages']}", flush=True)
        bad = [r for r in grid if "gpu_ms" in r and not r["correct"]]
        if bad:
            print(f"    INCORRECT in {len(bad)} combinations, e.g. {bad[0]}", flush=True)
        del inputs, ref
        torch.cuda.empty_cache()
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
