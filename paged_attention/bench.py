"""Benchmark of the decode implementations: each timed against the others in
interleaved rounds (:mod:`paged_attention.timing`: call latency and CUDA-graph GPU
time) and checked against the float64 reference, into
:class:`~paged_attention.results.BenchResult` objects; and the command line, which writes
them as result rows (:mod:`paged_attention.result_files`).

Run ``python -m paged_attention.bench --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Callable, Iterable, Sequence

import torch

from .config import BLOCK_LAYOUTS, DTYPES, KV_DTYPES, KV_SCALES, DecodeConfig
from .implementations import GRAPH_CAPTURABLE, IMPLEMENTATIONS, LABELS, prepare
from .inputs import DecodeInputs, build_decode_inputs
from .reference import reference_decode
from .result_files import sidecar, write_results
from .results import BenchResult, achieved_gbps, check_accuracy, correct_text, result_row, utc_stamp
from .runtime import default_device, execution_mode
from .timing import L2Flusher, check_memory, measure_copy_bandwidth, time_interleaved

#: The classic decoding benchmark: (batch_size, context_len, iterations); every
#: config uses 32 query heads, 8 KV heads, head_dim 128, block_size 16, float16,
#: and 10 warm-up iterations.
CLASSIC_CONFIGS: tuple[tuple[int, int, int], ...] = ((2, 60, 100), (1, 512, 100), (16, 256, 50), (4, 2048, 20))
CLASSIC_WARMUP = 10


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
        reference = reference_decode(*inputs.args(), **inputs.kwargs())
    flush = flush or L2Flusher(device)
    runs = {name: prepare(name, *inputs.args(), **inputs.kwargs()) for name in names}
    accuracy = {name: check_accuracy(run().clone(), reference) for name, run in runs.items()}
    cuda = device.type == "cuda"
    capturable = [n for n in names if n in GRAPH_CAPTURABLE]
    timings = time_interleaved(
        runs, device=device, warmup=warmup, rounds=iters, flush=flush, graph=capturable if graph else (),
        interleave=cuda, on_progress=on_progress, budget_s=budget_s, host=capturable if cuda else (),
    )
    nbytes, unique = inputs.config.decode_bytes(), inputs.config.unique_decode_bytes()
    return [BenchResult.from_timing(name, LABELS[name], str(device), timings[name], accuracy[name], nbytes, unique)
            for name in names]


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
    reference = reference_decode(*inputs.args(), **inputs.kwargs())
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
        window=args.window,
        soft_cap=args.soft_cap,
        sinks=args.sinks,
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
    p.add_argument("--window", type=int, help="sliding window: each query attends to its last WINDOW positions")
    p.add_argument("--soft-cap", type=float, help="logit soft-capping: s <- SOFT_CAP * tanh(s / SOFT_CAP)")
    p.add_argument("--sinks", action="store_true", help="attention sinks: one random logit per query head")
    p.add_argument("--device", default=default_device(), help="cpu or cuda (default: cuda when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=CLASSIC_WARMUP, help="untimed rounds before timing")
    p.add_argument("--iters", type=int, help="timed rounds, each calling every implementation once (default: per config)")
    p.add_argument(
        "--impl", nargs="+", default=list(IMPLEMENTATIONS), help="implementations (naive vectorized triton triton_simple triton_prefix)"
    )
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph GPU-time measurement")
    p.add_argument("--csv", help="also write the result rows to this CSV file, and where and how they were "
                                 "measured to the JSON of the same name beside it")
    p.add_argument("--json", help="also write the results (with every sample) to this JSON file")
    return p


def copy_bandwidth(device: torch.device) -> float | None:
    """This device's copy bandwidth in GB/s, for the fraction of it each row
    reaches; None on the CPU, or where the GPU lacks the memory to measure it."""
    if device.type != "cuda":
        return None
    try:
        return measure_copy_bandwidth(device)
    except torch.cuda.OutOfMemoryError:
        return None


#: The columns the command line prints, and their headings.
PRINTED = {"batch_size": "batch", "context_lens": "context", "kv_dtype": "kv_dtype", "shared_prefix": "prefix",
           "prefix_groups": "groups", "label": "implementation", "median_ms": "call_ms", "p20_ms": "p20",
           "p80_ms": "p80", "gpu_time_ms": "gpu_ms", "gpu_p20_ms": "gpu_p20", "gpu_p80_ms": "gpu_p80",
           "host_us": "host_us", "speedup_vs_naive": "speedup", "achieved_gbps": "GB/s",
           "pct_of_copy_bw": "% of copy", "max_abs_err": "max_abs_err", "correct": "correct"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m paged_attention.bench``; returns the exit status
    (1 when any implementation is incorrect)."""
    from tqdm.auto import tqdm

    argv = sys.argv[1:] if argv is None else list(argv)
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
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {device_name}; torch {torch.__version__}; Triton {_triton_version()} ({execution_mode()})")
    measured = []
    calls = sum(iters for _, iters in configs) * len(args.impl)
    with tqdm(total=calls, desc="benchmark", unit="call", file=sys.stderr) as bar:
        for config, iters in configs:
            bar.set_postfix_str(f"B={config.batch_size} ctx={max(config.lengths)}")
            start = bar.n
            results = run_benchmark(
                config, args.impl, warmup=args.warmup, iters=iters, graph=not args.no_graph,
                on_progress=lambda done, total, start=start: bar.update(start + done - bar.n),
            )
            measured.append((config, iters, results, utc_stamp()))
    copy = copy_bandwidth(device)
    if copy is not None:
        print(f"copy bandwidth: {copy:,.0f} GB/s (device to device, read + write)")
    rows = []
    for config, iters, results, stamp in measured:
        naive = next((r for r in results if r.name == "naive"), None)
        for r in results:
            rows.append({
                **result_row(r, config, copy_gbps=copy, device_name=device_name, warmup=args.warmup, iters=iters,
                           measured_at=stamp),
                "speedup_vs_naive": (naive.median_ms / r.median_ms) if naive else None,
            })
    import pandas as pd

    table = pd.DataFrame([{**row, "achieved_gbps": achieved_gbps(row, unique=row["shared_prefix"] > 0),
                           "correct": correct_text(row["correct"])} for row in rows]).fillna(float("nan"))
    shown = [c for c in PRINTED if c in table and (c not in ("shared_prefix", "prefix_groups")
                                                   or table["shared_prefix"].gt(0).any())]
    print(table[shown].rename(columns=PRINTED).to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""))
    if args.csv:
        meta = sidecar(kind="classic", command=" ".join(["python -m paged_attention.bench", *argv]),
                       device=str(device), copy_gbps=copy, copy_note="measured in the same process, after the table")
        write_results(rows, args.csv, meta)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{**asdict(config), "dtype": config.dtype, **asdict(r)} for config, _, results, _ in measured
                       for r in results], f, indent=1, default=str)
    return 0 if all(row["correct"] for row in rows) else 1


def _triton_version() -> str:
    import triton

    return triton.__version__


if __name__ == "__main__":
    sys.exit(main())
