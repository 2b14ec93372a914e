"""The naive implementation's time budget in a sweep.

The naive decode loops over blocks in Python, so at long contexts one call takes
seconds and a sweep would hang on it. :func:`naive_plan` predicts a point's time
from the last measured one (or asks for one probing call, :func:`after_probe`
judging it) and skips the point when the prediction is over the budget; a point
whose float32 temporaries would not fit in free memory is skipped too.
"""

from __future__ import annotations

import math
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


def _row_cost(row) -> float | None:
    """:func:`naive_cost` of a sweep row's point (every sequence at its ``context_len``), or None."""
    try:
        config = DecodeConfig(batch_size=int(row["batch_size"]), context_lens=int(row["context_len"]),
                              num_heads=int(row["num_heads"]), num_kv_heads=int(row["num_kv_heads"]),
                              head_dim=int(row["head_dim"]), block_size=int(row["block_size"]), device="cpu")
    except (KeyError, TypeError, ValueError):
        return None
    return naive_cost(config)


def checked_predictions(frame):
    """``frame`` (rows of :data:`~explorer.sweep.runs.SWEEP_COLUMNS`) with each skipped
    naive point's ``predicted_ms`` that contradicts a measured naive point of its source
    (a cheaper point, by :func:`naive_cost`, predicted slower than a measured dearer one,
    or the other way round) re-derived from the nearest measured point by the cost ratio,
    as :func:`naive_plan` predicts; its ``note`` says so. Such a prediction came from one
    cold probing call (before :func:`probe_ms`): the recorded H200 context sweep's "~129 ms"
    at 512 tokens beside 13.4 ms measured at 2,048.

    Returns
    -------
    (DataFrame, int)
        A copy of ``frame`` (``frame`` itself when nothing changes) and how many
        predictions were re-derived.
    """
    if frame is None or not len(frame) or "predicted_ms" not in frame:
        return frame, 0
    out, changed = None, 0
    naive = frame[frame["implementation"].astype(str) == "naive"]
    for _, rows in naive.groupby(naive["source"].astype(str), sort=False):
        measured = [(c, float(r["median_ms"]), r["value"]) for _, r in rows[rows["status"] == "ok"].iterrows()
                    if (c := _row_cost(r)) and math.isfinite(float(r["median_ms"]))]
        if not measured:
            continue
        for index, row in rows[rows["status"] == "skipped"].iterrows():
            predicted, cost = float(row["predicted_ms"]), _row_cost(row)
            if not cost or not math.isfinite(predicted):
                continue
            if not any((cost <= c and predicted > ms) or (cost >= c and predicted < ms) for c, ms, _ in measured):
                continue
            c, ms, value = min(measured, key=lambda m: abs(math.log(m[0] / cost)))
            derived = ms * cost / c
            out = frame.copy() if out is None else out
            out.loc[index, "predicted_ms"] = derived
            out.loc[index, "note"] = (f"{row['note']}; drawn at ~{format_duration(derived)}, re-derived from "
                                      f"the measured {format_number(value)} point, which the recorded prediction "
                                      "contradicts")
            changed += 1
    return (frame if out is None else out), changed
