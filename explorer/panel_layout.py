"""Figures of panels stacked over one x axis (``make_subplots`` rows sharing it):
a figure tall enough that every panel keeps :data:`MIN_PANEL_PX` at scale 1
(:func:`stacked_panels`), and the pixels each panel takes (:func:`panel_heights`).

A figure's height is set when it is built, its width is the page's: the serving
timeline's panels, 120 px tall, read as strips 740 px wide at 1280 px and 1380 px
at 1920 (issue 27). The plot area grows with presentation mode's scale as every
figure's does (:func:`~explorer.style.apply_style`), and so do the panels and the
gaps between them, which are a share of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

from explorer.style import DIGIT_WIDTH, HALF_FIGURE_PX, font_px, scaled, title_margins

#: The least height (px at scale 1) of a panel of stacked panels: about a third of
#: the widest such panel at 1280 px, a fifth of a half-page one at 1920.
MIN_PANEL_PX = 180
#: Pixels at scale 1 between two stacked panels: the lower one's subplot title (a
#: line of body text) and a gap above it.
PANEL_GAP_PX = 40
#: Pixels at scale 1 between the y axis and the left edge of the first x tick label: the y
#: axis's lowest label ends at the axis, and "0" under "0" at the corner read as one label.
ORIGIN_GAP_PX = 4


@dataclass(frozen=True)
class StackedPanels:
    """``height``: the figure's height at scale 1 to give
    :func:`~explorer.style.apply_style`; ``spacing``: ``make_subplots``'
    ``vertical_spacing`` (the gaps' share of the plot area); ``panel_px``: each
    panel's height at scale 1."""

    height: int
    spacing: float
    panel_px: float


def stacked_panels(n_panels: int, subtitle: str | None, *, panel_px: float = MIN_PANEL_PX,
                   gap_px: float = PANEL_GAP_PX, above_plot: float = 0,
                   width_px: float = HALF_FIGURE_PX) -> StackedPanels:
    """The height and spacing of a figure of ``n_panels`` stacked panels, each
    ``panel_px`` tall at scale 1 (never less than :data:`MIN_PANEL_PX`), ``gap_px``
    apart, under a one-line title and ``subtitle`` broken for a figure ``width_px``
    wide, with ``above_plot`` px over the plot (as :func:`~explorer.style.apply_style`
    takes them)."""
    n = max(int(n_panels), 1)
    panel = max(float(panel_px), MIN_PANEL_PX)
    plot = n * panel + (n - 1) * gap_px
    top, bottom = title_margins(subtitle, width_px)
    return StackedPanels(math.ceil(plot + top + bottom + above_plot) + 1, gap_px / plot if n > 1 else 0.0, panel)


def panel_heights(fig: go.Figure) -> list[float]:
    """Pixels of each y axis' panel of ``fig`` (a styled figure: its ``height`` and
    ``margin`` set), top panel first, as Plotly draws them when nothing grows a margin."""
    layout = fig.layout
    plot = layout.height - layout.margin.t - layout.margin.b
    domains = [axis.domain or (0, 1) for axis in fig.select_yaxes()]
    return [(hi - lo) * plot for lo, hi in sorted(domains, key=lambda d: -d[1])]


def origin_clear_range(lo: float, hi: float, first_tick: float, first_label: str, plot_px: float) -> list[float]:
    """An x axis range for data from ``lo`` to ``hi``, padded on the left so that the label
    ``first_label`` of its first tick (at ``first_tick``) starts :data:`ORIGIN_GAP_PX` (grown
    with the scale) right of the y axis, clear of the y axis's lowest label (issue 27: the two
    axes' "0" collided at the origin).

    Parameters
    ----------
    lo, hi : float
        The data's extent along x.
    first_tick : float
        The first tick's value (at least ``lo``).
    first_label : str
        Its label, drawn centred on it at :func:`~explorer.style.font_px` ``("tick")``.
    plot_px : float
        The plot area's width in px at the current scale.

    Returns
    -------
    list of float
        ``[start, end]``: ``start`` at most ``lo``, ``end`` ``hi`` (``lo + 1`` for a single point).
    """
    hi = max(float(hi), float(lo) + 1)
    clear = len(first_label) * DIGIT_WIDTH * font_px("tick") / 2 + scaled(ORIGIN_GAP_PX)
    k = min(clear / max(float(plot_px), 1.0), 0.5)  # the share of the plot the tick keeps from its left edge
    return [min(float(lo), (first_tick - k * hi) / (1 - k)), hi]
