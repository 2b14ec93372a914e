"""Sampling large grids for drawing: a browser draws a few tens of thousands of
heatmap cells comfortably; past that the cache figures show every k-th row and
column, or k consecutive columns per drawn column (:func:`sample_grid`), or
aggregate the pool (:func:`pool_grid_shape`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.formatting import ordinal
from explorer.limits import MAX_POOL_CELLS


@dataclass(frozen=True)
class GridSample:
    """Which rows and columns of an ``n_rows x n_cols`` grid are drawn.

    ``rows`` and ``cols`` are every ``row_stride``-th and ``col_stride``-th index.
    With ``col_bins``, each drawn column stands for the ``col_stride`` consecutive
    columns from its index on (aggregated), not for that one column alone.
    """

    n_rows: int
    n_cols: int
    row_stride: int
    col_stride: int
    col_bins: bool = False

    @property
    def rows(self) -> np.ndarray:
        return np.arange(0, self.n_rows, self.row_stride)

    @property
    def cols(self) -> np.ndarray:
        return np.arange(0, self.n_cols, self.col_stride)

    @property
    def sampled(self) -> bool:
        return self.row_stride > 1 or self.col_stride > 1

    @property
    def cells(self) -> int:
        return len(self.rows) * len(self.cols)

    def strides(self, row_name: str, col_name: str) -> str:
        """``"every 4th row and every 2nd column"``: what is drawn, naming only the
        sampled axes (``""`` when nothing was sampled)."""
        parts = []
        if self.row_stride > 1:
            parts.append(f"every {ordinal(self.row_stride)} {row_name}")
        if self.col_stride > 1 and self.col_bins:
            parts.append(f"{self.col_stride:,} {col_name}s per column")
        elif self.col_stride > 1:
            parts.append(f"every {ordinal(self.col_stride)} {col_name}")
        return " and ".join(parts)

    def note(self, row_name: str, col_name: str) -> str:
        """A caption saying what was sampled, or ``""`` when nothing was."""
        if not self.sampled:
            return ""
        shape = f"({len(self.rows):,} × {len(self.cols):,} of {self.n_rows:,} × {self.n_cols:,} cells)"
        if self.col_bins and self.col_stride > 1:
            return (
                f"Sampled for the browser: showing {self.strides(row_name, col_name)} {shape}; each "
                f"column stands for {self.col_stride:,} consecutive {col_name}s, coloured by the first "
                f"allocated one, so a short {row_name} still shows. Hover a cell for how many are allocated."
            )
        return f"Sampled for the browser: showing {self.strides(row_name, col_name)} {shape}; each cell shown holds its exact value."


def sample_grid(
    n_rows: int, n_cols: int, max_cells: int, *, max_cols: int | None = None, col_bins: bool = False
) -> GridSample:
    """Strides that keep an ``n_rows x n_cols`` grid under ``max_cells`` cells.

    The stride doubles on whichever axis currently has more entries drawn, so a
    long thin grid is thinned along its long side first.

    Parameters
    ----------
    n_rows, n_cols : int
        The grid's shape.
    max_cells : int
        Most cells drawn.
    max_cols : int, optional
        Most columns drawn whatever the cell count (columns narrower than a pixel
        or two vanish on screen); the column stride starts from there.
    col_bins : bool
        Whether a drawn column aggregates ``col_stride`` columns (see
        :class:`GridSample`); only the wording of :meth:`GridSample.note` depends on it.
    """
    n_rows, n_cols = max(1, int(n_rows)), max(1, int(n_cols))
    rs = cs = 1
    if max_cols is not None:
        while math.ceil(n_cols / cs) > max(1, int(max_cols)):
            cs *= 2
    while math.ceil(n_rows / rs) * math.ceil(n_cols / cs) > max_cells:
        if math.ceil(n_rows / rs) >= math.ceil(n_cols / cs):
            rs *= 2
        else:
            cs *= 2
    return GridSample(n_rows, n_cols, rs, cs, col_bins)


def pool_grid_shape(num_blocks: int, max_cells: int = MAX_POOL_CELLS) -> tuple[int, int, int]:
    """``(rows, columns, blocks_per_cell)`` of the pool view.

    About three times as wide as tall; ``blocks_per_cell > 1`` when the pool has
    more blocks than ``max_cells`` and consecutive blocks share a cell.
    """
    num_blocks = max(1, int(num_blocks))
    per_cell = max(1, math.ceil(num_blocks / max_cells))
    cells = math.ceil(num_blocks / per_cell)
    width = min(cells, max(8, int(math.ceil(math.sqrt(3 * cells)))))
    if width > 16:
        width = int(math.ceil(width / 8) * 8)
    return math.ceil(cells / width), width, per_cell
