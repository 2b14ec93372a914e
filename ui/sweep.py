"""Running a sweep from the app, and its parts on screen.

The page keeps a :class:`~explorer.sweep.runs.SweepJob` in session state. Run
starts a worker thread (:func:`start_sweep`) that times the job's points one
after another; the page draws the rows done so far, and a fragment
(:func:`show_progress`) looks at the job every :data:`POLL_S` seconds, showing
its progress and rerunning the page when a point is done or the sweep ends.
Cancel (:func:`cancel_sweep`) ends the sweep at once: the job says
``"cancelled"`` from the click, the worker stops at its next look (between points,
and between a point's timed rounds) and drops the point in flight.

* Each point takes the process-wide run lock of :mod:`ui.benchmark` (the decode
  benchmark page's), so a sweep and a benchmark never time each other, and goes
  through the same memory check before any tensor is allocated. While the worker
  waits for it, the progress shows the queue note (:class:`ui.run_guard.QueueNote`).
* Each (device, configuration, implementation) is measured once per process:
  :func:`measure` is ``st.cache_data`` keyed on plain values, returning a
  one-row DataFrame, never tensors. Each row carries when it was measured, so a
  sweep that reuses it (another session's, or an earlier one) marks its rows
  ``cached`` and the page says so.
* The naive implementation gets a time budget per point
  (:func:`~explorer.sweep.naive_budget.naive_plan`); points over it are recorded
  as skipped, with the predicted time.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Callable

import pandas as pd
import streamlit as st
import torch

from explorer.page_urls import read_page
from explorer.sweep import grid as sweep_grid
from explorer.sweep import view
from explorer.sweep.naive_budget import after_probe, naive_cost, naive_plan, probe_ms
from explorer.sweep.runs import SweepJob, result_row, status_row
from explorer.sweep.token_figures import sweep_per_token_figure
from paged_attention import DecodeConfig, prepare
from paged_attention.bench import benchmark_implementations
from paged_attention.timing import GPU_HEADROOM_BYTES, time_calls
from ui.benchmark import (
    BenchmarkOOM,
    BenchmarkRefused,
    check_fits,
    copy_bandwidth,
    exclusive_run,
    inputs_slot,
    session_id,
)
from ui.charts import show_chart
from ui.data import config_key
from ui.page_state import show_url_notes
from ui.run_guard import QueueNote
from ui.sidebar import take_page_query
from ui.tables import column_px, number_column, show_table

#: Session-state key of the current sweep.
JOB = "sweep_job"
#: The naive loop's time budget per point (s) until the page's box is changed.
DEFAULT_BUDGET_S = 10.0
#: Seconds between the page's looks at a running sweep.
POLL_S = 0.5
#: Session-state key of the job's state the page last drew: (job id, points done, state).
_DRAWN = "sw_drawn"


class SweepCancelled(Exception):
    """Raised inside the worker when the job was cancelled: it stops where it is."""


def _check(job: SweepJob) -> None:
    if not job.running:
        raise SweepCancelled


def device_name(device: str) -> str:
    """What the CSV and charts call this machine's device."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return "CPU (Triton interpreter)"


