"""What the Decode benchmark page shows, as plain values: its run history, the
cards over the charts, the results table, the note on a stopped run and the
host-overhead summary. No Streamlit and no Plotly: the page and
:mod:`ui.benchmark` draw these, the tests read them directly.

Every number goes through :mod:`explorer.formatting` (or :func:`percent` and
:func:`significant` here), so a card and its table cell read the same ("382 ms"
over "382"); every "faster" or "slower" comes from
:func:`explorer.bench.readouts.rank` (the rule of
:func:`paged_attention.samples.compare_timings`), which says "indistinguishable"
when the p20-p80 ranges of two call latencies overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from explorer.bench import readouts
from explorer.bench.readouts import BASELINE
from explorer.formatting import (
    count,
    duration_number,
    format_duration,
    format_gbps,
    format_number,
    format_percent,
    format_speedup,
    sig3,
)
from explorer.limits import MAX_HISTORY
from paged_attention import DecodeConfig
from paged_attention.result_files import results_csv as schema_csv
from paged_attention.results import result_row, utc_stamp
from paged_attention.samples import FASTER, INDISTINGUISHABLE, SLOWER



def significant(value: float | None) -> str:
    """A plain number (an error, a tolerance) to three significant figures, as
    :mod:`explorer.formatting` writes durations: ``0.000244 -> "0.000244"``,
    ``0.016 -> "0.016"``, ``1e-05 -> "1e-05"``; ``"n/a"`` for None, ``"NaN/inf"``
    when not finite."""
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return "NaN/inf"
    return sig3(value)


def percent(share: float | None) -> str:
    """A share (0.873) as a percentage to three significant figures: ``"87.3%"``;
    ``"n/a"`` for None."""
    return format_percent(share)


def rank_words(verdict: str | None, speedup: float | None, baseline_label: str | None = None) -> str:
    """What the page says of a :class:`~explorer.bench.readouts.Rank`'s ``verdict``
    and ``speedup``: ``"3.99× faster"``, ``"2.5× slower"``, ``"indistinguishable"``,
    ``"baseline"``, or ``""`` without a verdict; with ``baseline_label``,
    ``"3.99× faster than Naive PyTorch"``, ``"indistinguishable from Naive PyTorch"``.
    The one place the page words a ranking: never "faster" where the rule says
    the two are indistinguishable."""
    if verdict is None or speedup is None:
        return ""
    if verdict == BASELINE:
        return "baseline"
    if verdict == INDISTINGUISHABLE:
        return f"indistinguishable from {baseline_label}" if baseline_label else "indistinguishable"
    words = f"{format_speedup(speedup)} faster" if verdict == FASTER else f"{format_speedup(1 / speedup)} slower"
    return f"{words} than {baseline_label}" if baseline_label else words


def timing_text(warmup: int, iters: int, budget_s: float | None = None) -> str:
    """How a run times: ``"warm-up 1, 3 timed calls"``; with a time budget
    (:data:`ui.benchmark.TIMING_BUDGET_S`), ``"warm-up 1, 3 timed calls or more
    (up to 4.00 s more while a median moves)"``."""
    calls = count(iters, "timed call")
    if budget_s:
        calls += f" or more (up to {format_duration(1e3 * budget_s)} more while a median moves)"
    return f"warm-up {warmup:,}, {calls}"


@dataclass(frozen=True)
class RunEntry:
    """One run of the session, as the history keeps it."""

    run: int
    #: What differs from the run before (:func:`explorer.bench.readouts.run_change`).
    change: str
    #: The configuration's one-line label (:func:`explorer.bench.readouts.config_summary`).
    label: str
    config: DecodeConfig
    warmup: int
    iters: int
    #: BenchResult of each implementation, in the order raced.
    results: list
    copy_gbps: float | None
    #: An fp8 cache's :class:`~explorer.bench.quantization.QuantizationError`, else None.
    quantization: object | None = None
    #: Seconds of timed rounds the run could add past ``iters`` (None: exactly ``iters``).
    budget_s: float | None = None
    #: When it ended, ISO 8601 UTC.
    measured_at: str = ""

    @property
    def reads_kv(self) -> bool:
        """False when every context is empty (:func:`~explorer.bench.readouts.reads_no_kv`)."""
        return not readouts.reads_no_kv(self.config)

    @property
    def quantization_error(self) -> float | None:
        return None if self.quantization is None else self.quantization.max_abs_err

    def caption(self) -> str:
        """``"B=2 ctx=37 ... · warm-up 1, 3 timed calls or more (...) per implementation"``."""
        return f"{self.label} · {timing_text(self.warmup, self.iters, self.budget_s)} per implementation"


