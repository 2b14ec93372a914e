"""Our decode implementations against the kernels people would otherwise reach for.

On the same inputs, in one process, for each configuration:

* ``triton``           our Triton kernel (grouped GQA, split-K) on the paged cache;
* ``triton_simple``    the textbook (batch, head)-grid Triton kernel;
* ``vectorized``       Optimized PyTorch (one gather, two batched products);
* ``gather_sdpa``      the usual PyTorch path: gather the pages into a padded
                       contiguous cache, then ``scaled_dot_product_attention``;
* ``flex_paged``       FlexAttention's paged decode
                       (``torch.nn.attention.experimental._paged_attention``, compiled);
* ``sdpa_contiguous``  SDPA on a cache that was already contiguous (no paging at all):
                       the speed paging would have to match to be free;
* ``flashinfer``       FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` (CUDA-core
                       decode) on our pools, which are its NHD paged layout;
* ``flashinfer_tc``    the same wrapper with ``use_tensor_cores=True``;
* ``flashinfer_xqa``   FlashInfer's XQA decode kernel,
                       ``trtllm_batch_decode_with_kv_cache(..., backend="xqa")``, on
                       our pools (NHD) with a copy of our block table whose entries
                       past each context are block 0 (:mod:`benchmarks.peers.xqa`);
* ``triton_prefix``    (``--set prefix``) our prefix-aware Triton kernel,
                       ``prepare_triton_decode(..., shared_prefixes="detect")``;
                       skipped with a note on a library without it;
* ``flashinfer_cascade`` (``--set prefix``) FlashInfer's
                       ``MultiLevelCascadeAttentionWrapper`` with two levels: each
                       prefix group's shared pages once for all its query rows,
                       then each sequence's own pages.

The FlashInfer rows need ``flashinfer`` installed; without it they are skipped with
a note. Its index arrays and ``plan()`` are built outside the timing; only
``run()`` is timed. XQA's first call (its compilation) is made outside the timing
too; an error there skips its row with the error as the note.

Attention options (:mod:`benchmarks.peers.options`): ``--window W`` (each query
sees the last W tokens of its context), ``--soft-cap C`` (``s <- C tanh(s / C)``
on the scaled logits) and ``--sinks`` (a standard-normal sink logit per query
head, fixed seed, in the softmax denominator) go to ours through ``prepare``'s
keywords and to the float64 reference through ``reference_decode``'s; to
FlashInfer's decode wrapper as ``plan(window_left=W - 1, logits_soft_cap=C)``
(no sinks: skipped with a note); to XQA as ``window_left=W - 1`` and ``sinks``
(no soft cap: skipped); to SDPA on the contiguous cache as an additive float
mask built outside the timing, sinks as one more key of zeros whose logit the
mask sets to the sink (no soft cap: skipped). Our rows on a library without
these keywords are skipped with a note. ``--set options`` runs the classic
configurations plainly, then with window 4096, 1024 and 128, soft cap 50, and
sinks: one pass each. Every row records ``window``, ``soft_cap`` and ``sinks``.

``--set`` picks the configurations: ``classic`` (default) those of
docs/benchmarks.md; ``options`` the same, once per pass of attention options; ``ragged`` lengths drawn uniformly in 1..8192 and 1..32768 at
batches 4 to 64, and one long-tailed draw; ``fp8`` the large configurations;
``prefix`` batches whose sequences share a prompt (issue 15): shared prefix P and
own suffix S per sequence, the batch cut into prefix groups, and one control with
nothing shared. For ``prefix`` the bandwidth counts the UNIQUE bytes (a shared
block once, :meth:`DecodeConfig.unique_decode_bytes`), the floor a kernel that
reads each shared block once can reach; every row carries the logical
(``bytes_moved``) and the unique (``unique_bytes``) bytes.
``--kv-dtype`` picks how the cache is stored: ``same`` (the compute dtype, as
before) and/or ``float8_e4m3fn`` / ``float8_e5m2`` with per-tensor or per-head
scales (``--kv-scale``); ``--set fp8`` runs ``same`` and ``float8_e4m3fn`` by
default, so the 16-bit and the 8-bit cache of each configuration are timed in one
run. An fp8 row's speedups are against the 16-bit-cache rows of its configuration
in the same run: our Triton kernel's, and the same implementation's. SDPA,
gather+SDPA and FlexAttention take no fp8 cache: they run on the 16-bit cache only.

Each output is checked against the float64 reference (for an fp8 cache, on the
dequantized values). Times are GPU times from CUDA-graph replays with the L2
flushed (by a read) before every call, and the plain-call latency; bandwidth
counts the bytes a decode step must move, K and V in the cache's own dtype. The
copy bandwidth of the device is measured in the same run. Every row also carries
the largest error against the float64 reference (``max_abs_err``) and whether it is
within the dtype's tolerance (``correct``).

``--out`` writes the one result schema (:mod:`paged_attention.result_files`: a row
per configuration and implementation, with this run's ``kind``, ``speedup_vs_*``
columns after it) and its JSON sidecar (GPU, driver, CUDA, torch, Triton,
FlashInfer, copy bandwidth, command, date) beside it, both rewritten after every
configuration, so a run cut short keeps what it measured. The pair is a recorded
peer set the app can ship as it is (``explorer/bench/recorded_runs/peers/``).

The parts live in :mod:`benchmarks.peers`; this module is the entry point and the
timing loop.

Usage (on a GPU host)::

    python -m benchmarks.decode_peers --out peers.csv
    python -m benchmarks.decode_peers --set fp8 --out peers_fp8.csv
    python -m benchmarks.decode_peers --set ragged --out peers_ragged.csv
    python -m benchmarks.decode_peers --set prefix --out peers_prefix.csv
    python -m benchmarks.decode_peers --set options --out peers_options.csv
    python -m benchmarks.decode_peers --set ragged --window 1024 --out peers_ragged_window.csv
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback

import torch

from benchmarks.peers import Skipped, first_line
from benchmarks.peers.cli import parse_args
from benchmarks.peers.configs import BASE, context_lengths
from benchmarks.peers.flashinfer import load_flashinfer
from benchmarks.peers.implementations import FLASHINFER_ROWS, FP8_IMPLS, LABELS, make_run
from benchmarks.peers.report import print_summary, row_text, sidecar_notes
from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.result_files import sidecar, write_results
from paged_attention.results import (
    RESULT_COLUMNS,
    BenchResult,
    check_accuracy,
    context_summary,
    result_row,
    status_row,
    utc_stamp,
)
from paged_attention.timing import L2Flusher, Timing, gpu_time, measure_copy_bandwidth, time_calls

#: Where the inputs live and the kernels run (the CLI tests point it at the CPU).
DEVICE = "cuda"
#: Untimed calls before the timed plain calls.
CALL_WARMUP = 3


def measure(name: str, run, ref, config: DecodeConfig, device: torch.device, flush, call_iters: int, *,
            graph_fallback: bool = False) -> tuple[BenchResult, str | None]:
    """Accuracy against the float64 reference ``ref``, GPU time (median of CUDA-graph
    replays) and plain-call latencies of one implementation, and a note.

    With ``graph_fallback`` (a peer's code, not ours), a call that a CUDA graph cannot
    capture gets the plain call's latency as its GPU time, with a note, not an error.
    """
    accuracy = check_accuracy(run().clone(), ref)
    note = None
    try:
        gpu_ms = gpu_time(run, device=device, flush=flush)
    except Exception as exc:
        if not graph_fallback:
            raise
        gpu_ms, note = None, f"no CUDA graph ({first_line(exc)}): GPU time is the plain call's"
    calls = list(time_calls(run, device=device, warmup=CALL_WARMUP, iters=call_iters, flush=flush))
    if gpu_ms is None:
        gpu_ms = statistics.median(calls)
    result = BenchResult.from_timing(name, LABELS[name], str(device), Timing(call_ms=calls), accuracy,
                                     config.decode_bytes(), config.unique_decode_bytes(), gpu_median_ms=gpu_ms)
    return result, note


def measure_row(name, inputs, shape, scales, attn, ref, cfg, dev, flush, flashinfer, args, common, options) -> dict:
    """The result row of implementation ``name`` on one configuration and pass of
    attention options: timed, or skipped or failed with a note."""
    labels = dict(**common, **options.row_fields())
    try:
        run = make_run(name, inputs, shape, scales, flashinfer, attn)
        result, note = measure(name, run, ref, cfg, dev, flush, args.call_iters,
                               graph_fallback=name in FLASHINFER_ROWS)
        backend = getattr(run, "backend", None)
        note = "; ".join(filter(None, (backend and f"backend {backend}", getattr(run, "note", None), note)))
        return result_row(result, cfg, measured_at=utc_stamp(), note=note, **labels)
    except Skipped as exc:
        return status_row(name, LABELS[name], "skipped", cfg, note=str(exc), **labels)
    except Exception as exc:  # a peer missing or failing on this torch must not stop the table
        traceback.print_exc(limit=2, file=sys.stderr)
        return status_row(name, LABELS[name], "failed", cfg, note=first_line(exc), **labels)


def report(row: dict, start: float, exc: BaseException | None = None) -> None:
    """The progress line of ``row`` on stderr, with the seconds since ``start`` (and
    the traceback of ``exc``)."""
    print(f"[{time.perf_counter() - start:4.0f} s] " + row_text(row), file=sys.stderr, flush=True)
    if exc is not None:
        traceback.print_exc(limit=2, file=sys.stderr)


def unbuilt_row(kind: str, batch: int, lengths: tuple[int, ...], fields: dict, dtype: str, kv: str,
                exc: BaseException) -> dict:
    """The ``"failed"`` row of a configuration whose inputs could not be built."""
    return {**dict.fromkeys(RESULT_COLUMNS), "kind": kind, "implementation": "(inputs)", "label": "",
            "batch_size": batch, "context_len": max(lengths), "context_lens": context_summary(lengths),
            "num_heads": fields["num_heads"], "num_kv_heads": fields["num_kv_heads"], "head_dim": fields["head_dim"],
            "block_size": fields["block_size"], "dtype": dtype, "kv_dtype": kv, "kv_scale": fields.get("kv_scale", ""),
            "sinks": False, "status": "failed", "note": first_line(exc)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    dev = torch.device(DEVICE)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks.decode_peers needs a CUDA GPU (it times GPU kernels); none is visible here")

    from paged_attention.validation import check_decode_args

    impls = list(args.impl)
    flashinfer = None
    if any(name in FLASHINFER_ROWS for name in impls):
        flashinfer = load_flashinfer()
        if flashinfer is None:
            impls = [name for name in impls if name not in FLASHINFER_ROWS]
    device_name = "cpu"
    if dev.type == "cuda":
        import triton

        props = torch.cuda.get_device_properties(dev)
        device_name = props.name
        print(f"GPU {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}; "
              f"Triton {triton.__version__}" + (f"; FlashInfer {flashinfer.__version__}" if flashinfer else ""))
    copy = measure_copy_bandwidth(dev) if dev.type == "cuda" else None
    print(f"measured device-to-device copy bandwidth: {float('nan') if copy is None else copy:.0f} GB/s "
          "(read + write)")
    fp8_kv = [kv for kv in args.kv_dtype if kv != "same"]
    print(f"set {args.config_set}: {len(args.configs)} configuration(s); dtypes {' '.join(args.dtype)}; KV caches "
          + " ".join("in the compute dtype" if kv == "same" else f"{kv} ({args.kv_scale} scales)" for kv in args.kv_dtype)
          + f"; implementations {' '.join(impls)}")
    if any(options.any for options in args.passes):
        print("attention options, a pass over the configurations each: "
              + "; ".join(options.text() or "none" for options in args.passes)
              + ("; sinks: standard normal, one per query head, fixed seed" if any(o.sinks for o in args.passes)
                 else ""))
    if args.config_set == "prefix":
        print("GB/s and fraction of copy count UNIQUE bytes (each shared block once: unique_decode_bytes); "
              "bytes_moved is every sequence's, unique_bytes the pool's")
    no_fp8 = [name for name in impls if name not in FP8_IMPLS]
    if fp8_kv and no_fp8:
        print(f"{', '.join(no_fp8)}: no fp8 cache; "
              + ("they run on the 16-bit cache only, the reference point for the fp8 rows" if "same" in args.kv_dtype
                 else "skipped (no 16-bit cache in this run)"))
    if flashinfer:
        print("FlashInfer JIT-compiles each kernel variant (dtypes, tensor cores or not) at its first plan(): "
              "tens of seconds each, outside the measurements")
    sys.stdout.flush()
    meta = sidecar(kind="peers", command=" ".join(["python -m benchmarks.decode_peers", *argv]), device=DEVICE,
                   copy_gbps=copy, peers={"flashinfer": flashinfer.__version__} if flashinfer else {},
                   set=args.config_set)
    if any(options.any for options in args.passes):
        meta["options"] = [options.text() or "none" for options in args.passes]
    meta.update(sidecar_notes(args.config_set, gpu=meta["gpu"], date=meta["date"], flashinfer=bool(flashinfer)))
    common = dict(copy_gbps=copy, device_name=device_name, warmup=CALL_WARMUP, iters=args.call_iters)

    flush = L2Flusher(dev)
    start = time.perf_counter()
    rows = []
    for dtype in args.dtype:
        for kind, batch, lens, over in args.configs:
            lengths = context_lengths(lens, batch)
            base_ms = {}  # (options, implementation) -> GPU time on this configuration's 16-bit cache
            for kv in args.kv_dtype:
                fp8 = kv != "same"
                fields = {**BASE, "head_dim": args.head_dim, **over}
                if fp8:
                    fields.update(kv_dtype=kv, kv_scale=args.kv_scale)
                try:
                    cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype=dtype, device=DEVICE, seed=7, **fields)
                    inputs = build_decode_inputs(cfg)
                    scales = inputs.scales() if fp8 else {}
                    shape = check_decode_args(*inputs.args(), **scales)
                except Exception as exc:  # e.g. a library without fp8 caches: the other rows still run
                    rows.append(unbuilt_row(kind, batch, lengths, fields, dtype, kv if fp8 else dtype, exc))
                    report(rows[-1], start, exc)
                    continue
                for options in args.passes:
                    attn = options.kwargs(shape.num_heads, dev)
                    try:
                        ref = reference_decode(*inputs.args(), **scales, **attn)
                    except Exception as exc:  # a reference without these options yet
                        rows.append({**unbuilt_row(kind, batch, lengths, fields, dtype, kv if fp8 else dtype, exc),
                                     "implementation": "(reference)", **options.row_fields()})
                        report(rows[-1], start, exc)
                        continue
                    for name in impls:
                        if fp8 and name not in FP8_IMPLS:
                            continue
                        # Bytes count the window's tokens only: what the step must read.
                        row_cfg = cfg.with_(window=options.window) if options.window is not None else cfg
                        row = measure_row(name, inputs, shape, scales, attn, ref, row_cfg, dev, flush, flashinfer,
                                          args, common, options)
                        row = {**row, "kind": kind}
                        if row["status"] == "ok":
                            if not fp8:
                                base_ms[options, name] = row["gpu_time_ms"]
                            else:
                                if (options, "triton") in base_ms:
                                    row["speedup_vs_triton_16bit"] = base_ms[options, "triton"] / row["gpu_time_ms"]
                                if (options, name) in base_ms:
                                    row["speedup_vs_own_16bit"] = base_ms[options, name] / row["gpu_time_ms"]
                        rows.append(row)
                        report(row, start)
                    del ref, attn
                del inputs, shape, scales
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            if args.out:  # after every configuration: a run cut short keeps what it measured
                write_results(rows, args.out, meta, leading=("kind",))
    print_summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
