"""Shared look of the explorer's figures: colours, sizes, fonts, the layout
every figure gets (:func:`apply_style`), cell gaps, integer ticks and log-axis helpers.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.limits import (  # noqa: F401
    MAX_POOL_CELLS,
    MAX_TABLE_CELLS,
    MAX_TEXT_CELLS,
    MAX_WALK_CELLS,
    MAX_WALK_POINTS,
)

#: One colour per implementation, in every chart.
IMPL_COLORS: dict[str, str] = {
    "naive": "#D9534F",
    "vectorized": "#F0AD4E",
    "triton": "#2563EB",
    "triton_simple": "#14B8A6",
    "triton_prefix": "#C026D3",
}
FALLBACK_COLOR = "#6B7280"
PASS_COLOR = "#16A34A"
FAIL_COLOR = "#DC2626"

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
#: Sequence colours in the pool view: plotly's Dark24, Alphabet and Light24
#: (``plotly.colors.qualitative``) less their greys (grey means free or foreign),
#: colours too pale to tell from a free block or too dark for the dot on a partly
#: filled block, and near-duplicates (CIEDE2000 distance under 15, and #6C4516,
#: a brown too like #862A16). Its blues come last: a small batch's sequences then
#: look nothing like the block ids' blue scale.
SEQUENCE_COLORS: tuple[str, ...] = (
    "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#00A08B", "#6C7C32", "#862A16",
    "#DEA0FD", "#FEAF16", "#F8A19F", "#B10DA1", "#86CE00", "#511CFB", "#2ED9FF", "#2E91E5",
)
#: Up to this many sequences in a pool view, each gets a legend entry.
MAX_SEQUENCE_LEGEND = 12
#: Physical block ids: ColorBrewer's Blues from its third step (block 0, pale but
#: apart from an unallocated cell's near-white) to navy (the pool's last block).
BLOCK_COLORSCALE: list[list] = [[i / 6, c] for i, c in enumerate((
    "#C6DBEF", "#9ECAE1", "#6BAED6", "#4292C6", "#2171B5", "#08519C", "#08306B"))]
#: Reference counts, 1 holder up to the most: ColorBrewer's Oranges from its fourth
#: step (a lone holder, strong enough to tell from free grey) to its second darkest
#: (the darkest is a sequence's brown, #862A16).
REF_COUNT_COLORS: tuple[str, ...] = ("#FDAE6B", "#FD8D3C", "#F16913", "#D94801", "#A63603")
#: The share of an aggregated pool cell's blocks that the batch holds: free grey to slate.
BATCH_SHARE_COLORSCALE: list[list] = [[0, FREE_COLOR], [1, "#1E293B"]]
#: Split-K splits, while few: Tableau 10 less its blue (too like a block id), its green
#: (too like the launch order) and its grey, and Paul Tol's wine.
SPLIT_COLORS: tuple[str, ...] = ("#E15759", "#76B7B2", "#F28E2B", "#B07AA1", "#EDC948", "#882255", "#FF9DA7",
                                 "#9C755F")
#: Many splits: Plasma from 0.12 to 0.85 (less an indigo too like a dark block id
#: and a yellow too faint on white).
SPLIT_COLORSCALE: list[list] = [[i / 8, c] for i, c in enumerate((
    "#4A03A0", "#6E01A7", "#9011A1", "#AE2891", "#C7437C", "#DC5D67", "#ED7953", "#F9983E", "#FCBB2D"))]
#: Launch order of the decode kernel's programs: ColorBrewer's Greens, dark first.
LAUNCH_ORDER_COLORSCALE: list[list] = [[i / 4, c] for i, c in enumerate((
    "#00441B", "#006D2C", "#238B45", "#41AB5D", "#74C476"))]


#: Errors are drawn at least this high on the log axes (exact zeros sit on the axis' floor).
ERROR_FLOOR = 1e-12

#: Width in pixels of a figure's plot area in the narrower columns the pages draw
#: it in (a ~600 px column less margins and colour bar). Cell sizes are estimated
#: from it and from the figure's height.
PLOT_WIDTH_PX = 400
#: Heatmap cells (and bars) thinner than this get no 1 px gap or outline: it
#: would swallow them.
MIN_GAP_CELL_PX = 6
#: Block-table columns stay at least this many pixels wide: past ``plot width /
#: MIN_COLUMN_PX`` logical blocks, a column aggregates several (a one-block
#: sequence in a table a million blocks wide would otherwise draw nothing).
MIN_COLUMN_PX = 2
#: Integer ticks stay at least this far apart (every 2nd, 5th, ... id when not every one fits).
MIN_TICK_PX = 30

_FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13, color="#1F2937")


def text_fits(n_cells: int, n_cols: int, max_value: int, plot_width: float = PLOT_WIDTH_PX) -> bool:
    """Whether numbers fit inside heatmap cells: few cells, and rows narrow enough
    for a plot ``plot_width`` px wide (48 digits in :data:`PLOT_WIDTH_PX`)."""
    max_digits = 48 * plot_width / PLOT_WIDTH_PX
    return n_cells <= MAX_TEXT_CELLS and n_cols * len(str(max(0, int(max_value)))) <= max_digits


def impl_color(name: str) -> str:
    """The colour of implementation ``name`` (grey for an unknown one)."""
    return IMPL_COLORS.get(name, FALLBACK_COLOR)


#: Characters of subtitle per line: Plotly does not wrap titles, and the narrowest
#: charts (two fifths of a 1280 px page) hold about this many at the subtitle's size.
SUBTITLE_LINE = 60
#: Pixels each further subtitle line adds to the top margin.
SUBTITLE_LINE_HEIGHT = 17


def _wrap_subtitle(subtitle: str | None, width: int = SUBTITLE_LINE) -> str:
    """``subtitle`` broken into lines of at most ``width`` characters at its
    `` · `` and ``; `` separators (a part longer than that stays whole)."""
    if not subtitle or len(subtitle) <= width:
        return subtitle or ""
    pieces = re.split(r"( · |; )", subtitle)  # text, separator, text, ...
    lines = [pieces[0]]
    for sep, part in zip(pieces[1::2], pieces[2::2]):
        if len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.strip(" ·")  # a line ends with its ";", not with a "·"
            lines.append(part)
    return "<br>".join(lines)


#: Characters per line of a category's tick label: four implementation names side
#: by side in a half-page chart at 1280 px (about 90 px a category) stay horizontal
#: and whole ("Triton<br>(simple grid)"), where rotated ones ran off the figure.
TICK_LINE = 13


def _tick_lines(label: str, width: int = TICK_LINE) -> str:
    """``label`` broken at its spaces into lines of at most ``width`` characters
    (a longer word stays whole), joined by ``<br>``."""
    lines: list[str] = []
    for word in str(label).split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def set_category_ticks(fig: go.Figure, labels: Sequence[str], **where) -> None:
    """Horizontal tick labels of a categorical x axis, broken into lines
    (:func:`_tick_lines`), with the bottom margin grown to hold them.
    ``where`` (``row``, ``col``) picks the axis of a subplot; default all."""
    labels = list(dict.fromkeys(labels))
    # A whole category's width at each end: dots, unlike bars, would otherwise get
    # an axis that ends at the outer dots and cuts their labels in half.
    fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=[_tick_lines(label) for label in labels],
                     tickangle=0, automargin=True, range=[-0.5, len(labels) - 0.5], **where)


def title_margins(subtitle: str | None) -> tuple[int, int]:
    """Top and bottom margins (px) :func:`apply_style` gives a figure."""
    if not subtitle:
        return 56, 100
    return 84 + SUBTITLE_LINE_HEIGHT * _wrap_subtitle(subtitle).count("<br>"), 100


def colorbar_length_px(plot_height: float) -> float:
    """Pixels of a colour bar's scale as long as the plot, less its two-line title."""
    return max(plot_height - 40, 40)


