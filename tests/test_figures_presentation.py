"""Presentation mode (``for_presentation``): every figure family gets its fonts,
markers and lines enlarged by one factor, in frames too, with room to hold them;
the input is left alone and a second call does not compound."""

import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from test_figures_benchmark import RESULTS, _benchmark_figures
from test_figures_kernel import kernel_trace
from test_figures_serving import SERVING

from explorer import style
from explorer.bench import accuracy_figures, figures as bench_figures
from explorer.cache import figures as cache_figures
from explorer.cache import pool_figures
from explorer.cache import walk_figures
from explorer.kernel import figures as kernel_figures
from explorer.serving import figures as serving_figures
from explorer.serving.history import simulate
from explorer.serving.tradeoff import block_size_tradeoff
from explorer.style import for_presentation
from explorer.sweep import figures as sweep_figures
from explorer.sweep import runs as sweep_runs
from helpers import job_rows
from paged_attention import DecodeConfig, assign_blocks

SCALE = 1.6


def _family_figures() -> dict[str, go.Figure]:
    """One figure of every kind the pages draw."""
    config = DecodeConfig(batch_size=3, context_lens=(37, 5, 90), block_size=16, block_layout="shuffled")
    tables, owner = (t.numpy() for t in assign_blocks(config))
    lens = config.lengths
    out = {
        "block_table": cache_figures.block_table_figure(tables, lens, 16, config.num_blocks),
        "pool": pool_figures.pool_figure(owner, tables, lens, 16),
        "token_walk": walk_figures.token_walk_figure(tables[0], lens[0], 16, 0, config.num_blocks),
        "block_walk": walk_figures.block_walk_figure(tables[0], lens[0], 16, 0, config.num_blocks),
    }
    out.update(_benchmark_figures(RESULTS))
    frame = sweep_runs.rows_frame(job_rows(copy=4000.0), "this session")
    other = sweep_runs.rows_frame(job_rows(copy=4000.0), "uploaded")
    other["median_ms"] = other["median_ms"] * 2
    out.update({
        "sweep_latency": sweep_figures.sweep_latency_figure(frame),
        "sweep_bandwidth": sweep_figures.sweep_bandwidth_figure(frame),
        "sweep_speedup": sweep_figures.sweep_speedup_figure(frame),
        "sweep_ratio": sweep_figures.sweep_ratio_figure(pd.concat([frame, other], ignore_index=True), "uploaded",
                                                  "this session"),
    })
    history = simulate(SERVING, 60)
    record = history.records[30]
    steps = [0, 20, 40, 59]
    out.update({
        "serving_pool": serving_figures.serving_pool_figure(record.pool_owner(), record.block_tables(), record.context_lens,
                                                    4, step=30),
        "serving_timeline": serving_figures.serving_timeline_figure(history.metrics, 30, 48),
        "tradeoff": serving_figures.tradeoff_figure(block_size_tradeoff(SERVING, (1, 4, 16), steps=40, pool_tokens=192).table,
                                            {1: 0.5, 16: 0.2}, current=4),
        "pool_animation": serving_figures.pool_animation_figure(
            np.stack([history.records[s].pool_owner() for s in steps]), steps, 4),
    })
    _, _, _, trace = kernel_trace(block_n=16, num_splits=2)
    out.update({
        "kernel_walk": kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, 16),
        "online_softmax": kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error),
        "split_merge": kernel_figures.split_merge_figure(trace.splits),
    })
    return out


FIGURES = _family_figures()


