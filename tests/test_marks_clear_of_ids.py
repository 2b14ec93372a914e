"""Issue 27 (a speaker's review): marks were drawn over block ids: the pool's partly filled dot on ids 38
and 18, Serving's recycled hourglass on id 19, shared diamonds overlapping sideways in presentation mode's
narrow cells and poking above the table's first row in normal mode. Every mark now sits in a corner of its
cell: its box (the symbol's reach from its centre, plotly.js ``symbol_defs``, outline included) lies inside
its drawn cell and clear of the centred id (estimated chars x 0.6 x font size wide, a font size high).
Cells are measured in the narrowest plot each figure is drawn in (its column at 1280 px)."""

from __future__ import annotations

import numpy as np
import pytest
from test_figures_serving import ALL_MARKS, SERVING, _page_tables
from test_shared_mark_fit import block_table_page

from explorer import style
from explorer.cache import pool_figures
from explorer.cache.cell_style import NARROW_PLOT_PX, WIDE_PLOT_PX
from explorer.marks import PAGE_MARKS
from explorer.serving import figures as serving_figures
from explorer.serving import table_figures
from explorer.serving.history import simulate

#: Half the side of the square holding each symbol, in its marker size (plotly.js symbol_defs).
REACH = {"circle": 0.5, "diamond": 0.65, "hourglass": 0.5, "triangle-up": 0.87, "star": 0.7, "pentagon": 0.5,
         "x-thin": 0.7, "cross": 0.6}
MARK_NAMES = {m.name for m in PAGE_MARKS} | {serving_figures._PARTIAL_NAME}


def mark_boxes(fig, plot_w: float):
    """For each mark of ``fig`` (a grid whose plot area is ``plot_w`` px wide, its height the layout's):
    its box, its cell's box and its id text's box, as ``[x0, x1, y0, y1]`` arrays in px."""
    heat = fig.data[0]
    xs = np.asarray(heat.x if heat.x is not None else range(np.shape(heat.z)[1]), dtype=float)
    ys = np.asarray(heat.y if heat.y is not None else range(np.shape(heat.z)[0]), dtype=float)
    x_lo, x_hi = fig.layout.xaxis.range
    y_lo, y_hi = fig.layout.yaxis.range
    px_x = plot_w / abs(x_hi - x_lo)
    px_y = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / abs(y_hi - y_lo)
    sx = xs[1] - xs[0] if len(xs) > 1 else 1.0
    sy = ys[1] - ys[0] if len(ys) > 1 else 1.0
    font = heat.textfont.size
    text = np.asarray(heat.text, dtype=object) if heat.text is not None else None
    written = heat.texttemplate is not None
    out = []
    for t in fig.data:
        if t.type != "scatter" or t.name not in MARK_NAMES or t.x is None:
            continue
        half = REACH[t.marker.symbol] * t.marker.size + (t.marker.line.width or 0) / 2
        for x, y in zip(t.x, t.y):
            if x is None:
                continue
            i, j = np.abs(ys - y).argmin(), np.abs(xs - x).argmin()
            cx, cy = xs[j] * px_x, ys[i] * px_y
            mark = np.array([x * px_x - half, x * px_x + half, y * px_y - half, y * px_y + half])
            cell = np.array([cx - sx * px_x / 2 + (heat.xgap or 0) / 2, cx + sx * px_x / 2 - (heat.xgap or 0) / 2,
                             cy - sy * px_y / 2 + (heat.ygap or 0) / 2, cy + sy * px_y / 2 - (heat.ygap or 0) / 2])
            chars = len(str(text[i][j] if text is not None else np.asarray(heat.z, dtype=object)[i][j]))
            tw, th = (chars * 0.6 * font, font) if written else (0.0, 0.0)
            out.append((t.name, mark, cell, np.array([cx - tw / 2, cx + tw / 2, cy - th / 2, cy + th / 2])))
    return out


def _pools():
    """The Serving page's pool at a step of every mark and at a busy step (taken and freed blocks), and the
    Block table page's pool of the first."""
    out = []
    for config, step in ((ALL_MARKS, 195), (SERVING, None)):
        history = simulate(config, 200 if step else 60)
        m = history.metrics
        step = step or int(np.minimum(m["taken"] - m["recycled"] - m["copied"], m["freed"]).to_numpy().argmax())
        record, c = history.records[step], history.changes(step)
        out.append((serving_figures.serving_pool_figure(
            record.pool_owner(), record.block_tables(), record.context_lens, config.block_size, step=step,
            taken=c.taken, freed=c.freed, recycled=c.recycled, copied=c.copied, revived=c.revived, sharing=True,
            seq_ids=record.seq_ids), serving_figures._NARROW_PLOT_PX))
        if config is ALL_MARKS:
            out.append((pool_figures.pool_figure(record.pool_owner(), record.block_tables(), record.context_lens,
                                                 config.block_size), NARROW_PLOT_PX))
    return out


def _figures(scale):
    """The Block table page's table and pool, the Serving page's pool and tables, with their plot widths."""
    tables = _page_tables(simulate(ALL_MARKS, 200), 195, ALL_MARKS.num_blocks, "sequence")
    return [(block_table_page(4), WIDE_PLOT_PX), (block_table_page(64), WIDE_PLOT_PX),
            (tables, table_figures.PLACED_PLOT_PX), *_pools()]


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_every_mark_lies_inside_its_cell_and_clear_of_its_id(scale):
    with style.presentation(scale):
        figs = [(fig, style.plot_width_px(width)) for fig, width in _figures(scale)]
    names = set()
    for fig, width in figs:
        for name, mark, cell, text in mark_boxes(fig, width):
            names.add(name)
            assert mark[0] >= cell[0] - 1e-6 and mark[1] <= cell[1] + 1e-6, (name, mark, cell)  # inside, across
            assert mark[2] >= cell[2] - 1e-6 and mark[3] <= cell[3] + 1e-6, (name, mark, cell)  # and down
            apart = mark[1] <= text[0] or mark[0] >= text[1] or mark[3] <= text[2] or mark[2] >= text[3]
            assert apart or text[0] == text[1], (name, mark, text)  # never over the id
    assert names >= {"shared block (2+ sequences)", "recycled", "taken", "freed", "copy-on-write",
                     serving_figures._PARTIAL_NAME, "partly filled last block"}
