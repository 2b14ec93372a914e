"""A running sweep and its rows: :class:`SweepJob` (timed point by point in a
worker thread while the page draws, cancelled at once), and the CSV the page offers for download
and accepts back for comparison (:data:`SWEEP_COLUMNS`, :func:`sweep_csv`,
:func:`read_sweep_csv`).

Every row is one (point, implementation): ``status`` is ``"ok"`` (timed),
``"skipped"`` (naive over its budget: ``predicted_ms`` says by how much),
``"failed"`` (the implementation raised) or ``"refused"`` (not enough GPU memory).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from explorer.formatting import count, format_bytes, format_number
from explorer.limits import MAX_CSV_BYTES, MAX_CSV_ROWS
from explorer.sweep.grid import AXES, AXIS_LIMITS, check_axis, point_config
from paged_attention import results
from paged_attention.config import DecodeConfig
from paged_attention.implementations import LABELS
from paged_attention.result_files import results_csv, schema_rows

#: Where a row comes from and which point it is (first), then the one result row
#: (:data:`paged_attention.results.RESULT_COLUMNS`), then the sweep's own columns:
#: the predicted time of a skipped point, whether a timing was reused from the
#: server's cache. The columns of a sweep's table and CSV, one row per (point,
#: implementation); in the table ``correct`` reads "yes", "NO" or "" and ``cached``
#: "yes" or "".
SWEEP_COLUMNS: tuple[str, ...] = ("source", "axis", "value", *results.RESULT_COLUMNS, "predicted_ms", "cached")
#: Columns an uploaded CSV must have; the others are filled with blanks (a CSV from
#: before ``measured_at`` and ``cached`` existed still loads), or as
#: :func:`paged_attention.result_files.schema_rows` derives them (``kv_dtype`` from
#: ``dtype``: before fp8 caches, the cache had the compute dtype).
REQUIRED_COLUMNS: tuple[str, ...] = ("axis", "value", "implementation", "status", "median_ms")
_NUMERIC = ("value", "predicted_ms", *(c for c, (kind, _) in results.COLUMNS.items() if kind in (int, float)))
_TEXT = ("source", "axis", "cached", *(c for c, (kind, _) in results.COLUMNS.items() if kind is str))


# -- rows --------------------------------------------------------------------------

def _options(config: DecodeConfig) -> dict:
    """The attention options of ``config`` as the keywords of a result row."""
    return dict(window=config.window, soft_cap=config.soft_cap, sinks=config.sinks)


def result_row(
    result, config: DecodeConfig, axis: str, value: int, *, copy_gbps: float | None, device_name: str,
    warmup: int, iters: int, measured_at: str = "", cached: bool = False,
) -> dict:
    """One ``"ok"`` row from a :class:`~paged_attention.results.BenchResult`
    (:func:`paged_attention.results.result_row`, at this point of the sweep).

    ``measured_at`` is when the timing was taken (ISO 8601, UTC), ``cached`` whether
    it was reused from an earlier sweep's measurement rather than timed for this one
    (the ``cached`` column holds ``"yes"`` or ``""``). The attention options
    ``config`` ran with fill ``window``, ``soft_cap`` and ``sinks``.
    """
    row = results.result_row(result, config, copy_gbps=copy_gbps, device_name=device_name, warmup=warmup,
                             iters=iters, measured_at=measured_at, **_options(config))
    return {"axis": axis, "value": int(value), **row, "correct": results.correct_text(row["correct"]),
            "predicted_ms": None, "cached": "yes" if cached else ""}


def status_row(
    name: str, status: str, config: DecodeConfig, axis: str, value: int, *, note: str,
    predicted_ms: float | None = None, copy_gbps: float | None = None, device_name: str = "",
    warmup: int = 0, iters: int = 0,
) -> dict:
    """A row without timings (:func:`paged_attention.results.status_row`):
    ``status`` is ``"skipped"``, ``"failed"`` or ``"refused"``; the attention
    options as in :func:`result_row`."""
    row = results.status_row(name, LABELS.get(name, name), status, config, note=note, copy_gbps=copy_gbps,
                             device_name=device_name, warmup=warmup, iters=iters, **_options(config))
    return {"axis": axis, "value": int(value), **row, "correct": "", "predicted_ms": predicted_ms, "cached": ""}


def cache_note(frame: pd.DataFrame) -> str | None:
    """What a sweep's ``frame`` (:data:`SWEEP_COLUMNS`) reused from the server's
    cache of measurements, or None when every point was timed for it, e.g.
    ``"2 of 6 points reused from this server's cache, measured at 06:12 UTC; ..."``.

    A point counts as reused when any of its rows is ``cached``; the times are those
    rows' ``measured_at``, as one minute or the first and the last.
    """
    points = frame.groupby("value")["cached"].apply(lambda c: (c == "yes").any())
    reused = int(points.sum())
    if not reused:
        return None
    stamps = pd.to_datetime(frame.loc[frame["cached"] == "yes", "measured_at"], utc=True, errors="coerce").dropna()
    minutes = sorted({t.strftime("%H:%M") for t in stamps})
    when = ("" if not minutes else f", measured at {minutes[0]} UTC" if len(minutes) == 1
            else f", measured between {minutes[0]} and {minutes[-1]} UTC")
    return (f"{reused} of {count(len(points), 'point')} reused from this server's cache{when}, not timed again for "
            "this sweep; **Clear cache** to re-time them.")


def shared_measurements(frame: pd.DataFrame, source: str, other: str) -> int:
    """Timed rows of ``source`` that are the very measurements of ``other`` in
    ``frame``: the same point and implementation with the same non-empty
    ``measured_at`` (an uploaded CSV of this session's own sweep, or of points
    it reused). Their time ratio is 1 by construction."""
    keys = ["value", "implementation", "measured_at"]
    timed = frame[(frame["status"] == "ok") & (frame["measured_at"].fillna("") != "")]
    mine = timed[timed["source"] == source][keys]
    theirs = timed[timed["source"] == other][keys].drop_duplicates()
    return len(mine.merge(theirs, on=keys))


def per_token_ms(frame: pd.DataFrame, column: str = "median_ms") -> pd.Series:
    """Time per new token of each row of ``frame`` (:data:`SWEEP_COLUMNS`), in ms:
    ``column`` (a time per step: ``median_ms``, ``p20_ms``, ``predicted_ms``, ...)
    over the step's ``query_tokens`` (every sequence's new tokens together). NaN
    where either is missing (a row of a file that predates ``query_tokens`` has it
    filled as its batch size on reading)."""
    tokens = pd.to_numeric(frame["query_tokens"], errors="coerce")
    return pd.to_numeric(frame[column], errors="coerce") / tokens.where(tokens > 0)


def rows_frame(rows: Iterable[Mapping], source: str) -> pd.DataFrame:
    """Rows as a DataFrame with exactly :data:`SWEEP_COLUMNS` (``source`` set)."""
    frame = pd.DataFrame([{**r, "source": source} for r in rows], columns=list(SWEEP_COLUMNS))
    for col in _NUMERIC:
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


# -- a running sweep -----------------------------------------------------------------

@dataclass
class SweepJob:
    """A sweep in progress: its grid, the rows measured so far and its state.

    ``caches`` are the KV-cache dtypes timed at every axis value, in order (None:
    the compute dtype's; empty: ``base``'s own cache only); a *point* is one
    (axis value, cache) pair, :meth:`value_at` and :meth:`config_at` give its
    value and configuration.

    A worker thread times the points one after another (:meth:`config_at`, then
    :meth:`record`) while the page draws the rows done so far. :meth:`cancel` ends
    the sweep at once: the state is ``"cancelled"`` from that moment, the worker
    stops at its next look at :attr:`running` (between points, and between the
    timed rounds of a point), and a point still in flight when Cancel was pressed
    is dropped, so the sweep keeps exactly the points done at the press.
    Every change of state holds :attr:`lock`, so the page and the worker see one
    state; :meth:`finish` marks the worker gone (:meth:`wait`).

    Attributes
    ----------
    state : str
        ``"running"``, ``"done"``, ``"cancelled"`` or ``"failed"``.
    waiting : str or None
        While the worker waits for the machine: ``"other"`` (another session's run
        holds it) or ``"own"`` (this session's earlier run still finishing).
    waited : str or None
        The last value ``waiting`` had, kept once the wait is over.
    naive_last : (float, float) or None
        ``(naive_cost, median ms)`` of the last point where naive was timed, for
        :func:`naive_plan`.
    """

    base: DecodeConfig
    axis: str
    values: tuple[int, ...]
    names: tuple[str, ...]
    warmup: int
    iters: int
    naive_budget_s: float
    device_name: str
    rows: list[dict] = field(default_factory=list)
    next_index: int = 0
    state: str = "running"
    message: str = ""
    naive_last: tuple[float, float] | None = None
    caches: tuple[str | None, ...] = ()
    waiting: str | None = None
    waited: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_axis(self.axis)
        if not self.values:
            raise ValueError("a sweep needs at least one point")
        if not self.caches:
            self.caches = (self.base.kv_dtype,)

    @property
    def total(self) -> int:
        return len(self.values) * len(self.caches)

    def value_at(self, index: int) -> int:
        """The axis value of point ``index``."""
        return self.values[index // len(self.caches)]

    def cache_at(self, index: int) -> str | None:
        """The KV-cache dtype of point ``index`` (None: the compute dtype's)."""
        return self.caches[index % len(self.caches)]

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def calls(self) -> int:
        """Calls one measurement makes: warm-up, timed, and the accuracy check."""
        return self.warmup + self.iters + 1

    def config_at(self, index: int) -> DecodeConfig:
        config = point_config(self.base, self.axis, self.value_at(index))
        return config.with_(kv_dtype=self.cache_at(index)).validate()

    def record(self, rows: Sequence[Mapping]) -> bool:
        """Add the rows of the next point and move on (``"done"`` after the last).

        Returns False, recording nothing, when the sweep was cancelled or failed
        meanwhile (a point in flight at Cancel is dropped).

        Raises
        ------
        RuntimeError
            If the sweep is done: every point is recorded.
        """
        with self.lock:
            if self.state == "done" or self.next_index >= self.total:
                raise RuntimeError(f"the sweep is {self.state}; no point is pending")
            if not self.running:
                return False
            self.rows.extend(dict(r) for r in rows)
            self.next_index += 1
            if self.next_index >= self.total:
                self.state, self.message = "done", ""
            return True

    def set_waiting(self, waiting: str | None) -> None:
        """The worker waits for the machine (``"other"``, ``"own"``), or no longer (None)."""
        with self.lock:
            self.waiting = waiting
            if waiting is not None:
                self.waited = waiting

    def cancel(self) -> None:
        """End the sweep now, keeping the points done; the worker stops at its next check."""
        with self.lock:
            if self.running:
                self.state = "cancelled"
                self.waiting = None
                self.message = (f"Cancelled after {self.next_index} of {count(self.total, 'point')}." if self.next_index
                                else "Cancelled before the first point finished.")

    def fail(self, message: str, rows: Sequence[Mapping] = ()) -> None:
        """End the sweep with ``message``, keeping ``rows`` of the point that failed
        (unless it was cancelled first)."""
        with self.lock:
            if self.running:
                self.rows.extend(dict(r) for r in rows)
                self.state, self.message, self.waiting = "failed", message, None

    def finish(self) -> None:
        """The worker's last word: it has let go of the machine."""
        self._finished.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker has finished (:meth:`finish`); False on timeout."""
        return self._finished.wait(timeout)

    def frame(self, source: str = "this session") -> pd.DataFrame:
        with self.lock:
            rows = list(self.rows)
        return rows_frame(rows, source)


# -- CSV ---------------------------------------------------------------------------

def sweep_csv(frame: pd.DataFrame) -> str:
    """The CSV the page offers for download: :data:`SWEEP_COLUMNS`, written by
    :func:`paged_attention.result_files.results_csv`."""
    rows = frame.reindex(columns=list(SWEEP_COLUMNS)).to_dict("records")
    return results_csv(rows, leading=SWEEP_COLUMNS[:3])


def _cell(value) -> str:
    """A CSV cell as the file holds it, for an error message: ``inf``, ``2.5``,
    ``'abc'``, ``an empty cell`` (not NumPy's ``np.float64(inf)``)."""
    if isinstance(value, str):
        return repr(value) if value else "an empty cell"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    value = float(value)
    if np.isnan(value):
        return "an empty cell"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return format_number(value)


def read_sweep_csv(data: bytes | str, source: str) -> pd.DataFrame:
    """Parse and check a sweep CSV (one downloaded from the page, maybe from another
    machine or version).

    Parameters
    ----------
    data : bytes or str
        The file's contents.
    source : str
        Written into the ``source`` column (e.g. ``"uploaded: h200.csv"``).

    Returns
    -------
    DataFrame
        Columns :data:`SWEEP_COLUMNS`; missing optional columns are blank.

    Raises
    ------
    ValueError
        With a message fit for the page: not UTF-8 text, not a CSV, too large,
        empty, missing required columns, more than one axis or an unknown one,
        values that are not whole numbers within the axis's :data:`AXIS_LIMITS`,
        unknown implementations or statuses, or a timed row without a positive,
        finite ``median_ms``. Other numeric columns that are not finite are read
        as missing.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_CSV_BYTES:
            raise ValueError(f"the file is {format_bytes(len(data))}; sweep CSVs are at most {format_bytes(MAX_CSV_BYTES)}")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError("the file is not UTF-8 text; upload a CSV downloaded from this page") from None
    if not data.strip():
        raise ValueError("the file is empty")
    try:
        frame = pd.read_csv(io.StringIO(data))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise ValueError(f"the file is not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"the CSV lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"a sweep CSV has {', '.join(REQUIRED_COLUMNS)} and more"
        )
    if frame.empty:
        raise ValueError("the CSV has a header but no rows")
    if len(frame) > MAX_CSV_ROWS:
        raise ValueError(f"the CSV has {len(frame):,} rows; at most {MAX_CSV_ROWS:,} are read")

    axes = frame["axis"].dropna().astype(str).unique().tolist()
    if len(axes) != 1:
        raise ValueError(f"a sweep CSV varies one axis; this one has {axes or 'none'}")
    if axes[0] not in AXES:
        raise ValueError(f"unknown axis {axes[0]!r}; expected one of {', '.join(AXES)}")
    values = pd.to_numeric(frame["value"], errors="coerce")
    lo, hi = AXIS_LIMITS[axes[0]]
    # inf, NaN and 1e300 are numbers to pandas; only whole numbers within the axis's
    # limits are sweep points (and fit the int64 they become).
    bad = ~np.isfinite(values) | (values != values.round()) | (values < lo) | (values > hi)
    if bad.any():
        raise ValueError(f"every value must be a positive integer of at most {hi:,} (the limit for "
                         f"{AXES[axes[0]]}); found {_cell(frame['value'][bad].iloc[0])}")
    names = frame["implementation"].astype(object).fillna("").astype(str)
    unknown = sorted(set(names) - set(LABELS))
    if unknown:
        raise ValueError(f"unknown implementation {_cell(unknown[0])}; expected one of {', '.join(LABELS)}")
    statuses = frame["status"].astype(object).fillna("").astype(str)
    odd = sorted(set(statuses) - set(results.STATUSES))
    if odd:
        raise ValueError(f"unknown status {_cell(odd[0])}; expected one of {', '.join(results.STATUSES)}")
    median = pd.to_numeric(frame["median_ms"], errors="coerce")
    timed = statuses == "ok"
    if (~np.isfinite(median[timed]) | (median[timed] <= 0)).any():
        raise ValueError("every row with status ok needs a positive, finite median_ms")

    for col in set(_NUMERIC) & set(frame.columns):
        numbers = pd.to_numeric(frame[col], errors="coerce")
        frame[col] = numbers.where(np.isfinite(numbers))  # an inf elsewhere counts as missing
    frame["value"] = values.astype(np.int64)
    frame["implementation"] = names
    frame["status"] = statuses
    out = pd.DataFrame(schema_rows(frame.to_dict("records"), list(frame.columns))).reindex(columns=list(SWEEP_COLUMNS))
    for col in set(_NUMERIC) - {"value"}:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    out["label"] = [LABELS[n] for n in names]
    out["correct"] = out["correct"].map(results.correct_text)
    for col in _TEXT:
        out[col] = out[col].astype(object).fillna("").astype(str)
    out["source"] = source
    return out
