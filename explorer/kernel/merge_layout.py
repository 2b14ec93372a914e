"""The split merge's layout (:func:`explorer.kernel.figures.split_merge_figure`):
its panels' widths as Chromium draws them at 1280 px, in either mode, and the
width of a bar's value label, so that the figure knows what fits a bar's slot, and
the gap of the kernel charts' y tick labels (:func:`tick_gap_px`), and its dotted max-m
line, broken under the value labels it would cross (:func:`max_line_segments`)."""

from __future__ import annotations

import math

#: Plot-area width (px) of the split merge's two panels and the gap between them at
#: 1280 px: in normal mode (the 577 px chart less its margins) and in presentation
#: mode, whose narrower sidebar widens the page's column (Chromium drew the plot
#: 528 px wide). The gap takes :data:`MERGE_GAP` of it, each panel half the rest
#: (:func:`panel_px`).
MERGE_PLOT_PX, MERGE_PLOT_PRESENT_PX = 497, 528
#: The gap between the panels, a share of the plot: the right panel's tick labels
#: and axis title at presentation size (79 px at 1280; 0.12, 63 px, put
#: "% of softmax mass" on the left panel's last bar).
MERGE_GAP = 0.15
#: The gap between a y axis' tick labels and its plot, a share of their size (Plotly
#: leaves none): the merge's first value label ("34.1%") and the walk's first tile
#: touched the tick labels at presentation size (issue 27).
TICK_GAP = 0.5
#: Width of a digit, of "." and of "%" of a bar's value label, as a share of its size (Arial's).
_DIGIT_WIDTH, _POINT_WIDTH, _PERCENT_WIDTH = 0.56, 0.28, 0.89


def panel_px(scale: float, presentation_scale: float) -> float:
    """Pixels across one panel of the split merge at 1280 px at ``scale`` (from
    :data:`MERGE_PLOT_PX` at 1 to :data:`MERGE_PLOT_PRESENT_PX` at presentation
    mode's ``presentation_scale``)."""
    t = min(max((scale - 1) / (presentation_scale - 1), 0.0), 1.0)
    return (MERGE_PLOT_PX + t * (MERGE_PLOT_PRESENT_PX - MERGE_PLOT_PX)) * (1 - MERGE_GAP) / 2


def value_label_px(text: str, size: float) -> float:
    """Width (px) of a bar's value label ``text`` ("3.62", "34.1%") at ``size`` px (Arial's widths)."""
    return sum(_PERCENT_WIDTH if c == "%" else _POINT_WIDTH if c == "." else _DIGIT_WIDTH for c in text) * size


def tick_gap_px(tick_px: float) -> int:
    """The gap (px) between tick labels of ``tick_px`` and their plot: :data:`TICK_GAP` of
    their size, so that it grows with the text (Plotly's ``ticklabelstandoff``)."""
    return math.ceil(TICK_GAP * tick_px)


def max_line_segments(m, line: float, texts: list[str] | None, slot: float, label_data: float, size: float,
                      pad: float) -> list[tuple[float, float]]:
    """The segments of the merge's dotted max-m line across the left panel, under the bars (their value
    labels all above them, one rule: some inside, some above read as two, issue 27 review 3): broken where
    it would cross a value label (a bar just under the max: "3.62" under "3.66").

    Parameters
    ----------
    m : array of float
        The bars' heights, one a category (the line spans ``-0.5`` to ``len(m) - 0.5``).
    line : float
        The max m, the line's height.
    texts : list of str or None
        The bars' value labels (None: none written, the line unbroken).
    slot, label_data : float
        A bar's slot (px) and a label's height over its bar's end (data units).
    size, pad : float
        The labels' font size and the room left either side of a label (px).

    Returns
    -------
    list of (float, float)
        Each segment's ``(x0, x1)`` in category units, left to right.
    """
    gaps = []
    for i, v in enumerate(m):
        if texts is not None and v < line < max(v, 0.0) + label_data:
            half = (value_label_px(texts[i], size) / 2 + pad) / slot
            gaps.append((i - half, i + half))
    edges = [-0.5, *(e for gap in gaps for e in gap), len(m) - 0.5]
    return [(x0, x1) for x0, x1 in zip(edges[::2], edges[1::2]) if x1 > x0]
