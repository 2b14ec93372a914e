"""Benchmark harness and command line for the decode implementations.

Timing
------
*Call latency* is what a Python caller sees: validation, launch and the kernels,
timed per call with CUDA events (``time.perf_counter`` on the CPU) after a warm-up,
with the L2 cache flushed before each call by *reading* a buffer larger than L2
(writing it would charge the write-back to the timed call), and the GPU idle when
the call starts.

*GPU time* leaves out the host: several calls are captured in one CUDA graph, each
after an L2-flushing read, and a graph of the flushes alone is subtracted. Only the
implementations in ``GRAPH_CAPTURABLE`` have it.

Implementations compared with each other are timed in *interleaved rounds*
(:func:`time_interleaved`): each round calls every implementation once, in an
order rotated from round to round, with Python's garbage collector paused. A
host hiccup or a clock change then lands on every implementation alike instead
of on whichever one was being timed in its own block, so the ranking holds still
from run to run. Results report the median and the 20th-80th percentiles.

Achieved bandwidth is the bytes a decode step must move (each needed K and V
element once, the query and the output) over the median time, in GB/s (1e9 B/s).

Run ``python -m paged_attention.bench --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch

from .inputs import DecodeInputs, build_decode_inputs
from .config import BLOCK_LAYOUTS, DTYPES, DecodeConfig, tolerance
from .implementations import GRAPH_CAPTURABLE, IMPLEMENTATIONS, LABELS, prepare
from .reference import reference_decode
from .runtime import default_device, execution_mode

#: The classic decoding benchmark: (batch_size, context_len, iterations); every
#: config uses 32 query heads, 8 KV heads, head_dim 128, block_size 16, float16,
#: and 10 warm-up iterations.
CLASSIC_CONFIGS: tuple[tuple[int, int, int], ...] = ((2, 60, 100), (1, 512, 100), (16, 256, 50), (4, 2048, 20))
CLASSIC_WARMUP = 10


@dataclass
class Accuracy:
    """Error of one output against the float64 reference.

    ``max_abs_err`` is the largest ``|out - ref|``; ``max_rel_err`` the largest
    ``|out - ref| / max(|ref|, 1e-6)`` (large wherever ``ref`` is near zero, even
    for a correct output); ``max_tol_ratio`` the largest
    ``|out - ref| / (atol + rtol * |ref|)``, which is at most 1 exactly when every
    element is within tolerance; ``passed`` applies the dtype's ``atol`` and
    ``rtol`` elementwise, like ``torch.allclose``, and fails on NaN or inf.
    """

    max_abs_err: float
    max_rel_err: float
    atol: float
    rtol: float
    passed: bool
    max_tol_ratio: float = 0.0


def check_accuracy(out: torch.Tensor, ref: torch.Tensor) -> Accuracy:
    """Compare ``out`` (any float dtype) with the float64 ``ref``.

    Parameters
    ----------
    out : Tensor
        ``[batch_size, num_heads, head_dim]`` in float16, bfloat16 or float32.
    ref : Tensor
        Same shape, float64 (from :func:`reference_decode`).

    Returns
    -------
    Accuracy
        NaN or inf anywhere in ``out`` fails.
    """
    atol, rtol = tolerance(out.dtype)
    diff = (out.double() - ref).abs()
    finite = bool(torch.isfinite(out).all())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / ref.abs().clamp_min(1e-6)).max()) if diff.numel() else 0.0
    bound = atol + rtol * ref.abs()
    ratio = float((diff / bound).max()) if diff.numel() else 0.0
    passed = finite and bool((diff <= bound).all())
    if not finite:
        max_abs = max_rel = ratio = math.inf
    return Accuracy(max_abs, max_rel, atol, rtol, passed, ratio)


@dataclass
class BenchResult:
    """Timing and accuracy of one implementation on one configuration.

    Times are in milliseconds, bandwidth in GB/s (1e9 bytes per second), bytes in
    bytes. ``samples_ms`` are call latencies, one per interleaved round;
    ``gpu_time_ms`` (the median of ``gpu_samples_ms``) is None where no CUDA graph
    could time it (CPU, or an implementation that synchronises with the host).
    ``p20_ms``/``p80_ms`` and ``gpu_p20_ms``/``gpu_p80_ms`` give the spread;
    ``p10_ms``/``p90_ms`` are kept for the app's charts.
    """

    name: str
    label: str
    device: str
    samples_ms: list[float]
    median_ms: float
    p10_ms: float
    p90_ms: float
    gpu_time_ms: float | None
    bytes_moved: int
    gbps: float
    gpu_gbps: float | None
    max_abs_err: float
    max_rel_err: float
    atol: float
    rtol: float
    passed: bool
    max_tol_ratio: float = 0.0
    error: str | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    gpu_p20_ms: float | None = None
    gpu_p80_ms: float | None = None
    gpu_samples_ms: list[float] | None = None

    def row(self) -> dict:
        """A flat dict without the samples (for tables and CSV)."""
        d = asdict(self)
        d.pop("samples_ms")
        d.pop("gpu_samples_ms")
        return d


def _percentile(samples: Sequence[float], q: float) -> float:
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
    gc.collect()
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
    on_round: Callable[[int, int], None] | None = None,
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
    on_round : callable, optional
        ``on_round(done, total)`` after each timed round of call latency.

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
    with gc_paused():
        for r in range(warmup):
            for name in rotated(names, r):
                runs[name]()
        if cuda:
            torch.cuda.synchronize(device)
        for r in range(rounds):
            for name in rotated(names, r):
                out[name].call_ms.append(_time_one(runs[name], cuda, flush))
            if on_round is not None:
                on_round(r + 1, rounds)
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


def benchmark_implementations(
    names: Sequence[str],
    inputs: DecodeInputs,
    *,
    warmup: int = 10,
    iters: int = 50,
    reference: torch.Tensor | None = None,
    graph: bool = True,
    flush: L2Flusher | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> list[BenchResult]:
    """Time implementations ``names`` against each other on ``inputs``, in
    interleaved rounds (:func:`time_interleaved`), and check each once against the
    reference.

    The accuracy check runs before timing, on the output of a separate call.

    Parameters
    ----------
    names : sequence of str
        Keys of ``IMPLEMENTATIONS`` or ``VARIANTS``, without repeats.
    inputs : DecodeInputs
        From :func:`build_decode_inputs`.
    warmup, iters : int
        Untimed and timed rounds (each calls every implementation once).
    reference : Tensor, optional
        ``reference_decode`` of the same inputs (computed if not given).
    graph : bool
        Also measure GPU time with CUDA graphs (GPU and capturable implementations only).
    flush : L2Flusher, optional
        Reused between calls to save memory; made if not given.
    on_round : callable, optional
        ``on_round(done, total)`` after each timed round.

    Returns
    -------
    list of BenchResult
        In the order of ``names``.

    Raises
    ------
    ValueError
        If a name is unknown or repeated, or the inputs are invalid.
    """
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError(f"each implementation may be named once; got {names}")
    device = inputs.query.device
    if reference is None:
        reference = reference_decode(*inputs.args())
    flush = flush or L2Flusher(device)
    runs = {name: prepare(name, *inputs.args()) for name in names}
    accuracy = {name: check_accuracy(run().clone(), reference) for name, run in runs.items()}
    timings = time_interleaved(
        runs, device=device, warmup=warmup, rounds=iters, flush=flush,
        graph=[n for n in names if n in GRAPH_CAPTURABLE] if graph else (), on_round=on_round,
    )
    nbytes = inputs.config.decode_bytes()
    return [_result(name, str(device), timings[name], accuracy[name], nbytes) for name in names]


def benchmark_implementation(name: str, inputs: DecodeInputs, **kwargs) -> BenchResult:
    """:func:`benchmark_implementations` of one implementation (no rounds to
    interleave with); same keyword arguments."""
    return benchmark_implementations([name], inputs, **kwargs)[0]


def _result(name: str, device: str, timing: Timing, accuracy: Accuracy, nbytes: int) -> BenchResult:
    samples, gpu = timing.call_ms, timing.gpu_ms
    median = statistics.median(samples)
    gpu_ms = statistics.median(gpu) if gpu else None
    return BenchResult(
        name=name,
        label=LABELS[name],
        device=device,
        samples_ms=samples,
        median_ms=median,
        p10_ms=_percentile(samples, 0.1),
        p90_ms=_percentile(samples, 0.9),
        gpu_time_ms=gpu_ms,
        bytes_moved=nbytes,
        gbps=nbytes / (median * 1e-3) / 1e9,
        gpu_gbps=None if gpu_ms is None else nbytes / (gpu_ms * 1e-3) / 1e9,
        max_abs_err=accuracy.max_abs_err,
        max_rel_err=accuracy.max_rel_err,
        atol=accuracy.atol,
        rtol=accuracy.rtol,
        passed=accuracy.passed,
        max_tol_ratio=accuracy.max_tol_ratio,
        p20_ms=_percentile(samples, 0.2),
        p80_ms=_percentile(samples, 0.8),
        gpu_p20_ms=_percentile(gpu, 0.2) if gpu else None,
        gpu_p80_ms=_percentile(gpu, 0.8) if gpu else None,
        gpu_samples_ms=gpu,
    )


def run_benchmark(
    config: DecodeConfig,
    names: Iterable[str] = tuple(IMPLEMENTATIONS),
    *,
    warmup: int = 10,
    iters: int = 50,
    graph: bool = True,
    on_round: Callable[[int, int], None] | None = None,
) -> list[BenchResult]:
    """Build inputs for ``config`` once and benchmark the implementations on them
    against each other (:func:`benchmark_implementations`).

    Parameters
    ----------
    config : DecodeConfig
        The configuration; validated first.
    names : iterable of str
        Implementations to run, in the order of the results.
    warmup, iters : int
        Untimed and timed interleaved rounds.
    graph : bool
        Also measure CUDA-graph GPU time where possible.
    on_round : callable, optional
        Called as ``on_round(done, total)`` after each timed round.

    Returns
    -------
    list of BenchResult

    Raises
    ------
    ValueError
        If the configuration or a name is invalid.
    """
    config.validate()
    names = list(names)
    inputs = build_decode_inputs(config)
    reference = reference_decode(*inputs.args())
    return benchmark_implementations(
        names, inputs, warmup=warmup, iters=iters, reference=reference, graph=graph, on_round=on_round
    )


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


# -- command line --------------------------------------------------------------

def classic_configs(args: argparse.Namespace) -> list[tuple[DecodeConfig, int]]:
    """The configs the CLI runs: the classic four, or the one the flags describe."""
    base = dict(
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        block_size=args.block_size,
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        block_layout=args.layout,
    )
    if args.batch_size is None and args.context_len is None:
        return [
            (DecodeConfig(batch_size=b, context_lens=n, **base), args.iters or iters)
            for b, n, iters in CLASSIC_CONFIGS
        ]
    lens: int | tuple[int, ...] = 512
    if args.context_len:
        lens = args.context_len[0] if len(args.context_len) == 1 else tuple(args.context_len)
    batch = args.batch_size
    if batch is None:
        batch = len(lens) if isinstance(lens, tuple) else 1
    if isinstance(lens, tuple) and len(lens) != batch:
        raise ValueError(f"--context-len gives {len(lens)} lengths but --batch-size is {batch}: give one length or one per sequence")
    return [(DecodeConfig(batch_size=batch, context_lens=lens, **base), args.iters or 50)]


def check_cli_args(args: argparse.Namespace, configs: list[tuple[DecodeConfig, int]]) -> None:
    """Reject what would fail only after minutes of benchmarking.

    Raises
    ------
    ValueError
        Naming the flag and the rule.
    """
    from .implementations import LABELS

    for name in args.impl:
        if name not in LABELS:
            raise ValueError(f"--impl {name!r} is not an implementation; choose from {', '.join(LABELS)}")
    if args.iters is not None and args.iters < 1:
        raise ValueError(f"--iters must be at least 1; got {args.iters}")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be non-negative; got {args.warmup}")
    for flag, path in (("--csv", args.csv), ("--json", args.json)):
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
                raise ValueError(f"{flag} {path}: folder {folder} does not exist or is not writable")
    for config, _ in configs:
        config.validate()
        need = config.memory_bytes()
        if config.device.startswith("cuda"):
            free = torch.cuda.mem_get_info(torch.device(config.device))[0]
        else:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if need > 0.8 * free:
            raise ValueError(
                f"batch {config.batch_size} x context {max(config.lengths)} needs about {need / 1e9:.1f} GB "
                f"of {config.device} memory for its inputs, but only {free / 1e9:.1f} GB is free"
            )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m paged_attention.bench",
        description=(
            "Time the paged-attention decode implementations against the float64 reference. "
            "With no --batch-size/--context-len it runs the classic table: (2, 60), (1, 512), "
            "(16, 256), (4, 2048) at 32 heads, 8 KV heads, head_dim 128, block_size 16, float16."
        ),
    )
    p.add_argument("--batch-size", type=int, help="sequences in the batch")
    p.add_argument("--context-len", type=int, nargs="+", help="one length for all, or one per sequence")
    p.add_argument("--num-heads", type=int, default=32)
    p.add_argument("--num-kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--dtype", choices=list(DTYPES), default="float16")
    p.add_argument("--layout", choices=list(BLOCK_LAYOUTS), default="contiguous", help="physical block layout")
    p.add_argument("--device", default=default_device(), help="cpu or cuda (default: cuda when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=CLASSIC_WARMUP, help="untimed rounds before timing")
    p.add_argument("--iters", type=int, help="timed rounds, each calling every implementation once (default: per config)")
    p.add_argument(
        "--impl", nargs="+", default=list(IMPLEMENTATIONS), help="implementations (naive vectorized triton triton_simple)"
    )
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph GPU-time measurement")
    p.add_argument("--csv", help="also write the results to this CSV file")
    p.add_argument("--json", help="also write the results (with every sample) to this JSON file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m paged_attention.bench``; returns the exit status
    (1 when any implementation is incorrect)."""
    from tqdm.auto import tqdm

    args = build_parser().parse_args(argv)
    try:
        configs = classic_configs(args)
        check_cli_args(args, configs)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if execution_mode() == "interpreter":
        print("note: no GPU, so the Triton kernels run in Triton's interpreter; the classic table takes "
              "several minutes on a CPU and its timings say nothing about a GPU", file=sys.stderr)

    device = torch.device(args.device)
    print(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; "
          f"torch {torch.__version__}; Triton {_triton_version()} ({execution_mode()})")
    rows, full = [], []
    with tqdm(total=sum(iters for _, iters in configs), desc="benchmark", unit="round", file=sys.stderr) as bar:
        for config, iters in configs:
            bar.set_postfix_str(f"B={config.batch_size} ctx={max(config.lengths)}")
            results = run_benchmark(
                config, args.impl, warmup=args.warmup, iters=iters, graph=not args.no_graph,
                on_round=lambda done, total: bar.update(1),
            )
            naive = next((r for r in results if r.name == "naive"), None)
            for r in results:
                row = {
                    "batch_size": config.batch_size,
                    "context_len": max(config.lengths),
                    "implementation": r.label,
                    "median_ms": r.median_ms,
                    "p20_ms": r.p20_ms,
                    "p80_ms": r.p80_ms,
                    "gpu_time_ms": r.gpu_time_ms,
                    "gpu_p20_ms": r.gpu_p20_ms,
                    "gpu_p80_ms": r.gpu_p80_ms,
                    "speedup_vs_naive": (naive.median_ms / r.median_ms) if naive else None,
                    "GB/s": r.gbps,
                    "max_abs_err": r.max_abs_err,
                    "correct": "yes" if r.passed else "NO",
                }
                rows.append(row)
                full.append({**asdict(config), "dtype": config.dtype, **asdict(r)})
    import pandas as pd

    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if args.csv:
        table.to_csv(args.csv, index=False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(full, f, indent=1, default=str)
    return 0 if all(r["correct"] == "yes" for r in rows) else 1


def _triton_version() -> str:
    import triton

    return triton.__version__


if __name__ == "__main__":
    sys.exit(main())
