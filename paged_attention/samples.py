"""Timing samples: their spread, whether their median is pinned down, and the
one rule that tells two timings apart.

A timing is a list of samples in ms (call latencies, GPU times, host times). Its
spread is the p20-p80 range; two timings whose ranges overlap are
indistinguishable (:func:`compare_timings`), whatever their medians say. The
median's own uncertainty narrows as samples are added
(:func:`median_interval`); :func:`median_is_stable` is the test the timing
harness stops on.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

#: A median is stable when its 95% confidence interval's half-width is at most
#: this fraction of it (:func:`median_is_stable`).
STABLE_TOLERANCE = 0.03

FASTER, SLOWER, INDISTINGUISHABLE = "faster", "slower", "indistinguishable"


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median_interval(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``samples``.

    The order statistics of ranks ``floor(n/2 - z*sqrt(n)/2)`` and
    ``ceil(1 + n/2 + z*sqrt(n)/2)`` (1-based, clipped to the samples): about 95%
    coverage for ``z`` 1.96, whatever the distribution. It narrows as samples are
    added, unlike the samples' own spread (p20-p80), which noise sets.

    Raises
    ------
    ValueError
        If ``samples`` is empty.
    """
    if not samples:
        raise ValueError("the median of no samples has no interval")
    ordered = sorted(samples)
    n = len(ordered)
    half = z * math.sqrt(n) / 2
    lo = max(1, math.floor(n / 2 - half))
    hi = min(n, math.ceil(1 + n / 2 + half))
    return ordered[lo - 1], ordered[hi - 1]


def median_is_stable(samples: Sequence[float], tolerance: float = STABLE_TOLERANCE) -> bool:
    """True when the median of ``samples`` is pinned down: its
    :func:`median_interval`'s half-width is at most ``tolerance`` times the median."""
    lo, hi = median_interval(samples)
    return (hi - lo) / 2 <= tolerance * abs(statistics.median(samples))


def compare_timings(a: tuple[float, float], b: tuple[float, float]) -> str:
    """Whether a timing is faster or slower than another, or indistinguishable from it.

    The one rule for saying "faster": each timing is its ``(p20, p80)`` range of
    samples (in one unit, lower is faster); ``a`` is :data:`FASTER` when its p80
    is below ``b``'s p20, :data:`SLOWER` when its p20 is above ``b``'s p80, and
    :data:`INDISTINGUISHABLE` when the ranges overlap.

    Parameters
    ----------
    a, b : (float, float)
        ``(p20, p80)`` of each, e.g. ``(result.p20_ms, result.p80_ms)`` of a
        :class:`~paged_attention.results.BenchResult`.

    Returns
    -------
    str
        ``"faster"``, ``"slower"`` or ``"indistinguishable"`` (``a`` against ``b``).

    Raises
    ------
    ValueError
        If a range's p20 is above its p80.
    """
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    if a_lo > a_hi or b_lo > b_hi:
        raise ValueError(f"a (p20, p80) range must have p20 <= p80; got {a} and {b}")
    if a_hi < b_lo:
        return FASTER
    if b_hi < a_lo:
        return SLOWER
    return INDISTINGUISHABLE
