"""Running a sweep from the app: one point per script run, under the benchmark lock.

The page keeps a :class:`~paged_attention.sweep.SweepJob` in session state. Each
script run draws the page from the rows done so far, then :func:`run_next_point`
times the next point and the page calls ``st.rerun()``. A Cancel button's callback
(:func:`cancel_sweep`) marks the job cancelled before the next run looks at it, so
pressing it stops the sweep after the point in flight, and keeps every point done.

* Each point takes the process-wide lock of :mod:`ui.benchmark` (the decode
  benchmark page's), so a sweep and a benchmark never time each other, and goes
  through the same memory check before any tensor is allocated.
* Each (device, configuration, implementation) is measured once per process:
  :func:`measure` is ``st.cache_data`` keyed on plain values, returning a
  one-row DataFrame, never tensors. Each row carries when it was measured, so a
  sweep that reuses it (another session's, or an earlier one) marks its rows
  ``cached`` and the page says so.
* The naive implementation gets a time budget per point
  (:func:`~paged_attention.sweep.naive_plan`); points over it are recorded as
  skipped, with the predicted time.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Callable

import pandas as pd
import streamlit as st
import torch

from explorer.sweep.naive_budget import after_probe, naive_cost, naive_plan
from explorer.sweep.runs import SweepJob, result_row, status_row
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
)
from ui.data import config_key

#: Session-state key of the current sweep.
JOB = "sweep_job"


def device_name(device: str) -> str:
    """What the CSV and charts call this machine's device."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return "CPU (Triton interpreter)"


@st.cache_data(max_entries=2048, show_spinner=False)
def measure(device: str, key: tuple, names: tuple[str, ...], warmup: int, iters: int) -> pd.DataFrame:
    """Time implementations ``names`` against each other (interleaved rounds) at
    the configuration ``key`` on ``device``.

    The caller holds the run lock. Returns one row of
    :meth:`~paged_attention.results.BenchResult.row` per name, in order, with
    ``samples`` and ``measured_at`` (:func:`_now`, when the timing finished): a
    later call served from the cache returns the same time.
    """
    config = DecodeConfig(**dict(key))
    inputs, reference = inputs_slot().get(config)
    results = benchmark_implementations(list(names), inputs, warmup=warmup, iters=iters, reference=reference)
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

    try:
        frame = measure(job.device_name, key, tuple(names), job.warmup, job.iters)
        return {row["name"]: row for row in rows(frame)}
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception:
        if len(names) == 1:
            raise
    out: dict[str, dict | Exception] = {}
    for name in names:
        try:
            out[name] = rows(measure(job.device_name, key, (name,), job.warmup, job.iters))[0]
        except torch.cuda.OutOfMemoryError:
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
    """Milliseconds of one naive call at ``config``: the faster of two, since a
    process's first call pays one-time costs; one only, if it alone is over budget."""
    inputs, _ = slot.get(config)
    run = prepare("naive", *inputs.args(), **inputs.kwargs())
    first = time_calls(run, device=inputs.query.device, warmup=0, iters=1)[0]
    if first > budget_s * 1e3:
        return first
    return min(first, time_calls(run, device=inputs.query.device, warmup=0, iters=1)[0])


def _own_run_finishing() -> None:
    st.info("Your previous run (on this page or another) is still finishing; the sweep goes on when it ends.",
            icon=":material/hourglass_top:")


def run_next_point(
    job: SweepJob, on_wait: Callable[[], None], on_own_wait: Callable[[], None] = _own_run_finishing
) -> None:
    """Time every implementation at the job's next point and record the rows.

    The caller holds ``job.lock``. ``on_wait`` and ``on_own_wait`` are
    :func:`~ui.benchmark.acquire`'s: another session's run, or this session's
    own earlier run (stopped by a click), holds the benchmark lock.

    The implementations of a point are timed against each other in interleaved
    rounds. A point that does not fit in GPU memory, or a CUDA out-of-memory
    error, ends the sweep (``job.state == "failed"``, with the message); an
    implementation that raises anything else gets a ``"failed"`` row and the sweep
    goes on.
    """
    index = job.next_index
    value = job.value_at(index)
    config = job.config_at(index)
    common = dict(device_name=job.device_name, warmup=job.warmup, iters=job.iters)
    rows: list[dict] = []
    try:
        with exclusive_run(config.device, on_wait, on_own_wait):
            slot = inputs_slot()
            if slot.key != config:
                slot.release()
            try:
                check_fits(config)
            except BenchmarkRefused as exc:
                job.rows.extend(
                    status_row(n, "refused", config, job.axis, value, note="not enough GPU memory", **common)
                    for n in job.names
                )
                job.fail(f"Stopped at {job.axis} = {value:,}: {exc}")
                return
            copy = copy_bandwidth(config.device)
            timed = list(job.names)
            if "naive" in timed:
                decision = naive_plan(config, budget_s=job.naive_budget_s, calls=job.calls, last=job.naive_last,
                                      free_bytes=_free_bytes(config))
                if decision.action == "probe":
                    decision = after_probe(_probe_ms(slot, config, job.naive_budget_s), budget_s=job.naive_budget_s,
                                           calls=job.calls)
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
        job.rows.extend(rows)
        job.fail(f"At {job.axis} = {value:,}: {exc}")


def cancel_sweep() -> None:
    """The Cancel button's callback: the running sweep stops before its next point."""
    job = st.session_state.get(JOB)
    if job is not None:
        job.cancel()
