"""Sweeps recorded on a GPU and shipped with the app, for the Sweep page to draw
beside (never into) a live sweep.

A recorded sweep is two files of one name in :data:`SWEEPS_DIR`:

* ``<name>.csv``: a sweep in the page's own CSV format (:data:`explorer.sweep.runs.SWEEP_COLUMNS`,
  read with :func:`explorer.sweep.runs.read_sweep_csv`, so it passes every rule an
  uploaded sweep does);
* ``<name>.json``: where and how it was measured (:data:`REQUIRED_META`).

``python -m benchmarks.record --sweeps --out explorer/bench/recorded_runs/sweeps`` writes
such pairs on a GPU host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from explorer.bench.recorded import RECORDED_DIR, read_sidecar
from explorer.bench.recorded import fail as _fail
from explorer.sweep.grid import AXES
from explorer.sweep.runs import read_sweep_csv

#: Where the shipped sweeps live.
SWEEPS_DIR = RECORDED_DIR / "sweeps"
#: Keys every sidecar JSON has.
REQUIRED_META = ("gpu", "driver", "cuda", "torch", "triton", "date", "copy_gbps", "axis", "command")


@dataclass(frozen=True)
class RecordedSweep:
    """One recorded sweep.

    Attributes
    ----------
    name : str
        The files' common stem, e.g. ``"h200_2026-12-01_context_len"``.
    meta : dict
        The sidecar JSON (:data:`REQUIRED_META`, ``config``, ``elapsed_s``, ...).
    frame : pd.DataFrame
        :func:`explorer.sweep.runs.read_sweep_csv`'s frame; its ``source`` is
        :attr:`source` (how the charts name it).
    """

    name: str
    meta: dict
    frame: pd.DataFrame

    @property
    def source(self) -> str:
        return source_name(self.meta["gpu"])

    @property
    def axis(self) -> str:
        return self.meta["axis"]

    def versions(self) -> str:
        """One line naming the GPU, driver, CUDA, torch, Triton and date."""
        m = self.meta
        return (f"{m['gpu']} · driver {m['driver']} · CUDA {m['cuda']} · torch {m['torch']} · "
                f"Triton {m['triton']} · recorded {m['date']}")


#: The ``source`` of a recorded sweep's rows: short, for legend entries; the GPU is
#: named once, in the charts' subtitle (:func:`recorded_note`).
RECORDED_SOURCE = "recorded"


def source_name(gpu: str) -> str:
    """The ``source`` of a recorded sweep's rows, as charts and tables show it
    (:data:`RECORDED_SOURCE`, whatever the GPU: the subtitle names it)."""
    return RECORDED_SOURCE


def recorded_note(gpu: str, beside: bool) -> str:
    """The chart subtitle's words naming the GPU once: ``"dashed: recorded on NVIDIA H200"``
    beside this session's sweep, else ``"recorded on NVIDIA H200"``."""
    return f"{'dashed: ' if beside else ''}recorded on {gpu}"


#: What the caption compares between a recorded sweep and this session's: the
#: frame's column, the JSON config's key, and how a difference reads.
SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("batch_size", "batch_size", "batch {} vs {}"),
    ("context_len", "context_lens", "context {} vs {}"),
    ("num_heads", "num_heads", "{} vs {} heads"),
    ("num_kv_heads", "num_kv_heads", "{} vs {} KV heads"),
    ("head_dim", "head_dim", "head_dim {} vs {}"),
    ("block_size", "block_size", "block size {} vs {}"),
    ("dtype", "dtype", "{} vs {}"),
    ("kv_dtype", "kv_dtype", "{} vs {} cache"),
    ("block_layout", "block_layout", "{} vs {} block table"),
)


def _one(frame: pd.DataFrame, column: str):
    """The one value ``column`` holds in ``frame`` (as text), or None."""
    if frame is None or column not in frame.columns:
        return None
    values = {str(v) for v in frame[column].dropna() if str(v) != ""}
    return values.pop() if len(values) == 1 else None


def _text(value) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{int(number):,}" if number.is_integer() else f"{number:g}"


def setting_differences(rec: RecordedSweep, mine: pd.DataFrame) -> list[str]:
    """The settings (other than the swept axis) in which ``rec`` and this session's
    sweep ``mine`` differ, recorded first: ``["batch 8 vs 4", "32 vs 4 heads"]``.
    The recorded value comes from the JSON's ``config``, else from its rows; this
    session's from its rows (the sweep's config). Settings either lacks are left out."""
    config = rec.meta.get("config") or {}
    out = []
    for column, key, text in SETTINGS:
        if column == rec.axis:
            continue
        ours = config.get(key, config.get(column))
        ours = str(ours) if ours is not None else _one(rec.frame, column)
        theirs = _one(mine, column)
        if ours is None or theirs is None or _text(ours) == _text(theirs):
            continue
        out.append(text.format(_text(ours), _text(theirs)))
    return out


def shared_points(a: pd.DataFrame, b: pd.DataFrame) -> list[float]:
    """Axis values at which some implementation was timed (status ok) in both frames."""
    def timed(frame):
        ok = frame[frame["status"] == "ok"]
        return {(str(i), float(v)) for i, v in zip(ok["implementation"], ok["value"])}
    return sorted({v for _, v in timed(a) & timed(b)})


def load_recorded_sweep(csv_path: str | Path) -> RecordedSweep:
    """Read and check one recorded sweep: ``csv_path`` and the JSON beside it.

    Raises
    ------
    ValueError
        Naming the file and the rule broken: the sidecar is missing, not a JSON
        object, lacks a key of :data:`REQUIRED_META`, has a ``copy_gbps`` that is
        not a positive number or an ``axis`` other than the CSV's; the CSV breaks a
        rule of :func:`explorer.sweep.runs.read_sweep_csv` or times no point.
    """
    path, side, meta = read_sidecar(csv_path, REQUIRED_META)
    if meta["axis"] not in AXES:
        _fail(side, f"axis must be one of {', '.join(AXES)}; got {meta['axis']!r}")
    try:
        frame = read_sweep_csv(path.read_bytes(), source_name(str(meta["gpu"])))
    except ValueError as exc:
        _fail(path, str(exc))
    if frame["axis"].iloc[0] != meta["axis"]:
        _fail(path, f"varies {frame['axis'].iloc[0]}, but {side.name} says {meta['axis']}")
    if not (frame["status"] == "ok").any():
        _fail(path, "times no point (no row with status ok)")
    return RecordedSweep(name=path.stem, meta=meta, frame=frame)


def load_recorded_sweeps(folder: str | Path | None = None) -> list[RecordedSweep]:
    """Every recorded sweep in ``folder``, in the order of :data:`explorer.sweep.grid.AXES`,
    newest date first within an axis; none when the folder does not exist.
    ``folder`` defaults to :data:`SWEEPS_DIR` (looked up at the call).

    Raises
    ------
    ValueError
        If any sweep is malformed (:func:`load_recorded_sweep`).
    """
    sweeps = [load_recorded_sweep(p) for p in sorted(Path(SWEEPS_DIR if folder is None else folder).glob("*.csv"))]
    sweeps.sort(key=lambda s: str(s.meta["date"]), reverse=True)
    order = list(AXES)
    return sorted(sweeps, key=lambda s: order.index(s.axis))
