"""In a real browser: the Block table page: the sidebar, sharing, the table-pool click link, the ragged-lengths editor (fixtures and shared checks: ``browser_support``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import expect  # noqa: E402

from browser_support import SHOTS, TINY, WAIT, full_screenshot, no_error, no_exception, settle  # noqa: E402

pytestmark = pytest.mark.browser


def test_block_table_page_follows_the_sidebar(server, page):
    page.goto(f"{server}/?{urlencode({'batch': '6', 'ctx_mode': 'ragged', 'lo': '16', 'hi': '300'})}")
    page.wait_for_selector("text=Physical block pool", timeout=60_000)
    # Waits, not instant checks: on a loaded machine the charts arrive one by one.
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=30_000)
    metric = page.locator("[data-testid=stMetric]").filter(has_text="Sequences")
    expect(metric).to_contain_text("6", timeout=30_000)

    batch = page.get_by_label("Batch size (sequences)")
    batch.fill("8")
    batch.press("Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMetric]')]"
        ".some(m => m.innerText.includes('Sequences') && m.innerText.includes('8'))",
        timeout=30_000,
    )
    expect(page).to_have_url(re.compile(r"batch=8"), timeout=30_000)  # the URL mirrors the sidebar
    expect(page.locator(".js-plotly-plot").first).to_contain_text("8 sequences", timeout=30_000)
    no_exception(page)
    full_screenshot(page, SHOTS / "block_table.png")


def test_block_table_sharing_in_browser(server, page):
    # 4 sequences of 100 tokens as 2 requests of 2 samples with a 64-token common prompt (the defaults):
    # the prompt's first 4 blocks are held by all 4, the rest of each request's prompt by its 2 samples.
    page.goto(f"{server}/?{urlencode({**TINY, 'batch': '4', 'ctx': '100', 'block': '16'})}")
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
    settle(page)
    page.get_by_text("Sharing: n samples per request, a common prompt").click()
    expect(page.get_by_text(re.compile(r"Sharing saves \d+ physical blocks? of \d+"))).to_be_visible(timeout=WAIT)
    legend = page.locator(".js-plotly-plot .legendtext")
    for entry in ("shared block (2+ sequences)", "1 sequence", "2 sequences", "4 sequences"):
        expect(legend.filter(has_text=entry)).to_have_count(1, timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=Physical block pool: sharing")).to_be_visible(timeout=WAIT)
    settle(page)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "block_table_sharing.png")


def _click_target(pg, chart, i: int) -> None:
    """Click the ``i``-th click target of ``chart`` (a ``.js-plotly-plot``), at the
    pixel Plotly puts it on."""
    chart.scroll_into_view_if_needed()
    box = chart.locator(".nsewdrag").first.bounding_box()
    x, y = chart.evaluate(
        "(gd, i) => { const t = gd._fullData.find(d => d.name === 'click targets'); const L = gd._fullLayout;"
        " return [L.xaxis.d2p(t.x[i]), L.yaxis.d2p(t.y[i])]; }", i)
    pg.mouse.click(box["x"] + x, box["y"] + y)


def test_block_table_click_links_table_and_pool(server, page):
    # 4 sequences of 100 tokens sharing a 64-token prompt: a click on sequence 0's first
    # cell finds its block, held by all four, and outlines their four cells.
    page.goto(f"{server}/?{urlencode({**TINY, 'batch': '4', 'ctx': '100', 'block': '16'})}")
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
    settle(page)
    expect(page.get_by_text("Click a table cell to find its block in the pool")).to_be_visible(timeout=WAIT)
    page.get_by_text("Sharing: n samples per request, a common prompt").click()
    expect(page.locator(".js-plotly-plot >> text=Physical block pool: sharing")).to_be_visible(timeout=WAIT)
    settle(page)
    _click_target(page, page.locator(".js-plotly-plot").first, 0)
    expect(page.get_by_text(re.compile(r"Block \d+: 4 table cells of 4 sequences \(0, 1, 2, 3\) point here, "
                                       r"outlined"))).to_be_visible(timeout=WAIT)
    settle(page)
    full_screenshot(page, SHOTS / "block_table_pick_table.png")
    # Now the other way: a pool block held by one sequence finds its one cell.
    pool = page.locator(".js-plotly-plot").nth(1)
    _click_target(page, pool, 20)
    expect(page.get_by_text(re.compile(r"Block 20: (1 table cell of 1 sequence \(\d\) points here, outlined|"
                                       r"no sequence of this table points to it)"))).to_be_visible(timeout=WAIT)
    settle(page)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "block_table_pick_pool.png")


def _edit_length(pg, row: int, value: str, across: float = 0.75) -> None:
    """Type ``value`` into the ``context_len`` cell of ``row`` of the lengths editor
    (a canvas grid: click the cell, open its editor, replace, commit); ``across``:
    where the cell's column lies, as a share of the grid's width."""
    grid = pg.locator("[data-testid=stSidebar] [data-testid=stDataFrame]").first
    grid.wait_for(timeout=10_000)
    pg.wait_for_timeout(800)  # the expander's opening animation
    box = grid.bounding_box()
    pg.mouse.click(box["x"] + box["width"] * across, box["y"] + 35 * (row + 1) + 17)
    pg.wait_for_timeout(300)
    pg.keyboard.press("Enter")
    pg.wait_for_timeout(500)
    pg.keyboard.press("Control+A")
    pg.keyboard.type(value)
    pg.wait_for_timeout(300)
    pg.keyboard.press("Enter")


def test_ragged_lengths_editor(server, page):
    page.goto(f"{server}/?{urlencode({'batch': '3', 'ctx_mode': 'ragged', 'lo': '16', 'hi': '100'})}")
    page.wait_for_selector("text=Physical block pool", timeout=60_000)
    settle(page)  # a click on the expander during the first run's redraw was lost (the grid never showed)
    page.get_by_text("Per-sequence lengths (3)").click()
    _edit_length(page, 0, "500")
    page.wait_for_function("() => location.search.includes('lens=500')", timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMetric]')]"
        ".some(m => m.innerText.includes('Blocks used') && /\\b39\\b/.test(m.innerText) && m.innerText.includes('in the pool'))",
        timeout=30_000,
    )
    # Lengths outside 0..MAX_CONTEXT are clamped, and a note under the editor says so,
    # as the number boxes do: not silently (-5 used to become 5 with no word).
    note = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    for bad, used, says in (("-5", "0", ": -5 is below the minimum, 0; using 0."),
                            ("99999999", "1048576", ": 99,999,999 is above the maximum, 1,048,576; using 1,048,576.")):
        _edit_length(page, 1, bad)  # row 1, or row 2 when row 1 was selected already (Enter moves down)
        expect(page).to_have_url(re.compile(rf"lens=500(%2C|,)(\d+(%2C|,))?{used}(&|$|%2C|,)"), timeout=WAIT)
        expect(note).to_contain_text(re.compile(r"context_len of sequence [12]" + re.escape(says)), timeout=WAIT)
        no_exception(page)
    no_error(page)
    _edit_length(page, 1, "77")  # the same cell still takes a valid length
    page.wait_for_function("() => /lens=500(%2C|,)77/.test(location.search)", timeout=30_000)
    no_exception(page)


def test_per_sequence_new_tokens_editor(server, page):
    """The new tokens per sequence (issue 25), typed in the sidebar's grid: a value
    over its sequence's limit (16, or its context) is clamped and said, and the URL
    and the Tokens card follow."""
    page.goto(f"{server}/?{urlencode({**TINY, 'new_tokens': '3,5'})}")
    page.wait_for_selector("text=Physical block pool", timeout=60_000)
    settle(page)
    page.get_by_text("Per-sequence new tokens (2)").click()
    _edit_length(page, 1, "99", across=0.42)  # the "new" column, between seq and ctx
    expect(page).to_have_url(re.compile(r"new_tokens=3(%2C|,)16(&|$)"), timeout=WAIT)
    note = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    expect(note).to_contain_text("new_tokens of sequence 1: 99 is above the maximum, 16; using 16.", timeout=WAIT)
    tokens = page.locator("[data-testid=stMetric]").filter(has_text="Tokens (logical)")
    expect(tokens).to_contain_text("19 new (queries)", timeout=WAIT)
    _edit_length(page, 1, "7", across=0.42)
    expect(page).to_have_url(re.compile(r"new_tokens=3(%2C|,)7(&|$)"), timeout=WAIT)
    expect(tokens).to_contain_text("10 new (queries)", timeout=WAIT)
    no_exception(page)
    no_error(page)


def test_clicking_the_selected_context_mode_keeps_it(server, page):
    """Review at 1280x720: a click on the already selected "Ragged" emptied the
    segmented control and the sidebar fell back to "Same for all" (128 tokens each)."""
    page.goto(f"{server}/block_table?{urlencode({'batch': '4', 'ctx_mode': 'ragged', 'lo': '16', 'hi': '300'})}")
    sidebar = page.locator("[data-testid=stSidebar]")
    ragged = sidebar.locator("[data-testid=stButtonGroup] button", has_text="Ragged").first
    expect(ragged).to_be_visible(timeout=60_000)
    settle(page)
    ragged.click()
    settle(page)
    expect(page).to_have_url(re.compile(r"ctx_mode=ragged"), timeout=WAIT)
    expect(ragged).to_have_attribute("aria-checked", "true", timeout=WAIT)  # shown selected again
    expect(sidebar.get_by_text("Spread", exact=True)).to_be_visible(timeout=WAIT)
    expect(sidebar.get_by_label("Tokens per sequence", exact=True)).to_have_count(0, timeout=WAIT)
    no_exception(page)


#: The top tick label of each colour bar and the last line of the bar's title, in px from the top.
_BAR_TOP = """() => [...document.querySelectorAll('.colorbar')].map(cb => {
    const lines = [...cb.querySelectorAll('.cbtitle tspan.line')].filter(t => t.textContent.trim());
    const ticks = [...cb.querySelectorAll('.cbaxis text, g.ycbaxis text, g.tick text')];
    return [Math.max(...lines.map(t => t.getBoundingClientRect().bottom)),
            Math.min(...ticks.map(t => t.getBoundingClientRect().top))];
})"""


def test_colour_bar_top_label_stays_clear_of_its_title(server, page):
    """Review at 1280x720 (?batch=2&ctx_mode=uniform&ctx=20&block=8): the colour bar's
    top tick "6" touched its title "colour = physical block id"."""
    page.goto(f"{server}/block_table?{urlencode({'batch': '2', 'ctx_mode': 'uniform', 'ctx': '20', 'block': '8'})}")
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
    settle(page)
    expect(page.locator(".colorbar").first).to_be_visible(timeout=WAIT)
    bars = page.evaluate(_BAR_TOP)
    assert len(bars) >= 2  # the table's and the walk's
    for title_bottom, tick_top in bars:
        assert tick_top >= title_bottom + 2, bars
    no_exception(page)


#: The page's own text (outside the charts and grids) that does not fit its box: a text
#: Streamlit cuts with an ellipsis, or any of a metric card's that runs past its box.
_CUT_TEXT = """() => [...document.querySelectorAll('[data-testid=stMain] *')].filter(el => {
    if (!el.textContent.trim() || !el.getBoundingClientRect().width || el.closest('.js-plotly-plot, [data-testid=stDataFrame]'))
        return false;
    const cuts = getComputedStyle(el).textOverflow === 'ellipsis' || el.closest('[data-testid=stMetric]');
    return cuts && el.scrollWidth > el.clientWidth + 1;
}).map(el => el.textContent.trim().slice(0, 80))"""


@pytest.mark.parametrize("present", [False, True])
def test_no_card_text_is_cut_at_1280(server, browser, present):
    """Review at 1280x720 (#3b): the Tokens card's note read "404 stored (physical) …"
    with a shared prefix and draft tokens. Every card's label, value and note, and the
    page's other text, fits at 1280x720 in both modes: with the sidebar's shared
    prefix, a window and draft tokens, Sharing off and on."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    # Six-figure counts: "130,947 stored (physical)" alone is wider than the Tokens card in normal mode.
    query = {"batch": "8", "ctx_mode": "ragged", "lo": "10000", "hi": "30000", "block": "16", "prefix": "5000",
             "window": "4096", "new_tokens": "16", **({"present": "1"} if present else {})}
    page.goto(f"{server}/block_table?{urlencode(query)}")
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
    tokens = page.locator("[data-testid=stMetric]").filter(has_text="Tokens (logical)")
    for sharing in (False, True):
        if sharing:
            page.get_by_text("Sharing: n samples per request, a common prompt").click()
            expect(page.get_by_text(re.compile(r"Sharing saves [\d,]+ physical blocks? of [\d,]+"))).to_be_visible(
                timeout=WAIT)
        expect(tokens).to_contain_text(re.compile(r"\d stored \(physical\)"), timeout=WAIT)
        expect(tokens).to_contain_text("128 new (queries)", timeout=WAIT)
        settle(page)
        expect(page.locator("[data-testid=stMetric]")).to_have_count(5, timeout=WAIT)
        assert page.evaluate(_CUT_TEXT) == [], (present, sharing)
    no_exception(page)
    no_error(page)
    context.close()


@pytest.mark.parametrize("present", [False, True])
def test_a_card_value_too_long_for_its_card_is_drawn_smaller_not_cut(server, browser, present):
    """Back row, issue 27: at ?batch=1024&ctx=32000 the Tokens card's value
    "32,768,000" ran past its card at 1280x720 in normal mode (a number cannot wrap).
    The row's values are drawn smaller (``ui.tables.value_scale``) and nothing is cut."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    query = {"batch": "1024", "ctx_mode": "uniform", "ctx": "32000", "prefix": "8000", "new_tokens": "16",
             "block": "16", **({"present": "1"} if present else {})}
    page.goto(f"{server}/block_table?{urlencode(query)}")
    tokens = page.locator("[data-testid=stMetric]").filter(has_text="Tokens (logical)")
    expect(tokens.locator("[data-testid=stMetricValue]")).to_have_text("32,768,000", timeout=120_000)
    expect(page.locator("[data-testid=stMetric]")).to_have_count(5, timeout=WAIT)
    settle(page)
    assert page.evaluate(_CUT_TEXT) == [], present
    no_exception(page)
    no_error(page)
    context.close()
