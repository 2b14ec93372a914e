"""The tables of recorded peer sets (a ``peers`` kind of
:mod:`explorer.bench.recorded`): our kernels against SDPA and FlashInfer, measured
by ``python -m benchmarks.decode_peers``, with their names as the page shows them.
"""

from __future__ import annotations

import re

import pandas as pd

from explorer.formatting import format_number, kv_dtype_label
from paged_attention import LABELS
from paged_attention.results import achieved_gbps, correct_text

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
    "flashinfer_xqa": "FlashInfer XQA",
    "flashinfer_cascade": "FlashInfer cascade",
}
#: What the short labels stand for, for a column's help.
LABELS_HELP = ("ours: this repository's kernels; prefix: the prefix-aware kernel, reading shared blocks once; "
               "SDPA, contiguous: SDPA on a cache that is already contiguous (no paging); FlashInfer, TC: "
               "FlashInfer's tensor-core decode; FlashInfer XQA: its XQA decode kernel; FlashInfer cascade: its "
               "two-level shared-prefix cascade")

#: How the configuration column reads, for its help.
CONFIGURATION_HELP = ("batch × tokens per sequence (a..b (mean m): ragged lengths); prefix P ×G: a shared prompt "
                      "of P tokens, in G groups; tail: a long-tailed draw of lengths; no prefix: the control that "
                      "shares nothing; block, heads, cache: where other than block size 16, 32 heads and the compute "
                      "dtype; window W, soft cap C, sinks: the attention options it ran with")


def _numbers(text: str) -> str:
    """``text`` (a recorded row's lengths, ``"236..5193 (mean 3642)"``) with each whole
    number written by :func:`~explorer.formatting.format_number`: ``"236..5,193 (mean 3,642)"``."""
    return re.sub(r"\d+", lambda m: format_number(int(m.group())), text)


def configuration(row, with_cache: bool = True) -> str:
    """How a peer row's configuration is named, short enough for a table column at
    1280 px, its numbers by :func:`~explorer.formatting.format_number`: ``"32 × 2,048"``
    (batch × tokens), ``"4 × 236..5,193 (mean 3,642)"`` (ragged), ``"64 × 8,448, prefix
    8,192 ×1"`` (a shared prefix of 8,192 tokens in one group), with a block size, head count or cache dtype other than the set's usual
    ones appended, and the attention options it ran with (``", window 1024"``,
    ``", soft cap 50"``, ``", sinks"``; :data:`CONFIGURATION_HELP`). ``with_cache=False``
    leaves the cache dtype out (a table of one cache dtype says it once)."""
    lengths = row.get("context_lens") or str(row["context_len"])
    uniform = str(lengths) == str(row["context_len"])
    text = f"{format_number(int(row['batch_size']))} × " + (
        format_number(int(row["context_len"])) if uniform else _numbers(str(lengths)))
    prefix = row.get("shared_prefix")
    if str(row.get("kind", "")) == "prefix" and prefix is not None and pd.notna(prefix):
        groups = int(row.get("prefix_groups", 1) or 1)
        text += ", no prefix" if int(prefix) == 0 else f", prefix {format_number(int(prefix))} ×{format_number(groups)}"
    if str(row.get("kind", "")) == "long-tail":
        text += ", tail"
    if int(row["block_size"]) != 16:
        text += f", block {format_number(int(row['block_size']))}"
    if int(row["num_heads"]) != 32:
        text += f", {format_number(int(row['num_heads']))} heads"
    kv = row.get("kv_dtype")
    if with_cache and kv is not None and pd.notna(kv) and str(kv) != str(row["dtype"]):
        text += f", {kv_dtype_label(str(kv))} cache"
    window, cap = row.get("window"), row.get("soft_cap")
    if window is not None and pd.notna(window):
        text += f", window {format_number(int(window))}"
    if cap is not None and pd.notna(cap):
        text += f", soft cap {format_number(float(cap))}"
    sinks = row.get("sinks")
    if sinks is not None and pd.notna(sinks) and bool(sinks):
        text += ", sinks"
    return text


