"""The "Recorded on a GPU" section: benchmark runs recorded on a GPU
(:mod:`explorer.bench.recorded`), shown apart from the live run and labelled as
recorded, so that a laptop without a GPU still has real GPU numbers to show.

One section for every recorded kind; a page calls :func:`show_recorded` with the
kinds it shows: the Decode benchmark page the classic table and the peer tables
(in an expander, picked with a segmented control), the Sweep page the sweeps (drawn
with its own charts, beside this session's sweep along the same axis but never in
its table or CSV; behind a toggle, hidden when none is shipped).
"""

from __future__ import annotations

import re
from typing import Sequence

import pandas as pd
import streamlit as st

from explorer import formatting
from explorer.bench.recorded import (
    SETS,
    RecordedSet,
    config_label,
    load_recorded,
    matching_config,
    recorded_rows,
    shown_command,
)
from explorer.bench.recorded_figures import recorded_latency_figure
from explorer.bench.recorded_peers import (
    CONFIGURATION_HELP,
    LABELS_HELP,
    choice_label,
    fastest_correct,
    peer_notes,
    peer_rows,
    table_choices,
)
from explorer.sweep import figures as sweep_figures
from explorer.sweep.grid import AXES
from explorer.sweep.naive_budget import checked_predictions
from explorer.sweep.recorded import recorded_note, setting_differences, shared_points
from paged_attention import DecodeConfig
from paged_attention.result_files import KINDS
from ui.charts import show_chart
from ui.inputs import choice
from ui.tables import column_px, show_table

TITLE = "Recorded on a GPU"
#: The kinds the Decode benchmark page shows, and the Sweep page.
BENCH_KINDS, SWEEP_KINDS = ("classic", "peers"), ("sweep",)
#: Background of the table rows of the sidebar's configuration.
_MATCH_STYLE = "background-color: rgba(250, 204, 21, 0.25)"
#: Height of a table row in ``st.dataframe``: a classic table shows whole, a peer
#: table up to :data:`_MAX_TABLE_PX` (it scrolls beyond).
_ROW_PX = 35
_MAX_TABLE_PX = 640
#: Width (px, normal mode) of a peer table's configuration column: it holds the longest
#: configuration whole at 1280x720, ``"32 × 2..32,666 (mean 3,566), tail"`` (numbers by
#: ``format_number``; 215 px cut it), and the table up to its OK column still fits.
CONFIGURATION_PX = 232
#: Width (px) of a table across the Decode benchmark page at 1280x720 in normal mode, the
#: sidebar open (Chromium drew the peer grid 786 px wide): the peer table's columns fit in
#: it, and its notes, which ran past it as a last column, go under it (:func:`_notes_text`).
PAGE_TABLE_PX = 786
#: What each peer set measured, under its table's versions line.
_ABOUT: dict[str, str] = {
    "classic": "Uniform batches of the classic and large configurations, float16 and bfloat16: our Triton kernel "
               "on the paged cache against SDPA on a cache that was already contiguous (no paging at all: the "
               "speed paging would have to match to be free).",
    "ragged": "Ragged batches: lengths drawn uniformly in 1..8,192 and 1..32,768 at batches 4 to 64, and one "
              "long-tailed draw. FlashInfer's paged decode runs on the same pools.",
    "prefix": "Batches whose sequences share a prompt: our prefix-aware kernel and FlashInfer's two-level "
              "cascade read the shared blocks once; the last configuration shares nothing (the control).",
    "fp8": "The large configurations on a float16 cache and on an fp8 (e4m3, per-tensor scale) cache. Ours and "
           "FlashInfer's decode widen each stored fp8 value exactly and compute in float16; FlashInfer XQA also "
           "rounds the query and the softmax probabilities to e4m3, which buys bandwidth and costs accuracy: "
           "compare GPU time with Max err (against a float64 reference on the dequantized cache).",
}
#: How a sweep's caption names what every point of it shares.
_SHARED = {"batch_size": "batch {}", "context_lens": "context {:,}", "num_heads": "{} heads",
           "num_kv_heads": "{} KV heads", "head_dim": "head_dim {}", "block_size": "block size {}", "dtype": "{}"}


