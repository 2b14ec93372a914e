"""Presentation mode and readable text (issue 27): one figure of every family the
pages draw, built in normal mode and inside ``style.presentation()``. Every text
element's size on screen, worked out from the figure's layout as Plotly resolves
it (explicit size, else the template's, else the inherited font), is at least
12 px in normal mode and 18 px in presentation mode; the plot area grows in
presentation mode, and integer axes keep their ranges and horizontal ticks."""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from test_figures_benchmark import RESULTS, _benchmark_figures
from test_figures_kernel import kernel_trace
from test_figures_serving import SERVING

from explorer import style
from explorer.bench import accuracy_figures, recorded_figures
from explorer.bench.recorded import RECORDED_DIR, load_recorded_set, recorded_rows
from explorer.cache import figures as cache_figures
from explorer.cache import pool_figures, sharing_figures, walk_figures
from explorer.cache.cell_style import cell_words
from explorer.cache.sharing import shared_prefix_batch
from explorer.kernel import figures as kernel_figures
from explorer.kernel import view as kernel_view
from explorer.kernel import work_list_figures
from explorer.serving import figures as serving_figures
from explorer.serving import tradeoff_figures
from explorer.serving.history import simulate
from explorer.serving.tradeoff import block_size_tradeoff
from explorer.sweep import figures as sweep_figures
from explorer.sweep import runs as sweep_runs
from helpers import job_rows
from paged_attention import DecodeConfig, assign_blocks

NORMAL_MIN_PX, PRESENTATION_MIN_PX = 12, 18


def _family_figures() -> dict[str, go.Figure]:
    """One figure of every family the pages draw (cache, walk, sharing, bench,
    recorded, sweep, serving, kernel, work list), at the scale of the caller."""
    config = DecodeConfig(batch_size=3, context_lens=(37, 5, 90), block_size=16, block_layout="shuffled")
    tables, owner = (t.numpy() for t in assign_blocks(config))
    lens = config.lengths
    shared = shared_prefix_batch((236, 114, 57, 205), 16, 45, common_prompt=64, samples=2)
    out = {
        "block_table": cache_figures.block_table_figure(tables, lens, 16, config.num_blocks),
        "pool": pool_figures.pool_figure(owner, tables, lens, 16),
        "token_walk": walk_figures.token_walk_figure(tables[0], lens[0], 16, 0, config.num_blocks),
        "block_walk": walk_figures.block_walk_figure(tables[0], lens[0], 16, 0, config.num_blocks),
        "empty_walk": walk_figures.token_walk_figure(tables[0], 0, 16, 0, config.num_blocks),
        "sharing_table": cache_figures.block_table_figure(shared.block_tables, shared.context_lens, 16, 45,
                                                          ref_counts=shared.ref_counts),
        "sharing_pool": sharing_figures.pool_ref_count_figure(shared.ref_counts, shared.block_tables, 16),
    }
    history = simulate(SERVING, 60)
    record = history.records[30]
    # The serving page's running block tables, in its narrower column (plot_width=180).
    out["serving_table"] = cache_figures.block_table_figure(
        record.block_tables(), record.context_lens, 4, SERVING.num_blocks, seq_ids=record.seq_ids,
        title="Block tables of the running sequences", color_by="sequence", plot_width=180)
    out.update(_benchmark_figures(RESULTS))
    rows = recorded_rows(load_recorded_set(RECORDED_DIR / "h200_2026-11-29.csv"), "shuffled")
    out["recorded"] = recorded_figures.recorded_latency_figure(rows, gpu="NVIDIA H200", date="2026-11-29",
                                                               layout="shuffled")
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
    steps = [0, 20, 40, 59]
    out.update({
        "serving_pool": serving_figures.serving_pool_figure(record.pool_owner(), record.block_tables(),
                                                            record.context_lens, 4, step=30),
        "serving_timeline": serving_figures.serving_timeline_figure(history.metrics, 30, 48),
        "tradeoff": tradeoff_figures.tradeoff_figure(
            block_size_tradeoff(SERVING, (1, 4, 16), steps=40, pool_tokens=192).table, {1: 0.5, 16: 0.2}, current=4),
        "pool_animation": serving_figures.pool_animation_figure(
            np.stack([history.records[s].pool_owner() for s in steps]), steps, 4),
        "sharing_timeline": sharing_figures.sharing_timeline_figure(
            simulate(replace(SERVING, system_prompt=20, samples=2), 30).metrics, 5, 48),
    })
    kconfig, ktables, plan, trace = kernel_trace(block_n=16, num_splits=2)
    groups = kernel_view.prefix_groups(kconfig, ktables)
    work = kernel_view.work_list(plan, kconfig.lengths, groups=groups,
                                 prefix=kernel_view.prefix_plan(kconfig, ktables, groups), query_group_size=2)
    out.update({
        "kernel_walk": kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, 16),
        "online_softmax": kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error),
        "split_merge": kernel_figures.split_merge_figure(trace.splits),
        "work_list": work_list_figures.work_list_figure(work, kconfig.lengths, 16, highlight=0),
    })
    return out


