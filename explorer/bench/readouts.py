"""Readouts of one configuration and its benchmark results, as the pages show them.

The sidebar's memory summary, a configuration's one-line label, the bytes a
shared prefix saves, each implementation's host overhead and its rank against
the baseline (faster, slower or indistinguishable), and the rows of the
benchmark's results table (one per implementation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Sequence

from explorer.cache.window import window_reads
from explorer.formatting import (
    KV_SCALE_LABELS,
    attention_text,
    count,
    format_bytes,
    format_number,
    format_times,
    kv_dtype_label,
    sig3,
    span_text,
)
from paged_attention.results import achieved_gbps, correct_text, pct_of_copy, shares_kv
from paged_attention.config import DecodeConfig
from paged_attention.samples import compare_timings


@dataclass(frozen=True)
class MemorySummary:
    """The sidebar's memory readout for one configuration."""

    kv_cache_bytes: int
    total_bytes: int
    blocks_used: int
    blocks_in_pool: int
    allocated_slots: int
    wasted_slots: int
    #: The cache's dtype as the app names it (``"float16"``, ``"fp8 e4m3"``).
    kv_dtype: str = ""
    #: Bytes of one stored K or V value (1 for fp8).
    kv_element_bytes: int = 0
    #: Bytes of one physical block, K and V together.
    block_bytes: int = 0

    @property
    def wasted_fraction(self) -> float:
        """Share of allocated slots left empty in partly filled last blocks."""
        return self.wasted_slots / self.allocated_slots if self.allocated_slots else 0.0


def memory_summary(config: DecodeConfig) -> MemorySummary:
    """KV-cache bytes, blocks and wasted slots of ``config`` (nothing is allocated)."""
    return MemorySummary(
        kv_cache_bytes=config.kv_cache_bytes(),
        total_bytes=config.memory_bytes(),
        blocks_used=config.num_blocks_used,
        blocks_in_pool=config.num_blocks,
        allocated_slots=config.num_blocks_used * config.block_size,
        wasted_slots=config.wasted_slots,
        kv_dtype=kv_dtype_label(config.kv_dtype, config.dtype),
        kv_element_bytes=config.kv_element_size,
        block_bytes=config.kv_cache_bytes() // config.num_blocks,
    )


#: What :func:`config_summary` can leave out: the settings a caller replaces.
SUMMARY_PARTS = ("batch_size", "context_len", "num_kv_heads", "head_dim", "block_size", "kv_dtype", "window",
                 "query_lens")


def config_summary(config: DecodeConfig, without: Collection[str] = ()) -> str:
    """A short label for one configuration, e.g. ``"B=4 ctx=128 H=32/8 d=128 bs=16 float16 shuffled"``;
    an fp8 cache adds its format and scales after the dtype: ``"float16 kv=fp8 e4m3 per tensor"``;
    several new tokens per sequence add ``q=4`` (per sequence ``q=1-16``) after the context.

    ``without`` (any of :data:`SUMMARY_PARTS`) leaves out settings the caller
    replaces, so that the label names only those in force: a sweep of the context
    length drops ``ctx=``, one of the KV heads writes the query heads alone (``H=32``),
    one comparing cache dtypes drops ``kv=``, one of the window drops ``window=``, one of the
    new tokens drops ``q=``.

    Raises
    ------
    ValueError
        If ``without`` names anything else.
    """
    odd = set(without) - set(SUMMARY_PARTS)
    if odd:
        raise ValueError(f"config_summary can leave out {', '.join(SUMMARY_PARTS)}; got {', '.join(sorted(odd))}")
    lens = config.lengths
    if len(set(lens)) <= 1:
        ctx = f"ctx={format_number(lens[0] if lens else 0)}"
    else:
        ctx = f"ctx={span_text(lens, '-')} (mean {format_number(round(sum(lens) / len(lens)))})"
    heads = f"H={format_number(config.num_heads)}" + (
        "" if "num_kv_heads" in without else f"/{format_number(config.num_kv_heads)}")
    queries = f"q={span_text(config.query_lengths, '-')}" if config.has_query_lens else ""
    parts = {"batch_size": f"B={format_number(config.batch_size)}", "context_len": ctx, "query_lens": queries, "heads": heads,
             "head_dim": f"d={format_number(config.head_dim)}", "block_size": f"bs={format_number(config.block_size)}",
             "dtype": config.dtype + ("" if "kv_dtype" in without else _kv_text(config)),
             "layout": config.block_layout, "device": config.device}
    return " ".join(v for k, v in parts.items() if k not in without and v) + _prefix_text(config) + _attention_text(
        config, window="window" not in without)