@st.cache_data(show_spinner=False)
def recorded_sets(kinds: tuple[str, ...] = KINDS) -> list[RecordedSet] | str:
    """The shipped sets of ``kinds``, or the rule a malformed one breaks."""
    try:
        return load_recorded(kinds)
    except ValueError as exc:
        return str(exc)


def show_recorded_pointer() -> None:
    """A caption, for beside the CPU-mode warning, pointing to the recorded section."""
    sets = recorded_sets(BENCH_KINDS)
    if isinstance(sets, list) and sets:
        st.caption(f":material/south: Real GPU numbers: runs recorded on an **{sets[0].meta['gpu']}** are under "
                   f"**{TITLE}** below.")


def recorded_durations(kinds: Sequence[str] = BENCH_KINDS) -> list[float]:
    """Every time (ms) the shipped sets of ``kinds`` hold, for the section to choose
    its own unit (:func:`explorer.formatting.duration_unit`) from, whatever a live run's."""
    sets = recorded_sets(tuple(kinds))
    if isinstance(sets, str):
        return []
    return [float(v) for s in sets for col in ("median_ms", "gpu_time_ms") for v in s.table[col].dropna()]


def show_recorded(kinds: Sequence[str], config: DecodeConfig | None = None, *, mine: pd.DataFrame | None = None,
                  expanded: bool = False) -> None:
    """The section, for the recorded sets of ``kinds``.

    Parameters
    ----------
    kinds : sequence of str
        :data:`BENCH_KINDS` (the classic table, highlighting ``config`` when it was
        recorded, and the peer tables) or :data:`SWEEP_KINDS`.
    config : DecodeConfig, optional
        The sidebar's configuration (the classic table highlights it when recorded).
    mine : pd.DataFrame, optional
        This session's sweep (:data:`explorer.sweep.runs.SWEEP_COLUMNS`), drawn
        beside a recorded sweep that varies the same axis.
    expanded : bool
        Whether the expander starts open (on a CPU host, where these are the only
        GPU numbers).
    """
    sets = recorded_sets(tuple(kinds))
    if isinstance(sets, str):
        st.warning(f"The recorded GPU runs could not be read: {sets}", icon=":material/error:")
        return
    if not sets:
        return
    if set(kinds) == set(SWEEP_KINDS):
        _show_sweeps(sets, mine)
        return
    # The section's own unit, for its chart and tables alike, whatever a live run's: the
    # recorded H200 times are µs, and a CPU run's ms turned them into ms (review 3).
    unit = formatting.duration_unit(recorded_durations(kinds))
    with st.expander(f"{TITLE}: {sets[0].meta['gpu']} (recorded, not this machine)", expanded=expanded,
                     icon=":material/history:"):
        classic = [s for s in sets if s.kind == "classic"]
        peers = {f"peers:{s.meta['set']}": s for s in sets if s.kind == "peers"}
        # "peers:<set>": a key apart from the classic table's, since "classic" is also a peer set's name
        tables = {**({"classic": "classic"} if classic else {}), **{k: SETS[s.meta["set"]] for k, s in peers.items()}}
        shown = next(iter(tables))
        if len(tables) > 1:
            shown = choice(
                st, "Recorded table", list(tables), format_func=tables.get, key="recorded_kind", required=True,
                help="classic: the three implementations of this page on the classic configurations; peers, ragged, "
                     "shared prefix: our kernels against SDPA and FlashInfer (benchmarks/decode_peers.py)")
        if shown != "classic":
            _show_peers(peers[shown], unit)
            return
        recorded = classic[0]
        if len(classic) > 1:
            titles = {s.name: s.meta.get("title", s.name) for s in classic}
            name = st.selectbox("Recorded set", list(titles), format_func=titles.get, key="recorded_set")
            recorded = next(s for s in classic if s.name == name)
        _show_classic(recorded, config, unit)


def _header(recorded: RecordedSet, beside: str, more: str = "") -> None:
    """The set's first line: where it was recorded, its versions and copy bandwidth."""
    m = recorded.meta
    st.markdown(
        f"**Recorded on {m['gpu']}**, not on this machine, and never mixed with {beside}: "
        f"{recorded.versions().removeprefix(m['gpu'] + ' · ')}{more}; copy bandwidth **{formatting.format_gbps(m['copy_gbps'])} GB/s**."
    )


