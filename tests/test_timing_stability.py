"""benchmarks.timing_stability's verdict on synthetic runs: a ranking holds unless one
run finds a pair faster where another finds it slower (p20-p80 ranges apart); pairs
whose ranges overlap are indistinguishable, which contradicts nothing."""

from __future__ import annotations

import pandas as pd

from benchmarks.timing_stability import contradictions, ranking, summarize


def run(**medians_and_halfwidths):
    return pd.DataFrame([
        dict(batch_size=2, context_len=60, implementation=name, median_ms=m, p20_ms=m - h, p80_ms=m + h)
        for name, (m, h) in medians_and_halfwidths.items()
    ])


def test_ranking_marks_indistinguishable_neighbours():
    assert ranking(run(a=(1.0, 0.1), b=(1.15, 0.1), c=(2.0, 0.1))) == "a ~ b < c"


def test_overlapping_runs_hold_and_a_reversal_does_not():
    steady = [run(a=(1.0, 0.1), b=(2.0, 0.1)), run(a=(1.05, 0.1), b=(1.1, 0.1))]  # second: a ~ b
    summary, ok = summarize(steady, tolerance=1.0)
    assert ok and bool(summary["same ranking"].iloc[0]) and summary["contradicted"].iloc[0] == ""
    assert summary["ranking"].iloc[0] == "a < b | a ~ b"
    flipped = [run(a=(1.0, 0.1), b=(2.0, 0.1)), run(a=(2.0, 0.1), b=(1.0, 0.1))]
    summary, ok = summarize(flipped, tolerance=1.0)
    assert not ok and summary["contradicted"].iloc[0] == "a vs b"
    both = pd.concat([f.assign(run=i) for i, f in enumerate(flipped)])
    assert contradictions(both) == ["a vs b"]


def test_a_median_that_moves_too_far_fails_the_run():
    _, ok = summarize([run(a=(1.0, 0.01)), run(a=(1.3, 0.01))], tolerance=0.15)
    assert not ok
