"""Sweep: every implementation along one axis, with the device's bandwidth ceiling."""

import pandas as pd
import streamlit as st

from explorer import formatting
from explorer.bench import readouts
from explorer.page_urls import PageField, read_fields
from explorer.sweep import figures as sweep_figures
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from paged_attention import IMPLEMENTATIONS, LABELS
from ui.charts import show_chart
from ui.inputs import bounded_number_input
from ui.recorded import SWEEP_KINDS, show_recorded
from ui.sidebar import (
    current,
    show_config_error,
    show_page_url_notes,
    sync_url,
    take_page_query,
)
from ui.sweep import JOB, cancel_sweep, device_name, measure, run_next_point

DEFAULT_BUDGET_S = 10.0
MAX_BUDGET_S = 600.0
SOURCE = "this session"
AXIS_NOTES = {
    "context_len": "every sequence gets the same context length",
    "batch_size": "the sidebar's context lengths repeat across the batch",
    "block_size": "the same tokens, cut into blocks of each size",
    "num_kv_heads": "divisors of the query heads only (GQA groups); the query heads stay fixed",
    "head_dim": "the same tokens and heads, wider or narrower",
}

st.title("Sweep")
st.markdown(
    "How does each implementation scale? Pick one axis and a range; everything else comes from the sidebar. "
    "Each point times every implementation on the *same* inputs, like the decode benchmark, and checks it "
    "against the float64 reference. Download the results, and upload a CSV from another machine or version "
    "to compare the two."
)

result = current()
if show_config_error(result):
    st.stop()
config, settings = result.config, result.settings
cpu = config.device == "cpu"
ss = st.session_state


def _axis_defaults() -> None:
    low, high = sweep_grid.default_range(ss["sw_axis"], config, cpu)
    ss["sw_low"], ss["sw_high"] = low, high
    ss["sw_points"] = sweep_grid.default_points(ss["sw_axis"], low, high, cpu)


def _from_url() -> list[str]:
    """Seed the controls from the URL (``sw_axis``, ``sw_from``, ``sw_to``, ``sw_points``,
    ``sw_spacing``), the axis first: the range's defaults and limits depend on it."""
    query = take_page_query("sweep")
    found, notes = read_fields([PageField("sw_axis", "sw_axis", choices=tuple(sweep_grid.AXES))], query,
                               {"sw_axis": "context_len"})
    ss["sw_axis"] = found.get("sw_axis", "context_len")
    _axis_defaults()
    ss["sw_spacing"] = "log"
    limits = sweep_grid.AXIS_LIMITS[ss["sw_axis"]]
    found, more = read_fields(
        [PageField("sw_from", "sw_low", bounds=limits), PageField("sw_to", "sw_high", bounds=limits),
         PageField("sw_points", "sw_points", bounds=(1, sweep_grid.MAX_POINTS)),
         PageField("sw_spacing", "sw_spacing", choices=sweep_grid.SPACINGS)],
        query, {k: ss[k] for k in ("sw_low", "sw_high", "sw_points", "sw_spacing")},
    )
    ss.update(found)
    if ("sw_low" in found or "sw_high" in found) and "sw_points" not in found:  # one per doubling, as by hand
        ss["sw_points"] = sweep_grid.default_points(ss["sw_axis"], ss["sw_low"], ss["sw_high"], cpu)
    return notes + more


if ss.get("sw_axis") not in sweep_grid.AXES:  # the page's first run in this session
    show_page_url_notes("sw", _from_url())
else:
    show_page_url_notes("sw")
ss.setdefault("sw_spacing", "log")
ss.setdefault("sw_budget", DEFAULT_BUDGET_S)
if ss["sw_spacing"] is None:  # segmented control deselected
    ss["sw_spacing"] = "log"

if cpu:
    st.warning(
        "**CPU mode: these are not GPU timings.** The Triton kernel runs in Triton's interpreter, so the grid is "
        "capped to small sizes. Use it to see the sweep work; run on a GPU to see how the kernels scale.",
        icon=":material/warning:",
    )

