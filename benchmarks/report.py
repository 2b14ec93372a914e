"""Turn the CSVs of ``benchmarks.decode_peers`` and ``python -m paged_attention.bench`` into
the Markdown tables of ``docs/benchmarks.md``.

Usage::

    python -m benchmarks.report --peers peers.csv --copy-gbps 4255 --classic classic.csv
"""

from __future__ import annotations

import argparse

import pandas as pd

#: Column order of the peers table. ``triton_merge_kernel`` (split-K merged by a second
#: kernel, since removed) stays so the archived CSVs in docs/data keep that column.
ORDER = ["triton", "triton_merge_kernel", "sdpa_contiguous", "gather_sdpa", "flex_paged", "vectorized", "triton_simple"]


def peers_table(path: str, copy_gbps: float, impls: list[str] | None = None) -> str:
    """GPU time (ms) and fraction of copy bandwidth per configuration and implementation."""
    t = pd.read_csv(path)
    if impls:
        t = t[t["impl"].isin(impls)]
    t["cell"] = t.apply(
        lambda r: "error" if pd.isna(r.get("gpu_ms")) else
        f"{r.gpu_ms * 1e3:.1f} us, {r.gbps / copy_gbps:.0%}" + ("" if r.correct else " WRONG"), axis=1)
    t["config"] = t.apply(lambda r: f"{r.kind} {r['dtype']} B={r.batch} ctx={r.context} bs={r.block_size}"
                          + (f" H={r.num_heads}" if r.num_heads != 32 else "")
                          + (f" D={int(r.head_dim)}" if r.get("head_dim", 128) != 128 else ""), axis=1)
    wide = t.pivot_table(index="config", columns="impl", values="cell", aggfunc="first", sort=False)
    wide = wide[[c for c in (impls or ORDER) if c in wide.columns]]
    return wide.to_markdown()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--peers")
    p.add_argument("--copy-gbps", type=float)
    p.add_argument("--impl", nargs="+", help="columns to show, in this order (default: all)")
    p.add_argument("--classic", nargs="*", default=[])
    args = p.parse_args()
    if args.peers:
        print(peers_table(args.peers, args.copy_gbps, args.impl))
    for path in args.classic:
        t = pd.read_csv(path)
        print()
        print(t.to_markdown(index=False, floatfmt=".4g"))


if __name__ == "__main__":
    main()