def _attention_text(config: DecodeConfig, window: bool = True) -> str:
    options = [f"window={format_number(config.window)}"] if window and config.window is not None else []
    options += [f"soft_cap={format_number(config.soft_cap)}"] if config.soft_cap is not None else []
    return "".join(f" {o}" for o in options + (["sinks"] if config.sinks else []))


def attention_note(config: DecodeConfig) -> str | None:
    """What the attention options in force change, for the benchmark page; None without any.

    Names them (:func:`~explorer.formatting.attention_text`); with a window, the
    tokens it reads of those held (:func:`~explorer.cache.window.window_reads`)
    and the K and V bytes of each (DecodeConfig's byte counts, which count the
    window's tokens only), the bytes every GB/s below is counted on.
    """
    if config.window is None and config.soft_cap is None and not config.sinks:
        return None
    note = (f"**Attention: {attention_text(config.window, config.soft_cap, config.sinks)}.** Every implementation "
            "and the float64 reference run with "
            + ("it" if sum([config.window is not None, config.soft_cap is not None, config.sinks]) == 1 else "them")
            + (" (the sinks: one random logit per query head)" if config.sinks else "") + ".")
    if config.window is None:
        return note
    reads = window_reads(config.lengths, config.block_size, config.window, config.query_lengths)
    if reads.tokens_read == reads.tokens_held:
        return note + (f" The sliding window ({count(config.window, 'token')}) covers every context here: it "
                       "leaves nothing unread.")
    held = config.with_(window=None).needed_kv_bytes()
    return (note + f" The sliding window: {reads.detail()}, {format_bytes(config.needed_kv_bytes())} of the "
            f"{format_bytes(held)} of K and V held; bytes and GB/s count only the window's.")


def query_note(config: DecodeConfig) -> str | None:
    """What several new tokens per sequence change, for the benchmark page; None for
    the plain decode step (one per sequence, given as one value).

    Names them and the query rows they make; every implementation and the float64
    reference verify them in one step, causally; the bytes a step moves count K and V
    once and a query and an output row per token
    (:meth:`~paged_attention.config.DecodeConfig.decode_bytes`); time per token is
    the time per step over the step's query tokens.
    """
    if not config.has_query_lens:
        return None
    rows = config.num_query_tokens
    return (f"**New tokens: {span_text(config.query_lengths)} per sequence, {count(rows, 'query token')} a step.** "
            "Every implementation and the float64 reference verify them in one step: each new token, already in "
            "the cache, attends to its sequence's context up to itself. K and V are read once a step, for all of "
            f"a sequence's new tokens; bytes and GB/s count them once, plus a query and an output row per token "
            f"({format_bytes(config.decode_bytes())} a step). Times are per step; per token is a step's time over "
            f"its {count(rows, 'query token')}.")


def per_token_ms(ms: float | None, config: DecodeConfig) -> float | None:
    """A step's time ``ms`` per query token of ``config`` (ms over
    :attr:`~paged_attention.config.DecodeConfig.num_query_tokens`); None for None."""
    return None if ms is None else ms / max(1, config.num_query_tokens)


def _prefix_text(config: DecodeConfig) -> str:
    if not config.shared_prefix:
        return ""
    return f" prefix={format_number(config.shared_prefix)}×{count(config.prefix_groups, 'group')}"


#: What each byte figure of the Decode benchmark counts, said wherever one is shown:
#: the shared prefix's cards count the K and V a decode step reads
#: (:func:`kv_read_label`), the bandwidth chart every byte it moves, its query and
#: output too (:func:`step_bytes_text`). Unnamed, "786 kB" on a card and "852 kB" over
#: the chart read as two values of one quantity (issue 27).
KV_BYTES, STEP_BYTES = "K+V", "K+V+query+output"


