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
from dataclasses import dataclass, field, replace
from typing import Sequence

from explorer.bench import readouts
from explorer.bench.readouts import BASELINE
from explorer.cards import Card
from explorer.formatting import (
    count,
    duration_number,
    format_bytes,
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
    """A plain number (an error, a tolerance) to three significant figures, as a
    card writes it (:func:`~explorer.formatting.sig3`: fixed notation, its trailing
    zeros kept, a power of ten below 1e-6): ``0.000244 -> "0.000244"``,
    ``0.016 -> "0.0160"``, ``1e-05 -> "0.0000100"``, ``1.94e-16 -> "1.94e-16"``;
    ``"n/a"`` for None, ``"NaN/inf"`` when not finite.

    Examples
    --------
    >>> [significant(v) for v in (0.000244, 0.016, 1e-05, 1.94e-16, 0.0)]
    ['0.000244', '0.0160', '0.0000100', '1.94e-16', '0']
    >>> significant(None), significant(float("inf")), significant(float("nan"))
    ('n/a', 'NaN/inf', 'NaN/inf')
    """
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
    """The "Compare runs" table: a row per run, what changed since the run before
    and each implementation's median call latency in ``unit`` (a column per
    implementation label). A run's whole configuration is in the history chart's
    hover: a column of it ran the table past a 1280 px page."""
    return [{"run": h.run, "change": h.change, "all correct": "yes" if all(r.passed for r in h.results) else "NO",
             **{r.label: duration_number(r.median_ms, unit) for r in h.results}} for h in history]


def history_title(unit: str) -> str:
    """The "Compare runs" table's title, with the unit of its times."""
    return f"Median call latency per run ({unit})"


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


def shared_kv_cards(shared: readouts.SharedKV) -> list[Card]:
    """A shared prefix's two cards: the K and V bytes a decode step reads logically
    and at least (:func:`~explorer.bench.readouts.kv_read_label` names them)."""
    return [
        Card(readouts.kv_read_label("logical"), format_bytes(shared.logical_bytes, 3), "prefix in every sequence",
             help="K and V of every sequence's tokens: what a kernel that reads each sequence's blocks, shared or "
                  "not, reads"),
        Card(readouts.kv_read_label("unique"), format_bytes(shared.unique_bytes, 3),
             f"-{percent(shared.saved_fraction)}: prefix once per group",
             help="K and V, each shared block once: the least a decode step must read", color="inverse",
             arrow="down"),
    ]


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
            r.label, median, words, color=color, arrow=arrow,
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
                 f"÷ {rows}",
                 help=f"median call latency of a step, {format_duration(r.median_ms, unit)}, over its {rows}: what "
                      "one verified new token costs")
            for r in results]


@dataclass(frozen=True)
class Column:
    """A column of a results table: its key in the rows, header, tooltip and width
    (px, for normal mode's 14 px table text); ``numeric`` columns align right."""

    key: str
    label: str
    help: str | None = None
    numeric: bool = True
    width: int | None = None


@dataclass(frozen=True)
class ResultsTable:
    """A results table as shown: its ``title``, and ``rows`` of text keyed by
    ``columns``' keys, in their order."""

    title: str
    columns: list[Column]
    rows: list[dict]


#: Times in the table, in the page's unit.
_TIMES = ("median_ms", "per_token_ms", "p20_ms", "p80_ms", "gpu_time_ms", "host_overhead_ms", "host_ms")
#: The widest a results table may be (px, at normal mode's text): the main column
#: of a 1280 px page beside the sidebar is 820 px (in presentation mode, whose text
#: is 1.125 times larger, 823 px at normal size: ``ui.charts``).
TABLE_WIDTH_PX = 800
#: The results' two tables, each of at most :data:`TABLE_WIDTH_PX` in every
#: configuration (tests/test_bench_view.py), what a speaker points at first: the
#: 17 columns of a GPU run in one table ran past a 1280 px page. The times are in
#: the title's unit; every bandwidth a run measured is in its CSV. A column no row
#: has a value for is left out (the GPU's on the CPU).
TIME_COLUMNS = ("implementation", "median_ms", "per_token_ms", "p20_ms", "p80_ms", "gpu_time_ms", "host_overhead_ms",
                "host_ms", "speedup_vs_naive")
#: Left out of the time table with several new tokens a step (in the CSV still): the
#: time per token's column takes its place, so the table still fits.
NOT_WITH_PER_TOKEN = ("host_ms",)
CHECK_COLUMNS = ("implementation", "correct", "max_tol_ratio", "max_abs_err", "atol", "achieved_gbps",
                 "pct_of_copy_bw", "samples")


