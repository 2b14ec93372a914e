"""Streamlit helpers shared by the pages: the sidebar, the benchmark runner and its
lock, the sweep runner, cached data, number inputs bounded by the app, and the
widgets kept across pages.

Unlike :mod:`paged_attention`, these modules import Streamlit; keep logic that can
be tested without it in :mod:`paged_attention` (``app_state``, ``sweep``,
``serving_history``, ``kernel_view``, ``figures``).
"""
