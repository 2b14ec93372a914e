"""Streamlit helpers shared by the pages: the sidebar and the benchmark runner.

Unlike :mod:`paged_attention`, these modules import Streamlit; keep logic that can
be tested without it in :mod:`paged_attention.app_state` and
:mod:`paged_attention.figures`.
"""