def _timed_column(unit: str, text: str) -> st.column_config.TextColumn:
    return st.column_config.TextColumn(f"GPU time ({unit})", alignment="right", help=text)


def _copy_column(m: dict) -> st.column_config.TextColumn:
    return st.column_config.TextColumn("% of copy BW", alignment="right",
                                       help=f"of the recorded copy bandwidth, {formatting.format_gbps(m['copy_gbps'])} GB/s")


def _copy_cells(percents: pd.Series) -> list[str]:
    """The shares of the copy bandwidth (in %) as the results table writes them,
    three significant figures: "0.0210%", "2.80%" (``"%.2g"`` wrote "0.021%", "17%")."""
    return [formatting.format_percent(v / 100) if pd.notna(v) else "n/a" for v in percents]


def _show_classic(recorded: RecordedSet, config: DecodeConfig | None, unit: str) -> None:
    m, t = recorded.meta, recorded.table
    shared = (f". {t['num_heads'].iloc[0]} heads, {t['num_kv_heads'].iloc[0]} KV heads, head_dim "
              f"{t['head_dim'].iloc[0]}, block size {t['block_size'].iloc[0]}, {t['dtype'].iloc[0]}")
    _header(recorded, "the live run", shared)
    note = formatting.group_prose_bandwidths(m.get("copy_note", "measured in the same run"))
    st.caption(f"Copy bandwidth {note}. Recorded with "
               f"`{shown_command(m['command'])}`.")
    layouts = recorded.layouts
    default = config.block_layout if config is not None and config.block_layout in layouts else layouts[-1]
    layout = st.radio("Recorded block table", layouts, index=layouts.index(default), horizontal=True,
                      key="recorded_layout")
    rows = recorded_rows(recorded, layout)
    match = matching_config(recorded, config) if config is not None else None
    highlight = config_label(*match) if match else None
    if match:
        st.success(f"Your sidebar's configuration, {highlight}, was recorded: it is highlighted below.",
                   icon=":material/my_location:")
    else:
        st.caption(f"Your sidebar's configuration is not among the recorded ones ({len(recorded.configs)} "
                   "configurations at one context length each, with the heads, head_dim, block size and dtype "
                   "above).")
    show_chart(
        recorded_latency_figure(rows, gpu=m["gpu"], date=str(m["date"]), layout=layout, highlight=highlight,
                                unit=unit),
        key="recorded_chart", width="stretch",
    )
    table = rows.drop(columns=["batch_size", "context_len", "key"])
    # Text in the page's unit, three significant digits (a time never measured reads "n/a", not "None").
    for column in ("gpu_time_ms", "median_ms"):
        table[column] = [formatting.duration_number(v, unit) if pd.notna(v) else "n/a" for v in table[column]]
    table["gbps"] = [formatting.format_gbps(v) for v in table["gbps"]]
    table["pct_of_copy_bw"] = _copy_cells(table["pct_of_copy_bw"])
    match = pd.DataFrame({c: [_MATCH_STYLE if row == highlight else "" for row in table["configuration"]]
                          for c in table.columns}, index=table.index)
    show_table(
        table, css=match, key="recorded_table", height=_ROW_PX * (len(table) + 1) + 3,
        column_config={
            "configuration": "Configuration (recorded)",
            "implementation": "Implementation",
            "gpu_time_ms": _timed_column(unit, "median CUDA-graph replay time, recorded (n/a: Naive PyTorch reads "
                                               "the block table on the host and cannot be captured)"),
            "median_ms": st.column_config.TextColumn(f"Call latency ({unit})", alignment="right",
                                                     help="median call latency a Python caller saw, recorded"),
            "gbps": st.column_config.TextColumn("GB/s", alignment="right",
                                                help="from GPU time where measured, else from call latency"),
            "pct_of_copy_bw": _copy_column(m),
            "correct": "Correct",
        },
    )
    st.caption(f"Recorded table, {layout} block table, {formatting.count(len(rows), 'row')}. "
               f"{m.get('harness', '')}".rstrip())


#: Markdown's marks (and Streamlit's ``:icon:``, ``$maths$``), escaped in a recorded note.
_MARKS = re.compile(r"([\\`*_{}\[\]<>#|~:$])")


