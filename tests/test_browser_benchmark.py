"""In a real browser: the Decode benchmark page: a run, its progress in view at 1280x720 in presentation mode, the shared-prefix option, its cards at 1280 px, a second run, recorded GPU runs, presentation mode's text sizes (with the Serving page's cards and slider) (fixtures and shared checks: ``browser_support``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect  # noqa: E402

from browser_support import LABELS, SHOTS, TINY, WAIT, full_screenshot, no_error, no_exception, settle  # noqa: E402

pytestmark = pytest.mark.browser
#: An error chart's pass mark alone (its subtitle says what the mark means: "✓ pass ≤ 1").
PASS = re.compile(r"^\s*✓\s*$")


def test_benchmark_run_in_browser(server, page):
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    page.get_by_text("Include Triton (simple grid)").click()
    page.wait_for_timeout(500)
    run.click()
    page.wait_for_selector("text=Compare runs", timeout=180_000)
    page.wait_for_selector(".js-plotly-plot >> text=Error vs float64 reference", timeout=30_000)
    no_exception(page)
    no_error(page)
    metrics = page.locator("[data-testid=stMetric]")
    for label in (*LABELS, "Triton (simple grid)"):
        expect(metrics.filter(has_text=label).first).to_be_visible(timeout=WAIT)
    marks = page.locator(".js-plotly-plot text")
    expect(marks.filter(has_text=PASS)).to_have_count(4, timeout=WAIT)
    expect(marks.filter(has_text="FAIL")).to_have_count(0, timeout=WAIT)
    expect(page.get_by_role("button", name="Download CSV")).to_be_visible(timeout=WAIT)
    full_screenshot(page, SHOTS / "decode_benchmark.png")

    # fp8 end to end: the sidebar's KV-cache dtype, a run, every kernel correct against the
    # dequantized reference, and the quantization error drawn apart from the kernels' errors
    page.set_viewport_size({"width": 1600, "height": 1000})
    kv_dtype = page.get_by_role("combobox", name="KV-cache dtype")
    kv_dtype.click()
    kv_dtype.press("ArrowDown")  # opens the list where a click alone left it shut (seen in headless Chromium)
    page.get_by_role("option", name="fp8 e4m3", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]kv_dtype=float8_e4m3fn(&|$)"), timeout=WAIT)
    settle(page)
    run.click()
    expect(page.get_by_text("Run #2", exact=True)).to_be_visible(timeout=180_000)
    # the second table, accuracy and bandwidth: implementation, then correct
    correct = page.locator("[data-testid=stDataFrame]").nth(1).locator("td[role=gridcell][aria-colindex='2']")
    expect(correct).to_have_text(["yes"] * 4, timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=fp8 quantization error")).to_be_visible(
        timeout=WAIT)
    expect(marks.filter(has_text=PASS)).to_have_count(4, timeout=WAIT)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "decode_benchmark_fp8.png")


def test_benchmark_progress_in_view_on_a_projector(server, browser):
    """Issue 27: at 1280x720 in presentation mode, Run showed only the status box's
    header at the bottom edge, under the attention note, its step text and bar below
    the fold. The box sits under the buttons, as the sweep's progress: the bar and its
    text in view, with no scrolling, while the run is in progress."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    # Gemma-2's sliding layer: the attention note over which the box used to land;
    # head_dim 256 keeps the interpreted Triton kernel's calls a second or so each.
    query = {"present": "1", "preset": "Gemma-2-9B", "layer": "sliding", "batch": "2", "ctx_mode": "uniform",
             "ctx": "37", "warmup": "0", "iters": "2"}
    page.goto(f"{server}/decode_benchmark?{urlencode(query)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    expect(page.locator("[data-testid=stMainBlockContainer] [data-testid=stAlert]").filter(
        has_text="Attention: sliding window")).to_be_visible(timeout=WAIT)
    settle(page)
    run.click()
    progress = page.locator("[data-testid=stProgress]")
    expect(progress).to_contain_text(re.compile(r"preparing inputs|timed calls"), timeout=WAIT)  # in progress
    expect(progress).to_be_in_viewport(ratio=1.0)  # the whole bar and its text
    assert page.evaluate("document.querySelector('[data-testid=stMain]').scrollTop") == 0
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "benchmark_progress_present_1280.png"))
    settle(page, 300_000)  # the run ends before the next test's
    no_exception(page)
    context.close()


