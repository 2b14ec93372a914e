"""In a real browser: presentation mode draws the Block table page's pool and the walk through it across
the page (issue 27, review 4: in two fifths of it their plots stayed 232 px wide while only their height
grew), so that the pool's cells and marks grow; normal mode keeps them beside the table and the token walk."""

from __future__ import annotations

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import expect  # noqa: E402

from browser_support import SHOTS, WAIT, full_screenshot, no_exception, settle  # noqa: E402

pytestmark = pytest.mark.browser

#: Each chart's title (its first words) and its plot area's width in px, as Plotly laid it out.
_PLOT_WIDTHS = """() => Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')].map(gd =>
    [(gd._fullLayout.title.text || '').replace(/<br>/g, ' ').slice(0, 19), gd._fullLayout._size.w]))"""


def _widths(pg, ready: str) -> dict:
    """The charts' plot widths once ``ready`` (a JS predicate over them, ``w``) holds."""
    pg.wait_for_function(f"() => {{ const w = ({_PLOT_WIDTHS})(); return Object.keys(w).length >= 4 && ({ready}); }}",
                         timeout=WAIT)
    return pg.evaluate(_PLOT_WIDTHS)


@pytest.mark.parametrize("present", [False, True])
def test_block_table_pool_and_walk_use_the_width_presentation_mode_has(server, browser, present):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = context.new_page()
    try:
        pg.goto(f"{server}/block_table" + ("?present=1" if present else ""))
        expect(pg.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
        settle(pg)
        main = pg.locator("[data-testid=stMainBlockContainer]").bounding_box()["width"]
        pool, path, table = "Physical block pool", "Sequence 0 through ", "Block table"
        if present:  # each across the page, as wide as the block table's
            w = _widths(pg, f"w['{pool}'] > 0.75 * {main} && w['{path}'] > 0.75 * {main}")
            assert w[pool] == pytest.approx(w[table], abs=2) and w[path] == pytest.approx(w[table], abs=2)
        else:  # two fifths of the page, beside the table (three fifths)
            w = _widths(pg, f"w['{pool}'] > 0 && w['{pool}'] < 0.4 * {main}")
            assert w[pool] < w[table] and w[path] < 0.4 * main
        no_exception(pg)
        full_screenshot(pg, SHOTS / f"block_table_width_{'present' if present else 'normal'}.png")
    finally:
        context.close()
