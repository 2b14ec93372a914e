"""Sweep the Triton kernel's launch parameters on a GPU and print the best per shape.

Stage 1 sweeps the split count with the default tile; stage 2 sweeps ``block_n``,
``num_warps`` and ``num_stages`` at the best split count. GPU time is measured as in
``paged_attention.bench.gpu_time`` (CUDA graphs, L2 flushed by a read before each call).
The heuristic in ``paged_attention.triton_decode.plan_launch`` is set from these results.

Usage::

    python benchmarks/tune_triton.py --out tune.csv
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paged_attention import DecodeConfig, build_decode_inputs, reference_decode  # noqa: E402
from paged_attention.bench import L2Flusher, check_accuracy, gpu_time  # noqa: E402
from paged_attention.triton_decode import plan_launch, prepare_triton_decode  # noqa: E402
from paged_attention.validation import check_decode_args  # noqa: E402

from decode_peers import BASE, CONFIGS  # noqa: E402


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="float16")
    p.add_argument("--out")
    p.add_argument("--block-n", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--stages", type=int, nargs="+", default=[2, 3, 4])
    args = p.parse_args(argv)
    dev = torch.device("cuda")
    flush = L2Flusher(dev)
    rows = []
    for kind, batch, lens, over in CONFIGS:
        cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype=args.dtype, device="cuda", seed=3, **{**BASE, **over})
        inputs = build_decode_inputs(cfg)
        shape = check_decode_args(*inputs.args())
        ref = reference_decode(*inputs.args())
        nbytes = cfg.decode_bytes()
        auto = plan_launch(shape, dev, cfg.torch_dtype)

        def measure(**kw):
            try:
                run = prepare_triton_decode(*inputs.args(), **kw)
                ok = check_accuracy(run().clone(), ref).passed
                ms = gpu_time(run, device=dev, flush=flush, calls_per_graph=5, replays=10)
            except Exception as exc:  # an invalid combination (e.g. too much shared memory)
                return {**kw, "error": f"{type(exc).__name__}: {str(exc)[:80]}"}
            return {**kw, "gpu_ms": ms, "gbps": nbytes / ms / 1e6, "correct": ok}

        base = dict(kind=kind, batch=batch, context=max(cfg.lengths), block_size=cfg.block_size, auto_splits=auto.num_splits)
        splits = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, auto.num_splits})
        stage1 = [dict(base, stage=1, **measure(num_splits=s)) for s in splits]
        rows += stage1
        good = [r for r in stage1 if "gpu_ms" in r]
        best_split = min(good, key=lambda r: r["gpu_ms"])["num_splits"] if good else auto.num_splits
        if kind == "ragged":
            continue
        for block_n, warps, stages in itertools.product(args.block_n, args.warps, args.stages):
            rows.append(dict(base, stage=2, **measure(num_splits=best_split, block_n=block_n, num_warps=warps, num_stages=stages)))
        best = min((r for r in rows if r.get("batch") == batch and r.get("context") == base["context"]
                    and r.get("block_size") == base["block_size"] and "gpu_ms" in r), key=lambda r: r["gpu_ms"])
        auto_ms = next((r["gpu_ms"] for r in stage1 if r["num_splits"] == auto.num_splits and "gpu_ms" in r), float("nan"))
        print(f"{kind:6s} B={batch:4d} ctx={base['context']:6d} bs={cfg.block_size:3d}: auto splits={auto.num_splits} "
              f"{auto_ms:.4f} ms; best {best['gpu_ms']:.4f} ms ({best['gbps']:.0f} GB/s) with "
              f"splits={best.get('num_splits')} block_n={best.get('block_n')} warps={best.get('num_warps')} "
              f"stages={best.get('num_stages')}", flush=True)
        del inputs, ref
        torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
