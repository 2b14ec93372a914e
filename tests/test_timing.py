"""The timing harness: interleaved rounds in rotated order with the garbage
collector paused, the benchmark built on it, and the one memory rule."""

from __future__ import annotations

import gc

import pytest
import torch

import paged_attention as pa
from paged_attention.bench import benchmark_implementations
from paged_attention.timing import CPU_INPUT_COPIES, check_memory, percentile, rotated, time_interleaved


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
