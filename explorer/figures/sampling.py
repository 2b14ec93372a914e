"""Sampling large grids for drawing: a browser draws a few tens of thousands of
heatmap cells comfortably; past that the cache figures show every k-th row and
column (:func:`sample_grid`) or aggregate the pool (:func:`pool_grid_shape`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.formatting import ordinal
from .style import MAX_POOL_CELLS

@dataclass(frozen=True)
class GridSample:
    """Which rows and columns of an ``n_rows x n_cols`` grid are drawn.

    ``rows`` and ``cols`` are every ``row_stride``-th and ``col_stride``-th index.
    """

    n_rows: int
    n_cols: int
    row_stride: int
    col_stride: int

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
        if self.col_stride > 1:
            parts.append(f"every {ordinal(self.col_stride)} {col_name}")
        return " and ".join(parts)

    def note(self, row_name: str, col_name: str) -> str:
        """A caption saying what was sampled, or ``""`` when nothing was."""
        if not self.sampled:
            return ""
        return (
            f"Sampled for the browser: showing {self.strides(row_name, col_name)} "
            f"({len(self.rows):,} x {len(self.cols):,} of {self.n_rows:,} x {self.n_cols:,} cells); "
            f"each cell shown holds its exact value."
        )


def sample_grid(n_rows: int, n_cols: int, max_cells: int) -> GridSample:
    """Strides that keep an ``n_rows x n_cols`` grid under ``max_cells`` cells.

    The stride doubles on whichever axis currently has more entries drawn, so a
    long thin grid is thinned along its long side first.
    """
    n_rows, n_cols = max(1, int(n_rows)), max(1, int(n_cols))
    rs = cs = 1
    while math.ceil(n_rows / rs) * math.ceil(n_cols / cs) > max_cells:
        if math.ceil(n_rows / rs) >= math.ceil(n_cols / cs):
            rs *= 2
        else:
            cs *= 2
    return GridSample(n_rows, n_cols, rs, cs)


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
