"""The files that hold benchmark results: a CSV of result rows
(:data:`~paged_attention.results.RESULT_COLUMNS`) and the JSON sidecar beside it
(:func:`sidecar`: GPU, SM count, driver, CUDA, torch, Triton, peer versions, copy
bandwidth, command, date), their one writer (:func:`write_results`) and one reader
(:func:`read_results`).

The reader also reads the CSVs written before this schema, by the benchmark CLI
(``batch_size, implementation`` as its label, ``median_ms, gpu_time_ms, GB/s``,
``correct`` "yes"/"NO") and by ``benchmarks.decode_peers`` (``batch, impl, call_ms,
gpu_ms, gbps``, ``correct`` True/False): :data:`LEGACY_COLUMNS` maps their names onto
this schema's, and what they lacked is derived (bytes from bandwidth and time, the
bandwidths from bytes, the fraction of the copy bandwidth).
"""

from __future__ import annotations

import csv
import datetime
import importlib.metadata
import io
import json
import numbers
import subprocess
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch

from .implementations import LABELS
from .results import COLUMNS, RESULT_COLUMNS, achieved_gbps, gbps, parse_bool, pct_of_copy, present

# -- the sidecar -----------------------------------------------------------------

#: How :func:`versions` names a peer library of the sidecar's ``peers``.
PEER_NAMES: dict[str, str] = {"flashinfer": "FlashInfer"}
#: What a results CSV holds, the sidecar's ``kind``.
KINDS: tuple[str, ...] = ("classic", "peers", "sweep")


def driver_version() -> str:
    """The NVIDIA driver version from ``nvidia-smi``, or ``"unknown"`` without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def sidecar(
    *, kind: str, command: str, device: str = "cuda", copy_gbps: float | None = None,
    peers: Mapping[str, str] | None = None, **more,
) -> dict:
    """The JSON beside a results CSV: where and how it was measured.

    Parameters
    ----------
    kind : str
        What the CSV holds (:data:`KINDS`): ``"classic"`` (the benchmark CLI),
        ``"peers"`` (``benchmarks.decode_peers``), ``"sweep"``.
    command : str
        The command that measured it.
    device : str
        Where it ran: the GPU's name, SM count, memory and driver come from a CUDA
        device; on the CPU they read ``"cpu"`` or None.
    copy_gbps : float, optional
        The device's copy bandwidth measured in the same run, GB/s.
    peers : mapping, optional
        Versions of the other libraries timed, e.g. ``{"flashinfer": "0.7.4"}``.
    **more
        Further keys (``title``, ``config``, ``harness``, ``set``, ``axis``, ...).

    Returns
    -------
    dict
        ``format`` (2), ``kind``, ``gpu``, ``sm_count``, ``memory_mib``,
        ``driver``, ``cuda``, ``torch``, ``triton``, ``peers``, ``copy_gbps``,
        ``command``, ``date`` (the UTC day, ISO 8601) and ``more``.

    Raises
    ------
    ValueError
        If ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
    props = torch.cuda.get_device_properties(torch.device(device)) if cuda else None
    return {
        "format": 2, "kind": kind,
        "gpu": props.name if cuda else "cpu",
        "sm_count": props.multi_processor_count if cuda else None,
        "memory_mib": props.total_memory // 2**20 if cuda else None,
        "driver": driver_version() if cuda else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _package_version("triton"),
        "peers": dict(peers or {}),
        "copy_gbps": copy_gbps,
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        **more,
    }


def versions(meta: Mapping) -> str:
    """One line naming a sidecar's GPU, driver, CUDA, torch, Triton, peer libraries
    and date: ``"NVIDIA H200 · driver 580.159.04 · CUDA 13.0 · torch 2.11.0 · Triton
    3.6.0 · FlashInfer 0.7.4 · recorded 2026-12-01"``."""
    peers = "".join(f" · {PEER_NAMES.get(name, name)} {version}"
                    for name, version in (meta.get("peers") or {}).items() if version)
    return (f"{meta['gpu']} · driver {meta['driver']} · CUDA {meta['cuda']} · torch {meta['torch']} · "
            f"Triton {meta['triton']}{peers} · recorded {meta['date']}")


# -- writing ---------------------------------------------------------------------