def next_entry(history: Sequence[RunEntry], config: DecodeConfig, warmup: int, iters: int, results: list,
               copy_gbps: float | None, quantization=None, budget_s: float | None = None) -> RunEntry:
    """The entry of a run that just ended, numbered after ``history``'s last and
    named by what changed since it (the timed calls or the warm-up when the
    settings are the same)."""
    before = history[-1] if history else None
    change = readouts.run_change(before.config if before else None, config)
    if change == "same settings" and (before.warmup, before.iters) != (warmup, iters):
        change = (f"timed calls {before.iters:,}→{iters:,}" if before.iters != iters
                  else f"warm-up {before.warmup:,}→{warmup:,}")
    return RunEntry(run=before.run + 1 if before else 1, change=change, label=readouts.config_summary(config),
                    config=config, warmup=warmup, iters=iters, results=results, copy_gbps=copy_gbps,
                    quantization=quantization, budget_s=budget_s, measured_at=utc_stamp())


def kept(history: Sequence[RunEntry], entry: RunEntry, most: int = MAX_HISTORY) -> list[RunEntry]:
    """``history`` with ``entry`` added, the last ``most`` runs."""
    return [*history, entry][-most:]


def history_durations(history: Sequence[RunEntry]) -> list[float]:
    """Every call latency and GPU time the history holds (ms), for the page's unit."""
    return [t for h in history for r in h.results for t in (r.median_ms, r.gpu_time_ms) if t is not None]


def history_rows(history: Sequence[RunEntry], unit: str) -> list[dict]:
    """The "Compare runs" table: a row per run, each implementation's median call
    latency in ``unit`` (a column per implementation label)."""
    return [{"run": h.run, "change": h.change, "all correct": "yes" if all(r.passed for r in h.results) else "NO",
             **{r.label: duration_number(r.median_ms, unit) for r in h.results}, "configuration": h.label}
            for h in history]


def results_csv(entry: RunEntry) -> str:
    """The Decode benchmark's CSV download of one run: a row per implementation
    in the one result schema (:func:`paged_attention.results.result_row`, ``iters``
    the timed calls it got), after the run's number and configuration label; then
    the page's own columns: the speedup over Naive PyTorch and its verdict
    (:func:`~explorer.bench.readouts.rank`; empty when every context is empty),
    the host overhead, error / tolerance, and for an fp8 cache its quantization
    error (the error chart's dashed line); with several new tokens per sequence, the
    median call latency per query token."""
    ranks = readouts.rank(entry.results)
    rows = []
    for r, ranked in zip(entry.results, ranks):
        meaningful = entry.reads_kv and ranked.verdict is not None
        rows.append({
            "run": entry.run, "config": entry.label,
            **result_row(r, entry.config, copy_gbps=entry.copy_gbps, warmup=entry.warmup, iters=len(r.samples_ms),
                         measured_at=entry.measured_at),
            "speedup_vs_naive": ranked.speedup if meaningful else None,
            "vs_naive": ranked.verdict if meaningful else None,
            "host_overhead_ms": readouts.host_overhead_ms(r), "max_tol_ratio": r.max_tol_ratio,
            **({"median_ms_per_token": readouts.per_token_ms(r.median_ms, entry.config)}
               if entry.config.has_query_lens else {}),
            **({} if entry.quantization_error is None else {"fp8_quantization_error": entry.quantization_error}),
        })
    return schema_csv(rows, leading=("run", "config"))


RunKey = tuple
"""What makes two runs the same run: (config, implementation names, warm-up, timed calls)."""


@dataclass
class PartialRun:
    """The results of the run in progress, kept as each is measured, so the run
    that replaces a stopped one reuses them."""

    key: RunKey
    results: list = field(default_factory=list)


def stopped_note(partial: PartialRun, key: RunKey) -> str:
    """What to say of a run that stopped before it finished (the page was left or
    a setting changed while it ran), with ``key`` the run the page would start now."""
    done, asked = len(partial.results), partial.key[1]
    advice = ("The settings have changed since; press **Run benchmark** to run them." if partial.key != key else
              "Press **Run benchmark** to finish it: what it measured is kept." if done else
              "Press **Run benchmark** to run it again.")
    return (f"The last run stopped before it finished ({done} of {count(len(asked), 'implementation')} measured), "
            f"because the page was left or a setting changed while it ran. {advice}")


