"""Benchmark runs recorded on a GPU and shipped with the app, for machines without
one: the one loader of every recorded kind.

A recorded set is two files of one name, a results CSV and its sidecar JSON
(:mod:`paged_attention.result_files`), in the folder of its kind (:data:`FOLDERS`):

* ``classic``: the classic table of ``python -m paged_attention.bench``, one row per
  (block layout, batch size, context length, implementation), written by
  ``python -m benchmarks.record``;
* ``peers``: a ``python -m benchmarks.decode_peers`` run, our kernels against SDPA
  and FlashInfer; the sidecar's ``set`` names which (:data:`SETS`);
* ``sweep``: a sweep in the Sweep page's CSV format, read with
  :func:`explorer.sweep.runs.read_sweep_csv` so that it passes every rule an
  uploaded sweep does; the sidecar's ``axis`` names what it varies.

Sets written before the one result schema load too
(:data:`paged_attention.result_files.LEGACY_COLUMNS`). These numbers are never
mixed with a live run: the pages show them in their own section, labelled as
recorded.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from explorer.bench.recorded_peers import PEER_LABELS
from explorer.formatting import format_number
from explorer.sweep.grid import AXES
from explorer.sweep.runs import read_sweep_csv
from paged_attention import BLOCK_LAYOUTS, LABELS, DecodeConfig
from paged_attention.result_files import KINDS, read_results, read_sidecar, versions
from paged_attention.results import achieved_gbps, config_fields, correct_text

#: Where the shipped sets live.
RECORDED_DIR = Path(__file__).resolve().parent / "recorded_runs"
#: The folder of each kind (looked up at each load, so tests can point one elsewhere).
FOLDERS: dict[str, Path] = {"classic": RECORDED_DIR, "peers": RECORDED_DIR / "peers",
                            "sweep": RECORDED_DIR / "sweeps"}
#: Keys every sidecar has, and those of each kind.
REQUIRED_META = ("gpu", "driver", "cuda", "torch", "triton", "date", "copy_gbps", "command")
KIND_META: dict[str, tuple[str, ...]] = {"classic": (), "peers": ("set",), "sweep": ("axis",)}
#: ``decode_peers --set`` values, in the order the page offers them, and their names.
SETS: dict[str, str] = {"classic": "peers", "ragged": "ragged", "prefix": "shared prefix", "fp8": "fp8 cache"}
#: The ``source`` of a recorded sweep's rows: short, for legend entries; the GPU is
#: named once, in the charts' subtitle.
RECORDED_SOURCE = "recorded"
#: Columns with a positive number in every row of a kind, and in every timed row.
POSITIVE: dict[str, tuple[str, ...]] = {
    "classic": ("batch_size", "context_len", "num_heads", "num_kv_heads", "head_dim", "block_size"),
    "peers": ("batch_size", "context_len", "block_size", "num_heads", "head_dim"),
}
POSITIVE_TIMED: dict[str, tuple[str, ...]] = {"classic": ("median_ms", "gbps"), "peers": ("gpu_time_ms", "median_ms")}
#: What no two rows of a kind share.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "classic": ("block_layout", "batch_size", "context_len", "implementation"),
    "peers": ("kind", "dtype", "kv_dtype", "kv_scale", "batch_size", "context_lens", "block_size", "num_heads",
              "shared_prefix", "prefix_groups", "implementation"),
}


@dataclass(frozen=True)
class RecordedSet:
    """One recorded set: its rows and where and how they were measured.

    Attributes
    ----------
    name : str
        The files' common stem, e.g. ``"h200_2026-11-29"``.
    kind : str
        ``"classic"``, ``"peers"`` or ``"sweep"``.
    meta : dict
        The sidecar (:func:`paged_attention.result_files.sidecar`: ``gpu``,
        ``driver``, ``cuda``, ``torch``, ``triton``, ``peers``, ``date``,
        ``copy_gbps`` in GB/s, ``command``, and ``set`` or ``axis``, ...).
    table : pd.DataFrame
        The result rows (:data:`paged_attention.results.RESULT_COLUMNS` and the
        writer's own columns; ``correct`` a bool); a sweep's in
        :data:`explorer.sweep.runs.SWEEP_COLUMNS`, ``source``
        :data:`RECORDED_SOURCE`.
    """

    name: str
    kind: str
    meta: dict
    table: pd.DataFrame

    def versions(self) -> str:
        """One line naming the GPU, driver, CUDA, torch, Triton, peer libraries and date."""
        return versions(self.meta)

    @property
    def configs(self) -> list[tuple[int, int]]:
        """The (batch_size, context_len) pairs, in the file's order."""
        pairs = zip(self.table["batch_size"].astype(int), self.table["context_len"].astype(int))
        return list(dict.fromkeys(pairs))

    @property
    def layouts(self) -> list[str]:
        """The block layouts measured, in the file's order."""
        return list(dict.fromkeys(self.table["block_layout"]))

    @property
    def axis(self) -> str:
        """What a recorded sweep varies (a key of :data:`explorer.sweep.grid.AXES`)."""
        return self.meta["axis"]


def shown_command(command: str) -> str:
    """A sidecar's ``command`` as a page shows it: without its ``--out`` argument,
    the recording machine's own folder, which says nothing to a reader
    (``"python -m benchmarks.record --sweeps --out /root/out/sweeps"`` ->
    ``"python -m benchmarks.record --sweeps"``); every other argument kept."""
    return re.sub(r"\s+--out(?:=|\s+)\S+", "", command).strip()


def fail(path: Path, rule: str) -> None:
    """ValueError naming the file and the rule it breaks."""
    raise ValueError(f"{path.name}: {rule}")


def _check_meta(path: Path, meta: dict | None, kind: str) -> None:
    side = path.with_suffix(".json")
    if meta is None:
        fail(path, f"no metadata file {side.name} beside it")
    missing = [k for k in (*REQUIRED_META, *KIND_META[kind]) if k not in meta]
    if missing:
        fail(side, f"missing metadata {', '.join(missing)}")
    copy = meta["copy_gbps"]
    if isinstance(copy, bool) or not isinstance(copy, (int, float)) or not math.isfinite(copy) or copy <= 0:
        fail(side, f"copy_gbps must be a positive number of GB/s; got {copy!r}")
    if kind == "peers" and meta["set"] not in SETS:
        fail(side, f"set must be one of {', '.join(SETS)}; got {meta['set']!r}")
    if kind == "sweep" and meta["axis"] not in AXES:
        fail(side, f"axis must be one of {', '.join(AXES)}; got {meta['axis']!r}")


def _check_rows(path: Path, table: pd.DataFrame, kind: str) -> None:
    if table.empty:
        fail(path, "has no rows")
    known = LABELS if kind == "classic" else PEER_LABELS
    unknown = table[~table["implementation"].isin(list(known))]
    if not unknown.empty:
        names = sorted({key if isinstance(key, str) and key else str(label)
                        for key, label in zip(unknown["implementation"], unknown["label"])})
        fail(path, f"unknown implementation {', '.join(names)}; known: {', '.join(known)}")
    if kind == "classic":
        bad = sorted(set(table["block_layout"].astype(str)) - set(BLOCK_LAYOUTS))
        if bad:
            fail(path, f"block_layout must be one of {', '.join(BLOCK_LAYOUTS)}; got {', '.join(bad)}")
    timed = table["status"] == "ok"
    for columns, rows, where in ((POSITIVE[kind], table, "every row"),
                                 (POSITIVE_TIMED[kind], table[timed], "every timed row")):
        for col in columns:
            values = pd.to_numeric(rows[col], errors="coerce")
            if values.isna().any() or (values <= 0).any() or not values.map(math.isfinite).all():
                fail(path, f"{col} must be a positive number in {where}")
    gpu = pd.to_numeric(table["gpu_time_ms"], errors="coerce")
    if (gpu <= 0).any():
        fail(path, "gpu_time_ms must be a positive number or empty (not measured)")
    if table.loc[timed, "correct"].isna().any():
        fail(path, "correct must be True or False in every timed row")
    keys = [c for c in ROW_KEYS[kind] if c in table.columns]
    if table.duplicated(keys).any():
        fail(path, f"repeats a ({', '.join(keys)}) row")


def load_recorded_set(csv_path: str | Path, kind: str | None = None) -> RecordedSet:
    """Read and check one recorded set: ``csv_path`` and the JSON beside it.

    Parameters
    ----------
    csv_path : str or Path
        The set's CSV; its metadata is the ``.json`` of the same stem.
    kind : str, optional
        ``"classic"``, ``"peers"`` or ``"sweep"``; by default the sidecar's ``kind``
        (a classic or peer set from before the one schema is known by its columns).

    Returns
    -------
    RecordedSet

    Raises
    ------
    ValueError
        Naming the file and the rule broken: the sidecar is missing, is not a JSON
        object, lacks a key of :data:`REQUIRED_META` (or ``set``, ``axis`` of its
        kind), names another kind, has a ``copy_gbps`` that is not a positive
        number, a ``set`` not in :data:`SETS` or an ``axis`` not in
        :data:`explorer.sweep.grid.AXES`; the CSV is unreadable or empty, has a
        cell not of its column's type, names an unknown implementation or block
        layout, lacks a positive size or time (:data:`POSITIVE`,
        :data:`POSITIVE_TIMED`), a ``correct`` in a timed row, or repeats a row
        (:data:`ROW_KEYS`); a sweep breaks a rule of
        :func:`explorer.sweep.runs.read_sweep_csv`, varies another axis than its
        sidecar says, or times no point.
    """
    path = Path(csv_path)
    kind = kind or (read_sidecar(path) or {}).get("kind")
    if kind == "sweep":
        return _load_sweep(path)
    rows, meta = read_results(path)
    if meta is None:
        fail(path, f"no metadata file {path.with_suffix('.json').name} beside it")
    kind = kind or meta.get("kind")
    if kind not in KINDS:
        fail(path.with_suffix(".json"), f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if meta.get("kind", kind) != kind:
        fail(path.with_suffix(".json"), f"says kind {meta['kind']}, but the set was read as {kind}")
    _check_meta(path, meta, kind)
    table = pd.DataFrame(rows)
    _check_rows(path, table, kind)
    return RecordedSet(name=path.stem, kind=kind, meta=meta, table=table)


def _load_sweep(path: Path) -> RecordedSet:
    meta = read_sidecar(path)
    _check_meta(path, meta, "sweep")
    try:
        table = read_sweep_csv(path.read_bytes(), RECORDED_SOURCE)
    except ValueError as exc:
        fail(path, str(exc))
    if table["axis"].iloc[0] != meta["axis"]:
        fail(path, f"varies {table['axis'].iloc[0]}, but {path.with_suffix('.json').name} says {meta['axis']}")
    if not (table["status"] == "ok").any():
        fail(path, "times no point (no row with status ok)")
    return RecordedSet(name=path.stem, kind="sweep", meta=meta, table=table)


def _order(recorded: RecordedSet) -> tuple:
    within = {"peers": list(SETS).index(recorded.meta["set"]) if recorded.kind == "peers" else 0,
              "sweep": list(AXES).index(recorded.meta["axis"]) if recorded.kind == "sweep" else 0}
    return KINDS.index(recorded.kind), within.get(recorded.kind, 0)


def load_recorded(kinds: Iterable[str] = KINDS, folders: Mapping[str, str | Path] | None = None) -> list[RecordedSet]:
    """Every recorded set of ``kinds`` (one per CSV of each kind's folder): by kind,
    then peer sets in the order of :data:`SETS` and sweeps in that of
    :data:`explorer.sweep.grid.AXES`, newest date first within each; none where a
    folder does not exist.

    Parameters
    ----------
    kinds : iterable of str
        Of :data:`paged_attention.result_files.KINDS`.
    folders : mapping, optional
        A folder for some kinds, instead of theirs in :data:`FOLDERS`.

    Raises
    ------
    ValueError
        If any set is malformed (:func:`load_recorded_set`).
    """
    folders = {**FOLDERS, **(folders or {})}
    sets = [load_recorded_set(p, kind) for kind in kinds for p in sorted(Path(folders[kind]).glob("*.csv"))]
    sets.sort(key=lambda s: str(s.meta["date"]), reverse=True)
    return sorted(sets, key=_order)


# -- the classic table -------------------------------------------------------------

def matching_config(recorded: RecordedSet, config: DecodeConfig) -> tuple[int, int] | None:
    """The (batch_size, context_len) of ``recorded`` that ``config`` is, or None.

    ``config`` matches a row when its batch size and its one uniform context length
    are the row's, and so are its heads, KV heads, head_dim, block size, dtype,
    KV-cache dtype, shared prefix (a set from before shared prefixes shared
    none) and query tokens per sequence (one, in a set from before them); device,
    seed and layout aside.
    """
    if len(set(config.lengths)) != 1:
        return None
    want = config_fields(config)
    t = recorded.table
    match = pd.Series(True, index=t.index)
    for col in ("batch_size", "context_len", "num_heads", "num_kv_heads", "head_dim", "block_size", "dtype",
                "kv_dtype"):
        match &= t[col] == want[col]
    match &= t["shared_prefix"].fillna(0) == want["shared_prefix"]
    match &= t["query_lens"].replace("", "1").fillna("1").astype(str) == want["query_lens"]
    if not match.any():
        return None
    return int(t.loc[match, "batch_size"].iloc[0]), int(t.loc[match, "context_len"].iloc[0])


def recorded_rows(recorded: RecordedSet, layout: str) -> pd.DataFrame:
    """The rows of one layout for a table, with the bandwidth as the app reports it.

    Returns
    -------
    pd.DataFrame
        ``batch_size``, ``context_len``, ``configuration`` ("batch 2 × 60 tokens"),
        ``implementation`` (label), ``key`` (``naive``, ...), ``gpu_time_ms``,
        ``median_ms``, ``gbps`` (:func:`paged_attention.results.achieved_gbps`:
        from GPU time where measured, else from the call latency),
        ``pct_of_copy_bw`` (of the recorded copy bandwidth, in %), ``correct``
        ("yes" or "NO").
    """
    t = recorded.table[recorded.table["block_layout"] == layout]
    return pd.DataFrame({
        "batch_size": t["batch_size"].astype(int),
        "context_len": t["context_len"].astype(int),
        "configuration": [config_label(b, n) for b, n in zip(t["batch_size"], t["context_len"])],
        "implementation": t["label"],
        "key": t["implementation"],
        "gpu_time_ms": t["gpu_time_ms"].astype(float),
        "median_ms": t["median_ms"].astype(float),
        "gbps": [achieved_gbps(row) for row in t.to_dict("records")],
        "pct_of_copy_bw": t["pct_of_copy_bw"].astype(float),
        "correct": t["correct"].map(correct_text),
    }).reset_index(drop=True)


def config_label(batch_size: int, context_len: int) -> str:
    """How a recorded configuration is named, its numbers by
    :func:`~explorer.formatting.format_number`: ``"batch 8 × 8,192 tokens"``."""
    return f"batch {format_number(int(batch_size))} × {format_number(int(context_len))} tokens"

