"""The Inside the kernel page's tables: which columns of
:attr:`~explorer.kernel.trace.KernelTrace.splits` the split table shows, under what
labels and how wide, so that the whole table fits the page at 1280 px; and both
tables' numbers as text, as the cards and charts beside them write them
(:func:`~explorer.formatting.sig3`, :func:`~explorer.formatting.format_percent`),
for right-aligned text columns (``ui.tables.number_column``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from explorer.formatting import format_percent, sig3_column

#: Pixels of the page's main column on a 1280 px screen (beside the sidebar): the
#: split table's columns fit it side by side, none cut off.
MAIN_COLUMN_PX = 820


class TableColumn(NamedTuple):
    """A column of a table: its label, width in pixels, whether it holds numbers written
    as text (:func:`split_text`; shown right-aligned) and its help."""

    label: str
    width: int
    number: bool = False
    help: str | None = None


#: The split table, in order: what the merge takes from each split. Its blocks,
#: tiles and lookups are the walk's (the tile table has them).
SPLIT_TABLE: dict[str, TableColumn] = {
    "split": TableColumn("split", 55),
    "pass": TableColumn("pass", 65),
    "sequences": TableColumn("sequences", 90, help="sequences whose rows the program holds in one tile"),
    "token_start": TableColumn("first token", 90),
    "token_end": TableColumn("end token", 85, help="one past the split's last token"),
    "m": TableColumn("m", 75, True, "the split's running max (log2 units)"),
    "l": TableColumn("l", 75, True, "the split's normalizer Σ 2^(s − m)"),
    "weight": TableColumn("weight", 75, True, "w = 2^(m − max m)"),
    "share": TableColumn("share", 75, True, "w·l / Σ w·l: its part of the softmax mass, in percent as in the chart"),
    "err_vs_row": TableColumn("error vs row", 100, True, "max |acc / l − the row's exact answer|"),
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


#: The tile table's measured columns (:attr:`~explorer.kernel.trace.KernelTrace.tiles`), written by :func:`sig3`.
TILE_NUMBERS = ("tile_max", "m", "alpha", "l", "err_vs_split", "err_vs_row")


def split_text(splits: pd.DataFrame) -> pd.DataFrame:
    """The split table's rows (:func:`with_sink`'s) with its numbers as the merge chart
    writes them: ``m``, ``l``, ``weight`` and ``err_vs_row`` to three significant
    figures (:func:`~explorer.formatting.sig3`; ``"n/a"`` where missing: the sink has no
    error), ``share`` a percentage (:func:`~explorer.formatting.format_percent`,
    ``0.3409 -> "34.1%"``)."""
    numbers = {name: sig3_column(splits[name]) for name in ("m", "l", "weight", "err_vs_row") if name in splits}
    share = {"share": [format_percent(v) for v in splits["share"]]} if "share" in splits else {}
    return splits.assign(**numbers, **share)


def tile_text(tiles: pd.DataFrame) -> pd.DataFrame:
    """The tile table's rows with their :data:`TILE_NUMBERS` to three significant
    figures (:func:`~explorer.formatting.sig3`, ``"n/a"`` where missing) and each tile's
    physical blocks as one text ``"3, 7"``."""
    numbers = {name: sig3_column(tiles[name]) for name in TILE_NUMBERS if name in tiles}
    return tiles.assign(physical_blocks=tiles["physical_blocks"].map(lambda b: ", ".join(map(str, b))), **numbers)