NORMAL = _family_figures()
with style.presentation():
    PRESENTED = _family_figures()


def _get(node: dict | None, *path, default=None):
    for key in path:
        if not isinstance(node, dict) or node.get(key) is None:
            return default
        node = node[key]
    return node


def text_sizes(fig: go.Figure) -> list[tuple[str, float]]:
    """``(element, px)`` of every text a figure draws, as Plotly resolves its
    size: the element's own, else its template's default, else the layout's font
    (Plotly's 12 px when unset). Heatmap text without a size is sized by Plotly
    to its cells (0 here: unknown); text in bars shrinks to its bar down to
    ``uniformtext.minsize`` (hidden or shown at it below), else without a floor (0)."""
    spec = fig.to_plotly_json()
    layout = spec["layout"]
    tpl, tpl_data = _get(layout, "template", "layout", default={}), _get(layout, "template", "data", default={})
    base = _get(layout, "font", "size") or _get(tpl, "font", "size") or 12
    out: list[tuple[str, float]] = []

    def font(where: str, node, *template_path, default=None) -> None:
        size = _get(node, "size") or (_get(tpl, *template_path, "size") if template_path else None)
        out.append((where, size or (base if default is None else default)))

    title = layout.get("title") or {}
    if title.get("text"):
        font("title", title.get("font"), "title", "font")
        if _get(title, "subtitle", "text"):
            font("subtitle", _get(title, "subtitle", "font"), default=0.7 * out[-1][1])
    for key, axis in layout.items():
        if not re.fullmatch(r"[xy]axis\d*", key) or axis.get("visible") is False:
            continue
        if axis.get("showticklabels") is not False:
            font(f"{key} ticks", axis.get("tickfont"), key[0] + "axis", "tickfont")
        if _get(axis, "title", "text"):
            font(f"{key} title", _get(axis, "title", "font"), key[0] + "axis", "title", "font")
    traces = spec.get("data", [])
    legend = [t for t in traces if t.get("showlegend") is not False and t.get("name")]
    if layout.get("showlegend", len(traces) > 1) and legend:
        font("legend", _get(layout, "legend", "font"), "legend", "font")
    for i, note in enumerate(layout.get("annotations", [])):
        if note.get("text") and note.get("visible") is not False:
            font(f"annotation {i} {note['text'][:20]!r}", note.get("font"), "annotationdefaults", "font")
    uniform = layout.get("uniformtext") or {}
    for i, t in enumerate(traces + [t for f in spec.get("frames", []) for t in f.get("data", [])]):
        kind = t.get("type", "scatter")
        defaults = (tpl_data.get(kind) or [{}])[0]
        own = _get(t, "textfont", "size") or _get(defaults, "textfont", "size")
        if kind == "heatmap" and t.get("texttemplate"):
            out.append((f"trace {i} heatmap text", own or 0))
        if kind == "bar" and t.get("text") is not None:
            floor = uniform.get("minsize") if uniform.get("mode") in ("hide", "show") else 0
            out.append((f"trace {i} bar text", min(own or base, floor or 0)))
        if kind == "scatter" and "text" in (t.get("mode") or "") and t.get("text") is not None:
            out.append((f"trace {i} marker text", own or base))
        bars = [t] if kind == "heatmap" and t.get("showscale") is not False else []
        if _get(t, "marker", "showscale"):
            bars.append(t["marker"])
        for bar in bars:
            cb = bar.get("colorbar") or {}
            defaults_cb = _get(defaults, "colorbar") or _get(defaults, "marker", "colorbar") or {}
            out.append((f"trace {i} colour bar ticks", _get(cb, "tickfont", "size")
                        or _get(defaults_cb, "tickfont", "size") or base))
            if _get(cb, "title", "text"):
                out.append((f"trace {i} colour bar title", _get(cb, "title", "font", "size")
                            or _get(defaults_cb, "title", "font", "size") or base))
    for i, slider in enumerate(layout.get("sliders", [])):
        out.append((f"slider {i}", _get(slider, "font", "size") or base))
        if _get(slider, "currentvalue", "visible") is not False:
            out.append((f"slider {i} value", _get(slider, "currentvalue", "font", "size") or base))
    for i, menu in enumerate(layout.get("updatemenus", [])):
        out.append((f"buttons {i}", _get(menu, "font", "size") or base))
    out.append(("hover", _get(layout, "hoverlabel", "font", "size") or _get(tpl, "hoverlabel", "font", "size") or 13))
    return out