#: The computed font size (px) of every card's note (a metric's delta: its box and the
#: text in it) and of a slider's value and ends, with the text each holds (not the
#: delta's arrow, an icon at 0.9 em of the note).
_NOTE_PX = """() => [...document.querySelectorAll(
    '[data-testid=stMetricDelta], [data-testid=stMetricDelta] *, [data-testid=stSliderThumbValue], '
    + '[data-testid=stSliderThumbValue] *, [data-testid=stSliderTickBar], [data-testid=stSliderTickBar] *')]
  .filter(e => !e.closest('svg') && e.textContent.trim())
  .map(e => [e.getAttribute('data-testid') || e.tagName, e.textContent.trim(), parseFloat(getComputedStyle(e).fontSize)])"""


def test_card_notes_and_slider_values_at_body_size_in_presentation(server, browser):
    """Issue 27: in presentation mode a card's note under its value ("of 64 · 60.9%",
    "4.38% of allocated") and the slider's value measured 15.75 px (Streamlit's
    0.875 rem) while the body's text is 18 px: every one is 18 px now, on the Serving
    page (cards, step slider) and on the Decode benchmark's shared-prefix cards."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    pages = {"serving_simulation": {"present": "1"},
             "decode_benchmark": {**TINY, "present": "1", "batch": "4", "ctx": "64", "prefix": "32",
                                  "prefix_groups": "2"}}
    for name, query in pages.items():
        page.goto(f"{server}/{name}?{urlencode(query)}")
        expect(page.locator("[data-testid=stMetricDelta]").first).to_be_visible(timeout=60_000)
        settle(page)
        sizes = page.evaluate(_NOTE_PX)
        kinds = {kind for kind, _, _ in sizes}
        assert "stMetricDelta" in kinds and (name != "serving_simulation" or "stSliderThumbValue" in kinds), sizes
        small = [s for s in sizes if s[2] < 18]
        assert not small, (name, small)
        no_exception(page)
    context.close()


def test_shared_prefix_benchmark_in_browser(server, page):
    # a shared prefix from the URL: the prefix-aware kernel races beside the others, correct,
    # and the page reads the KV bytes logically and once per group
    query = {**TINY, "batch": "4", "ctx": "64", "prefix": "32", "prefix_groups": "2"}
    page.goto(f"{server}/decode_benchmark?{urlencode(query)}")
    expect(page.get_by_role("spinbutton", name="Prefix groups")).to_have_value("2", timeout=60_000)
    expect(page.get_by_text("Include Triton (prefix-aware)")).to_be_visible(timeout=WAIT)
    metrics = page.locator("[data-testid=stMetric]")
    expect(metrics.filter(has_text="K+V read, unique")).to_contain_text("49.2 kB", timeout=WAIT)
    page.get_by_role("button", name="Run benchmark").click()
    expect(page.get_by_text("Run #1", exact=True)).to_be_visible(timeout=180_000)
    expect(metrics.filter(has_text="Triton (prefix-aware)")).to_be_visible(timeout=WAIT)
    # the second table, accuracy and bandwidth: implementation, then correct
    correct = page.locator("[data-testid=stDataFrame]").nth(1).locator("td[role=gridcell][aria-colindex='2']")
    expect(correct).to_have_text(["yes"] * 4, timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=Bandwidth on unique bytes")).to_be_visible(timeout=WAIT)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "decode_benchmark_shared_prefix.png")


def test_four_benchmark_cards_hold_the_widest_value_at_1280(server, browser):
    # The recorded H200 runs keep the page in µs while the interpreted Triton kernel takes
    # 100+ ms, so a card can read "888,000 µs", the widest value three significant digits
    # write (the card font's digits are all one width). Headless Chromium hides scrollbars; a
    # desktop browser's takes 10 px of a 1280 px window, so the page is 1270 px wide here.
    context = browser.new_context(viewport={"width": 1270, "height": 720})
    page = context.new_page()
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    page.get_by_text("Include Triton (simple grid)").click()
    expect(page.get_by_role("checkbox", name="Include Triton (simple grid)")).to_be_checked(timeout=WAIT)
    settle(page)
    run.click()
    expect(page.get_by_text("Compare runs")).to_be_visible(timeout=180_000)
    settle(page)
    values = page.locator("[data-testid=stMetric] [data-testid=stMetricValue]")
    expect(values).to_have_count(4, timeout=WAIT)
    expect(values.first).to_contain_text(re.compile(r"\d (µs|ms|s)$"), timeout=WAIT)
    widths = values.evaluate_all("""values => values.map(v => {
        const box = v.firstElementChild, style = getComputedStyle(box);
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
        return {shown: box.innerText, cut: box.scrollWidth > box.clientWidth,
                box: box.getBoundingClientRect().width, widest: ctx.measureText('888,000 µs').width};
    })""")
    values.first.evaluate("e => e.scrollIntoView({block: 'center'})")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "benchmark_cards_1280.png"))
    context.close()
    for card in widths:
        assert not card["cut"] and card["widest"] <= card["box"], widths


#: True once the run's progress says Triton's turn has come (the CPU times one
#: implementation after another, Triton last): 1 to 3 of the (estimated) timed calls left;
#: before its turn the count left is larger. Each count seen is kept in ``window.seen``.
_TRITONS_TURN = r"""() => {
    const m = document.body.innerText.match(/([\d,]+) of ([\d,]+) timed calls/);
    const shown = m ? m[0] : (document.body.innerText.includes('Compare runs') ? 'run over' : 'no count');
    window.seen = window.seen || [];
    if (window.seen[window.seen.length - 1] !== shown) window.seen.push(shown);
    if (!m) return false;
    const [done, total] = [m[1], m[2]].map(t => Number(t.replaceAll(',', '')));
    return done > 0 && total - done >= 1 && total - done <= 3;
}"""


def test_second_run_click_replaces_the_first_run(server, page):
    # head_dim 256 at the CPU's cap (4 x max(8 x 64, 32 x 64) = 8,192) makes each interpreted
    # Triton call about half a second on a 2-core machine: long enough to
    # click again mid-run.
    query = {"batch": "4", "ctx_mode": "uniform", "ctx": "64", "warmup": "1", "iters": "3", "preset": "Custom",
             "heads": "32", "kv_heads": "8", "head_dim": "256"}
    page.goto(f"{server}/decode_benchmark?{urlencode(query)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    run.click()
    try:  # polled every 100 ms: a frame-timed poll can stall while the browser's cores are busy
        page.wait_for_function(_TRITONS_TURN, polling=100, timeout=300_000)
    except PlaywrightTimeout:
        raise AssertionError(f"Triton's turn not seen; progress shown: {page.evaluate('window.seen')}") from None
    run.click()
    expect(page.get_by_text("Your previous run is still finishing")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("another session")).to_have_count(0, timeout=WAIT)
    page.wait_for_selector("text=Compare runs", timeout=300_000)
    settle(page, 300_000)
    # The stopped run left no entry of its own.
    expect(page.get_by_text("Run #1", exact=True)).to_be_visible(timeout=WAIT)
    metrics = page.locator("[data-testid=stMetric]")
    for label in LABELS:
        expect(metrics.filter(has_text=label).first).to_be_visible(timeout=WAIT)
    no_exception(page)


def test_recorded_gpu_runs_beside_a_live_cpu_run(server, page):
    # A talk from a laptop: the live run is the CPU's, the GPU numbers are the shipped
    # H200 runs, each labelled as what it is; screenshots at a projector's 1280x720.
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    section = page.locator("[data-testid=stExpander]").filter(has_text="Recorded on a GPU")
    expect(section).to_contain_text("NVIDIA H200 (recorded, not this machine)", timeout=WAIT)
    expect(page.get_by_text("runs recorded on an NVIDIA H200 are under")).to_be_visible(timeout=WAIT)
    run.click()
    page.wait_for_selector("text=Compare runs", timeout=180_000)
    no_exception(page)
    no_error(page)
    metrics = page.locator("[data-testid=stMetric]")
    for label in LABELS:  # the live CPU run
        expect(metrics.filter(has_text=label).first).to_be_visible(timeout=WAIT)
    expect(page.get_by_text("CPU mode: these are not GPU timings.")).to_be_visible(timeout=WAIT)
    expect(section.locator(".js-plotly-plot").first).to_contain_text("Recorded on NVIDIA H200", timeout=WAIT)
    expect(section).to_contain_text("driver 580.159.04", timeout=WAIT)
    expect(section.locator("[data-testid=stDataFrame]")).to_have_count(1, timeout=WAIT)
    expect(page.locator(".js-plotly-plot").filter(has_text="Latency per decode step (cpu)")).to_have_count(
        1, timeout=WAIT)
    SHOTS.mkdir(parents=True, exist_ok=True)
    section.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1000)  # plotly lays out once visible
    page.screenshot(path=str(SHOTS / "recorded_section_1280.png"))
    full_screenshot(page, SHOTS / "recorded_beside_live.png")

    # a sidebar configuration that was recorded is highlighted, and said to be
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{server}/decode_benchmark?" + urlencode({
        **TINY, "batch": "4", "ctx": "2048", "heads": "32", "kv_heads": "8", "head_dim": "128", "block": "16"}))
    expect(section).to_contain_text("batch 4 × 2,048 tokens, was recorded", timeout=60_000)
    expect(section.locator(".js-plotly-plot").first).to_contain_text("your configuration", timeout=WAIT)
    no_exception(page)
    section.locator(".js-plotly-plot").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(SHOTS / "recorded_highlight_1280.png"))


#: Per text in the page's tables (``st.table``), its font size (px), and per table
#: whether it is wider than its box (a column cut or scrolled away).
_TABLE_TEXT = """() => [[...document.querySelectorAll('[data-testid=stTable] :is(th, td)')]
  .map(c => parseFloat(getComputedStyle(c).fontSize)),
  [...document.querySelectorAll('[data-testid=stTable]')].map(t => t.scrollWidth > t.clientWidth)]"""
#: The font size (px) of each inline code on screen, in the page's text and captions.
_CODE_PX = """() => [...document.querySelectorAll('[data-testid=stMarkdownContainer] code, [data-testid=stCaptionContainer] code')]
  .filter(c => c.getBoundingClientRect().height > 0).map(c => parseFloat(getComputedStyle(c).fontSize))"""
#: Per sidebar widget label named, its height over its line height (1: one line); per
#: segmented control, its buttons' tops and whether any button's text overflows it.
_SIDEBAR = """names => {
  const labels = [...document.querySelectorAll('[data-testid=stSidebar] [data-testid=stWidgetLabel]')];
  const lines = Object.fromEntries(names.map(n => {
    const l = labels.find(e => e.innerText.trim() === n), p = l.querySelector('p');
    return [n, Math.round(p.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight))];
  }));
  const groups = [...document.querySelectorAll('[data-testid=stSidebar] [data-testid=stButtonGroup]')].map(g => {
    const buttons = [...g.querySelectorAll('button')].filter(b => b.innerText.trim());
    return {tops: [...new Set(buttons.map(b => Math.round(b.getBoundingClientRect().top)))].length,
            cut: buttons.some(b => b.scrollWidth > b.clientWidth || b.getBoundingClientRect().right > g.closest('[data-testid=stSidebarContent]').getBoundingClientRect().right)};
  });
  return {lines, groups};
}"""


def test_tables_code_and_sidebar_at_the_back_row(server, browser):
    """Issue 27, the back row, at 1280x720: presentation mode's tables (the results,
    the run history, the recorded runs) are HTML tables whose text is 18 px, every
    column whole (Streamlit's grid drew 15.75 px on its canvas, whatever the page's
    style); inline code is at least 12 px in normal mode (10.5 px in a caption) and
    18 px in presentation mode; the sidebar's labels keep to one line and its
    segmented controls to one row (issue 27: "Compute dtype" and "Timed iterations"
    wrapped, "Same for all / Per sequence" took two rows and cut a border)."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    for extra, floor in (({}, 12), ({"present": "1"}, 18)):
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(f"{server}/decode_benchmark?{urlencode({**TINY, **extra})}")
        run = page.get_by_role("button", name="Run benchmark")
        run.wait_for(timeout=60_000)
        settle(page)
        code = page.evaluate(_CODE_PX)
        assert code and min(code) >= floor, (extra, code)
        sidebar = page.evaluate(_SIDEBAR, ["Compute dtype", "Block size", "Warm-up", "Iterations", "New tokens"])
        assert set(sidebar["lines"].values()) == {1}, (extra, sidebar)
        assert len(sidebar["groups"]) >= 2 and all(g == {"tops": 1, "cut": False} for g in sidebar["groups"]), (
            extra, sidebar)
        if not extra:
            continue
        run.click()
        expect(page.get_by_text("Compare runs")).to_be_visible(timeout=180_000)
        settle(page)
        expect(page.locator("[data-testid=stDataFrame]")).to_have_count(0, timeout=WAIT)
        expect(page.locator("[data-testid=stTable]")).to_have_count(4, timeout=WAIT)  # 2 results, history, recorded
        sizes, wide = page.evaluate(_TABLE_TEXT)
        assert min(sizes) >= 18 and not any(wide), (sizes, wide)
        no_exception(page)
        full_screenshot(page, SHOTS / "decode_benchmark_present_tables.png")
    context.close()