def _cell(column: str, value) -> str:
    """``value`` as a CSV cell: empty for None or NaN, ``True``/``False`` in a bool
    column, a whole number without a decimal point in an int column."""
    if not present(value) or (isinstance(value, str) and value == ""):
        return ""
    kind = COLUMNS[column][0] if column in COLUMNS else None
    if kind is bool:
        return str(parse_bool(value))
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if kind is int or isinstance(value, numbers.Integral):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return str(value)


def results_csv(rows: Iterable[Mapping], *, leading: Sequence[str] = ()) -> str:
    """The CSV text of ``rows``: the columns ``leading``, then
    :data:`~paged_attention.results.RESULT_COLUMNS`, then the rows' other keys in
    the order first seen (a writer's own columns); a cell a row lacks is empty."""
    rows = list(rows)
    columns = list(dict.fromkeys([*leading, *RESULT_COLUMNS]))
    for row in rows:
        columns += [key for key in row if key not in columns]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(c, row.get(c)) for c in columns])
    return out.getvalue()


def write_results(rows: Iterable[Mapping], path: str | Path, meta: Mapping | None, *,
                  leading: Sequence[str] = ()) -> Path:
    """Write ``rows`` to the CSV ``path`` (:func:`results_csv`) and ``meta`` (a
    :func:`sidecar`) to the JSON of the same stem beside it (none when ``meta`` is
    None). Returns ``path``."""
    path = Path(path)
    path.write_text(results_csv(rows, leading=leading))
    if meta is not None:
        path.with_suffix(".json").write_text(json.dumps(dict(meta), indent=2, default=str) + "\n")
    return path


# -- reading ---------------------------------------------------------------------

#: Columns of the CSVs written before this schema, by their writer: old name -> this
#: schema's. ``bench``: ``python -m paged_attention.bench --csv`` (and the classic
#: sets of ``benchmarks.record``, which added ``layout``): ``implementation`` held
#: the label, ``GB/s`` the logical bytes over the call latency. ``peers``:
#: ``benchmarks.decode_peers``: ``gbps`` the unique bytes over the GPU time (the
#: call latency where no graph captured the call), ``error`` a failed row's
#: exception; its ``frac_copy`` (a fraction) and ``kv_mb``/``kv_unique_mb`` (K and
#: V only, MB) are read to derive the copy bandwidth and the logical bytes.
LEGACY_COLUMNS: dict[str, dict[str, str]] = {
    "bench": {"layout": "block_layout", "implementation": "label", "GB/s": "gbps",
              "GB/s (unique bytes)": "unique_gbps"},
    "peers": {"batch": "batch_size", "context": "context_len", "lengths": "context_lens", "impl": "implementation",
              "call_ms": "median_ms", "gpu_ms": "gpu_time_ms", "gbps": "gpu_unique_gbps", "error": "note"},
}
#: The legacy peers columns read to derive others, then dropped.
_PEERS_DERIVED = ("frac_copy", "kv_mb", "kv_unique_mb")
_KEYS = {label: key for key, label in LABELS.items()}
_TEXT_COLUMNS = [c for c, (kind, _) in COLUMNS.items() if kind is str]


def writer_of(header: Sequence[str]) -> str:
    """Which writer's names a CSV's ``header`` uses: ``"peers"`` (``impl`` and
    ``frac_copy`` columns), ``"bench"`` (a ``GB/s`` column) or ``"schema"``
    (this one's; a sweep CSV from before it has these names)."""
    if {"impl", "frac_copy"} <= set(header):
        return "peers"
    return "bench" if "GB/s" in header else "schema"


def _typed(column: str, cell, where: str):
    """A cell of a schema column in its type: None (``""`` in a text column) where empty."""
    kind = COLUMNS[column][0]
    if kind is str:
        return str(cell) if present(cell) else ""
    if isinstance(cell, str):
        cell = cell.strip()
        if cell == "":
            return None
    elif not present(cell):
        return None
    try:
        if kind is bool:
            return parse_bool(cell)
        number = float(cell)
        if kind is int:
            if not number.is_integer():
                raise ValueError
            return int(number)
        return number
    except (TypeError, ValueError):
        what = {bool: "True or False", int: "a whole number", float: "a number"}[kind]
        raise ValueError(f"{column} must be {what}; {where} holds {cell!r}") from None