job = ss.get(JOB)
if job is not None and job.lock.locked():
    # A click started this run while an earlier one is still timing a point:
    # wait for it, so the point is drawn (and, after Cancel, kept) rather than redone.
    with st.spinner("Finishing the point in flight…"):
        with job.lock:
            pass
running = job is not None and job.running


def _start(base, grid: sweep_grid.GridPlan, axis: str, names: tuple[str, ...], budget: float, caches: tuple) -> None:
    ss[JOB] = sweep_runs.SweepJob(
        base=base, axis=axis, values=grid.values, names=names, warmup=grid.warmup, iters=grid.iters,
        naive_budget_s=float(budget), device_name=device_name(config.device), caches=caches,
    )


def _cache_name(kv_dtype) -> str:
    return formatting.kv_dtype_label(kv_dtype, config.dtype)


with st.container(border=True):
    # Three rows on one grid: what and over which range; how; go. At 1280 px every label
    # stays on one line and every number box keeps its step buttons with its widest value
    # (From and To 1048576, Points 12, 600.00 s): five controls in one row squeezed Points
    # to a box with no buttons (checked in Chromium at 1280x720 and 1920x1080, tests/test_browser_sweep.py).
    top = st.columns([2, 1.5, 1.5], vertical_alignment="bottom")
    middle = st.columns([1, 1, 1.5, 1.5], vertical_alignment="bottom")
    axis = top[0].selectbox("Sweep over", list(sweep_grid.AXES), key="sw_axis",
                            persist_state="session", format_func=sweep_grid.AXES.get,
                            on_change=_axis_defaults, disabled=running)
    middle[0].segmented_control("Spacing", sweep_grid.SPACINGS, key="sw_spacing", persist_state="session",
                                disabled=running,
                                help="log: each point a constant factor larger (the default); linear: constant "
                                     "steps. Block sizes are always powers of two, KV heads divisors of the "
                                     "query heads.")
    lo_limit, hi_limit = sweep_grid.AXIS_LIMITS[axis]
    for key in ("sw_low", "sw_high"):  # a value from another axis may lie outside this one's limits
        ss[key] = min(max(int(ss.get(key, lo_limit)), lo_limit), hi_limit)
    low = bounded_number_input(top[1], "From", lo_limit, hi_limit, step=1, key="sw_low",
                               persist_state="session", disabled=running,
                               note_parent=st)
    high = bounded_number_input(top[2], "To", lo_limit, hi_limit, step=1, key="sw_high",
                                persist_state="session", disabled=running,
                                note_parent=st)
    points = bounded_number_input(middle[1], "Points", 1, sweep_grid.MAX_POINTS, step=1, key="sw_points",
                                  persist_state="session",
                                  disabled=running, note_parent=st)

    error, grid = None, None
    try:
        if int(low) > int(high):  # in the page's words, not sweep_values' low/high
            raise ValueError(f"From ({int(low):,}) must not exceed To ({int(high):,}).")
        values = sweep_grid.sweep_values(axis, int(low), int(high), int(points), spacing=ss["sw_spacing"] or "log",
                                    num_heads=config.num_heads)
        grid = sweep_grid.cap_grid(config, axis, values, settings.warmup, settings.iters)
        error = grid.refusal
    except ValueError as exc:
        error = str(exc)

    simple = middle[3].checkbox(f"Include {LABELS['triton_simple']}", key="sw_simple",
                                persist_state="session", disabled=running,
                                help="the textbook Triton kernel: one program per (sequence, query head)")
    fp8_bytes = sweep_grid.bytes_fraction(sweep_grid.cache_bytes_ratio(sweep_grid.compared_caches(config), config.dtype))
    compare = middle[3].checkbox("Compare cache dtypes", key="sw_compare_kv", persist_state="session",
                                 disabled=running,
                                 help=f"time every point twice: with K and V in the compute dtype "
                                      f"({config.dtype}) and in fp8 (the sidebar's fp8 format, else fp8 e4m3), "
                                      f"to see what {fp8_bytes} buys")
    caches = sweep_grid.compared_caches(config) if compare else ()
    budget = bounded_number_input(
        middle[2], "Naive budget per point (s)", 0.0, MAX_BUDGET_S, step=1.0, key="sw_budget",
            persist_state="session", disabled=running,
        note_parent=st,
        help="the naive Python loop is skipped at a point when its calls are predicted to take longer "
             "(from the previous point's time, or from one probing call); skipped points are marked, not dropped",
    )
    names = (*IMPLEMENTATIONS, *(("triton_simple",) if simple else ()))
    bottom = st.columns([2, 1.5, 1.5], vertical_alignment="bottom")
    bottom[0].button(
        "Run sweep", type="primary", icon=":material/play_arrow:", key="sw_run", width="stretch",
        disabled=error is not None or running, on_click=_start,
        args=(config, grid, axis, names, budget, caches),
    )
    bottom[1].button("Cancel", icon=":material/stop:", key="sw_cancel", width="stretch", disabled=not running,
                     on_click=cancel_sweep, help="stop after the point in flight; the points done are kept")
    bottom[2].button("Clear cache", icon=":material/delete_sweep:", key="sw_clear", width="stretch",
                     on_click=measure.clear, help="forget the cached points: timings are cached per device and "
                                                  "configuration; clear them to measure again")

    sync_url()  # the URL holds the controls as drawn (a range clamped to a new axis included)
    if error:
        st.error(f"**Invalid sweep.** {formatting.sentence(error)}", icon=":material/error:")
    else:
        shown = ", ".join(f"{v:,}" for v in grid.values)
        st.caption(
            f"**{formatting.count(len(grid.values), 'point')}**: {shown} · {AXIS_NOTES[axis]} · "
            + (f"each with a {_cache_name(caches[0])} and an {_cache_name(caches[1])} KV cache · " if caches else "")
            + f"warm-up {grid.warmup}, {formatting.count(grid.iters, 'timed call')} per implementation · "
            f"sidebar: {readouts.config_summary(config)}"
        )
        for note in grid.notes:
            st.info(f"Capped: {note} (the interpreter needs about a second per Triton call).", icon=":material/speed:")