def kv_read_label(kind: str) -> str:
    """A shared prefix's card of K and V bytes: ``"K+V read, logical"`` (``kind``)."""
    return f"{KV_BYTES} read, {kind}"


def step_bytes_text(moved: int, unique: int | None = None) -> str:
    """The bytes one decode step moves (:data:`STEP_BYTES`) as the bandwidth chart's
    subtitle: ``moved`` (logical: a shared prefix in every sequence), or with a
    shared prefix ``unique`` (each shared block once), the logical ones beside."""
    if unique is None:
        return f"{format_bytes(moved, 3)} per decode step ({STEP_BYTES})"
    return (f"{format_bytes(unique, 3)} per decode step ({STEP_BYTES}, each shared block once; "
            f"{format_bytes(moved, 3)} logical)")


@dataclass(frozen=True)
class SharedKV:
    """K and V bytes one decode step reads, logically and at least (a shared
    prefix's blocks once per group), for a batch with a shared prefix."""

    logical_bytes: int
    unique_bytes: int
    shared_blocks: int
    prefix_groups: int

    @property
    def saved_fraction(self) -> float:
        """Share of the logical bytes that sharing leaves out."""
        return 1 - self.unique_bytes / self.logical_bytes if self.logical_bytes else 0.0


def shared_kv(config: DecodeConfig) -> SharedKV | None:
    """The logical and unique K and V bytes of ``config``; None without a shared prefix."""
    if not config.shared_prefix:
        return None
    return SharedKV(config.needed_kv_bytes(), config.unique_kv_bytes(), config.shared_blocks, config.prefix_groups)


def _kv_text(config: DecodeConfig) -> str:
    if not config.is_fp8:
        return ""
    return f" kv={kv_dtype_label(config.kv_dtype)} {KV_SCALE_LABELS.get(config.kv_scale, config.kv_scale)}"


#: How :func:`run_change` names each DecodeConfig field, in the order it lists them.
_CHANGE_NAMES: dict[str, str] = {
    "batch_size": "batch", "context_lens": "ctx", "num_heads": "heads", "num_kv_heads": "KV heads",
    "head_dim": "head_dim", "block_size": "block_size", "dtype": "dtype", "kv_dtype": "KV cache",
    "kv_scale": "scales", "block_layout": "layout",
    "shared_prefix": "prefix", "prefix_groups": "prefix groups",
    "spare_blocks": "spare blocks", "seed": "seed", "device": "device",
    "window": "window", "soft_cap": "soft-cap", "sinks": "sinks", "query_lens": "new tokens",
}
#: Attention options, which :func:`run_change` writes "off" when not in force.
_OPTIONS = ("window", "soft_cap", "sinks")


def _lens_text(config: DecodeConfig) -> str:
    lens = config.lengths
    if len(set(lens)) <= 1:
        return f"{lens[0] if lens else 0:,}"
    return f"{min(lens):,}-{max(lens):,}"


