"""Keep the explorer pages' own controls when the user visits another page.

Streamlit forgets a widget's value once a run does not draw it, so leaving the
Sweep page and coming back would reset its controls. Re-assigning a key at the
start of every run marks its value as set by the app, which Streamlit keeps;
``app.py`` calls :func:`keep_page_widgets` before running the page. Buttons and
file uploaders cannot be assigned and are not listed.
"""

from __future__ import annotations

import streamlit as st

#: Widget keys of the pages' controls that survive a visit to another page.
PERSISTENT_KEYS: tuple[str, ...] = (
    "sw_axis", "sw_spacing", "sw_low", "sw_high", "sw_points", "sw_simple", "sw_budget",
    "sv_num_blocks", "sv_block_size", "sv_max_batch", "sv_rate", "sv_prompt_kind", "sv_prompt_lo", "sv_prompt_hi",
    "sv_output_kind", "sv_output_lo", "sv_output_hi", "sv_seed", "sv_steps", "sv_step", "sv_anim",
    "ik_seq", "ik_head", "ik_override", "ik_splits", "ik_block_n",
    "bench_include_simple", "bt_seq",
)


def keep_page_widgets() -> None:
    """Re-assign every persistent key present, so the values outlive the page."""
    ss = st.session_state
    for key in PERSISTENT_KEYS:
        if key in ss:
            ss[key] = ss[key]