job = ss.get(JOB)
if job is not None:
    done = job.next_index
    if job.running:
        cache = f", {_cache_name(job.caches[done % len(job.caches)])} cache" if len(job.caches) > 1 else ""
        unit = "Run" if len(job.caches) > 1 else "Point"
        st.progress(done / job.total, text=f"{unit} {done + 1} of {job.total}: "
                                           f"{sweep_grid.AXES[job.axis]} = {job.value_at(done):,}{cache} · "
                                           "Cancel stops after this point")
    elif len(job.caches) > 1:  # as the caption counts them: points, each timed with every cache
        st.progress(done / job.total, text=f"{done} of {formatting.count(job.total, 'run')} "
                                           f"({formatting.count(len(job.values), 'point')} × {len(job.caches)} caches)")
    else:
        st.progress(done / job.total, text=f"{done} of {formatting.count(job.total, 'point')}")
        if job.state == "cancelled":
            st.warning(job.message + " The points done are kept below.", icon=":material/stop_circle:")
        elif job.state == "failed":
            st.error(job.message, icon=":material/memory:")
    if job.base != config:
        st.caption(f":material/info: Results below are for the sweep started on: {readouts.config_summary(job.base)}.")
    reused = sweep_runs.cache_note(job.frame(SOURCE)) if job.rows else None
    if reused:
        st.caption(f":material/history: {reused}")

charts = st.container()

st.subheader("Compare with a saved sweep")
upload = st.file_uploader(
    "Upload a sweep CSV downloaded from this page (another machine, or another version of the kernel)",
    type=["csv"], key="sw_upload", max_upload_size=max(1, round(sweep_runs.MAX_CSV_BYTES / 1e6)),
)
uploaded = None
if upload is not None:
    try:
        uploaded = sweep_runs.read_sweep_csv(upload.getvalue(), f"uploaded: {upload.name}")
    except ValueError as exc:
        st.error(f"**Cannot compare with {formatting.plain(upload.name)}.** {formatting.sentence(str(exc))}",
                 icon=":material/error:")

