"""The naive implementation's time budget in a sweep: probe, predict from the last point, skip when hopeless."""

import pytest

from explorer.sweep import naive_budget
from helpers import SWEEP_BASE as BASE


def test_naive_plan_probes_then_predicts_from_the_last_point():
    small, big = BASE.with_(context_lens=64), BASE.with_(context_lens=4096)
    assert naive_budget.naive_plan(small, budget_s=1.0, calls=4).action == "probe"
    last = (naive_budget.naive_cost(small), 2.0)
    ok = naive_budget.naive_plan(small, budget_s=1.0, calls=4, last=last)
    assert ok.action == "run" and ok.predicted_ms == pytest.approx(2.0)
    over = naive_budget.naive_plan(big, budget_s=0.05, calls=4, last=last)
    assert over.action == "skip"
    assert over.predicted_ms == pytest.approx(2.0 * naive_budget.naive_cost(big) / naive_budget.naive_cost(small))
    assert "over the 0.05 s budget" in over.reason
    assert naive_budget.naive_cost(big) > naive_budget.naive_cost(small)


def test_naive_plan_skips_without_probing_when_hopeless():
    huge = BASE.with_(batch_size=64, context_lens=65536, block_size=1)  # 4M blocks in a Python loop
    decision = naive_budget.naive_plan(huge, budget_s=1.0, calls=4)
    assert decision.action == "skip" and "blocks per call" in decision.reason
    tight = naive_budget.naive_plan(BASE, budget_s=10.0, calls=4, free_bytes=1000)
    assert tight.action == "skip" and "temporaries" in tight.reason
    assert naive_budget.naive_temp_bytes(BASE) == 2 * 4 * 2 * 37 * 32 * (2 + 4)


def test_after_probe():
    assert naive_budget.after_probe(10.0, budget_s=1.0, calls=200).action == "skip"
    assert naive_budget.after_probe(10.0, budget_s=1.0, calls=200).predicted_ms == 10.0
    assert naive_budget.after_probe(10.0, budget_s=1.0, calls=50).action == "run"
