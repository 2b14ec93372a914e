"""Sweep: every implementation along one axis, with the device's bandwidth ceiling."""

import pandas as pd
import streamlit as st

from explorer import formatting, limits
from explorer.limits import MAX_BUDGET_S
from explorer.sweep import figures as sweep_figures
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from explorer.sweep import view
from explorer.sweep.view import SOURCE
from paged_attention import IMPLEMENTATIONS, LABELS
from ui.charts import show_chart
from ui.inputs import bounded_number_input, choice
from ui.recorded import SWEEP_KINDS, show_recorded
from ui.sidebar import current, show_config_error, sync_url
from ui.sweep import (
    JOB, axis_defaults, cancel_sweep, device_name, mark_drawn, measure, seed_controls, show_per_token, show_points,
    show_progress, start_sweep,
)

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
seed_controls(config, cpu)

if cpu:
    st.warning(
        "**CPU mode: these are not GPU timings.** The Triton kernel runs in Triton's interpreter, so the grid is "
        "capped to small sizes. Use it to see the sweep work; run on a GPU to see how the kernels scale.",
        icon=":material/warning:",
    )

job = st.session_state.get(JOB)
mark_drawn(job)  # before reading its rows: the progress reruns the page once it has more
running = job is not None and job.running


def _start(grid: sweep_grid.GridPlan, axis: str, names: tuple[str, ...], budget: float, caches: tuple) -> None:
    start_sweep(sweep_runs.SweepJob(
        base=config, axis=axis, values=grid.values, names=names, warmup=grid.warmup, iters=grid.iters,
        naive_budget_s=float(budget), device_name=device_name(config.device), caches=caches,
    ))


with st.container(border=True):
    # Three rows on one grid: what and over which range; how; go. At 1280 px every label
    # stays on one line and every number box keeps its step buttons with its widest value
    # (From and To 1048576, Points 12, 600.00 s), in presentation mode too: five controls in
    # one row squeezed Points to a box with no buttons (tests/test_browser_sweep.py).
    top = st.columns([2, 1.5, 1.5], vertical_alignment="bottom")
    middle = st.columns([0.9, 0.9, 1.5, 1.8], vertical_alignment="bottom")
    axis = top[0].selectbox("Sweep over", list(sweep_grid.AXES), key="sw_axis", persist_state="session",
                            format_func=sweep_grid.AXES.get, on_change=axis_defaults, args=(config, cpu),
                            disabled=running)
    choice(middle[0], "Spacing", sweep_grid.SPACINGS, key="sw_spacing", persist_state="session",
           disabled=running,
           help="log: each point a constant factor larger (the default); linear: constant "
                "steps. Block sizes are always powers of two, KV heads divisors of the "
                "query heads.")
    lo_limit, hi_limit = sweep_grid.AXIS_LIMITS[axis]
    low = bounded_number_input(top[1], "From", lo_limit, hi_limit, step=1, key="sw_low", persist_state="session",
                               disabled=running, note_parent=st)
    high = bounded_number_input(top[2], "To", lo_limit, hi_limit, step=1, key="sw_high", persist_state="session",
                                disabled=running, note_parent=st)
    points = bounded_number_input(middle[1], "Points", 1, limits.MAX_POINTS, step=1, key="sw_points",
                                  persist_state="session", disabled=running, note_parent=st)
    budget = bounded_number_input(
        middle[2], "Naive budget per point (s)", 0.0, MAX_BUDGET_S, step=1.0, key="sw_budget",
        format=formatting.SIG3_PRINTF, persist_state="session", disabled=running, note_parent=st,
        help="the naive Python loop is skipped at a point when its calls are predicted to take longer "
             "(from the previous point's time, or from one probing call); skipped points are marked, not dropped",
    )
    simple = middle[3].checkbox(f"Include {LABELS['triton_simple']}", key="sw_simple", persist_state="session",
                                disabled=running,
                                help="the textbook Triton kernel: one program per (sequence, query head)")
    fp8_bytes = sweep_grid.bytes_fraction(sweep_grid.cache_bytes_ratio(sweep_grid.compared_caches(config),
                                                                       config.dtype))
    compare = middle[3].checkbox("Compare cache dtypes", key="sw_compare_kv", persist_state="session",
                                 disabled=running,
                                 help=f"time every point twice: with K and V in the compute dtype "
                                      f"({config.dtype}) and in fp8 (the sidebar's fp8 format, else fp8 e4m3), "
                                      f"to see what {fp8_bytes} buys")
    caches = sweep_grid.compared_caches(config) if compare else ()
    names = (*IMPLEMENTATIONS, *(("triton_simple",) if simple else ()))
    grid, error = view.plan_grid(config, axis, low, high, points, st.session_state["sw_spacing"],
                                 settings.warmup, settings.iters)

    bottom = st.columns([2, 1.5, 1.5], vertical_alignment="bottom")
    bottom[0].button("Run sweep", type="primary", icon=":material/play_arrow:", key="sw_run", width="stretch",
                     disabled=error is not None or running, on_click=_start,
                     args=(grid, axis, names, budget, caches))
    bottom[1].button("Cancel", icon=":material/stop:", key="sw_cancel", width="stretch", disabled=not running,
                     on_click=cancel_sweep, help="end the sweep now; the points done are kept")
    bottom[2].button("Clear cache", icon=":material/delete_sweep:", key="sw_clear", width="stretch",
                     on_click=measure.clear, help="forget the cached points: timings are cached per device and "
                                                  "configuration; clear them to measure again")
    show_progress(job)  # under the buttons, in view at 1280x720 when Run is pressed
    sync_url()  # the URL holds the controls as drawn (a range clamped to a new axis included)
    if error:
        st.error(f"**Invalid sweep.** {formatting.sentence(error)}", icon=":material/error:")
    else:
        st.caption(view.grid_caption(grid, axis, caches, config))
        for note in grid.notes:
            st.info(f"Capped: {note} (the interpreter needs about a second per Triton call).", icon=":material/speed:")

