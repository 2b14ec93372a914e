"""Sweep the shared-prefix pass's launch options on a GPU and print the best per shape.

For each configuration of ``decode_peers --set prefix`` that shares a prefix, every
combination of rows per tile, ``block_n``, ``num_warps``, ``num_stages`` and
program budget of :func:`paged_attention.shared_prefix.plan_prefix` is timed as in
``paged_attention.bench.gpu_time`` (CUDA graphs, L2 flushed by a read before each
call) with the decode kernel's own plan, and checked against the float64
reference. GB/s count unique bytes (a shared block once).

Usage::

    python -m benchmarks.tune_prefix --out tune_prefix.csv
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.results import check_accuracy, gbps
from paged_attention.shared_prefix import find_shared_prefixes, plan_prefix
from paged_attention.timing import L2Flusher, gpu_time
from paged_attention.triton_decode import prepare_triton_decode
from paged_attention.validation import check_decode_args

from benchmarks.peers.configs import BASE, PREFIX_CONFIGS


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m benchmarks.tune_prefix", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[64, 128])
    p.add_argument("--block-n", type=int, nargs="+", default=[32, 64])
    p.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--stages", type=int, nargs="+", default=[2, 3])
    p.add_argument("--max-programs", type=int, nargs="+", default=[0], help="0: the plan's own budget")
    p.add_argument("--out")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.tune_prefix needs a CUDA GPU (it times GPU kernels); none is visible here")
    dev = torch.device("cuda")
    flush = L2Flusher(dev)
    rows = []
    for kind, batch, lens, over in PREFIX_CONFIGS:
        if not over.get("shared_prefix"):
            continue
        cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype="float16", device="cuda", seed=3,
                           **{**BASE, **over})
        inputs = build_decode_inputs(cfg)
        shape = check_decode_args(*inputs.args())
        groups = find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size)
        ref = reference_decode(*inputs.args())
        nbytes = cfg.unique_decode_bytes()
        base = dict(batch=batch, prefix=over["shared_prefix"], suffix=lens - over["shared_prefix"],
                    groups=over.get("prefix_groups", 1))

        def measure(**kw):
            try:
                plan = plan_prefix(shape, groups, dev, cfg.torch_dtype, **kw)
                run = prepare_triton_decode(*inputs.args(), shared_prefixes=groups, prefix_plan=plan)
                ok = check_accuracy(run().clone(), ref).passed
                ms = gpu_time(run, device=dev, flush=flush, calls_per_graph=5, replays=10)
            except Exception as exc:  # an invalid combination (e.g. too much shared memory)
                return dict(base, **kw, error=f"{type(exc).__name__}: {str(exc)[:80]}")
            return dict(base, **kw, gpu_ms=ms, gbps=gbps(nbytes, ms), correct=ok,
                        chunk_tokens=plan.tokens_per_split)

        default = measure()
        grid = [measure(query_rows=r, block_n=b, num_warps=w, num_stages=st, max_programs=mp or None)
                for r, b, w, st, mp in itertools.product(args.rows, args.block_n, args.warps, args.stages,
                                                          args.max_programs)]
        rows += [dict(default, default=True)] + grid
        good = sorted((r for r in grid if "gpu_ms" in r and r["correct"]), key=lambda r: r["gpu_ms"])
        print(f"B={batch} P={base['prefix']} S={base['suffix']} groups={base['groups']}: default "
              f"{default.get('gpu_ms', float('nan')):.4f} ms {default.get('gbps', 0):.0f} GB/s "
              f"{default.get('error', '')}", flush=True)
        for r in good[:4]:
            print(f"    {r['gpu_ms']:.4f} ms {r['gbps']:.0f} GB/s rows={r['query_rows']} block_n={r['block_n']} "
                  f"warps={r['num_warps']} stages={r['num_stages']} max_programs={r['max_programs']} "
                  f"chunk={r['chunk_tokens']}", flush=True)
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
