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