def run_change(previous: DecodeConfig | None, current: DecodeConfig, *, most: int = 2) -> str:
    """What differs in ``current`` from the ``previous`` run's configuration, for a
    run-history label: ``"block_size 16→32"``, ``"batch 4→8, seed 0→1"``.

    At most ``most`` fields are named, then ``"+k more"``. ``"first run"`` when
    there is no previous run; ``"same settings"`` when nothing differs (a repeat).
    Ragged lengths that changed but keep their range read ``"ctx lengths"``.
    """
    if previous is None:
        return "first run"
    changes = []
    for name, label in _CHANGE_NAMES.items():
        before, after = getattr(previous, name), getattr(current, name)
        if name == "context_lens":
            if previous.lengths == current.lengths:
                continue
            before, after = _lens_text(previous), _lens_text(current)
            if before == after:  # same range: new lengths in it, or only more or fewer sequences
                if previous.batch_size == current.batch_size:
                    changes.append("ctx lengths")
                continue
        elif name == "query_lens":
            if before == after or previous.query_lengths == current.query_lengths:
                continue
            before, after = span_text(previous.query_lengths, "-"), span_text(current.query_lengths, "-")
            if before == after:  # same span: other values in it, or only more or fewer sequences
                if previous.batch_size == current.batch_size:
                    changes.append("new tokens")
                continue
        elif name == "kv_dtype":
            if not (previous.is_fp8 or current.is_fp8):
                continue  # a cache in the compute dtype changes with it: "dtype" says so
            before, after = kv_dtype_label(before, previous.dtype), kv_dtype_label(after, current.dtype)
            if before == after:
                continue
        elif name == "kv_scale":
            if before == after or not (previous.is_fp8 and current.is_fp8):
                continue  # scales of a 16-bit cache mean nothing
            before, after = KV_SCALE_LABELS.get(before, before), KV_SCALE_LABELS.get(after, after)
        elif before == after:
            continue
        elif name in _OPTIONS:
            before, after = (_option_text(v) for v in (before, after))
        elif isinstance(before, int) and isinstance(after, int):
            before, after = f"{before:,}", f"{after:,}"
        changes.append(f"{label} {before}→{after}")
    if not changes:
        return "same settings"
    shown = ", ".join(changes[:most])
    return shown if len(changes) <= most else f"{shown} +{len(changes) - most} more"


def _option_text(value: object) -> str:
    """An attention option as :func:`run_change` writes it: ``off``, ``on`` or its number."""
    if value is None or value is False:
        return "off"
    return "on" if value is True else format_number(value)


def reads_no_kv(config: DecodeConfig) -> bool:
    """True when every context of ``config`` is empty: a decode step has nothing
    to attend to and reads no K or V (each implementation only writes zeros), so
    its bandwidth is undefined and speedups between implementations mean nothing."""
    return config.needed_kv_bytes() == 0


#: :func:`rank`'s verdict on the baseline itself (the others are
#: :func:`~paged_attention.samples.compare_timings`' words).
BASELINE = "baseline"


@dataclass(frozen=True)
class Rank:
    """One implementation's call latency against the baseline's.

    ``speedup`` is the baseline's median over this one's (None when there is no
    baseline or no time); ``low`` and ``high`` the speedup's range from the two
    p20-p80 ranges (the baseline's p20 over this p80, its p80 over this p20): it
    straddles 1 exactly when the ranges overlap. ``verdict`` is :data:`BASELINE`,
    or the word of :func:`~paged_attention.samples.compare_timings` (the one rule
    for saying "faster": ``"faster"``, ``"slower"`` or ``"indistinguishable"``
    when the ranges overlap, whatever the medians say), or None without a
    baseline.
    """

    name: str
    label: str
    speedup: float | None
    low: float | None
    high: float | None
    verdict: str | None


def rank(results: Sequence, baseline: str = "naive") -> list[Rank]:
    """Each result's :class:`Rank` against ``baseline``'s call latency (in order)."""
    base = next((r for r in results if r.name == baseline), None)
    ranks = []
    for r in results:
        if base is None or r.median_ms <= 0 or r.p20_ms <= 0:
            ranks.append(Rank(r.name, r.label, None, None, None, None))
            continue
        verdict = BASELINE if r is base else compare_timings((r.p20_ms, r.p80_ms), (base.p20_ms, base.p80_ms))
        ranks.append(Rank(r.name, r.label, base.median_ms / r.median_ms, base.p20_ms / r.p80_ms,
                          base.p80_ms / r.p20_ms, verdict))
    return ranks


def host_overhead_ms(result) -> float | None:
    """What a call costs beyond the GPU's work, in ms: the median call latency
    minus the GPU time (CUDA-graph replays, no launch in them); 0 where noise puts
    the GPU time above the call latency. None without a GPU time: on the CPU,
    where the whole call is host work, and for an implementation that synchronises
    with the host (no CUDA graph can time it)."""
    gpu = getattr(result, "gpu_time_ms", None)
    return None if gpu is None else max(result.median_ms - gpu, 0.0)


