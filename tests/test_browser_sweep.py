"""In a real browser: the Sweep page: run (its progress in view at 1280x720, in presentation mode too), cancel (at once) and compare (the points table's headers whole); its controls on a projector; its controls in a copied URL (fixtures and shared checks: ``browser_support``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError, expect  # noqa: E402

from browser_support import SHOTS, TINY, WAIT, full_screenshot, no_error, no_exception, settle  # noqa: E402

from explorer.sweep import view  # noqa: E402

pytestmark = pytest.mark.browser
#: The grid's padding left and right of a header's text (glide-data-grid's cellHorizontalPadding).
HEADER_PADDING_PX = 8


def test_sweep_cancel_run_and_compare_in_browser(server, browser, tmp_path):
    # At a projector's 1280x720: the progress must be in view once Run is pressed.
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    # Many timed calls keep each point busy for seconds on a GPU too (the CPU caps
    # them); head_dim 256 makes the interpreted Triton kernel's points about 3x longer.
    page.goto(f"{server}/sweep?{urlencode({**TINY, 'iters': '2000', 'head_dim': '256'})}")
    run = page.get_by_role("button", name="Run sweep")
    run.wait_for(timeout=60_000)
    # Six points, the largest up to a second a call on a CPU.
    for label, value in (("From", "16"), ("To", "2048"), ("Points", "6")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value, timeout=30_000)
        settle(page)
    n = 6
    expect(page.get_by_text(re.compile(rf"^{n} points: 16, .*, 2k "))).to_be_visible(timeout=30_000)
    settle(page)
    page.get_by_role("button", name="Clear cache").click()  # every point timed here, none from an earlier test
    settle(page)

    run.click()
    progress = page.locator("[data-testid=stProgress]")
    expect(progress).to_contain_text(re.compile(rf"^Point \d of {n}: "), timeout=WAIT)
    expect(progress).to_be_in_viewport(ratio=1.0)  # the whole bar and its text, with no scrolling
    box = progress.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 720, box
    assert page.evaluate("document.querySelector('[data-testid=stMain]').scrollTop") == 0

    # Cancel once the first point is in: the sweep ends at once, keeping what it did.
    expect(page.locator(".js-plotly-plot >> text=Latency across the sweep").first).to_be_visible(timeout=120_000)
    cancel = page.get_by_role("button", name="Cancel")
    cancel.click()
    expect(page.get_by_text("Cancelled after", exact=False)).to_be_visible(timeout=10_000)
    counter = page.get_by_text(re.compile(rf"^\d+ of {n} points$"))
    expect(counter).to_be_visible(timeout=WAIT)
    done = int(counter.inner_text().split()[0])
    assert 1 <= done < n
    expect(cancel).to_be_disabled(timeout=WAIT)
    expect(page.get_by_role("button", name="Run sweep")).to_be_enabled(timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=Latency across the sweep").first).to_be_visible(timeout=WAIT)
    page.wait_for_timeout(1500)
    expect(counter).to_have_text(f"{done} of {n} points", timeout=WAIT)  # it stays stopped
    no_exception(page)

    # Run it again to the end, with a naive budget tight enough to skip its larger
    # points: the points done come from the cache.
    budget = page.get_by_role("spinbutton", name="Naive budget per point (s)")
    budget.fill("0.02")
    budget.press("Enter")
    expect(budget).to_have_value("0.02", timeout=30_000)  # "%.3g" drops trailing zeros (sprintf-js)
    settle(page)
    page.get_by_role("button", name="Run sweep").click()
    expect(page.get_by_text(f"{n} of {n} points")).to_be_visible(timeout=300_000)
    settle(page)
    expect(page.locator(".js-plotly-plot")).to_have_count(3, timeout=30_000)
    expect(page.locator(".js-plotly-plot >> text=Speedup of Triton over the others")).to_be_visible(timeout=30_000)
    no_exception(page)
    no_error(page)
    _headers_fit(page)
    full_screenshot(page, SHOTS / "sweep.png")

    # Download the CSV and upload it back: a second source and the ratio chart appear.
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name="Download CSV").click()
    saved = tmp_path / "sweep_context_len.csv"
    download.value.save_as(saved)
    assert saved.read_text().startswith("source,axis,value,implementation")
    page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(str(saved))
    expect(page.locator(".js-plotly-plot >> text=Time ratio between the two sweeps")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot").first).to_contain_text("uploaded: sweep_context_len.csv", timeout=30_000)
    no_exception(page)
    context.close()


def _headers_fit(page) -> None:
    """Every header of the points table is whole: the table's grid draws its headers
    on a canvas (cut to the column's width), so the text's width in the grid's header
    font (Streamlit's: the body font at 14 px), plus the cell's padding, must fit the
    column's width the page sets."""
    grid = page.locator("[data-testid=stDataFrame]").first
    grid.scroll_into_view_if_needed()
    headers = grid.locator("th")
    expect(headers.first).to_be_attached(timeout=WAIT)
    labels = headers.all_inner_texts()
    assert "context length" in labels  # named without its unit, which is in the tooltip
    widths = {c.label: c.width for c in view.COLUMNS if c.width} | {
        view.axis_column("context_len").label: view.axis_column("context_len").width}
    measured = page.evaluate("""labels => document.fonts.ready.then(() => {
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = `400 14px ${getComputedStyle(document.body).fontFamily}`;
        return Object.fromEntries(labels.map(l => [l, ctx.measureText(l).width]));
    })""", labels)
    cut = {label: (round(measured[label]), widths[label]) for label in labels
           if label in widths and measured[label] + 2 * HEADER_PADDING_PX > widths[label]}
    assert cut == {}, f"headers wider than their columns (text px, column px): {cut}"


# What in a row of controls a projector's width may not squeeze: a label on two lines, a
# number box whose value is cut or that lost its step buttons (Streamlit drops them from a
# narrow box), a button whose text is cut. ``root`` is one element inside the row's block.


_SQUEEZED_CONTROLS_JS = """root => {
    let block = root;
    while (block && block.dataset.testid !== 'stVerticalBlock') block = block.parentElement;
    const lines = el => {
        const range = document.createRange();
        range.selectNodeContents(el);
        return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
    };
    const problems = [];
    for (const label of block.querySelectorAll('[data-testid=stWidgetLabel] p, [data-testid=stCheckbox] p')) {
        if (lines(label) > 1) problems.push(`label "${label.innerText}" on ${lines(label)} lines`);
    }
    for (const box of block.querySelectorAll('[data-testid=stNumberInput]')) {
        const name = box.querySelector('[data-testid=stWidgetLabel]').innerText.trim();
        const input = box.querySelector('input');
        if (input.scrollWidth > input.clientWidth || input.clientWidth < 9 * input.value.length + 8)
            problems.push(`"${name}": ${input.value} in ${input.clientWidth} px`);
        if (!box.querySelector('[data-testid=stNumberInputStepUp]')) problems.push(`"${name}" lost its step buttons`);
    }
    for (const button of block.querySelectorAll('button[data-testid^=stBaseButton]')) {
        if (button.scrollWidth > button.clientWidth + 1) problems.push(`button "${button.innerText}" cut`);
    }
    return problems;
}"""


def test_sweep_progress_stays_in_view_in_presentation_mode(server, browser):
    # Issue 27: presentation mode's larger page text (18 px, and its widgets with it) must
    # not push a running sweep's progress out of a projector's 1280x720.
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{server}/sweep?{urlencode({**TINY, 'iters': '2000', 'head_dim': '256', 'present': '1'})}")
    run = page.get_by_role("button", name="Run sweep")
    run.wait_for(timeout=60_000)
    expect(page.locator("html")).to_have_css("font-size", "18px", timeout=WAIT)
    settle(page)
    page.get_by_role("button", name="Clear cache").click()  # every point timed here, none from an earlier test
    settle(page)
    run.click()
    progress = page.locator("[data-testid=stProgress]")
    expect(progress).to_contain_text(re.compile(r"^Point \d+ of \d+: "), timeout=WAIT)
    expect(progress).to_be_in_viewport(ratio=1.0)  # the whole bar and its text, with no scrolling
    assert page.evaluate("document.querySelector('[data-testid=stMain]').scrollTop") == 0
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "sweep_progress_present_1280.png"))
    page.get_by_role("button", name="Cancel").click()
    # after the first point or before it, whichever the click met
    expect(page.get_by_text(re.compile(r"^Cancelled (after|before) "))).to_be_visible(timeout=30_000)
    no_exception(page)
    context.close()


