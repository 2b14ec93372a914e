"""Benchmark runs recorded on a GPU and shipped with the app, for machines without one.

A recorded set is two files of one name in :data:`RECORDED_DIR`:

* ``<name>.csv``: the classic table of ``python -m paged_attention.bench``, one row
  per (layout, batch_size, context_len, implementation), with the columns of
  :data:`REQUIRED_COLUMNS` (more, such as ``p20_ms``, are kept);
* ``<name>.json``: where and how it was measured (the keys of :data:`REQUIRED_META`
  and the shared ``config`` of every row, :data:`REQUIRED_CONFIG`).

``python -m benchmarks.record --out explorer/bench/recorded_runs/<name>.csv`` writes both
on a GPU host. These numbers are never mixed with a live run: the app shows them in
their own section, table and chart, labelled as recorded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from paged_attention import LABELS, DecodeConfig

#: Where the shipped sets live.
RECORDED_DIR = Path(__file__).resolve().parent / "recorded_runs"
#: Columns every recorded CSV has (the classic CLI's, plus the block layout).
REQUIRED_COLUMNS = ("layout", "batch_size", "context_len", "implementation", "median_ms", "gpu_time_ms", "GB/s",
                    "max_abs_err", "correct")
#: Keys every sidecar JSON has.
REQUIRED_META = ("gpu", "driver", "cuda", "torch", "triton", "date", "copy_gbps", "command", "config")
#: Keys of the sidecar's ``config``: what every row shares.
REQUIRED_CONFIG = ("num_heads", "num_kv_heads", "head_dim", "block_size", "dtype")
LAYOUTS = ("contiguous", "shuffled")
_KEYS = {label: key for key, label in LABELS.items()}


@dataclass(frozen=True)
class RecordedSet:
    """One recorded set: its rows and where and how they were measured.

    Attributes
    ----------
    name : str
        The files' common stem, e.g. ``"h200_2026-11-29"``.
    meta : dict
        The sidecar JSON (``gpu``, ``driver``, ``cuda``, ``torch``, ``triton``,
        ``date``, ``copy_gbps`` in GB/s, ``command``, ``config``, ...).
    table : pd.DataFrame
        The CSV's rows (:data:`REQUIRED_COLUMNS`, times in ms, ``GB/s`` from the
        call latency, ``correct`` "yes" or "NO").
    """

    name: str
    meta: dict
    table: pd.DataFrame

    @property
    def configs(self) -> list[tuple[int, int]]:
        """The (batch_size, context_len) pairs, in the file's order."""
        pairs = zip(self.table["batch_size"].astype(int), self.table["context_len"].astype(int))
        return list(dict.fromkeys(pairs))

    @property
    def layouts(self) -> list[str]:
        """The block layouts measured, in the file's order."""
        return list(dict.fromkeys(self.table["layout"]))

    def versions(self) -> str:
        """One line naming the GPU, driver, CUDA, torch, Triton and date."""
        m = self.meta
        return (f"{m['gpu']} · driver {m['driver']} · CUDA {m['cuda']} · torch {m['torch']} · "
                f"Triton {m['triton']} · recorded {m['date']}")


def fail(path: Path, rule: str) -> None:
    """ValueError naming the file and the rule it breaks."""
    raise ValueError(f"{path.name}: {rule}")


def read_sidecar(csv_path: str | Path, required_meta: tuple[str, ...]) -> tuple[Path, Path, dict]:
    """A recorded CSV's path, its JSON sidecar's path and the sidecar's object.

    Raises
    ------
    ValueError
        Naming the file: the sidecar is missing, not valid JSON, not an object,
        lacks a key of ``required_meta``, or has a ``copy_gbps`` that is not a
        positive number.
    """
    path = Path(csv_path)
    side = path.with_suffix(".json")
    if not side.is_file():
        fail(path, f"no metadata file {side.name} beside it")
    try:
        meta = json.loads(side.read_text())
    except json.JSONDecodeError as exc:
        fail(side, f"not valid JSON ({exc})")
    if not isinstance(meta, dict):
        fail(side, "must hold a JSON object")
    missing = [k for k in required_meta if k not in meta]
    if missing:
        fail(side, f"missing metadata {', '.join(missing)}")
    copy = meta["copy_gbps"]
    if isinstance(copy, bool) or not isinstance(copy, (int, float)) or not math.isfinite(copy) or copy <= 0:
        fail(side, f"copy_gbps must be a positive number of GB/s; got {copy!r}")
    return path, side, meta


