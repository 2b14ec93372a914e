"""Do the CLI's timings hold still? Back-to-back runs of the classic table.

Runs ``python -m paged_attention.bench`` (the classic table: (2, 60), (1, 512),
(16, 256), (4, 2048)) ``--runs`` times back to back for each block layout, each in
a fresh process as a user would, and checks, per configuration, that

* the ranking of the implementations by median call latency is the same in every
  run, and
* each implementation's median call latency moves by at most ``--tolerance``
  (max/min - 1 across the runs).

Prints every run's table, then one summary row per (layout, configuration), and
writes the CSVs to ``--out-dir``. Exit status 1 when a check fails.

    python -m benchmarks.timing_stability --runs 5 --out-dir out/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pandas as pd


def run_cli(layout: str, path: str, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "paged_attention.bench", "--layout", layout, "--csv", path, *extra]
    subprocess.run(cmd, check=False, stdout=sys.stdout, stderr=subprocess.DEVNULL)


def summarize(frames: list[pd.DataFrame], tolerance: float) -> tuple[pd.DataFrame, bool]:
    """One row per configuration: the rankings seen, and each implementation's spread."""
    rows, ok = [], True
    both = pd.concat([f.assign(run=i + 1) for i, f in enumerate(frames)])
    for (batch, ctx), group in both.groupby(["batch_size", "context_len"], sort=False):
        rankings = {
            " < ".join(g.sort_values("median_ms")["implementation"]) for _, g in group.groupby("run")
        }
        row = {"batch_size": batch, "context_len": ctx, "same ranking": len(rankings) == 1,
               "ranking": " | ".join(sorted(rankings))}
        fastest = group.groupby("run")["median_ms"].min()
        for impl, g in group.groupby("implementation", sort=False):
            spread = g["median_ms"].max() / g["median_ms"].min() - 1
            ratio = g.set_index("run")["median_ms"] / fastest
            row[f"{impl} ms (min-max)"] = f"{g['median_ms'].min():.4f}-{g['median_ms'].max():.4f}"
            row[f"{impl} spread"] = f"{100 * spread:.1f}%"
            row[f"{impl} / fastest (min-max)"] = f"{ratio.min():.2f}-{ratio.max():.2f}"
            ok &= spread <= tolerance
        ok &= row["same ranking"]
        rows.append(row)
    return pd.DataFrame(rows), ok


def main() -> int:
    p = argparse.ArgumentParser(description="Back-to-back runs of the classic CLI table: do rankings hold?")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--layouts", nargs="+", default=["contiguous", "shuffled"])
    p.add_argument("--tolerance", type=float, default=0.15, help="largest allowed max/min - 1 of a median")
    p.add_argument("--out-dir", default=".")
    args, extra = p.parse_known_args()
    os.makedirs(args.out_dir, exist_ok=True)
    all_ok = True
    summaries = []
    for layout in args.layouts:
        frames = []
        for i in range(args.runs):
            path = os.path.join(args.out_dir, f"classic_{layout}_run{i + 1}.csv")
            print(f"== {layout}, run {i + 1}", flush=True)
            run_cli(layout, path, extra)
            frames.append(pd.read_csv(path))
        summary, ok = summarize(frames, args.tolerance)
        summaries.append(summary.assign(layout=layout))
        all_ok &= ok
    table = pd.concat(summaries)
    table.to_csv(os.path.join(args.out_dir, "stability_summary.csv"), index=False)
    print(table.to_string(index=False))
    print("stable" if all_ok else "NOT stable", f"(ranking identical and spread <= {100 * args.tolerance:.0f}%)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