def _notes_text(rows: pd.DataFrame) -> str:
    """The notes of a peer table's ``rows`` (:func:`~explorer.bench.recorded_peers.peer_notes`)
    as a caption's Markdown lines: ``"Notes: **FlashInfer**: backend fa2"``, one line
    each; a note's text (the recorded file's) as typed, its Markdown marks escaped; ``""``
    without notes."""
    lines = [f"**{who}**: " + _MARKS.sub(r"\\\1", note) for who, note in peer_notes(rows)]
    return "Notes:  \n" + "  \n".join(lines) if lines else ""


def _show_peers(peers: RecordedSet, unit: str) -> None:
    """One recorded peer set: versions, what it measured, one table per dtype."""
    m = peers.meta
    _header(peers, "the live run")
    st.caption(f"{_ABOUT.get(m['set'], '')} Recorded with `{shown_command(m['command'])}`; "
               f"source: {m.get('source', peers.name)}.")
    choices = table_choices(peers)
    dtype, kv_dtype = choices[0]
    if len(choices) > 1:
        dtype, kv_dtype = st.radio("Recorded dtype", choices, format_func=lambda c: choice_label(*c),
                                   horizontal=True, key="recorded_peers_dtype")
    rows = peer_rows(peers, dtype, kv_dtype)
    table = rows.drop(columns=["impl"])
    table["max_abs_err"] = formatting.sig3_column(table["max_abs_err"])
    for column in ("gpu_time_ms", "call_ms"):
        table[column] = [formatting.duration_number(v, unit) if pd.notna(v) else "n/a" for v in table[column]]
    table["gbps"] = [formatting.format_gbps(v) for v in table["gbps"]]
    table["pct_of_copy_bw"] = _copy_cells(table["pct_of_copy_bw"])
    table = table.drop(columns="note")  # under the table: a column of them ran past 1280 px
    best = fastest_correct(rows)
    bold = pd.DataFrame("", index=table.index, columns=table.columns)
    bold["gpu_time_ms"] = ["font-weight: bold" if b else "" for b in best]
    gbps_help = m.get("gbps_note", "K and V bytes a decode step must read, over the GPU time")
    show_table(
        table, css=bold, key="recorded_peers_table",
        height=min(_MAX_TABLE_PX, _ROW_PX * (len(table) + 1) + 3),
        column_config={
            # Widths (px) that hold the longest configuration and label, and short
            # headers (the full name in each help) on the number columns, so that the
            # table up to Correct fits a 1280 px window (second review of issue 27).
            "configuration": st.column_config.TextColumn("Configuration", width=column_px(CONFIGURATION_PX),
                                                         help=CONFIGURATION_HELP),
            "implementation": st.column_config.TextColumn("Implementation", width=column_px(140),
                                                          help=LABELS_HELP),
            "gpu_time_ms": st.column_config.TextColumn(
                f"GPU ({unit})", alignment="right", width=column_px(72),
                help="GPU time: median CUDA-graph replay time, L2 flushed before each call, recorded; bold: the "
                     "fastest correct one of the configuration"),
            "call_ms": st.column_config.TextColumn(f"Call ({unit})", alignment="right", width=column_px(72),
                                                   help="call latency: the median a Python caller saw, recorded"),
            "gbps": st.column_config.TextColumn("GB/s", alignment="right", help=gbps_help, width=column_px(62)),
            "pct_of_copy_bw": st.column_config.TextColumn(
                "% copy", alignment="right", width=column_px(68),
                help=f"% of the recorded copy bandwidth, {formatting.format_gbps(m['copy_gbps'])} GB/s"),
            "max_abs_err": st.column_config.TextColumn(
                "Max err", alignment="right", width=column_px(80),
                help="max abs error: the largest |output − float64 reference| over the batch (an fp8 cache: the "
                     "reference of its dequantized values)"),
            "correct": st.column_config.TextColumn("OK", width=column_px(44),
                                                   help="correct: within the dtype's tolerance of the reference"),
        },
    )
    notes = _notes_text(rows)
    if notes:
        st.caption(notes)
    configs = rows["configuration"].nunique()
    st.caption(f"Recorded peer table, {choice_label(dtype, kv_dtype)}: {formatting.count(configs, 'configuration')}, "
               f"{formatting.count(len(rows), 'row')}; bold GPU time: the fastest correct one of its configuration. "
               + (f"{m['gbps_note']}. " if m.get("gbps_note") else "") + m.get("harness", ""))


