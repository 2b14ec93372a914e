"""Figures are pure: check the data they carry, not just that they exist."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from paged_attention import DecodeConfig, assign_blocks
from explorer import figures
from paged_attention.inputs import FREE, OTHER


def _layout(batch=3, lens=(5, 40, 16), block_size=16, layout="shuffled", seed=0):
    config = DecodeConfig(batch_size=batch, context_lens=lens, block_size=block_size, block_layout=layout, seed=seed)
    tables, owner = assign_blocks(config)
    return config, tables.numpy(), owner.numpy()


def test_block_table_heatmap_matches_table():
    config, tables, _ = _layout()
    fig = figures.block_table_figure(tables, config.lengths, config.block_size, config.num_blocks)
    alloc, unalloc = fig.data[0], fig.data[1]
    z = np.array(alloc.z, dtype=float)
    assert z.shape == tables.shape
    assert np.array_equal(np.isnan(z), tables < 0)
    assert np.array_equal(z[tables >= 0], tables[tables >= 0])
    assert np.array_equal(~np.isnan(np.array(unalloc.z, dtype=float)), tables < 0)
    # customdata: seq, logical, first token, last token, physical, filled
    cd = np.array(alloc.customdata)
    assert cd[1, 2].tolist() == [1, 2, 32, 39, tables[1, 2], 8]
    assert cd[0, 0].tolist() == [0, 0, 0, 4, tables[0, 0], 5]
    assert "physical block" in alloc.hovertemplate and "slots filled" in alloc.hovertemplate
    assert alloc.zmax == config.num_blocks - 1
    assert "unallocated" in unalloc.hovertemplate


def test_block_table_samples_large_tables():
    tables = np.arange(256 * 2048, dtype=np.int64).reshape(256, 2048)
    fig = figures.block_table_figure(tables, [2048 * 16] * 256, 16)
    z = np.array(fig.data[0].z)
    assert z.size <= figures.MAX_TABLE_CELLS
    xs, ys = np.array(fig.data[0].x), np.array(fig.data[0].y)
    assert np.array_equal(z, tables[np.ix_(ys, xs)])  # sampled cells keep exact values
    grid = figures.sample_grid(256, 2048, figures.MAX_TABLE_CELLS)
    assert grid.sampled and "every" in grid.note("sequence", "logical block")


@pytest.mark.parametrize("rows, cols, cap", [(1, 1, 10), (4, 65536, 20000), (4096, 3, 1000), (300, 300, 20000)])
def test_sample_grid_respects_cap(rows, cols, cap):
    grid = figures.sample_grid(rows, cols, cap)
    assert grid.cells <= cap
    assert grid.rows[0] == 0 and grid.cols[0] == 0
    assert (grid.cells == rows * cols) == (not grid.sampled)


def test_pool_figure_categories_and_partial_marks():
    config, tables, owner = _layout(batch=4, lens=(5, 40, 16, 900), layout="fragmented", seed=1)
    assert (owner == OTHER).any() and (owner == FREE).any()
    fig = figures.pool_figure(owner, tables, config.lengths, config.block_size)
    heat = fig.data[0]
    z = np.array(heat.z, dtype=float).ravel()[: len(owner)]
    assert np.all(z[owner == FREE] == 0)
    assert np.all(z[owner == OTHER] == 1)
    assert np.array_equal(z[owner >= 0], 2 + owner[owner >= 0] % len(figures.SEQUENCE_COLORS))
    names = [t.name for t in fig.data]
    assert "free" in names and "other sequences (not in batch)" in names
    partial = next(t for t in fig.data if t.name == "partly filled last block")
    # lens 5, 40 and 900 leave partly filled last blocks; 16 fills its block exactly
    marked = {int(b) for b in np.array(partial.customdata)[:, 0]}
    assert marked == {int(tables[0, 0]), int(tables[1, 2]), int(tables[3, 56])}
    hover = np.array(heat.customdata).ravel()
    assert "sequence 1, logical block 2" in hover[tables[1, 2]] and "8/16" in hover[tables[1, 2]]


def test_pool_figure_aggregates_large_pools():
    config, tables, owner = _layout(batch=64, lens=8192, block_size=1)
    assert len(owner) > figures.MAX_POOL_CELLS
    fig = figures.pool_figure(owner, tables, config.lengths, config.block_size)
    z = np.array(fig.data[0].z, dtype=float)
    assert z.size <= figures.MAX_POOL_CELLS
    share = z[~np.isnan(z)]
    assert share.min() >= 0 and share.max() <= 1
    counts = np.array(fig.data[0].customdata)[..., 2:].sum(-1).sum()
    assert counts == len(owner)  # every block counted once


def test_token_walk_maps_tokens_to_blocks_and_slots():
    config, tables, _ = _layout()
    fig = figures.token_walk_figure(tables[1], 40, 16, seq=1, num_blocks=config.num_blocks)
    z = np.array(fig.data[0].z, dtype=float)
    assert z.shape == (3, 16)
    cd = np.array(fig.data[0].customdata)
    token = 37
    row, slot = token // 16, token % 16
    assert cd[row, slot].tolist() == [token, row, tables[1, row], slot]
    assert z[row, slot] == tables[1, row]
    empty = ~np.isnan(np.array(fig.data[1].z, dtype=float))
    assert empty.sum() == 3 * 16 - 40 and empty[2, 8:].all()


def test_token_walk_scale_follows_a_sequence_lost_in_a_huge_pool():
    fig = figures.token_walk_figure(np.arange(1000, 1064), 64 * 16, 16, num_blocks=500_000)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (1000, 1063)
    assert "this sequence's blocks" in fig.layout.title.subtitle.text
    config, tables, _ = _layout()
    small = figures.token_walk_figure(tables[1], 40, 16, num_blocks=config.num_blocks)
    assert (small.data[0].zmin, small.data[0].zmax) == (0, config.num_blocks - 1)


def test_token_walk_of_an_empty_sequence():
    fig = figures.token_walk_figure(np.array([-1]), 0, 16, seq=2)
    assert "no cached tokens" in fig.layout.annotations[0].text


def test_block_walk_follows_the_row():
    config, tables, _ = _layout()
    fig = figures.block_walk_figure(tables[1], 40, 16, seq=1)
    assert list(fig.data[0].x) == [0, 1, 2]
    assert list(fig.data[0].y) == tables[1, :3].tolist()


def _result(name, samples, gpu=None, abs_err=1e-4, rel_err=1e-3, passed=True):
    med = float(np.median(samples))
    return SimpleNamespace(
        name=name, label={"naive": "Naive PyTorch", "vectorized": "Optimized PyTorch", "triton": "Triton"}[name],
        samples_ms=samples, median_ms=med, p10_ms=min(samples), p90_ms=max(samples), gpu_time_ms=gpu,
        gbps=2.0 / med, gpu_gbps=None if gpu is None else 2.0 / gpu, bytes_moved=2_000_000,
        max_abs_err=abs_err, max_rel_err=rel_err, atol=2e-3, rtol=2e-3, passed=passed, device="cuda:0",
    )


RESULTS = [
    _result("naive", [10.0, 11.0, 12.0]),
    _result("vectorized", [1.0, 1.2, 1.1], gpu=0.5, abs_err=0.0),
    _result("triton", [0.2, 0.25, 0.3], gpu=0.05, abs_err=float("nan"), passed=False),
]


def test_latency_figure():
    fig = figures.latency_figure(RESULTS)
    boxes = [t for t in fig.data if t.type == "box"]
    assert [t.name for t in boxes] == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(boxes[0].y) == [10.0, 11.0, 12.0]
    assert [t.marker.color for t in boxes] == [figures.IMPL_COLORS[n] for n in ("naive", "vectorized", "triton")]
    gpu = next(t for t in fig.data if t.name == "GPU time (CUDA graph)")
    assert list(gpu.y) == [0.5, 0.05]
    assert fig.layout.yaxis.type == "log" and "ms" in fig.layout.yaxis.title.text


def test_speedup_figure():
    fig = figures.speedup_figure(RESULTS)
    assert list(fig.data[0].y) == pytest.approx([1.0, 10.0, 44.0])
    assert fig.data[0].text[2] == "44.0×"
    assert "No naive" in figures.speedup_figure(RESULTS[1:]).layout.annotations[0].text


def test_bandwidth_figure_with_copy_bandwidth():
    fig = figures.bandwidth_figure(RESULTS, copy_gbps=100.0)
    assert [t.name for t in fig.data] == ["from call latency", "from GPU time (CUDA graph)"]
    assert fig.data[1].y[0] is None
    assert "%" in fig.data[1].text[2]
    assert any(s.y0 == 100.0 for s in fig.layout.shapes)


def test_accuracy_figure_is_finite_and_marks_failures():
    fig = figures.accuracy_figure(RESULTS)
    abs_bar, rel_bar = fig.data
    assert all(math.isfinite(v) and v > 0 for v in abs_bar.y)
    finite = [r.max_abs_err for r in RESULTS if math.isfinite(r.max_abs_err) and r.max_abs_err > 0]
    assert abs_bar.y[1] == pytest.approx(min(finite + [RESULTS[0].atol]) / 10)  # a decade under the rest
    assert abs_bar.customdata[1] == "0 (exact)" and abs_bar.text[1] == "0 (exact)"
    assert abs_bar.customdata[2] == "NaN/inf"
    texts = [a.text for a in fig.layout.annotations if "pass" in a.text or "FAIL" in a.text]
    assert texts == ["✓ pass", "✓ pass", "✗ FAIL"]
    assert any(s.y0 == 2e-3 for s in fig.layout.shapes)
    assert fig.layout.yaxis.type == "log"


def test_history_figure_groups_runs():
    history = [
        {"run": 1, "label": "B=1", "results": RESULTS},
        {"run": 2, "label": "B=2", "results": RESULTS[1:]},
    ]
    fig = figures.history_figure(history)
    assert [t.name for t in fig.data] == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert list(fig.data[0].x) == ["#1", "#2"] and fig.data[0].y[1] is None
    assert fig.data[2].marker.color == figures.IMPL_COLORS["triton"]


@pytest.mark.parametrize("n, text", [(0, "0"), (12345, "12,345"), (524288, "524k"), (589824, "590k"), (8_388_608, "8.4M"), (12_345_678, "12.3M")])
def test_compact(n, text):
    assert figures.compact(n) == text


def test_numbers_in_cells_only_when_they_fit():
    config, tables, _ = _layout()
    fig = figures.block_table_figure(tables, config.lengths, config.block_size, config.num_blocks)
    assert fig.data[0].texttemplate == "%{z}"
    wide = figures.token_walk_figure(np.arange(12), 363, 32, num_blocks=108)
    assert wide.data[0].texttemplate is None  # 32 slots of 3-digit token ids would overlap
