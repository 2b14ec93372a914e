"""The link between the block table and the pool: which physical blocks a click on
either chart picked, and what the page says about where they are drawn.

A click selects one of the figures' invisible click targets
(:mod:`explorer.cache.picking`); the selection Streamlit hands back carries the
target's ``customdata``, whose last two values are the first and last block picked.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from explorer.cache.sampling import GridSample
from explorer.formatting import count

#: The targets' legend group: how a selection's points are told from other markers'.
PICK_GROUP = "pick"


def picked_blocks(selection: Mapping[str, Any] | None, num_blocks: int) -> range | None:
    """The physical blocks a chart's selection picked, or ``None``.

    Parameters
    ----------
    selection : mapping, optional
        A ``plotly_chart`` selection state: ``{"selection": {"points": [...]}}``,
        each point's ``customdata`` a list or, from a typed array, ``{"0": v0, ...}``.
        Points of other traces than the click targets (a shared-block diamond, a
        partly-filled dot) are skipped.
    num_blocks : int
        Pool size: a pick outside ``[0, num_blocks)`` (a selection left over from
        other settings) is no pick.

    Returns
    -------
    range or None
        ``range(first, last + 1)`` of the first target point selected.
    """
    points = ((selection or {}).get("selection") or {}).get("points") or []
    for point in points:
        data = point.get("customdata")
        if isinstance(data, Mapping):  # a typed array arrives as {"0": v0, "1": v1, ...}
            data = [v for _, v in sorted(data.items(), key=lambda kv: int(kv[0]))]
        if point.get("legendgroup") != PICK_GROUP or not isinstance(data, (list, tuple)) or len(data) < 2:
            continue
        return valid_pick((data[-2], data[-1]), num_blocks)
    return None


def valid_pick(pick, num_blocks: int) -> range | None:
    """``pick`` (``(first, last)`` or a range) as a range of blocks of a pool of
    ``num_blocks``, or ``None`` when it is malformed or lies outside the pool."""
    try:
        first, last = (pick.start, pick.stop - 1) if isinstance(pick, range) else (int(pick[0]), int(pick[1]))
    except (TypeError, ValueError, IndexError, AttributeError):
        return None
    if not 0 <= first <= last < num_blocks:
        return None
    return range(first, last + 1)


def cells_pointing_at(block_tables: np.ndarray, blocks: range) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of every block-table entry that points to one of ``blocks``."""
    tables = np.asarray(block_tables)
    return np.nonzero((tables >= blocks.start) & (tables < blocks.stop))


def pick_note(block_tables: np.ndarray, blocks: range, grid: GridSample, row_name: str = "sequence") -> str:
    """One sentence on the picked blocks: which table cells point to them, and
    whether the (sampled) table draws those cells.

    Parameters
    ----------
    block_tables : ndarray
        ``[batch_size, max_num_blocks]``, ``-1`` unallocated.
    blocks : range
        The picked physical blocks.
    grid : GridSample
        What the block-table figure draws (:func:`~explorer.block_table_grid`).
    """
    name = f"Block {blocks.start}" if len(blocks) == 1 else f"Blocks {blocks.start}–{blocks.stop - 1}"
    rows, cols = cells_pointing_at(block_tables, blocks)
    if not len(rows):
        return f"{name}: no sequence of this table points to {'it' if len(blocks) == 1 else 'them'} (free)."
    seqs = np.unique(rows)
    drawn = seqs[seqs % grid.row_stride == 0]
    listed = ", ".join(map(str, seqs[:6])) + (", …" if len(seqs) > 6 else "")
    text = (f"{name}: {count(len(rows), 'table cell')} of {count(len(seqs), row_name)} ({listed}) "
            f"{'points' if len(rows) == 1 else 'point'} here")
    if len(drawn) == len(seqs):
        return text + ", outlined."
    if not len(drawn):
        return text + f"; this sampled table draws none of {'its row' if len(seqs) == 1 else 'their rows'}."
    return text + f"; this sampled table draws {len(drawn):,} of those rows, outlined."
