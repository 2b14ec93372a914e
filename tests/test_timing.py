"""The timing harness: interleaved rounds in rotated order with the garbage
collector paused, rounds added until the medians are stable within a time budget,
host time of back-to-back calls, the rule that tells two timings apart, the
benchmark built on it, and the one memory rule. Samples are scripted where a
rule is tested: no assert depends on how long anything took."""

from __future__ import annotations

import gc

import pytest
import torch

import paged_attention as pa
from paged_attention.bench import benchmark_implementations
from paged_attention import timing
from paged_attention.samples import (
    FASTER, INDISTINGUISHABLE, SLOWER, compare_timings, median_interval, median_is_stable,
)
from paged_attention.timing import (
    CPU_INPUT_COPIES, HOST_BATCH, check_memory, host_time, percentile, rotated, time_interleaved,
)

CPU = torch.device("cpu")


def test_rounds_call_every_run_once_in_rotated_order_with_gc_paused():
    log, gc_seen = [], []

    def run(name):
        def fn():
            log.append(name)
            gc_seen.append(gc.isenabled())
        return fn

    timings = time_interleaved({n: run(n) for n in "abc"}, device=torch.device("cpu"), warmup=1, rounds=3)
    assert log == list("abc" + "abc" + "bca" + "cab")  # one warm-up round, then three rotated rounds
    assert not any(gc_seen) and gc.isenabled()  # paused while timing, restored after
    assert all(len(t.call_ms) == 3 and t.gpu_ms is None for t in timings.values())
    assert rotated(["a", "b", "c"], 4) == ["b", "c", "a"] and rotated([], 2) == []


def test_blocks_time_each_run_alone_and_report_progress_in_calls():
    log, progress = [], []
    runs = {n: (lambda n=n: log.append(n)) for n in "ab"}
    time_interleaved(runs, device=torch.device("cpu"), warmup=1, rounds=2, interleave=False,
                     on_progress=lambda done, total: progress.append((done, total)))
    assert log == list("aaabbb") and progress == [(2, 4), (4, 4)]
    progress.clear()
    time_interleaved(runs, device=torch.device("cpu"), warmup=0, rounds=2,
                     on_progress=lambda done, total: progress.append((done, total)))
    assert progress == [(2, 4), (4, 4)]


def test_rounds_must_be_positive():
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        time_interleaved({"a": lambda: None}, device=torch.device("cpu"), warmup=0, rounds=0)


def test_percentiles_interpolate():
    assert percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.2) == pytest.approx(1.8)
    assert percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.5) == 3.0


def test_benchmark_times_implementations_together_and_reports_their_spread():
    config = pa.DecodeConfig(batch_size=2, context_lens=(5, 40), num_heads=4, num_kv_heads=2, head_dim=16,
                             device="cpu")
    inputs = pa.build_decode_inputs(config, poison=True)
    results = benchmark_implementations(["vectorized", "naive"], inputs, warmup=1, iters=5)
    assert [r.name for r in results] == ["vectorized", "naive"]
    for r in results:
        assert r.passed and len(r.samples_ms) == 5
        assert r.p20_ms <= r.median_ms <= r.p80_ms
        assert r.gpu_time_ms is None and r.gpu_p20_ms is None  # no CUDA graphs on the CPU
    with pytest.raises(ValueError, match="named once"):
        benchmark_implementations(["naive", "naive"], inputs, warmup=0, iters=1)


def test_memory_rule_counts_the_cpu_copies_and_refuses_what_cannot_fit():
    small = pa.DecodeConfig(batch_size=2, context_lens=64, device="cpu")
    check = check_memory(small)
    assert check.inputs == small.memory_bytes() and check.need == CPU_INPUT_COPIES * check.inputs
    assert check.fits and 0 < check.free <= check.total
    huge = small.with_(batch_size=4096, context_lens=1_000_000, head_dim=256, dtype="float32")
    assert not check_memory(huge).fits


# -- host time ---------------------------------------------------------------------------

def test_host_time_runs_back_to_back_batches_after_a_warm_up():
    calls = []
    samples = host_time(lambda: calls.append(1), device=CPU, calls=10, batch=4, warmup=2)
    assert len(samples) == 3 and len(calls) == 2 + 3 * 4  # batches of 4 cover the 10 calls
    assert all(s >= 0 for s in samples)


def test_interleaved_host_rounds_rotate_and_cover_the_runs_asked_for():
    log = []
    runs = {n: (lambda n=n: log.append(n)) for n in "abc"}
    timings = time_interleaved(runs, device=CPU, warmup=0, rounds=1, host=["c", "a"], host_calls=2 * HOST_BATCH)
    host_log = log[3:]  # after the one timed round
    assert host_log == ["a"] * HOST_BATCH + ["c"] * HOST_BATCH + ["c"] * HOST_BATCH + ["a"] * HOST_BATCH
    assert len(timings["a"].host_ms) == len(timings["c"].host_ms) == 2 and timings["b"].host_ms is None
    none = time_interleaved(runs, device=CPU, warmup=0, rounds=1, host=["a"], host_calls=0)
    assert none["a"].host_ms is None