mine = job.frame(SOURCE) if job is not None else None
mine = mine if mine is not None and len(mine) else None
if job is not None and view.started_on(job, config):
    st.caption(f":material/info: {view.started_on(job, config)}")
if mine is not None and sweep_runs.cache_note(mine):
    st.caption(f":material/history: {sweep_runs.cache_note(mine)}")

charts = st.container()

st.subheader("Compare with a saved sweep")
upload = st.file_uploader(
    "Upload a sweep CSV downloaded from this page (another machine, or another version of the kernel)",
    type=["csv"], key="sw_upload", max_upload_size=max(1, round(limits.MAX_CSV_BYTES / 1e6)),
)
uploaded = None
if upload is not None:
    try:
        uploaded = sweep_runs.read_sweep_csv(upload.getvalue(), f"uploaded: {upload.name}")
    except ValueError as exc:
        st.error(f"**Cannot compare with {formatting.plain(upload.name)}.** {formatting.sentence(str(exc))}",
                 icon=":material/error:")

frames = [f for f in (mine, uploaded) if f is not None]
if mine is not None and uploaded is not None and set(uploaded["axis"]) != set(mine["axis"]):
    st.warning(
        f"The uploaded sweep varies {sweep_grid.AXES[uploaded['axis'].iloc[0]]}, this session's "
        f"{sweep_grid.AXES[mine['axis'].iloc[0]]}: the charts show this session's only.",
        icon=":material/compare_arrows:",
    )
    frames = [mine]
elif uploaded is not None:
    beside = ("drawn with dashed lines beside this session's" if mine is not None
              else "drawn alone (no sweep run here yet)")
    devices = ", ".join(formatting.plain(d) for d in sorted(set(uploaded["device_name"]) - {""})) or "an unnamed device"
    st.caption(f"{formatting.plain(upload.name)}: {formatting.count(len(uploaded), 'row')} from {devices}; {beside}.")

with charts:
    if not frames:
        if running:
            st.info("The charts appear once the first point is timed.", icon=":material/hourglass_top:")
        elif error is None and not view.cancelled_before_any(job):  # an invalid or cancelled sweep says so alone
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
        second = view.second_chart(frame)
        if second.kind == "reading":
            b.markdown(
                "**Reading the sweep**\n\n"
                "- Solid lines are timed points; error bars span p20 to p80 of the timed calls.\n"
                "- An open circle marked *skipped* is a naive point over its time budget, drawn at its "
                "predicted time.\n"
                "- Upload a CSV from another machine or version to draw it dashed beside this one and add "
                "a time-ratio chart here."
            )
        else:
            show_chart(sweep_figures.sweep_ratio_figure(second.frame, second.numerator, second.denominator,
                                                        title=second.title),
                       key="sw_ratio_chart" if second.kind == "sources" else "sw_kv_ratio_chart", parent=b,
                       width="stretch")
            b.caption(second.caption)
        if second.shared:
            b.warning(f"{formatting.count(second.shared, 'timing')} of the upload are this session's own "
                      "measurements (the same point, implementation and `measured_at`): their ratio is 1 by "
                      "construction. **Clear cache** and run the sweep again to re-time them.",
                      icon=":material/history:")
        show_per_token(frame)  # a sweep over the new tokens: the time per token

        st.subheader("Points")
        show_points(*view.points_table(frame))
        if mine is not None:
            st.download_button("Download CSV", sweep_runs.sweep_csv(mine), file_name=f"sweep_{job.axis}.csv",
                               mime="text/csv", icon=":material/download:", key="sw_csv")

show_recorded(SWEEP_KINDS, mine=mine)
