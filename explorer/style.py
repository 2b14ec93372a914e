"""Shared look of the explorer's figures: colours, text sizes, the layout every
figure gets (:func:`apply_style`), cell gaps, integer ticks and log-axis helpers,
and presentation mode.

Presentation mode is one setting, read while a figure is built: inside
``with presentation():`` (the app sets it for a page's run when the sidebar's
toggle is on) every text size of :func:`font_px` is :data:`PRESENTATION_SCALE`
times larger, and so is the plot area of every figure styled by
:func:`apply_style`, so that cells and bars grow with the numbers written in
them. The width of a chart is the page's, whatever the mode: what must fit
across it (cell numbers, tick labels, title lines) is decided from the text's
size on screen, so enlarged text thins integer ticks out (never rotated) or
leaves cell numbers to the hover, and never shrinks.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Sequence

import plotly.graph_objects as go
import plotly.io as pio

from explorer.formatting import format_number, line_count, wrap_at_separators, wrap_words

#: One colour per implementation, in every chart.
IMPL_COLORS: dict[str, str] = {
    "naive": "#D9534F",
    "vectorized": "#F0AD4E",
    "triton": "#2563EB",
    "triton_simple": "#14B8A6",
    "triton_prefix": "#C026D3",
}
FALLBACK_COLOR = "#6B7280"
PASS_COLOR = "#166534"  # dark green and dark red: 20+ CIEDE2000 from every implementation (tests), the glyph
FAIL_COLOR = "#7A0019"  # says pass or fail (#16A34A came 19 from Triton (simple grid), #DC2626 8 from Naive)

# -- one colour language ------------------------------------------------------------
# Each meaning has its own palette, used for nothing else: physical block ids a
# sequential blue scale, sequences qualitative colours, reference counts (how many
# sequences hold a block) a sequential orange scale, and on Inside the kernel
# split-K splits and the programs' launch order their own. Greys mean free, held
# outside the batch, unallocated or masked. Every chart's legend or colour bar
# names its meaning ("colour = ...").

FREE_COLOR = "#E5E7EB"
OTHER_COLOR = "#64748B"
UNALLOCATED_COLOR = "#F1F5F9"
#: Sequence colours in the pool (and the Serving simulation's table), repeating: hues
#: clear of the other meanings (no blue or cyan: block ids; no orange, amber or yellow:
#: reference counts, the new-token star; no grey): greens and teals, pinks, reds and purples.
#: Six hues, each twice, 25+ apart in CIELAB lightness and six sequences apart: any six in a row
#: are six hues (1 and 3 were two purples). 21+ apart in CIEDE2000, 22 from block ids, reference
#: counts, the star, 24 from the greys (tests/test_serving_palette.py, tests/test_colour_language.py).
SEQUENCE_COLORS: tuple[str, ...] = (
    "#CD7BFF", "#87873C", "#00FFD2", "#F5A9C6", "#0F5A1E", "#EB5464",
    "#7500C5", "#98FF0C", "#3C9687", "#D7089C", "#00B43C", "#8D0039",
)
#: Physical block ids: ColorBrewer's Blues, block 0 a shade deeper (pale, but 10+ CIEDE2000
#: from the free grey and the unallocated near-white: issue 27) to navy (the last block).
BLOCK_COLORSCALE: list[list] = [[i / 6, c] for i, c in enumerate((
    "#B9D5EC", "#9ECAE1", "#6BAED6", "#4292C6", "#2171B5", "#08519C", "#08306B"))]
#: Reference counts, 1 holder up to 5: peach, orange, deep orange, rust, brown, each 14+ CIEDE2000
#: from the next (ColorBrewer's Oranges came 8.6 apart: 1 and 2 holders read alike on a projector),
#: clear of the sequences, the greys and the block ids (tests/test_colour_language.py).
REF_COUNT_COLORS: tuple[str, ...] = ("#FCC67F", "#F79207", "#E25A00", "#A83A08", "#5A2A10")
#: The share of an aggregated pool cell's blocks that the batch holds: free grey to slate.
BATCH_SHARE_COLORSCALE: list[list] = [[0, FREE_COLOR], [1, "#1E293B"]]
#: Split-K splits, while few: Tableau 10's red, teal, orange, mauve, yellow; Paul Tol's wine; a violet, an
#: olive (not its pink, brown: 18 CIEDE2000 from its red). Each 20+ from every other, the ink (tests).
SPLIT_COLORS: tuple[str, ...] = ("#E15759", "#76B7B2", "#F28E2B", "#B07AA1", "#EDC948", "#882255", "#9018FC",
                                 "#6C6C00")
#: Many splits: Plasma from 0.12 to 0.85 (less an indigo too like a dark block id
#: and a yellow too faint on white).
SPLIT_COLORSCALE: list[list] = [[i / 8, c] for i, c in enumerate((
    "#4A03A0", "#6E01A7", "#9011A1", "#AE2891", "#C7437C", "#DC5D67", "#ED7953", "#F9983E", "#FCBB2D"))]
#: Launch order of the decode kernel's programs: ColorBrewer's Greens, dark first.
LAUNCH_ORDER_COLORSCALE: list[list] = [[i / 4, c] for i, c in enumerate((
    "#00441B", "#006D2C", "#238B45", "#41AB5D", "#74C476"))]

#: Errors are drawn at least this high on the log axes (exact zeros sit on the axis' floor).
ERROR_FLOOR = 1e-12

# -- presentation mode and text sizes --------------------------------------------

#: How much presentation mode enlarges chart text and plot areas: the smallest
#: text, 12 px, becomes 18 px, readable from the back of a room.
PRESENTATION_SCALE = 1.5
#: The scale of the figures built now. A context variable: each Streamlit session
#: runs its script in a thread of its own, and so has its own value.
_SCALE: ContextVar[float] = ContextVar("explorer_presentation_scale", default=1.0)


@contextmanager
def presentation(scale: float = PRESENTATION_SCALE) -> Iterator[float]:
    """Build the figures of the ``with`` block at ``scale``: every text size of
    :func:`font_px` and every plot area of :func:`apply_style` ``scale`` times
    their size at 1 (normal mode).

    Parameters
    ----------
    scale : float
        At least 1; 1 is normal mode.

    Yields
    ------
    float
        ``scale``.

    Raises
    ------
    ValueError
        If ``scale`` is not a finite number of at least 1.

    Examples
    --------
    >>> with presentation():
    ...     font_px("tick")
    18.0
    >>> font_px("tick")
    12.0
    """
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 1):
        raise ValueError(f"scale must be a finite number of at least 1; got {scale!r}")
    token = _SCALE.set(float(scale))
    try:
        yield float(scale)
    finally:
        _SCALE.reset(token)


def presentation_scale() -> float:
    """The scale figures are built at now (1 outside :func:`presentation`)."""
    return _SCALE.get()


def scaled(px: float) -> float:
    """``px`` pixels of a figure's height at scale 1 (a margin, a legend row), at
    the current scale: what a figure adds by hand to :func:`apply_style`'s layout
    grows with the text it makes room for."""
    return px * _SCALE.get()


#: The base size (px) of chart text at scale 1; every role of :func:`font_px` is
#: this plus its offset.
BASE_FONT_PX = 13
_ROLE_OFFSETS: dict[str, int] = {
    "title": 3, "subtitle": -1, "body": 0, "tick": -1, "legend": -1, "cell": -1, "label": -1, "note": 1,
}
#: The smallest chart text at scale 1 (px).
MIN_TEXT_PX = BASE_FONT_PX + min(_ROLE_OFFSETS.values())


def font_px(role: str = "body") -> float:
    """The font size (px) of chart text of ``role`` at the current scale.

    Parameters
    ----------
    role : str
        ``"title"``, ``"subtitle"``, ``"body"`` (axis titles, annotations, hover
        labels, subplot titles), ``"tick"`` (tick labels, colour bars), ``"legend"``,
        ``"cell"`` (numbers inside heatmap cells and bars), ``"label"`` (text
        beside a marker or a bar) or ``"note"`` (a chart's no-data message).

    Raises
    ------
    KeyError
        For another role.
    """
    return round((BASE_FONT_PX + _ROLE_OFFSETS[role]) * _SCALE.get(), 1)


_FONT_FAMILY = "Inter, Segoe UI, Helvetica, Arial, sans-serif"
_FONT_COLOR = "#1F2937"


# -- widths ----------------------------------------------------------------------

#: Width in pixels of a figure's plot area in the narrower columns the pages draw
#: it in (a ~600 px column less margins and colour bar), at scale 1. Cell sizes are
#: estimated from it and from the figure's height.
PLOT_WIDTH_PX = 400
#: Width in pixels of the plot area of a half-page chart at 1280 px (the benchmark's
#: and the sweep's, side by side), at scale 1: categories share it. Chromium, the
#: sidebar open, drew those figures 394 px wide: less the margins, 314.
HALF_PLOT_WIDTH_PX = 314
#: Width in pixels of the plot area of a chart across the page at 1280 px (the
#: serving trade-off's): an 820 px figure less its margins.
FULL_PLOT_WIDTH_PX = 740
#: Width in pixels of a half-page figure at 1280 px, the sidebar open (Chromium drew
#: them 394 px wide): subtitles are broken into lines that fit it unless the figure
#: says it is wider or narrower (:func:`apply_style`'s ``width_px``).
HALF_FIGURE_PX = 370
#: The same for a figure across the page (drawn 820 px wide), as much short of it.
FULL_FIGURE_PX = 796
#: Width in pixels of the narrowest figures the pages draw, two fifths of a 1280 px
#: page (Chromium, the sidebar open, drew the Block table's pool 312 px wide, and
#: cut its subtitle at "colour = sequen" when it was broken for 370 px).
NARROW_FIGURE_PX = 310
#: Width in pixels of a half-page figure at 1280 px: its title is broken into lines that fit it.
TITLE_WIDTH_PX = 400
#: Average width of a character of text, and of a digit, as a share of the font
#: size (Arial, Liberation Sans: Chromium drew 36 characters of a subtitle at
#: 18 px in 290 px).
CHAR_WIDTH = 0.5
#: The same for short labels, whose capitals weigh more (tick labels: "Optimized PyTorch").
LABEL_CHAR_WIDTH = 0.55
DIGIT_WIDTH = 0.58
#: Left and right margins of :func:`apply_style` at scale 1 (px).
MARGIN_L, MARGIN_R = 60, 20
#: Heatmap cells (and bars) thinner than this get no 1 px gap or outline: it
#: would swallow them.
MIN_GAP_CELL_PX = 6
#: Block-table columns stay at least this many pixels wide: past ``plot width /
#: MIN_COLUMN_PX`` logical blocks, a column aggregates several (a one-block
#: sequence in a table a million blocks wide would otherwise draw nothing).
MIN_COLUMN_PX = 2
#: Integer ticks stay at least this far apart at scale 1 (every 2nd, 5th, ... id
#: when not every one fits); wide labels further, so that they never touch.
MIN_TICK_PX = 30
#: Height of a line of text, in px of its font size.
LINE_HEIGHT = 1.3


def plot_width_px(plot_width: float = PLOT_WIDTH_PX) -> float:
    """Pixels across a plot area that is ``plot_width`` wide at scale 1, at the
    current scale: the page's column keeps its width while the side margins grow
    with their text."""
    return max(plot_width - (_SCALE.get() - 1) * (MARGIN_L + MARGIN_R), 1.0)


def impl_color(name: str) -> str:
    """The colour of implementation ``name`` (grey for an unknown one)."""
    return IMPL_COLORS.get(name, FALLBACK_COLOR)


# -- lines of text ---------------------------------------------------------------

def line_chars(role: str, width_px: float = HALF_FIGURE_PX) -> int:
    """Characters of ``role`` text (:func:`font_px`) that a line ``width_px`` wide holds now."""
    return max(int(width_px / (CHAR_WIDTH * font_px(role))), 8)


# -- layout ----------------------------------------------------------------------

#: Pixels at scale 1 above the title, between the title and the subtitle, and
#: between the title block and the plot area.
_TITLE_PAD, _SUBTITLE_GAP, _PLOT_GAP = 10, 6, 24
#: Bottom margin at scale 1 (px): the x axis' ticks and title, and a legend row.
_BOTTOM = 100


def _top_px(title_lines: int, subtitle_lines: int, scale: float) -> float:
    """The top margin (px) that holds a title and a subtitle of so many lines at ``scale``."""
    size = BASE_FONT_PX * scale
    top = (_TITLE_PAD + _PLOT_GAP) * scale + LINE_HEIGHT * size * (
        title_lines * (1 + _ROLE_OFFSETS["title"] / BASE_FONT_PX)
        + subtitle_lines * (1 + _ROLE_OFFSETS["subtitle"] / BASE_FONT_PX))
    return top + (_SUBTITLE_GAP * scale if subtitle_lines else 0)


def _wrapped_titles(title: str | None, subtitle: str | None, width_px: float = HALF_FIGURE_PX) -> tuple[str, str]:
    """The title and the subtitle broken into lines for a figure ``width_px`` wide
    (the title's :data:`TITLE_WIDTH_PX` for a half-page one, in proportion for a
    narrower one, the figure's width for a wider one), at the current scale."""
    wide = max(width_px, TITLE_WIDTH_PX) if width_px > HALF_FIGURE_PX else TITLE_WIDTH_PX * width_px / HALF_FIGURE_PX
    return (wrap_words(title or "", line_chars("title", wide)),
            wrap_at_separators(subtitle, line_chars("subtitle", width_px)))


def title_margins(subtitle: str | None, width_px: float = HALF_FIGURE_PX) -> tuple[int, int]:
    """Top and bottom margins (px) of a figure ``width_px`` wide with a one-line
    title and ``subtitle`` at scale 1: with the plot area, the height a figure asks
    :func:`apply_style` for (which grows all three with the text)."""
    token = _SCALE.set(1.0)
    try:
        lines = line_count(_wrapped_titles("", subtitle, width_px)[1])
    finally:
        _SCALE.reset(token)
    return round(_top_px(1, lines, 1.0)), _BOTTOM


def narrow_title_px(subtitle: str | None) -> int:
    """Pixels at scale 1 that ``subtitle`` takes more in a figure of
    :data:`NARROW_FIGURE_PX` than in a half-page one (its extra lines): what a
    narrow figure adds to its height to keep its plot area."""
    return title_margins(subtitle, NARROW_FIGURE_PX)[0] - title_margins(subtitle)[0]


def plot_area_height(height: int, subtitle: str | None, above_plot: float = 0,
                     width_px: float = HALF_FIGURE_PX) -> float:
    """Pixels, at the current scale, between the margins of a figure that
    :func:`apply_style` styles with ``height``, ``subtitle``, ``above_plot`` and
    ``width_px`` (and a one-line title)."""
    return max(height - sum(title_margins(subtitle, width_px)) - above_plot, 1) * _SCALE.get()


def colorbar_length_px(plot_height: float) -> float:
    """Pixels of a colour bar's scale as long as a plot ``plot_height`` px tall,
    less its two-line title."""
    return max(plot_height - 2 * LINE_HEIGHT * font_px("body") - scaled(6), 40)


def apply_style(fig: go.Figure, title: str, subtitle: str | None = None, height: int = 420,
                *, above_plot: float = 0, width_px: float = HALF_FIGURE_PX) -> go.Figure:
    """Give ``fig`` the explorer's layout, at the current scale
    (:func:`presentation`): fonts of :func:`font_px` (titles, axes, ticks,
    legend, hover, colour bars and heatmap text that sets none of its own), the
    title and subtitle broken into lines of the figure's width, margins that
    hold them, and a legend hung from the figure's bottom edge.

    Parameters
    ----------
    fig : go.Figure
        Modified in place.
    title, subtitle : str
        The title, and the line under it (broken at its `` · `` and ``; `` into
        lines of the figure's width).
    height : int
        The figure's height at scale 1 (px); at a larger scale its plot area
        (``height`` less the margins at scale 1) grows by the scale and the
        margins with their text, so the plot area never shrinks.
    above_plot : float
        Pixels at scale 1 to keep between the subtitle and the plot area (subplot
        titles, marks hung over the plot); they grow with the scale.
    width_px : float
        The narrowest the page draws the figure (px): :data:`HALF_FIGURE_PX`,
        :data:`FULL_FIGURE_PX` across the page, :data:`NARROW_FIGURE_PX` in two fifths.

    Returns
    -------
    go.Figure
        ``fig``.
    """
    scale = _SCALE.get()
    token = _SCALE.set(1.0)
    try:  # the plot area at scale 1: the height less the margins of the lines there
        lines = [line_count(text) for text in _wrapped_titles(title, subtitle, width_px)]
    finally:
        _SCALE.reset(token)
    plot = max(height - _top_px(*lines, 1.0) - above_plot - _BOTTOM, 1) * scale
    title, subtitle = _wrapped_titles(title, subtitle, width_px)
    top = _top_px(line_count(title), line_count(subtitle), scale) + above_plot * scale
    bottom = _BOTTOM * scale
    total = round(plot + top + bottom)
    tick, body = dict(size=font_px("tick")), dict(size=font_px("body"))
    colorbar = dict(tickfont=tick, title=dict(font=body))
    # The legend hangs from the bottom of the figure, not from the plot area: a
    # legend of several rows then pushes the plot up (Plotly grows the margin to
    # fit it and the axis title) instead of sliding under the x axis title.
    # The title hangs from the top edge: Plotly centres it on the top margin otherwise.
    fig.update_layout(
        template=_template(scale),
        font=dict(family=_FONT_FAMILY, size=font_px("body"), color=_FONT_COLOR),
        # Plotly lifts a title of several lines by about nine tenths of its size above
        # the anchor (whatever their number, in Chromium), so the anchor moves down by as much.
        title=dict(text=title, x=0, xanchor="left", yref="container",
                   y=1 - (_TITLE_PAD * scale + (0.9 * font_px("title") if line_count(title) > 1 else 0)) / total,
                   yanchor="top", font=dict(size=font_px("title")),
                   subtitle=dict(text=subtitle, font=dict(size=font_px("subtitle")))),
        height=total,
        margin=dict(l=round(MARGIN_L * scale), r=round(MARGIN_R * scale), t=round(top), b=round(bottom)),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0,
                    font=dict(size=font_px("legend"))),
        hoverlabel=dict(font=dict(family=_FONT_FAMILY, size=font_px("body"))),
        # Text inside bars that would have to shrink below the cell size is hidden, not shrunk.
        uniformtext=dict(minsize=font_px("cell"), mode="hide"),
    )
    # Set on every axis, not inherited: Streamlit's chart theme gives axes smaller text of its own.
    for update in (fig.update_xaxes, fig.update_yaxes):
        update(tickfont=tick, title=dict(font=body))
    fig.update_traces(colorbar=colorbar, selector=dict(type="heatmap"))
    return fig


@functools.lru_cache(maxsize=8)
def _template(scale: float) -> go.layout.Template:
    """Plotly's ``plotly_white`` with the text sizes of ``scale`` for what a figure
    adds after :func:`apply_style` or leaves unset: axis titles set anew
    (``update_xaxes(title="...")`` replaces the title's font), annotations,
    heatmap, bar and marker text, colour bars."""
    token = _SCALE.set(scale)
    try:
        template = go.layout.Template(pio.templates["plotly_white"])
        axis = dict(tickfont=dict(size=font_px("tick")), title=dict(font=dict(size=font_px("body"))))
        template.layout.update(xaxis=axis, yaxis=axis, legend=dict(font=dict(size=font_px("legend"))),
                               font=dict(size=font_px("body")))
        template.layout.annotationdefaults = dict(font=dict(size=font_px("body")))
        colorbar = dict(tickfont=dict(size=font_px("tick")), title=dict(font=dict(size=font_px("body"))))
        cell = dict(size=font_px("cell"))
        template.data.heatmap = [go.Heatmap(textfont=cell, colorbar=colorbar)]
        template.data.bar = [go.Bar(textfont=cell, marker=dict(colorbar=colorbar))]
        template.data.scatter = [go.Scatter(textfont=dict(size=font_px("label")), marker=dict(colorbar=colorbar))]
    finally:
        _SCALE.reset(token)
    return template


def cell_gaps(n_rows: int, n_cols: int, plot_height: float, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """``xgap``/``ygap`` of a heatmap: 1 px between cells that are wide (tall)
    enough to spare it, none between thinner ones, which a gap would swallow.
    ``plot_height`` is in px at the current scale (:func:`plot_area_height`),
    ``plot_width`` at scale 1 (:func:`plot_width_px`)."""
    return dict(
        xgap=1 if plot_width_px(plot_width) / max(n_cols, 1) >= MIN_GAP_CELL_PX else 0,
        ygap=1 if plot_height / max(n_rows, 1) >= MIN_GAP_CELL_PX else 0,
    )


#: Steps of integer ticks: 1, 2, 5 and 2.5 times the powers of ten (25, 250, ...).
_STEPS = tuple(m * 10 ** e for e in range(16) for m in ((1, 2, 5) if e == 0 else (1, 2, 2.5, 5)))


def integer_ticks(lo: float, hi: float, length_px: float | None = None, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """Tick settings for an axis or colour bar of integers (ids, counts) spanning
    ``lo`` to ``hi``: whole numbers from ``lo`` to ``hi`` only (none past them,
    whatever the axis' range), every 1, 2, 5, 10, 25, ... so that they stay
    :data:`MIN_TICK_PX` apart at the current scale and their labels never touch.

    Parameters
    ----------
    lo, hi : float
        The first and last value of the axis.
    length_px : float, optional
        The length of a vertical axis or colour bar in px at the current scale
        (:func:`plot_area_height`); by default the axis runs across a plot
        ``plot_width`` px wide at scale 1 (:func:`plot_width_px`), and its labels
        stay horizontal.

    Returns
    -------
    dict
        ``tickmode="array"``, ``tickvals`` and ``ticktext`` (with thousands
        separators), and ``tickangle=0`` across the plot.
    """
    lo, hi = math.floor(float(lo)), math.ceil(float(hi))
    hi = max(hi, lo)
    size = font_px("tick")
    across = length_px is None
    room = plot_width_px(plot_width) if across else float(length_px)
    label = max(len(format_number(v)) for v in (lo, hi)) * DIGIT_WIDTH * size + size if across else 0
    gap = max(scaled(MIN_TICK_PX), label, (LINE_HEIGHT + 0.5) * size if not across else 0)
    fit = max(room / gap, 1.0)
    step = next(s for s in _STEPS if (hi - lo) / s <= fit)
    first = math.ceil(lo / step) * step
    values = [int(v) if float(v).is_integer() else v for v in _arange(first, hi, step)] or [lo]
    ticks = dict(tickmode="array", tickvals=values, ticktext=[format_number(v) for v in values])
    if across:
        ticks["tickangle"] = 0
    return ticks


def _arange(first: float, last: float, step: float) -> list[float]:
    """``first``, ``first + step``, ... up to ``last`` (exact multiples: no drift)."""
    n = int(math.floor((last - first) / step + 1e-9)) + 1
    return [first + i * step for i in range(max(n, 0))]


def with_alpha(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def log_axis_range(
    fig: go.Figure, values: Sequence[float | None], below: float, above: float, min_span: float = 0, **where
) -> None:
    """Fit a log y axis to ``values`` with margins (in decades), at least
    ``min_span`` decades tall; label only powers of ten when the data spans
    several, so the minor 2s and 5s do not clutter it. ``where`` (``row``,
    ``col``) picks the axis of a subplot; default all."""
    values = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not values:
        return
    lo, hi = math.log10(min(values)) - below, math.log10(max(values)) + above
    lo = min(lo, hi - min_span)
    fig.update_yaxes(range=[lo, hi], **where)
    if hi - lo >= 2:
        # Whole decades; every 2nd, 3rd ... one on a tall span, so labels never crowd.
        fig.update_yaxes(dtick=max(1, math.ceil((hi - lo) / 6)), **where)


def label_log_hlines(fig: go.Figure) -> None:
    """Move the labels of ``add_hline`` onto a log y axis: Plotly places
    annotations there in log10 coordinates, but ``add_hline`` gives its label the
    plain value (so a label at 4 GB/s landed at 10^4 GB/s, off the chart)."""
    for a in fig.layout.annotations:
        if a.yref == "y" and a.y is not None and a.y > 0:
            a.y = math.log10(a.y)


def no_data_figure(fig: go.Figure, text: str, title: str, height: int = 380) -> go.Figure:
    fig.add_annotation(text=wrap_words(text, line_chars("note")), showarrow=False, font=dict(size=font_px("note")),
                       x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_style(fig, title, height=height)
