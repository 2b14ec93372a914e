"""Streamlit parts of the Serving simulation page: its configuration from the
sidebar, its controls seeded from the URL, and Triton timed on a batch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import streamlit as st

from explorer.formatting import count
from explorer.page_urls import read_fields
from explorer.serving import view
from paged_attention import DecodeConfig, build_decode_inputs
from ui import benchmark
from ui.benchmark import BenchmarkOOM, BenchmarkRefused
from ui.sidebar import current, show_config_error, show_page_url_notes, take_page_query


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
    ``defaults`` (notes on the values it ignored); a deselected segmented control
    back to its default."""
    ss = st.session_state
    if "sv_num_blocks" not in ss:
        found, notes = read_fields(view.url_fields(colour_modes), take_page_query("serving_simulation"), defaults)
        ss.update({**defaults, **found})
        show_page_url_notes("sv", notes)
    else:
        show_page_url_notes("sv")
    for key, value in defaults.items():
        ss.setdefault(key, value)
    for key in view.CHOICE_KEYS:
        if ss[key] is None:
            ss[key] = defaults[key]


def _queued() -> None:
    st.info("Queued: another session is running a benchmark on this machine; this run starts when it ends.",
            icon=":material/hourglass_top:")


def _own_queued() -> None:
    st.info("Your previous run is still finishing; this run starts when it ends.", icon=":material/hourglass_top:")


def time_triton(config: DecodeConfig, make_inputs: Callable, warmup: int, iters: int):
    """The Triton kernel timed on ``make_inputs()`` (inputs of ``config``): its
    result (median ms, GB/s, passed), or None with the failure shown on the page.
    (``time_inputs_locked`` is looked up on its module at each call: a test may
    replace it there.)"""
    try:
        (r,) = benchmark.time_inputs_locked(config, make_inputs, ["triton"], warmup=warmup, iters=iters,
                                  on_wait=_queued, on_own_wait=_own_queued)
        return r
    except (BenchmarkRefused, BenchmarkOOM) as exc:
        st.error(str(exc), icon=":material/memory:")
    except ValueError as exc:
        st.error(str(exc), icon=":material/error:")
    except Exception as exc:  # the page must keep working whatever a run does
        st.error(f"The run failed: {type(exc).__name__}: {exc}", icon=":material/error:")
    return None


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


def show_cards(cards: list[view.Card], columns=None, border: bool = False) -> None:
    """Metric cards side by side, in ``columns`` (by default one each); their
    deltas are notes, not changes: no colour, no arrow."""
    for col, card in zip(columns or st.columns(len(cards)), cards):
        col.metric(card.label, card.value, card.delta, help=card.help, delta_color="off", delta_arrow="off",
                   border=border)
