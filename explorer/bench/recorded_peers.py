"""Peer comparisons recorded on a GPU and shipped with the app: our kernels against
SDPA and FlashInfer, measured by ``python -m benchmarks.decode_peers``.

A recorded peer set is two files of one name in :data:`PEERS_DIR`:

* ``<name>.csv``: ``decode_peers``' CSV unchanged, one row per (configuration,
  dtype, implementation), with the columns of :data:`REQUIRED_COLUMNS` (more, such
  as ``shared_prefix`` or ``note``, are kept);
* ``<name>.json``: where and how it was measured (:data:`REQUIRED_META`; ``set`` is
  one of :data:`SETS`, ``flashinfer`` the FlashInfer version where it ran).

``python -m benchmarks.record --peers <csv> --log <txt> --out ...`` converts a
``decode_peers`` run into such a pair. Like the classic sets of
:mod:`explorer.bench.recorded`, these are never mixed with a live run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from explorer.bench.recorded import RECORDED_DIR, read_sidecar
from explorer.bench.recorded import fail as _fail
from paged_attention import LABELS

#: Where the shipped peer sets live.
PEERS_DIR = RECORDED_DIR / "peers"
#: ``decode_peers --set`` values, in the order the page offers them, and their names.
SETS: dict[str, str] = {"classic": "peers", "ragged": "ragged", "prefix": "shared prefix"}
#: Columns every recorded peer CSV has (``decode_peers``' own).
REQUIRED_COLUMNS = ("kind", "dtype", "batch", "context", "lengths", "block_size", "num_heads", "head_dim", "impl",
                    "gpu_ms", "call_ms", "gbps", "frac_copy", "correct")
#: Keys every sidecar JSON has.
REQUIRED_META = ("set", "gpu", "driver", "cuda", "torch", "triton", "date", "copy_gbps", "command")
#: How the page names each ``decode_peers`` implementation: at most
#: :data:`~explorer.limits.MAX_LABEL_CHARS` characters, so that a table column of them fits at 1280 px.
PEER_LABELS: dict[str, str] = {
    "triton": f"{LABELS['triton']} (ours)",
    "triton_prefix": "Triton prefix (ours)",
    "triton_simple": "Triton simple grid",
    "vectorized": LABELS["vectorized"],
    "gather_sdpa": "gather + SDPA",
    "flex_paged": "FlexAttention, paged",
    "sdpa_contiguous": "SDPA, contiguous",
    "flashinfer": "FlashInfer",
    "flashinfer_tc": "FlashInfer, TC",
    "flashinfer_cascade": "FlashInfer cascade",
}
#: What the short labels stand for, for a column's help.
LABELS_HELP = ("ours: this repository's kernels; prefix: the prefix-aware kernel, reading shared blocks once; "
               "SDPA, contiguous: SDPA on a cache that is already contiguous (no paging); FlashInfer, TC: "
               "FlashInfer's tensor-core decode; FlashInfer cascade: its two-level shared-prefix cascade")


@dataclass(frozen=True)
class PeerSet:
    """One recorded peer set.

    Attributes
    ----------
    name : str
        The files' common stem, e.g. ``"h200_ragged_2026-12-01"``.
    meta : dict
        The sidecar JSON (:data:`REQUIRED_META`, ``title``, ``flashinfer``, ...).
    table : pd.DataFrame
        ``decode_peers``' rows: times in ms (``gpu_ms`` CUDA-graph GPU time,
        ``call_ms`` call latency), ``gbps`` from GPU time, ``frac_copy`` that over
        the copy bandwidth, ``correct`` a bool.
    """

    name: str
    meta: dict
    table: pd.DataFrame

    def versions(self) -> str:
        """One line naming the GPU, driver, CUDA, torch, Triton, FlashInfer and date."""
        m = self.meta
        flashinfer = f" · FlashInfer {m['flashinfer']}" if m.get("flashinfer") else ""
        return (f"{m['gpu']} · driver {m['driver']} · CUDA {m['cuda']} · torch {m['torch']} · "
                f"Triton {m['triton']}{flashinfer} · recorded {m['date']}")


def load_peer_set(csv_path: str | Path) -> PeerSet:
    """Read and check one recorded peer set: ``csv_path`` and the JSON beside it.

    Raises
    ------
    ValueError
        Naming the file and the rule broken: the sidecar is missing, not a JSON
        object, lacks a key of :data:`REQUIRED_META`, names a ``set`` not in
        :data:`SETS` or has a ``copy_gbps`` that is not a positive number; the CSV is
        unreadable or empty, lacks a column of :data:`REQUIRED_COLUMNS`, names an
        unknown implementation, has a non-positive size, time or bandwidth, a
        ``correct`` other than True/False, or repeats a (kind, dtype, kv_dtype,
        batch, lengths, block_size, num_heads, shared_prefix, prefix_groups, impl) row.
    """
    path, side, meta = read_sidecar(csv_path, REQUIRED_META)
    if meta["set"] not in SETS:
        _fail(side, f"set must be one of {', '.join(SETS)}; got {meta['set']!r}")

    try:
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        _fail(path, f"not a readable CSV ({exc})")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        _fail(path, f"missing column {', '.join(missing)}")
    if table.empty:
        _fail(path, "has no rows")
    bad = sorted(set(table["impl"].astype(str)) - set(PEER_LABELS))
    if bad:
        _fail(path, f"unknown implementation {', '.join(bad)}; known: {', '.join(PEER_LABELS)}")
    for col in ("batch", "context", "block_size", "num_heads", "head_dim", "gpu_ms", "call_ms", "gbps", "frac_copy"):
        values = pd.to_numeric(table[col], errors="coerce")
        if values.isna().any() or (values <= 0).any() or not values.map(math.isfinite).all():
            _fail(path, f"{col} must be a positive number in every row")
        table[col] = values
    flags = table["correct"].astype(str)
    bad = sorted(set(flags) - {"True", "False"})
    if bad:
        _fail(path, f"correct must be True or False; got {', '.join(bad)}")
    table["correct"] = flags == "True"
    keys = [c for c in ("kind", "dtype", "kv_dtype", "kv_scale", "batch", "lengths", "block_size", "num_heads",
                        "shared_prefix", "prefix_groups", "impl") if c in table.columns]
    if table.duplicated(keys).any():
        _fail(path, f"repeats a ({', '.join(keys)}) row")
    table[["batch", "context"]] = table[["batch", "context"]].astype(int)
    return PeerSet(name=path.stem, meta=meta, table=table)


def load_peer_sets(folder: str | Path | None = None) -> list[PeerSet]:
    """Every peer set in ``folder``, in the order of :data:`SETS`, newest date first
    within a set; none when the folder does not exist. ``folder`` defaults to
    :data:`PEERS_DIR` (looked up at the call, so tests can point it elsewhere).

    Raises
    ------
    ValueError
        If any set is malformed (:func:`load_peer_set`).
    """
    sets = [load_peer_set(p) for p in sorted(Path(PEERS_DIR if folder is None else folder).glob("*.csv"))]
    order = list(SETS)
    sets.sort(key=lambda s: str(s.meta["date"]), reverse=True)
    return sorted(sets, key=lambda s: order.index(s.meta["set"]))


#: How the configuration column reads, for its help.
CONFIGURATION_HELP = ("batch × tokens per sequence (a..b (mean m): ragged lengths); prefix P ×G: a shared prompt "
                      "of P tokens, in G groups; tail: a long-tailed draw of lengths; no prefix: the control that shares nothing; block, heads, cache: "
                      "where other than block size 16, 32 heads and the compute dtype")


def configuration(row: pd.Series) -> str:
    """How a peer row's configuration is named, short enough for a table column at
    1280 px: ``"32 × 2048"`` (batch × tokens), ``"4 × 236..5193 (mean 3642)"``
    (ragged), ``"64 × 8448, prefix 8192 ×1"`` (a shared prefix of 8,192 tokens in one
    group), with a block size, head count or cache dtype other than the set's usual
    ones appended (:data:`CONFIGURATION_HELP`)."""
    uniform = str(row["lengths"]) == str(row["context"])
    text = f"{int(row['batch'])} × " + (f"{int(row['context'])}" if uniform else f"{row['lengths']}")
    prefix = row.get("shared_prefix")
    if prefix is not None and pd.notna(prefix):
        groups = int(row.get("prefix_groups", 1) or 1)
        text += ", no prefix" if int(prefix) == 0 else f", prefix {int(prefix)} ×{groups}"
    if str(row.get("kind", "")) == "long-tail":
        text += ", tail"
    if int(row["block_size"]) != 16:
        text += f", block {int(row['block_size'])}"
    if int(row["num_heads"]) != 32:
        text += f", {int(row['num_heads'])} heads"
    kv = row.get("kv_dtype")
    if kv is not None and pd.notna(kv) and str(kv) != str(row["dtype"]):
        text += f", {kv} cache"
    return text


def peer_rows(peers: PeerSet, dtype: str | None = None) -> pd.DataFrame:
    """The rows of one compute dtype (all when None) for a table.

    Returns
    -------
    pd.DataFrame
        ``configuration`` (:func:`configuration`), ``implementation`` (label),
        ``impl`` (key), ``gpu_time_ms``, ``call_ms``, ``gbps`` (from GPU time),
        ``pct_of_copy_bw`` (in %), ``correct`` ("yes" or "NO"), ``note``.
    """
    t = peers.table if dtype is None else peers.table[peers.table["dtype"] == dtype]
    notes = t["note"].fillna("").astype(str) if "note" in t.columns else pd.Series("", index=t.index)
    return pd.DataFrame({
        "configuration": [configuration(row) for _, row in t.iterrows()],
        "implementation": t["impl"].map(PEER_LABELS),
        "impl": t["impl"],
        "gpu_time_ms": t["gpu_ms"],
        "call_ms": t["call_ms"],
        "gbps": t["gbps"],
        "pct_of_copy_bw": 100 * t["frac_copy"],
        "correct": t["correct"].map({True: "yes", False: "NO"}),
        "note": notes,
    }).reset_index(drop=True)
