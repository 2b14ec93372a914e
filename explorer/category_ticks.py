"""Tick labels of a categorical x axis that stay upright at every text size
(implementation names, split names, block sizes): broken at spaces and hyphens,
staggered on two rows, or thinned, to fit a category's share of the plot."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from explorer.formatting import line_count, wrap_words
from explorer.style import HALF_PLOT_WIDTH_PX, LABEL_CHAR_WIDTH, font_px, plot_width_px


def set_category_ticks(fig: go.Figure, labels: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX,
                       **where) -> None:
    """Tick labels of a categorical x axis that fit a category's share of a plot
    ``plot_width`` px wide at scale 1 (:func:`plot_width_px`; by default a half-page
    chart's, :data:`HALF_PLOT_WIDTH_PX`) at the tick size of now, always upright
    (``tickangle=0``): broken into lines at their spaces; where a word alone is
    wider than its share (five implementation names at presentation size), on two
    staggered rows, every other label a row lower, so that each has two shares;
    where even that is too narrow, only every k-th label is written (the hover
    names every category). The bottom margin grows to hold them. ``where``
    (``row``, ``col``) picks the axis of a subplot; default all.

    Returns nothing; :func:`category_tick_layout` gives the choice it makes."""
    labels = list(dict.fromkeys(labels))
    text = category_tick_layout([str(label) for label in labels], plot_width)[0]
    # A whole category's width at each end: dots, unlike bars, would otherwise get
    # an axis that ends at the outer dots and cuts their labels in half.
    fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=text, tickangle=0, automargin=True,
                     range=[-0.5, len(labels) - 0.5], **where)


def category_tick_layout(labels: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX) -> tuple[list[str], int, int]:
    """What :func:`set_category_ticks` writes under ``labels``: the tick texts
    (``""`` for a category left unlabelled, ``<br>`` breaks), the rows they take
    turns on (1, or 2 when staggered) and the stride k (every k-th labelled).
    A label's lines are at most ``rows * k`` shares wide (``LABEL_CHAR_WIDTH`` per
    character, a tenth more than Arial's average: neighbours never touch)."""
    # A hyphen is a break too ("(prefix-" over "aware)"): the pieces are measured and wrapped as words.
    labels = [" ".join(str(label).replace("-", "- ").split()) for label in labels]
    n = max(len(labels), 1)
    share = plot_width_px(plot_width) / n
    char_px = LABEL_CHAR_WIDTH * font_px("tick")

    def longest(stride: int) -> int:
        return max((len(word) for label in labels[::stride] for word in label.split()), default=0)

    rows, stride = next(((r, k) for k in range(1, n + 1) for r in (1, 2)
                         if longest(k) * char_px <= share * r * k or k == n))
    width = max(int(share * rows * stride / char_px), 1)
    wrapped = [wrap_words(label, width).replace("- ", "-") if i % stride == 0 else "" for i, label in enumerate(labels)]
    if rows == 2:  # the second row starts under the first row's deepest label
        depth = max((line_count(t) for t in wrapped[::2 * stride]), default=1)
        wrapped = [("<br>" * depth + t) if t and (i // stride) % 2 else t for i, t in enumerate(wrapped)]
    return wrapped, rows, stride
