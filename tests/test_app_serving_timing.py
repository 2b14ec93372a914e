"""AppTest suite for the Serving simulation page's two timing buttons: each
press adds to what was timed on the same inputs, and a press that fails keeps
it (the timer is replaced by a fast fake; tests/test_app_serving.py times the
real kernel)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_app import assert_clean, chart
from test_app_serving import open_serving

import ui.benchmark as bench_ui


@pytest.fixture
def timer(monkeypatch):
    """A fake ``time_inputs_locked``: the n-th call takes n/10 ms, except the calls
    whose numbers are in ``timer.fail`` (they raise, as a failed run does)."""
    state = SimpleNamespace(calls=[], fail=set())

    def fake(config, build, names, **kwargs):
        state.calls.append(config.block_size)
        if len(state.calls) in state.fail:
            raise ValueError("the run failed here")
        return [SimpleNamespace(median_ms=0.1 * len(state.calls), gbps=1.0, passed=True)]

    monkeypatch.setattr(bench_ui, "time_inputs_locked", fake)
    return state


def _tradeoff_line(at) -> dict:
    (line,) = [t for t in chart(at, "sv_tradeoff_chart")["data"] if t.get("yaxis") == "y2"]
    return dict(zip(line["x"], line["y"]))


def test_a_second_block_size_run_that_fails_keeps_the_first(timer):
    """Issue 27's leftovers: the second press of "Time Triton per block size" replaced
    the first run's latencies by its own, so a run failing at its first size left the
    chart without any."""
    at = open_serving()
    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    first = _tradeoff_line(at)
    sizes = list(first)
    assert len(sizes) >= 2 and all(y > 0 for y in first.values())
    timer.fail.add(len(timer.calls) + 1)  # the second run fails at its first block size
    at.button(key="sv_tradeoff_run").click().run()
    assert [e.value for e in at.error] == ["the run failed here"]
    assert _tradeoff_line(at) == first
    timer.fail.add(len(timer.calls) + 2)  # the third times the first size again, then fails
    at.button(key="sv_tradeoff_run").click().run()
    third = _tradeoff_line(at)
    assert list(third) == sizes and third[sizes[0]] != first[sizes[0]]
    assert {s: third[s] for s in sizes[1:]} == {s: first[s] for s in sizes[1:]}


def test_each_timed_step_stays_until_the_inputs_change(timer):
    at = open_serving()
    step = at.slider(key="sv_step").value
    at.button(key="sv_time").click().run()
    at.slider(key="sv_step").set_value(step - 5).run()
    at.button(key="sv_time").click().run()
    timer.fail.add(len(timer.calls) + 1)
    at.button(key="sv_time").click().run()  # fails: both steps stay
    at.button(key="sv_tradeoff_run").click().run()  # the other button leaves them too
    assert at.dataframe[0].value["step"].tolist() == [step - 5, step]
    at.number_input(key="sv_seed").set_value(1).run()  # another simulation: nothing of it was timed
    assert not any("step" in d.value.columns for d in at.dataframe)


def test_timed_steps_table_right_aligns_its_numbers(timer):
    """The table's latency and bandwidth are text (three significant figures, as the
    card writes them): they were left-aligned beside the right-aligned counts, in
    both modes. Both columns are right-aligned number columns."""
    import json

    at = open_serving()
    at.button(key="sv_time").click().run()
    (grid,) = at.dataframe
    config = json.loads(grid.proto.columns)
    (median,) = [c for c in grid.value.columns if c.startswith("median (")]
    assert config[median]["alignment"] == "right" and config["GB/s"]["alignment"] == "right"
