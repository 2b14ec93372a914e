"""What a projector shows at 1280x720 and 1920x1080 (issue 27's review as a speaker),
worked out from the figures' layouts: stacked panels of a readable height whatever the
page's width, legend titles that fit the narrowest figure, the kernel walk's block ids
upright in all its segments or in none, and the serving animation's slider labels apart
and its legend honest about the colours."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_figures_benchmark import _result
from test_figures_kernel import kernel_trace
from test_figures_presentation import NORMAL, PRESENTED, shown_px
from test_figures_serving import SHARED, _page_tables
from test_figures_style import _tiles

from explorer import style
from explorer.bench import accuracy_figures
from explorer.cache import sharing_figures
from explorer.cache.cell_style import POOL_REF_COUNT_KEY
from explorer.kernel import figures as kernel_figures
from explorer.kernel.walk_layout import BAR_TEXT_PAD_PX, WALK_PLOT_PX
from explorer.legend_layout import axis_block_px, legend_grid
from explorer.limits import MAX_SEQUENCE_LEGEND
from explorer.panel_layout import MIN_PANEL_PX, panel_heights
from explorer.serving import figures as serving_figures
from explorer.serving.history import simulate
from explorer.serving.traffic import LengthDist, ServingConfig
from explorer.style import CHAR_WIDTH, DIGIT_WIDTH, LINE_HEIGHT

SCALES = (1, style.PRESENTATION_SCALE)


# -- stacked panels --------------------------------------------------------------------

def _stacked(name: str):
    """The stacked-panel figures the review found as strips, at the scale of now, and
    the width of their plot at 1280 px (at scale 1)."""
    if name == "serving_timeline":
        return serving_figures.serving_timeline_figure(simulate(SHARED, 80).metrics, 30, 64), style.FULL_PLOT_WIDTH_PX
    if name == "online_softmax":  # four splits: a legend of four entries under its key, two rows at 1280 px
        _, _, _, trace = kernel_trace(block_n=32, num_splits=4)
        return kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error), \
            style.HALF_PLOT_WIDTH_PX
    results = [_result(n, [1.0], abs_err=e) for n, e in (("naive", 2e-4), ("vectorized", 3e-4), ("triton", 2e-4))]
    return accuracy_figures.accuracy_figure(results), style.HALF_PLOT_WIDTH_PX


@pytest.mark.parametrize("name", ["serving_timeline", "online_softmax", "accuracy"])
@pytest.mark.parametrize("scale", SCALES)
def test_stacked_panels_keep_a_readable_height_at_every_width(name, scale):
    """Review at 1280x720 and 1920x1080: the panels kept their height while the page's
    width grew, and read as strips: the serving timeline's 740x120 px at 1280 (1380x120
    at 1920), the online softmax's 354x102 (816x110), the error chart's 630x115. Each
    panel is now at least MIN_PANEL_PX tall, presentation mode's scale times that in
    presentation mode, no wider than about four times its height at 1280 px; and the
    bottom margin holds the legend (its key's lines too) and the x axis, so Plotly never
    takes the legend's rows out of the panels (a second row at 1280 px took 8 px of each)."""
    with style.presentation(scale):
        fig, plot_width = _stacked(name)
        heights = panel_heights(fig)
        assert len(heights) >= 2
        assert min(heights) >= MIN_PANEL_PX * scale - 0.5, heights
        assert style.plot_width_px(plot_width) / min(heights) <= 4.5
        names = [t.name for t in fig.data if t.showlegend is not False and t.name]
        if fig.layout.showlegend is not False and len(names) >= 2:
            key = fig.layout.legend.title
            key_px = (key.text or "").count("<br>") + bool(key.text)
            need = (legend_grid(names, plot_width).height_px + key_px * LINE_HEIGHT * (key.font.size or 0)
                    + axis_block_px())
            assert fig.layout.margin.b >= need - 1, (fig.layout.margin.b, need)


# -- legend titles -------------------------------------------------------------------------

def _legend_titles():
    """(where, figure, width drawn at 1280 px) of every legend with a title: the families
    of test_figures_presentation and the sharing figures the review found cut."""
    for figures, scale in ((NORMAL, 1), (PRESENTED, style.PRESENTATION_SCALE)):
        for name, fig in figures.items():
            yield f"{name} at {scale}", fig, shown_px(name)
    history = simulate(SHARED, 150)
    step = int(history.metrics["copied"].to_numpy().argmax())
    record = history.records[step]
    refs = np.bincount(record.blocks, minlength=SHARED.num_blocks)
    for scale in SCALES:
        with style.presentation(scale):
            yield (f"serving tables at {scale}",
                   _page_tables(history, step, SHARED.num_blocks, "reference count"), style.NARROW_FIGURE_PX)
            yield (f"serving pool at {scale}", serving_figures.serving_pool_figure(
                record.pool_owner(), record.block_tables(), record.context_lens, SHARED.block_size, step=step,
                color_by="reference count", sharing=True, seq_ids=record.seq_ids), style.NARROW_FIGURE_PX)
            yield (f"block table pool at {scale}", sharing_figures.pool_ref_count_figure(
                refs, record.block_tables(), SHARED.block_size), style.NARROW_FIGURE_PX)


def test_legend_titles_fit_the_narrowest_figure():
    """Review in presentation mode at 1280x720: "colour = sequences holding the physical
    bloc", the Block table pool's and the serving block tables' legend titles ran past
    the figure's edge (368 px of text in a figure 352 px wide). Every line of every
    legend title fits the width its figure is drawn at (at half its size a character;
    Chromium drew 0.45), broken at its spaces with no word lost."""
    checked = 0
    for where, fig, width in _legend_titles():
        key = fig.layout.legend.title
        if not key.text:
            continue
        checked += 1
        lines = key.text.split("<br>")
        assert all(len(line) * CHAR_WIDTH * key.font.size <= width for line in lines), (where, lines)
        if "holding the physical" in key.text:
            assert " ".join(lines) == POOL_REF_COUNT_KEY, where
    assert checked >= 6


# -- the kernel walk's block ids -----------------------------------------------------------

def _segments_fit(fig) -> bool:
    """Whether the walk's block ids fit every segment upright at the narrowest plot
    (WALK_PLOT_PX across): Plotly's padding, a digit's width a digit, a line's height."""
    bars, layout = fig.data[0], fig.layout
    plot_h = layout.height - layout.margin.t - layout.margin.b
    n_rows = len(set(np.asarray(bars.y).tolist()))
    thickness = plot_h / n_rows * (1 - (layout.bargap or 0))
    x_end = max(np.asarray(bars.base) + np.asarray(bars.x))
    size = bars.textfont.size
    digits = max(len(str(int(b))) for b in np.asarray(bars.customdata)[:, 0])
    shortest = min(np.asarray(bars.x)) * WALK_PLOT_PX / x_end
    pad = 2 * BAR_TEXT_PAD_PX
    return thickness >= LINE_HEIGHT * size + pad and shortest >= digits * DIGIT_WIDTH * size + pad


@pytest.mark.parametrize("tiles", ["page", "few"])
@pytest.mark.parametrize("scale", SCALES)
def test_walk_block_ids_are_upright_in_every_segment_or_in_none(tiles, scale):
    """Review at 1920x1080: the walk's block ids were written rotated 90°, only in the
    pale segments (one-digit ids; two digits did not fit on their side), the "8" clipped;
    at 1280 none. Ids are now horizontal and written in every segment where each fits
    at the narrowest the walk is drawn (so at any width), else in none."""
    with style.presentation(scale):
        if tiles == "page":  # the page's default row: 8 tiles of 32 lanes, 4 splits, 16-token blocks
            _, _, _, trace = kernel_trace(context_lens=(236, 97), block_n=32, num_splits=4)
            fig = kernel_figures.kernel_walk_figure(trace.tiles, 236, 16, 32)
        else:
            fig = kernel_figures.kernel_walk_figure(_tiles(1, 2), 32, 16, 16)
    bars = fig.data[0]
    assert bars.textangle == 0 and bars.textposition == "inside"
    fits = _segments_fit(fig)
    if bars.text is None:
        assert not fits
    else:
        assert fits and len(bars.text) == len(bars.x) and all(bars.text)
    if tiles == "few":  # two thick rows of one block each: ids in both, in either mode
        assert bars.text is not None
    else:
        assert bars.text is None  # rows 16 px thick hold no 12 px text with Plotly's padding


# -- the serving animation ---------------------------------------------------------------------

MANY = ServingConfig(num_blocks=64, block_size=8, max_batch_size=6, arrival_rate=0.5,
                     prompt_len=LengthDist("long-tail", 16, 256), output_len=LengthDist("uniform", 4, 24), seed=0)


@pytest.fixture(scope="module")
def animation_owners():
    history = simulate(MANY, 150)
    steps = serving_figures.animation_steps(len(history.records))
    return np.stack([history.records[s].pool_owner() for s in steps]), steps


def _label_gaps(fig, plot_px: float) -> float:
    """The least gap (px) between two neighbouring slider labels' digits as Plotly writes
    them on a slider ``plot_px`` wide: every k-th label, k the least that keeps the
    widest label (as measured: its padding too) 8 px from the next (plotly.js 3.8:
    labelPadding 8, stepInset 10)."""
    slider = fig.layout.sliders[0]
    size = slider.font.size or fig.layout.font.size
    labels = [s.label for s in slider.steps]
    step_px = (plot_px - 2 * 10) / (len(labels) - 1)
    measured = max(len(label) for label in labels) * DIGIT_WIDTH * size
    stride = max(1, math.ceil((measured + 8) / step_px))
    digits = max(len(label.strip("\u2007")) for label in labels) * DIGIT_WIDTH * size
    return stride * step_px - digits


@pytest.mark.parametrize("scale", SCALES)
def test_animation_slider_labels_stand_apart_at_every_width(animation_owners, scale):
    """Review in presentation mode at 1280x720: the slider's labels 96 104 112 ... 144 ran
    together (Plotly keeps labels 8 px apart as it measures them, a third of a digit at
    19.5 px). Each label is padded a digit's width either side, so that, whatever the
    slider's width from 1280 px to 1920 px pages, the labels Plotly writes stand at least
    a character's size apart; the current value still reads "step" and the step."""
    owners, steps = animation_owners
    with style.presentation(scale):
        fig = serving_figures.pool_animation_figure(owners, steps, MANY.block_size)
    slider = fig.layout.sliders[0]
    size = slider.font.size or fig.layout.font.size
    for plot_px in range(600, 1400, 7):
        assert _label_gaps(fig, plot_px) >= size, plot_px
    assert [s.label.strip("\u2007") for s in slider.steps] == [str(s) for s in steps]
    assert slider.currentvalue.prefix + slider.steps[3].label == f"step\u2007{steps[3]}\u2007"


def test_animation_legend_names_no_sequence_colour_it_does_not_mean(animation_owners):
    """Review in presentation mode: past a dozen sequences the animation's legend showed
    one pink square for "a sequence (colour by seq_id)" while the frames drew a dozen
    colours. Past MAX_SEQUENCE_LEGEND sequences, no entry wears a sequence's colour: a
    neutral square says "one colour per sequence" (as the serving pool's "+n
    sequences" does), beside "free"."""
    owners, steps = animation_owners
    assert len(np.unique(owners[owners >= 0])) > MAX_SEQUENCE_LEGEND
    fig = serving_figures.pool_animation_figure(owners, steps, MANY.block_size)
    entries = {t.name: t.marker.color for t in fig.data if t.type == "scatter" and t.showlegend is not False}
    assert set(entries) == {"free", serving_figures.ANIMATION_SEQUENCES}
    assert entries["free"] == style.FREE_COLOR
    assert entries[serving_figures.ANIMATION_SEQUENCES] not in style.SEQUENCE_COLORS
