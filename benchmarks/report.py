"""Turn the CSVs of ``benchmarks.decode_peers`` and ``python -m paged_attention.bench`` (of
the one result schema, or of an earlier one) into the Markdown tables of
``docs/benchmarks.md``.

Usage::

    python -m benchmarks.report --peers peers.csv --copy-gbps 4255 --classic classic.csv
"""

from __future__ import annotations

import argparse

import pandas as pd

from paged_attention.result_files import read_results
from paged_attention.results import achieved_gbps, correct_text, pct_of_copy

#: Column order of the peers table. ``triton_merge_kernel`` (split-K merged by a second
#: kernel, since removed) stays so the archived CSVs in docs/data keep that column.
ORDER = ["triton", "triton_merge_kernel", "sdpa_contiguous", "gather_sdpa", "flex_paged", "vectorized", "triton_simple"]
#: The columns of a classic table, and their headings.
CLASSIC = {"block_layout": "layout", "batch_size": "batch", "context_len": "context", "label": "implementation",
           "median_ms": "call (ms)", "gpu_time_ms": "GPU (ms)", "achieved_gbps": "GB/s", "correct": "correct"}


def _frame(path: str) -> pd.DataFrame:
    rows, _ = read_results(path)
    return pd.DataFrame(rows)


def peers_table(path: str, copy_gbps: float | None = None, impls: list[str] | None = None) -> str:
    """GPU time (µs) and fraction of the copy bandwidth (``copy_gbps``, else each
    row's own) per configuration and implementation."""
    t = _frame(path)
    if impls:
        t = t[t["implementation"].isin(impls)]

    def cell(r) -> str:
        if r["status"] != "ok":
            return "error"
        pct = pct_of_copy(achieved_gbps(r, unique=True), copy_gbps) if copy_gbps else r["pct_of_copy_bw"]
        return f"{r['gpu_time_ms'] * 1e3:.1f} us, {pct:.0f}%" + ("" if r["correct"] else " WRONG")

    t["cell"] = [cell(r) for r in t.to_dict("records")]
    t["config"] = [f"{r.get('kind', '')} {r['dtype']} B={r['batch_size']} ctx={r['context_len']} bs={r['block_size']}"
                   + (f" H={r['num_heads']}" if r["num_heads"] != 32 else "")
                   + (f" D={int(r['head_dim'])}" if pd.notna(r["head_dim"]) and r["head_dim"] != 128 else "")
                   for r in t.to_dict("records")]
    wide = t.pivot_table(index="config", columns="implementation", values="cell", aggfunc="first", sort=False)
    wide = wide[[c for c in (impls or ORDER) if c in wide.columns]]
    return wide.to_markdown()


def classic_table(path: str) -> str:
    """A classic table's rows: configuration, implementation, times, GB/s, correct."""
    t = _frame(path)
    t["achieved_gbps"] = [achieved_gbps(r) for r in t.to_dict("records")]
    t["correct"] = t["correct"].map(correct_text)
    return t[list(CLASSIC)].rename(columns=CLASSIC).to_markdown(index=False, floatfmt=".4g")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--peers")
    p.add_argument("--copy-gbps", type=float, help="the copy bandwidth to take fractions of (default: each row's)")
    p.add_argument("--impl", nargs="+", help="columns to show, in this order (default: all)")
    p.add_argument("--classic", nargs="*", default=[])
    args = p.parse_args()
    if args.peers:
        print(peers_table(args.peers, args.copy_gbps, args.impl))
    for path in args.classic:
        print()
        print(classic_table(path))


if __name__ == "__main__":
    main()
