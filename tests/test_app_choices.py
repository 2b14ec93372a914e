"""Every segmented control keeps its choice when its selected option is clicked
again (:func:`ui.inputs.choice`). Streamlit empties the control on that click
(AppTest: ``set_value(None)``, what the browser sends), and the pages fell back to
the default: one stray click on the selected "Ragged" replaced the ragged batch by
128 tokens for all (issue 27)."""

from __future__ import annotations

import pytest
from test_app import BASE, TABLE, open_app

SERVING = "app_pages/serving_simulation.py"
SWEEP = "app_pages/sweep.py"

#: (page, URL query, widget key, a value that is not the control's default).
CONTROLS = [
    (TABLE, BASE, "sb_context_mode", "ragged"),
    (TABLE, {**BASE, "kv_dtype": "float8_e4m3fn", "kv_scale": "per_head"}, "sb_kv_scale", "per_head"),
    (TABLE, BASE, "sb_query_mode", "ragged"),
    (SERVING, {"batch": "2", "ctx_mode": "uniform", "ctx": "32"}, "sv_prompt_kind", "uniform"),
    (SERVING, {"batch": "2", "ctx_mode": "uniform", "ctx": "32"}, "sv_pool_colour", "reference count"),
    (SWEEP, {"batch": "2", "ctx_mode": "uniform", "ctx": "32"}, "sw_spacing", "linear"),
]


@pytest.mark.parametrize("page, query, key, chosen", CONTROLS, ids=[c[2] for c in CONTROLS])
def test_clicking_the_selected_option_keeps_the_choice(page, query, key, chosen):
    at = open_app(query, page=page)
    control = at.segmented_control(key=key)
    if control.value != chosen:
        control.set_value(chosen).run()
    assert at.segmented_control(key=key).value == chosen
    at.segmented_control(key=key).set_value(None).run()  # the click on the selected option
    assert not at.exception
    assert at.segmented_control(key=key).value == chosen
    assert at.session_state[key] == chosen
    at.run()  # and on the next run too
    assert at.segmented_control(key=key).value == chosen


def test_a_deselected_ragged_batch_stays_ragged_in_the_url_and_the_table():
    at = open_app({**BASE, "batch": "3"}, page=TABLE)
    before = at.metric[1].value  # the logical tokens of the ragged batch
    at.segmented_control(key="sb_context_mode").set_value(None).run()
    assert at.query_params["ctx_mode"] == "ragged"
    assert at.metric[1].value == before

