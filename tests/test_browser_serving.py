"""In a real browser: the Serving simulation page: a run, and the pool by reference count (fixtures and shared checks: ``browser_support``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import expect  # noqa: E402

from browser_support import SHOTS, TINY, WAIT, full_screenshot, no_error, no_exception, settle  # noqa: E402

pytestmark = pytest.mark.browser


def test_serving_simulation_in_browser(server, page):
    page.goto(f"{server}/serving_simulation?{urlencode(TINY)}")
    title = page.locator(".js-plotly-plot >> text=/Physical block pool after step \\d+/")
    expect(title).to_be_visible(timeout=60_000)
    step = int(re.search(r"step (\d+)", title.text_content())[1])
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=30_000)  # pool, table, timeline, trade-off

    slider = page.get_by_role("slider")
    slider.focus()
    slider.press("ArrowLeft")
    expect(page.locator(".js-plotly-plot >> text=" + f"Physical block pool after step {step - 1}")).to_be_visible(
        timeout=30_000)
    slider.press("ArrowRight")
    expect(page.locator(".js-plotly-plot >> text=" + f"Physical block pool after step {step}")).to_be_visible(
        timeout=30_000)

    page.get_by_role("button", name="Time Triton on this step").click()
    expect(page.locator("[data-testid=stMetric]").filter(has_text=f"Triton decode at step {step}")).to_be_visible(
        timeout=120_000)
    settle(page)
    page.get_by_role("button", name="Time Triton per block size").click()
    expect(page.locator(".js-plotly-plot >> text=Triton latency (ms)")).to_be_visible(timeout=180_000)
    settle(page)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "serving_simulation.png")


def test_serving_sharing_pool_by_reference_count_in_browser(server, page):
    """With sharing, the pool's colour mode comes from the URL and goes back to it; by reference count the legend
    names the levels and the sharing marks."""
    sharing = {"sv_num_blocks": "96", "sv_block_size": "8", "sv_max_batch": "6", "sv_rate": "0.3",
               "sv_prompt_hi": "96", "sv_output_hi": "48", "sv_steps": "120", "sv_system_prompt": "20",
               "sv_samples": "3", "sv_pool_colour": "reference count"}
    page.goto(f"{server}/serving_simulation?{urlencode({**TINY, **sharing})}")
    pool = page.locator(".js-plotly-plot").filter(has_text=re.compile(r"Physical block pool after step \d+"))
    for name in ("1 sequence", "2 sequences", "3–4 sequences", "5–6 sequences", "copy-on-write", "freed"):
        expect(pool.get_by_text(name, exact=True)).to_be_visible(timeout=60_000)
    no_exception(page)
    no_error(page)
    pool.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "serving_pool_reference_count.png"))
    settle(page)
    page.locator("[data-testid=stButtonGroup]").get_by_text("sequence", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]sv_pool_colour=sequence(&|$)"), timeout=WAIT)
    expect(pool.get_by_text("5–6 sequences", exact=True)).to_have_count(0, timeout=WAIT)
    expect(pool.get_by_text("copy-on-write", exact=True)).to_be_visible(timeout=WAIT)
    no_exception(page)
