"""The grid of a parameter sweep: its axes, values and points, and the CPU caps.

A sweep varies one axis of a :class:`~paged_attention.config.DecodeConfig`
(context length, batch size, block size, KV heads, head dim, sliding window or
new tokens per sequence) over a grid and
times every implementation at each point (:mod:`explorer.sweep.runs`). This
module says which points: :func:`sweep_values` (log- or linearly spaced, powers
of two for block sizes, divisors of ``num_heads`` for KV heads),
:func:`point_config` and the CPU caps of :func:`cap_grid`. The naive
implementation's time budget, which keeps its Python loop over blocks from
hanging a sweep, is in :mod:`explorer.sweep.naive_budget`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.formatting import format_number, join_or
from explorer.limits import (
    CPU_MAX_WORK,
    CPU_WORK_RULE,
    MAX_BATCH,
    MAX_BLOCK_SIZE,
    MAX_CONTEXT,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_POINTS,
    MAX_QUERY_LEN,
    MAX_WINDOW,
    cap_iterations,
    cpu_work,
    cpu_work_detail,
    cpu_work_levers,
)
from paged_attention.config import DecodeConfig

#: The axes a sweep can vary: ``key -> label`` (the key is a DecodeConfig field,
#: except ``context_len``, which sets every sequence's context; ``window`` keeps the
#: sidebar's contexts and sets the sliding window, which reads ``min(window, context)``
#: tokens of each sequence; ``query_lens`` keeps them too and gives every sequence the
#: same number of new (query) tokens, each capped at its context).
AXES: dict[str, str] = {
    "context_len": "context length (tokens)",
    "batch_size": "batch size (sequences)",
    "block_size": "block size (tokens per block)",
    "num_kv_heads": "KV heads",
    "head_dim": "head dim",
    "window": "window (tokens)",
    "query_lens": "new tokens (q_len per sequence)",
}
#: Inclusive bounds of each axis.
AXIS_LIMITS: dict[str, tuple[int, int]] = {
    "context_len": (1, MAX_CONTEXT),
    "batch_size": (1, MAX_BATCH),
    "block_size": (1, MAX_BLOCK_SIZE),
    "num_kv_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "window": (1, MAX_WINDOW),
    "query_lens": (1, MAX_QUERY_LEN),
}
SPACINGS: tuple[str, ...] = ("log", "linear")
#: The fp8 format a comparison of cache dtypes uses when the sidebar's cache is not fp8.
DEFAULT_FP8 = "float8_e4m3fn"
#: On the CPU (Triton interpreted) a sweep keeps at most this many points.
CPU_MAX_POINTS = 6

# -- the grid ------------------------------------------------------------------

def check_axis(axis: str) -> None:
    if axis not in AXES:
        raise ValueError(f"axis must be one of {', '.join(AXES)}; got {axis!r}")


def _spread(candidates: Sequence[int], points: int) -> list[int]:
    """At most ``points`` of the sorted ``candidates``, evenly spaced by index,
    always keeping the first and the last."""
    if len(candidates) <= points:
        return list(candidates)
    picks = np.unique(np.rint(np.linspace(0, len(candidates) - 1, points)).astype(int))
    return [candidates[i] for i in picks]


def sweep_values(
    axis: str, low: int, high: int, points: int, *, spacing: str = "log", num_heads: int | None = None
) -> tuple[int, ...]:
    """The grid of one sweep, ascending and without repeats.

    Parameters
    ----------
    axis : str
        A key of :data:`AXES`.
    low, high : int
        Inclusive range, within :data:`AXIS_LIMITS`.
    points : int
        Most points, ``1 .. MAX_POINTS``. Rounding to integers can leave fewer.
    spacing : str
        ``"log"`` (geometric) or ``"linear"``. Block sizes are always the powers of
        two in the range, KV heads the divisors of ``num_heads`` in it; when there
        are more than ``points`` of them, evenly spaced ones are kept.
    num_heads : int, optional
        Query heads; required for the ``num_kv_heads`` axis.

    Raises
    ------
    ValueError
        On an unknown axis or spacing, a bound outside the axis's limits, ``low >
        high``, a bad ``points``, or a range holding no valid value.

    Examples
    --------
    >>> sweep_values("context_len", 128, 32768, 9)
    (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
    """
    check_axis(axis)
    if spacing not in SPACINGS:
        raise ValueError(f"spacing must be one of {', '.join(SPACINGS)}; got {spacing!r}")
    lo_limit, hi_limit = AXIS_LIMITS[axis]
    for name, v in (("low", low), ("high", high), ("points", points)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ValueError(f"{name} must be an integer; got {v!r}")
    if not lo_limit <= low <= hi_limit or not lo_limit <= high <= hi_limit:
        raise ValueError(f"{AXES[axis]} must lie between {lo_limit:,} and {hi_limit:,}; got {low:,} to {high:,}")
    if low > high:
        raise ValueError(f"the sweep needs low <= high; got low={low:,}, high={high:,}")
    if not 1 <= points <= MAX_POINTS:
        raise ValueError(f"points must be between 1 and {MAX_POINTS}; got {points}")

    if axis == "block_size":
        candidates = [1 << k for k in range(0, 9) if low <= (1 << k) <= high]
        if not candidates:
            raise ValueError(f"no power of two lies between {low} and {high}; block sizes are powers of two here")
        return tuple(_spread(candidates, points))
    if axis == "num_kv_heads":
        if num_heads is None:
            raise ValueError("the num_kv_heads axis needs num_heads")
        candidates = [d for d in range(1, num_heads + 1) if num_heads % d == 0 and low <= d <= high]
        if not candidates:
            raise ValueError(f"no divisor of num_heads={num_heads} lies between {low} and {high}")
        return tuple(_spread(candidates, points))
    if low == high or points == 1:
        return (int(low),)
    grid = np.geomspace(low, high, points) if spacing == "log" else np.linspace(low, high, points)
    return tuple(int(v) for v in np.unique(np.rint(grid).astype(np.int64)))


def default_range(axis: str, config: DecodeConfig, cpu: bool) -> tuple[int, int]:
    """A sensible ``(low, high)`` for ``axis``: wide on a GPU, small on the CPU.

    The window's range is the sidebar's: from 16 tokens (or the longest context,
    when shorter) to twice the longest context, so that the points past the
    context, where a window reads everything, show the time flat. The new
    tokens' range is 1 to :data:`~explorer.limits.MAX_QUERY_LEN` (at most the
    longest context): 1, 2, 4, 8, 16 on a log grid.
    """
    check_axis(axis)
    if axis == "query_lens":
        return 1, max(1, min(MAX_QUERY_LEN, max(config.lengths, default=1)))
    if axis == "window":
        longest = max(max(config.lengths, default=0), 1)
        return min(16, longest), min(2 * longest, MAX_WINDOW)
    if axis == "context_len":
        return (16, 256) if cpu else (128, 32768)
    if axis == "batch_size":
        return (1, 8) if cpu else (1, 256)
    if axis == "block_size":
        return (4, 64) if cpu else (1, 256)
    if axis == "num_kv_heads":
        return (1, config.num_heads)
    return (16, 128) if cpu else (32, 256)


def default_points(axis: str, low: int, high: int, cpu: bool) -> int:
    """Points for a range: one per power of two in it (a doubling per step), capped."""
    doublings = int(math.floor(math.log2(max(high, 1) / max(low, 1)))) + 1 if high >= low >= 1 else 1
    return max(1, min(doublings, CPU_MAX_POINTS if cpu else MAX_POINTS, MAX_POINTS))


def compared_caches(base: DecodeConfig) -> tuple[str | None, str]:
    """The two KV-cache dtypes a sweep comparing caches times at every point: the
    compute dtype's cache (None) and an fp8 one, the sidebar's fp8 format when
    ``base`` has one, else :data:`DEFAULT_FP8` (with ``base``'s scales)."""
    return None, base.kv_dtype or DEFAULT_FP8


def cache_bytes_ratio(kv_dtypes: Sequence[str | None], dtype: str | None = None) -> float:
    """Bytes per element of the second KV-cache dtype over the first's (``None``:
    ``dtype``, the compute dtype), e.g. 0.5 for fp8 against float16, 0.25 against
    float32: the time ratio a memory-bound decode can approach."""
    import torch

    def size(name: str | None) -> int:
        return torch.empty((), dtype=getattr(torch, name or dtype)).element_size()

    return size(kv_dtypes[1]) / size(kv_dtypes[0])


def bytes_fraction(ratio: float) -> str:
    """``ratio`` of bytes in words: ``"half the bytes"``, ``"a quarter of the bytes"``."""
    words = {0.5: "half the bytes", 0.25: "a quarter of the bytes", 1.0: "the same bytes", 2.0: "twice the bytes"}
    return words.get(ratio, f"{format_number(ratio)}× the bytes")


def point_config(base: DecodeConfig, axis: str, value: int) -> DecodeConfig:
    """``base`` with ``axis`` set to ``value``.

    ``context_len`` gives every sequence ``value`` tokens; ``window`` sets the
    sliding window and ``query_lens`` every sequence's new tokens (one value for
    all, capped at each context; ``base``'s contexts stay). ``batch_size`` keeps
    ``base``'s lengths, repeated cyclically for a larger batch (a ragged batch
    stays ragged), and so do new tokens given per sequence (which a context-length
    point caps at its context). When ``base`` set its spare blocks explicitly, they are scaled
    with the blocks the new point uses, so the pool keeps its headroom.

    Raises
    ------
    ValueError
        If the resulting configuration is invalid.
    """
    check_axis(axis)
    value = int(value)
    per_sequence = isinstance(base.query_lens, tuple)  # the sidebar's new tokens, one per sequence
    if axis == "context_len":
        config = base.with_(context_lens=value)
        if per_sequence:  # each sequence keeps its new tokens, at most the new context
            config = config.with_(query_lens=tuple(min(q, max(1, value)) for q in base.query_lens))
    elif axis == "query_lens":
        config = base.with_(query_lens=value)
    elif axis == "batch_size":
        if isinstance(base.context_lens, tuple):
            lens = base.lengths
            config = base.with_(batch_size=value, context_lens=tuple(lens[i % len(lens)] for i in range(value)))
        else:
            config = base.with_(batch_size=value)
        if per_sequence:
            config = config.with_(query_lens=tuple(base.query_lens[i % base.batch_size] for i in range(value)))
    else:
        config = base.with_(**{axis: value})
    if base.spare_blocks is not None and base.num_blocks_used:
        ratio = base.spare_blocks / base.num_blocks_used
        config = config.with_(spare_blocks=max(1, math.ceil(config.num_blocks_used * ratio)))
    return config.validate()


@dataclass(frozen=True)
class GridPlan:
    """The points a sweep will run, after the CPU caps.

    ``values`` may be shorter than asked; ``notes`` say why (for the page).
    ``refusal`` is set (and ``values`` empty) when no point fits the CPU cap.
    """

    values: tuple[int, ...]
    warmup: int
    iters: int
    notes: tuple[str, ...] = ()
    refusal: str | None = None


#: The sweep axis that each of :func:`~explorer.limits.cpu_work_levers` sets.
_LEVER_AXES = {"batch": "batch_size", "KV heads": "num_kv_heads", "context": "context_len",
               "new tokens": "query_lens"}


def _no_point_fits(axis: str, configs: Sequence[DecodeConfig]) -> str:
    smallest = min(configs, key=cpu_work)
    levers = cpu_work_levers(smallest)
    advice = []
    if any(_LEVER_AXES.get(lever) == axis for lever in levers):
        advice.append(f"the {AXES[axis]} range")
    sidebar = [lever for lever in levers if _LEVER_AXES.get(lever) != axis]
    if sidebar:
        advice.append(f"the sidebar's {join_or(sidebar)}")
    return (
        f"No point of this grid fits the CPU cap: on the CPU a point runs only when {CPU_WORK_RULE}, and the "
        f"smallest point here is {cpu_work_detail(smallest)}. Lower {', or '.join(advice)}."
    )


def cap_grid(base: DecodeConfig, axis: str, values: Sequence[int], warmup: int, iters: int) -> GridPlan:
    """Apply the CPU caps of the benchmark page to a sweep.

    On the CPU (Triton interpreted) points whose
    :func:`~explorer.limits.cpu_work` exceeds
    :data:`~explorer.limits.CPU_MAX_WORK` are dropped (with a refusal
    naming the rule when none is left), at most :data:`CPU_MAX_POINTS` are kept, and
    warm-up and timed calls are capped. On a GPU everything runs as asked.

    Raises
    ------
    ValueError
        If a point's configuration is invalid.
    """
    values = tuple(int(v) for v in values)
    configs = [point_config(base, axis, v) for v in values]
    if base.device != "cpu":
        return GridPlan(values, warmup, iters)
    notes = []
    kept = tuple(v for v, c in zip(values, configs) if cpu_work(c) <= CPU_MAX_WORK)
    if values and not kept:
        return GridPlan((), warmup, iters, refusal=_no_point_fits(axis, configs))
    dropped = len(values) - len(kept)
    if dropped:
        notes.append(
            f"{dropped} of {len(values)} points dropped: on the CPU a point runs only when {CPU_WORK_RULE}"
        )
    if len(kept) > CPU_MAX_POINTS:
        notes.append(f"{len(kept)} points thinned to {CPU_MAX_POINTS} on the CPU")
        kept = tuple(_spread(kept, CPU_MAX_POINTS))
    warmup, iters, capped = cap_iterations(base.device, warmup, iters)
    return GridPlan(kept, warmup, iters, tuple(notes) + capped)
