"""The Sweep page's "Recorded on a GPU" section: sweeps recorded on a GPU
(:mod:`explorer.sweep.recorded`), drawn with the page's own sweep charts, beside
this session's sweep along the same axis but never in its table or CSV. Hidden when
none are shipped."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer import formatting
from explorer.sweep import figures as sweep_figures
from explorer.sweep.grid import AXES
from explorer.sweep.recorded import (
    RecordedSweep,
    load_recorded_sweeps,
    recorded_note,
    setting_differences,
    shared_points,
)
from ui.charts import show_chart

TITLE = "Recorded on a GPU"
#: How the caption names what every point of a recorded sweep shares.
_SHARED = {"batch_size": "batch {}", "context_lens": "context {:,}", "num_heads": "{} heads",
           "num_kv_heads": "{} KV heads", "head_dim": "head_dim {}", "block_size": "block size {}", "dtype": "{}"}


@st.cache_data(show_spinner=False)
def recorded_sweeps() -> list[RecordedSweep] | str:
    """The shipped sweeps, or the rule a malformed one breaks."""
    try:
        return load_recorded_sweeps()
    except ValueError as exc:
        return str(exc)


def show_recorded_sweeps(mine: pd.DataFrame | None) -> None:
    """The section: pick a recorded sweep; its latency and bandwidth charts, with
    this session's sweep (``mine``, :data:`explorer.sweep.runs.SWEEP_COLUMNS`) drawn
    beside it when it varies the same axis, and then the ratio of the two."""
    sweeps = recorded_sweeps()
    if isinstance(sweeps, str):
        st.warning(f"The recorded GPU sweeps could not be read: {sweeps}", icon=":material/error:")
        return
    if not sweeps:
        return
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
        chosen = st.segmented_control("Recorded sweep", list(names), format_func=names.get, default=chosen,
                                      required=True, key="sw_recorded") or chosen
    rec = next(s for s in sweeps if s.name == chosen)
    m, shared = rec.meta, rec.meta.get("config", {})
    fixed = ", ".join(text.format(shared[k]) for k, text in _SHARED.items() if k in shared)
    st.markdown(
        f"**Recorded on {m['gpu']}**, not on this machine, and never mixed with this session's sweep: "
        f"{rec.versions().removeprefix(m['gpu'] + ' · ')}; copy bandwidth **{m['copy_gbps']:,.0f} GB/s**."
    )
    same_axis = mine is not None and set(mine["axis"]) == {rec.axis}
    beside = ("Drawn dashed beside this session's sweep, which varies the same axis." if same_axis
              else "Drawn alone: " + ("this session's sweep varies another axis." if mine is not None
                                      else "no sweep run here yet."))
    took = f", {m['elapsed_s']:,.0f} s in all" if "elapsed_s" in m else ""
    st.caption(f"{AXES[rec.axis]} over {', '.join(f'{v:,}' for v in sorted(set(rec.frame['value'])))}; "
               + (f"{fixed}; " if fixed else "")
               + f"recorded with `{m['command']}`{took}. {beside}")
    frame = pd.concat([mine, rec.frame], ignore_index=True) if same_axis else rec.frame
    note = recorded_note(m["gpu"], beside=same_axis)
    a, b = st.columns(2, gap="medium")
    show_chart(sweep_figures.sweep_latency_figure(frame, note=note), key="sw_recorded_latency", parent=a, width="stretch")
    show_chart(sweep_figures.sweep_bandwidth_figure(frame, note=note), key="sw_recorded_bandwidth", parent=b,
               width="stretch")
    if same_axis:
        differ = setting_differences(rec, mine)
        if differ:
            st.caption("Settings that differ, recorded vs this session: " + ", ".join(differ) + ".")
        if shared_points(rec.frame, mine):
            a, b = st.columns(2, gap="medium")
            show_chart(sweep_figures.sweep_ratio_figure(frame, rec.source, mine["source"].iloc[0],
                                                  title=f"Time ratio: recorded on {m['gpu']} over this session"),
                       key="sw_recorded_ratio", parent=a, width="stretch")
            b.caption(f"The recorded sweep's time over this session's, per implementation: below 1 the {m['gpu']} "
                      "was faster.")
        else:
            def values(f: pd.DataFrame) -> str:
                return ", ".join(f"{v:,g}" for v in sorted(set(f["value"].astype(float))))

            st.caption(f"No time ratio: the two sweeps share no measured {AXES[rec.axis].split(' (')[0]} "
                       f"(recorded: {values(rec.frame)}; this session: {values(mine)}).")
    skipped = int((rec.frame["status"] == "skipped").sum())
    st.caption(f"{formatting.count(len(rec.frame), 'recorded row')}"
               + (f"; {skipped} naive {'point' if skipped == 1 else 'points'} over the "
                  f"{m.get('naive_budget_s', '?')} s budget, drawn at the predicted time" if skipped else "")
               + f". {m.get('harness', '')}".rstrip())