#: Every column the results tables can have, by key: header, tooltip and width
#: (px at normal mode's 14 px text: the widest header or value, "Triton
#: (prefix-aware)", "888,000", "0.000888", "indistinguishable", and the cell's padding).
COLUMNS = {c.key: c for c in (
    Column("implementation", "Implementation", numeric=False, width=142),
    Column("correct", "Correct", numeric=False, width=66),
    Column("median_ms", "Median", "median call latency: what a Python caller waits", width=74),
    Column("per_token_ms", "Per token", "median call latency ÷ the step's query tokens: what one verified new "
                                        "token costs", width=80),
    Column("p20_ms", "p20", "20th percentile of the call latency", width=74),
    Column("p80_ms", "p80", "80th percentile of the call latency", width=74),
    Column("gpu_time_ms", "GPU time", "CUDA-graph replays: the kernels alone, no launch from the host", width=78),
    Column("host_overhead_ms", "Host overhead", "median call latency − GPU time: Python, argument checks and the "
                                                "launch, which a CUDA graph's replay leaves out", width=108),
    Column("host_ms", "Host time/call", "host time per call of back-to-back calls that nobody waits for: the "
                                        "launch path's own cost (paged_attention.timing.host_time)", width=104),
    Column("speedup_vs_naive", "Speedup vs naive", "median of Naive PyTorch ÷ median of each; indistinguishable "
                                                   "when the p20-p80 ranges of the call latencies overlap", width=124),
    Column("max_tol_ratio", "Error / tolerance", "max |out - ref| / (atol + rtol |ref|): at most 1 exactly when "
                                                 "every element passes", width=118),
    Column("max_abs_err", "Max abs err", "max |out − ref| against the float64 reference", width=89),
    Column("atol", "atol", "the output dtype's absolute tolerance", width=72),
    Column("achieved_gbps", "GB/s", "bytes a decode step moves ÷ GPU time where measured, else ÷ median call "
                                    "latency", width=103),
    Column("pct_of_copy_bw", "% of copy BW", "GB/s as a share of this device's measured copy bandwidth", width=102),
    Column("samples", "Timed calls", width=89),
)}
#: The bandwidth's header and tooltip with a shared prefix (the width holds it).
_UNIQUE_GBPS = ("GB/s (unique)", COLUMNS["achieved_gbps"].help + "; each shared block counted once, the least a "
                                                                  "decode step must read")


def results_tables(rows: Sequence[dict], unit: str, *, reads_kv: bool = True) -> tuple[ResultsTable, ResultsTable]:
    """The two results tables (:data:`TIME_COLUMNS`, :data:`CHECK_COLUMNS`) of
    :func:`~explorer.bench.readouts.results_rows`' ``rows``, every number as text
    through the one format (times in ``unit``, named in the first table's title).

    The bandwidth and the speedup of a step that reads no K or V say n/a. The
    bandwidth is the one the fraction of the copy bandwidth is of: from GPU time
    where measured, and with a shared prefix on unique bytes (named so).
    """
    sharing = any("unique_gbps" in row for row in rows)
    shown_na = {"speedup_vs_naive", "achieved_gbps"} if not reads_kv else set()

    per_token = bool(rows) and rows[0].get("per_token_ms") is not None

    def column(key: str) -> Column:
        if key == "achieved_gbps" and sharing:
            return replace(COLUMNS[key], label=_UNIQUE_GBPS[0], help=_UNIQUE_GBPS[1])
        if key == "median_ms" and per_token:  # several new tokens a step: the median is a step's
            return replace(COLUMNS[key], label="Median per step", help=COLUMNS[key].help + ", for the whole step",
                           width=112)
        return COLUMNS[key]

    def table(title: str, keys: Sequence[str]) -> ResultsTable:
        keys = [k for k in keys if rows and k in rows[0] and (k in shown_na or any(row[k] is not None
                                                                                   for row in rows))
                and not (per_token and k in NOT_WITH_PER_TOKEN)]
        return ResultsTable(title, [column(k) for k in keys], [{k: _cell(k, row, unit) for k in keys} for row in rows])

    return table(f"Time per call ({unit})", TIME_COLUMNS), table("Accuracy and bandwidth", CHECK_COLUMNS)


def _cell(key: str, row: dict, unit: str) -> str:
    value = row[key]
    if key == "speedup_vs_naive":
        return rank_words(row.get("vs_naive"), value) or "n/a"
    if value is None:
        return "n/a"
    if key in _TIMES:
        return duration_number(value, unit)
    if key == "achieved_gbps":
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