def plot_area_height(height: int, subtitle: str | None) -> int:
    """Pixels between the margins of a figure of ``height`` styled by :func:`apply_style`."""
    top, bottom = title_margins(subtitle)
    return max(height - top - bottom, 1)


def apply_style(fig: go.Figure, title: str, subtitle: str | None = None, height: int = 420) -> go.Figure:
    top, bottom = title_margins(subtitle)
    # The legend hangs from the bottom of the figure, not from the plot area: a
    # legend of several rows then pushes the plot up (Plotly grows the margin to
    # fit it and the axis title) instead of sliding under the x axis title, as
    # one placed a fixed fraction of the plot area below it did.
    fig.update_layout(
        template="plotly_white",
        font=_FONT,
        title=dict(text=title, x=0, xanchor="left", font=dict(size=16), subtitle=dict(text=_wrap_subtitle(subtitle))),
        height=height,
        margin=dict(l=60, r=20, t=top, b=bottom),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0,
                    font=dict(size=12)),
        hoverlabel=dict(font=dict(family=_FONT["family"])),
    )
    return fig


def cell_gaps(n_rows: int, n_cols: int, plot_height: float, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """``xgap``/``ygap`` of a heatmap: 1 px between cells that are wide (tall)
    enough to spare it, none between thinner ones, which a gap would swallow."""
    return dict(
        xgap=1 if plot_width / max(n_cols, 1) >= MIN_GAP_CELL_PX else 0,
        ygap=1 if plot_height / max(n_rows, 1) >= MIN_GAP_CELL_PX else 0,
    )


def integer_ticks(lo: float, hi: float, length_px: float = PLOT_WIDTH_PX) -> dict:
    """Tick settings for an axis or colour bar of integers (ids, counts) spanning
    ``lo`` to ``hi`` over ``length_px`` pixels.

    Up to a span of 50, ticks every 1, 2, 5, ... so that they stay
    :data:`MIN_TICK_PX` apart (Plotly's own would fall on halves over a short
    span); past it, Plotly's own ticks, which are whole numbers there, printed as
    integers.
    """
    span = max(float(hi) - float(lo), 0.0)
    if span > 50:
        return dict(tickmode="auto", tickformat=",d")
    fit = max(length_px / MIN_TICK_PX, 1.0)
    step = next(s for s in (1, 2, 5, 10, 25, 50) if span / s <= fit)
    return dict(tickmode="linear", tick0=0, dtick=step)


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
    fig.add_annotation(text=text, showarrow=False, font=dict(size=14), x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_style(fig, title, height=height)


# -- presentation mode -----------------------------------------------------------

#: How much :func:`for_presentation` enlarges text, markers and lines: chart text
#: of 12-16 px becomes 18-24 px, readable from the back of a room, and still fits
#: the half-page charts of a 1280 px wide screen (at 1.6 their titles, subtitles
#: and subplot titles no longer did).
PRESENTATION_SCALE = 1.5
#: Plotly's defaults for what a figure leaves unset and :func:`for_presentation`
#: must still scale (text that is unset follows ``layout.font``, which it sets).
_PLOTLY_FONT_SIZE = 12
_PLOTLY_HOVER_SIZE = 13
_PLOTLY_MARKER_SIZE = 6
_PLOTLY_LINE_WIDTH = 2
_SCALED = "presentation_scale"
#: Characters of a title that the narrowest charts (two fifths of a 1280 px page)
#: hold at 16 px bold; a longer title grows less than ``scale``.
TITLE_LINE = 36
#: A subtitle's size at scale 1 (Plotly draws an unset one smaller than the title,
#: so it would follow the title's shrinking).
_SUBTITLE_SIZE = 11.2
#: A heatmap's in-cell text grows only while a row of it would fit in this many
#: characters at its original size (the token walk's 16 two-digit cells fill a
#: half-page chart at 1280 px already).
_CELL_TEXT_CHARS = 32
#: Pixels between the figure's top edge and its title in presentation mode.
_TITLE_PAD = 12
#: Height of a line of text in px of its font size.
_LINE = 1.3
#: Height of a legend row in px of its font size.
_LEGEND_ROW = 1.4


def for_presentation(fig: go.Figure, scale: float = PRESENTATION_SCALE) -> go.Figure:
    """A copy of ``fig`` with its text, markers and lines ``scale`` times larger.

    Every font size (layout, titles, axis titles and ticks, legend, colour bars,
    annotations, hover labels, heatmap and bar text, slider and button labels),
    marker size and line width is multiplied by ``scale``, in the layout, the
    traces and every animation frame; sizes Plotly (or Streamlit's chart theme,
    on axes) would pick itself are set to Plotly's default times ``scale``. So that
    the figure keeps its width: subtitles, category tick labels and notes wrap
    into shorter lines; a long title, long row names and a heatmap's dense
    in-cell text grow less (never shrink). Margins and the figure's height grow
    with the text (the plot area keeps its size), and the title hangs from the
    figure's top edge.

    Parameters
    ----------
    fig : go.Figure
        A figure of :mod:`explorer`; it is not modified.
    scale : float
        Factor on every size; 1 returns an unchanged copy.

    Returns
    -------
    go.Figure
        The enlarged copy. It records ``scale`` in ``layout.meta``; a figure that
        already has one is returned as an unchanged copy, so applying it twice
        does not compound.

    Examples
    --------
    >>> big = for_presentation(go.Figure(go.Scatter(y=[1, 2])).update_layout(font_size=10))
    >>> big.layout.font.size, big.data[0].marker.size
    (15.0, 9.0)
    """
    spec = fig.to_plotly_json()
    layout = spec.setdefault("layout", {})
    meta = layout.get("meta")
    if scale == 1 or (isinstance(meta, dict) and _SCALED in meta):
        return go.Figure(fig)
    _scale_sizes(spec, scale)  # explicit sizes everywhere: layout, traces, frames
    font = layout.setdefault("font", {})
    font.setdefault("size", _times(_PLOTLY_FONT_SIZE, scale))
    layout.setdefault("hoverlabel", {}).setdefault("font", {}).setdefault("size", _times(_PLOTLY_HOVER_SIZE, scale))
    for key, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict):
            # Set, not inherited: Streamlit's chart theme gives axes smaller text of its own.
            # Long row names (the kernel walk's tiles) keep Plotly's size: they would take the plot's width.
            long_names = key.startswith("y") and any(len(str(t)) > TICK_LINE for t in axis.get("ticktext") or ())
            axis.setdefault("tickfont", {}).setdefault("size", _times(_PLOTLY_FONT_SIZE, 1 if long_names else scale))
            if key.startswith("x") and axis.get("ticktext") is not None:  # categories (:func:`_tick_lines`)
                names = [str(t).replace("<br>", " ") for t in axis["ticktext"]]
                if _crowded_categories(names, axis["tickfont"]["size"]):
                    # Side by side, the wrapped names ran together ("NaiveOptimizedTriton"):
                    # angled, each on one line, they stay apart.
                    axis.update(ticktext=names, tickangle=-45, automargin=True)
                else:
                    axis["ticktext"] = [_wrap_words(t, max(int(TICK_LINE / scale), 1)) for t in names]
            title = axis.setdefault("title", {})
            if isinstance(title, dict):
                title.setdefault("font", {}).setdefault("size", font["size"])
    for trace in spec.get("data", []):
        if trace.get("type", "scatter") in ("scatter", "scattergl"):
            trace.setdefault("marker", {}).setdefault("size", _times(_PLOTLY_MARKER_SIZE, scale))
            trace.setdefault("line", {}).setdefault("width", _times(_PLOTLY_LINE_WIDTH, scale))
    title_size = _fit_title(spec, scale)
    subtitle_font = layout["title"].setdefault("subtitle", {}).setdefault("font", {})
    subtitle_size = subtitle_font.setdefault("size", _times(_SUBTITLE_SIZE, scale))
    top = 0.0  # pixels from the figure's top edge to its plot area that the text needs
    for where in (layout, *(frame.get("layout", {}) for frame in spec.get("frames", []))):
        _rewrap_subtitle(where, scale)
        _rewrap_annotations(where, layout, scale)
        title = where.get("title", {})
        lines = [(title.get(k) or {}).get("text") if k else title.get("text") for k in ("", "subtitle")]
        top = max(top, _TITLE_PAD + sum(_lines(text) * size * _LINE for text, size in
                                        zip(lines, (title_size, subtitle_size)))
                  + _above_plot(where, layout, font["size"]))
    for trace in (*spec.get("data", []), *(t for f in spec.get("frames", []) for t in f.get("data", []))):
        _fit_cell_text(trace, scale)
    margin = layout.get("margin", {})
    if margin:
        grown = {side: round(margin[side] * scale) for side in ("l", "r", "t", "b") if margin.get(side) is not None}
        grown["t"] = max(grown.get("t", 0), round(top))
        if layout.get("height") is not None:
            layout["height"] = layout["height"] + sum(grown.get(s, 0) - (margin.get(s) or 0) for s in ("t", "b"))
            legend_size = layout.get("legend", {}).get("font", {}).get("size") or font["size"]
            layout["height"] += round(_legend_rows(spec) * _LEGEND_ROW * legend_size * (scale - 1) / scale)
            if layout.get("title", {}).get("text"):
                # Hung from the top edge: Plotly centres a title on the top margin, so a
                # taller title block would otherwise grow down into what sits above the plot.
                layout["title"].update(yref="container", y=1 - _TITLE_PAD / layout["height"], yanchor="top")
        margin.update(grown)
    layout["meta"] = {**meta, _SCALED: scale} if isinstance(meta, dict) else (
        {_SCALED: scale} if meta is None else meta)
    return go.Figure(spec)


#: Pixels of plot width a half-page chart has at 1280 px in presentation mode
#: (its margins grown), shared by its categories.
_PRESENTED_PLOT_PX = 280
#: Width of a character in px of its font size (Inter, Arial: about half).
_CHAR_WIDTH = 0.55


def _crowded_categories(names: Sequence[str], size: float) -> bool:
    """Whether category tick labels ``names`` at font ``size`` would run into
    each other in a half-page chart even wrapped at every space: their longest
    word wider than a category's share of :data:`_PRESENTED_PLOT_PX`."""
    if not names:
        return False
    longest = max((len(word) for name in names for word in name.split()), default=0)
    return longest * _CHAR_WIDTH * size > 0.9 * _PRESENTED_PLOT_PX / len(names)


def _lines(text: str | None) -> int:
    """Lines of a Plotly text (0 for none)."""
    return text.count("<br>") + 1 if text else 0


def _above_plot(layout: dict, figure_layout: dict, font_size: float) -> float:
    """Pixels the annotations over the top edge of the plot area take (subplot
    titles of the top row, marks hung above the top plot), in ``layout`` (a
    figure's or a frame's, as JSON)."""
    px = 0.0
    for note in layout.get("annotations", []):
        yref, y = note.get("yref") or "y", note.get("y") or 0
        if note.get("yanchor") != "bottom" or y < 1 or not note.get("text"):
            continue
        if yref.endswith(" domain"):
            domain = figure_layout.get("yaxis" + yref.split()[0][1:], {}).get("domain") or (0, 1)
            if domain[1] < 0.99:
                continue
        elif yref != "paper":
            continue
        size = (note.get("font") or {}).get("size") or font_size
        px = max(px, _lines(note["text"]) * size * _LINE + (note.get("yshift") or 0))
    return px


def _legend_rows(spec: dict) -> int:
    """Entries of a figure's legend (the figure as JSON): the rows it takes at
    most, one entry a row as in a narrow column."""
    traces = spec.get("data", [])
    if not spec["layout"].get("showlegend", len(traces) > 1):
        return 0
    return sum(1 for t in traces if t.get("showlegend") is not False and t.get("name"))


def _scale_sizes(node, scale: float, parent: str = "") -> None:
    """Scale, in place, every ``size`` of a font (a key ending in ``font``), every
    ``size`` of a ``marker`` and every ``width`` of a ``line`` in a figure's JSON
    (its template aside: Plotly's own defaults there are not ours to scale)."""
    if isinstance(node, list):
        for item in node:
            _scale_sizes(item, scale, parent)
        return
    if not isinstance(node, dict):
        return
    sized = parent.endswith("font") or parent == "marker"
    for key, value in node.items():
        if (sized and key == "size") or (parent == "line" and key == "width"):
            node[key] = _times(value, scale)
        elif isinstance(value, (dict, list)) and key != "template":
            _scale_sizes(value, scale, key)


def _times(value, scale: float):
    """``value`` (a number or an array of them; anything else, such as None, as
    it is) times ``scale``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(value * scale, 2)
    if isinstance(value, (list, tuple)):
        return [_times(v, scale) for v in value]
    if isinstance(value, np.ndarray):
        return np.round(value * scale, 2)
    return value


def _wrap_words(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (a
    longer word stays whole); its own ``<br>`` breaks are kept. Text with tags
    that have attributes (a break could fall inside one) stays as it is."""
    if re.search(r"<(?!/?(br|b|i|sup|sub)>)", text):
        return text
    lines: list[str] = []
    for line in text.split("<br>"):
        lines.append("")
        for word in line.split(" "):
            if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return "<br>".join(lines)


def _rewrap_subtitle(layout: dict, scale: float) -> None:
    """Break the subtitle of ``layout`` (a figure's or a frame's, as JSON) into
    lines ``scale`` times shorter, in place."""
    subtitle = layout.get("title", {}).get("subtitle", {})
    text = subtitle.get("text")
    if text:
        width = max(int(SUBTITLE_LINE / scale), 1)
        subtitle["text"] = "<br>".join(_wrap_words(_wrap_subtitle(line, width), width) for line in text.split("<br>"))


def _fit_title(spec: dict, scale: float) -> float:
    """Set, in place, the title size of a figure (as JSON): ``scale`` times its
    size, less for a title too long for the narrowest chart at that size (never
    below its original size); return it. Titles are not wrapped: Plotly
    positions a title of several lines above the anchor it is given."""
    title = spec["layout"].setdefault("title", {})
    base = (title.get("font") or {}).get("size")
    base = base / scale if base else 16  # already scaled with every font, or Plotly's default
    texts = [title.get("text"), *((f.get("layout") or {}).get("title", {}).get("text") for f in spec.get("frames", []))]
    longest = max((len(re.sub(r"<[^>]*>", "", t)) for t in texts if t), default=0)
    fit = min(scale, max(1.0, TITLE_LINE / longest)) if longest else scale
    title.setdefault("font", {})["size"] = _times(base, fit)
    return title["font"]["size"]


def _rewrap_annotations(layout: dict, figure_layout: dict, scale: float) -> None:
    """Break long annotations placed on the figure (subplot titles, notes) of
    ``layout`` into lines that fit their subplot's width at ``scale``, in place."""
    for note in layout.get("annotations", []):
        text = note.get("text")
        if not text or note.get("xref") != "paper":  # labels on data and lines stay where they are
            continue
        if note.get("yref") == "paper" and note.get("yanchor") == "bottom" and (note.get("y") or 0) < 1:
            continue  # a lower row's subplot title: more lines would grow into the plot above
        # Three quarters: an annotation spans the plot area, a subtitle the whole figure.
        width = max(int(0.75 * SUBTITLE_LINE * _domain_width(figure_layout, note.get("xref") or "x") / scale), 8)
        note["text"] = _wrap_words(text, width)


def _domain_width(layout: dict, xref: str) -> float:
    """Fraction of the figure's width that an annotation's ``xref`` spans: its x
    axis' domain, or the whole width for ``paper``. Subplot titles (``paper``)
    take the narrowest x axis' domain: they sit over one subplot each."""
    if xref == "paper":
        domains = [a["domain"] for k, a in layout.items() if k.startswith("xaxis") and a.get("domain")]
        return min((d[1] - d[0] for d in domains), default=1.0)
    axis = layout.get("xaxis" + xref.split()[0][1:], {})
    domain = axis.get("domain") or (0.0, 1.0)
    return domain[1] - domain[0]


def _fit_cell_text(trace: dict, scale: float) -> None:
    """Shrink, in place, a heatmap's in-cell text (enlarged ``scale`` times with
    every font) back to the size at which a row of it stays within
    :data:`_CELL_TEXT_CHARS` characters of the original size, and never below it."""
    if trace.get("type") != "heatmap" or not trace.get("texttemplate") or not trace.get("textfont", {}).get("size"):
        return
    cells = trace.get("text") if "%{text}" in trace["texttemplate"] else trace.get("z")
    if cells is None:
        return
    if isinstance(cells, dict) and "bdata" in cells:  # a typed array, as Plotly writes NumPy data
        shape = [int(n) for n in str(cells.get("shape", "-1")).split(",")]
        cells = np.frombuffer(base64.b64decode(cells["bdata"]), dtype=cells["dtype"]).reshape(shape)
    rows = np.asarray(cells, dtype=object)
    if rows.ndim != 2 or not rows.size:
        return
    chars = max(len(str(v)) for v in rows.ravel())
    fit = min(scale, max(1.0, _CELL_TEXT_CHARS / max(rows.shape[1] * chars, 1)))
    trace["textfont"]["size"] = round(trace["textfont"]["size"] / scale * fit, 2)