def _sizes(node, path=(), parent=""):
    """``path -> value`` of every font size, marker size and line width in a figure's JSON."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _sizes(item, (*path, i), parent)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "template":
                continue
            if (key == "size" and (parent.endswith("font") or parent == "marker")) or (parent == "line" and key == "width"):
                if value is not None:
                    yield (*path, key), value
            elif isinstance(value, (dict, list)):
                yield from _sizes(value, (*path, key), key)


def _at(spec, path):
    for step in path:
        spec = spec[step]
    return spec


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_size_is_scaled_in_every_family(name):
    fig = FIGURES[name]
    before = fig.to_plotly_json()
    big = for_presentation(fig, SCALE)
    spec = big.to_plotly_json()
    assert fig.to_plotly_json().keys() == before.keys() and fig.layout.meta == before["layout"].get("meta")
    sizes = dict(_sizes(before))
    assert sizes, "a figure with no explicit sizes tests nothing"
    for path, value in sizes.items():
        new = _at(spec, path)
        heat_text = path[0] in ("data", "frames") and "textfont" in path and _at(spec, path[:-2]).get("type") in (
            "heatmap", None)
        expected = np.round(np.asarray(value, dtype=float) * SCALE, 2)
        if path == ("layout", "title", "font", "size"):
            continue  # below: a long title grows less
        if heat_text:  # in-cell text grows only as far as its cells hold it
            assert np.all(np.asarray(value) <= np.asarray(new)) and np.all(np.asarray(new) <= expected), path
        else:
            assert np.allclose(np.asarray(new, dtype=float), expected), (path, value, new)
    assert big.layout.font.size == pytest.approx(13 * SCALE)
    # A title grows as far as the narrowest chart holds it, and never shrinks.
    fit = min(SCALE, max(1, style.TITLE_LINE / len(re.sub(r"<[^>]*>", "", fig.layout.title.text))))
    assert big.layout.title.font.size == pytest.approx(16 * fit, abs=0.01)
    assert big.layout.hoverlabel.font.size == pytest.approx(13 * SCALE)
    for trace in big.data:
        if trace.type == "scatter":
            assert trace.marker.size is not None and trace.line.width is not None  # Plotly's defaults, scaled
    # Room for the larger text: the margins grow, and the height with them (the plot keeps its size).
    assert big.layout.margin.t > fig.layout.margin.t * SCALE - 1
    assert big.layout.height - fig.layout.height >= (big.layout.margin.t - fig.layout.margin.t) + (
        big.layout.margin.b - fig.layout.margin.b)


def test_frames_are_scaled():
    fig = FIGURES["pool_animation"]
    assert fig.frames
    big = for_presentation(fig, SCALE)
    for small_frame, big_frame in zip(fig.frames, big.frames):
        small, large = small_frame.to_plotly_json(), big_frame.to_plotly_json()
        for path, value in _sizes(small):
            assert np.allclose(np.asarray(_at(large, path), dtype=float), np.asarray(value, dtype=float) * SCALE)
    assert big.layout.sliders[0].currentvalue.font.size == pytest.approx(
        (fig.layout.sliders[0].currentvalue.font.size or 13) * SCALE)


def test_markers_lines_annotations_and_heatmap_text_of_a_plain_figure():
    fig = go.Figure([go.Scatter(y=[1, 2], marker=dict(size=[4, 8], line=dict(width=1)), line=dict(width=2)),
                     go.Heatmap(z=[[1, 2], [3, 4]], texttemplate="%{z}", textfont=dict(size=10))],
                    frames=[go.Frame(data=[go.Scatter(marker=dict(size=5))])])
    fig.add_annotation(text="note", font=dict(size=12), x=0, y=0)
    fig.update_layout(height=300, margin=dict(t=50, b=40, l=40, r=10), legend=dict(font=dict(size=11)))
    big = for_presentation(fig, 2)
    scatter, heat = big.data
    assert list(scatter.marker.size) == [8, 16] and scatter.marker.line.width == 2 and scatter.line.width == 4
    assert heat.textfont.size == 20  # two cells a row: room to spare
    assert big.frames[0].data[0].marker.size == 10
    assert big.layout.annotations[0].font.size == 24 and big.layout.legend.font.size == 22
    assert big.layout.font.size == 24 and big.layout.hoverlabel.font.size == 26  # Plotly's 12 and 13, doubled
    assert big.layout.margin.t >= 100 and big.layout.margin.b == 80 and big.layout.height >= 300 + 50 + 40
    assert fig.data[0].line.width == 2 and fig.layout.font.size is None  # the input is left alone


def test_dense_heatmap_text_keeps_its_size():
    fig = go.Figure(go.Heatmap(z=np.arange(32).reshape(2, 16), texttemplate="%{z}", textfont=dict(size=9)))
    assert for_presentation(fig, SCALE).data[0].textfont.size == 9  # 16 two-digit cells a row: no room to grow


def test_long_titles_and_subtitles_are_wrapped_for_the_narrowest_chart():
    fig = bench_figures.latency_figure(RESULTS)
    big = for_presentation(fig, SCALE)
    for line in big.layout.title.subtitle.text.split("<br>"):
        assert len(line) <= style.SUBTITLE_LINE / SCALE
    assert big.layout.title.subtitle.text.replace("<br>", " ").split() == fig.layout.title.subtitle.text.replace(
        "<br>", " ").split()  # the same words
    assert big.layout.title.subtitle.text.count("<br>") > fig.layout.title.subtitle.text.count("<br>")


def test_does_not_compound():
    fig = FIGURES["accuracy"]
    once = for_presentation(fig, SCALE)
    assert _spec(for_presentation(fig, SCALE)) == _spec(once)  # the input is not changed
    assert _spec(for_presentation(once, SCALE)) == _spec(once)  # a scaled figure stays as it is
    assert once.layout.meta == {"presentation_scale": SCALE}
    assert _spec(for_presentation(fig, 1)) == _spec(fig)


def _spec(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


@pytest.mark.parametrize("num_splits", [1, 3])
def test_output_label_keeps_its_room_in_presentation_mode(num_splits):
    """Presentation mode cut the online-softmax chart's "merged output" to "merged
    outp": its room was a share of the x axis, which does not grow with the text.
    It sits in the right margin, which grows with it (an average character of a
    sans-serif font is taken as 0.55 of its size)."""
    _, _, _, trace = kernel_trace(block_n=16, num_splits=num_splits)
    plain = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
    for fig in (plain, for_presentation(plain)):
        star = next(t for t in fig.data if t.name == "output")
        need = star.marker.size / 2 + len(star.text[0]) * star.textfont.size * 0.55
        assert fig.layout.margin.r >= need, (star.text[0], fig.layout.margin.r, need)
    assert star.text[0] == ("merged output" if num_splits > 1 else "output")


def _tolerance_room(fig) -> tuple[float, float]:
    """Pixels from the accuracy chart's tolerance line (ratio 1) up to its panel's
    top edge, where the pass marks hang, and the height its label needs there."""
    axis, layout = fig.layout.yaxis, fig.layout
    lo, hi = axis.range
    plot = layout.height - layout.margin.t - layout.margin.b
    panel = (axis.domain[1] - axis.domain[0]) * plot
    label = next(a for a in layout.annotations if (a.text or "").startswith("tolerance"))
    return hi / (hi - lo) * panel, label.font.size * 1.2 + 2


@pytest.mark.parametrize("abs_errs", [(1e-4, 1e-4, 1e-4), (1e-10, 1.5e-3, 1e-4), (0.0, 1e-4, float("nan"))])
def test_tolerance_label_stays_under_the_pass_marks(abs_errs):
    """The error chart was cramped: in presentation mode "✓ pass" (above the top
    panel) overlapped the tolerance label (above the line at 1), which had half a
    decade of the panel, whatever its height in pixels."""
    from test_figures_benchmark import _result

    results = [_result(name, [1.0], abs_err=err, passed=err == err)
               for name, err in zip(("naive", "vectorized", "triton"), abs_errs)]
    plain = accuracy_figures.accuracy_figure(results)
    for fig in (plain, for_presentation(plain)):
        room, need = _tolerance_room(fig)
        assert room >= need, (room, need)
