"""One benchmark result: in memory, and as the row every results CSV holds.

* :class:`Accuracy` and :func:`check_accuracy`: one output against the float64
  reference;
* :class:`BenchResult`: timing, bandwidth and accuracy of one implementation on one
  configuration, in memory;
* :func:`gbps`, :func:`achieved_gbps` and :func:`pct_of_copy`: achieved bandwidth,
  bytes over time in GB/s (1e9 B/s), and its fraction of the device's copy
  bandwidth, the one place either is computed;
* :data:`RESULT_COLUMNS`: the one row of every results CSV (the benchmark CLI's,
  ``benchmarks.decode_peers``', the Sweep page's, ``benchmarks.record``'s), built by
  :func:`result_row` or :func:`status_row`; a writer adds its own columns after
  it (a sweep's axis and value, a peer run's speedups). The files, their sidecar
  and the one writer and reader are :mod:`paged_attention.result_files`.

Two counts of bytes: logical (every sequence's tokens,
:meth:`~paged_attention.config.DecodeConfig.decode_bytes`) and unique (a block that
a prefix group shares once,
:meth:`~paged_attention.config.DecodeConfig.unique_decode_bytes`); they differ only
for a batch with a shared prefix. The fraction of the copy bandwidth counts unique
bytes, the ones the hardware must move.
"""

from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from .config import DecodeConfig, tolerance
from .samples import percentile
from .timing import Timing


# -- accuracy --------------------------------------------------------------------

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
        Same shape, float64 (from :func:`~paged_attention.reference.reference_decode`).

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


# -- bandwidth -------------------------------------------------------------------

