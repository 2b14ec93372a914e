"""The naive implementation's time budget in a sweep.

The naive decode loops over blocks in Python, so at long contexts one call takes
seconds and a sweep would hang on it. :func:`naive_plan` predicts a point's time
from the last measured one (or asks for one probing call, :func:`after_probe`
judging it) and skips the point when the prediction is over the budget; a point
whose float32 temporaries would not fit in free memory is skipped too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from explorer.formatting import count, format_bytes, format_duration, format_number
from paged_attention.config import DecodeConfig

#: A lower bound on the naive loop's Python cost per block visited (two cache
#: indexings and a table read); used to refuse even a probing call.
NAIVE_MIN_SECONDS_PER_BLOCK = 2e-6
#: Element operations that cost about as much as one block of the Python loop.
NAIVE_ELEMENTS_PER_BLOCK = 4096


def naive_cost(config: DecodeConfig) -> float:
    """Relative cost of one naive call: blocks visited in Python, plus the padded
    float32 gather and products (``batch x longest context x (kv + query heads) x head_dim``)."""
    elements = config.batch_size * max(config.lengths, default=0) * (config.num_kv_heads + config.num_heads)
    return config.num_blocks_used + elements * config.head_dim / NAIVE_ELEMENTS_PER_BLOCK + 1


def naive_temp_bytes(config: DecodeConfig) -> int:
    """Bytes of float32 temporaries one naive call allocates: K and V padded to the
    longest context, once per KV head and again per query head."""
    longest = max(config.lengths, default=0)
    return 2 * 4 * config.batch_size * longest * config.head_dim * (config.num_kv_heads + config.num_heads)


@dataclass(frozen=True)
class NaiveDecision:
    """What to do with the naive implementation at one point.

    ``action`` is ``"run"``, ``"probe"`` (time one call first, then call
    :func:`after_probe`) or ``"skip"``; ``predicted_ms`` is the predicted time of
    one call (None when unknown); ``reason`` says why, for the table.
    """

    action: str
    predicted_ms: float | None = None
    reason: str = ""


def _skip_reason(predicted_ms: float, calls: int, budget_s: float) -> str:
    return (
        f"skipped: {count(calls, 'call')} x ~{format_duration(predicted_ms)} predicted = "
        f"{format_duration(calls * predicted_ms)}, "
        f"over the {format_number(budget_s)} s budget"
    )


def naive_plan(
    config: DecodeConfig,
    *,
    budget_s: float,
    calls: int,
    last: tuple[float, float] | None = None,
    free_bytes: int | None = None,
) -> NaiveDecision:
    """Decide whether to time the naive implementation at ``config``.

    Parameters
    ----------
    config : DecodeConfig
        The point.
    budget_s : float
        Seconds the naive implementation may take at one point (all its calls).
    calls : int
        Calls a measurement makes (warm-up + timed + the accuracy check).
    last : (float, float), optional
        ``(naive_cost, median ms)`` of the last point where naive was timed; the
        prediction scales that time by the ratio of :func:`naive_cost`.
    free_bytes : int, optional
        Free device memory; the point is skipped when the naive temporaries
        (:func:`naive_temp_bytes`) would not fit.

    Returns
    -------
    NaiveDecision
        ``"skip"`` when even one call would exceed the budget, the temporaries do
        not fit, or the predicted time is over budget; ``"run"`` when the
        prediction fits; ``"probe"`` when nothing was timed before.
    """
    need = naive_temp_bytes(config)
    if free_bytes is not None and need > free_bytes:
        return NaiveDecision(
            "skip", None, f"skipped: its float32 temporaries need {format_bytes(need)}, "
            f"{format_bytes(free_bytes)} free"
        )
    floor_ms = config.num_blocks_used * NAIVE_MIN_SECONDS_PER_BLOCK * 1e3
    if floor_ms > budget_s * 1e3:
        return NaiveDecision(
            "skip", floor_ms,
            f"skipped: its Python loop visits {config.num_blocks_used:,} blocks per call, "
            f"over the {format_number(budget_s)} s budget even for one call",
        )
    if last is None:
        return NaiveDecision("probe")
    last_cost, last_ms = last
    predicted = last_ms * naive_cost(config) / max(last_cost, 1e-9)
    if predicted * calls > budget_s * 1e3:
        return NaiveDecision("skip", predicted, _skip_reason(predicted, calls, budget_s))
    return NaiveDecision("run", predicted)


def after_probe(probe_ms: float, *, budget_s: float, calls: int) -> NaiveDecision:
    """Decide after one probing call of ``probe_ms`` milliseconds."""
    if probe_ms * calls > budget_s * 1e3:
        return NaiveDecision("skip", probe_ms, _skip_reason(probe_ms, calls, budget_s))
    return NaiveDecision("run", probe_ms)


def probe_ms(time_one: Callable[[], float], *, budget_s: float) -> float:
    """Milliseconds of one naive call, for :func:`after_probe`: the faster of two
    calls, since a process's first call pays one-time costs (a recorded H200 sweep
    probed 129 ms at 512 tokens, then timed 13.4 ms at 2,048); one only, if it alone
    is over the budget.

    Parameters
    ----------
    time_one : callable
        Times one call and returns its milliseconds.
    budget_s : float
        Seconds the naive implementation may take at one point.

    Returns
    -------
    float
        The probe's milliseconds.
    """
    first = time_one()
    if first > budget_s * 1e3:
        return first
    return min(first, time_one())
