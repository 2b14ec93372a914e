"""AppTest suite for the Sweep page with draft tokens (issue 25): a sweep over the
new tokens per sequence (from the URL's ``sw_axis=query_lens``) run on the CPU at
tiny sizes and checked against float64, its rows, CSV and time-per-token chart; a
context sweep under the sidebar's 4 new tokens; out-of-range values without a
traceback."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import TINY, arr, assert_clean, chart, open_app, url_notes  # noqa: E402
from test_app_sweep import SWEEP, run_sweep, traces  # noqa: E402

import ui.sweep as sweep_ui  # noqa: E402
from explorer import limits  # noqa: E402
from explorer.formatting import in_unit  # noqa: E402
from explorer.sweep import runs  # noqa: E402


def test_a_sweep_over_the_new_tokens_times_every_point_and_charts_the_time_per_token():
    query = {**TINY, "sw_axis": "query_lens", "sw_from": "1", "sw_to": "4", "sw_points": "3"}
    at = open_app(query, page=SWEEP, timeout=120)
    assert_clean(at)
    assert at.selectbox(key="sw_axis").value == "query_lens"
    (caption,) = [c.value for c in at.caption if c.value.startswith("**3 points**")]
    assert "1, 2, 4" in caption and "last q_len tokens are new" in caption
    at.number_input(key="sw_budget").set_value(600.0).run()
    at = run_sweep(at)
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done" and [job.config_at(i).query_lengths for i in range(3)] == [(1, 1), (2, 2), (4, 4)]
    rows = job.frame()
    assert len(rows) == 9 and (rows["status"] == "ok").all() and (rows["correct"] == "yes").all()
    assert sorted(set(rows["query_lens"])) == ["1", "2", "4"] and sorted(set(rows["query_tokens"])) == [2, 4, 8]
    assert set(rows["context_len"]) == {37}
    # the time per token: each step's median over its 2, 4 or 8 new tokens
    per_token = chart(at, "sw_per_token_chart")
    (triton,) = traces(per_token, implementation="triton", kind="timed")
    unit = triton["meta"]["unit"]
    mine = rows[rows["implementation"] == "triton"].sort_values("value")
    assert arr(triton["x"]).tolist() == [1, 2, 4]
    assert np.allclose(arr(triton["y"]), [in_unit(ms, unit) for ms in mine["median_ms"] / mine["query_tokens"]])
    (flat,) = traces(per_token, kind="flat")
    assert np.allclose(arr(flat["y"]), in_unit(mine["median_ms"].iloc[0], unit) / np.array([2, 4, 8]))
    assert chart(at, "sw_latency_chart")  # the time per step beside it
    assert any("Per step and per token" in m.value for m in at.markdown)
    table = at.dataframe[0].value
    assert "per_token_ms" in table.columns and list(table.columns)[1] == "value"
    csv = pd.read_csv(io.StringIO(runs.sweep_csv(rows)))  # what Download CSV offers
    assert {"query_lens", "query_tokens"} <= set(csv.columns) and sorted(set(csv["query_tokens"])) == [2, 4, 8]
    assert at.query_params["sw_axis"] in ("query_lens", ["query_lens"])


def test_a_context_sweep_under_the_sidebars_new_tokens_carries_them_in_every_row():
    query = {**TINY, "new_tokens": "4", "sw_from": "16", "sw_to": "32", "sw_points": "2"}
    at = open_app(query, page=SWEEP, timeout=120)
    assert_clean(at)
    at.number_input(key="sw_budget").set_value(600.0).run()
    at = run_sweep(at)
    assert_clean(at)
    rows = at.session_state[sweep_ui.JOB].frame()
    assert len(rows) == 6 and (rows["correct"] == "yes").all()
    assert set(rows["query_lens"]) == {"4"} and set(rows["query_tokens"]) == {8}
    assert not [c for c in at.get("plotly_chart") if str(c.proto.id).endswith("-sw_per_token_chart")]
    assert "per_token_ms" in at.dataframe[0].value.columns  # 4 tokens a sequence: the time per token too


def test_out_of_range_new_tokens_are_capped_with_a_note_and_no_traceback():
    query = {**TINY, "sw_axis": "query_lens", "sw_from": "0", "sw_to": "99", "sw_points": "3"}
    at = open_app(query, page=SWEEP)
    assert not at.exception
    assert at.number_input(key="sw_low").value == 1 and at.number_input(key="sw_high").value == limits.MAX_QUERY_LEN
    notes = url_notes(at)
    assert any("sw_from" in n for n in notes) and any("sw_to" in n for n in notes)
    at.number_input(key="sw_high").set_value(40).run()
    assert not at.exception
    assert at.number_input(key="sw_high").value == limits.MAX_QUERY_LEN
    assert any(f"above the maximum, {limits.MAX_QUERY_LEN}" in w.value for w in at.warning)