def table_choices(peers) -> list[tuple[str, str]]:
    """The ``(dtype, kv_dtype)`` pairs of a recorded peer set, in its order: one
    table each (a set of the large configurations on a float16 and an fp8 cache
    has two)."""
    t = peers.table
    kv = t["kv_dtype"].where(t["kv_dtype"].notna(), t["dtype"]) if "kv_dtype" in t else t["dtype"]
    return list(dict.fromkeys(zip(t["dtype"].astype(str), kv.astype(str))))


def choice_label(dtype: str, kv_dtype: str) -> str:
    """How a table choice reads: ``"float16"``, or ``"float16, fp8 e4m3 cache"``."""
    return dtype if kv_dtype == dtype else f"{dtype}, {kv_dtype_label(kv_dtype)} cache"


def peer_rows(peers, dtype: str | None = None, kv_dtype: str | None = None) -> pd.DataFrame:
    """The rows of one compute dtype (all when None), and of one KV-cache dtype
    (all when None), of a recorded peer set
    (:class:`explorer.bench.recorded.RecordedSet`) for a table.

    Returns
    -------
    pd.DataFrame
        ``configuration`` (:func:`configuration`, without the cache dtype when
        ``kv_dtype`` picks one), ``implementation`` (label), ``impl`` (key),
        ``gpu_time_ms``, ``call_ms``, ``gbps`` (from GPU time, on unique bytes:
        :func:`paged_attention.results.achieved_gbps`), ``pct_of_copy_bw`` (in %),
        ``max_abs_err`` (against the float64 reference; on an fp8 cache, the
        reference of the dequantized cache), ``correct`` ("yes" or "NO"), ``note``.
    """
    t = peers.table if dtype is None else peers.table[peers.table["dtype"] == dtype]
    if kv_dtype is not None:
        kv = t["kv_dtype"].where(t["kv_dtype"].notna(), t["dtype"]).astype(str)
        t = t[kv == kv_dtype]
    records = t.to_dict("records")
    return pd.DataFrame({
        "configuration": [configuration(row, with_cache=kv_dtype is None) for row in records],
        "implementation": t["implementation"].map(PEER_LABELS),
        "impl": t["implementation"],
        "gpu_time_ms": t["gpu_time_ms"].astype(float),
        "call_ms": t["median_ms"].astype(float),
        "gbps": [achieved_gbps(row, unique=True) for row in records],
        "pct_of_copy_bw": t["pct_of_copy_bw"].astype(float),
        "max_abs_err": pd.to_numeric(t["max_abs_err"], errors="coerce"),
        "correct": t["correct"].map(correct_text),
        "note": t["note"].fillna("").astype(str),
    }).reset_index(drop=True)


def fastest_correct(rows: pd.DataFrame) -> pd.Series:
    """Which rows of :func:`peer_rows` are the fastest correct one of their
    configuration (bold in the table): a kernel outside the tolerance, such as XQA
    on an fp8 cache, is never the winner however fast it is."""
    times = rows["gpu_time_ms"].where(rows["correct"] == correct_text(True))
    return times.groupby(rows["configuration"]).transform("min") == times


def peer_notes(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """The notes of :func:`peer_rows`' ``rows``, for under their table (a column of them
    ran past a 1280 px window): ``(who, note)`` per implementation and note, in the rows'
    order. ``who`` is the implementation's label where every one of its rows has a note
    and this one is its most frequent (``("FlashInfer XQA", "backend xqa")``), else the
    label at the configurations of the rows with it, joined by ``" · "``
    (``("FlashInfer XQA at 32 × 2,048, block 256, 16 heads", "XQA takes pages of ...")``)."""
    noted = rows[rows["note"] != ""]
    out: list[tuple[str, str]] = []
    for (label, note), group in noted.groupby(["implementation", "note"], sort=False):
        mine = rows[rows["implementation"] == label]
        counts = mine["note"].value_counts()
        general = (mine["note"] != "").all() and counts.index[0] == note
        where = " · ".join(dict.fromkeys(group["configuration"]))
        out.append((label if general else f"{label} at {where}", note))
    return out
