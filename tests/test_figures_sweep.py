"""The exploration pages' figures are pure: check the data they carry."""

import numpy as np
import pandas as pd
import pytest

from paged_attention import DecodeConfig, build_decode_inputs
from explorer import figures, sweep
from explorer.kernel_trace_view import launch_plan, trace_row
from explorer.simulator import LengthDist, ServingConfig
from explorer.tradeoff import block_size_tradeoff
from explorer.serving_history import simulate

from helpers import job_rows


def traces(fig, **meta):
    return [t for t in fig.data if t.meta and all(t.meta.get(k) == v for k, v in meta.items())]


def frame(copy=None, source="this session", **kw):
    return sweep.rows_frame(job_rows(copy=copy, **kw), source)


# -- sweeps ----------------------------------------------------------------------

def test_sweep_latency_draws_timed_and_skipped_points():
    fig = figures.sweep_latency_figure(frame())
    (triton,) = traces(fig, implementation="triton", kind="timed")
    assert list(triton.x) == [16, 32, 64] and list(triton.y) == pytest.approx([0.1] * 3)
    assert triton.line.color == figures.IMPL_COLORS["triton"]
    assert list(triton.error_y.array) == pytest.approx([0.01] * 3)  # p90 - median
    (naive,) = traces(fig, implementation="naive", kind="timed")
    assert list(naive.x) == [16, 32]
    (skipped,) = traces(fig, implementation="naive", kind="skipped")
    assert list(skipped.x) == [64] and list(skipped.y) == pytest.approx([0.64])  # at the predicted time
    assert skipped.marker.symbol == figures.SKIPPED_SYMBOL and list(skipped.text) == ["skipped"]
    assert "over budget" in skipped.customdata[0]
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == sweep.AXES["context_len"]
    assert list(fig.layout.xaxis.tickvals) == [16, 32, 64]


def test_sweep_latency_axes_are_linear_when_the_range_is_narrow():
    fig = figures.sweep_latency_figure(frame(values=(16, 20), skip_from=1000))
    assert fig.layout.xaxis.type == "linear" and fig.layout.yaxis.type == "linear"


def test_two_sources_are_told_apart_by_line_style():
    both = pd.concat([frame(), frame(source="uploaded: h200.csv")], ignore_index=True)
    fig = figures.sweep_latency_figure(both)
    mine, theirs = traces(fig, implementation="triton", kind="timed")
    assert (mine.line.dash, theirs.line.dash) == ("solid", "dash")
    assert theirs.name == "Triton · uploaded: h200.csv"


def test_sweep_bandwidth_uses_gpu_time_and_draws_the_ceiling():
    fig = figures.sweep_bandwidth_figure(frame(copy=4.0))
    (triton,) = traces(fig, implementation="triton")
    assert list(triton.y) == pytest.approx([1e-3 / 0.05] * 3)  # gpu_gbps, not the call-latency gbps
    assert list(triton.customdata) == pytest.approx([100 * 0.02 / 4.0] * 3)
    assert [s.y0 for s in fig.layout.shapes] == [4.0]
    assert "ceiling" in fig.layout.annotations[0].text


def test_sweep_bandwidth_on_the_cpu_says_there_is_no_ceiling():
    fig = figures.sweep_bandwidth_figure(frame())
    (triton,) = traces(fig, implementation="triton")
    assert list(triton.y) == pytest.approx([1e-3 / 0.1] * 3)
    assert not fig.layout.shapes
    assert any("No ceiling on the CPU" in a.text for a in fig.layout.annotations)


def test_sweep_speedup_against_triton():
    fig = figures.sweep_speedup_figure(frame())
    (vec,) = traces(fig, implementation="vectorized", kind="timed")
    assert list(vec.y) == pytest.approx([5.0] * 3)
    (naive,) = traces(fig, implementation="naive", kind="timed")
    assert list(naive.y) == pytest.approx([1.6, 3.2])
    (skipped,) = traces(fig, implementation="naive", kind="skipped")
    assert list(skipped.x) == [64] and list(skipped.y) == pytest.approx([6.4])
    assert not traces(fig, implementation="triton")
    empty = figures.sweep_speedup_figure(frame()[lambda f: f["implementation"] != "triton"])
    assert "No Triton result" in empty.layout.annotations[0].text


def test_sweep_ratio_of_two_sources():
    other = frame(source="uploaded")
    other["median_ms"] = other["median_ms"] * 2
    fig = figures.sweep_ratio_figure(pd.concat([frame(), other], ignore_index=True), "uploaded", "this session")
    (triton,) = [t for t in fig.data if t.meta and t.meta["implementation"] == "triton"]
    assert list(triton.y) == pytest.approx([2.0] * 3)
    (naive,) = [t for t in fig.data if t.meta and t.meta["implementation"] == "naive"]
    assert list(naive.x) == [16, 32]  # only points both timed
    none = figures.sweep_ratio_figure(frame(), "uploaded", "this session")
    assert "share no measured point" in none.layout.annotations[0].text


