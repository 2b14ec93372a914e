"""Issue 27, the back row on the Serving simulation page: the pool-over-time chart's two "0" ticks met at
its origin (#9), and presentation mode's shared-block diamonds were 2 to 3 px."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_app import TINY, assert_clean, chart
from test_app_serving import ROOT, SERVING, SIM
from test_figures_serving import PAGE_POOL, _page_tables
from test_figures_serving import SERVING as SMALL

from explorer import style
from explorer.serving import figures as serving_figures
from explorer.serving import table_figures
from explorer.serving.history import simulate


@pytest.fixture(scope="module")
def history():
    return simulate(SMALL, 60)


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_serving_timeline_keeps_the_x_axis_zero_clear_of_the_y_axis_zero(history, scale):
    """Issue 27 (#9): on "The pool over time" the step axis's "0" sat under the y axis's "0" at the origin, the
    two read as one label. The step axis starts left of its first tick, far enough that the tick's label (centred
    on it) starts right of the y axis line, where the y axis's labels end."""
    from explorer.panel_layout import ORIGIN_GAP_PX

    with style.presentation(scale):
        fig = serving_figures.serving_timeline_figure(history.metrics, step=30, num_blocks=48)
        plot_px, tick_px = style.plot_width_px(style.FULL_PLOT_WIDTH_PX), style.font_px("tick")
        gap_px = style.scaled(ORIGIN_GAP_PX)
    steps = history.metrics["step"]
    for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.xaxis3):
        assert axis.range is not None, "autorange puts step 0 on the y axis"
        start, end = axis.range
        assert start < steps.min() and end == steps.max()  # every step drawn, the first a little in
        first, label = axis.tickvals[0], axis.ticktext[0]
        assert first == steps.min() and label == "0"
        label_left_px = (first - start) / (end - start) * plot_px - len(label) * style.DIGIT_WIDTH * tick_px / 2
        assert label_left_px >= gap_px - 1e-9, label_left_px
        assert (first - start) / (end - start) < 0.05  # a gap, not a hole: the lines still start at the left


#: The least marker size (px) of a shared-block diamond in presentation mode: read from the back of a room.
MIN_PRESENT_DIAMOND_PX = 8


@pytest.mark.parametrize("config", [
    replace(PAGE_POOL, num_blocks=64, system_prompt=32, samples=3, arrival_rate=0.2),
    replace(PAGE_POOL, num_blocks=128, system_prompt=32, samples=2, max_batch_size=12, arrival_rate=0.5),
])
def test_serving_shared_diamonds_in_presentation_mode_are_readable_and_fit_their_cells(config):
    """Issue 27: in presentation mode the running tables' shared-block diamonds were 2 to 3 px: the tables took
    two fifths of the page, 16 to 19 columns of 7 px. Presentation mode draws them across the page
    (:data:`~explorer.serving.table_figures.STACKED_PLOT_PX`) and sizes the diamonds to those cells as the block
    table does (:func:`~explorer.marks.corner_fit`): 8 px or more, each inside its cell, clear of its edges."""
    from explorer.cache.picking import GRID_PAD
    from explorer.marks import diamond_extent

    history = simulate(config, 120)
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax())
    with style.presentation():
        table = _page_tables(history, step, config.num_blocks, "sequence", plot_width=table_figures.STACKED_PLOT_PX)
        cell_w = style.plot_width_px(table_figures.STACKED_PLOT_PX)
    marks = next(t for t in table.data if t.name == "shared block (2+ sequences)")
    assert len(marks.x) > 0
    size, line = marks.marker.size, marks.marker.line.width
    assert size >= MIN_PRESENT_DIAMOND_PX, size
    heat = table.data[0]
    rows = np.asarray(heat.y, dtype=float)
    n_cols = np.asarray(heat.z).shape[1]
    cell_w = cell_w / (n_cols + 2 * GRID_PAD) - heat.xgap
    plot_h = table.layout.height - table.layout.margin.t - table.layout.margin.b
    row_px = plot_h / (len(rows) + 2 * GRID_PAD) - heat.ygap
    extent = diamond_extent(size, line)
    assert extent <= min(cell_w, row_px), (extent, cell_w, row_px)
    # Each in its own cell: its box inside the cell's extent around the column and row it marks.
    cols = np.asarray(marks.customdata)[:, 1].astype(float)
    dx_px = np.abs(np.asarray(marks.x, dtype=float) - cols) * (cell_w + heat.xgap)
    row_of = rows[np.abs(np.asarray(marks.y, dtype=float)[:, None] - rows[None, :]).argmin(1)]
    dy_px = np.abs(np.asarray(marks.y, dtype=float) - row_of) * (row_px + heat.ygap)
    assert np.all(dx_px + extent / 2 <= cell_w / 2 + 1e-9) and np.all(dy_px + extent / 2 <= row_px / 2 + 1e-9)
    assert marks.marker.size - 2 * line >= 0.6 * marks.marker.size  # the white fill shows inside its outline


@pytest.mark.parametrize("present", [False, True])
def test_presentation_mode_draws_the_tables_across_the_page_with_readable_shared_marks(present):
    """Issue 27: presentation mode's shared-block diamonds were 2 to 3 px in the tables' two fifths of the page.
    It draws the pool and the tables across the page, one under the other, the diamonds sized to those cells;
    normal mode keeps them side by side."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**TINY, **({"present": "1"} if present else {})}.items():
        at.query_params[key] = value
    for key, value in {**SIM, "sv_system_prompt": 32, "sv_samples": 3}.items():
        at.session_state[key] = value
    at.switch_page(SERVING)
    at.run()
    assert_clean(at)
    assert at.toggle(key="sb_present").value is present
    (marks,) = [t for t in chart(at, "sv_table_chart")["data"] if t.get("name") == "shared block (2+ sequences)"]
    assert len(marks["x"]) > 0
    if present:
        assert marks["marker"]["size"] >= MIN_PRESENT_DIAMOND_PX
    with_columns = [c for c in at.columns if len(c.children) and c.weight == 0.4]  # the tables' two fifths
    assert bool(with_columns) is not present
    assert table_figures.STACKED_PLOT_PX > table_figures.TABLE_PLOT_PX