def _plot_px(fig: go.Figure) -> float:
    layout = fig.layout
    return layout.height - layout.margin.t - layout.margin.b


@pytest.mark.parametrize("name", list(NORMAL))
def test_every_text_is_readable_in_both_modes(name):
    """At 1280 px wide nothing under 12 px in normal mode (subtitles were 10-11 px,
    the token walk's cell numbers 7 px), nothing under 18 px in presentation mode
    (the kernel's tile labels kept 12 px), in-cell text included."""
    for fig, floor in ((NORMAL[name], NORMAL_MIN_PX), (PRESENTED[name], PRESENTATION_MIN_PX)):
        sizes = text_sizes(fig)
        assert len(sizes) >= 3  # a title, ticks, the hover at least
        small = [(where, px) for where, px in sizes if px < floor - 1e-9]
        assert not small, small


@pytest.mark.parametrize("name", list(NORMAL))
def test_presentation_mode_enlarges_the_plot_area_and_the_text(name):
    """Presentation mode made the block table's cells smaller than in normal mode:
    its text grew, its plot area shrank. Now both grow by the same scale."""
    normal, big = NORMAL[name], PRESENTED[name]
    assert _plot_px(big) >= 1.3 * _plot_px(normal), (_plot_px(normal), _plot_px(big))
    sizes = dict(text_sizes(normal))
    for where, px in text_sizes(big):
        if where in sizes:
            assert px >= sizes[where] * 1.3 - 1e-9, (where, sizes[where], px)


def _integer_axis_ticks(fig: go.Figure):
    for key in fig.layout:
        axis = fig.layout[key]
        if re.fullmatch(r"xaxis\d*", key) and axis.tickmode == "array" and axis.tickvals is not None \
                and all(isinstance(v, (int, np.integer)) for v in axis.tickvals):
            yield key, axis


@pytest.mark.parametrize("name", ["block_table", "pool", "sharing_pool", "token_walk", "block_walk", "kernel_walk",
                                  "serving_pool", "pool_animation", "work_list"])
