"""Turn the CSVs of ``benchmarks.decode_peers`` and ``python -m paged_attention.bench`` (of
the one result schema, or of an earlier one) into the Markdown tables of
``docs/benchmarks.md``.

Usage::

    python -m benchmarks.report --peers peers.csv --copy-gbps 4255 --classic classic.csv
    python -m benchmarks.report --peers peers_options.csv --impl triton sdpa_contiguous flashinfer flashinfer_xqa
"""

from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.peers.report import options_text
from paged_attention.result_files import read_results
from paged_attention.results import achieved_gbps, correct_text, pct_of_copy, present

#: Column order of the peers table. ``triton_merge_kernel`` (split-K merged by a second
#: kernel, since removed) stays so the archived CSVs in docs/data keep that column.
ORDER = ["triton", "triton_merge_kernel", "sdpa_contiguous", "gather_sdpa", "flex_paged", "vectorized", "triton_simple",
         "flashinfer", "flashinfer_tc", "flashinfer_xqa"]
#: The columns of a classic table, and their headings.
CLASSIC = {"block_layout": "layout", "batch_size": "batch", "context_len": "context", "label": "implementation",
           "median_ms": "call (ms)", "gpu_time_ms": "GPU (ms)", "achieved_gbps": "GB/s", "correct": "correct"}


def _frame(path: str) -> pd.DataFrame:
    rows, _ = read_results(path)
    return pd.DataFrame(rows)


def peers_table(path: str, copy_gbps: float | None = None, impls: list[str] | None = None) -> str:
    """GPU time (µs) and fraction of the copy bandwidth (``copy_gbps``, else each
    row's own) per configuration and implementation; ``skipped`` or ``error`` where
    a row has no time. A run with attention options (``--set options``) has a row per
    configuration and options, and each timed cell with options also gives its GPU
    time over the same implementation's on the same configuration without them
    (``x1.25 plain``)."""
    t = _frame(path)
    if impls:
        t = t[t["implementation"].isin(impls)]
    t["options"] = [options_text(r) for r in t.to_dict("records")]
    t["config"] = [f"{r.get('kind', '')} {r['dtype']} B={r['batch_size']} ctx={r['context_len']} bs={r['block_size']}"
                   + (f" H={r['num_heads']}" if r["num_heads"] != 32 else "")
                   + (f" D={int(r['head_dim'])}" if pd.notna(r["head_dim"]) and r["head_dim"] != 128 else "")
                   + (f" kv={r['kv_dtype']}" if r.get("kv_dtype") not in (None, "", r["dtype"]) else "")
                   for r in t.to_dict("records")]
    plain = {(r["config"], r["implementation"]): r["gpu_time_ms"] for r in t.to_dict("records")
             if r["options"] == "" and r["status"] == "ok"}

    def cell(r) -> str:
        if r["status"] != "ok":
            return "skipped" if r["status"] == "skipped" else "error"
        pct = pct_of_copy(achieved_gbps(r, unique=True), copy_gbps) if copy_gbps else r["pct_of_copy_bw"]
        text = (f"{r['gpu_time_ms'] * 1e3:.1f} us, " + (f"{pct:.0f}%" if present(pct) else "n/a of copy")
                + ("" if r["correct"] else " WRONG"))
        base = plain.get((r["config"], r["implementation"]))
        if r["options"] and base:
            text += f", x{r['gpu_time_ms'] / base:.2f} plain"
        return text

    t["cell"] = [cell(r) for r in t.to_dict("records")]
    if t["options"].ne("").any():
        t["config"] = [c + (f" [{o}]" if o else "") for c, o in zip(t["config"], t["options"])]
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
