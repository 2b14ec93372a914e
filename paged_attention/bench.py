"""Benchmark of the decode implementations: accuracy against the float64 reference,
timing through :mod:`paged_attention.timing` (interleaved rounds; call latency and
CUDA-graph GPU time), achieved bandwidth, and the command line.

Achieved bandwidth is the bytes a decode step must move (each needed K and V
element once, the query and the output) over the median time, in GB/s (1e9 B/s).
Two counts of bytes: logical (every sequence's tokens,
:meth:`~paged_attention.config.DecodeConfig.decode_bytes`) and unique (a block
that a prefix group shares once,
:meth:`~paged_attention.config.DecodeConfig.unique_decode_bytes`); they differ
only for a batch with a shared prefix.

Run ``python -m paged_attention.bench --help``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

import torch

from .inputs import DecodeInputs, build_decode_inputs
from .config import BLOCK_LAYOUTS, DTYPES, KV_DTYPES, KV_SCALES, DecodeConfig, tolerance
from .implementations import GRAPH_CAPTURABLE, IMPLEMENTATIONS, LABELS, prepare
from .reference import reference_decode
from .runtime import default_device, execution_mode
from .timing import L2Flusher, Timing, check_memory, percentile, time_interleaved

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
    bytes. ``bytes_moved`` and ``gbps`` count logical bytes (a shared prefix in
    every sequence); ``unique_bytes``, ``unique_gbps`` and ``gpu_unique_gbps``
    count a shared block once (the same as logical when nothing is shared).
    ``samples_ms`` are call latencies, one per interleaved round;
    ``gpu_time_ms`` (the median of ``gpu_samples_ms``) is None where no CUDA graph
    could time it (CPU, or an implementation that synchronises with the host).
    ``p20_ms``/``p80_ms`` and ``gpu_p20_ms``/``gpu_p80_ms`` give the spread
    (20th and 80th percentiles). ``host_ms`` is the median host time per call of
    back-to-back calls (:func:`~paged_attention.timing.host_time`), None where it
    was not measured (the CPU, where it is the call latency, and implementations
    that synchronise).
    """

    name: str
    label: str
    device: str
    samples_ms: list[float]
    median_ms: float
    p20_ms: float
    p80_ms: float
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
    gpu_p20_ms: float | None = None
    gpu_p80_ms: float | None = None
    gpu_samples_ms: list[float] | None = None
    unique_bytes: int | None = None
    unique_gbps: float | None = None
    gpu_unique_gbps: float | None = None
    host_ms: float | None = None

    def row(self) -> dict:
        """A flat dict without the samples (for tables and CSV)."""
        d = asdict(self)
        d.pop("samples_ms")
        d.pop("gpu_samples_ms")
        return d


def shares_kv(result) -> bool:
    """True when a shared prefix makes ``result``'s unique bytes fewer than its
    logical bytes (``result`` is a :class:`BenchResult` or anything with
    ``bytes_moved``, and maybe ``unique_bytes``)."""
    unique = getattr(result, "unique_bytes", None)
    return unique is not None and unique < result.bytes_moved


def achieved_gbps(result, *, unique: bool = False) -> float | None:
    """The achieved bandwidth to report for ``result``, in GB/s: from GPU time
    where CUDA graphs measured it (no host in it), else from the call latency;
    on logical bytes, or with ``unique`` on unique bytes (a shared block once).

    ``result`` is a :class:`BenchResult` or anything with ``gpu_gbps`` and ``gbps``
    (and ``gpu_unique_gbps`` and ``unique_gbps`` for ``unique``).
    """
    if unique:
        return result.gpu_unique_gbps if result.gpu_unique_gbps is not None else result.unique_gbps
    return result.gpu_gbps if result.gpu_gbps is not None else result.gbps


