"""The Inside the kernel page's split table: which columns of
:attr:`~explorer.kernel.trace.KernelTrace.splits` it shows, under what labels, how
wide and in what number format, so that the whole table fits the page at 1280 px.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

#: Pixels of the page's main column on a 1280 px screen (beside the sidebar): the
#: split table's columns fit it side by side, none cut off.
MAIN_COLUMN_PX = 820


class TableColumn(NamedTuple):
    """A column of a table: its label, width in pixels and number format (None for text
    and integers)."""

    label: str
    width: int
    format: str | None = None
    help: str | None = None


#: The split table, in order: what the merge takes from each split. Its blocks,
#: tiles and lookups are the walk's (the tile table has them).
SPLIT_TABLE: dict[str, TableColumn] = {
    "split": TableColumn("split", 55),
    "pass": TableColumn("pass", 65),
    "sequences": TableColumn("sequences", 90, help="sequences whose rows the program holds in one tile"),
    "token_start": TableColumn("first token", 90),
    "token_end": TableColumn("end token", 85, help="one past the split's last token"),
    "m": TableColumn("m", 75, "%.4g", "the split's running max (log2 units)"),
    "l": TableColumn("l", 75, "%.4g", "the split's normalizer Σ 2^(s − m)"),
    "weight": TableColumn("weight", 75, "%.4g", "w = 2^(m − max m)"),
    "share": TableColumn("share", 75, "%.4g", "w·l / Σ w·l: its part of the softmax mass"),
    "err_vs_row": TableColumn("error vs row", 100, "%.4g", "max |acc / l − the row's exact answer|"),
}
#: Columns that only say something when a prefix pass ran.
PREFIX_COLUMNS = ("pass", "sequences")


def split_table(prefix: bool) -> dict[str, TableColumn]:
    """The split table's columns, with ``pass`` and ``sequences`` only when a
    ``prefix`` pass ran."""
    return {name: column for name, column in SPLIT_TABLE.items() if prefix or name not in PREFIX_COLUMNS}


def with_sink(splits: pd.DataFrame, sink_m: float | None, sink_term: float, sink_share: float) -> pd.DataFrame:
    """The split rows and, with an attention sink, a last row ``"sink"``: its logit
    ``sink_m`` (log2 units) as ``m``, its term ``sink_term`` (on the common max)
    as ``weight`` and its ``share`` of the mass; ``splits`` alone without one."""
    if sink_m is None:
        return splits
    row = {name: math.nan for name in splits.columns} | {
        "split": "sink", "pass": "sink", "m": sink_m, "l": 1.0, "weight": sink_term, "share": sink_share}
    # The split ids as text, so the column holds one type (Arrow refuses ints and a string).
    return pd.concat([splits.astype({"split": str}), pd.DataFrame([row])], ignore_index=True)