def present(value) -> bool:
    """True for a number that was measured: not None and not NaN."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def gbps(nbytes: float | None, ms: float | None) -> float | None:
    """``nbytes`` moved in ``ms`` milliseconds, in GB/s (1e9 bytes per second);
    None when either is missing or the time is not positive."""
    if not present(nbytes) or not present(ms) or ms <= 0:
        return None
    return nbytes / ms / 1e6


def achieved_gbps(result, *, unique: bool = False) -> float | None:
    """The achieved bandwidth to report for ``result``, in GB/s: from GPU time
    where CUDA graphs measured it (no host in it), else from the call latency; on
    logical bytes, or with ``unique`` on unique bytes (a shared block once).

    ``result`` is a :class:`BenchResult`, a result row (:data:`RESULT_COLUMNS`) or
    anything with ``gpu_gbps`` and ``gbps`` (and ``gpu_unique_gbps`` and
    ``unique_gbps`` for ``unique``; without them, the logical ones).
    """
    get = result.get if isinstance(result, Mapping) else lambda key: getattr(result, key, None)
    if unique and present(get("unique_gbps")):
        gpu, call = get("gpu_unique_gbps"), get("unique_gbps")
    else:
        gpu, call = get("gpu_gbps"), get("gbps")
    if present(gpu):
        return gpu
    return call if present(call) else None


def pct_of_copy(achieved: float | None, copy_gbps: float | None) -> float | None:
    """``achieved`` GB/s as a percentage of the device's copy bandwidth
    ``copy_gbps`` (GB/s, read plus write); None where either is missing."""
    if not present(achieved) or not present(copy_gbps) or copy_gbps <= 0:
        return None
    return 100 * achieved / copy_gbps


def shares_kv(result) -> bool:
    """True when a shared prefix makes ``result``'s unique bytes fewer than its
    logical bytes (``result`` is a :class:`BenchResult` or anything with
    ``bytes_moved``, and maybe ``unique_bytes``)."""
    unique = getattr(result, "unique_bytes", None)
    return present(unique) and unique < result.bytes_moved


# -- the result in memory --------------------------------------------------------

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

    @classmethod
    def from_timing(
        cls, name: str, label: str, device: str, timing: Timing, accuracy: Accuracy, nbytes: int,
        unique_bytes: int | None = None, *, gpu_median_ms: float | None = None,
    ) -> "BenchResult":
        """The result of one implementation from its samples.

        Parameters
        ----------
        name, label, device : str
            Its key, its name in tables, where it ran.
        timing : Timing
            Its call latencies, GPU times and host times, in ms.
        accuracy : Accuracy
            Its output against the reference.
        nbytes, unique_bytes : int
            Logical and unique bytes a step moves (unique: ``nbytes`` if None).
        gpu_median_ms : float, optional
            A GPU time known only as a median (no samples, so no spread); used where
            ``timing`` has no GPU samples.
        """
        samples, gpu, host = timing.call_ms, timing.gpu_ms, timing.host_ms
        median = statistics.median(samples)
        gpu_ms = statistics.median(gpu) if gpu else gpu_median_ms
        unique_bytes = nbytes if unique_bytes is None else unique_bytes
        return cls(
            name=name, label=label, device=device, samples_ms=list(samples), median_ms=median,
            p20_ms=percentile(samples, 0.2), p80_ms=percentile(samples, 0.8), gpu_time_ms=gpu_ms,
            bytes_moved=nbytes, gbps=gbps(nbytes, median), gpu_gbps=gbps(nbytes, gpu_ms),
            max_abs_err=accuracy.max_abs_err, max_rel_err=accuracy.max_rel_err, atol=accuracy.atol,
            rtol=accuracy.rtol, passed=accuracy.passed, max_tol_ratio=accuracy.max_tol_ratio,
            gpu_p20_ms=percentile(gpu, 0.2) if gpu else None, gpu_p80_ms=percentile(gpu, 0.8) if gpu else None,
            gpu_samples_ms=gpu, unique_bytes=unique_bytes, unique_gbps=gbps(unique_bytes, median),
            gpu_unique_gbps=gbps(unique_bytes, gpu_ms), host_ms=statistics.median(host) if host else None,
        )


# -- the row ---------------------------------------------------------------------

#: The columns of a result row, in the order a CSV holds them, with their type and
#: meaning. Times in ms (host time in µs), bytes in bytes, bandwidth in GB/s.
COLUMNS: dict[str, tuple[type, str]] = {
    "implementation": (str, "its key: naive, vectorized, triton, ..., or a peer's (sdpa_contiguous, ...)"),
    "label": (str, "its name in tables"),
    "batch_size": (int, "sequences"),
    "context_len": (int, "the longest context, tokens"),
    "context_lens": (str, "every context: '2048', or '1..8141 (mean 4071)' for a ragged batch"),
    "tokens": (int, "cached tokens of all sequences"),
    "query_lens": (str, "new (query) tokens per sequence, verified in one step: '1' (the plain decode step), '4', or "
                        "'1..4 (mean 2)' per sequence; files before it ran one"),
    "query_tokens": (int, "query rows of the step: every sequence's new tokens together (the batch size in files "
                          "before it); time per token is a step's time over it"),
    "num_heads": (int, "query heads"),
    "num_kv_heads": (int, "KV heads"),
    "head_dim": (int, "head dimension"),
    "block_size": (int, "tokens per block"),
    "dtype": (str, "query and output dtype"),
    "kv_dtype": (str, "KV-cache dtype (the compute dtype, or an 8-bit float format)"),
    "kv_scale": (str, "an fp8 cache's scales: per_tensor or per_head; empty otherwise"),
    "block_layout": (str, "physical block layout: contiguous, shuffled, fragmented"),
    "shared_prefix": (int, "tokens at the start of every sequence its prefix group shares"),
    "prefix_groups": (int, "groups of consecutive sequences sharing a prefix"),
    "window": (int, "sliding window: the tokens each query sees, the last of its context; empty: all of them"),
    "soft_cap": (float, "logit soft cap C (s <- C tanh(s / C) before the softmax); empty: none"),
    "sinks": (bool, "a learned sink logit per query head in the softmax denominator (False in files before it)"),
    "median_ms": (float, "call latency, median over calls (ms)"),
    "p20_ms": (float, "call latency, 20th percentile"),
    "p80_ms": (float, "call latency, 80th percentile"),
    "gpu_time_ms": (float, "GPU time from CUDA-graph replays, median (ms); empty where not measured"),
    "gpu_p20_ms": (float, "GPU time, 20th percentile"),
    "gpu_p80_ms": (float, "GPU time, 80th percentile"),
    "host_us": (float, "host time per call of back-to-back calls (µs); empty where not measured"),
    "bytes_moved": (int, "bytes a decode step must move, logically (every sequence's tokens)"),
    "unique_bytes": (int, "bytes a decode step must move at least (a shared block once)"),
    "gbps": (float, "logical bytes over the call latency"),
    "gpu_gbps": (float, "logical bytes over the GPU time"),
    "unique_gbps": (float, "unique bytes over the call latency"),
    "gpu_unique_gbps": (float, "unique bytes over the GPU time"),
    "copy_gbps": (float, "the device's measured copy bandwidth (read + write)"),
    "pct_of_copy_bw": (float, "unique bytes over GPU time (else call latency), % of copy_gbps"),
    "max_abs_err": (float, "largest |out - ref| against the float64 reference"),
    "correct": (bool, "within the dtype's tolerance of the float64 reference"),
    "status": (str, "ok (timed), skipped, failed or refused"),
    "note": (str, "why a row was skipped or failed, or what else to know"),
    "device": (str, "cpu or cuda"),
    "device_name": (str, "the device's name"),
    "warmup": (int, "untimed rounds"),
    "iters": (int, "timed rounds"),
    "measured_at": (str, "when it was timed, ISO 8601 UTC"),
}
RESULT_COLUMNS: tuple[str, ...] = tuple(COLUMNS)
#: A row's ``status``.
STATUSES: tuple[str, ...] = ("ok", "skipped", "failed", "refused")


def context_summary(lengths: Sequence[int]) -> str:
    """``"2048"`` for a uniform batch, ``"1..8141 (mean 4071)"`` for a ragged one (the
    context lengths, or the query tokens per sequence)."""
    if not lengths:
        return ""
    if min(lengths) == max(lengths):
        return str(lengths[0])
    return f"{min(lengths)}..{max(lengths)} (mean {sum(lengths) / len(lengths):.0f})"


def config_fields(config: DecodeConfig) -> dict:
    """The configuration columns of a row of ``config``."""
    return {
        "batch_size": config.batch_size,
        "context_len": max(config.lengths, default=0),
        "context_lens": context_summary(config.lengths),
        "tokens": sum(config.lengths),
        "query_lens": context_summary(config.query_lengths),
        "query_tokens": config.num_query_tokens,
        "num_heads": config.num_heads,
        "num_kv_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "block_size": config.block_size,
        "dtype": config.dtype,
        "kv_dtype": str(config.kv_torch_dtype).removeprefix("torch."),
        "kv_scale": config.kv_scale if config.is_fp8 else "",
        "block_layout": config.block_layout,
        "shared_prefix": config.shared_prefix,
        "prefix_groups": config.prefix_groups,
        "device": config.device,
    }


def attention_fields(window: int | None = None, soft_cap: float | None = None, sinks: bool = False) -> dict:
    """The attention-option columns of a row: ``window`` (tokens, None for all),
    ``soft_cap`` (None for none) and ``sinks`` (whether sink logits were used)."""
    return {"window": window, "soft_cap": soft_cap, "sinks": bool(sinks)}


def result_row(
    result, config: DecodeConfig, *, copy_gbps: float | None = None, device_name: str = "",
    warmup: int | None = None, iters: int | None = None, measured_at: str = "", note: str = "",
    window: int | None = None, soft_cap: float | None = None, sinks: bool = False,
) -> dict:
    """The row (:data:`RESULT_COLUMNS`) of a timed ``result`` on ``config``.

    ``result`` is a :class:`BenchResult` or anything with its fields (a row of
    :meth:`BenchResult.row`); its own bandwidth is kept, and the fraction of the
    copy bandwidth ``copy_gbps`` (GB/s, None where not measured) is computed on
    its unique bytes. ``window``, ``soft_cap`` and ``sinks`` are the attention
    options it ran with (:func:`attention_fields`).
    """
    get = result.get if isinstance(result, Mapping) else lambda key: getattr(result, key, None)
    host_ms = get("host_ms")
    unique = get("unique_bytes")
    if not present(unique) and config.shared_prefix == 0:
        unique = get("bytes_moved")
    row = {
        "implementation": get("name"), "label": get("label"), **config_fields(config),
        **attention_fields(window, soft_cap, sinks),
        "median_ms": get("median_ms"), "p20_ms": get("p20_ms"), "p80_ms": get("p80_ms"),
        "gpu_time_ms": get("gpu_time_ms"), "gpu_p20_ms": get("gpu_p20_ms"), "gpu_p80_ms": get("gpu_p80_ms"),
        "host_us": host_ms * 1e3 if present(host_ms) else None,
        "bytes_moved": get("bytes_moved"), "unique_bytes": unique, "gbps": get("gbps"), "gpu_gbps": get("gpu_gbps"),
        "unique_gbps": get("unique_gbps"), "gpu_unique_gbps": get("gpu_unique_gbps"), "copy_gbps": copy_gbps,
        "pct_of_copy_bw": pct_of_copy(achieved_gbps(result, unique=True), copy_gbps),
        "max_abs_err": get("max_abs_err"), "correct": bool(get("passed")), "status": "ok", "note": note,
        "device_name": device_name, "warmup": warmup, "iters": iters, "measured_at": measured_at,
    }
    return {column: row[column] for column in RESULT_COLUMNS}


def status_row(
    name: str, label: str, status: str, config: DecodeConfig, *, note: str, copy_gbps: float | None = None,
    device_name: str = "", warmup: int | None = None, iters: int | None = None,
    window: int | None = None, soft_cap: float | None = None, sinks: bool = False,
) -> dict:
    """A row without timings (:data:`RESULT_COLUMNS`): ``status`` is ``"skipped"``,
    ``"failed"`` or ``"refused"``, ``note`` says why; ``window``, ``soft_cap`` and
    ``sinks`` as in :func:`result_row`.

    Raises
    ------
    ValueError
        If ``status`` is not one of those three.
    """
    if status not in STATUSES or status == "ok":
        raise ValueError(f"status must be skipped, failed or refused; got {status!r}")
    row = dict.fromkeys(RESULT_COLUMNS)
    row.update(
        implementation=name, label=label, **config_fields(config), **attention_fields(window, soft_cap, sinks),
        bytes_moved=config.decode_bytes(),
        unique_bytes=config.unique_decode_bytes(), copy_gbps=copy_gbps, status=status, note=note,
        device_name=device_name, warmup=warmup, iters=iters, measured_at="",
    )
    return row


def utc_stamp() -> str:
    """The time now, UTC, ISO 8601 to the second, as a row's ``measured_at``:
    ``"2026-12-01T12:07:20Z"``."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def correct_text(correct) -> str:
    """How tables write ``correct``: ``"yes"``, ``"NO"``, or ``""`` where not checked."""
    if not present(correct) or correct == "":
        return ""
    return "yes" if parse_bool(correct) else "NO"


def parse_bool(value) -> bool | None:
    """A ``correct`` cell as a bool: True, False, ``"True"``/``"False"`` (this
    schema), ``"yes"``/``"NO"`` (the CSVs before it); None where empty.

    Raises
    ------
    ValueError
        For anything else.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if not present(value) or value == "":
        return None
    text = str(value)
    if text in ("True", "yes"):
        return True
    if text in ("False", "NO"):
        return False
    raise ValueError(f"must be True or False (or yes or NO); got {text!r}")
