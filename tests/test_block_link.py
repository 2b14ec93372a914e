"""Linking the block table and the pool: the click targets and outlines of the
figures (:mod:`explorer.cache.picking`), and :mod:`explorer.cache.block_link`, which
reads a click back and says where the picked block is drawn."""

import numpy as np
import pytest

from explorer.cache import block_link, sampling, sharing_figures
from explorer.cache import figures as cache_figures
from explorer.cache import pool_figures
from explorer.cache.picking import OUTLINE_NAME, PICK_GROUP, VEIL_NAME


def _outlines(fig) -> list[tuple[float, float, float, float]]:
    """``(x0, x1, y0, y1)`` of each rectangle of the figure's outline trace."""
    trace = next((t for t in fig.data if t.name == OUTLINE_NAME), None)
    if trace is None:
        return []
    xs, ys = list(trace.x), list(trace.y)
    return sorted((min(xs[i:i + 5]), max(xs[i:i + 5]), min(ys[i:i + 5]), max(ys[i:i + 5]))
                  for i in range(0, len(xs), 6))


def _centres(fig) -> list[tuple[float, float]]:
    return sorted(((x0 + x1) / 2, (y0 + y1) / 2) for x0, x1, y0, y1 in _outlines(fig))


def _targets(fig):
    return next(t for t in fig.data if t.legendgroup == PICK_GROUP)


# A table whose physical block 7 is shared by three sequences (prefix sharing).
SHARED = np.array([[7, 1, 2, -1],
                   [7, 3, -1, -1],
                   [7, 4, 5, 6],
                   [0, 8, -1, -1]])
LENS = [40, 20, 64, 30]


def test_no_highlight_draws_no_outline():
    fig = cache_figures.block_table_figure(SHARED, LENS, 16, 9)
    assert _outlines(fig) == [] and all(t.name != VEIL_NAME for t in fig.data)


def test_table_outlines_every_cell_of_a_shared_block():
    fig = cache_figures.block_table_figure(SHARED, LENS, 16, 9, highlight=range(7, 8))
    assert _centres(fig) == [(0, 0), (0, 1), (0, 2)]  # (logical block, sequence)
    assert _outlines(fig)[0] == (-0.5, 0.5, -0.5, 0.5)  # exactly the cell
    veil = next(t for t in fig.data if t.name == VEIL_NAME)
    assert np.array_equal(np.isnan(np.array(veil.z, dtype=float)), SHARED == 7)  # every other cell dimmed


def test_table_outlines_one_cell_and_nothing_for_a_free_block():
    assert _centres(cache_figures.block_table_figure(SHARED, LENS, 16, 12, highlight=range(5, 6))) == [(2, 2)]
    fig = cache_figures.block_table_figure(SHARED, LENS, 16, 12, highlight=range(11, 12))
    assert _outlines(fig) == [] and all(t.name != VEIL_NAME for t in fig.data)


def test_table_click_targets_pick_their_cells_block():
    fig = cache_figures.block_table_figure(SHARED, LENS, 16, 9)
    targets = _targets(fig)
    picks = np.array(targets.customdata)[:, -2:]
    x, y = np.array(targets.x, dtype=int), np.array(targets.y, dtype=int)
    assert len(x) == (SHARED >= 0).sum()  # allocated cells only
    assert np.array_equal(picks[:, 0], SHARED[y, x]) and np.array_equal(picks[:, 0], picks[:, 1])
    # The table's hover, and the window's note (empty without a window) before <extra>.
    assert targets.hovertemplate == fig.data[0].hovertemplate.replace("<extra>", "%{text}<extra>")
    assert set(targets.text) == {""}


def test_sampled_table_outlines_drawn_rows_only():
    # 4,096 rows x 8 blocks is past the cell budget: every 2nd row is drawn.
    rows, width = 4096, 8
    tables = np.arange(rows * width).reshape(rows, width) + 10
    tables[:, 0] = 5  # block 5 heads every row: drawn in the drawn rows only
    grid = cache_figures.block_table_grid(rows, width)
    assert grid.row_stride == 2 and grid.col_stride == 1
    fig = cache_figures.block_table_figure(tables, [width * 16] * rows, 16, highlight=range(5, 6))
    boxes = _outlines(fig)
    assert len(boxes) == rows // 2
    assert boxes[0] == (-0.5, 0.5, -1.0, 1.0)  # a drawn row stands for two: the outline covers both
    # A block of an odd row is not drawn: no outline, and the note says so.
    hidden = int(tables[1, 3])
    assert _outlines(cache_figures.block_table_figure(tables, [width * 16] * rows, 16, highlight=range(hidden, hidden + 1))) == []
    note = block_link.pick_note(tables, range(hidden, hidden + 1), grid)
    assert note.startswith(f"Block {hidden}: 1 table cell of 1 sequence (1) points here")
    assert "draws none of its row" in note