mine = job.frame(SOURCE) if job is not None and job.rows else None
frames = [f for f in (mine, uploaded) if f is not None]
if mine is not None and uploaded is not None and set(uploaded["axis"]) != set(mine["axis"]):
    st.warning(
        f"The uploaded sweep varies {sweep_grid.AXES[uploaded['axis'].iloc[0]]}, this session's "
        f"{sweep_grid.AXES[mine['axis'].iloc[0]]}: the charts show this session's only.", icon=":material/compare_arrows:",
    )
    frames = [mine]
elif uploaded is not None:
    beside = ("drawn with dashed lines beside this session's" if mine is not None
              else "drawn alone (no sweep run here yet)")
    devices = ", ".join(formatting.plain(d) for d in sorted(set(uploaded["device_name"]) - {""})) or "an unnamed device"
    st.caption(f"{formatting.plain(upload.name)}: {formatting.count(len(uploaded), 'row')} from {devices}; {beside}.")

sweeping = job is not None and job.running
with charts:
    if not frames:
        if sweeping:
            st.info("The charts appear once the first point is timed.", icon=":material/hourglass_top:")
        elif error is None:  # an invalid sweep shows its error alone
            st.info("Press **Run sweep** to time the implementations along the axis, or upload a saved sweep "
                    "below.", icon=":material/info:")
    else:
        frame = pd.concat(frames, ignore_index=True)
        a, b = st.columns(2, gap="medium")
        show_chart(sweep_figures.sweep_latency_figure(frame), key="sw_latency_chart", parent=a, width="stretch")
        a.caption("Median latency of one decode step at each point. On a GPU, small points sit on the launch-overhead "
                  "floor and large ones grow with the bytes read; the naive loop grows with the blocks it visits.")
        show_chart(sweep_figures.sweep_bandwidth_figure(frame), key="sw_bandwidth_chart", parent=b, width="stretch")
        b.caption("Decode is memory-bound: the bytes of K and V it must read, over its time, against this device's "
                  "measured copy bandwidth (measured once per process with a large device-to-device copy).")
        a, b = st.columns(2, gap="medium")
        show_chart(sweep_figures.sweep_speedup_figure(frame), key="sw_speedup_chart", parent=a, width="stretch")
        a.caption("How many times faster Triton is than each other implementation at each point.")
        sources = list(dict.fromkeys(frame["source"]))
        kv_dtypes = list(dict.fromkeys(frame["kv_dtype"]))
        if len(sources) > 1:
            # one cache dtype's times against the other source's: this session's first cache
            same_cache = frame[frame["kv_dtype"] == kv_dtypes[0]] if len(kv_dtypes) > 1 else frame
            one = f"{_cache_name(kv_dtypes[0])} cache" if len(kv_dtypes) > 1 else None
            title = f"Time ratio between the two sweeps: {one} only" if one else "Time ratio between the two sweeps"
            show_chart(sweep_figures.sweep_ratio_figure(same_cache, sources[1], sources[0], title=title),
                       key="sw_ratio_chart", parent=b, width="stretch")
            b.caption("The uploaded sweep's time over this session's, per implementation: below 1 it was faster."
                      + (f" Only the points with a {one} are compared; the latency chart shows every cache."
                         if one else ""))
            same = sweep_runs.shared_measurements(frame, sources[1], sources[0])
            if same:
                b.warning(f"{formatting.count(same, 'timing')} of the upload are this session's own measurements "
                          "(the same point, implementation and `measured_at`): their ratio is 1 by construction. "
                          "**Clear cache** and run the sweep again to re-time them.", icon=":material/history:")
        elif len(kv_dtypes) > 1:
            by_cache = frame.assign(source=frame["kv_dtype"].map(formatting.kv_dtype_label))
            slow, fast = (formatting.kv_dtype_label(k) for k in kv_dtypes[:2])
            show_chart(sweep_figures.sweep_ratio_figure(by_cache, fast, slow, title=f"{fast} cache against {slow}"),
                       key="sw_kv_ratio_chart", parent=b, width="stretch")
            ratio = sweep_grid.cache_bytes_ratio(kv_dtypes[:2])
            b.caption(f"Each implementation's time with the {fast} KV cache over its time with the {slow} one: "
                      "below 1 the smaller cache is faster. Where decode is memory-bound, "
                      f"{sweep_grid.bytes_fraction(ratio)} can approach {ratio:g}.")
        else:
            b.markdown(
                "**Reading the sweep**\n\n"
                "- Solid lines are timed points; error bars span p20 to p80 of the timed calls.\n"
                "- An open circle marked *skipped* is a naive point over its time budget, drawn at its "
                "predicted time.\n"
                "- Upload a CSV from another machine or version to draw it dashed beside this one and add "
                "a time-ratio chart here."
            )

        # Narrow enough for the main column at 1280 px with the sidebar open: p20 and p80 are the
        # latency chart's bars and in the CSV, and the upload (one at a time, named in its caption
        # and the charts) is "upload" here.
        shown = ["source", "value", "label", "kv_dtype", "status", "correct", "cached", "median_ms",
                 "gpu_time_ms", "gbps", "pct_of_copy_bw", "max_abs_err", "predicted_ms", "note"]
        table = frame[shown].dropna(axis=1, how="all")  # no GPU columns on the CPU, no prediction if none skipped
        table = table.assign(source=table["source"].map(lambda s: "upload" if s.startswith("uploaded: ") else s))
        for column in ("cached", "note"):
            if column in table and (table[column].fillna("") == "").all():
                table = table.drop(columns=column)
        if table["kv_dtype"].nunique() <= 1:
            table = table.drop(columns="kv_dtype")
        else:  # named as the charts name them
            table = table.assign(kv_dtype=table["kv_dtype"].map(formatting.kv_dtype_label))
        st.subheader("Points")
        st.dataframe(
            table,
            hide_index=True, width="stretch", key="sw_table", height=min(720, 38 + 35 * len(table)),
            column_config={
                "source": st.column_config.TextColumn("Source", width=95),
                "value": st.column_config.NumberColumn(sweep_grid.AXES[frame["axis"].iloc[0]], format="%d", width=110,
                                                       help=sweep_grid.AXES[frame["axis"].iloc[0]]),
                "label": st.column_config.TextColumn("Implementation", width=125),
                "kv_dtype": st.column_config.TextColumn("KV cache", width=80),
                "status": st.column_config.TextColumn("Status", width=60),
                "cached": st.column_config.TextColumn(
                    "From cache", help="yes: timed by an earlier sweep on this server (any session) and reused; "
                                       "the caption above says when"),
                "median_ms": st.column_config.NumberColumn("Median (ms)", format="%.4g", width=95),
                "gpu_time_ms": st.column_config.NumberColumn("GPU time (ms)", format="%.4g"),
                "gbps": st.column_config.NumberColumn("GB/s", format="%.4g", width=80),
                "pct_of_copy_bw": st.column_config.NumberColumn("% of copy BW", format="%.0f%%"),
                "max_abs_err": st.column_config.NumberColumn("Max abs err", format="%.2e", width=95),
                "correct": st.column_config.TextColumn("Correct", width=65),
                "predicted_ms": st.column_config.NumberColumn("Predicted (ms)", format="%.4g"),
                "note": "Note",
            },
        )
        if mine is not None:
            st.download_button(
                "Download CSV", sweep_runs.sweep_csv(mine), file_name=f"sweep_{job.axis}.csv", mime="text/csv",
                icon=":material/download:", key="sw_csv",
            )

show_recorded(SWEEP_KINDS, mine=mine)

if job is not None and job.running:
    def _queued() -> None:
        st.info("Queued: another session is running a benchmark on this machine; the sweep goes on when it ends.",
                icon=":material/hourglass_top:")

    with job.lock:
        if job.running:  # not cancelled while this run waited for the lock
            run_next_point(job, on_wait=_queued)
    st.rerun()