@dataclass(frozen=True)
class Card:
    """One implementation's card: its median call latency, and the arrow against the baseline."""

    label: str
    value: str
    #: ``"3.99× faster"``, ``"indistinguishable"``, ``"baseline"``, or None (no arrow).
    delta: str | None
    #: ``st.metric``'s ``delta_color`` and ``delta_arrow``.
    color: str
    arrow: str
    help: str


def cards(results: Sequence, unit: str, *, reads_kv: bool = True) -> list[Card]:
    """A card per result. The arrow says faster or slower than the baseline only
    when :func:`~explorer.bench.readouts.rank` tells them apart; no arrow when the
    step reads no K or V (the times are call overhead)."""
    ranks = readouts.rank(results)
    base = next((r.label for r in results if r.name == "naive"), None)
    out = []
    for r, ranked in zip(results, ranks):
        verdict = ranked.verdict if reads_kv else None
        words = rank_words(verdict, ranked.speedup) or None
        color, arrow = {FASTER: ("normal", "up"), SLOWER: ("inverse", "down")}.get(verdict, ("off", "off"))
        median = format_duration(r.median_ms, unit)
        spread = f"{format_duration(r.p20_ms, unit)} to {format_duration(r.p80_ms, unit)}"
        gpu = ""
        if r.gpu_time_ms is not None:
            gpu = (f"; GPU time {format_duration(r.gpu_time_ms, unit)}, host overhead "
                   f"{format_duration(readouts.host_overhead_ms(r), unit)}")
        versus = (f"; its p20-p80 range overlaps {base}'s: no arrow" if verdict == INDISTINGUISHABLE else
                  f"; the arrow compares it with {base}: their p20-p80 ranges are apart" if verdict in (FASTER, SLOWER)
                  else "")
        out.append(Card(
            r.label, median, words, color, arrow,
            help=f"median call latency over {count(len(r.samples_ms), 'call')}: {median} (p20-p80 {spread}){gpu}"
                 f"{versus}; {'correct' if r.passed else 'INCORRECT'} against the float64 reference",
        ))
    return out


def token_cards(results: Sequence, unit: str, config: DecodeConfig) -> list[Card]:
    """A card per result with its median call latency per query token
    (:func:`~explorer.bench.readouts.per_token_ms`), for a step of several new tokens
    per sequence (``config.has_query_lens``); none for the plain decode step."""
    if not config.has_query_lens:
        return []
    rows = count(config.num_query_tokens, "query token")
    return [Card(f"{r.label}, per token", format_duration(readouts.per_token_ms(r.median_ms, config), unit),
                 f"÷ {rows}", "off", "off",
                 help=f"median call latency of a step, {format_duration(r.median_ms, unit)}, over its {rows}: what "
                      "one verified new token costs")
            for r in results]


@dataclass(frozen=True)
class Column:
    """A column of the results table: its key in the rows, header and tooltip;
    ``numeric`` columns align right."""

    key: str
    label: str
    help: str | None = None
    numeric: bool = True


@dataclass(frozen=True)
class ResultsTable:
    """The results table as shown: ``rows`` of text keyed by ``columns``' keys, in their order."""

    columns: list[Column]
    rows: list[dict]


#: Times in the table, in the page's unit.
_TIMES = ("median_ms", "per_token_ms", "p20_ms", "p80_ms", "gpu_time_ms", "host_overhead_ms", "host_ms")
#: Bandwidths, in GB/s.
_BANDWIDTHS = ("gbps", "gpu_gbps", "unique_gbps", "gpu_unique_gbps")
#: What a speaker points at comes first, so it stays on screen at 1280 px.
_FIRST = ("implementation", "correct", "median_ms", "per_token_ms", "gpu_time_ms", "host_overhead_ms", "host_ms",
          "speedup_vs_naive",
          "gpu_unique_gbps", "unique_gbps", "gbps", "pct_of_copy_bw", "max_tol_ratio")
#: In the rows (and the CSV), not in the table: the table keeps to the call
#: latency's spread; relative error is large wherever the reference is near zero,
#: even on a passing row (the table shows error / tolerance instead); the
#: verdict is in the speedup's words.
_HIDDEN = ("gpu_p20_ms", "gpu_p80_ms", "max_rel_err", "vs_naive")


