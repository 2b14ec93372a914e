"""The Inside the kernel walk's row labels and margins (:func:`~explorer.kernel.figures.kernel_walk_figure`):
short labels with their detail for the hover, and margins that hold labels and colour bar at presentation
size in either mode, so that the plot area never narrows when the text grows (issue 27); its legend in
rows the figure grows for, and a sliding window's band labelled across where the label fits."""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from explorer.cache.cell_style import BLOCK_KEY, colorbar_title_lines
from explorer.kernel.merge_layout import tick_gap_px
from explorer.legend_layout import fit_legend
from explorer.style import (
    CHAR_WIDTH,
    DIGIT_WIDTH,
    LABEL_CHAR_WIDTH,
    LINE_HEIGHT,
    MARGIN_L,
    MARGIN_R,
    PRESENTATION_SCALE,
    font_px,
    presentation_scale,
)

#: Plot-area width (px) of the walk on a 1280 px screen, in either mode: a chart in
#: the page's wider column (577 px) less its row labels and colour bar, whose room
#: is presentation mode's in both (:func:`walk_margins`).
WALK_PLOT_PX = 300


#: Plotly's padding (px) between a bar's edges and the text inside it.
BAR_TEXT_PAD_PX = 3


def walk_ids_fit(bar_px: float, segment_px: float, digits: int) -> bool:
    """Whether block ids of ``digits`` digits, horizontal at the cell text size of
    now, fit every segment of the walk: bars ``bar_px`` thick, the shortest segment
    ``segment_px`` long at :data:`WALK_PLOT_PX` across (the narrowest the walk is
    drawn, so at any width all are written or none), with Plotly's padding. Left to
    Plotly, ids too wide for a bar's thickness were turned on their side, and only
    the one-digit ones fitted so (issue 27)."""
    size = font_px("cell")
    return (bar_px >= LINE_HEIGHT * size + 2 * BAR_TEXT_PAD_PX
            and segment_px >= digits * DIGIT_WIDTH * size + 2 * BAR_TEXT_PAD_PX)


def walk_labels(tiles, num_splits: int, prefix: Sequence[bool]) -> list[str]:
    """The walk's row labels, short (``"split 0 · tile 1"``, ``"prefix 0 · tile 0"``
    where ``prefix``, ``"tile 3"`` with one split): with each row's blocks and lookups
    too, they grew into the plot at 18 px (the hover has those)."""
    return [(f"prefix {int(r.split)} · " if prefix[i] else f"split {int(r.split)} · " if num_splits > 1 else "")
            + f"tile {int(r.tile)}" for i, r in enumerate(tiles.itertuples())]


def walk_margins(labels: Sequence[str], *, colorbar: bool, colorbar_ids: int = 0, key: str = BLOCK_KEY) -> dict:
    """Left and right margins (px) of the walk that hold its row ``labels`` and its
    colour bar (of ids up to ``colorbar_ids``, titled ``key``) at
    presentation mode's text size, or the current one if larger: the same in normal
    mode, so that the plot area is as wide in both (the labels estimated at
    :data:`~explorer.style.CHAR_WIDTH` of their size, the bar's title at
    :data:`~explorer.style.LABEL_CHAR_WIDTH`, its ids at :data:`~explorer.style.DIGIT_WIDTH`,
    the labels' gap to the plot at :func:`~explorer.kernel.merge_layout.tick_gap_px`;
    Plotly's automargin still grows a margin that a wider text needs)."""
    scale = max(presentation_scale(), PRESENTATION_SCALE)
    tick = font_px("tick") / presentation_scale() * scale
    left = max((len(text) for text in labels), default=0) * CHAR_WIDTH * tick + tick_gap_px(tick) + 8 * scale
    right = MARGIN_R * scale
    if colorbar:  # Plotly's gap (x = 1.02), the bar's padding, and its title or its bar and tick labels
        title = max(len(line) for line in colorbar_title_lines(key)) * LABEL_CHAR_WIDTH * tick
        bar = 14 + 6 + len(f"{colorbar_ids:,}") * DIGIT_WIDTH * tick
        right = 0.02 * WALK_PLOT_PX + 2 * 10 + max(title, bar) + 4
    return dict(l=math.ceil(left), r=math.ceil(right))


def set_walk_margins(fig: go.Figure, labels: Sequence[str], **colorbar) -> go.Figure:
    """Give the walk ``fig`` the margins of :func:`walk_margins` (``colorbar``: its
    keywords), keeping Plotly's automargin for a label wider than estimated, and
    the bottom margin its legend's rows need (:func:`fit_walk_legend`)."""
    fit_walk_legend(fig)
    fig.update_layout(margin=walk_margins(labels, **colorbar))
    # A gap between each row's label and its first tile that grows with the text.
    fig.update_yaxes(automargin=True, ticklabelstandoff=tick_gap_px(font_px("tick")))
    return fig


def fit_walk_legend(fig: go.Figure) -> None:
    """Lay out the walk's legend in the rows :func:`~explorer.legend_layout.fit_legend`
    plans for its plot (:data:`WALK_PLOT_PX` across in either mode, which ``fit_legend``
    takes the grown margins off), the figure growing by the rows its bottom margin lacks:
    a window's entries took the plot's height (132 of 406 px, issue 27)."""
    fit_legend(fig, WALK_PLOT_PX + (presentation_scale() - 1) * (MARGIN_L + MARGIN_R))


