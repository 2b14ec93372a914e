"""The Sweep's axis over the new tokens per sequence (issue 25: draft tokens): its
points and caps, the configurations it times (capped at each context; the other
axes keep the sidebar's per-sequence new tokens), the rows and CSV carrying
``query_lens`` and ``query_tokens``, the time per token (per step over the step's
new tokens) in the points table and the per-token chart with its flat-step line."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import limits
from explorer.formatting import in_unit
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from explorer.sweep import view
from explorer.sweep.token_figures import sweep_per_token_figure
from helpers import SWEEP_BASE, fake_result, job_rows
from paged_attention import DecodeConfig

AXIS = "query_lens"


def test_the_axis_runs_from_one_token_to_the_limit_in_doublings():
    assert sweep_grid.AXES[AXIS].startswith("new tokens")
    assert sweep_grid.AXIS_LIMITS[AXIS] == (1, limits.MAX_QUERY_LEN)
    assert sweep_grid.default_range(AXIS, SWEEP_BASE, cpu=True) == (1, 16)
    assert sweep_grid.default_range(AXIS, SWEEP_BASE.with_(context_lens=5), cpu=False) == (1, 5)
    assert sweep_grid.default_points(AXIS, 1, 16, cpu=True) == 5
    assert sweep_grid.sweep_values(AXIS, 1, 16, 5) == (1, 2, 4, 8, 16)
    assert sweep_grid.sweep_values(AXIS, 1, 16, 4, spacing="linear") == (1, 6, 11, 16)
    with pytest.raises(ValueError, match=f"must lie between 1 and {limits.MAX_QUERY_LEN}; got 0 to 4"):
        sweep_grid.sweep_values(AXIS, 0, 4, 3)
    with pytest.raises(ValueError, match="got 1 to 17"):
        sweep_grid.sweep_values(AXIS, 1, 17, 3)


def test_a_point_gives_every_sequence_its_new_tokens_capped_at_its_context():
    base = SWEEP_BASE.with_(context_lens=(3, 37))
    config = sweep_grid.point_config(base, AXIS, 8)
    assert config.lengths == (3, 37) and config.query_lengths == (3, 8) and config.num_query_tokens == 11
    assert sweep_grid.point_config(base, AXIS, 1).query_lens == 1


def test_other_axes_keep_the_sidebars_new_tokens_per_sequence():
    base = SWEEP_BASE.with_(query_lens=(2, 5))
    assert sweep_grid.point_config(base, "batch_size", 5).query_lens == (2, 5, 2, 5, 2)
    assert sweep_grid.point_config(base, "context_len", 4).query_lens == (2, 4)  # at most the new context
    assert sweep_grid.point_config(base, "context_len", 64).query_lens == (2, 5)
    assert sweep_grid.point_config(base, "head_dim", 16).query_lens == (2, 5)


def test_the_cpu_cap_counts_the_new_tokens():
    base = SWEEP_BASE.with_(num_heads=8)  # 2 x max(2 x 37, 8 x 64 x q): 8,192 at q = 8, 16,384 at 16
    plan = sweep_grid.cap_grid(base, AXIS, (1, 2, 4, 8, 16), 0, 2)
    assert plan.values == (1, 2, 4, 8) and plan.refusal is None
    assert any("1 of 5 points dropped" in note and limits.CPU_WORK_RULE in note for note in plan.notes)
    refused = sweep_grid.cap_grid(base.with_(batch_size=8), AXIS, (4, 8), 0, 2)
    assert refused.values == () and "Lower the new tokens (q_len per sequence) range, or the sidebar's batch or query heads" in \
        refused.refusal


def test_rows_carry_the_new_tokens_and_the_time_per_token_is_per_step_over_them():
    base = SWEEP_BASE.with_(context_lens=(3, 37))
    frame = sweep_runs.rows_frame(job_rows((1, 4, 16), axis=AXIS, base=base, skip_from=99), "this session")
    triton = frame[frame["implementation"] == "triton"].set_index("value")
    assert triton["query_lens"].tolist() == ["1", "3..4 (mean 4)", "3..16 (mean 10)"]
    assert triton["query_tokens"].tolist() == [2, 7, 19]
    per_token = sweep_runs.per_token_ms(triton)
    assert per_token.tolist() == pytest.approx([0.1 / 2, 0.1 / 7, 0.1 / 19])
    assert sweep_runs.per_token_ms(triton, "p80_ms").tolist() == pytest.approx([0.11 / 2, 0.11 / 7, 0.11 / 19])
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(frame), "uploaded: q.csv")
    assert back["query_lens"].tolist() == frame["query_lens"].tolist()
    assert back["query_tokens"].tolist() == frame["query_tokens"].tolist()


def test_a_csv_from_before_draft_tokens_reads_as_one_token_a_sequence():
    frame = sweep_runs.rows_frame(job_rows((16, 32)), "this session").drop(columns=["query_lens", "query_tokens"])
    back = sweep_runs.read_sweep_csv(frame.to_csv(index=False), "uploaded: old.csv")
    assert set(back["query_lens"]) == {"1"} and set(back["query_tokens"]) == {2}
    assert sweep_runs.per_token_ms(back).tolist() == pytest.approx((back["median_ms"] / 2).tolist(), nan_ok=True)


def test_the_points_table_shows_the_time_per_token_only_with_draft_tokens():
    drafts = sweep_runs.rows_frame(job_rows((1, 8), axis=AXIS, skip_from=99), "this session")
    table, columns = view.points_table(drafts)
    assert "per_token_ms" in [c.key for c in columns]
    triton = table[table["label"] == "Triton"]
    assert triton["per_token_ms"].tolist() == ["0.0500", "0.00625"]  # 0.1 ms over 2 and 16 tokens
    plain, columns = view.points_table(sweep_runs.rows_frame(job_rows((16, 32)), "this session"))
    assert "per_token_ms" not in [c.key for c in columns]


def test_the_grid_caption_names_what_the_axis_keeps():
    plan = sweep_grid.cap_grid(SWEEP_BASE, AXIS, (1, 2, 4), 0, 2)
    caption = view.grid_caption(plan, AXIS, (), SWEEP_BASE.with_(query_lens=4))
    assert caption.startswith("**3 points**: 1, 2, 4 · the sidebar's contexts stay; each sequence's last q_len")
    assert "sidebar: B=2 ctx=37" in caption


def test_the_per_token_chart_divides_each_step_by_its_new_tokens_beside_a_flat_step():
    rows = []
    for q, ms in ((1, 0.02), (2, 0.0201), (4, 0.0203), (8, 0.03), (16, 0.06)):  # flat, then rising
        config = sweep_grid.point_config(SWEEP_BASE, AXIS, q)
        rows.append(sweep_runs.result_row(fake_result("triton", ms), config, AXIS, q, copy_gbps=None,
                                          device_name="test", warmup=0, iters=2))
        rows.append(sweep_runs.result_row(fake_result("vectorized", 10 * ms), config, AXIS, q, copy_gbps=None,
                                          device_name="test", warmup=0, iters=2))
    frame = sweep_runs.rows_frame(rows, "this session")
    fig = sweep_per_token_figure(frame)
    (triton,) = [t for t in fig.data if t.meta["implementation"] == "triton" and t.meta["kind"] == "timed"]
    unit = triton.meta["unit"]
    assert unit == "µs" and fig.layout.yaxis.title.text == "time per token (µs)"
    tokens = np.array([2, 4, 8, 16, 32])
    assert list(triton.x) == [1, 2, 4, 8, 16]
    assert np.allclose(triton.y, [in_unit(ms, unit) for ms in np.array([0.02, 0.0201, 0.0203, 0.03, 0.06]) / tokens])
    (flat,) = [t for t in fig.data if t.meta["kind"] == "flat"]
    assert np.allclose(flat.y, in_unit(0.02, unit) / tokens)
    # flat per step while memory-bound: on the line; then above it
    assert np.allclose(triton.y[:3], flat.y[:3], rtol=0.02) and (triton.y[3:] > 1.4 * np.array(flat.y[3:])).all()
    assert fig.layout.xaxis.title.text == sweep_grid.AXES[AXIS]


def test_the_per_token_chart_without_a_timed_point_says_so():
    config = sweep_grid.point_config(SWEEP_BASE, AXIS, 2)
    frame = sweep_runs.rows_frame([sweep_runs.status_row("triton", "failed", config, AXIS, 2, note="boom")], "s")
    fig = sweep_per_token_figure(frame)
    assert not [t for t in fig.data if t.type == "scatter" and t.x]
    assert any("No timed point" in a.text for a in fig.layout.annotations)


def test_the_config_for_a_sweep_over_the_new_tokens_is_valid_at_every_point():
    base = DecodeConfig(batch_size=3, context_lens=(0, 2, 40), num_heads=4, num_kv_heads=2, head_dim=16)
    for q in sweep_grid.sweep_values(AXIS, 1, 16, 5):
        config = sweep_grid.point_config(base, AXIS, q)
        assert config.query_lengths == (1, min(q, 2), q)
