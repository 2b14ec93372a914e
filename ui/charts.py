"""The one way the pages draw a Plotly figure (:func:`show_chart`), and the
presentation mode a page's figures are built in (:func:`page_style`: the
sidebar's toggle, ``present=1`` in the URL)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import plotly.graph_objects as go
import streamlit as st

from explorer import style
from ui.sidebar import current


@contextmanager
def page_style() -> Iterator[float]:
    """Build the figures of the ``with`` block (``app.py``: the page's run) in
    presentation mode when the sidebar's toggle is on
    (:func:`explorer.style.presentation`); yields the scale."""
    present = current().settings.present
    with style.presentation(style.PRESENTATION_SCALE if present else 1) as scale:
        yield scale


def show_chart(fig: go.Figure, *, key: str, parent=st, **kwargs):
    """``parent.plotly_chart(fig, key=key, theme=None, **kwargs)``: drawn as its
    layout says. Streamlit's chart theme would set its own (smaller, grey) fonts
    wherever the figure leaves one to its template, such as an axis title set
    after :func:`explorer.style.apply_style`.

    Parameters
    ----------
    fig : go.Figure
        The figure, built in the page's run (so at its scale, :func:`page_style`).
    key : str
        The chart's widget key.
    parent : module or container
        Where to draw it: ``st`` (default), a column, a container or an ``st.empty``.
    **kwargs
        Passed on to ``plotly_chart`` (``width``, ``config``, ...).

    Returns
    -------
    What ``plotly_chart`` returns.
    """
    return parent.plotly_chart(fig, key=key, theme=None, **kwargs)
