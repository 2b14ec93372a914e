"""Timing on a GPU (or the CPU) that holds still: the harness behind every
benchmark in this project, and the one memory rule they share.

*Call latency* is what a Python caller sees: validation, launch and the kernels,
timed per call with CUDA events (``time.perf_counter`` on the CPU) after a warm-up,
with the L2 cache flushed before each call by *reading* a buffer larger than L2
(writing it would charge the write-back to the timed call), and the GPU idle when
the call starts.

*GPU time* leaves out the host: several calls are captured in one CUDA graph, each
after an L2-flushing read, and a graph of the flushes alone is subtracted.

*Host time* is what a call costs the host when nobody waits for it: the mean
over a batch of back-to-back calls with no synchronisation (:func:`host_time`).
Call latency minus GPU time is roughly this overhead; it is what a CUDA graph
(:mod:`paged_attention.launcher`) removes.

Implementations compared with each other are timed in *interleaved rounds*
(:func:`time_interleaved`): each round calls every implementation once, in an
order rotated from round to round, with Python's garbage collector paused. A
host hiccup or a clock change then lands on every implementation alike instead
of on whichever one was being timed in its own block, so the ranking holds still
from run to run (docs/benchmarks.md, "Timings that hold still"). Given a time
budget, the rounds go on past a minimum until every median is pinned down
(:func:`~paged_attention.samples.median_is_stable`). Two timings are told apart
by one rule, :func:`~paged_attention.samples.compare_timings`: their p20-p80
ranges overlap, or one is faster.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch

from .config import DecodeConfig
from .samples import STABLE_TOLERANCE, median_is_stable, percentile  # noqa: F401  (percentile: part of this module's API)


#: Back-to-back calls per host-time sample: few enough that the GPU's launch queue
#: never fills (the host would then wait for the GPU, and the sample would be GPU
#: time), many enough that the clock's resolution does not matter.
HOST_BATCH = 25
#: Back-to-back calls per implementation for its host time.
HOST_CALLS = 2000
#: :func:`time_interleaved` stops its host-time rounds after this many seconds (at
#: least 4 rounds): at long contexts each batch waits for the GPU's work, and the
#: host time there is a small part of the call.
HOST_BUDGET_S = 2.0
#: Most timed rounds a time budget may run to (:func:`time_interleaved`).
MAX_ROUNDS = 1000


class L2Flusher:
    """Evicts the L2 cache by reading a buffer twice its size (a no-op on the CPU)."""

    def __init__(self, device: torch.device):
        self.buffer = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.buffer = torch.ones(max(2 * l2, 128 << 20) // 4, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.amax()


def time_calls(
    fn: Callable[[], object], *, device: torch.device, warmup: int, iters: int, flush: L2Flusher | None = None
) -> list[float]:
    """Time ``iters`` calls of ``fn`` after ``warmup`` untimed ones.

    Returns
    -------
    list of float
        Milliseconds per call: CUDA events on a GPU (L2 flushed before each call when
        ``flush`` is given), ``time.perf_counter`` on the CPU.
    """
    cuda = device.type == "cuda"
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    return [_time_one(fn, cuda, flush) for _ in range(iters)]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the body (a collection inside a
    timed call would charge tens of milliseconds to whichever call it hit)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def host_time(
    fn: Callable[[], object], *, device: torch.device, calls: int = HOST_CALLS, warmup: int = 3,
    batch: int = HOST_BATCH,
) -> list[float]:
    """Host time per call of ``fn``, in ms: ``calls`` calls without synchronisation.

    The calls run back to back in batches of ``batch``, the device synchronised
    before each batch and after the last (outside the clock); each sample is a
    batch's ``time.perf_counter`` time over its calls. On the CPU a call returns
    when its work is done, so this is its call latency.

    Returns
    -------
    list of float
        ``ceil(calls / batch)`` samples.
    """
    for _ in range(warmup):
        fn()
    cuda = device.type == "cuda"
    return [_host_batch(fn, batch, cuda) for _ in range(-(-calls // batch))]


@dataclass
class Timing:
    """Samples of one implementation from :func:`time_interleaved`, in ms.

    ``call_ms``: call latencies, one per timed round; ``gpu_ms``: per-call GPU
    times from CUDA-graph replays, or None; ``host_ms``: host time per call, one
    sample per batch of back-to-back calls (:func:`host_time`), or None.
    """

    call_ms: list[float]
    gpu_ms: list[float] | None = None
    host_ms: list[float] | None = None


def rotated(names: Sequence[str], round_index: int) -> list[str]:
    """``names`` rotated left by ``round_index``: the order of one interleaved round."""
    if not names:
        return []
    k = round_index % len(names)
    return list(names[k:]) + list(names[:k])


def time_interleaved(
    runs: Mapping[str, Callable[[], object]],
    *,
    device: torch.device,
    warmup: int,
    rounds: int,
    flush: L2Flusher | None = None,
    graph: Iterable[str] = (),
    gpu_rounds: int = 20,
    calls_per_graph: int = 10,
    interleave: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    budget_s: float | None = None,
    max_rounds: int = MAX_ROUNDS,
    tolerance: float = STABLE_TOLERANCE,
    host: Iterable[str] = (),
    host_calls: int = HOST_CALLS,
) -> dict[str, Timing]:
    """Time several implementations against each other in interleaved rounds.

    ``warmup`` untimed rounds, then ``rounds`` timed ones; each round calls every
    run once, in the order of ``rotated(names, round)``, timing each call as
    :func:`time_calls` does (L2 flushed before it). With ``budget_s``, ``rounds``
    is a minimum: rounds are added until every run's median is stable
    (:func:`~paged_attention.samples.median_is_stable`), the budget is spent or
    ``max_rounds`` have run. Then, in rotated rounds too, host time per call
    (:func:`host_time`, :data:`HOST_BUDGET_S` seconds at most) of the runs in
    ``host``, and GPU time (:func:`gpu_time`) of the runs in ``graph`` (CUDA
    only): each round replays a graph of ``calls_per_graph`` (flush, call) pairs
    per run and one of the flushes alone, and a run's sample is its replay minus
    that round's flushes, over ``calls_per_graph``. The garbage collector is
    paused throughout.

    Parameters
    ----------
    runs : mapping of str to callable
        Name to zero-argument callable (from :func:`~paged_attention.prepare`).
    device : torch.device
        Where they run; CUDA events time a GPU, ``time.perf_counter`` the CPU.
    warmup, rounds : int
        Untimed and timed rounds (``rounds`` >= 1; with ``budget_s``, the fewest).
    flush : L2Flusher, optional
        Evicts L2 before each timed call (GPU only).
    graph : iterable of str
        Runs to time with CUDA graphs too (capturable ones; ignored on the CPU).
    gpu_rounds, calls_per_graph : int
        Replay rounds, and calls in each graph.
    interleave : bool
        False: each run's warm-up and timed calls in a block of their own, one run
        after another (what :func:`benchmark_implementations
        <paged_attention.bench.benchmark_implementations>` does on the CPU); a
        budget is then shared equally between the runs.
    on_progress : callable, optional
        ``on_progress(done, total)``, in timed calls, after each round (each run's
        block when not interleaved and without a budget). With a budget ``total``
        is an estimate (the rounds the budget left affords at the pace so far,
        within ``rounds`` and ``max_rounds``) and the last call has ``done == total``.
    budget_s : float, optional
        Seconds of timed rounds after which no round is added (the first
        ``rounds`` always run); None (default): exactly ``rounds`` rounds.
    max_rounds : int
        Most timed rounds with a budget.
    tolerance : float
        Relative half-width of a stable median's confidence interval.
    host : iterable of str
        Runs whose host time to measure (ones that do not synchronise; on the CPU
        a call's host time is its call latency).
    host_calls : int
        Back-to-back calls per run in ``host``.

    Returns
    -------
    dict of str to Timing
        ``call_ms`` has ``rounds`` samples (or more, with a budget); ``gpu_ms``
        ``gpu_rounds`` samples for the runs in ``graph`` on CUDA, else None;
        ``host_ms`` up to ``ceil(host_calls / HOST_BATCH)`` samples for the runs
        in ``host``, else None.

    Raises
    ------
    ValueError
        If ``rounds`` < 1, ``warmup`` < 0, or ``budget_s`` is negative.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be at least 1 and warmup non-negative; got {rounds} and {warmup}")
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"budget_s must be non-negative seconds; got {budget_s}")
    names = list(runs)
    out = {name: Timing(call_ms=[]) for name in names}
    samples = {name: out[name].call_ms for name in names}
    cuda = device.type == "cuda"
    stop = _Stop(rounds, budget_s, max(rounds, max_rounds), tolerance)
    progress = on_progress or (lambda done, total: None)
    with gc_paused():
        if interleave:
            for r in range(warmup):
                for name in rotated(names, r):
                    runs[name]()
            if cuda:
                torch.cuda.synchronize(device)
            _timed_rounds(runs, names, samples, cuda, flush, stop,
                          lambda r, planned: progress(r * len(names), planned * len(names)))
        else:
            done = 0
            share = _Stop(rounds, None if budget_s is None else budget_s / max(1, len(names)), stop.most, tolerance)
            for i, name in enumerate(names):
                for _ in range(warmup):
                    runs[name]()
                if cuda:
                    torch.cuda.synchronize(device)
                left = len(names) - i

                def report(r, planned, done=done, left=left):
                    if budget_s is not None or r == planned:
                        progress(done + r, done + planned * left)

                _timed_rounds(runs, [name], samples, cuda, flush, share, report)
                done += len(samples[name])
        timed_host = [n for n in names if n in set(host)] if host_calls > 0 else []
        if timed_host:
            for name in timed_host:
                out[name].host_ms = []
            start = time.perf_counter()
            for r in range(-(-host_calls // HOST_BATCH)):
                for name in rotated(timed_host, r):
                    out[name].host_ms.append(_host_batch(runs[name], HOST_BATCH, cuda))
                if r >= 3 and time.perf_counter() - start > HOST_BUDGET_S:
                    break
        graphed = [n for n in names if n in set(graph)] if cuda else []
        if graphed:
            for name, gpu in _gpu_rounds({n: runs[n] for n in graphed}, device=device,
                                         flush=flush or L2Flusher(device), rounds=gpu_rounds,
                                         calls_per_graph=calls_per_graph).items():
                out[name].gpu_ms = gpu
    return out


@dataclass(frozen=True)
class _Stop:
    """When timed rounds stop: after ``fewest``; with a ``budget_s``, once every
    median is stable, the budget is spent, or ``most`` rounds have run."""

    fewest: int
    budget_s: float | None
    most: int
    tolerance: float

    def planned(self, done: int, elapsed: float) -> int:
        """Rounds this loop will run, as far as is known after ``done`` rounds in
        ``elapsed`` seconds."""
        if self.budget_s is None:
            return self.fewest
        afford = done + int((self.budget_s - elapsed) / (elapsed / done)) if elapsed > 0 else self.most
        return min(self.most, max(self.fewest, done, afford))

    def now(self, done: int, elapsed: float, samples: Iterable[Sequence[float]]) -> bool:
        if done < self.fewest:
            return False
        if self.budget_s is None or done >= self.most or elapsed >= self.budget_s:
            return True
        return all(median_is_stable(s, self.tolerance) for s in samples)


def _timed_rounds(
    runs: Mapping[str, Callable[[], object]], names: Sequence[str], samples: Mapping[str, list[float]],
    cuda: bool, flush: L2Flusher | None, stop: _Stop, on_round: Callable[[int, int], None],
) -> None:
    """Rotated rounds over ``names``, one sample per run each, until ``stop``;
    ``on_round(rounds_done, rounds_planned)`` after each."""
    start = time.perf_counter()
    r = 0
    while True:
        for name in rotated(names, r):
            samples[name].append(_time_one(runs[name], cuda, flush))
        r += 1
        elapsed = time.perf_counter() - start
        if stop.now(r, elapsed, (samples[n] for n in names)):
            on_round(r, r)
            return
        on_round(r, stop.planned(r, elapsed))


def _host_batch(fn: Callable[[], object], calls: int, cuda: bool) -> float:
    """Host milliseconds per call of ``calls`` back-to-back calls, the device idle
    at the start and synchronised after (outside the clock)."""
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    if cuda:
        torch.cuda.synchronize()
    return elapsed * 1e3 / calls


def _time_one(fn: Callable[[], object], cuda: bool, flush: L2Flusher | None) -> float:
    """Milliseconds of one call: CUDA events after an L2 flush, or the host clock."""
    if not cuda:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    if flush is not None:
        flush()
    # The GPU idles when the call starts: the sample is the host's launch path plus
    # the GPU's execution, as a caller that waits for the result sees it (no part of
    # the launch hides behind the flush).
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _capture(body: Callable[[], object], device: torch.device, calls: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` repetitions of ``body`` (warmed up on a side stream first)."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up on the side stream, as graph capture requires
            body()
    torch.cuda.current_stream(device).wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            body()
    return g


def _replay_ms(g: torch.cuda.CUDAGraph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _gpu_rounds(
    runs: Mapping[str, Callable[[], object]], *, device: torch.device, flush: L2Flusher, rounds: int,
    calls_per_graph: int,
) -> dict[str, list[float]]:
    """Per-call GPU time samples, one per round, of each run (see :func:`time_interleaved`)."""
    graphs = {name: _capture(lambda fn=fn: (flush(), fn()), device, calls_per_graph) for name, fn in runs.items()}
    flush_only = _capture(flush, device, calls_per_graph)
    for g in (*graphs.values(), flush_only):
        g.replay()  # the first replay uploads the graph
    samples: dict[str, list[float]] = {name: [] for name in graphs}
    names = list(graphs)
    for r in range(rounds):
        base = _replay_ms(flush_only)
        for name in rotated(names, r):
            samples[name].append(max((_replay_ms(graphs[name]) - base) / calls_per_graph, 1e-6))
    del graphs, flush_only
    return samples


def gpu_time(
    fn: Callable[[], object], *, device: torch.device, flush: L2Flusher, calls_per_graph: int = 10, replays: int = 20
) -> float:
    """Median GPU time of one call in ms, from CUDA-graph replays.

    One graph holds ``calls_per_graph`` repetitions of (L2-flushing read, call);
    another holds the reads alone; each of ``replays`` rounds replays both, and
    the median over rounds of their difference, divided by ``calls_per_graph``,
    is the time of one call with a cold L2 and no launch gaps from the host.
    """
    samples = _gpu_rounds({"fn": fn}, device=device, flush=flush, rounds=replays, calls_per_graph=calls_per_graph)
    return statistics.median(samples["fn"])


def measure_copy_bandwidth(device: str | torch.device = "cuda", nbytes: int = 2 << 30, iters: int = 20) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written.

    The ceiling for a memory-bound kernel on this device: a decode step reads its
    bytes once, so its achieved GB/s over this number is the fraction of the floor.

    Parameters
    ----------
    device : str or torch.device
        A CUDA device.
    nbytes : int
        Size of the copied buffer, in bytes (2 GiB by default, far past L2).
    iters : int
        Timed copies; the median is used.

    Raises
    ------
    ValueError
        If ``device`` is not a CUDA device.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"copy bandwidth is measured on a CUDA device; got {device}")
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    samples = time_calls(lambda: dst.copy_(src), device=device, warmup=3, iters=iters)
    del src, dst
    return 2 * nbytes / (statistics.median(samples) * 1e-3) / 1e9


#: Headroom kept free on a GPU beyond a configuration's inputs: the L2-flush
#: buffer, the outputs, split-K buffers, the gather of Optimized PyTorch and the
#: allocator's slack.
GPU_HEADROOM_BYTES = 1 << 30
#: On the CPU the inputs are counted three times: the naive implementation's
#: padded float32 copies of K and V come on top.
CPU_INPUT_COPIES = 3


@dataclass(frozen=True)
class MemoryCheck:
    """What a configuration needs against what its device has free, in bytes.

    ``inputs`` is the configuration's own tensors; ``need`` adds the headroom (GPU)
    or the copies (CPU); ``total`` is the device's size (host memory on the CPU).
    """

    device: str
    need: int
    inputs: int
    free: int
    total: int

    @property
    def fits(self) -> bool:
        return self.need <= self.free


def check_memory(config: DecodeConfig) -> MemoryCheck:
    """The one rule for whether a benchmark of ``config`` fits in memory, asked
    before any tensor is allocated.

    On a GPU the inputs plus :data:`GPU_HEADROOM_BYTES` must fit in the free bytes
    of ``torch.cuda.mem_get_info``; on the CPU :data:`CPU_INPUT_COPIES` times the
    inputs must fit in the host's available memory.

    Returns
    -------
    MemoryCheck
        The caller says no in its own words (the CLI's error, the app's message).
    """
    inputs = config.memory_bytes()
    if config.device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info(torch.device(config.device))
        return MemoryCheck(config.device, inputs + GPU_HEADROOM_BYTES, inputs, free, total)
    page = os.sysconf("SC_PAGE_SIZE")
    free = os.sysconf("SC_AVPHYS_PAGES") * page
    return MemoryCheck(config.device, CPU_INPUT_COPIES * inputs, inputs, free, os.sysconf("SC_PHYS_PAGES") * page)