@st.cache_data(max_entries=2048, show_spinner=False)
def measure(device: str, key: tuple, names: tuple[str, ...], warmup: int, iters: int,
            _on_progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Time implementations ``names`` against each other (interleaved rounds) at
    the configuration ``key`` on ``device``.

    The caller holds the run lock. ``_on_progress(done, total)`` (not part of the
    cache key) follows the timed rounds; what it raises ends the timing, and
    nothing is cached. Returns one row of
    :meth:`~paged_attention.results.BenchResult.row` per name, in order, with
    ``samples`` and ``measured_at`` (:func:`_now`, when the timing finished): a
    later call served from the cache returns the same time.
    """
    config = DecodeConfig(**dict(key))
    inputs, reference = inputs_slot().get(config)
    results = benchmark_implementations(list(names), inputs, warmup=warmup, iters=iters, reference=reference,
                                        on_progress=_on_progress)
    measured_at = _now()
    return pd.DataFrame([{**r.row(), "samples": len(r.samples_ms), "measured_at": measured_at} for r in results])


def _now() -> str:
    """The time now, UTC, ISO 8601 to the microsecond (so strings compare in time order)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _measure_point(job: SweepJob, config: DecodeConfig, names: list[str]) -> dict[str, dict | Exception]:
    """Each name's result row at ``config``, timed together; when that raises
    (other than out of memory), each is timed alone, so the implementation that
    failed gets its own exception and the others their rows. A row measured
    before this call came from :func:`measure`'s cache: its ``cached`` is True."""
    key = config_key(config)
    asked_at = _now()

    def rows(frame: pd.DataFrame) -> list[dict]:
        return [{**row, "cached": row["measured_at"] < asked_at} for row in frame.to_dict("records")]

    def timed(names: tuple[str, ...]) -> pd.DataFrame:
        return measure(job.device_name, key, names, job.warmup, job.iters, _on_progress=lambda *_: _check(job))

    try:
        return {row["name"]: row for row in rows(timed(tuple(names)))}
    except (torch.cuda.OutOfMemoryError, SweepCancelled):
        raise
    except Exception:
        if len(names) == 1:
            raise
    out: dict[str, dict | Exception] = {}
    for name in names:
        try:
            out[name] = rows(timed((name,)))[0]
        except (torch.cuda.OutOfMemoryError, SweepCancelled):
            raise
        except Exception as exc:  # one implementation failing must not end the sweep
            out[name] = exc
    return out


def _plain(row: dict) -> SimpleNamespace:
    return SimpleNamespace(**{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()})


def _free_bytes(config: DecodeConfig) -> int | None:
    """Free GPU memory once this point's inputs are in place (None on the CPU)."""
    if not config.device.startswith("cuda"):
        return None
    free, _ = torch.cuda.mem_get_info(torch.device(config.device))
    pending = 0 if inputs_slot().key == config else config.memory_bytes()
    return max(0, free - pending - GPU_HEADROOM_BYTES)


def _probe_ms(slot, config: DecodeConfig, budget_s: float) -> float:
    """Milliseconds of one naive call at ``config`` (:func:`~explorer.sweep.naive_budget.probe_ms`)."""
    inputs, _ = slot.get(config)
    run = prepare("naive", *inputs.args(), **inputs.kwargs())
    return probe_ms(lambda: time_calls(run, device=inputs.query.device, warmup=0, iters=1)[0], budget_s=budget_s)


def run_next_point(job: SweepJob, owner: str | None = None) -> None:
    """Time every implementation at the job's next point and record the rows.

    Called by the worker, one point at a time. ``owner`` is the session that
    started the sweep (for :func:`~ui.benchmark.acquire`: a wait behind its own
    earlier run is told apart from a wait behind another session's); while the
    run lock is busy, the job says what it waits for (:meth:`SweepJob.set_waiting`).

    The implementations of a point are timed against each other in interleaved
    rounds. A point that does not fit in GPU memory, or a CUDA out-of-memory
    error, ends the sweep (``job.state == "failed"``, with the message); an
    implementation that raises anything else gets a ``"failed"`` row and the sweep
    goes on.

    Raises
    ------
    SweepCancelled
        When the job was cancelled before or during the point (nothing recorded).
    """
    index = job.next_index
    value = job.value_at(index)
    config = job.config_at(index)
    common = dict(device_name=job.device_name, warmup=job.warmup, iters=job.iters)
    rows: list[dict] = []
    try:
        with exclusive_run(config.device, lambda: job.set_waiting("other"), lambda: job.set_waiting("own"),
                           owner=owner):
            job.set_waiting(None)
            _check(job)
            slot = inputs_slot()
            if slot.key != config:
                slot.release()
            try:
                check_fits(config)
            except BenchmarkRefused as exc:
                job.fail(f"Stopped at {job.axis} = {value:,}: {exc}", [
                    status_row(n, "refused", config, job.axis, value, note="not enough GPU memory", **common)
                    for n in job.names])
                return
            copy = copy_bandwidth(config.device)
            timed = list(job.names)
            if "naive" in timed:
                decision = naive_plan(config, budget_s=job.naive_budget_s, calls=job.calls, last=job.naive_last,
                                      free_bytes=_free_bytes(config))
                if decision.action == "probe":
                    decision = after_probe(_probe_ms(slot, config, job.naive_budget_s), budget_s=job.naive_budget_s,
                                           calls=job.calls)
                    _check(job)
                if decision.action == "skip":
                    timed.remove("naive")
            measured = _measure_point(job, config, timed) if timed else {}
            for name in job.names:
                if name not in measured:  # naive, over its budget
                    rows.append(status_row("naive", "skipped", config, job.axis, value, note=decision.reason,
                                           predicted_ms=decision.predicted_ms, copy_gbps=copy, **common))
                elif isinstance(measured[name], Exception):
                    exc = measured[name]
                    rows.append(status_row(name, "failed", config, job.axis, value,
                                           note=f"{type(exc).__name__}: {exc}", copy_gbps=copy, **common))
                else:
                    result = _plain(measured[name])
                    rows.append(result_row(result, config, job.axis, value, copy_gbps=copy, **common,
                                           measured_at=result.measured_at[:19] + "Z", cached=result.cached))
                    if name == "naive":
                        job.naive_last = (naive_cost(config), result.median_ms)
            job.record(rows)
    except BenchmarkOOM as exc:
        job.fail(f"At {job.axis} = {value:,}: {exc}", rows)


def _work(job: SweepJob, owner: str | None) -> None:
    """The worker thread: the job's points until it is done, cancelled or failed."""
    try:
        while job.running:
            run_next_point(job, owner)
    except SweepCancelled:
        pass
    except Exception as exc:  # the app must keep working whatever a run does
        job.fail(f"The sweep failed: {type(exc).__name__}: {exc}")
    finally:
        job.set_waiting(None)
        job.finish()


def start_sweep(job: SweepJob) -> None:
    """Put ``job`` in session state and start its worker thread (the Run button's
    callback does this)."""
    st.session_state[JOB] = job
    threading.Thread(target=_work, args=(job, session_id()), name="sweep", daemon=True).start()


def cancel_sweep() -> None:
    """The Cancel button's callback: the running sweep ends now, its points done kept."""
    job = st.session_state.get(JOB)
    if job is not None:
        job.cancel()


# -- on screen ----------------------------------------------------------------------

def axis_defaults(config: DecodeConfig, cpu: bool) -> None:
    """The axis picker's callback: the range and points of the axis now chosen."""
    ss = st.session_state
    low, high = sweep_grid.default_range(ss["sw_axis"], config, cpu)
    ss["sw_low"], ss["sw_high"] = low, high
    ss["sw_points"] = sweep_grid.default_points(ss["sw_axis"], low, high, cpu)


def seed_controls(config: DecodeConfig, cpu: bool) -> None:
    """On the page's first run in a session, the controls from the URL (``sw_axis``,
    ``sw_from``, ``sw_to``, ``sw_points``, ``sw_spacing``) over their defaults, the
    axis first (the range's defaults and limits depend on it); on every run, the
    notes on URL values it ignored."""
    ss = st.session_state
    if ss.get("sw_axis") in sweep_grid.AXES:
        show_url_notes("sweep")
    else:
        query = take_page_query("sweep")
        found, notes = read_page("sweep", query, {"sw_axis": "context_len"}, keys=("sw_axis",))
        ss["sw_axis"] = found.get("sw_axis", "context_len")
        axis_defaults(config, cpu)
        ss["sw_spacing"] = "log"
        keys = ("sw_low", "sw_high", "sw_points", "sw_spacing")
        limits = sweep_grid.AXIS_LIMITS[ss["sw_axis"]]
        found, more = read_page("sweep", query, {k: ss[k] for k in keys}, keys=keys,
                                bounds={"sw_low": limits, "sw_high": limits})
        ss.update(found)
        if ("sw_low" in found or "sw_high" in found) and "sw_points" not in found:  # one per doubling, as by hand
            ss["sw_points"] = sweep_grid.default_points(ss["sw_axis"], ss["sw_low"], ss["sw_high"], cpu)
        show_url_notes("sweep", notes + more)
    ss.setdefault("sw_budget", DEFAULT_BUDGET_S)
    lo_limit, hi_limit = sweep_grid.AXIS_LIMITS[ss["sw_axis"]]
    for key in ("sw_low", "sw_high"):  # a value from another axis may lie outside this one's limits
        ss[key] = min(max(int(ss.get(key, lo_limit)), lo_limit), hi_limit)

def _snapshot(job: SweepJob | None) -> tuple | None:
    return None if job is None else (id(job), job.next_index, job.state)


def mark_drawn(job: SweepJob | None) -> None:
    """Note the job's state as the page draws it (call before drawing its rows):
    :func:`show_progress` reruns the page when the job has moved on since."""
    st.session_state[_DRAWN] = _snapshot(job)


def show_progress(job: SweepJob | None) -> None:
    """The sweep's progress bar, its queue note while it waits for the machine,
    and the message of a cancelled or failed sweep; while it runs, a fragment
    redrawn every :data:`POLL_S` seconds that reruns the page once a point is done."""
    if job is None:
        return

    @st.fragment(run_every=POLL_S if job.running else None)
    def progress() -> None:
        if st.session_state.get(_DRAWN) != _snapshot(job):
            st.rerun()  # a point is done, or the sweep is over: draw it
        now = view.progress(job)
        QueueNote("the sweep goes on when it ends").show(job.waiting, job.waited if job.running else None)
        st.progress(now.fraction, text=now.text)
        if now.state == "cancelled":
            st.warning(now.message, icon=":material/stop_circle:")
        elif now.state == "failed":
            st.error(now.message, icon=":material/memory:")

    progress()


def show_points(table: pd.DataFrame, columns: list[view.Column]) -> None:
    """The points table (:func:`explorer.sweep.view.points_table`)."""
    def config(c: view.Column):
        if c.kind == "number":
            return number_column(c.label, width=column_px(c.width), help=c.help)
        if c.kind == "integer":
            return st.column_config.NumberColumn(c.label, format="%d", width=column_px(c.width), help=c.help)
        return st.column_config.TextColumn(c.label, width=column_px(c.width), help=c.help)

    show_table(table, {c.key: config(c) for c in columns}, key="sw_table", height=min(720, 38 + 35 * len(table)))


def show_per_token(frame: pd.DataFrame) -> None:
    """For a sweep over the new tokens: the time per token
    (:func:`~explorer.sweep.token_figures.sweep_per_token_figure`) beside how to read
    it with the latency chart's time per step (:data:`~explorer.sweep.view.PER_TOKEN_NOTE`)."""
    if not (frame["axis"] == "query_lens").any():
        return
    chart, words = st.columns(2, gap="medium")
    show_chart(sweep_per_token_figure(frame), key="sw_per_token_chart", parent=chart, width="stretch")
    chart.caption("Each step's median latency over the new tokens it scores, every sequence's together.")
    words.markdown(view.PER_TOKEN_NOTE)
