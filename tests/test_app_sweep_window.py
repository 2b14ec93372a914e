"""AppTest suite for the Sweep page with the sidebar's attention options: a sweep
of the window (from the URL's ``sw_axis=window``) and one of the context length
under a window, each run on the CPU at tiny sizes and checked against float64;
the charts' dashed line where the window meets the context."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import TINY, arr, assert_clean, chart, open_app, url_notes  # noqa: E402
from test_app_sweep import SWEEP, run_sweep, traces  # noqa: E402

import ui.sweep as sweep_ui  # noqa: E402


def limit_line(spec: dict) -> tuple[list, list]:
    """The chart's dashed line where the window meets the context, and its label."""
    layout = spec["layout"]
    return ([s for s in layout.get("shapes", []) if s.get("name") == "window limit"],
            [a["text"] for a in layout.get("annotations", []) if a.get("name") == "window limit"])


def test_a_window_sweep_from_the_url_runs_every_implementation_and_marks_the_context():
    query = {**TINY, "sw_axis": "window", "sw_from": "16", "sw_to": "74", "sw_points": "2", "soft_cap": "30"}
    at = open_app(query, page=SWEEP, timeout=120)
    assert_clean(at)
    assert at.selectbox(key="sw_axis").value == "window"
    assert not url_notes(at)
    (caption,) = [c.value for c in at.caption if c.value.startswith("**2 points**")]
    assert "16, 74" in caption and "reaches its context" in caption
    assert caption.endswith("soft_cap=30") and "window=" not in caption  # the axis replaces the sidebar's window
    at.number_input(key="sw_budget").set_value(600.0).run()
    at = run_sweep(at)
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done" and [job.config_at(i).window for i in range(2)] == [16, 74]
    assert all(job.config_at(i).lengths == (37, 37) and job.config_at(i).soft_cap == 30.0 for i in range(2))
    rows = job.frame()
    assert len(rows) == 6 and (rows["status"] == "ok").all() and (rows["correct"] == "yes").all()
    assert sorted(set(rows["window"])) == [16, 74] and set(rows["soft_cap"]) == {30.0}
    assert set(rows["context_len"]) == {37}
    # a window of 16 reads 16 of the 37 tokens; one of 74 reads them all
    small, big = (rows[rows["value"] == v]["bytes_moved"].iloc[0] for v in (16, 74))
    assert small < big == job.base.with_(window=None).decode_bytes()
    table = at.dataframe[0].value
    assert (table["correct"] == "yes").all() and list(table.columns)[1] == "value"
    latency = chart(at, "sw_latency_chart")
    (triton,) = traces(latency, implementation="triton", kind="timed")
    assert arr(triton["customdata"])[:, 2].tolist() == [16, 74]  # x: dodged
    shapes, labels = limit_line(latency)
    assert [(s["x0"], s["line"]["dash"]) for s in shapes] == [(37, "dash")] and labels == ["context 37"]
    assert at.query_params["sw_axis"] in ("window", ["window"])


def test_a_context_sweep_under_the_sidebars_window_marks_the_window():
    query = {**TINY, "window": "20", "sinks": "1", "sw_from": "16", "sw_to": "32", "sw_points": "2"}
    at = open_app(query, page=SWEEP, timeout=120)
    assert_clean(at)
    (caption,) = [c.value for c in at.caption if c.value.startswith("**2 points**")]
    assert caption.endswith("window=20 sinks")
    at.number_input(key="sw_budget").set_value(600.0).run()
    at = run_sweep(at)
    assert_clean(at)
    rows = at.session_state[sweep_ui.JOB].frame()
    assert len(rows) == 6 and (rows["correct"] == "yes").all()
    assert set(rows["window"]) == {20} and set(rows["sinks"]) == {True}
    for key in ("sw_latency_chart", "sw_bandwidth_chart", "sw_speedup_chart"):
        shapes, labels = limit_line(chart(at, key))
        assert [s["x0"] for s in shapes] == [20] and labels == ["window 20"], key