def _guessed(cell):
    """A cell of a writer's own column: a number where it reads as one, else its text."""
    if not isinstance(cell, str):
        return cell if present(cell) else None
    if cell == "":
        return None
    for kind in (int, float):
        try:
            return kind(cell)
        except ValueError:
            pass
    return cell


def _bytes(gbps_value, ms) -> int | None:
    """The bytes a bandwidth over a time stands for (the inverse of :func:`gbps`)."""
    if not present(gbps_value) or not present(ms):
        return None
    return round(gbps_value * ms * 1e6)


def schema_rows(raw: Iterable[Mapping], header: Sequence[str], meta: Mapping | None = None) -> list[dict]:
    """Rows of a results CSV of any version (cells as text, or as pandas read
    them) in this schema.

    Names are mapped (:data:`LEGACY_COLUMNS`) and cells typed
    (:data:`~paged_attention.results.COLUMNS`); then what an earlier file lacked
    is filled in: configuration columns from the sidecar's ``config``, the key
    from the label, ``kv_dtype`` from ``dtype``, ``sinks`` False (``window`` and
    ``soft_cap`` stay empty: none), ``query_lens`` ``"1"`` (and ``query_tokens``
    the batch size), ``context_lens`` from a uniform
    batch's length, ``status``, the bytes from a bandwidth and its time, the four
    bandwidths from the bytes (:func:`~paged_attention.results.gbps`), the copy
    bandwidth (from the sidecar) and the fraction of it
    (:func:`~paged_attention.results.pct_of_copy`).

    Raises
    ------
    ValueError
        Naming the column and the line of a cell not of its column's type.
    """
    writer = writer_of(header)
    names = LEGACY_COLUMNS.get(writer, {})
    config = dict((meta or {}).get("config") or {})
    copy = (meta or {}).get("copy_gbps")
    rows = []
    for line, cells in enumerate(raw, start=2):
        row, extra = dict.fromkeys(RESULT_COLUMNS), {}
        for key, cell in cells.items():
            if key is None:  # cells past the header's last column
                continue
            column = names.get(key, key)
            if column not in COLUMNS:
                extra[column] = _guessed(cell)
            elif column == "note" and row["note"]:
                row["note"] = "; ".join(filter(None, (row["note"], _typed(column, cell, f"line {line}"))))
            else:
                row[column] = _typed(column, cell, f"line {line}")
        failed = writer == "peers" and bool(_typed("note", cells.get("error"), f"line {line}"))
        rows.append({**_filled(row, extra, writer, config, copy, failed), **extra})
    return rows


