"""The Sweep page as plain data: its grid and the line that sums it up, a running
sweep's progress, the second chart beside the latency (which comparison), and
the points table's columns and cells. No Streamlit and no Plotly: the page draws
what this returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from explorer import formatting
from explorer.bench.readouts import SUMMARY_PARTS, config_summary
from explorer.sweep import grid as sweep_grid
from explorer.sweep.grid import AXES, GridPlan
from explorer.sweep.runs import SweepJob, per_token_ms, shared_measurements
from paged_attention import DecodeConfig

#: The ``source`` of this session's rows.
SOURCE = "this session"
#: What each axis keeps fixed, for the line under the controls.
AXIS_NOTES: dict[str, str] = {
    "context_len": "every sequence gets the same context length",
    "batch_size": "the sidebar's context lengths repeat across the batch",
    "block_size": "the same tokens, cut into blocks of each size",
    "num_kv_heads": "divisors of the query heads only (GQA groups); the query heads stay fixed",
    "head_dim": "the same tokens and heads, wider or narrower",
    "window": "the sidebar's contexts stay; each query reads its last window tokens, all of them once the "
              "window reaches its context (the dashed line)",
    "query_lens": "the sidebar's contexts stay; each sequence's last q_len tokens are new (at most its context), "
                 "each scored against the context up to itself, K and V still read once per step",
}

#: How to read a sweep over the new tokens, beside its time-per-token chart.
PER_TOKEN_NOTE = (
    "**Per step and per token**\n\n"
    "- A step with q_len new tokens per sequence reads each sequence's K and V once for all of them "
    "(one tile holds every token's rows), and scores q_len times as many rows.\n"
    "- While the bytes bound the step, its latency stays flat as q_len grows, and the time per token "
    "falls along the dashed line: the draft tokens are nearly free.\n"
    "- Once the scores and products of the extra rows cost more than the bytes (compute-bound), the step's "
    "latency rises and the time per token leaves the line.\n"
    "- On the CPU the interpreter's own costs set the times, not the bytes: read the shape on a GPU."
)

# -- the grid -------------------------------------------------------------------------

def plan_grid(config: DecodeConfig, axis: str, low: int, high: int, points: int, spacing: str | None,
              warmup: int, iters: int) -> tuple[GridPlan | None, str | None]:
    """The points the controls ask for, after the CPU caps
    (:func:`~explorer.sweep.grid.cap_grid`), or None and the rule they break, in
    the page's words (From and To, not low and high)."""
    try:
        if int(low) > int(high):
            raise ValueError(f"From ({int(low):,}) must not exceed To ({int(high):,}).")
        values = sweep_grid.sweep_values(axis, int(low), int(high), int(points), spacing=spacing or "log",
                                         num_heads=config.num_heads)
        grid = sweep_grid.cap_grid(config, axis, values, warmup, iters)
    except ValueError as exc:
        return None, str(exc)
    return (None, grid.refusal) if grid.refusal else (grid, None)


def cache_name(kv_dtype: str | None, dtype: str) -> str:
    """A KV cache as the page names it: ``"float16"``, ``"fp8 e4m3"``."""
    return formatting.kv_dtype_label(kv_dtype, dtype)


def settings_in_force(config: DecodeConfig, axis: str, caches: Sequence[str | None] = ()) -> str:
    """The sidebar's settings a sweep of ``axis`` keeps
    (:func:`~explorer.bench.readouts.config_summary`), without those it replaces:
    the axis itself (a context-length sweep names no ``ctx=``, a KV-heads sweep the
    query heads alone, a window sweep no ``window=``) and, when it compares ``caches``, the sidebar's cache."""
    replaced = (axis, *(("kv_dtype",) if caches else ()))
    return config_summary(config, without=[part for part in replaced if part in SUMMARY_PARTS])


def grid_caption(grid: GridPlan, axis: str, caches: Sequence[str | None], config: DecodeConfig) -> str:
    """The line under the controls: the points, what the axis keeps fixed, the
    caches, the calls, and the sidebar's settings in force, e.g. ``"**3 points**:
    16, 32, 64 · every sequence gets the same context length · warm-up 0, 2 timed
    calls per implementation · sidebar: B=2 H=4/2 d=32 bs=16 float16 shuffled cpu"``; the
    values written as the charts' ticks write them (:func:`~explorer.formatting.format_axis_values`)."""
    shown = formatting.format_axis_values(grid.values)  # as the charts' ticks name them
    both = (f"each with a {cache_name(caches[0], config.dtype)} and an {cache_name(caches[1], config.dtype)} "
            "KV cache · " if caches else "")
    return (f"**{formatting.count(len(grid.values), 'point')}**: {shown} · {AXIS_NOTES[axis]} · {both}"
            f"warm-up {grid.warmup}, {formatting.count(grid.iters, 'timed call')} per implementation · "
            f"sidebar: {settings_in_force(config, axis, caches)}")


