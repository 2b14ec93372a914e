"""The Inside the kernel walk's row labels and margins (:func:`~explorer.kernel.figures.kernel_walk_figure`):
short labels with their detail for the hover, and margins that hold labels and colour bar at presentation
size in either mode, so that the plot area never narrows when the text grows (issue 27)."""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from explorer.cache.cell_style import BLOCK_KEY, colorbar_title
from explorer.style import CHAR_WIDTH, DIGIT_WIDTH, LABEL_CHAR_WIDTH, MARGIN_R, PRESENTATION_SCALE, font_px, presentation_scale

#: Plot-area width (px) of the walk on a 1280 px screen, in either mode: a chart in
#: the page's wider column (577 px) less its row labels and colour bar, whose room
#: is presentation mode's in both (:func:`walk_margins`).
WALK_PLOT_PX = 300


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
    :data:`~explorer.style.LABEL_CHAR_WIDTH`, its ids at :data:`~explorer.style.DIGIT_WIDTH`;
    Plotly's automargin still grows a margin that a wider text needs)."""
    scale = max(presentation_scale(), PRESENTATION_SCALE)
    tick = font_px("tick") / presentation_scale() * scale
    left = max((len(text) for text in labels), default=0) * CHAR_WIDTH * tick + 12 * scale
    right = MARGIN_R * scale
    if colorbar:  # Plotly's gap (x = 1.02), the bar's padding, and its title or its bar and tick labels
        title = max(len(line) for line in colorbar_title(key)["text"].split("<br>")) * LABEL_CHAR_WIDTH * tick
        bar = 14 + 6 + len(f"{colorbar_ids:,}") * DIGIT_WIDTH * tick
        right = 0.02 * WALK_PLOT_PX + 2 * 10 + max(title, bar) + 4
    return dict(l=math.ceil(left), r=math.ceil(right))


def set_walk_margins(fig: go.Figure, labels: Sequence[str], **colorbar) -> go.Figure:
    """Give the walk ``fig`` the margins of :func:`walk_margins` (``colorbar``: its
    keywords), keeping Plotly's automargin for a label wider than estimated."""
    fig.update_layout(margin=walk_margins(labels, **colorbar))
    fig.update_yaxes(automargin=True)
    return fig