# -- rounds until the medians are stable ------------------------------------------------

@pytest.fixture
def scripted(monkeypatch):
    """Each run returns its next sample; the harness records that as its time."""
    monkeypatch.setattr(timing, "_time_one", lambda fn, cuda, flush: fn())

    def runs(**series):
        return {name: (lambda it=iter(values): next(it)) for name, values in series.items()}

    return runs


def endless(*values):
    while True:
        yield from values


def test_without_a_budget_exactly_the_rounds_asked_for(scripted):
    timings = time_interleaved(scripted(a=endless(1.0, 3.0)), device=CPU, warmup=0, rounds=7)
    assert timings["a"].call_ms == [1.0, 3.0] * 3 + [1.0]


def test_a_budget_stops_once_every_median_is_stable(scripted):
    # "b" is noisy for 20 rounds, then steady: rounds go on until its median is pinned down.
    steady = [2.0] * 500
    b = [1.0, 3.0] * 10 + steady
    progress = []
    timings = time_interleaved(scripted(a=endless(5.0), b=iter(b)), device=CPU, warmup=0, rounds=5,
                               budget_s=1e9, on_progress=lambda done, total: progress.append((done, total)))
    n = len(timings["b"].call_ms)
    assert n == len(timings["a"].call_ms) > 20
    assert median_is_stable(b[:n]) and not median_is_stable(b[:n - 1])
    assert progress[-1] == (2 * n, 2 * n) and len(progress) == n


def test_a_budget_stops_at_max_rounds_or_when_spent(scripted):
    noisy = dict(a=endless(1.0, 3.0))
    assert len(time_interleaved(scripted(**noisy), device=CPU, warmup=0, rounds=5, budget_s=1e9,
                                max_rounds=40)["a"].call_ms) == 40
    assert len(time_interleaved(scripted(**noisy), device=CPU, warmup=0, rounds=5,
                                budget_s=0.0)["a"].call_ms) == 5  # the minimum always runs
    with pytest.raises(ValueError, match="budget_s must be non-negative"):
        time_interleaved(scripted(**noisy), device=CPU, warmup=0, rounds=1, budget_s=-1.0)


def test_blocks_with_a_budget_give_each_run_its_own_stop(scripted):
    progress = []
    timings = time_interleaved(scripted(a=endless(1.0, 3.0), b=endless(2.0)), device=CPU, warmup=0, rounds=4,
                               budget_s=1e9, max_rounds=30, interleave=False,
                               on_progress=lambda done, total: progress.append((done, total)))
    assert len(timings["a"].call_ms) == 30 and len(timings["b"].call_ms) == 4
    assert progress[-1] == (34, 34)


# -- the median's interval and the comparison rule ------------------------------------

def test_median_interval_is_the_order_statistics_around_the_median():
    assert median_interval([float(i) for i in range(1, 101)]) == (40.0, 61.0)
    assert median_interval([7.0]) == (7.0, 7.0)
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # few samples: their whole range
    with pytest.raises(ValueError, match="no samples"):
        median_interval([])


def test_a_median_settles_as_samples_are_added_though_their_spread_does_not():
    pattern = [0.9, 1.0, 1.1]
    assert not median_is_stable(pattern * 3)
    assert median_is_stable(pattern * 300)
    assert percentile(pattern * 300, 0.8) - percentile(pattern * 300, 0.2) == pytest.approx(0.2)
    assert median_is_stable([2.0] * 3) and median_is_stable([1.0, 1.01, 0.99], tolerance=0.02)


@pytest.mark.parametrize("a, b, verdict", [
    ((1.0, 2.0), (3.0, 4.0), FASTER),
    ((3.0, 4.0), (1.0, 2.0), SLOWER),
    ((1.0, 3.0), (2.0, 4.0), INDISTINGUISHABLE),
    ((1.0, 2.0), (2.0, 4.0), INDISTINGUISHABLE),  # touching ranges overlap
    ((1.0, 5.0), (2.0, 3.0), INDISTINGUISHABLE),  # one inside the other
])
def test_two_timings_are_told_apart_only_when_their_ranges_do_not_overlap(a, b, verdict):
    assert compare_timings(a, b) == verdict
    assert compare_timings(b, a) == {FASTER: SLOWER, SLOWER: FASTER}.get(verdict, verdict)


def test_a_range_upside_down_is_refused():
    with pytest.raises(ValueError, match="p20 <= p80"):
        compare_timings((2.0, 1.0), (3.0, 4.0))
