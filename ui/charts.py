"""The one way the pages draw a Plotly figure: :func:`show_chart`, which enlarges it
in presentation mode (the sidebar's toggle, ``present=1`` in the URL)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from explorer.style import for_presentation
from ui.sidebar import current


def show_chart(fig: go.Figure, *, key: str, parent=st, **kwargs):
    """``parent.plotly_chart(fig, key=key, **kwargs)``, the figure enlarged by
    :func:`~explorer.for_presentation` when the sidebar's
    presentation mode is on.

    Parameters
    ----------
    fig : go.Figure
        The figure; it is not modified.
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
    if current().settings.present:
        fig = for_presentation(fig)
    return parent.plotly_chart(fig, key=key, **kwargs)