def results_rows(
    results: Iterable, copy_gbps: float | None = None, baseline: str = "naive", *, reads_kv: bool = True,
    config: DecodeConfig | None = None,
) -> list[dict]:
    """Flat rows for the results table, one per implementation, in numbers
    (:func:`explorer.bench.view.results_tables` writes them as text).

    Parameters
    ----------
    results : iterable of BenchResult
    copy_gbps : float, optional
        This device's measured copy bandwidth (GB/s), to add the fraction reached.
    baseline : str
        Implementation whose call latency the speedup and the verdict
        (``vs_naive``: :func:`rank`'s) are taken against.
    reads_kv : bool
        False when the step reads no K or V (:func:`reads_no_kv`): bandwidth, its
        fraction of the copy bandwidth and the speedup are then None (n/a).
    config : DecodeConfig, optional
        The run's configuration: with several new tokens per sequence
        (``has_query_lens``) the rows add ``per_token_ms``, the median call latency
        per query token (:func:`per_token_ms`).

    ``achieved_gbps`` is the bandwidth ``pct_of_copy_bw`` is of: from GPU time where
    measured (:func:`~paged_attention.results.achieved_gbps`). With a shared prefix
    (:func:`~paged_attention.results.shares_kv`) the rows add ``unique_gbps`` and
    ``gpu_unique_gbps``, the bandwidth on unique bytes (a shared block once), and
    ``achieved_gbps`` counts unique bytes: the logical ones a prefix-aware kernel
    never reads can go past the copy bandwidth.
    """
    results = list(results)
    ranks = rank(results, baseline) if reads_kv else [None] * len(results)
    sharing = any(shares_kv(r) for r in results)
    rows = []
    for r, ranked in zip(results, ranks):
        best_gbps = achieved_gbps(r, unique=sharing)
        if not reads_kv:
            best_gbps = None
        unique = {"unique_gbps": r.unique_gbps if reads_kv else None,
                  "gpu_unique_gbps": r.gpu_unique_gbps if reads_kv else None} if sharing else {}
        rows.append(
            {
                "implementation": r.label,
                "device": r.device,
                "median_ms": r.median_ms,
                **({"per_token_ms": per_token_ms(r.median_ms, config)}
                   if config is not None and config.has_query_lens else {}),
                "p20_ms": r.p20_ms,
                "p80_ms": r.p80_ms,
                "gpu_time_ms": r.gpu_time_ms,
                "gpu_p20_ms": getattr(r, "gpu_p20_ms", None),
                "gpu_p80_ms": getattr(r, "gpu_p80_ms", None),
                "host_overhead_ms": host_overhead_ms(r),
                "host_ms": r.host_ms,
                "speedup_vs_naive": ranked.speedup if ranked else None,
                "vs_naive": ranked.verdict if ranked else None,
                "gbps": r.gbps if reads_kv else None,
                "gpu_gbps": r.gpu_gbps if reads_kv else None,
                **unique,
                "achieved_gbps": best_gbps,
                "pct_of_copy_bw": pct_of_copy(best_gbps, copy_gbps),
                "max_abs_err": r.max_abs_err,
                "max_rel_err": r.max_rel_err,
                "max_tol_ratio": r.max_tol_ratio,
                "atol": r.atol,
                "correct": correct_text(r.passed),
                "samples": len(r.samples_ms),
            }
        )
    return rows


def quantization_caption(quantization, config: DecodeConfig) -> str:
    """What the error chart's two errors are, for an fp8 cache.

    ``quantization`` is an :class:`~explorer.bench.quantization.QuantizationError`
    (``max_abs_err`` None, with a ``note``, when it was not measured).
    """
    kernel = (f"The dots are each kernel's own error: against the float64 reference on the dequantized "
              f"{quantization.kv_dtype} cache (what the kernels read), with the {config.dtype} tolerance.")
    if quantization.max_abs_err is None:
        return f"{kernel} The fp8 quantization error was {quantization.note}."
    ratio = quantization.max_tol_ratio
    times = f" ({format_times(ratio)} the {config.dtype} tolerance)" if ratio is not None else ""
    return (
        f"{kernel} The dashed line is the **fp8 quantization error**, max {sig3(quantization.max_abs_err)}{times}: "
        "how far the exact answer on the fp8 cache is from the exact answer on the original values before "
        "quantization. Storing K and V in 8 bits costs it whatever the kernel, so it has no pass/fail."
    )
