"""Do the CLI's timings hold still? Back-to-back runs of the classic table.

Runs ``python -m paged_attention.bench`` (the classic table: (2, 60), (1, 512),
(16, 256), (4, 2048)) ``--runs`` times back to back for each block layout, each in
a fresh process as a user would, and checks, per configuration, that

* the ranking of the implementations by call latency holds: no run says one is
  faster than another where another run says it is slower. Faster and slower
  are :func:`paged_attention.samples.compare_timings`'s (p20-p80 ranges apart);
  a pair whose ranges overlap is indistinguishable, which no run contradicts;
* each implementation's median call latency moves by at most ``--tolerance``
  (max/min - 1 across the runs).

The CLI times what ``paged_attention.prepare`` returns, the CUDA-graph replay of
each capturable implementation on a GPU, as the app and the sweep do.

Prints every run's table, then one summary row per (layout, configuration), and
writes the CSVs to ``--out-dir``. Exit status 1 when a check fails.

    python -m benchmarks.timing_stability --runs 5 --out-dir out/
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys

import pandas as pd

from paged_attention.samples import FASTER, SLOWER, compare_timings


def run_cli(layout: str, path: str, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "paged_attention.bench", "--layout", layout, "--csv", path, *extra]
    subprocess.run(cmd, check=False, stdout=sys.stdout, stderr=subprocess.DEVNULL)


def ranking(run: pd.DataFrame) -> str:
    """One run's implementations by median call latency, fastest first: ``" < "``
    before one that is slower, ``" ~ "`` before one indistinguishable from the
    previous (:func:`~paged_attention.samples.compare_timings`)."""
    rows = list(run.sort_values("median_ms").itertuples())
    text = rows[0].implementation
    for prev, row in zip(rows, rows[1:]):
        verdict = compare_timings((prev.p20_ms, prev.p80_ms), (row.p20_ms, row.p80_ms))
        text += (" < " if verdict == FASTER else " ~ ") + row.implementation
    return text


def contradictions(group: pd.DataFrame) -> list[str]:
    """The pairs of implementations that one run finds faster and another slower."""
    verdicts: dict[tuple[str, str], set[str]] = {}
    for _, run in group.groupby("run"):
        r = run.set_index("implementation")
        for a, b in itertools.combinations(sorted(r.index), 2):
            verdict = compare_timings((r.at[a, "p20_ms"], r.at[a, "p80_ms"]), (r.at[b, "p20_ms"], r.at[b, "p80_ms"]))
            verdicts.setdefault((a, b), set()).add(verdict)
    return [f"{a} vs {b}" for (a, b), seen in verdicts.items() if {FASTER, SLOWER} <= seen]


def summarize(frames: list[pd.DataFrame], tolerance: float) -> tuple[pd.DataFrame, bool]:
    """One row per configuration: the rankings seen, any pair they contradict each
    other on, and each implementation's spread across the runs."""
    rows, ok = [], True
    both = pd.concat([f.assign(run=i + 1) for i, f in enumerate(frames)])
    for (batch, ctx), group in both.groupby(["batch_size", "context_len"], sort=False):
        rankings = {ranking(g) for _, g in group.groupby("run")}
        contradicted = contradictions(group)
        row = {"batch_size": batch, "context_len": ctx, "same ranking": not contradicted,
               "contradicted": "; ".join(contradicted), "ranking": " | ".join(sorted(rankings))}
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
    print("stable" if all_ok else "NOT stable",
          f"(no ranking contradicted across runs, and each median's spread <= {100 * args.tolerance:.0f}%)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
