"""What the real-browser tests share: a live ``streamlit run`` server driven through
Debian's chromium with Playwright (the fixtures, in ``conftest.py``), and the checks
every page's browser test uses.

Screenshots go to the git-ignored ``tests/artifacts/screenshots/``. To refresh the
README's screenshots on purpose, point ``SCREENSHOT_DIR`` at them (a path relative
to the repository root, or absolute)::

    SCREENSHOT_DIR=docs/screenshots python -m pytest tests/test_browser_*.py -p no:xdist

Every check waits (Playwright's ``expect``): on a loaded machine the page arrives
piece by piece, and a check that looks once can run before it has.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # each browser test module skips itself without Playwright
    expect = None

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



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        reason = f"{CHROMIUM} is missing (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    port = free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port),
                 # no file watcher: on a busy machine its inotify queue overflows into the
                 # log (read below for tracebacks), and the tests change no source file
                 "--server.fileWatcherType", "none"],
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
        served = log.read_text()  # what the app logged while the tests ran
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Not what comes after: Streamlit's own websocket endpoint can log a traceback while the
    # server stops with browsers still connected (starlette's WebSocketDisconnected on close).
    assert "Traceback" not in served, served[-3000:]


@pytest.fixture(scope="session")
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


def settle(pg, timeout: int = 120_000) -> None:
    """Wait until the app has finished its current run (the status widget is gone)."""
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)
