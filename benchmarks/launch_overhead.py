"""Launch overhead: what a decode call costs the host, beside what it costs the GPU.

For the classic configurations (2, 60), (1, 512), (16, 256), (4, 2048) and
(1, 32768) (float16, 32 query heads, 8 KV heads, head_dim 128, block_size 16, a
shuffled pool), on the same inputs in one process, per implementation:

* ``host_us``: host time per call, back-to-back calls with no synchronisation
  (``--host-calls``, in batches: :func:`paged_attention.timing.host_time`);
* ``call_ms``: call latency, the median of interleaved rounds (L2 flushed, the
  GPU idle as each call starts), rounds added until every median is stable or
  ``--budget`` seconds are spent;
* ``gpu_ms``: GPU time, the median of CUDA-graph replays with L2 flushed;
* ``overhead_us``: call latency minus GPU time, what the caller waits on the host.

Ours are the capturable implementations as :func:`paged_attention.prepare`
returns them (a CUDA-graph replay per call) and, named ``NAME:eager``, with
``graph=False`` (Python and Triton's JIT dispatcher on every call). Peers, when
importable: FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper.run()`` (planned
outside the timing) and SDPA on a contiguous KV cache, set up as
:mod:`benchmarks.decode_peers` sets them up. Everything is timed by
:func:`paged_attention.timing.time_interleaved`, the harness of the app and the
CLI; the last table says, per configuration, whether our Triton call is faster
than each peer's, slower, or indistinguishable
(:func:`paged_attention.samples.compare_timings`).

Usage (on a GPU host)::

    python -m benchmarks.launch_overhead --out launch_overhead.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import traceback

import torch

from benchmarks.decode_peers import first_line
from benchmarks.peers import Skipped
from benchmarks.peers.configs import BASE
from benchmarks.peers.flashinfer import FLASHINFER, flashinfer_decode, load_flashinfer
from benchmarks.peers.torch_peers import sdpa_contiguous
from paged_attention import DecodeConfig, build_decode_inputs, prepare, reference_decode
from paged_attention.results import check_accuracy
from paged_attention.samples import compare_timings, percentile
from paged_attention.timing import HOST_BATCH, HOST_CALLS, L2Flusher, gpu_time, time_interleaved
from paged_attention.validation import check_decode_args

#: (batch_size, context_len): the classic table and one long context.
CONFIGS = [(2, 60), (1, 512), (16, 256), (4, 2048), (1, 32768)]
OURS = ("triton", "triton_prefix", "triton_simple", "vectorized")
EAGER = tuple(f"{name}:eager" for name in OURS)
PEERS = ("flashinfer", "flashinfer_tc", "sdpa_contiguous")
IMPLS = ("triton", "triton:eager", "triton_prefix", "triton_simple", "vectorized", "vectorized:eager",
         "flashinfer", "sdpa_contiguous")
#: Where the inputs live and the kernels run (the CLI tests point it at the CPU).
DEVICE = "cuda"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.launch_overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--impl", nargs="+", choices=[*OURS, *EAGER, *PEERS], default=list(IMPLS),
                   help="implementations; NAME:eager is ours launched through Python every call (no CUDA graph)")
    p.add_argument("--host-calls", type=int, default=HOST_CALLS, help="back-to-back calls for the host time")
    p.add_argument("--min-rounds", type=int, default=100, help="fewest interleaved rounds of call latency")
    p.add_argument("--budget", type=float, default=10.0,
                   help="seconds of call-latency rounds per configuration past which none is added")
    p.add_argument("--warmup", type=int, default=10, help="untimed rounds first")
    p.add_argument("--out", help="CSV file for the table (rewritten after every configuration)")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    for flag, value in (("--host-calls", args.host_calls), ("--min-rounds", args.min_rounds)):
        if value < 1:
            p.error(f"{flag} must be at least 1; got {value}")
    if args.budget < 0 or args.warmup < 0:
        p.error("--budget and --warmup must be non-negative")
    args.impl = list(dict.fromkeys(args.impl))
    return args


def make_run(name: str, inputs, shape, flashinfer):
    """The zero-argument callable of ``name`` on ``inputs``, and whether it replays a graph of ours."""
    if name in OURS:
        run = prepare(name, *inputs.args())
        return run, run.graphed
    if name in EAGER:
        return prepare(name.removesuffix(":eager"), *inputs.args(), graph=False), False
    if name in FLASHINFER:
        return flashinfer_decode(flashinfer, inputs, shape, {}, use_tensor_cores=FLASHINFER[name]), None
    return sdpa_contiguous(inputs, shape), None


def measure_config(batch: int, context: int, impls: list[str], flashinfer, args, flush) -> list[dict]:
    """One row per implementation on one configuration."""
    dev = torch.device(DEVICE)
    cfg = DecodeConfig(batch_size=batch, context_lens=context, dtype="float16", device=DEVICE, seed=7, **BASE)
    inputs = build_decode_inputs(cfg)
    shape = check_decode_args(*inputs.args())
    ref = reference_decode(*inputs.args())
    rows, runs, graphable = {}, {}, []
    for name in impls:
        row = rows[name] = dict(batch=batch, context=context, impl=name)
        try:
            run, graphed = make_run(name, inputs, shape, flashinfer)
            acc = check_accuracy(run().clone(), ref)
        except Skipped as exc:
            row["note"] = str(exc)
            continue
        except Exception as exc:  # a peer failing on this torch must not stop the table
            row["error"] = first_line(exc)
            traceback.print_exc(limit=2, file=sys.stderr)
            continue
        row.update(graphed=graphed, correct=acc.passed, max_abs_err=acc.max_abs_err)
        runs[name] = run
        if dev.type == "cuda":
            try:  # a peer's call may not be capturable; ours always is
                gpu_time(run, device=dev, flush=flush, calls_per_graph=1, replays=1)
                graphable.append(name)
            except Exception as exc:
                row["note"] = f"no CUDA graph ({first_line(exc)}): no GPU time"
    timings = time_interleaved(runs, device=dev, warmup=args.warmup, rounds=args.min_rounds, flush=flush,
                               graph=graphable, budget_s=args.budget, host=list(runs), host_calls=args.host_calls)
    for name, t in timings.items():
        call = t.call_ms
        rows[name].update(
            host_us=statistics.median(t.host_ms) * 1e3, host_calls=len(t.host_ms) * HOST_BATCH,
            call_ms=statistics.median(call), call_p20_ms=percentile(call, 0.2), call_p80_ms=percentile(call, 0.8),
            rounds=len(call),
        )
        if t.gpu_ms:
            gpu = statistics.median(t.gpu_ms)
            rows[name].update(gpu_ms=gpu, overhead_us=(rows[name]["call_ms"] - gpu) * 1e3)
    return list(rows.values())


def verdicts(table):
    """A table, per configuration: our Triton call against each peer's (faster, slower or
    indistinguishable, by their p20-p80 call latencies)."""
    import pandas as pd

    out = []
    timed = table.dropna(subset=["call_ms"]) if "call_ms" in table else table.iloc[:0]
    for (batch, context), group in timed.groupby(["batch", "context"], sort=False):
        by_impl = group.set_index("impl")
        if "triton" not in by_impl.index:
            continue
        ours = by_impl.loc["triton"]
        for peer in (name for name in PEERS if name in by_impl.index):
            theirs = by_impl.loc[peer]
            out.append(dict(batch=batch, context=context, peer=peer, triton_call_ms=ours["call_ms"],
                            peer_call_ms=theirs["call_ms"],
                            triton_is=compare_timings((ours["call_p20_ms"], ours["call_p80_ms"]),
                                                      (theirs["call_p20_ms"], theirs["call_p80_ms"]))))
    return pd.DataFrame(out)


def main(argv=None) -> int:
    args = parse_args(argv)
    dev = torch.device(DEVICE)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks.launch_overhead needs a CUDA GPU (it times GPU launches); none is visible here")

    import pandas as pd

    impls = list(args.impl)
    flashinfer = None
    if any(name in FLASHINFER for name in impls):
        flashinfer = load_flashinfer()
        if flashinfer is None:
            impls = [name for name in impls if name not in FLASHINFER]
    if dev.type == "cuda":
        import triton

        print(f"GPU {torch.cuda.get_device_name(dev)}; torch {torch.__version__}; Triton {triton.__version__}"
              + (f"; FlashInfer {flashinfer.__version__}" if flashinfer else ""))
    print(f"implementations {' '.join(impls)}; host time over {args.host_calls} back-to-back calls; call latency "
          f"in at least {args.min_rounds} interleaved rounds, up to {args.budget:g} s per configuration", flush=True)
    flush = L2Flusher(dev)
    rows = []
    for batch, context in CONFIGS:
        rows += measure_config(batch, context, impls, flashinfer, args, flush)
        if args.out:  # after every configuration: a run cut short keeps what it measured
            pd.DataFrame(rows).to_csv(args.out, index=False)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    cols = [c for c in ["batch", "context", "impl", "graphed", "host_us", "call_ms", "call_p20_ms", "call_p80_ms",
                        "gpu_ms", "overhead_us", "rounds", "correct", "error", "note"] if c in table]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""))
    judged = verdicts(table)
    if len(judged):
        print("\nOur Triton call latency against each peer's (p20-p80 ranges apart, or indistinguishable):")
        print(judged.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
