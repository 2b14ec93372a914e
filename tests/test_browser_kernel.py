"""In a real browser: the Inside the kernel page (fixtures and shared checks: ``browser_support``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import expect  # noqa: E402

from browser_support import SHOTS, full_screenshot, no_exception, settle  # noqa: E402

pytestmark = pytest.mark.browser


def test_inside_the_kernel_in_browser(server, page):
    query = {"batch": "4", "ctx_mode": "ragged", "lo": "16", "hi": "256", "spread": "long-tail", "seed": "0",
             "block": "16"}
    page.goto(f"{server}/inside_the_kernel?{urlencode(query)}")
    expect(page.locator(".js-plotly-plot >> text=The tiles the kernel walks")).to_be_visible(timeout=60_000)

    # the CPU's own plan walks this batch as one split: the page opens on an overridden plan that merges, and says so
    expect(page.locator(".js-plotly-plot >> text=Merging the splits")).to_be_visible(timeout=60_000)
    expect(page.locator("[data-testid=stAlertContentInfo]").filter(
        has_text="this page opened with Override plan on")).to_be_visible(timeout=30_000)
    splits = page.get_by_role("spinbutton", name="Splits", exact=True)
    expect(splits).to_be_enabled(timeout=30_000)
    splits.fill("2")
    splits.press("Enter")
    expect(page.locator(".js-plotly-plot >> text=Merging the splits")).to_be_visible(timeout=60_000)
    page.get_by_role("combobox", name=re.compile("BLOCK_N")).click()
    page.get_by_role("option", name="32", exact=True).click()
    walk = page.locator(".st-key-ik_walk_chart .js-plotly-plot >> visible=true").first
    expect(walk).to_contain_text("of 32 lanes", timeout=60_000)
    settle(page)
    metric = page.locator("[data-testid=stMetric]").filter(has_text="Error vs reference")
    expect(metric).to_contain_text("matches", timeout=30_000)
    no_exception(page)
    full_screenshot(page, SHOTS / "inside_the_kernel.png")


@pytest.mark.parametrize("present", [False, True])
def test_kernel_card_values_sit_on_one_line_at_1280(server, browser, present):
    """Issue 27, review 3: in presentation mode at 1280x720 the "Block-table lookups"
    label wrapped onto two lines, so its value sat a line lower than the other cards'.
    Every card's label takes one line and the values share one baseline."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{server}/inside_the_kernel?{urlencode({'present': '1'} if present else {})}")
    values = page.locator("[data-testid=stMetric] [data-testid=stMetricValue]")
    expect(values).to_have_count(5, timeout=60_000)
    expect(page.locator("[data-testid=stMetric]").filter(has_text="Error vs reference")).to_contain_text(
        "matches", timeout=60_000)
    settle(page)
    tops = [values.nth(i).bounding_box()["y"] for i in range(5)]
    assert max(tops) - min(tops) <= 1, (present, tops)
    no_exception(page)
    context.close()
