"""Review 3 of the Serving simulation page: the sidebar's Memory box beside the page's own pool, the sharing
chart's origin, the pool's legend gap and marks, and the trade-off chart's current block size."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_app import TINY, assert_clean
from test_app_serving import ROOT, SERVING, SIM

OWN_POOL_NOTE = "this page simulates a pool, block size and batch of its own"


def _open(page: str, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in TINY.items():
        at.query_params[key] = value
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    return at.run()


@pytest.mark.parametrize("page, noted", [(SERVING, True), ("app_pages/block_table.py", False)])
def test_sidebar_memory_box_says_it_is_not_the_serving_simulation(page, noted):
    """Review 3: the sidebar's Memory box ("Blocks: 40 used of 45 in the pool", the sidebar's block size 16) sat
    beside the Serving page's own card ("43 of 64", block size 8), nothing saying which was which. On that page
    the box says it describes the sidebar's batch, not the page's simulation; other pages use that batch."""
    at = _open(page, **(SIM if noted else {}))
    assert_clean(at)
    assert any("KV cache:" in m.value for m in at.sidebar.markdown)  # the box is still drawn
    notes = [c.value for c in at.sidebar.caption if OWN_POOL_NOTE in c.value]
    assert bool(notes) is noted


def _first_label_left_px(axis, plot_px: float) -> float:
    """Pixels from the plot's left edge (the y axis) to the left end of the x axis's first tick label."""
    from explorer import style

    start, end = axis.range
    first, label = axis.tickvals[0], axis.ticktext[0]
    return (first - start) / (end - start) * plot_px - len(label) * style.DIGIT_WIDTH * style.font_px("tick") / 2


@pytest.mark.parametrize("kind", ["sharing", "freeing"])
@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_sharing_chart_keeps_the_x_axis_zero_clear_of_the_y_axis_zero(kind, scale):
    """Review 3: on "with sharing against without" (and the window's "with freeing against without", the same
    figure) the y axis's "0" and the step axis's "0" touched at the origin. The step axis starts left of step 0,
    as the pool-over-time chart's does (:func:`~explorer.panel_layout.origin_clear_range`)."""
    from dataclasses import replace

    from test_figures_serving import SERVING as SMALL

    from explorer import style
    from explorer.cache.sharing_figures import sharing_timeline_figure
    from explorer.panel_layout import ORIGIN_GAP_PX
    from explorer.serving.history import simulate

    metrics = simulate(replace(SMALL, system_prompt=16, samples=2), 60).metrics
    with style.presentation(scale):
        fig = sharing_timeline_figure(metrics, step=20, num_blocks=48, kind=kind)
        plot_px, gap_px = style.plot_width_px(style.FULL_PLOT_WIDTH_PX), style.scaled(ORIGIN_GAP_PX)
        axis = fig.layout.xaxis
        assert axis.range is not None, "autorange puts step 0 on the y axis"
        assert axis.ticktext[0] == "0" and axis.range[1] == metrics["step"].max()
        assert _first_label_left_px(axis, plot_px) >= gap_px - 1e-9
        assert (axis.tickvals[0] - axis.range[0]) / (axis.range[1] - axis.range[0]) < 0.05  # a gap, not a hole
    assert min(fig.data[0].y) >= 0 and fig.layout.yaxis.rangemode == "tozero"  # the y axis starts at 0 too