@pytest.mark.parametrize("width, height, present", [(1280, 720, False), (1920, 1080, False), (1280, 720, True)])
def test_sweep_controls_are_readable_on_a_projector(server, browser, width, height, present):
    # "Points" had 0.7 of a five-column row: at 1280 px its box lost its step buttons and
    # "Naive budget per point (s)" put "(s)" on a line of its own. The widest values go in;
    # in presentation mode too, whose text is larger (and its page's padding smaller).
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{server}/sweep?{urlencode({**TINY, **({'present': '1'} if present else {})})}")
    expect(page.get_by_role("button", name="Run sweep")).to_be_visible(timeout=60_000)
    for label, value in (("To", "1048576"), ("From", "1048575"), ("Points", "12"),
                         ("Naive budget per point (s)", "600")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(re.compile(rf"^{value}(\.00)?$"), timeout=WAIT)
        settle(page)
    no_exception(page)
    controls = page.get_by_role("button", name="Run sweep").locator("xpath=ancestor::*[@data-testid='stVerticalBlock'"
                                                                    " and .//*[text()='Sweep over']][1]")
    expect(controls).to_have_count(1, timeout=WAIT)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:  # a wait, not one look: the columns lay out again after each rerun
        page.wait_for_function(f"root => ({_SQUEEZED_CONTROLS_JS})(root).length === 0",
                               arg=controls.element_handle(), timeout=15_000)
    except PlaywrightTimeoutError:
        pytest.fail(f"at {width}x{height}{' present' * present}: {controls.evaluate(_SQUEEZED_CONTROLS_JS)}")
    finally:
        page.screenshot(path=str(SHOTS / f"sweep_controls_{width}{'_present' * present}.png"))
        context.close()


def test_sweep_page_controls_travel_in_a_copied_url(server, browser, page):
    # A speaker's deck of links: set the Sweep page's controls, copy the address bar,
    # and a new page (a new session) opens with the same controls.
    page.goto(f"{server}/sweep?{urlencode(TINY)}")
    expect(page.get_by_role("button", name="Run sweep")).to_be_visible(timeout=60_000)
    settle(page)
    page.get_by_role("combobox", name="Sweep over").click()
    page.get_by_role("option", name="batch size (sequences)").click()
    expect(page).to_have_url(re.compile(r"[?&]sw_axis=batch_size(&|$)"), timeout=WAIT)
    settle(page)
    for label, value in (("To", "6"), ("From", "2"), ("Points", "3")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value, timeout=WAIT)
        settle(page)
    page.locator("[data-testid=stButtonGroup]").get_by_text("linear", exact=True).click()
    for name, value in (("sw_axis", "batch_size"), ("sw_from", "2"), ("sw_to", "6"), ("sw_points", "3"),
                        ("sw_spacing", "linear"), ("batch", "2")):
        expect(page).to_have_url(re.compile(rf"[?&]{name}={value}(&|$)"), timeout=WAIT)
    settle(page)
    copied = page.url

    other = browser.new_context(viewport={"width": 1600, "height": 1000})
    try:
        fresh = other.new_page()
        fresh.goto(copied)
        expect(fresh.get_by_role("combobox", name="Sweep over")).to_have_value("batch size (sequences)",
                                                                                timeout=60_000)
        for label, value in (("From", "2"), ("To", "6"), ("Points", "3")):
            expect(fresh.get_by_role("spinbutton", name=label, exact=True)).to_have_value(value, timeout=WAIT)
        # linear spacing: 2, 4, 6 (log spacing would give 2, 3, 6)
        expect(fresh.get_by_text(re.compile(r"3 points: 2, 4, 6 "))).to_have_count(1, timeout=WAIT)
        expect(fresh).to_have_url(re.compile(r"[?&]sw_spacing=linear(&|$)"), timeout=WAIT)
        no_exception(fresh)
        no_error(fresh)
    finally:
        other.close()


#: Per chart: its plot's height as Plotly drew it and as the figure asked, its legend's
#: entries against its named traces, and the tick labels of its log y axes.
_CHART_LAYOUT_JS = """el => {
    const full = el._fullLayout, asked = el.layout;
    const ticks = full.yaxis && full.yaxis.type === 'log'
        ? [...el.querySelectorAll('.ytick text')].map(t => t.textContent) : [];
    return {title: asked.title.text, plot: full._size.h, asked: asked.height - asked.margin.t - asked.margin.b,
            named: el.data.filter(t => t.showlegend !== false && t.name).length,
            entries: el.querySelectorAll('.legend .traces').length, ticks};
}"""
#: A log axis' tick label in the one format (LOG_TICK_D3): "0.0001", "0.5", "10,000".
_PLAIN_NUMBER = re.compile(r"^(\d{1,3}(,\d{3})*)(\.\d+)?$")


@pytest.mark.parametrize("width, height, present", [(1280, 720, True), (1280, 720, False), (1920, 1080, False)])
def test_recorded_sweep_charts_keep_their_plot_whole_legend_and_one_tick_style(server, browser, width, height,
                                                                               present):
    """Review at 1280x720 in presentation mode: the sweep charts' legends took three
    rows the figure had no room for and squeezed the plot, and a log axis read "100μ"
    under "0.001". In Chromium, each chart's plot is as tall as the figure asks (no
    margin grown for the legend), every series has its legend entry, and the log
    axes' labels are plain numbers."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{server}/sweep?{urlencode({**TINY, **({'present': '1'} if present else {})})}")
    expect(page.get_by_role("button", name="Run sweep")).to_be_visible(timeout=60_000)
    page.get_by_text(re.compile(r"^Show the .*recorded on ")).click()
    charts = page.locator(".js-plotly-plot")
    expect(charts.filter(has_text="Latency across the sweep")).to_have_count(1, timeout=WAIT)
    expect(charts.filter(has_text="Achieved bandwidth")).to_have_count(1, timeout=WAIT)
    settle(page)
    no_exception(page)
    seen = [charts.nth(i).evaluate(_CHART_LAYOUT_JS) for i in range(charts.count())]
    try:
        assert len(seen) == 2, seen
        for chart in seen:
            assert chart["plot"] >= chart["asked"] - 1, chart  # Plotly grew no margin: the plot is not squeezed
            assert chart["entries"] == chart["named"] >= 3, chart
            assert chart["ticks"] and all(_PLAIN_NUMBER.match(t) for t in chart["ticks"]), chart
    finally:
        full_screenshot(page, SHOTS / f"sweep_recorded_{width}{'_present' if present else ''}.png")
        context.close()