#: The window band's label, on two lines across the band (three where the band is narrower), and its
#: background: the band's fill (:data:`WINDOW_FILL`) over the white plot.
WINDOW_LABEL = "outside the window:<br>not read"
WINDOW_LABEL_NARROW = "outside<br>the window:<br>not read"
WINDOW_FILL = "rgba(100,116,139,0.22)"
WINDOW_LABEL_BG = "#DDE0E6"
#: With more tokens before the window than the walk reads, the x axis is broken: tokens ``[0, first
#: read lane)`` in a panel of this share of the plot on the left, then a gap of :data:`BREAK_GAP` with
#: the break's mark, then the tiles to scale. Drawn to scale from 0, a long context's tiles were
#: slivers; cut at the window, the skipped tokens were out of sight (issue 27, back row).
SKIPPED_SHARE, BREAK_GAP = 0.35, 0.05


def window_label(fig: go.Figure, x0: float, x1: float, band_px: float, plot_height: float, xref: str = "x") -> bool:
    """Write :data:`WINDOW_LABEL` (or :data:`WINDOW_LABEL_NARROW`) across the grey band of tokens
    ``[x0, x1)`` on the walk's x axis ``xref``, the band ``band_px`` wide and the plot ``plot_height``
    px tall, horizontal, where it fits the band with a margin of its text's size either side; elsewhere
    the legend and subtitle name the band. Rotated, it read as 12 px set on its side (issue 27).
    Returns whether it was written."""
    size = font_px("label")
    for label in (WINDOW_LABEL, WINDOW_LABEL_NARROW):
        lines = label.split("<br>")
        width = max(len(line) for line in lines) * LABEL_CHAR_WIDTH * size + 2 * size
        if width <= band_px and len(lines) * LINE_HEIGHT * size <= plot_height:
            # On the band's grey (its fill over white), opaque: a split's dotted line stops short of the text.
            fig.add_annotation(x=(x0 + x1) / 2, xref=xref, y=0.5, yref="paper", text=label, showarrow=False,
                               textangle=0, font=dict(size=size, color="#334155"), bgcolor=WINDOW_LABEL_BG)
            return True
    return False


def window_band(fig: go.Figure, window_start: int, read_from: int, x_end: int, rows: int, text: str,
                name: str, plot_height: float, skipped: int) -> float:
    """The walk's grey band of the tokens before a sliding window, ``[0, window_start)``, over its
    ``rows`` tile rows (trace ``name``, hover ``text``, ``customdata`` the ``skipped`` blocks), labelled
    (:func:`window_label`). Tiles read from token ``read_from`` to ``x_end``: with no more tokens before
    ``read_from`` than that, the axis runs to scale from 0; with more, it is broken
    (:data:`SKIPPED_SHARE`): a panel on x axis ``x2`` of ``[0, read_from)`` holds the band's part
    before the break (trace ``name + " (before the break)"``), and :func:`break_walk_axis` lays it
    out once the figure is styled. Returns the main x axis' first token: 0, or ``read_from`` where broken."""
    y = [-0.5, -0.5, rows - 0.5, rows - 0.5, -0.5]
    band = dict(fill="toself", fillcolor=WINDOW_FILL, line=dict(width=0), mode="lines", hoveron="fills",
                text=text, hoverinfo="text", customdata=[skipped] * 5)
    fig.add_trace(go.Scatter(x=[0, window_start, window_start, 0, 0], y=y, name=name, **band))
    broken = read_from > x_end - read_from
    if broken:
        fig.add_trace(go.Scatter(x=[0, read_from, read_from, 0, 0], y=y, name=f"{name} (before the break)",
                                 xaxis="x2", showlegend=False, **band))
        window_label(fig, 0, read_from, SKIPPED_SHARE * WALK_PLOT_PX, plot_height, xref="x2")
        return float(read_from)
    window_label(fig, 0, window_start, window_start / max(x_end, 1) * WALK_PLOT_PX, plot_height)
    return 0.0


def break_walk_axis(fig: go.Figure, read_from: float) -> None:
    """Lay out the walk's broken x axis (:func:`window_band`): the main axis on the right, ``x2``
    (``[0, read_from]``, its one tick at 0) on the left, the row labels at the plot's left edge, and
    the break's mark (``//``, annotation ``"axis break"``) on the axis line in the gap between them."""
    fig.update_layout(
        xaxis=dict(domain=[SKIPPED_SHARE + BREAK_GAP, 1]),
        xaxis2=dict(domain=[0, SKIPPED_SHARE], anchor="y", range=[0, read_from], tickmode="array", tickvals=[0],
                    ticktext=["0"], showgrid=False, zeroline=False, tickfont=fig.layout.xaxis.tickfont),
        yaxis=dict(anchor="free", position=0),
    )
    fig.add_annotation(x=SKIPPED_SHARE + BREAK_GAP / 2, xref="paper", y=0, yref="paper", text="//",
                       showarrow=False, font=dict(size=font_px("tick"), color="#334155"), name="axis break")
