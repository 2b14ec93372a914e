"""The peer tables of the Decode benchmark page's "Recorded on a GPU" section: our
kernels against SDPA and FlashInfer, recorded on a GPU (:mod:`explorer.bench.recorded_peers`),
shown as recorded and never beside a live row."""

from __future__ import annotations

import streamlit as st

from explorer import formatting
from explorer.bench.recorded_peers import (
    CONFIGURATION_HELP,
    LABELS_HELP,
    SETS,
    PeerSet,
    load_peer_sets,
    peer_rows,
)

#: Height of a table row in ``st.dataframe``.
_ROW_PX = 35
#: Tallest a peer table is drawn (it scrolls beyond).
_MAX_TABLE_PX = 640
#: What each set measured, under its table's versions line.
_ABOUT: dict[str, str] = {
    "classic": "Uniform batches of the classic and large configurations, float16 and bfloat16: our Triton kernel "
               "on the paged cache against SDPA on a cache that was already contiguous (no paging at all: the "
               "speed paging would have to match to be free).",
    "ragged": "Ragged batches: lengths drawn uniformly in 1..8,192 and 1..32,768 at batches 4 to 64, and one "
              "long-tailed draw. FlashInfer's paged decode runs on the same pools.",
    "prefix": "Batches whose sequences share a prompt: our prefix-aware kernel and FlashInfer's two-level "
              "cascade read the shared blocks once; the last configuration shares nothing (the control).",
}


@st.cache_data(show_spinner=False)
def recorded_peer_sets() -> list[PeerSet] | str:
    """The shipped peer sets, or the rule a malformed one breaks."""
    try:
        return load_peer_sets()
    except ValueError as exc:
        return str(exc)


def peer_set_names(sets: list[PeerSet]) -> dict[str, str]:
    """``"peers:<set>" -> name`` of the sets shipped, for a selector (a key apart from
    the classic table's ``"classic"``, which is also a peer set's name)."""
    return {f"peers:{s.meta['set']}": SETS[s.meta["set"]] for s in sets}


def show_peer_set(peers: PeerSet, unit: str) -> None:
    """One recorded peer set: versions, what it measured, one table per dtype."""
    m = peers.meta
    st.markdown(
        f"**Recorded on {m['gpu']}**, not on this machine, and never mixed with the live run: "
        f"{peers.versions().removeprefix(m['gpu'] + ' · ')}; copy bandwidth **{m['copy_gbps']:,.0f} GB/s**."
    )
    st.caption(f"{_ABOUT.get(m['set'], '')} Recorded with `{m['command'].split(' --out ')[0]}`; "
               f"source: {m.get('source', peers.name)}.")
    dtypes = list(dict.fromkeys(peers.table["dtype"]))
    dtype = dtypes[0]
    if len(dtypes) > 1:
        dtype = st.radio("Recorded dtype", dtypes, horizontal=True, key="recorded_peers_dtype")
    rows = peer_rows(peers, dtype)
    table = rows.drop(columns=["impl"])
    for column in ("gpu_time_ms", "call_ms"):
        table[column] = [formatting.duration_number(v, unit) for v in table[column]]
    table["gbps"] = [formatting.format_gbps(v) for v in table["gbps"]]
    if (table["note"] == "").all():
        table = table.drop(columns="note")
    best = rows.groupby("configuration")["gpu_time_ms"].transform("min") == rows["gpu_time_ms"]
    styled = table.style.apply(lambda col: ["font-weight: bold" if b else "" for b in best], subset=["gpu_time_ms"])
    gbps_help = m.get("gbps_note", "K and V bytes a decode step must read, over the GPU time")
    st.dataframe(
        styled, hide_index=True, width="stretch", key="recorded_peers_table",
        height=min(_MAX_TABLE_PX, _ROW_PX * (len(table) + 1) + 3),
        column_config={
            # Widths (px) that hold the longest configuration and label, so that the
            # table fits a 1280 px window without cutting either.
            "configuration": st.column_config.TextColumn("Configuration", width=215, help=CONFIGURATION_HELP),
            "implementation": st.column_config.TextColumn("Implementation", width=160, help=LABELS_HELP),
            "gpu_time_ms": st.column_config.TextColumn(
                f"GPU time ({unit})", alignment="right",
                help="median CUDA-graph replay time, L2 flushed before each call, recorded; bold: the fastest of "
                     "the configuration"),
            "call_ms": st.column_config.TextColumn(f"Call latency ({unit})", alignment="right",
                                                   help="median call latency a Python caller saw, recorded"),
            "gbps": st.column_config.TextColumn("GB/s", alignment="right", help=gbps_help),
            "pct_of_copy_bw": st.column_config.NumberColumn(
                "% of copy BW", format="%.2g%%", help=f"of the recorded copy bandwidth, {m['copy_gbps']:,.0f} GB/s"),
            "correct": "Correct",
            "note": "Note",
        },
    )
    configs = rows["configuration"].nunique()
    st.caption(f"Recorded peer table, {dtype}: {formatting.count(configs, 'configuration')}, "
               f"{formatting.count(len(rows), 'row')}; bold GPU time: the fastest of its configuration. "
               + (f"{m['gbps_note']}. " if m.get("gbps_note") else "") + m.get("harness", ""))


def peer_durations() -> list[float]:
    """Every time (ms) the shipped peer sets hold."""
    sets = recorded_peer_sets()
    if isinstance(sets, str):
        return []
    return [float(v) for s in sets for col in ("gpu_ms", "call_ms") for v in s.table[col]]