# -- a running sweep ------------------------------------------------------------------

@dataclass(frozen=True)
class Progress:
    """A sweep's progress bar and what is said beside it.

    Attributes
    ----------
    fraction : float
        Points done over points, 0 to 1.
    text : str
        The bar's text: the point being timed, or how many are done.
    state : str
        The job's (``"running"``, ``"done"``, ``"cancelled"``, ``"failed"``).
    message : str
        For a cancelled or failed sweep, the sentence to show; else ``""``.
    """

    fraction: float
    text: str
    state: str
    message: str = ""


def progress(job: SweepJob) -> Progress:
    """The progress of ``job``, counted as the caption counts: points, or with two
    caches runs (``"4 of 4 runs (2 points × 2 caches)"``)."""
    with job.lock:
        done, state, message = job.next_index, job.state, job.message
    fraction = done / job.total
    two = len(job.caches) > 1
    if state == "running":
        cache = f", {cache_name(job.cache_at(done), job.base.dtype)} cache" if two else ""
        text = (f"{'Run' if two else 'Point'} {done + 1} of {job.total}: {AXES[job.axis]} = "
                f"{job.value_at(done):,}{cache} · Cancel stops it at once")
    elif two:
        text = (f"{done} of {formatting.count(job.total, 'run')} "
                f"({formatting.count(len(job.values), 'point')} × {len(job.caches)} caches)")
    else:
        text = f"{done} of {formatting.count(job.total, 'point')}"
    if state == "cancelled":  # with no point done there is nothing below: what to do instead
        message += (" The points done are kept below." if done else
                    " Press **Run sweep** to start again, or upload a saved sweep below.")
    return Progress(fraction, text, state, message if state in ("cancelled", "failed") else "")


def cancelled_before_any(job: SweepJob | None) -> bool:
    """True when ``job`` was cancelled before its first point finished: its
    message (:func:`progress`) says what to do, and the page's "Press Run sweep"
    note would say it a second time."""
    return job is not None and job.state == "cancelled" and job.next_index == 0


def started_on(job: SweepJob, config: DecodeConfig) -> str | None:
    """When the sidebar changed since ``job`` started, the settings it was started
    with (as :func:`settings_in_force`); else None."""
    if job.base == config:
        return None
    caches = job.caches if len(job.caches) > 1 else ()
    return f"Results below are for the sweep started on: {settings_in_force(job.base, job.axis, caches)}."


# -- the second chart -----------------------------------------------------------------

@dataclass(frozen=True)
class SecondChart:
    """What goes beside the speedup chart.

    ``kind`` is ``"sources"`` (the time ratio of an upload over this session's,
    of ``frame``: ``numerator`` over ``denominator``), ``"caches"`` (the fp8
    cache's time over the 16-bit one's, ``frame``'s ``source`` the cache's name)
    or ``"reading"`` (how to read the charts: nothing to compare).
    ``shared`` counts timings of the upload that are this session's own.
    """

    kind: str
    frame: pd.DataFrame | None = None
    numerator: str = ""
    denominator: str = ""
    title: str = ""
    caption: str = ""
    shared: int = 0


def second_chart(frame: pd.DataFrame) -> SecondChart:
    """The comparison ``frame`` (:data:`~explorer.sweep.runs.SWEEP_COLUMNS`, this
    session's rows and an upload's) allows: between two sources (on the first
    cache only, when there are two), else between two caches, else none."""
    sources = list(dict.fromkeys(frame["source"]))
    kv_dtypes = list(dict.fromkeys(frame["kv_dtype"]))
    if len(sources) > 1:
        same_cache = frame[frame["kv_dtype"] == kv_dtypes[0]] if len(kv_dtypes) > 1 else frame
        one = f"{formatting.kv_dtype_label(kv_dtypes[0])} cache" if len(kv_dtypes) > 1 else None
        return SecondChart(
            "sources", same_cache, sources[1], sources[0],
            title=f"Time ratio between the two sweeps: {one} only" if one else "Time ratio between the two sweeps",
            caption="The uploaded sweep's time over this session's, per implementation: below 1 it was faster."
                    + (f" Only the points with a {one} are compared; the latency chart shows every cache."
                       if one else ""),
            shared=shared_measurements(frame, sources[1], sources[0]),
        )
    if len(kv_dtypes) > 1:
        slow, fast = (formatting.kv_dtype_label(k) for k in kv_dtypes[:2])
        ratio = sweep_grid.cache_bytes_ratio(kv_dtypes[:2])
        return SecondChart(
            "caches", frame.assign(source=frame["kv_dtype"].map(formatting.kv_dtype_label)), fast, slow,
            title=f"{fast} cache against {slow}",
            caption=f"Each implementation's time with the {fast} KV cache over its time with the {slow} one: "
                    "below 1 the smaller cache is faster. Where decode is memory-bound, "
                    f"{sweep_grid.bytes_fraction(ratio)} can approach {formatting.format_number(ratio)}.",
        )
    return SecondChart("reading")


