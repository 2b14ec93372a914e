"""A dodge along a sweep chart's x axis: each implementation's points a few pixels
beside the others' at one swept value, so that their p20–p80 bars stand apart
(issue 27), on a linear or a log axis alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.formatting import axis_value_texts, compact
from explorer.style import HALF_PLOT_WIDTH_PX, plot_width_px

#: A sweep's x axis is logarithmic once its values span this factor.
LOG_X_SPAN = 4


def axis_values(values: Sequence[float]) -> list[float]:
    """The distinct positive finite ``values``, sorted."""
    return sorted({float(v) for v in values if v is not None and math.isfinite(v) and v > 0})


def log_x(values: Sequence[float]) -> bool:
    """Whether a sweep's x axis over ``values`` (sorted, positive) is logarithmic."""
    return len(values) > 1 and values[-1] / values[0] >= LOG_X_SPAN


#: Pixels, at most, between neighbouring implementations' points at one x of the
#: latency chart (a dodge): their p20–p80 bars, 6 px caps, no longer stand on one another.
DODGE_PX = 7
#: The share of the narrowest step between two swept values that a dodge may span.
DODGE_SHARE = 0.5


def x_dodge(values: Sequence[float], slots: int, plot_width: float = HALF_PLOT_WIDTH_PX):
    """The plotted x of slot ``i`` of ``slots`` (one per implementation and line
    style) on a sweep's x axis over ``values``: ``shift(i, xs)`` moves the slots
    :data:`DODGE_PX` apart (fewer where :data:`DODGE_SHARE` of the narrowest step
    between two values, on a plot ``plot_width`` px wide at scale 1, holds less),
    centred on the true value; by a factor on a log axis, so that the dodge is the
    same on screen at every value (Plotly's ``scattermode="group"`` shifts by a
    difference of values, which vanishes at the right of a log axis). One value
    alone is dodged on an axis of ``[v/2, 3v/2]``: :func:`set_dodge_range`."""
    xs = axis_values(values)
    if slots < 2 or not xs:
        return lambda slot, x: np.asarray(x, float)
    log = log_x(xs)
    pos = np.log10(xs) if log else np.asarray(xs)
    span = pos[-1] - pos[0] if len(xs) > 1 else xs[0]
    unit_px = plot_width_px(plot_width) / span
    narrowest = float(np.diff(pos).min()) if len(xs) > 1 else span
    step = min(DODGE_PX, DODGE_SHARE * narrowest * unit_px / (slots - 1)) / unit_px

    def shift(slot: int, x) -> np.ndarray:
        offset = (slot - (slots - 1) / 2) * step
        x = np.asarray(x, float)
        return x * 10 ** offset if log else x + offset

    return shift


def set_dodge_range(fig: go.Figure, values: Sequence[float], slots: int) -> None:
    """Give the x axis of ``fig`` the range :func:`x_dodge` measured its dodge on
    where it needs one: ``[v/2, 3v/2]`` around a single swept value ``v`` with more
    than one slot (Plotly's own range would fit the dodged points and spread them
    across the plot). Call after the axis is set."""
    xs = axis_values(values)
    if slots > 1 and len(xs) == 1:
        fig.update_xaxes(range=[xs[0] / 2, xs[0] * 1.5])


def hover_texts(axis: Sequence[float]):
    """A function writing axis values for hovers as the x axis's ticks do.

    Parameters
    ----------
    axis : sequence of float
        All values on the sweep's x axis (they decide "2k" or "2,048" for the whole axis).

    Returns
    -------
    callable
        Values -> an object array of texts from :func:`~explorer.formatting.axis_value_texts`.
    """
    values = axis_values(axis)
    texts = dict(zip(values, axis_value_texts(values)))
    return lambda vs: np.array([texts.get(float(v), compact(int(v))) for v in vs], dtype=object)
