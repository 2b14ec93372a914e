"""Timing on a GPU (or the CPU) that holds still: the harness behind every
benchmark in this project, and the one memory rule they share.

*Call latency* is what a Python caller sees: validation, launch and the kernels,
timed per call with CUDA events (``time.perf_counter`` on the CPU) after a warm-up,
with the L2 cache flushed before each call by *reading* a buffer larger than L2
(writing it would charge the write-back to the timed call), and the GPU idle when
the call starts.

*GPU time* leaves out the host: several calls are captured in one CUDA graph, each
after an L2-flushing read, and a graph of the flushes alone is subtracted.

Implementations compared with each other are timed in *interleaved rounds*
(:func:`time_interleaved`): each round calls every implementation once, in an
order rotated from round to round, with Python's garbage collector paused. A
host hiccup or a clock change then lands on every implementation alike instead
of on whichever one was being timed in its own block, so the ranking holds still
from run to run (docs/benchmarks.md, "Timings that hold still").
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch

from .config import DecodeConfig


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


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


@dataclass
class Timing:
    """Samples of one implementation from :func:`time_interleaved`, in ms."""

    call_ms: list[float]
    gpu_ms: list[float] | None = None


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
) -> dict[str, Timing]:
    """Time several implementations against each other in interleaved rounds.

    ``warmup`` untimed rounds, then ``rounds`` timed ones; each round calls every
    run once, in the order of ``rotated(names, round)``, timing each call as
    :func:`time_calls` does (L2 flushed before it). Then, for the runs named in
    ``graph`` (CUDA only), GPU time as :func:`gpu_time` measures it, also in
    rotated rounds: each round replays a graph of ``calls_per_graph`` (flush,
    call) pairs per run and one of the flushes alone, and a run's sample is its
    replay minus that round's flushes, over ``calls_per_graph``. The garbage
    collector is paused throughout.

    Parameters
    ----------
    runs : mapping of str to callable
        Name to zero-argument callable (from :func:`~paged_attention.prepare`).
    device : torch.device
        Where they run; CUDA events time a GPU, ``time.perf_counter`` the CPU.
    warmup, rounds : int
        Untimed and timed rounds (``rounds`` >= 1).
    flush : L2Flusher, optional
        Evicts L2 before each timed call (GPU only).
    graph : iterable of str
        Runs to time with CUDA graphs too (capturable ones; ignored on the CPU).
    gpu_rounds, calls_per_graph : int
        Replay rounds, and calls in each graph.
    interleave : bool
        False: each run's warm-up and timed calls in a block of their own, one run
        after another (what :func:`benchmark_implementations
        <paged_attention.bench.benchmark_implementations>` does on the CPU).
    on_progress : callable, optional
        ``on_progress(done, total)``, in timed calls, after each round (each run's
        block when not interleaved).

    Returns
    -------
    dict of str to Timing
        ``call_ms`` has ``rounds`` samples; ``gpu_ms`` ``gpu_rounds`` samples for
        the runs in ``graph`` on CUDA, else None.

    Raises
    ------
    ValueError
        If ``rounds`` < 1 or ``warmup`` < 0.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be at least 1 and warmup non-negative; got {rounds} and {warmup}")
    names = list(runs)
    out = {name: Timing(call_ms=[]) for name in names}
    cuda = device.type == "cuda"
    total = rounds * len(names)
    with gc_paused():
        if interleave:
            for r in range(warmup):
                for name in rotated(names, r):
                    runs[name]()
            if cuda:
                torch.cuda.synchronize(device)
            for r in range(rounds):
                for name in rotated(names, r):
                    out[name].call_ms.append(_time_one(runs[name], cuda, flush))
                if on_progress is not None:
                    on_progress((r + 1) * len(names), total)
        else:
            for i, name in enumerate(names):
                out[name].call_ms = time_calls(runs[name], device=device, warmup=warmup, iters=rounds, flush=flush)
                if on_progress is not None:
                    on_progress((i + 1) * rounds, total)
        graphed = [n for n in names if n in set(graph)] if cuda else []
        if graphed:
            for name, samples in _gpu_rounds({n: runs[n] for n in graphed}, device=device,
                                             flush=flush or L2Flusher(device), rounds=gpu_rounds,
                                             calls_per_graph=calls_per_graph).items():
                out[name].gpu_ms = samples
    return out


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
