"""Shared look of the explorer's figures: colours, sizes, fonts, the layout
every figure gets (:func:`_style`), cell gaps, integer ticks and log-axis helpers.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import plotly.graph_objects as go

#: One colour per implementation, in every chart.
IMPL_COLORS: dict[str, str] = {
    "naive": "#D9534F",
    "vectorized": "#F0AD4E",
    "triton": "#2563EB",
    "triton_simple": "#14B8A6",
}
FALLBACK_COLOR = "#6B7280"

FREE_COLOR = "#E5E7EB"
OTHER_COLOR = "#64748B"
UNALLOCATED_COLOR = "#F1F5F9"
PASS_COLOR = "#16A34A"
FAIL_COLOR = "#DC2626"
#: Sequence colours in the pool view: plotly's Dark24, Alphabet and Light24
#: (``plotly.colors.qualitative``) less their greys (grey means free or foreign),
#: colours too pale to tell from a free block or too dark for the dot on a partly
#: filled block, and near-duplicates (CIEDE2000 distance under 15, and #6C4516,
#: a brown too like #862A16).
SEQUENCE_COLORS: tuple[str, ...] = (
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#511CFB", "#00A08B",
    "#6C7C32", "#862A16", "#DEA0FD", "#FEAF16", "#F8A19F", "#2ED9FF", "#B10DA1", "#86CE00",
)
#: Up to this many sequences in a pool view, each gets a legend entry.
MAX_SEQUENCE_LEGEND = 12
BLOCK_COLORSCALE = "Viridis"

#: Cells drawn before the cache figures sample or aggregate.
MAX_TABLE_CELLS = 20_000
MAX_POOL_CELLS = 12_000
MAX_WALK_CELLS = 8_192
MAX_WALK_POINTS = 4_000
#: Cells up to which numbers are printed inside heatmap cells.
MAX_TEXT_CELLS = 400

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


def _fits_text(n_cells: int, n_cols: int, max_value: int, plot_width: float = PLOT_WIDTH_PX) -> bool:
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


def _wrap_subtitle(subtitle: str | None) -> str:
    """``subtitle`` broken into lines of at most :data:`SUBTITLE_LINE` characters at
    its `` · `` and ``; `` separators (a part longer than that stays whole)."""
    if not subtitle or len(subtitle) <= SUBTITLE_LINE:
        return subtitle or ""
    pieces = re.split(r"( · |; )", subtitle)  # text, separator, text, ...
    lines = [pieces[0]]
    for sep, part in zip(pieces[1::2], pieces[2::2]):
        if len(lines[-1]) + len(sep) + len(part) <= SUBTITLE_LINE:
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


def _category_ticks(fig: go.Figure, labels: Sequence[str], **where) -> None:
    """Horizontal tick labels of a categorical x axis, broken into lines
    (:func:`_tick_lines`), with the bottom margin grown to hold them.
    ``where`` (``row``, ``col``) picks the axis of a subplot; default all."""
    labels = list(dict.fromkeys(labels))
    # A whole category's width at each end: dots, unlike bars, would otherwise get
    # an axis that ends at the outer dots and cuts their labels in half.
    fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=[_tick_lines(label) for label in labels],
                     tickangle=0, automargin=True, range=[-0.5, len(labels) - 0.5], **where)


def _margins(subtitle: str | None) -> tuple[int, int]:
    """Top and bottom margins (px) :func:`_style` gives a figure."""
    if not subtitle:
        return 56, 100
    return 84 + SUBTITLE_LINE_HEIGHT * _wrap_subtitle(subtitle).count("<br>"), 100


def _colorbar_px(plot_height: float) -> float:
    """Pixels of a colour bar's scale as long as the plot, less its two-line title."""
    return max(plot_height - 40, 40)


def _plot_height(height: int, subtitle: str | None) -> int:
    """Pixels between the margins of a figure of ``height`` styled by :func:`_style`."""
    top, bottom = _margins(subtitle)
    return max(height - top - bottom, 1)


def _style(fig: go.Figure, title: str, subtitle: str | None = None, height: int = 420) -> go.Figure:
    top, bottom = _margins(subtitle)
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


def _gaps(n_rows: int, n_cols: int, plot_height: float, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """``xgap``/``ygap`` of a heatmap: 1 px between cells that are wide (tall)
    enough to spare it, none between thinner ones, which a gap would swallow."""
    return dict(
        xgap=1 if plot_width / max(n_cols, 1) >= MIN_GAP_CELL_PX else 0,
        ygap=1 if plot_height / max(n_rows, 1) >= MIN_GAP_CELL_PX else 0,
    )


def _int_ticks(lo: float, hi: float, length_px: float = PLOT_WIDTH_PX) -> dict:
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


def _alpha(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _log_range(
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


def _log_hline_labels(fig: go.Figure) -> None:
    """Move the labels of ``add_hline`` onto a log y axis: Plotly places
    annotations there in log10 coordinates, but ``add_hline`` gives its label the
    plain value (so a label at 4 GB/s landed at 10^4 GB/s, off the chart)."""
    for a in fig.layout.annotations:
        if a.yref == "y" and a.y is not None and a.y > 0:
            a.y = math.log10(a.y)


def _no_data(fig: go.Figure, text: str, title: str, height: int = 380) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, font=dict(size=14), x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _style(fig, title, height=height)
