"""Benchmark harness and command line for the decode implementations.

Timing
------
*Call latency* is what a Python caller sees: validation, launch and the kernels,
timed per call with CUDA events (``time.perf_counter`` on the CPU) after a warm-up,
with the L2 cache flushed before each call by *reading* a buffer larger than L2
(writing it would charge the write-back to the timed call).

*GPU time* leaves out the host: several calls are captured in one CUDA graph, each
after an L2-flushing read, and a graph of the flushes alone is subtracted. Only the
implementations in ``GRAPH_CAPTURABLE`` have it.

Achieved bandwidth is the bytes a decode step must move (each needed K and V
element once, the query and the output) over the median time, in GB/s (1e9 B/s).

Run ``python -m paged_attention.bench --help``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

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
    bytes. ``gpu_time_ms`` is None where no CUDA graph could time it (CPU, or an
    implementation that synchronises with the host).
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

    def row(self) -> dict:
        """A flat dict without the samples (for tables and CSV)."""
        d = asdict(self)
        d.pop("samples_ms")
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
    for _ in range(warmup):
        fn()
    samples = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(iters):
            if flush is not None:
                flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
    else:
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def gpu_time(
    fn: Callable[[], object], *, device: torch.device, flush: L2Flusher, calls_per_graph: int = 10, replays: int = 20
) -> float:
    """Median GPU time of one call in ms, from CUDA-graph replays.

    One graph holds ``calls_per_graph`` repetitions of (L2-flushing read, call);
    another holds the reads alone; the difference of their median replay times,
    divided by ``calls_per_graph``, is the time of one call with a cold L2 and no
    launch gaps from the host.
    """
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up on the side stream, as graph capture requires
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)

    def capture(body: Callable[[], None]) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls_per_graph):
                body()
        return graph

    def replay_ms(graph: torch.cuda.CUDAGraph) -> float:
        graph.replay()
        times = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    both = capture(lambda: (flush(), fn()))
    flush_only = capture(flush)
    per_call = (replay_ms(both) - replay_ms(flush_only)) / calls_per_graph
    del both, flush_only
    return max(per_call, 1e-6)


def benchmark_implementation(
    name: str,
    inputs: DecodeInputs,
    *,
    warmup: int = 10,
    iters: int = 50,
    reference: torch.Tensor | None = None,
    graph: bool = True,
    flush: L2Flusher | None = None,
) -> BenchResult:
    """Time implementation ``name`` on ``inputs`` and check it once against the reference.

    The accuracy check runs once, outside the timed region, on the output of a
    separate call.

    Parameters
    ----------
    name : str
        A key of ``IMPLEMENTATIONS`` or ``VARIANTS``.
    inputs : DecodeInputs
        From :func:`build_decode_inputs`.
    warmup, iters : int
        Untimed and timed calls.
    reference : Tensor, optional
        ``reference_decode`` of the same inputs (computed if not given).
    graph : bool
        Also measure GPU time with CUDA graphs (GPU and capturable implementations only).
    flush : L2Flusher, optional
        Reused between implementations to save memory; made if not given.

    Returns
    -------
    BenchResult

    Raises
    ------
    ValueError
        If ``name`` is unknown or the inputs are invalid.
    """
    device = inputs.query.device
    if reference is None:
        reference = reference_decode(*inputs.args())
    flush = flush or L2Flusher(device)
    run = prepare(name, *inputs.args())
    accuracy = check_accuracy(run().clone(), reference)
    samples = time_calls(run, device=device, warmup=warmup, iters=iters, flush=flush)
    gpu_ms = None
    if graph and device.type == "cuda" and name in GRAPH_CAPTURABLE:
        gpu_ms = gpu_time(run, device=device, flush=flush)
    nbytes = inputs.config.decode_bytes()
    median = statistics.median(samples)
    return BenchResult(
        name=name,
        label=LABELS[name],
        device=str(device),
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
    )


def run_benchmark(
    config: DecodeConfig,
    names: Iterable[str] = tuple(IMPLEMENTATIONS),
    *,
    warmup: int = 10,
    iters: int = 50,
    graph: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> list[BenchResult]:
    """Build inputs for ``config`` once and benchmark each implementation on them.

    Parameters
    ----------
    config : DecodeConfig
        The configuration; validated first.
    names : iterable of str
        Implementations to run, in order.
    warmup, iters : int
        Untimed and timed calls per implementation.
    graph : bool
        Also measure CUDA-graph GPU time where possible.
    on_progress : callable, optional
        Called as ``on_progress(name, index, total)`` before each implementation.

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
    flush = L2Flusher(inputs.query.device)
    results = []
    for i, name in enumerate(names):
        if on_progress is not None:
            on_progress(name, i, len(names))
        results.append(
            benchmark_implementation(
                name, inputs, warmup=warmup, iters=iters, reference=reference, graph=graph, flush=flush
            )
        )
    return results


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

def _results_table(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


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
    p.add_argument("--warmup", type=int, default=CLASSIC_WARMUP)
    p.add_argument("--iters", type=int, help="timed iterations (default: per config)")
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
    with tqdm(total=len(configs) * len(args.impl), desc="benchmark", unit="run", file=sys.stderr) as bar:
        for config, iters in configs:
            def progress(name: str, i: int, total: int, config=config) -> None:
                bar.set_postfix_str(f"B={config.batch_size} ctx={max(config.lengths)} {name}")

            results = run_benchmark(
                config, args.impl, warmup=args.warmup, iters=iters, graph=not args.no_graph,
                on_progress=lambda *a: (progress(*a), bar.update(0)),
            )
            bar.update(len(results))
            naive = next((r for r in results if r.name == "naive"), None)
            for r in results:
                row = {
                    "batch_size": config.batch_size,
                    "context_len": max(config.lengths),
                    "implementation": r.label,
                    "median_ms": r.median_ms,
                    "gpu_time_ms": r.gpu_time_ms,
                    "speedup_vs_naive": (naive.median_ms / r.median_ms) if naive else None,
                    "GB/s": r.gbps,
                    "max_abs_err": r.max_abs_err,
                    "correct": "yes" if r.passed else "NO",
                }
                rows.append(row)
                full.append({**asdict(config), "dtype": config.dtype, **asdict(r)})
    table = _results_table(rows)
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