def results_table(rows: Sequence[dict], unit: str, *, reads_kv: bool = True) -> ResultsTable:
    """The results table of :func:`~explorer.bench.readouts.results_rows`' ``rows``,
    every number as text through the one format (times in ``unit``).

    A column no row has a value for is left out (the GPU columns on the CPU),
    except the bandwidth and the speedup of a step that reads no K or V, which
    say n/a. With a shared prefix the bandwidth on unique bytes comes first and
    the logical one is named so.
    """
    sharing = any("unique_gbps" in row for row in rows)
    logical = " (logical bytes)" if sharing else ""
    names = {
        "implementation": ("Implementation", None), "device": ("Device", None), "correct": ("Correct", None),
        "median_ms": (f"Median ({unit})", "median call latency: what a Python caller waits"),
        "per_token_ms": (f"Per token ({unit})", "median call latency ÷ the step's query tokens: what one verified "
                                                "new token costs"),
        "p20_ms": (f"p20 ({unit})", None), "p80_ms": (f"p80 ({unit})", None),
        "gpu_time_ms": (f"GPU time ({unit})", "CUDA-graph replays: the kernels alone, no launch from the host"),
        "host_overhead_ms": (f"Host overhead ({unit})",
                             "median call latency − GPU time: Python, argument checks and the launch, "
                             "which a CUDA graph's replay leaves out"),
        "host_ms": (f"Host time/call ({unit})",
                    "host time per call of back-to-back calls that nobody waits for: the launch path's own cost "
                    "(paged_attention.timing.host_time)"),
        "speedup_vs_naive": ("Speedup vs naive", "median of Naive PyTorch ÷ median of each; indistinguishable "
                                                 "when the p20-p80 ranges of the call latencies overlap"),
        "gbps": (f"GB/s{logical}", None),
        "gpu_gbps": (f"GB/s{logical} (GPU time)" if sharing else "GB/s (GPU time)", None),
        "unique_gbps": ("GB/s (unique bytes)", "each shared block counted once: the bytes a decode step must "
                                               "read at least"),
        "gpu_unique_gbps": ("GB/s (unique, GPU time)", None),
        "pct_of_copy_bw": ("% of copy BW" + (" (unique)" if sharing else ""), None),
        "max_abs_err": ("Max abs err", None),
        "max_tol_ratio": ("Error / tolerance", "max |out - ref| / (atol + rtol |ref|): at most 1 exactly when "
                                               "every element passes"),
        "atol": ("atol", None), "samples": ("Timed calls", None),
    }
    keys = [k for k in rows[0] if k not in _HIDDEN] if rows else []
    shown_na = {"speedup_vs_naive", "gbps"} if not reads_kv else set()
    keys = [k for k in keys if k in shown_na or any(row[k] is not None for row in rows)]
    keys = [k for k in _FIRST if k in keys] + [k for k in keys if k not in _FIRST]
    if "per_token_ms" in keys:  # several new tokens a step: the median is a step's
        names["median_ms"] = (f"Median per step ({unit})", names["median_ms"][1] + ", for the whole step")
    texts = [{k: _cell(k, row, unit) for k in keys} for row in rows]
    columns = [Column(k, *names.get(k, (k, None)), numeric=k not in ("implementation", "device", "correct"))
               for k in keys]
    return ResultsTable(columns, texts)


def _cell(key: str, row: dict, unit: str) -> str:
    value = row[key]
    if key == "speedup_vs_naive":
        return rank_words(row.get("vs_naive"), value) or "n/a"
    if value is None:
        return "n/a"
    if key in _TIMES:
        return duration_number(value, unit)
    if key in _BANDWIDTHS:
        return format_gbps(value)
    if key == "pct_of_copy_bw":
        return percent(value / 100)
    if key in ("max_abs_err", "max_tol_ratio", "atol"):
        return significant(value)
    if key == "samples":
        return format_number(value)
    return str(value)


def overhead_summary(results: Sequence, unit: str) -> str | None:
    """A sentence for the host-overhead chart: where the overhead is largest, in
    this run's numbers; None when no result has a GPU time (the CPU)."""
    timed = [(r, readouts.host_overhead_ms(r)) for r in results if r.gpu_time_ms is not None]
    if not timed:
        return None
    r, host = max(timed, key=lambda t: t[1] / t[0].median_ms if t[0].median_ms > 0 else 0)
    share = host / r.median_ms if r.median_ms > 0 else 0
    return (f"Host overhead = call latency − GPU time: Python, argument checks and the kernel launch, which a "
            f"CUDA graph's replay leaves out. Largest share here: {r.label}, {format_duration(host, unit)} of a "
            f"{format_duration(r.median_ms, unit)} call ({percent(share)}), on {format_duration(r.gpu_time_ms, unit)} "
            "of GPU work.")
