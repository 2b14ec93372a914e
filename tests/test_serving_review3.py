"""Review 3 of the Serving simulation page: the sidebar's Memory box beside the page's own pool, the sharing
chart's origin, the pool's legend gap and marks, and the trade-off chart's current block size."""

from __future__ import annotations

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