def test_aggregated_table_column_outline_spans_its_blocks():
    tables = np.arange(3 * 1000).reshape(3, 1000)  # 1,000 logical blocks: aggregated columns
    grid = cache_figures.block_table_grid(3, 1000)
    k = grid.col_stride
    assert k > 1
    block = int(tables[1, k + 1])  # inside the second column of row 1, not its first block
    fig = cache_figures.block_table_figure(tables, [1000 * 16] * 3, 16, highlight=range(block, block + 1))
    assert _outlines(fig) == [(k - 0.5, 2 * k - 0.5, 0.5, 1.5)]
    # The column's target picks the block it is coloured by: its first.
    targets = _targets(fig)
    i = next(i for i, (x, y) in enumerate(zip(targets.x, targets.y)) if y == 1 and k - 0.5 < x < 2 * k - 0.5)
    assert list(targets.customdata[i][-2:]) == [tables[1, k]] * 2


def test_pool_outlines_the_picked_block_and_targets_pick_each_block():
    owner = np.full(45, -1)
    owner[SHARED[SHARED >= 0]] = 0
    fig = pool_figures.pool_figure(owner, SHARED, LENS, 16, highlight=range(7, 8))
    n_rows, n_cols, _ = sampling.pool_grid_shape(45)
    assert _centres(fig) == [(7 % n_cols, 7 // n_cols)]
    targets = _targets(fig)
    assert np.array_equal(np.array(targets.customdata), np.repeat(np.arange(45)[:, None], 2, 1))
    assert np.array_equal(np.array(targets.x) + n_cols * np.array(targets.y), np.arange(45))
    refs = np.bincount(SHARED[SHARED >= 0], minlength=45)
    shared = sharing_figures.pool_ref_count_figure(refs, SHARED, 16, highlight=range(7, 8))
    assert _centres(shared) == [(7 % n_cols, 7 // n_cols)]


def test_aggregated_pool_outlines_the_cell_holding_the_block():
    owner = np.zeros(100_000, dtype=np.int64)
    n_rows, n_cols, per_cell = sampling.pool_grid_shape(len(owner))
    assert per_cell > 1
    block = 54_321
    fig = pool_figures.pool_figure(owner, np.zeros((1, 1), dtype=np.int64), [16], 16, highlight=range(block, block + 1))
    cell = block // per_cell
    assert _centres(fig) == [(cell % n_cols, cell // n_cols)]
    assert any(t.name == OUTLINE_NAME + " (ring)" for t in fig.data)  # a cell this small gets a ring too
    picks = np.array(_targets(fig).customdata)[:, -2:]
    assert picks[cell].tolist() == [cell * per_cell, (cell + 1) * per_cell - 1]


# -- reading a click back ------------------------------------------------------------------

def _selection(*points):
    return {"selection": {"points": list(points), "point_indices": [], "box": [], "lasso": []}}


@pytest.mark.parametrize("customdata", [[0, 0, 0, 15, 7, 16, 7, 7],
                                        {str(i): v for i, v in enumerate([0, 0, 0, 15, 7, 16, 7, 7])}])
def test_picked_blocks_reads_the_targets_customdata(customdata):
    # A typed array reaches the server as {"0": ..., "1": ...}.
    point = {"curve_number": 3, "customdata": customdata, "legendgroup": PICK_GROUP}
    assert block_link.picked_blocks(_selection(point), 9) == range(7, 8)


def test_picked_blocks_skips_other_markers_and_stale_picks():
    diamond = {"customdata": [0, 0, 7, 3], "legendgroup": None}
    assert block_link.picked_blocks(_selection(diamond), 9) is None
    assert block_link.picked_blocks(_selection(), 9) is None
    assert block_link.picked_blocks(None, 9) is None
    stale = {"customdata": [40, 40], "legendgroup": PICK_GROUP}  # from a larger pool than now
    assert block_link.picked_blocks(_selection(stale), 9) is None
    assert block_link.picked_blocks(_selection(stale), 41) == range(40, 41)
    assert block_link.valid_pick((3, 5), 9) == range(3, 6)
    assert block_link.valid_pick((8, 9), 9) is None
    assert block_link.valid_pick("garbage", 9) is None
    assert block_link.valid_pick(None, 9) is None


def test_pick_note_names_the_cells_pointing_at_a_block():
    grid = cache_figures.block_table_grid(*SHARED.shape)
    assert block_link.pick_note(SHARED, range(7, 8), grid) == \
        "Block 7: 3 table cells of 3 sequences (0, 1, 2) point here, outlined."
    assert block_link.pick_note(SHARED, range(20, 21), grid).endswith("(free).")
