"""A/B of two versions of the Optimized PyTorch decode in one process (GPU).

Question: did making ``vectorized_decode`` immune to dirty memory (padding slots of
a ragged batch read the sequence's first token, never the pool's memory past a
context) cost speed? Both versions are timed in interleaved rounds
(``paged_attention.bench.time_interleaved``: CUDA graphs, L2 flushed before each
call), on uniform and ragged batches of the serving shape (32 heads, 8 KV heads,
head_dim 128, block_size 16, float16, shuffled tables).

The old version is a copy of the module from an earlier commit, placed beside the
package before the run::

    git show <rev>:paged_attention/vectorized.py > paged_attention/_vectorized_old.py
    python -m benchmarks.ab_vectorized --out ab.csv

Prints one row per configuration: GPU time of each (median and p20-p80), new/old.
"""

from __future__ import annotations

import argparse
import importlib
import statistics

import torch

import paged_attention as pa
from paged_attention.results import check_accuracy
from paged_attention.timing import L2Flusher, percentile, time_interleaved
from paged_attention.validation import check_decode_args

UNIFORM = ((32, 2048), (64, 4096), (128, 1024))


def configs() -> list[tuple[str, pa.DecodeConfig]]:
    base = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype="float16",
                block_layout="shuffled", device="cuda")
    out = []
    for batch, ctx in UNIFORM:
        out.append((f"uniform ({batch}, {ctx})", pa.DecodeConfig(batch_size=batch, context_lens=ctx, **base)))
        gen = torch.Generator().manual_seed(batch * 7 + ctx)
        lens = tuple(int(x) for x in torch.randint(1, 2 * ctx, (batch,), generator=gen))
        out.append((f"ragged ({batch}, 1..{2 * ctx - 1})", pa.DecodeConfig(batch_size=batch, context_lens=lens, **base)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30, help="interleaved GPU-time rounds")
    p.add_argument("--out", help="CSV of the table")
    p.add_argument("--others", nargs="*", default=[],
                   help="more versions to time beside old and new: module names inside paged_attention")
    args = p.parse_args()
    old = importlib.import_module("paged_attention._vectorized_old")
    others = {name: importlib.import_module(f"paged_attention.{name}") for name in args.others}
    dev = torch.device("cuda")
    flush = L2Flusher(dev)
    rows = []
    for name, config in configs():
        inputs = pa.build_decode_inputs(config)  # finite fill: the old version is timed on what it survives
        shape = check_decode_args(*inputs.args())
        runs = {
            "old": lambda: old.vectorized_decode_unchecked(*inputs.args(), shape),
            "new": lambda: pa.vectorized.vectorized_decode_unchecked(*inputs.args(), shape),
            **{name: (lambda m=m: m.vectorized_decode_unchecked(*inputs.args(), shape)) for name, m in others.items()},
        }
        reference = pa.reference_decode(*inputs.args())
        ok = {k: check_accuracy(run(), reference).passed for k, run in runs.items()}
        dirty = pa.build_decode_inputs(config, poison=True)
        dirty_ref = pa.reference_decode(*dirty.args())
        dirty_ok = {k: check_accuracy(m.vectorized_decode_unchecked(*dirty.args(), shape), dirty_ref).passed
                    for k, m in {"old": old, "new": pa.vectorized, **others}.items()}
        del dirty, dirty_ref
        t = time_interleaved(runs, device=dev, warmup=3, rounds=5, flush=flush, graph=runs, gpu_rounds=args.rounds)
        med = {k: statistics.median(t[k].gpu_ms) for k in runs}
        rows.append({
            "config": name, "MB": config.decode_bytes() / 1e6,
            **{f"{k}_ms": med[k] for k in runs},
            **{f"{k}_p20_p80": f"{percentile(t[k].gpu_ms, 0.2):.4f}-{percentile(t[k].gpu_ms, 0.8):.4f}" for k in runs},
            **{f"{k}/old": med[k] / med["old"] for k in runs if k != "old"},
            "correct": "/".join(f"{k}:{v}" for k, v in ok.items()),
            "dirty memory": "/".join(f"{k}:{v}" for k, v in dirty_ok.items()),
        })
        del inputs, reference
        torch.cuda.empty_cache()
    import pandas as pd

    table = pd.DataFrame(rows)
    print(f"{torch.cuda.get_device_name(dev)}; torch {torch.__version__}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