def benchmark_implementations(
    names: Sequence[str],
    inputs: DecodeInputs,
    *,
    warmup: int = 10,
    iters: int = 50,
    reference: torch.Tensor | None = None,
    graph: bool = True,
    flush: L2Flusher | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    budget_s: float | None = None,
) -> list[BenchResult]:
    """Time implementations ``names`` against each other on ``inputs``, in
    interleaved rounds (:func:`~paged_attention.timing.time_interleaved`), and
    check each once against the reference.

    The accuracy check runs before timing, on the output of a separate call. On
    the CPU the implementations are timed one after another instead: there the
    Triton kernels run in Triton's interpreter, hundreds of milliseconds of NumPy a
    call that evict the caches and leave BLAS threads spinning, and interleaving
    would charge that to whatever PyTorch call comes next (docs/benchmarks.md,
    "Timings that hold still").

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
    on_progress : callable, optional
        ``on_progress(done, total)``, in timed calls.
    budget_s : float, optional
        Seconds past which no timed round is added; ``iters`` is then the fewest
        rounds, and more run until every median is stable (see
        :func:`~paged_attention.timing.time_interleaved`). None: ``iters`` rounds.

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
        reference = reference_decode(*inputs.args(), **inputs.scales())
    flush = flush or L2Flusher(device)
    runs = {name: prepare(name, *inputs.args(), **inputs.scales()) for name in names}
    accuracy = {name: check_accuracy(run().clone(), reference) for name, run in runs.items()}
    cuda = device.type == "cuda"
    capturable = [n for n in names if n in GRAPH_CAPTURABLE]
    timings = time_interleaved(
        runs, device=device, warmup=warmup, rounds=iters, flush=flush, graph=capturable if graph else (),
        interleave=cuda, on_progress=on_progress, budget_s=budget_s, host=capturable if cuda else (),
    )
    nbytes, unique = inputs.config.decode_bytes(), inputs.config.unique_decode_bytes()
    return [_result(name, str(device), timings[name], accuracy[name], nbytes, unique) for name in names]


def _gbps(nbytes: int, ms: float | None) -> float | None:
    return None if ms is None else nbytes / (ms * 1e-3) / 1e9


def _result(
    name: str, device: str, timing: Timing, accuracy: Accuracy, nbytes: int, unique_bytes: int | None = None
) -> BenchResult:
    samples, gpu, host = timing.call_ms, timing.gpu_ms, timing.host_ms
    median = statistics.median(samples)
    gpu_ms = statistics.median(gpu) if gpu else None
    unique_bytes = nbytes if unique_bytes is None else unique_bytes
    return BenchResult(
        name=name,
        label=LABELS[name],
        device=device,
        samples_ms=samples,
        median_ms=median,
        p20_ms=percentile(samples, 0.2),
        p80_ms=percentile(samples, 0.8),
        gpu_time_ms=gpu_ms,
        bytes_moved=nbytes,
        gbps=_gbps(nbytes, median),
        gpu_gbps=_gbps(nbytes, gpu_ms),
        max_abs_err=accuracy.max_abs_err,
        max_rel_err=accuracy.max_rel_err,
        atol=accuracy.atol,
        rtol=accuracy.rtol,
        passed=accuracy.passed,
        max_tol_ratio=accuracy.max_tol_ratio,
        gpu_p20_ms=percentile(gpu, 0.2) if gpu else None,
        gpu_p80_ms=percentile(gpu, 0.8) if gpu else None,
        gpu_samples_ms=gpu,
        unique_bytes=unique_bytes,
        unique_gbps=_gbps(unique_bytes, median),
        gpu_unique_gbps=_gbps(unique_bytes, gpu_ms),
        host_ms=statistics.median(host) if host else None,
    )


def run_benchmark(
    config: DecodeConfig,
    names: Iterable[str] = tuple(IMPLEMENTATIONS),
    *,
    warmup: int = 10,
    iters: int = 50,
    graph: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
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
    on_progress : callable, optional
        Called as ``on_progress(done, total)``, in timed calls.

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
    reference = reference_decode(*inputs.args(), **inputs.scales())
    return benchmark_implementations(
        names, inputs, warmup=warmup, iters=iters, reference=reference, graph=graph, on_progress=on_progress
    )


# -- command line --------------------------------------------------------------

def classic_configs(args: argparse.Namespace) -> list[tuple[DecodeConfig, int]]:
    """The configs the CLI runs: the classic four, or the one the flags describe."""
    base = dict(
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        block_size=args.block_size,
        dtype=args.dtype,
        kv_dtype=None if args.kv_dtype == "auto" else args.kv_dtype,
        kv_scale=args.kv_scale,
        device=args.device,
        seed=args.seed,
        block_layout=args.layout,
        shared_prefix=args.shared_prefix,
        prefix_groups=args.prefix_groups if args.shared_prefix else 1,
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
        memory = check_memory(config)
        if not memory.fits:
            raise ValueError(
                f"batch {config.batch_size} x context {max(config.lengths)} needs about {memory.need / 1e9:.1f} GB "
                f"of {config.device} memory (inputs {memory.inputs / 1e9:.1f} GB and working room), but only "
                f"{memory.free / 1e9:.1f} GB is free"
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
    p.add_argument("--dtype", choices=list(DTYPES), default="float16", help="query, output and (by default) cache dtype")
    p.add_argument("--kv-dtype", choices=["auto", *KV_DTYPES], default="auto",
                   help="KV-cache dtype: auto = --dtype, or an 8-bit float format with amax scales")
    p.add_argument("--kv-scale", choices=list(KV_SCALES), default="per_tensor", help="fp8 scales: one per tensor or per KV head")
    p.add_argument("--layout", choices=list(BLOCK_LAYOUTS), default="contiguous", help="physical block layout")
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="tokens at the start of every sequence that its prefix group shares (whole blocks shared)")
    p.add_argument("--prefix-groups", type=int, default=1, help="groups of consecutive sequences sharing a prefix")
    p.add_argument("--device", default=default_device(), help="cpu or cuda (default: cuda when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=CLASSIC_WARMUP, help="untimed rounds before timing")
    p.add_argument("--iters", type=int, help="timed rounds, each calling every implementation once (default: per config)")
    p.add_argument(
        "--impl", nargs="+", default=list(IMPLEMENTATIONS), help="implementations (naive vectorized triton triton_simple triton_prefix)"
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
    calls = sum(iters for _, iters in configs) * len(args.impl)
    with tqdm(total=calls, desc="benchmark", unit="call", file=sys.stderr) as bar:
        for config, iters in configs:
            bar.set_postfix_str(f"B={config.batch_size} ctx={max(config.lengths)}")
            start = bar.n
            results = run_benchmark(
                config, args.impl, warmup=args.warmup, iters=iters, graph=not args.no_graph,
                on_progress=lambda done, total, start=start: bar.update(start + done - bar.n),
            )
            naive = next((r for r in results if r.name == "naive"), None)
            for r in results:
                row = {
                    "batch_size": config.batch_size,
                    "context_len": max(config.lengths),
                    "kv_dtype": str(config.kv_torch_dtype).removeprefix("torch."),
                    **({"shared_prefix": config.shared_prefix, "prefix_groups": config.prefix_groups}
                       if config.shared_prefix else {}),
                    "implementation": r.label,
                    "median_ms": r.median_ms,
                    "p20_ms": r.p20_ms,
                    "p80_ms": r.p80_ms,
                    "gpu_time_ms": r.gpu_time_ms,
                    "gpu_p20_ms": r.gpu_p20_ms,
                    "gpu_p80_ms": r.gpu_p80_ms,
                    "host_us": None if r.host_ms is None else r.host_ms * 1e3,
                    "speedup_vs_naive": (naive.median_ms / r.median_ms) if naive else None,
                    "GB/s": r.gbps,
                    **({"GB/s (unique bytes)": r.unique_gbps} if config.shared_prefix else {}),
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