def test_integer_axes_keep_their_range_and_horizontal_ticks(name):
    """Presentation mode added a phantom "-2" tick to the block table's x axis and
    rotated the pool's: ticks fall inside the data in either mode, stay
    horizontal, and thin out (never crowd) as the text grows."""
    found = False
    for normal, big in zip(_integer_axis_ticks(NORMAL[name]), _integer_axis_ticks(PRESENTED[name])):
        found = True
        for key, axis in (normal, big):
            assert axis.tickangle == 0, key
            assert min(axis.tickvals) >= 0 and len(axis.ticktext) == len(axis.tickvals), key
        assert len(big[1].tickvals) <= len(normal[1].tickvals)
        assert set(big[1].tickvals) <= set(range(int(min(normal[1].tickvals)), int(max(normal[1].tickvals)) + 1))
    assert found, "no integer x axis"


def test_block_table_ticks_end_at_its_last_logical_block():
    config = DecodeConfig(batch_size=2, context_lens=(20, 60), block_size=16)
    tables, _ = (t.numpy() for t in assign_blocks(config))
    for mode in (1, style.PRESENTATION_SCALE):
        with style.presentation(mode):
            axis = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks).layout.xaxis
        assert set(axis.tickvals) <= {0, 1, 2, 3} and 0 in axis.tickvals


def test_kernel_tile_labels_grow_with_the_text():
    """Inside the kernel's tile labels (the walk's y ticks) kept 12 px in presentation mode."""
    normal, big = NORMAL["kernel_walk"].layout.yaxis, PRESENTED["kernel_walk"].layout.yaxis
    assert big.tickfont.size == style.PRESENTATION_SCALE * normal.tickfont.size >= PRESENTATION_MIN_PX
    assert list(big.ticktext) == list(normal.ticktext)  # the same labels, whole


def test_numbers_in_cells_are_left_to_the_hover_when_they_no_longer_fit():
    """In-cell numbers are written at the cell size of the mode or not at all: a
    row of 16 three-digit numbers fits a 400 px plot at 12 px, not at 18 px."""
    from explorer.cache.cell_style import cell_text_fits

    assert cell_text_fits(1, 16, 3, style.PLOT_WIDTH_PX, 40)
    with style.presentation():
        assert not cell_text_fits(1, 16, 3, style.PLOT_WIDTH_PX, 60) and cell_text_fits(1, 8, 3, style.PLOT_WIDTH_PX, 60)
    assert not cell_text_fits(200, 2, 1, style.PLOT_WIDTH_PX, 300)  # rows 1.5 px tall


def test_presentation_is_one_setting_read_while_figures_are_built():
    assert style.presentation_scale() == 1 and style.font_px("tick") == NORMAL_MIN_PX
    with style.presentation() as scale:
        assert scale == style.PRESENTATION_SCALE == style.presentation_scale()
        assert style.font_px("tick") == PRESENTATION_MIN_PX and style.scaled(10) == 15
        with style.presentation(1):  # nested: the inner setting holds inside, the outer after
            assert style.font_px("tick") == NORMAL_MIN_PX
        assert style.font_px("tick") == PRESENTATION_MIN_PX
    assert style.presentation_scale() == 1
    for bad in (0.5, float("nan"), "big"):
        with pytest.raises(ValueError, match="scale must be a finite number of at least 1"):
            with style.presentation(bad):
                pass


def test_presentation_of_one_session_does_not_reach_another():
    """Streamlit runs each session's script in its own thread: a context variable
    set in one thread is not seen in another."""
    seen, ready, done = [], threading.Event(), threading.Event()

    def other_session():
        ready.wait()
        seen.append(style.presentation_scale())
        done.set()

    thread = threading.Thread(target=other_session)
    thread.start()
    with style.presentation():
        ready.set()
        done.wait(10)
    thread.join(10)
    assert seen == [1.0]