# -- the points table -----------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """One column of the points table: its header, width in px (None: as wide as
    the cells ask), tooltip, and what it holds: ``"text"``, ``"number"`` (three
    significant figures as text, to align right) or ``"integer"`` (the axis value,
    a number, so that it sorts as one)."""

    key: str
    label: str
    width: int | None = None
    help: str | None = None
    kind: str = "text"


#: Pixels per character of a header at the table's font, and around its text
#: (padding and the sort arrow): the width a header needs so that it is not cut.
HEADER_CHAR_PX, HEADER_PAD_PX = 7, 32
#: The columns, in order. Narrow enough for the main column at 1280 px with the
#: sidebar open: p20 and p80 are the latency chart's bars and in the CSV. The
#: axis's column is named by :func:`axis_column`.
COLUMNS: tuple[Column, ...] = (
    Column("source", "Source", 95),
    Column("value", ""),
    Column("label", "Implementation", 125),
    Column("kv_dtype", "KV cache", 80),
    Column("status", "Status", 60),
    Column("correct", "Correct", 65),
    Column("cached", "From cache", help="yes: timed by an earlier sweep on this server (any session) and reused; "
                                        "the caption above says when"),
    Column("median_ms", "Median (ms)", 95, kind="number"),
    Column("per_token_ms", "Per token (ms)", help="the median over the step's new tokens (every sequence's); "
                                                  "shown when a step scores more than one token per sequence",
           kind="number"),
    Column("gpu_time_ms", "GPU time (ms)", kind="number"),
    Column("gbps", "GB/s", 80, kind="number"),
    Column("pct_of_copy_bw", "% of copy BW", kind="number"),
    Column("max_abs_err", "Max abs err", 95, kind="number"),
    Column("predicted_ms", "Predicted (ms)", kind="number"),
    Column("note", "Note"),
)


def header_px(label: str) -> int:
    """The width (px) a column needs to show header ``label`` whole."""
    return HEADER_CHAR_PX * len(label) + HEADER_PAD_PX


def axis_column(axis: str) -> Column:
    """The axis's column: its name without the unit (``"context length"``; the
    tooltip has ``"context length (tokens)"``), as wide as that name needs."""
    label = AXES[axis].split(" (")[0]
    return Column("value", label, max(80, header_px(label)), help=AXES[axis], kind="integer")


def _cells(key: str, values: pd.Series) -> list[str]:
    """A numeric column as the one format writes it (three significant figures)."""
    if key == "pct_of_copy_bw":
        return ["" if v != v else formatting.format_percent(v / 100) for v in values]
    return formatting.sig3_column(values, missing="")


def points_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[Column]]:
    """The points table of ``frame`` (:data:`~explorer.sweep.runs.SWEEP_COLUMNS`)
    and its columns: every number as text through :mod:`explorer.formatting`, a
    column that is empty everywhere left out (no GPU columns on the CPU, no
    prediction where none was skipped), the cache column only when there are two,
    an upload's source as ``"upload"`` (its name is in the captions and charts), the time
    per new token (:func:`~explorer.sweep.runs.per_token_ms`) only where a step scores
    more than one token per sequence."""
    columns = [axis_column(frame["axis"].iloc[0]) if c.key == "value" else c for c in COLUMNS]
    drafts = (pd.to_numeric(frame["query_tokens"], errors="coerce") > frame["batch_size"]).any()
    frame = frame.assign(per_token_ms=per_token_ms(frame) if drafts else float("nan"))
    table = frame[[c.key for c in columns]].dropna(axis=1, how="all")
    table = table.assign(source=table["source"].map(lambda s: "upload" if s.startswith("uploaded: ") else s))
    for key in ("cached", "note"):
        if key in table and (table[key].fillna("") == "").all():
            table = table.drop(columns=key)
    if table["kv_dtype"].nunique() <= 1:
        table = table.drop(columns="kv_dtype")
    else:
        table = table.assign(kv_dtype=table["kv_dtype"].map(formatting.kv_dtype_label))
    columns = [c for c in columns if c.key in table]
    table = table.assign(**{c.key: _cells(c.key, table[c.key]) for c in columns if c.kind == "number"})
    return table, columns