def _filled(row: dict, extra: dict, writer: str, config: dict, copy, failed: bool) -> dict:
    row.update({c: "" for c in _TEXT_COLUMNS if row[c] is None})
    for key, value in config.items():
        if key in COLUMNS and row[key] in (None, ""):
            row[key] = _typed(key, value, "the sidecar's config")
    if row["implementation"] in (None, "") and row["label"]:
        row["implementation"] = _KEYS.get(row["label"])
    row["label"] = row["label"] or LABELS.get(row["implementation"] or "", "")
    row["kv_dtype"] = row["kv_dtype"] or row["dtype"]
    if row["sinks"] is None:  # a file from before the attention options ran without sinks
        row["sinks"] = False
    if not row["query_lens"]:  # nor several query tokens per sequence
        row["query_lens"] = "1"
    if not present(row["query_tokens"]) and row["query_lens"] == "1":
        row["query_tokens"] = row["batch_size"]  # one query row per sequence
    sizes = (row["tokens"], row["batch_size"], row["context_len"])
    if not row["context_lens"] and all(map(present, sizes)) and sizes[0] == sizes[1] * sizes[2]:
        row["context_lens"] = str(row["context_len"])  # a uniform batch
    timed = present(row["median_ms"]) or present(row["gpu_time_ms"])
    row["status"] = row["status"] or ("failed" if failed else "ok" if timed else "skipped")
    shared = present(row["shared_prefix"]) and row["shared_prefix"] > 0
    if writer == "peers":
        frac, kv_mb, kv_unique_mb = (extra.pop(key, None) for key in _PEERS_DERIVED)
        row["unique_bytes"] = _bytes(row["gpu_unique_gbps"], row["gpu_time_ms"])
        if present(row["unique_bytes"]) and present(kv_mb) and present(kv_unique_mb):
            row["bytes_moved"] = row["unique_bytes"] + round((kv_mb - kv_unique_mb) * 1e6)
        if present(frac) and frac > 0 and present(row["gpu_unique_gbps"]):
            row["copy_gbps"] = row["gpu_unique_gbps"] / frac
    if not present(row["bytes_moved"]):
        row["bytes_moved"] = _bytes(row["gbps"], row["median_ms"]) or _bytes(row["gpu_gbps"], row["gpu_time_ms"])
    if not present(row["unique_bytes"]):
        row["unique_bytes"] = (_bytes(row["unique_gbps"], row["median_ms"])
                               or _bytes(row["gpu_unique_gbps"], row["gpu_time_ms"])
                               or (None if shared else row["bytes_moved"]))
    if not present(row["bytes_moved"]) and not shared:
        row["bytes_moved"] = row["unique_bytes"]
    for column, nbytes, ms in (("gbps", "bytes_moved", "median_ms"), ("gpu_gbps", "bytes_moved", "gpu_time_ms"),
                               ("unique_gbps", "unique_bytes", "median_ms"),
                               ("gpu_unique_gbps", "unique_bytes", "gpu_time_ms")):
        if not present(row[column]):
            row[column] = gbps(row[nbytes], row[ms])
    if not present(row["copy_gbps"]) and isinstance(copy, (int, float)) and not isinstance(copy, bool):
        row["copy_gbps"] = float(copy)
    if not present(row["pct_of_copy_bw"]):
        row["pct_of_copy_bw"] = pct_of_copy(achieved_gbps(row, unique=True), row["copy_gbps"])
    return row


def legacy_sidecar(meta: Mapping, writer: str) -> dict:
    """A sidecar of any version with this schema's keys: an earlier ``flashinfer``
    version moves into ``peers``; a ``kind`` is given from the CSV's ``writer``
    (:func:`writer_of`) where it had none."""
    meta = dict(meta)
    if "peers" not in meta:
        flashinfer = meta.pop("flashinfer", None)
        meta["peers"] = {"flashinfer": flashinfer} if flashinfer else {}
    if "kind" not in meta and writer in ("bench", "peers"):
        meta["kind"] = "classic" if writer == "bench" else "peers"
    return meta


def read_sidecar(csv_path: str | Path, writer: str = "schema") -> dict | None:
    """The sidecar beside ``csv_path`` (the ``.json`` of its stem) with this
    schema's keys (:func:`legacy_sidecar`, for a CSV of ``writer``), or None where
    there is none.

    Raises
    ------
    ValueError
        Naming the file: not valid JSON, or not a JSON object.
    """
    side = Path(csv_path).with_suffix(".json")
    if not side.is_file():
        return None
    try:
        meta = json.loads(side.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{side.name}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{side.name}: must hold a JSON object")
    return legacy_sidecar(meta, writer)


def read_results(path: str | Path) -> tuple[list[dict], dict | None]:
    """Read a results CSV and its sidecar, of this schema or of an earlier one.

    Parameters
    ----------
    path : str or Path
        The CSV; the sidecar is the ``.json`` of the same stem, if there is one.

    Returns
    -------
    rows : list of dict
        :data:`~paged_attention.results.RESULT_COLUMNS` in their types (an empty
        cell None, or ``""`` in a text column), then the file's other columns (a
        number where the cell reads as one); an earlier schema's rows mapped and
        completed (:func:`schema_rows`).
    meta : dict or None
        The sidecar (:func:`legacy_sidecar`), None where there is none.

    Raises
    ------
    ValueError
        Naming the file: not a readable UTF-8 CSV, a sidecar that is not a JSON
        object, or a cell not of its column's type.
    """
    path = Path(path)
    try:
        reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
        header = list(reader.fieldnames or [])
        raw = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path.name}: not a readable CSV ({exc})") from None
    if not header:
        raise ValueError(f"{path.name}: not a readable CSV (no header)")
    meta = read_sidecar(path, writer_of(header))
    try:
        rows = schema_rows(raw, header, meta)
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None
    return rows, meta
