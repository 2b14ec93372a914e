"""Streamlit helpers shared by the pages: the sidebar, the benchmark runner and its
lock, the sweep runner, cached data, number inputs bounded by the app, and the
widgets kept across pages.

The top floor under the pages: only these modules (and ``app.py``, ``app_pages/``)
import Streamlit. Keep logic that can be tested without it in :mod:`explorer`
(settings, formatting, limits, sweeps, the serving simulator, the kernel trace,
figures); the import-linter contracts in ``pyproject.toml`` check it.
"""