def test_empty_sweep_figures():
    for make in (figures.sweep_latency_figure, figures.sweep_bandwidth_figure):
        assert "No points" in make(frame().iloc[:0]).layout.annotations[0].text


# -- serving -------------------------------------------------------------------

SERVING = ServingConfig(num_blocks=48, block_size=4, max_batch_size=5, arrival_rate=0.6,
                        prompt_len=LengthDist("long-tail", 2, 40), output_len=LengthDist("uniform", 2, 20), seed=3)


@pytest.fixture(scope="module")
def history():
    return simulate(SERVING, 60)


def test_serving_pool_marks_what_the_step_changed(history):
    step = int(history.metrics["recycled"].to_numpy().argmax())
    record = history.records[step]
    taken, freed, recycled = history.changes(step)
    owner = record.pool_owner()
    fig = figures.serving_pool_figure(owner, record.block_tables(), record.context_lens, 4, step=step,
                                      taken=taken, freed=freed, recycled=recycled)
    assert fig.layout.title.text == f"Physical block pool after step {step}"
    z = np.array(fig.data[0].z, dtype=float).ravel()[: len(owner)]
    assert np.array_equal(z == 0, owner == -1)
    _, n_cols, _ = figures.pool_grid_shape(len(owner))
    marks = {t.name: t for t in fig.data}
    got = {int(b) for b in np.array(marks["recycled this step"].customdata)[:, 0]}
    assert got == set(recycled.tolist()) and len(got) > 0
    fresh = marks["taken this step"]
    fresh_ids = set() if fresh.customdata is None else {int(b) for b in np.array(fresh.customdata)[:, 0]}
    assert fresh_ids == set(taken.tolist()) - got
    b = int(recycled[0])
    assert marks["recycled this step"].x[0] == pytest.approx(b % n_cols - 0.27)
    hover = np.array(fig.data[0].customdata).ravel()
    assert f"sequence {owner[b]}" in hover[b]


def test_serving_pool_aggregated_has_no_step_marks():
    owner = np.full(figures.MAX_POOL_CELLS * 2, -1)
    owner[:10] = 1
    fig = figures.serving_pool_figure(owner, np.array([np.arange(10)]), [40], 4, taken=[1, 2], freed=[20])
    assert not {"taken this step", "freed this step"} & {t.name for t in fig.data}


def test_serving_timeline(history):
    m = history.metrics
    fig = figures.serving_timeline_figure(m, step=30, num_blocks=48)
    by_name = {t.name: t for t in fig.data if t.name}
    for name, col in (("blocks in use", "blocks_in_use"), ("wasted slots", "wasted_slots"),
                      ("running", "running"), ("waiting", "waiting")):
        assert list(by_name[name].y) == m[col].tolist()
    assert list(by_name["pool size"].y) == [48, 48]
    assert [s.x0 for s in fig.layout.shapes] == [30, 30, 30]
    assert by_name["wasted slots"].yaxis == "y2" and by_name["waiting"].yaxis == "y3"


def test_tradeoff_figure():
    result = block_size_tradeoff(SERVING, (1, 4, 16), steps=40, pool_tokens=192)
    fig = figures.tradeoff_figure(result.table, current=4)
    bars = fig.data[0]
    assert list(bars.x) == ["1", "4", "16"]
    assert list(bars.y) == pytest.approx(100 * result.table["wasted_fraction"].to_numpy())
    assert bars.y[0] == 0  # one-token blocks waste nothing
    assert list(bars.marker.line.width) == [1, 2, 1]
    assert len(fig.data) == 1
    with_latency = figures.tradeoff_figure(result.table, {1: 0.5, 16: 0.2})
    line = with_latency.data[1]
    assert list(line.x) == ["1", "16"] and list(line.y) == [0.5, 0.2] and line.yaxis == "y2"
    y2 = with_latency.layout.yaxis2
    assert y2.title.text == "Triton latency (ms)" and y2.range is None and y2.overlaying == "y"
    assert with_latency.layout.yaxis.title.text.startswith("wasted slots")


def test_pool_animation(history):
    steps = [0, 20, 40, 59]
    owners = np.stack([history.records[s].pool_owner() for s in steps])
    fig = figures.pool_animation_figure(owners, steps, 4)
    assert [f.name for f in fig.frames] == ["0", "20", "40", "59"]
    z = np.array(fig.frames[2].data[0].z, dtype=float).ravel()[: owners.shape[1]]
    assert np.array_equal(z == 0, owners[2] == -1)
    assert np.array_equal(z[owners[2] >= 0], 2 + owners[2][owners[2] >= 0] % len(figures.SEQUENCE_COLORS))
    assert fig.layout.updatemenus[0].buttons[0].label == "▶ Play"
    with pytest.raises(ValueError, match="frames"):
        figures.pool_animation_figure(np.zeros((figures.MAX_ANIMATION_FRAMES + 1, 8)), list(range(81)), 4)