def _show_sweeps(sweeps: list[RecordedSet], mine: pd.DataFrame | None) -> None:
    """Pick a recorded sweep; its latency and bandwidth charts, with this session's
    sweep ``mine`` drawn beside it when it varies the same axis, then their ratio."""
    st.subheader(TITLE)
    # Off by default: its charts stay out of the way of this session's sweep (and of
    # a page that reruns after every point) until a presenter asks for them.
    if not st.toggle(f"Show the {len(sweeps)} sweeps recorded on {sweeps[0].meta['gpu']}" if len(sweeps) > 1
                     else f"Show the sweep recorded on {sweeps[0].meta['gpu']}", key="sw_show_recorded"):
        st.caption("Real GPU numbers for a machine without one: latency and bandwidth measured on a GPU, drawn "
                   "beside this session's sweep when it varies the same axis.")
        return
    names = {s.name: f"{AXES[s.axis].split(' (')[0]} · {s.meta['gpu']} · {s.meta['date']}" for s in sweeps}
    chosen = next(iter(names))
    if len(names) > 1:
        chosen = choice(st, "Recorded sweep", list(names), format_func=names.get, key="sw_recorded", required=True)
    rec = next(s for s in sweeps if s.name == chosen)
    m, shared, frame = rec.meta, rec.meta.get("config", {}), rec.table
    fixed = ", ".join(text.format(shared[k]) for k, text in _SHARED.items() if k in shared)
    _header(rec, "this session's sweep")
    same_axis = mine is not None and set(mine["axis"]) == {rec.axis}
    beside = ("Drawn dashed beside this session's sweep, which varies the same axis." if same_axis
              else "Drawn alone: " + ("this session's sweep varies another axis." if mine is not None
                                      else "no sweep run here yet."))
    took = f", {formatting.format_duration(1000 * m['elapsed_s'])} in all" if "elapsed_s" in m else ""
    st.caption(f"{AXES[rec.axis]} over {formatting.format_axis_values(sorted(set(frame['value'])))}; "
               + (f"{fixed}; " if fixed else "")
               + f"recorded with `{shown_command(m['command'])}`{took}. {beside}")
    both = pd.concat([mine, frame], ignore_index=True) if same_axis else frame
    note = recorded_note(m["gpu"], beside=same_axis)
    a, b = st.columns(2, gap="medium")
    show_chart(sweep_figures.sweep_latency_figure(both, note=note), key="sw_recorded_latency", parent=a,
               width="stretch")
    show_chart(sweep_figures.sweep_bandwidth_figure(both, note=note), key="sw_recorded_bandwidth", parent=b,
               width="stretch")
    if same_axis:
        differ = setting_differences(rec, mine)
        if differ:
            st.caption("Settings that differ, recorded vs this session: " + ", ".join(differ) + ".")
        if shared_points(frame, mine):
            a, b = st.columns(2, gap="medium")
            show_chart(sweep_figures.sweep_ratio_figure(both, frame["source"].iloc[0], mine["source"].iloc[0],
                                                        title=f"Time ratio: recorded on {m['gpu']} over this session"),
                       key="sw_recorded_ratio", parent=a, width="stretch")
            b.caption(f"The recorded sweep's time over this session's, per implementation: below 1 the {m['gpu']} "
                      "was faster.")
        else:
            def values(f: pd.DataFrame) -> str:
                return formatting.format_axis_values(sorted(set(f["value"].astype(float))))

            st.caption(f"No time ratio: the two sweeps share no measured {AXES[rec.axis].split(' (')[0]} "
                       f"(recorded: {values(frame)}; this session: {values(mine)}).")
    skipped = int((frame["status"] == "skipped").sum())
    _, rederived = checked_predictions(frame)
    st.caption(f"{formatting.count(len(frame), 'recorded row')}"
               + (f"; {skipped} naive {'point' if skipped == 1 else 'points'} over the "
                  f"{m.get('naive_budget_s', '?')} s budget, drawn at the predicted time" if skipped else "")
               + (f" ({rederived} of them re-derived from the measured points by the cost model: the recorded "
                  "prediction, from one probing call, contradicts a measured point; the CSV keeps it)"
                  if rederived else "")
               + f". {m.get('harness', '')}".rstrip())
