"""The Decode benchmark page's "Recorded on a GPU" section: a benchmark set recorded
on a GPU (:mod:`explorer.bench.recorded`), shown apart from the live run and labelled as
recorded, so that a laptop without a GPU still has real GPU numbers to show."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer import formatting
from explorer.bench.recorded import (
    RecordedSet,
    config_label,
    load_recorded,
    matching_config,
    recorded_rows,
)
from explorer.bench.recorded_figures import recorded_latency_figure
from paged_attention import DecodeConfig
from ui.charts import show_chart
from ui.recorded_peers import (
    peer_durations,
    peer_set_names,
    recorded_peer_sets,
    show_peer_set,
)

TITLE = "Recorded on a GPU"
#: Background of the table rows of the sidebar's configuration.
_MATCH_STYLE = "background-color: rgba(250, 204, 21, 0.25)"
#: Height of a table row in ``st.dataframe``: the whole recorded table shows, no scrolling.
_ROW_PX = 35


@st.cache_data(show_spinner=False)
def _recorded() -> list[RecordedSet] | str:
    """The shipped sets, or the rule a malformed one breaks."""
    try:
        return load_recorded()
    except ValueError as exc:
        return str(exc)


def show_recorded_pointer() -> None:
    """A caption, for beside the CPU-mode warning, pointing to the recorded section."""
    sets = _recorded()
    if isinstance(sets, list) and sets:
        st.caption(f":material/south: Real GPU numbers: runs recorded on an **{sets[0].meta['gpu']}** are under "
                   f"**{TITLE}** below.")


def recorded_durations() -> list[float]:
    """Every time (ms) the shipped sets hold, for the page to choose its one unit
    (:func:`explorer.formatting.duration_unit`) from what it shows."""
    sets = _recorded()
    if isinstance(sets, str):
        return peer_durations()
    return [float(v) for s in sets for col in ("median_ms", "gpu_time_ms") for v in s.table[col].dropna()] + peer_durations()


def show_recorded(config: DecodeConfig, *, expanded: bool, unit: str = "ms") -> None:
    """The section: which GPU and versions, a table and a chart of the recorded
    classic configurations, the sidebar's configuration highlighted when recorded;
    and, picked with a segmented control, the recorded peer tables
    (:mod:`ui.recorded_peers`).

    Parameters
    ----------
    config : DecodeConfig
        The sidebar's configuration (to highlight when it was recorded).
    expanded : bool
        Whether the expander starts open (on a CPU host, where these are the only
        GPU numbers).
    unit : str
        Ignored (kept for callers): the section writes its times in its own unit,
        chosen from its own numbers (:func:`recorded_durations`), so that a live run
        in another unit does not change how the recorded tables read.
    """
    unit = formatting.duration_unit(recorded_durations())
    sets, peers = _recorded(), recorded_peer_sets()
    for broken in (sets, peers):
        if isinstance(broken, str):
            st.warning(f"The recorded GPU runs could not be read: {broken}", icon=":material/error:")
    sets = sets if isinstance(sets, list) else []
    peers = peers if isinstance(peers, list) else []
    if not sets and not peers:
        return
    gpu = (sets or peers)[0].meta["gpu"]
    with st.expander(f"{TITLE}: {gpu} (recorded, not this machine)", expanded=expanded,
                     icon=":material/history:"):
        tables = {**({"classic": "classic"} if sets else {}), **peer_set_names(peers)}
        shown = next(iter(tables))
        if len(tables) > 1:
            shown = st.segmented_control(
                "Recorded table", list(tables), format_func=tables.get, default=shown, required=True,
                key="recorded_kind",
                help="classic: the three implementations of this page on the classic configurations; peers, ragged, "
                     "shared prefix: our kernels against SDPA and FlashInfer (benchmarks/decode_peers.py)") or shown
        if shown != "classic":
            show_peer_set(next(p for p in peers if p.meta["set"] == shown.removeprefix("peers:")), unit)
            return
        recorded = sets[0]
        if len(sets) > 1:
            titles = {s.name: s.meta.get("title", s.name) for s in sets}
            name = st.selectbox("Recorded set", list(titles), format_func=titles.get, key="recorded_set")
            recorded = next(s for s in sets if s.name == name)
        _show_set(recorded, config, unit)


def _show_set(recorded: RecordedSet, config: DecodeConfig, unit: str) -> None:
    m, shared = recorded.meta, recorded.meta["config"]
    st.markdown(
        f"**Recorded on {m['gpu']}**, not on this machine, and never mixed with the live run: "
        f"{recorded.versions().removeprefix(m['gpu'] + ' · ')}. "
        f"{shared['num_heads']} heads, {shared['num_kv_heads']} KV heads, head_dim {shared['head_dim']}, "
        f"block size {shared['block_size']}, {shared['dtype']}; copy bandwidth **{m['copy_gbps']:,.0f} GB/s**."
    )
    st.caption(f"Copy bandwidth {m.get('copy_note', 'measured in the same run')}. Recorded with "
               f"`{m['command']}`.")
    layouts = recorded.layouts
    default = config.block_layout if config.block_layout in layouts else layouts[-1]
    layout = st.radio("Recorded block table", layouts, index=layouts.index(default), horizontal=True,
                      key="recorded_layout")
    rows = recorded_rows(recorded, layout)
    match = matching_config(recorded, config)
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
    styled = table.style.apply(
        lambda row: [_MATCH_STYLE if row["configuration"] == highlight else ""] * len(row), axis=1
    )
    st.dataframe(
        styled, hide_index=True, width="stretch", key="recorded_table", height=_ROW_PX * (len(table) + 1) + 3,
        column_config={
            "configuration": "Configuration (recorded)",
            "implementation": "Implementation",
            "gpu_time_ms": st.column_config.TextColumn(
                f"GPU time ({unit})", alignment="right",
                help="median CUDA-graph replay time, recorded (n/a: Naive PyTorch reads the block table on the "
                     "host and cannot be captured)"),
            "median_ms": st.column_config.TextColumn(f"Call latency ({unit})", alignment="right",
                                                     help="median call latency a Python caller saw, recorded"),
            "gbps": st.column_config.TextColumn("GB/s", alignment="right",
                                                help="from GPU time where measured, else from call latency"),
            "pct_of_copy_bw": st.column_config.NumberColumn(
                "% of copy BW", format="%.2g%%", help=f"of the recorded copy bandwidth, {m['copy_gbps']:,.0f} GB/s"),
            "correct": "Correct",
        },
    )
    st.caption(f"Recorded table, {layout} block table, {formatting.count(len(rows), 'row')}. "
               f"{m.get('harness', '')}".rstrip())
