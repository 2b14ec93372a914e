"""Every pair of colours on one chart plainly different (issue 27, the back row): on the Decode
benchmark's error chart the implementations, the fp8 quantization line, the tolerance's ink and the ✓/✗
marks; on the Sweep's charts the implementations, the window's limit, the ceilings and the reference lines; on Inside
the kernel's online softmax and split merge the splits, the attention sink and the ink. CIEDE2000 is
:func:`test_colour_language.ciede2000`; the figures are built as the pages build them and their colours
read back."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from test_colour_language import ciede2000, lch, rgb
from test_figures_kernel import kernel_trace

from explorer import style
from explorer.kernel import figures as kernel_figures
from explorer.limits import MAX_SPLIT_LEGEND

#: Two colours that can appear on one chart, each telling a series or a mark from the others (an
#: implementation, a split, the fp8 quantization line, the attention sink, the ink of the tolerance
#: lines and the output's star), are at least this far apart in CIEDE2000 (issue 27, the back row).
CHART_APART_DE00 = 20


def hexcode(color: str) -> str:
    """``color`` (``"#rrggbb"``, ``"rgb(r, g, b)"``) as ``"#RRGGBB"``."""
    return "#{:02X}{:02X}{:02X}".format(*rgb(color))


def chart_colours(fig, skip=lambda annotation: False) -> set[str]:
    """The opaque colours ``fig`` draws its traces, lines and labels in, as ``#RRGGBB``: the traces'
    marker, marker outline and line colours (a list's strings too), the shapes' lines, the
    annotations' fonts (less those ``skip`` leaves out); white, the unset ones and translucent
    fills (``rgba(..., a < 1)``, a dot's inside over its opaque outline) left out."""
    found: list = []
    for t in fig.data:
        marker, line = getattr(t, "marker", None), getattr(t, "line", None)
        for value in (marker.color if marker else None, marker.line.color if marker and marker.line else None,
                      line.color if line else None):
            found += list(value) if isinstance(value, (list, tuple)) else [value]
    found += [s.line.color for s in fig.layout.shapes] + [a.font.color for a in fig.layout.annotations if not skip(a)]
    colours_ = set()
    for c in found:
        if not isinstance(c, str) or c.lower() in ("white", "#ffffff") or (c.startswith("rgba") and
                                                                          float(re.findall(r"[\d.]+", c)[3]) < 1):
            continue
        colours_.add(hexcode(c))
    return colours_


def assert_chart_apart(name: str, drawn: set[str]) -> None:
    close = [(round(ciede2000(a, b), 1), a, b) for a, b in itertools.combinations(sorted(drawn), 2)
             if ciede2000(a, b) < CHART_APART_DE00]
    assert not close, f"{name}: {close}"


def _accuracy_results():
    from types import SimpleNamespace

    from paged_attention import LABELS

    names = [n for n in style.IMPL_COLORS]
    # The last one fails (its ratio over 1), so that both marks are drawn.
    return [SimpleNamespace(name=n, label=LABELS[n], max_abs_err=1e-4 * (i + 1), max_rel_err=1.0,
                            max_tol_ratio=0.1 * (i + 1) if i < len(names) - 1 else 3.0, atol=2e-3, rtol=2e-3,
                            passed=i < len(names) - 1)
            for i, n in enumerate(names)]


def test_every_pair_of_colours_on_the_error_chart_is_plainly_different():
    """Issue 27 review: the Decode benchmark's fp8 quantization line was violet #7C3AED, 12 CIEDE2000 from
    Triton (prefix-aware)'s magenta on the same chart; the ✓/✗ marks over the plot were green #16A34A,
    19 from Triton (simple grid)'s teal, and red #DC2626, 8 from Naive PyTorch's #D9534F. Every
    implementation the page can race, the quantization line and its label, the tolerance's ink and the
    pass and fail marks are 20+ apart, pairwise."""
    from explorer.bench import accuracy_figures

    results = _accuracy_results()
    fig = accuracy_figures.accuracy_figure(results, quantization_error=0.03)
    marks = [a for a in fig.layout.annotations if a.text in (accuracy_figures.PASS_MARK, accuracy_figures.FAIL_MARK)]
    assert [a.text for a in marks] == [accuracy_figures.PASS_MARK] * (len(results) - 1) + [accuracy_figures.FAIL_MARK]
    drawn = chart_colours(fig)
    expected = {*style.IMPL_COLORS.values(), accuracy_figures.QUANTIZATION_COLOR, accuracy_figures.TOLERANCE_COLOR,
                style.PASS_COLOR, style.FAIL_COLOR}
    assert drawn == {hexcode(c) for c in expected}
    assert_chart_apart("error chart", drawn)
    # A dark amber-brown: CIELAB hue 50 to 80 degrees, lightness under 45, coloured.
    lightness, chroma, hue = lch(rgb(accuracy_figures.QUANTIZATION_COLOR))
    assert 50 <= hue <= 80 and lightness < 45 and chroma >= 30, (lightness, chroma, hue)
    # The marks still read green and red (CIELAB hue), and dark (the glyph carries the meaning).
    (pass_l, pass_c, pass_h), (fail_l, fail_c, fail_h) = lch(rgb(style.PASS_COLOR)), lch(rgb(style.FAIL_COLOR))
    assert 120 <= pass_h <= 165 and (fail_h <= 40 or fail_h >= 345), (pass_h, fail_h)
    assert max(pass_l, fail_l) < 45 and min(pass_c, fail_c) >= 30, (pass_l, fail_l, pass_c, fail_c)


def _sink_figures(num_splits: int):
    """The online softmax and the split merge of a row of ``num_splits`` splits, with an attention sink."""
    *_, trace = kernel_trace(context_lens=(640, 97), num_splits=num_splits, block_n=16)
    assert trace.splits["split"].nunique() == num_splits
    softmax = kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error, l_final=2.0,
                                                   sink_term=0.5)
    merge = kernel_figures.split_merge_figure(trace.splits, sink_m=float(trace.splits["m"].max()) - 1, sink_share=0.2)
    return softmax, merge


@pytest.mark.parametrize("num_splits", [2, 4, MAX_SPLIT_LEGEND])
def test_every_pair_of_colours_on_the_kernel_charts_with_a_sink_is_plainly_different(num_splits):
    """Issue 27 review: on Inside the kernel the attention sink's amber (#B45309) came 16 CIEDE2000 from a
    split's brown, and the split palette's pink and brown 18 and 19 from its red. With up to
    MAX_SPLIT_LEGEND splits (each its own colour, in the legend), the splits' colours, the sink's and the
    ink (the output's star, the merge's max-m line) are 20+ apart, pairwise, on the online softmax and the
    merge charts; the sink is near-black."""
    softmax, merge = _sink_figures(num_splits)
    splits = set(style.SPLIT_COLORS[:num_splits])
    for name, fig in (("online softmax", softmax), ("split merge", merge)):
        drawn = chart_colours(fig)
        assert {hexcode(kernel_figures.SINK_COLOR)} | splits <= drawn, name
        assert_chart_apart(name, drawn)
    assert lch(rgb(kernel_figures.SINK_COLOR))[0] < 20 and lch(rgb(kernel_figures.SINK_COLOR))[1] < 15  # near-black


def test_the_split_palette_and_the_sink_are_apart_wherever_they_can_meet():
    """All pairs, not only those one trace draws: every two colours of the split palette, the sink and the
    ink; and past MAX_SPLIT_LEGEND splits (a colour scale, neighbours alike by design) the sink and the ink
    stay 20+ from every colour of the scale."""
    from plotly.colors import sample_colorscale

    from explorer.bench.accuracy_figures import TOLERANCE_COLOR

    assert len(style.SPLIT_COLORS) == MAX_SPLIT_LEGEND
    assert_chart_apart("split palette", {*style.SPLIT_COLORS, kernel_figures.SINK_COLOR, TOLERANCE_COLOR})
    scale = [hexcode(c) for c in sample_colorscale(style.SPLIT_COLORSCALE, list(np.linspace(0, 1, 201)))]
    for mark in {kernel_figures.SINK_COLOR, TOLERANCE_COLOR}:
        nearest = min((ciede2000(mark, c), c) for c in scale)
        assert nearest[0] >= CHART_APART_DE00, (mark, nearest)


def _sweep_rows(axis: str, values, copy: float | None, base=None, skip_from: int = 64) -> list[dict]:
    """Sweep rows over ``axis`` with every implementation the Sweep races (each a time of its own, naive
    skipped from ``skip_from`` on), as :func:`helpers.job_rows` writes them."""
    from helpers import SWEEP_BASE, fake_result

    from explorer.sweep import grid as sweep_grid
    from explorer.sweep import runs as sweep_runs
    from paged_attention import LABELS

    rows = []
    for v in values:
        config = sweep_grid.point_config(base or SWEEP_BASE, axis, v)
        common = {"device_name": "test", "warmup": 0, "iters": 2, "copy_gbps": copy}
        for i, name in enumerate(style.IMPL_COLORS):
            ms = 0.01 * v if name == "naive" else 0.05 * (i + 1)
            if name == "naive" and v >= skip_from:
                rows.append(sweep_runs.status_row(name, "skipped", config, axis, v, note="skipped: over budget",
                                                  predicted_ms=ms, **common))
                continue
            result = fake_result("triton", ms, gpu=ms / 2 if copy else None)
            result.name, result.label = name, LABELS[name]
            rows.append(sweep_runs.result_row(result, config, axis, v, **common))
    return rows


def _sweep_charts():
    """Every Sweep chart, as the page draws them, with every colour each can show: all implementations,
    naive's skipped points, a window's limit line, two sources' ceilings (and the CPU's note without one),
    the speedup's and the ratio's reference lines, the per-token chart's flat-step line."""
    import pandas as pd
    from helpers import SWEEP_BASE

    from explorer.sweep import figures as sweep_figures
    from explorer.sweep import runs as sweep_runs
    from explorer.sweep.token_figures import sweep_per_token_figure

    windowed = SWEEP_BASE.with_(window=32)
    mine = sweep_runs.rows_frame(_sweep_rows("context_len", (16, 32, 64), 4.0, windowed), "this session")
    theirs = sweep_runs.rows_frame(_sweep_rows("context_len", (16, 32, 64), 3.0, windowed), "uploaded: h200.csv")
    both = pd.concat([mine, theirs], ignore_index=True)
    cpu = sweep_runs.rows_frame(_sweep_rows("context_len", (16, 32, 64), None, windowed), "this session")
    tokens = sweep_runs.rows_frame(_sweep_rows("query_lens", (1, 2, 4, 8), None, skip_from=1000), "this session")
    return {
        "latency": sweep_figures.sweep_latency_figure(both),
        "bandwidth": sweep_figures.sweep_bandwidth_figure(both),
        "bandwidth on the CPU": sweep_figures.sweep_bandwidth_figure(cpu),
        "speedup": sweep_figures.sweep_speedup_figure(both, target="triton_simple"),
        "ratio": sweep_figures.sweep_ratio_figure(both, "this session", "uploaded: h200.csv"),
        "time per token": sweep_per_token_figure(tokens),
    }


def test_every_pair_of_colours_on_a_sweep_chart_is_plainly_different():
    """Issue 27 review: the Sweep's window-limit line was violet #7C3AED (the old quantization violet), 12
    CIEDE2000 from Triton (prefix-aware)'s magenta and 15 from Triton's blue on the same chart. On every
    Sweep chart, every implementation, the window's limit and its label, the ceilings, the CPU's note and
    the reference lines are 20+ apart, pairwise."""
    from explorer.sweep import figures as sweep_figures

    charts = _sweep_charts()
    impls = {hexcode(c) for c in style.IMPL_COLORS.values()}
    limit = hexcode(sweep_figures.LIMIT_COLOR)
    for name, fig in charts.items():
        drawn = chart_colours(fig)
        assert impls - {hexcode(style.IMPL_COLORS["triton_simple"])} <= drawn, name
        assert_chart_apart(name, drawn)
        if name not in ("ratio", "time per token"):  # the charts that mark a window
            assert limit in drawn, name
    assert len({s.y0 for s in charts["bandwidth"].layout.shapes if s.name != "window limit"}) == 2  # two ceilings
    assert any("No ceiling" in (a.text or "") for a in charts["bandwidth on the CPU"].layout.annotations)
