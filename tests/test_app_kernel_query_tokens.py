"""AppTest suite for the Inside the kernel page with draft tokens (issue 25): the
sidebar's 4 new tokens per sequence on the CPU at tiny sizes, the traced token
(the last by default, any other picked), the tile's (token, head) rows and their
causal mask cell by cell, the trace against the float64 reference, per-sequence
new tokens, and bad values without a traceback. Assertions read the Plotly specs
the page sends."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import TINY, arr, assert_clean, chart, open_app  # noqa: E402

from explorer.kernel.tile_rows import MASK_STATES  # noqa: E402

KERNEL = "app_pages/inside_the_kernel.py"
#: Two sequences of 37 tokens, 4 query heads over 2 KV heads: a tile of 4 tokens x 2 heads.
DRAFTS = {**TINY, "new_tokens": "4"}


def mask_cells(at) -> tuple[list[str], list[int], np.ndarray]:
    """The mask chart's row labels, positions and states (names of MASK_STATES)."""
    heat = chart(at, "ik_mask_chart")["data"][0]
    z = arr(heat["z"]).astype(int)
    return list(heat["y"]), arr(heat["x"]).astype(int).tolist(), np.array(MASK_STATES)[z]


def test_the_last_new_token_is_traced_and_its_tile_masks_the_later_tokens():
    at = open_app(DRAFTS, page=KERNEL)
    assert_clean(at)
    assert at.number_input(key="ik_token").value == 3
    assert any("its last 4 new (positions 33–36): token 3 traced" in c.value for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Error vs reference"]) < 1e-12
    labels, positions, states = mask_cells(at)
    assert labels == [f"t{t} · h{h}" for t in range(4) for h in (0, 1)]  # row r: token r // 2, head r % 2
    assert positions == list(range(32, 37))  # block 2 of 16 holds the new tokens 33..36 (37..47: past the context)
    assert "its lanes 37–47 past the context left out" in chart(at, "ik_mask_chart")["layout"]["title"]["subtitle"][
        "text"].replace("<br>", " ")
    for label, row in zip(labels, states):
        token = int(label[1])
        for p, state in zip(positions, row):
            assert state == ("causal" if p > 33 + token else "scored"), (label, p)
    outline = [s for s in chart(at, "ik_mask_chart")["layout"]["shapes"] if s.get("name") == "traced row"]
    assert [(s["y0"], s["y1"]) for s in outline] == [(5.5, 6.5)]  # t3 · h0
    assert any("token 3, head 0, at position 36: the last new token, it masks no later one" in m.value
               for m in at.markdown)


def test_another_token_and_head_are_traced_and_still_match_the_reference():
    at = open_app(DRAFTS, page=KERNEL)
    at.number_input(key="ik_head").set_value(3).run()
    at.number_input(key="ik_token").set_value(0).run()
    assert_clean(at)
    assert float({m.label: m.value for m in at.metric}["Error vs reference"]) < 1e-12
    labels, _, _ = mask_cells(at)
    assert labels == [f"t{t} · h{h}" for t in range(4) for h in (2, 3)]  # KV head 1's query heads
    outline = [s for s in chart(at, "ik_mask_chart")["layout"]["shapes"] if s.get("name") == "traced row"]
    assert [(s["y0"], s["y1"]) for s in outline] == [(0.5, 1.5)]  # t0 · h3
    # token 0 (position 33) scores 34 positions: its walk's tiles hold 34 valid tokens
    assert any("token 0, head 3, at position 33: its tiles load 3 positions it masks" in m.value
               for m in at.markdown)


def test_a_sequence_of_one_new_token_beside_draft_tokens_has_no_mask_to_show():
    at = open_app({**TINY, "new_tokens": "1,4"}, page=KERNEL)
    assert_clean(at)
    at.number_input(key="ik_seq").set_value(0).run()
    assert_clean(at)
    assert at.number_input(key="ik_token").disabled and at.number_input(key="ik_token").value == 0
    assert not [c for c in at.get("plotly_chart") if str(c.proto.id).endswith("-ik_mask_chart")]
    assert float({m.label: m.value for m in at.metric}["Error vs reference"]) < 1e-12
    at.number_input(key="ik_seq").set_value(1).run()
    assert_clean(at)
    assert at.number_input(key="ik_token").value == 3 and chart(at, "ik_mask_chart")


def test_a_token_past_the_sequences_new_tokens_is_capped_with_a_note():
    at = open_app(DRAFTS, page=KERNEL)
    at.number_input(key="ik_token").set_value(9).run()
    assert not at.exception and not at.error
    assert at.number_input(key="ik_token").value == 3
    assert any("9 is above the maximum, 3" in w.value for w in at.warning)
    at.number_input(key="ik_token").set_value(-2).run()
    assert not at.exception and at.number_input(key="ik_token").value == 0


def test_one_new_token_shows_no_token_control():
    at = open_app(TINY, page=KERNEL)
    assert_clean(at)
    assert not [w for w in at.number_input if w.key == "ik_token"]
    assert not [c for c in at.get("plotly_chart") if str(c.proto.id).endswith("-ik_mask_chart")]