def test_block_table_names_rows_by_seq_id():
    tables = np.array([[3, 4, -1], [0, -1, -1]])
    fig = figures.block_table_figure(tables, [20, 5], 16, 8, seq_ids=[17, 42], title="Running")
    cd = np.array(fig.data[0].customdata)
    assert cd[1, 0, 0] == 42 and cd[0, 1, 0] == 17
    assert list(fig.layout.yaxis.ticktext) == ["17", "42"] and fig.layout.title.text == "Running"


# -- inside the kernel ---------------------------------------------------------------

def kernel_trace(context_lens=(300, 97), block_size=16, **overrides):
    config = DecodeConfig(batch_size=len(context_lens), context_lens=context_lens, num_heads=4, num_kv_heads=2,
                          head_dim=16, block_size=block_size, dtype="float32", block_layout="shuffled")
    tables = build_decode_inputs(config).block_tables.numpy()
    plan = launch_plan(config, tables, **overrides)
    return config, tables, plan, trace_row(config, tables, 0, 1, plan=plan)


def test_kernel_walk_covers_every_token_once_in_its_physical_block():
    config, tables, plan, trace = kernel_trace(block_n=32, num_splits=3)
    fig = figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks)
    bars = fig.data[0]
    base, length = np.array(bars.base).astype(int), np.array(bars.x).astype(int)
    phys = np.array(bars.customdata)[:, 0].astype(int)
    covered = np.concatenate([np.arange(b, b + n) for b, n in zip(base, length)])
    assert np.array_equal(np.sort(covered), np.arange(300))  # every token read once
    assert np.array_equal(phys, tables[0][base // 16])  # from the block the table names
    assert len(base) == -(-300 // 16)  # one segment per block: 19 table lookups
    assert list(np.array(bars.y)) == list(np.repeat(trace.tiles.index, trace.tiles["num_physical_blocks"]))
    masked = fig.data[1]
    assert list(masked.x) == trace.tiles["masked_lanes"].tolist()
    assert "3 splits" in fig.layout.title.subtitle.text and "19 block-table lookups" in fig.layout.title.subtitle.text
    assert len(fig.layout.shapes) == 2  # two split boundaries
    assert "lookups" in fig.layout.yaxis.ticktext[0]


def test_kernel_walk_of_a_long_row_draws_one_bar_per_tile():
    tiles = pd.DataFrame({
        "split": 0, "tile": range(3000), "subtile": 0, "first_block": range(3000), "end_block": range(1, 3001),
        "token_start": range(0, 3000), "token_end": range(1, 3001), "valid_tokens": 1, "masked_lanes": 15,
        "physical_blocks": [(i,) for i in range(3000)], "num_physical_blocks": 1, "table_lookups": 1,
    })
    fig = figures.kernel_walk_figure(tiles, 3000, 1, 16)
    assert len(fig.data[0].x) == 3000 and len(fig.layout.yaxis.tickvals) <= 41
    assert "colour = split" in fig.layout.title.subtitle.text


def test_kernel_walk_of_an_empty_row():
    fig = figures.kernel_walk_figure(pd.DataFrame(), 0, 16, 64)
    assert "no cached tokens" in fig.layout.annotations[0].text


def test_online_softmax_figure_follows_the_trace():
    _, _, _, trace = kernel_trace(block_n=16, num_splits=2)
    fig = figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
    by_name = {t.name: t for t in fig.data}
    for s, part in trace.tiles.groupby("split"):
        assert list(by_name[f"m (split {s})"].y) == part["m"].tolist()
        assert list(by_name[f"l (split {s})"].y) == part["l"].tolist()
        assert list(by_name[f"m (split {s})"].x) == part["token_end"].tolist()
        err = np.array(by_name[f"error vs split (split {s})"].y)
        assert err[-1] < 1e-12 and err.min() >= figures.ERROR_FLOOR_F64
    star = by_name["output"]
    assert list(star.x) == [300] and star.y[0] < 1e-12 and star.text[0] == "merged output"
    m0 = np.array(by_name["m (split 0)"].y)
    assert np.all(np.diff(m0) >= 0)  # a running max never falls
    assert fig.layout.yaxis2.type == "log" and fig.layout.yaxis3.type == "log"


def test_split_merge_shares_sum_to_one_hundred():
    _, _, _, trace = kernel_trace(num_splits=3)
    fig = figures.split_merge_figure(trace.splits)
    m, share = fig.data
    assert list(m.y) == trace.splits["m"].tolist()
    assert sum(share.y) == pytest.approx(100)
    weights = np.array(share.customdata)[:, 1]
    assert weights.max() == pytest.approx(1.0)  # the split holding the max keeps weight 1
    assert list(m.x) == [f"split {s}" for s in trace.splits["split"]]