@pytest.mark.parametrize("figure_px", [style.HALF_FIGURE_PX, style.NARROW_FIGURE_PX])
def test_titles_and_subtitles_break_into_lines_that_fit_their_charts(figure_px):
    long = "8 sequences x 482 logical blocks; colour = physical block id · sampled: every 2nd row shown"
    for scale in (1, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            fig = style.apply_style(go.Figure(), "Block size: memory waste against kernel latency", long,
                                    width_px=figure_px)
        for text, size, width in ((fig.layout.title.text, fig.layout.title.font.size, style.TITLE_WIDTH_PX),
                                  (fig.layout.title.subtitle.text, fig.layout.title.subtitle.font.size, figure_px)):
            lines = text.split("<br>")
            assert all(len(line) * style.CHAR_WIDTH * size <= width for line in lines), lines
        words = fig.layout.title.subtitle.text.replace("<br>", " ").split()
        assert [w for w in words if w != "·"] == [w for w in long.split() if w != "·"]  # the same words
        # The top margin holds every line of both.
        title = fig.layout.title
        lines = title.text.count("<br>") + 1, title.subtitle.text.count("<br>") + 1
        need = style.LINE_HEIGHT * (lines[0] * title.font.size + lines[1] * title.subtitle.font.size)
        assert fig.layout.margin.t >= need + 10 * scale


@pytest.mark.parametrize("num_splits", [1, 3])
def test_output_label_keeps_its_room(num_splits):
    """Presentation mode cut the online-softmax chart's "merged output" to "merged
    outp": its room was a share of the x axis, which does not grow with the text.
    It sits in the right margin, which grows with it (an average character of a
    sans-serif font is taken as 0.55 of its size)."""
    _, _, _, trace = kernel_trace(block_n=16, num_splits=num_splits)
    margins = []
    for scale in (1, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            fig = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error)
        star = next(t for t in fig.data if t.name == "output")
        need = star.marker.size / 2 + len(star.text[0]) * star.textfont.size * 0.55
        assert fig.layout.margin.r >= need, (star.text[0], fig.layout.margin.r, need)
        margins.append(fig.layout.margin.r)
    assert star.text[0] == ("merged output" if num_splits > 1 else "output")
    # presentation mode's room in both modes: the plot is no narrower in presentation mode
    assert margins[0] == margins[1]


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
    for scale in (1, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            fig = accuracy_figures.accuracy_figure(results)
        room, need = _tolerance_room(fig)
        assert room >= need, (room, need)


#: The figures the pages draw in two fifths of a 1280 px page (312 px wide in Chromium).
NARROW_FAMILIES = ("pool", "sharing_pool", "block_walk", "serving_table")
#: The figures the pages draw across the page (820 px wide in Chromium at 1280 px).
FULL_FAMILIES = ("history", "recorded", "serving_timeline", "tradeoff", "pool_animation", "work_list",
                 "sharing_timeline")


def shown_px(name: str) -> float:
    """The width (px) the pages draw figure family ``name`` at, at 1280 px."""
    return (style.NARROW_FIGURE_PX if name in NARROW_FAMILIES
            else style.FULL_FIGURE_PX if name in FULL_FAMILIES else style.HALF_FIGURE_PX)


def test_every_subtitle_fits_its_figure_at_1280_px():
    """Review at 1280x720: the Block table's pool subtitle was cut at the chart's
    edge ("... 12 per row; colour = sequen"), and so was the serving page's block
    table's: both were broken for 370 px in figures 312 px wide. Every line of
    every subtitle now fits its figure's width at its size (half a character's
    size a character, Chromium drew 5.35 px a character of 12 px text)."""
    for figures, scale in ((NORMAL, 1), (PRESENTED, style.PRESENTATION_SCALE)):
        for name, fig in figures.items():
            title = fig.layout.title
            if not title.subtitle.text:
                continue
            width = shown_px(name)
            lines = title.subtitle.text.split("<br>")
            assert all(len(line) * style.CHAR_WIDTH * title.subtitle.font.size <= width for line in lines), \
                (name, scale, lines)
            # The top margin holds its lines.
            need = style.LINE_HEIGHT * (title.font.size * (title.text.count("<br>") + 1)
                                        + title.subtitle.font.size * len(lines))
            assert fig.layout.margin.t >= need, (name, scale)
    pool = pool_figures.pool_figure(np.array([0] * 20 + [1] * 10 + [-1] * 15), np.array([[*range(20)], [*range(20, 30)] + [-1] * 10]),
                                    [320, 160], 16)
    assert pool.layout.title.subtitle.text == "45 physical blocks of 16 slots, 12 per row;<br>colour = sequence"


@pytest.mark.parametrize("sharing", [False, True])
def test_block_table_page_pool_keeps_its_block_ids_in_presentation(sharing):
    """Re-review of issue 27: presentation mode dropped every id from the Block table
    page's default pool (45 blocks, 12 a row): the audience could not match a table
    cell to its block. The page's pool lays itself out for its ids (fewer, wider
    columns); every block's id is written, in both modes, and the click targets sit
    on the cells drawn."""
    owner = np.array([0] * 15 + [1] * 7 + [2] * 4 + [3] * 13 + [-1] * 6)
    tables = np.full((4, 15), -1)
    start = 0
    for seq, n in enumerate((15, 7, 4, 13)):
        tables[seq, :n] = np.arange(start, start + n)
        start += n
    refs = np.bincount(tables[tables >= 0], minlength=len(owner))
    refs[:3] = 2
    for scale in (1.0, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            fig = (sharing_figures.pool_ref_count_figure(refs, tables, 16, fit_ids=True) if sharing
                   else pool_figures.pool_figure(owner, tables, [236, 100, 50, 200], 16, fit_ids=True))
        heat = fig.data[0]
        assert heat.texttemplate == "%{text}", scale
        written = sorted(int(t) for t in np.ravel(cell_words(heat.text)) if t)
        assert written == list(range(len(owner)))
        n_rows, n_cols = np.shape(heat.z)
        assert n_rows * n_cols >= len(owner)
        targets = next(t for t in fig.data if t.name == "click targets")
        assert max(targets.x) == n_cols - 1 and max(targets.y) == n_rows - 1


def test_subtitles_break_for_the_width_they_are_shown_at():
    """Issue 27's leftovers: every subtitle was broken for a half-page figure, so
    across the page it broke at half the chart's width, a line or two taller than it
    needed. Now no two neighbouring lines of a subtitle would fit one line of the
    figure as shown (with the separator between them), and the top margin is the one
    of the lines drawn (a figure as tall as its text, not as the half-page wrap)."""
    for figures, scale in ((NORMAL, 1), (PRESENTED, style.PRESENTATION_SCALE)):
        for name, fig in figures.items():
            title = fig.layout.title
            if not title.subtitle.text:
                continue
            chars = int(shown_px(name) / (style.CHAR_WIDTH * title.subtitle.font.size))
            lines = title.subtitle.text.split("<br>")
            assert all(len(a) + 3 + len(b) > chars for a, b in zip(lines, lines[1:])), (name, scale, lines)
            if name in FULL_FAMILIES:  # and so does the title across the page (it broke at 400 px)
                chars = int(style.FULL_FIGURE_PX / (style.CHAR_WIDTH * title.font.size))
                lines = title.text.split("<br>")
                assert all(len(a) + 1 + len(b.split()[0]) > chars for a, b in zip(lines, lines[1:])), (name, lines)
    fig = NORMAL["serving_timeline"]
    assert fig.layout.title.subtitle.text.count("<br>") == 0
    with_sharing = NORMAL["sharing_timeline"].layout
    assert with_sharing.title.subtitle.text.count("<br>") == 0  # two lines, broken for a half-page figure
    half = style.apply_style(go.Figure(), with_sharing.title.text, with_sharing.title.subtitle.text.replace("<br>", " "),
                             height=360).layout
    assert half.title.subtitle.text.count("<br>") >= 1 and half.margin.t > with_sharing.margin.t