def _page_pool(scale: float, color_by: str = "sequence"):
    """The page's pool at review 3's settings (64 blocks of 8, four sequences) at its busiest step with marks."""
    from explorer import style
    from explorer.serving import figures as serving_figures
    from explorer.serving import table_figures
    from explorer.serving.history import simulate
    from explorer.serving.view import serving_config

    config = serving_config(64, 8, 4, 0.3, ("long-tail", 16, 256), ("long-tail", 4, 48), 0)
    history = simulate(config, 120)
    step = next(s for s in range(120) if history.changes(s).taken and history.changes(s).freed
                and history.records[s].num_running)
    record, changes = history.records[step], history.changes(step)
    plot = serving_figures._NARROW_PLOT_PX if scale == 1 else table_figures.STACKED_PLOT_PX
    with style.presentation(scale):
        fig = serving_figures.serving_pool_figure(
            record.pool_owner(), record.block_tables(), record.context_lens, 8, step=step, taken=changes.taken,
            freed=changes.freed, recycled=changes.recycled, color_by=color_by, plot_width=plot)
        return fig, style.plot_width_px(plot), style.scaled(1)


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_serving_pool_marks_lie_inside_their_own_cells(scale):
    """Review 3: the pool's marks (taken, recycled, partly filled) sat on the borders between blocks, block 18's
    dot and block 19's hourglass a pair at the border between them. Each mark's box lies inside its own cell as
    drawn (the heatmap's gaps off), a margin from its top and bottom and :data:`POOL_MARK_INSET` of the cell's
    width from its sides, so that the gap between two cells' marks side by side is wider than their margin."""
    from explorer.cache.picking import GRID_PAD
    from explorer.marks import SYMBOL_REACH
    from explorer.serving.figures import POOL_MARK_INSET

    fig, plot_w, px = _page_pool(scale)
    heat = fig.data[0]
    n_rows, n_cols = np.asarray(heat.z).shape
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    pitch_w, pitch_h = plot_w / (n_cols + 2 * GRID_PAD), plot_h / (n_rows + 2 * GRID_PAD)
    cell_w, cell_h = pitch_w - heat.xgap, pitch_h - heat.ygap
    placed = 0
    for t in fig.data:
        if not (isinstance(t.meta, dict) and "mark" in t.meta) or t.customdata is None:
            continue
        blocks = np.asarray(t.customdata)[:, 0].astype(int)
        half = SYMBOL_REACH[t.marker.symbol] * t.marker.size + (t.marker.line.width or 0) / 2
        dx = (np.asarray(t.x, dtype=float) - blocks % n_cols) * pitch_w  # from its own cell's centre, px
        dy = (np.asarray(t.y, dtype=float) - blocks // n_cols) * pitch_h
        assert np.all(np.abs(dx) + half <= cell_w / 2 - POOL_MARK_INSET * cell_w + 1e-9), (t.name, dx, half)
        assert np.all(np.abs(dy) + half <= cell_h / 2 - px + 1e-9), (t.name, dy, half)
        placed += len(blocks)
    assert placed >= 2


@pytest.mark.parametrize("color_by", ["sequence", "reference count"])
@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_serving_pool_legend_sits_under_its_axis(scale, color_by):
    """Review 3: the pool's legend floated about 100 px below its chart, in normal and presentation mode: it was
    anchored at the figure's foot, under a bottom margin sized for more legend rows than Plotly lays out. It hangs
    from the plot area instead, its top just under the x axis's ticks and title, and the margin still holds every
    row the figure allows for."""
    from explorer import style
    from explorer.serving import figures as serving_figures

    fig, plot_w, _ = _page_pool(scale, color_by)
    layout = fig.layout
    plot_h = layout.height - layout.margin.t - layout.margin.b
    assert layout.legend.yref == "paper" and layout.legend.yanchor == "top"
    top_px = -layout.legend.y * plot_h  # the legend's top edge below the plot area
    with style.presentation(scale):
        axis_px = style.scaled(serving_figures._POOL_AXIS_PX)
        text_px = 1.2 * (style.font_px("tick") + style.font_px("body"))  # the ticks' labels and the axis title
        legend_font = style.scaled(serving_figures.POOL_LEGEND_FONT)
    assert top_px == pytest.approx(axis_px)
    assert top_px > text_px  # clear of the axis's text
    names = [t.name for t in fig.data if t.type != "heatmap" and t.showlegend is not False and t.name]
    rows = serving_figures.legend_rows(names, plot_w, legend_font) + 1
    legend_px = rows * serving_figures._LEGEND_ROW * legend_font
    assert top_px + legend_px <= layout.margin.b + 1e-9  # room under the legend for its rows


@pytest.mark.parametrize("current", [8, None])
def test_tradeoff_chart_says_which_bar_is_the_current_block_size(current):
    """Review 3: the trade-off chart drew the page's block size as a darker, outlined bar, which nothing explained.
    The subtitle says so, naming the size; without a current size (or one not among the bars) it says nothing."""
    from test_figures_serving import SERVING as SMALL

    from explorer.serving import tradeoff_figures
    from explorer.serving.tradeoff import block_size_tradeoff

    table = block_size_tradeoff(SMALL, (4, 8, 16), 40).table
    fig = tradeoff_figures.tradeoff_figure(table, current=current)
    subtitle = fig.layout.title.subtitle.text.replace("<br>", " ")
    widths = list(fig.data[0].marker.line.width)
    if current is None:
        assert "outlined bar" not in subtitle and len(set(widths)) == 1
        return
    (dark,) = [i for i, w in enumerate(widths) if w == max(widths)]  # the one bar drawn apart
    assert fig.data[0].x[dark] == str(current)
    assert f"dark outlined bar: block size {current}, the page's" in subtitle