def load_recorded_set(csv_path: str | Path) -> RecordedSet:
    """Read and check one recorded set: ``csv_path`` and the JSON beside it.

    Parameters
    ----------
    csv_path : str or Path
        The set's CSV; its metadata is the ``.json`` of the same stem.

    Returns
    -------
    RecordedSet

    Raises
    ------
    ValueError
        Naming the file and the rule broken: the sidecar is missing or is not a JSON
        object with :data:`REQUIRED_META` (and ``config`` with
        :data:`REQUIRED_CONFIG`, ``copy_gbps`` a positive number); the CSV is empty,
        lacks a column of :data:`REQUIRED_COLUMNS`, names an unknown layout or
        implementation, has a non-positive size or time, a ``correct`` other than
        yes/NO, or repeats a (layout, batch_size, context_len, implementation) row.
    """
    path, side, meta = read_sidecar(csv_path, REQUIRED_META)
    if not isinstance(meta["config"], dict) or any(k not in meta["config"] for k in REQUIRED_CONFIG):
        fail(side, f"config must give {', '.join(REQUIRED_CONFIG)}")

    try:
        table = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        fail(path, f"not a readable CSV ({exc})")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        fail(path, f"missing column {', '.join(missing)}")
    if table.empty:
        fail(path, "has no rows")
    bad = sorted(set(table["layout"]) - set(LAYOUTS))
    if bad:
        fail(path, f"layout must be one of {', '.join(LAYOUTS)}; got {', '.join(map(str, bad))}")
    bad = sorted(set(table["implementation"]) - set(_KEYS))
    if bad:
        fail(path, f"unknown implementation {', '.join(map(str, bad))}; known: {', '.join(_KEYS)}")
    for col in ("batch_size", "context_len", "median_ms", "GB/s"):
        values = pd.to_numeric(table[col], errors="coerce")
        if values.isna().any() or (values <= 0).any():
            fail(path, f"{col} must be a positive number in every row")
        table[col] = values
    gpu = pd.to_numeric(table["gpu_time_ms"], errors="coerce")
    if (gpu[table["gpu_time_ms"].notna()].isna() | (gpu <= 0)).any():
        fail(path, "gpu_time_ms must be a positive number or empty (not measured)")
    table["gpu_time_ms"] = gpu
    bad = sorted(set(table["correct"].astype(str)) - {"yes", "NO"})
    if bad:
        fail(path, f"correct must be yes or NO; got {', '.join(bad)}")
    if table.duplicated(["layout", "batch_size", "context_len", "implementation"]).any():
        fail(path, "repeats a (layout, batch_size, context_len, implementation) row")
    table[["batch_size", "context_len"]] = table[["batch_size", "context_len"]].astype(int)
    return RecordedSet(name=path.stem, meta=meta, table=table)


def load_recorded(folder: str | Path = RECORDED_DIR) -> list[RecordedSet]:
    """Every recorded set in ``folder`` (one per CSV), newest date first.

    Raises
    ------
    ValueError
        If any set is malformed (:func:`load_recorded_set`).
    """
    sets = [load_recorded_set(p) for p in sorted(Path(folder).glob("*.csv"))]
    return sorted(sets, key=lambda s: str(s.meta["date"]), reverse=True)


def matching_config(recorded: RecordedSet, config: DecodeConfig) -> tuple[int, int] | None:
    """The (batch_size, context_len) of ``recorded`` that ``config`` is, or None.

    ``config`` matches when its batch size and its one uniform context length are a
    recorded pair and its heads, KV heads, head_dim, block size and dtype are the
    set's (device, seed and layout aside), and so is its KV-cache dtype (a set
    without ``kv_dtype`` was recorded with a cache in its dtype, not fp8) and its
    shared prefix (a set without ``shared_prefix`` shared none).
    """
    shared = recorded.meta["config"]
    lengths = set(config.lengths)
    if len(lengths) != 1 or any(getattr(config, k) != shared[k] for k in REQUIRED_CONFIG):
        return None
    if config.kv_dtype != shared.get("kv_dtype") or config.shared_prefix != shared.get("shared_prefix", 0):
        return None
    pair = (config.batch_size, lengths.pop())
    return pair if pair in recorded.configs else None


def recorded_rows(recorded: RecordedSet, layout: str) -> pd.DataFrame:
    """The rows of one layout for a table, with the bandwidth as the app reports it.

    Returns
    -------
    pd.DataFrame
        ``batch_size``, ``context_len``, ``configuration`` ("batch 2 × 60 tokens"),
        ``implementation`` (label), ``key`` (``naive``, ...), ``gpu_time_ms``,
        ``median_ms``, ``gbps`` (from GPU time where measured, else from the call
        latency, like :func:`paged_attention.bench.achieved_gbps`),
        ``pct_of_copy_bw`` (``gbps`` over the set's ``copy_gbps``, in %),
        ``correct``.
    """
    t = recorded.table[recorded.table["layout"] == layout]
    # The CSV's GB/s comes from the call latency; the same bytes over the GPU time.
    nbytes = t["GB/s"] * t["median_ms"]
    gbps = (nbytes / t["gpu_time_ms"]).where(t["gpu_time_ms"].notna(), t["GB/s"])
    return pd.DataFrame({
        "batch_size": t["batch_size"],
        "context_len": t["context_len"],
        "configuration": [config_label(b, n) for b, n in zip(t["batch_size"], t["context_len"])],
        "implementation": t["implementation"],
        "key": t["implementation"].map(_KEYS),
        "gpu_time_ms": t["gpu_time_ms"],
        "median_ms": t["median_ms"],
        "gbps": gbps,
        "pct_of_copy_bw": 100 * gbps / float(recorded.meta["copy_gbps"]),
        "correct": t["correct"],
    }).reset_index(drop=True)


def config_label(batch_size: int, context_len: int) -> str:
    """How a recorded configuration is named: ``"batch 2 × 60 tokens"``."""
    return f"batch {batch_size} × {context_len:,} tokens"
