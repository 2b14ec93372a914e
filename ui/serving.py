"""Streamlit parts of the Serving simulation page: its configuration from the
sidebar, its controls seeded from the URL, and Triton timed on a batch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import streamlit as st

from explorer.cache.sharing_figures import sharing_timeline_figure
from explorer.formatting import count
from explorer.serving import view
from explorer.serving.history import (
    ServingHistory, comparison_metrics, max_request_tokens, window_caption, window_cards,
)
from paged_attention import DecodeConfig, build_decode_inputs
from ui import benchmark
from ui.page_state import seed_page
from ui.charts import show_chart
from ui.data import serving_history
from ui.run_guard import QueueNote, guarded
from ui.sidebar import current, show_config_error
from ui.tables import show_cards


def page_config():
    """The sidebar's configuration and settings for this page, or stop the page.

    The page builds its own batch: an error in the sidebar's batch (lengths,
    shared prefix, prefix groups) does not stop it, with a note; the sidebar's
    model, cache, device and timing still must be valid.
    """
    result = current()
    config, settings = result.config, result.settings
    if result.error is not None:
        settings = settings.without_batch()
        try:
            config = settings.config()
        except ValueError as exc:  # an error outside the batch: the page cannot run
            show_config_error(replace(result, error=str(exc)))
            st.stop()
        st.caption(":material/info: The sidebar's batch has an error, which this page ignores: it uses the "
                   "sidebar's heads, dtype and device only. Other pages show the error.")
    return config, settings


def seed_controls(defaults: Mapping[str, Any], colour_modes: tuple[str, ...]) -> None:
    """On the page's first run in this session, its controls from the URL over
    ``defaults`` (:func:`ui.page_state.seed_page`, notes on the values it ignored).
    A segmented control keeps its choice when clicked again (:func:`ui.inputs.choice`)."""
    ss = st.session_state
    seed_page("serving_simulation", defaults, choices={"sv_pool_colour": colour_modes})
    for key, value in defaults.items():
        ss.setdefault(key, value)


def time_triton(config: DecodeConfig, make_inputs: Callable, warmup: int, iters: int):
    """The Triton kernel timed on ``make_inputs()`` (inputs of ``config``): its
    result (median ms, GB/s, passed), or None with the failure shown on the page
    (:func:`ui.run_guard.guarded`). (``time_inputs_locked`` is looked up on its
    module at each call: a test may replace it there.)"""
    with QueueNote("this run starts when it ends") as queue:
        out = guarded(benchmark.time_inputs_locked, config, make_inputs, ["triton"], warmup=warmup, iters=iters,
                      on_wait=queue.on_wait, on_own_wait=queue.on_own_wait)
    return None if out is None else out[0]


def time_block_sizes(timing: view.TradeoffTiming) -> dict[int, float]:
    """Time Triton on the trade-off's batch at each planned block size, with a
    progress bar; stops at the first failure (shown). Returns ``block_size -> ms``."""
    latencies: dict[int, float] = {}
    bar = st.progress(0.0, text="timing")
    for i, (size, plan) in enumerate(timing.plans.items()):
        bar.progress(i / len(timing.plans), text=f"block size {size} ({i + 1}/{len(timing.plans)})")
        config = timing.configs[size]
        r = time_triton(config, lambda: build_decode_inputs(config), plan.warmup, plan.iters)
        if r is None:
            break
        latencies[size] = r.median_ms
    bar.progress(1.0, text=f"timed {count(len(latencies), 'block size')}")
    return latencies


def window_toggle(window: int | None) -> None:
    """The "free blocks outside the window" toggle, drawn only when the sidebar sets a
    window (its value stays in ``sv_free_window``)."""
    if window is not None:
        st.toggle(f"Free blocks outside the window ({count(window, 'token')}, the sidebar's)", key="sv_free_window",
                  persist_state="session", help="every step, return each running sequence's blocks before its "
                  "window's first block to the free list: the decode kernel never reads them again (-1 in the table)")


def window_section(controls: view.Controls, history: ServingHistory, step: int) -> None:
    """With a window: the run with the blocks before each window freed against the
    run that keeps them (cards and two lines); nothing without a window."""
    if controls.window is None:
        return
    other = serving_history(*controls.simulation[:-1], not controls.free_window)
    freed, kept = (history, other) if controls.free_window else (other, history)
    st.subheader("Sliding window: blocks freed against kept")
    show_cards(window_cards(freed, kept))
    show_chart(sharing_timeline_figure(comparison_metrics(freed, kept), step, controls.num_blocks,
                                       kind="freeing", note="the same request stream"),
               key="sv_window_chart", width="stretch")
    st.caption(window_caption(controls.window, controls.free_window, max_request_tokens(history.config)))
