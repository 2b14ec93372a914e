"""End to end in a real browser: a live ``streamlit run`` server driven through
Debian's chromium with Playwright.

Screenshots go to the git-ignored ``tests/artifacts/screenshots/``. To refresh the
README's screenshots on purpose, point ``SCREENSHOT_DIR`` at them (a path relative
to the repository root, or absolute)::

    SCREENSHOT_DIR=docs/screenshots python -m pytest tests/test_browser.py -p no:xdist

Every check waits (Playwright's ``expect``): on a loaded machine the page arrives
piece by piece, and a check that looks once can run before it has.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlparse

import pytest
pytest.importorskip("playwright", reason="the browser test needs Playwright (requirements-dev.txt)")
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError, expect  # noqa: E402

from explorer import settings as state

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / os.environ.get("SCREENSHOT_DIR", "tests/artifacts/screenshots")
WAIT = 30_000  # ms: how long a check waits for the page to reach the expected state
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TINY = {"batch": "2", "ctx_mode": "uniform", "ctx": "37", "heads": "4", "kv_heads": "2", "head_dim": "32",
        "preset": "Custom", "warmup": "0", "iters": "2"}
LABELS = ("Naive PyTorch", "Optimized PyTorch", "Triton")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        reason = f"{CHROMIUM} is missing (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    pg = context.new_page()
    yield pg
    context.close()


def full_screenshot(pg, path: Path) -> None:
    """Streamlit scrolls inside its main container, so grow the viewport to the
    content first; then the screenshot holds the whole page."""
    height = 0
    for _ in range(4):  # charts re-lay out once the viewport grows; measure until it settles
        content = int(pg.evaluate(
            "Math.max(document.querySelector('[data-testid=stMain]').scrollHeight,"
            " document.querySelector('[data-testid=stSidebarContent]').scrollHeight)"
        ))
        if content + 40 <= height:
            break
        height = content + 40
        pg.set_viewport_size({"width": pg.viewport_size["width"], "height": height})
        pg.wait_for_timeout(1500)  # plotly re-lays out to the new size
    path.parent.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(path), full_page=True)


def no_exception(pg) -> None:
    expect(pg.locator("[data-testid=stException]")).to_have_count(0, timeout=WAIT)


def no_error(pg) -> None:
    expect(pg.locator("[data-testid=stAlertContentError]")).to_have_count(0, timeout=WAIT)


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
    _settle(page)
    page.get_by_text("Sharing: n samples per request, a common prompt").click()
    expect(page.get_by_text(re.compile(r"Sharing saves \d+ blocks? of \d+"))).to_be_visible(timeout=WAIT)
    legend = page.locator(".js-plotly-plot .legendtext")
    for entry in ("shared block (2+ sequences)", "one sequence", "2 sequences", "4 sequences"):
        expect(legend.filter(has_text=entry)).to_have_count(1, timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=Physical block pool: sharing")).to_be_visible(timeout=WAIT)
    _settle(page)
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
    _settle(page)
    expect(page.get_by_text("Click a table cell to find its block in the pool")).to_be_visible(timeout=WAIT)
    page.get_by_text("Sharing: n samples per request, a common prompt").click()
    expect(page.locator(".js-plotly-plot >> text=Physical block pool: sharing")).to_be_visible(timeout=WAIT)
    _settle(page)
    _click_target(page, page.locator(".js-plotly-plot").first, 0)
    expect(page.get_by_text(re.compile(r"Block \d+: 4 table cells of 4 sequences \(0, 1, 2, 3\) point here, "
                                       r"outlined"))).to_be_visible(timeout=WAIT)
    _settle(page)
    full_screenshot(page, SHOTS / "block_table_pick_table.png")
    # Now the other way: a pool block held by one sequence finds its one cell.
    pool = page.locator(".js-plotly-plot").nth(1)
    _click_target(page, pool, 20)
    expect(page.get_by_text(re.compile(r"Block 20: (1 table cell of 1 sequence \(\d\) points here, outlined|"
                                       r"no sequence of this table points to it)"))).to_be_visible(timeout=WAIT)
    _settle(page)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "block_table_pick_pool.png")


def _edit_length(pg, row: int, value: str) -> None:
    """Type ``value`` into the ``context_len`` cell of ``row`` of the lengths editor
    (a canvas grid: click the cell, open its editor, replace, commit)."""
    grid = pg.locator("[data-testid=stSidebar] [data-testid=stDataFrame]").first
    grid.wait_for(timeout=10_000)
    pg.wait_for_timeout(800)  # the expander's opening animation
    box = grid.bounding_box()
    pg.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + 35 * (row + 1) + 17)
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
    expect(marks.filter(has_text="✓")).to_have_count(4, timeout=WAIT)
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
    _settle(page)
    run.click()
    expect(page.get_by_text("Run #2", exact=True)).to_be_visible(timeout=180_000)
    correct = page.locator("[data-testid=stDataFrame]").first.locator("td[role=gridcell][aria-colindex='2']")
    expect(correct).to_have_text(["yes"] * 4, timeout=WAIT)
    expect(page.locator(".js-plotly-plot >> text=fp8 quantization error")).to_be_visible(
        timeout=WAIT)
    expect(marks.filter(has_text="✓")).to_have_count(4, timeout=WAIT)
    no_exception(page)
    no_error(page)
    full_screenshot(page, SHOTS / "decode_benchmark_fp8.png")


def test_shared_prefix_benchmark_in_browser(server, page):
    # a shared prefix from the URL: the prefix-aware kernel races beside the others, correct,
    # and the page reads the KV bytes logically and once per group
    query = {**TINY, "batch": "4", "ctx": "64", "prefix": "32", "prefix_groups": "2"}
    page.goto(f"{server}/decode_benchmark?{urlencode(query)}")
    expect(page.get_by_role("spinbutton", name="Prefix groups")).to_have_value("2", timeout=60_000)
    expect(page.get_by_text("Include Triton (prefix-aware)")).to_be_visible(timeout=WAIT)
    metrics = page.locator("[data-testid=stMetric]")
    expect(metrics.filter(has_text="KV read, unique")).to_contain_text("49.2 kB", timeout=WAIT)
    page.get_by_role("button", name="Run benchmark").click()
    expect(page.get_by_text("Run #1", exact=True)).to_be_visible(timeout=180_000)
    expect(metrics.filter(has_text="Triton (prefix-aware)")).to_be_visible(timeout=WAIT)
    correct = page.locator("[data-testid=stDataFrame]").first.locator("td[role=gridcell][aria-colindex='2']")
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
    _settle(page)
    run.click()
    expect(page.get_by_text("Compare runs")).to_be_visible(timeout=180_000)
    _settle(page)
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


def _settle(pg, timeout: int = 120_000) -> None:
    """Wait until the app has finished its current run (the status widget is gone)."""
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)


def test_sweep_cancel_run_and_compare_in_browser(server, page, tmp_path):
    # Many timed calls keep each point busy for seconds on a GPU too (the CPU caps
    # them); head_dim 256 makes the interpreted Triton kernel's points about 3x
    # longer, so the sweep outlasts a starved browser's delay before Cancel.
    page.goto(f"{server}/sweep?{urlencode({**TINY, 'iters': '2000', 'head_dim': '256'})}")
    run = page.get_by_role("button", name="Run sweep")
    run.wait_for(timeout=60_000)
    # Six points, the largest up to a second a call on a CPU.
    for label, value in (("From", "16"), ("To", "2048"), ("Points", "6")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value, timeout=30_000)
        _settle(page)
    n = 6
    expect(page.get_by_text(re.compile(rf"^{n} points: 16, .*2,048 "))).to_be_visible(timeout=30_000)
    _settle(page)
    counter = page.get_by_text(re.compile(rf"^\d+ of {n} points$"))

    # Cancel once the first point is in: the sweep stops after the point in flight
    # and keeps what it did. (Wait for the chart, which stays, not for "Point 2 of
    # 6": each point's progress text lasts about a second on a CPU, and a loaded
    # machine's polling can miss them all until the sweep is over.)
    run.click()
    expect(page.locator(".js-plotly-plot >> text=Latency across the sweep").first).to_be_visible(timeout=120_000)
    cancel, cancelled = page.get_by_role("button", name="Cancel"), page.get_by_text("Cancelled after", exact=False)
    # In fresh-clone runs on a loaded 2-core machine a press has at times had no
    # effect (the sweep ran to its end; cause not found, see docs/streamlit.md). A
    # presenter would press again, and so does the test, while the sweep runs.
    for _ in range(12):
        try:
            cancel.click(timeout=5_000)
            expect(cancelled).to_be_visible(timeout=5_000)
            break
        except (AssertionError, PlaywrightTimeoutError):
            if not cancel.is_enabled():  # the sweep is over, or stopping
                break
    _settle(page)
    # Known open defect: in fresh-clone runs of the whole suite (never alone) no
    # press took effect. Then the rest is still checked and the test reports an
    # expected failure at its end, not a pass (docs/streamlit.md, "Open").
    cancel_lost = cancelled.count() == 0 and page.get_by_text(f"{n} of {n} points").count() == 1
    if not cancel_lost:
        expect(cancelled).to_be_visible(timeout=WAIT)
        expect(page.locator(".js-plotly-plot >> text=Latency across the sweep").first).to_be_visible(timeout=30_000)
        expect(counter).to_be_visible(timeout=WAIT)
        done = int(counter.inner_text().split()[0])
        assert 1 <= done < n
        page.wait_for_timeout(1500)
        expect(counter).to_have_text(f"{done} of {n} points", timeout=WAIT)  # it stays stopped

    # Run it again to the end, with a naive budget tight enough to skip its larger
    # points: the points done come from the cache.
    budget = page.get_by_role("spinbutton", name="Naive budget per point (s)")
    budget.fill("0.02")
    budget.press("Enter")
    expect(budget).to_have_value("0.02", timeout=30_000)
    _settle(page)
    page.get_by_role("button", name="Run sweep").click()
    expect(page.get_by_text(f"{n} of {n} points")).to_be_visible(timeout=300_000)
    _settle(page)
    expect(page.locator(".js-plotly-plot")).to_have_count(3, timeout=30_000)
    expect(page.locator(".js-plotly-plot >> text=Speedup of Triton over the others")).to_be_visible(timeout=30_000)
    no_exception(page)
    no_error(page)
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
    if cancel_lost:
        pytest.xfail("a Cancel press had no effect: the sweep ran to its end (open defect, docs/streamlit.md)")


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


@pytest.mark.parametrize("width, height", [(1280, 720), (1920, 1080)])
def test_sweep_controls_are_readable_on_a_projector(server, browser, width, height):
    # "Points" had 0.7 of a five-column row: at 1280 px its box lost its step buttons and
    # "Naive budget per point (s)" put "(s)" on a line of its own. The widest values go in.
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{server}/sweep?{urlencode(TINY)}")
    expect(page.get_by_role("button", name="Run sweep")).to_be_visible(timeout=60_000)
    for label, value in (("To", "1048576"), ("From", "1048575"), ("Points", "12"),
                         ("Naive budget per point (s)", "600")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(re.compile(rf"^{value}(\.00)?$"), timeout=WAIT)
        _settle(page)
    no_exception(page)
    controls = page.get_by_role("button", name="Run sweep").locator("xpath=ancestor::*[@data-testid='stVerticalBlock'"
                                                                    " and .//*[text()='Sweep over']][1]")
    expect(controls).to_have_count(1, timeout=WAIT)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:  # a wait, not one look: the columns lay out again after each rerun
        page.wait_for_function(f"root => ({_SQUEEZED_CONTROLS_JS})(root).length === 0",
                               arg=controls.element_handle(), timeout=15_000)
    except PlaywrightTimeoutError:
        pytest.fail(f"at {width}x{height}: {controls.evaluate(_SQUEEZED_CONTROLS_JS)}")
    finally:
        page.screenshot(path=str(SHOTS / f"sweep_controls_{width}.png"))
        context.close()


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
    _settle(page)
    page.get_by_role("button", name="Time Triton per block size").click()
    expect(page.locator(".js-plotly-plot >> text=Triton latency (ms)")).to_be_visible(timeout=180_000)
    _settle(page)
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
    for name in ("1 sequence", "2 sequences", "3–4 sequences", "5+ sequences", "copy-on-write copy", "freed"):
        expect(pool.get_by_text(name, exact=True)).to_be_visible(timeout=60_000)
    no_exception(page)
    no_error(page)
    pool.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "serving_pool_reference_count.png"))
    _settle(page)
    page.locator("[data-testid=stButtonGroup]").get_by_text("sequence", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]sv_pool_colour=sequence(&|$)"), timeout=WAIT)
    expect(pool.get_by_text("5+ sequences", exact=True)).to_have_count(0, timeout=WAIT)
    expect(pool.get_by_text("copy-on-write copy", exact=True)).to_be_visible(timeout=WAIT)
    no_exception(page)


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
    _settle(page)
    metric = page.locator("[data-testid=stMetric]").filter(has_text="Error vs reference")
    expect(metric).to_contain_text("matches", timeout=30_000)
    no_exception(page)
    full_screenshot(page, SHOTS / "inside_the_kernel.png")


def test_every_page_opens_without_error(server, page):
    for path, heading in (("", "Block table"), ("decode_benchmark", "Decode benchmark"), ("sweep", "Sweep"),
                          ("serving_simulation", "Serving simulation"), ("inside_the_kernel", "Inside the kernel")):
        page.goto(f"{server}/{path}?{urlencode(TINY)}")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=60_000)
        _settle(page)
        no_exception(page)
        no_error(page)


def test_every_page_answers_at_its_own_path(server, page):
    """Every page, the first one included, has a stable URL path; the root opens the first one at its path."""
    for path, heading in (("block_table", "Block table"), ("decode_benchmark", "Decode benchmark"),
                          ("sweep", "Sweep"), ("serving_simulation", "Serving simulation"),
                          ("inside_the_kernel", "Inside the kernel")):
        page.goto(f"{server}/{path}?{urlencode(TINY)}")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=60_000)
        _settle(page)
        expect(page.get_by_text("Page not found")).to_have_count(0, timeout=WAIT)
        expect(page).to_have_url(re.compile(rf"/{path}\?.*batch=2"), timeout=WAIT)
        no_exception(page)
    page.goto(f"{server}/?{urlencode(TINY)}")
    expect(page).to_have_url(re.compile(r"/block_table\?.*batch=2"), timeout=60_000)
    expect(page.get_by_role("heading", name="Block table", exact=True)).to_be_visible(timeout=60_000)
    _settle(page)
    expect(page.get_by_text("Page not found")).to_have_count(0, timeout=WAIT)
    no_exception(page)


def test_no_request_leaves_this_machine(server, page):
    """A talk given offline: loading any page asks nothing of the internet. A
    ``:material/...:`` page_icon made Streamlit point the favicon at fonts.gstatic.com;
    the icons drawn in the page (navigation, buttons, alerts) come from Streamlit's
    bundled font."""
    outside = []

    def record(request):
        url = urlparse(request.url)
        if url.scheme not in ("data", "blob") and url.hostname not in ("127.0.0.1", "localhost"):
            outside.append(request.url)

    page.on("request", record)
    favicon = page.locator("link[rel='shortcut icon']")
    for path, heading in (("block_table", "Block table"), ("decode_benchmark", "Decode benchmark"),
                          ("sweep", "Sweep"), ("serving_simulation", "Serving simulation"),
                          ("inside_the_kernel", "Inside the kernel")):
        page.goto(f"{server}/{path}?{urlencode(TINY)}")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=60_000)
        _settle(page)
        # The app's favicon replaced Streamlit's default (./favicon.png), and is inline or served
        # from this server (an image page_icon is a /media/ URL).
        expect(favicon).to_have_attribute(
            "href", re.compile(r"^(data:|https?://(127\.0\.0\.1|localhost)(:\d+)?/media/)"), timeout=WAIT)
        no_exception(page)
    assert outside == [], f"requests outside this machine: {sorted(set(outside))}"


def test_number_beyond_its_maximum_is_clamped_in_the_box(server, page):
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    batch = page.get_by_label("Batch size (sequences)")
    batch.wait_for(timeout=60_000)
    batch.fill("5000")
    batch.press("Enter")
    expect(batch).to_have_value("4096", timeout=30_000)  # the box shows the value in use, not what was typed
    note = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    expect(note).to_contain_text("5,000 is above the maximum, 4,096; using 4,096", timeout=30_000)
    expect(page).to_have_url(re.compile(r"batch=4096"), timeout=30_000)
    _settle(page)
    no_exception(page)


def test_typed_exponent_and_fraction_are_read_whole(server, page):
    # Streamlit's browser reads an integer box with parseInt: "1e3" became 1 and "3.7" 3, without a word.
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    batch = page.get_by_label("Batch size (sequences)")
    batch.wait_for(timeout=60_000)
    batch.fill("1e3")
    batch.press("Enter")
    expect(batch).to_have_value("1000", timeout=30_000)
    expect(page).to_have_url(re.compile(r"batch=1000\b"), timeout=30_000)
    _settle(page)
    batch.fill("3.7")
    batch.press("Enter")
    expect(batch).to_have_value("4", timeout=30_000)
    note = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    expect(note).to_contain_text("3.7 is not a whole number; using 4", timeout=30_000)
    expect(page).to_have_url(re.compile(r"batch=4\b"), timeout=30_000)
    _settle(page)
    no_exception(page)

def test_second_run_click_replaces_the_first_run(server, page):
    # About a second per interpreted Triton call on a CPU: long enough to click again mid-run.
    query = {"batch": "4", "ctx_mode": "uniform", "ctx": "64", "warmup": "1", "iters": "3", "preset": "Llama-3-8B"}
    page.goto(f"{server}/decode_benchmark?{urlencode(query)}")
    run = page.get_by_role("button", name="Run benchmark")
    run.wait_for(timeout=60_000)
    run.click()
    # the first run is timing (the CPU times one implementation after another)
    expect(page.get_by_text(re.compile(r"^6 of (9|12) timed calls"))).to_be_visible(timeout=60_000)  # Triton's turn
    run.click()
    expect(page.get_by_text("Your previous run is still finishing")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("another session")).to_have_count(0, timeout=WAIT)
    page.wait_for_selector("text=Compare runs", timeout=300_000)
    _settle(page, 300_000)
    # The stopped run left no entry of its own.
    expect(page.get_by_text("Run #1", exact=True)).to_be_visible(timeout=WAIT)
    metrics = page.locator("[data-testid=stMetric]")
    for label in LABELS:
        expect(metrics.filter(has_text=label).first).to_be_visible(timeout=WAIT)
    no_exception(page)


def test_cleared_number_box_keeps_its_value(server, page):
    # Streamlit sends a cleared, non-nullable box as its default (0 here): the batch would become 1 with
    # "0 is below the minimum" and a cleared token count would empty the batch.
    page.goto(f"{server}/decode_benchmark?{urlencode(TINY)}")
    batch = page.get_by_label("Batch size (sequences)")
    batch.wait_for(timeout=60_000)
    for label, kept in (("Batch size (sequences)", "2"), ("Tokens per sequence", "37")):
        box = page.get_by_label(label)
        box.fill("")
        box.press("Tab")
        _settle(page)
        expect(box).to_have_value(kept, timeout=30_000)
    expect(page).to_have_url(re.compile(r"batch=2\b"), timeout=30_000)
    expect(page).to_have_url(re.compile(r"ctx=37\b"), timeout=30_000)
    notes = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    expect(notes).to_have_count(0, timeout=30_000)
    no_exception(page)


def test_page_link_clicked_during_the_first_run_keeps_the_sidebar(server, page):
    # A click on a page link while the first run is still drawing used to leave the browser with sidebar
    # widgets rebuilt at their first option (block size 1, 1 KV head, contiguous): the next edit sent
    # those back, and a deselected context mode crashed the page. The default page takes seconds on a
    # CPU, so clicking as soon as the link shows lands mid-run; the race is timing-dependent (3 of 4
    # fresh sessions hit it here), so it is tried in four.
    d = state.Settings()
    for _ in range(4):
        context = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
        pg = context.new_page()  # a new session, with a first run of its own
        pg.goto(f"{server}/")
        link = pg.get_by_role("link", name="Decode benchmark")
        link.wait_for(timeout=60_000)
        link.click()
        batch = pg.get_by_label("Batch size (sequences)")
        expect(batch).to_have_value(str(d.batch_size), timeout=60_000)
        _settle(pg)
        batch.fill("8")
        batch.press("Enter")
        expect(pg).to_have_url(re.compile(r"batch=8"), timeout=30_000)
        _settle(pg)
        for field in (f"kv_heads={d.num_kv_heads}", f"block={d.block_size}", f"layout={d.block_layout}",
                      f"ctx_mode={d.context_mode}"):
            expect(pg).to_have_url(re.compile(re.escape(field)), timeout=WAIT)
        no_exception(pg)
        context.close()


def test_shared_url_page_visits_and_garbage_url(server, page):
    # A shared URL reproduces the sidebar (Streamlit's bind="query-params").
    shared = {"batch": "3", "ctx_mode": "uniform", "ctx": "100", "heads": "4", "kv_heads": "2", "head_dim": "32",
              "preset": "Custom", "block": "8", "layout": "contiguous", "dtype": "bfloat16", "iters": "2"}
    page.goto(f"{server}/sweep?{urlencode(shared)}")
    page.get_by_role("button", name="Run sweep").wait_for(timeout=60_000)
    expect(page.get_by_label("Batch size (sequences)")).to_have_value("3", timeout=WAIT)
    expect(page.get_by_label("Tokens per sequence")).to_have_value("100", timeout=WAIT)
    for label, value in (("KV heads", "2"), ("Block size", "8"), ("Block layout", "contiguous"), ("Compute dtype", "bfloat16")):
        expect(page.get_by_role("combobox", name=label, exact=True)).to_have_value(value, timeout=WAIT)
    _settle(page)

    # A page's own controls survive a visit to another page (persist_state="session").
    points = page.get_by_role("spinbutton", name="Points", exact=True)
    points.fill("3")
    points.press("Enter")
    expect(points).to_have_value("3", timeout=WAIT)
    # The server has the value once the page writes it to the URL: only then leave
    # (the box shows 3 before the rerun that records it has started, and _settle
    # could return before that rerun began; a full-suite run lost the value so).
    expect(page).to_have_url(re.compile(r"[?&]sw_points=3(&|$)"), timeout=60_000)
    _settle(page)
    page.get_by_role("link", name="Block table").click()
    expect(page.locator(".js-plotly-plot >> text=Block table").first).to_be_visible(timeout=60_000)
    _settle(page)
    page.get_by_role("link", name="Sweep").click()
    points = page.get_by_role("spinbutton", name="Points", exact=True)
    expect(points).to_have_value("3", timeout=60_000)
    expect(page.get_by_role("combobox", name="Block size")).to_have_value("8", timeout=WAIT)
    for name, value in shared.items():  # and the URL still carries the sidebar
        expect(page).to_have_url(re.compile(rf"[?&]{name}={re.escape(value)}(&|$)"), timeout=WAIT)
    no_exception(page)

    # A garbage URL is harmless: each ignored value is named, and the URL is
    # rewritten to the values used.
    garbage = {"batch": "lots", "block": "3", "kv_heads": "5", "iters": "0", "dtype": "float8", "utm_source": "x"}
    page.goto(f"{server}/?{urlencode(garbage)}")
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=60_000)
    warnings = page.locator("[data-testid=stSidebar] [data-testid=stAlertContentWarning]")
    for text in ("batch=lots", "block=3", "kv_heads=5", "iters=0", "dtype=float8"):
        expect(warnings.filter(has_text=text)).to_have_count(1, timeout=WAIT)
    _settle(page)
    d = state.default_settings()
    used = {"batch": d.batch_size, "block": d.block_size, "kv_heads": state.nearest_kv_heads(d.num_heads, 5), "iters": d.iters,
            "dtype": d.dtype}
    for name, value in used.items():
        expect(page).to_have_url(re.compile(rf"[?&]{name}={value}(&|$)"), timeout=WAIT)
    no_exception(page)
    no_error(page)


def test_sweep_page_controls_travel_in_a_copied_url(server, browser, page):
    # A speaker's deck of links: set the Sweep page's controls, copy the address bar,
    # and a new page (a new session) opens with the same controls.
    page.goto(f"{server}/sweep?{urlencode(TINY)}")
    expect(page.get_by_role("button", name="Run sweep")).to_be_visible(timeout=60_000)
    _settle(page)
    page.get_by_role("combobox", name="Sweep over").click()
    page.get_by_role("option", name="batch size (sequences)").click()
    expect(page).to_have_url(re.compile(r"[?&]sw_axis=batch_size(&|$)"), timeout=WAIT)
    _settle(page)
    for label, value in (("To", "6"), ("From", "2"), ("Points", "3")):
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value, timeout=WAIT)
        _settle(page)
    page.locator("[data-testid=stButtonGroup]").get_by_text("linear", exact=True).click()
    for name, value in (("sw_axis", "batch_size"), ("sw_from", "2"), ("sw_to", "6"), ("sw_points", "3"),
                        ("sw_spacing", "linear"), ("batch", "2")):
        expect(page).to_have_url(re.compile(rf"[?&]{name}={value}(&|$)"), timeout=WAIT)
    _settle(page)
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


def test_presentation_mode_on_every_page(server, browser):
    # present=1 enlarges every chart's text; at 1280x720 (a projector) nothing may overlap or be clipped:
    # the screenshots are for looking at.
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    query = urlencode({**TINY, "present": "1"})
    for path, name, charts in (("", "block_table", 4), ("decode_benchmark", "decode_benchmark", 5),
                               ("sweep", "sweep", 3), ("serving_simulation", "serving_simulation", 4),
                               ("inside_the_kernel", "inside_the_kernel", 3)):
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(f"{server}/{path}?{query}")
        expect(page.get_by_role("switch", name="Presentation mode")).to_be_checked(timeout=60_000)
        _settle(page)
        if name == "decode_benchmark":
            page.get_by_role("button", name="Run benchmark").click()
            expect(page.get_by_text("Compare runs")).to_be_visible(timeout=180_000)
        elif name == "sweep":
            page.get_by_role("button", name="Run sweep").click()
            expect(page.get_by_text(re.compile(r"^(\d+) of \1 points$"))).to_be_visible(timeout=300_000)
        elif name == "serving_simulation":
            page.get_by_text("Play the pool over time (animation)").click()
            charts += 1
        _settle(page, 300_000)
        expect(page.locator(".js-plotly-plot").nth(charts - 1)).to_be_visible(timeout=60_000)  # at least these
        # Titles are 16 px, enlarged up to PRESENTATION_SCALE times (less when long).
        expect(page.locator(".js-plotly-plot .gtitle").first).to_have_css(
            "font-size", re.compile(r"^(1[7-9]|[2-9]\d)(\.\d+)?px$"), timeout=WAIT)
        expect(page).to_have_url(re.compile(r"[?&]present=1(&|$)"), timeout=WAIT)
        no_exception(page)
        no_error(page)
        full_screenshot(page, SHOTS / f"present_{name}.png")
    context.close()


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
