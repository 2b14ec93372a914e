"""The one way the pages draw a Plotly figure (:func:`show_chart`), and
presentation mode (:func:`page_style`: the sidebar's toggle, ``present=1`` in the
URL): a page's figures built at the presentation scale, its text enlarged."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import plotly.graph_objects as go
import streamlit as st

from explorer import style
from ui.sidebar import current

#: Presentation mode's root font size (px; Streamlit's is 16): body text is 18 px, and
#: every size Streamlit sets in rem grows with it (headings, widgets, paddings, the
#: tables' text, which Streamlit's grid draws at 0.875 rem).
PAGE_TEXT_PX = 18
#: How much presentation mode enlarges the page's text: a table column's width in
#: pixels grows by as much (:func:`ui.tables.column_px`).
TEXT_SCALE = PAGE_TEXT_PX / 16

# At the body's size: the text Streamlit sets at 0.875 rem (captions; widget, metric
# and expander labels; a metric's note (its delta) and a slider's value and ends, boxes
# and text alike; buttons, progress and navigation text, all markdown paragraphs
# inside widgets; badges, sized inline; the file uploader's words; the values in number and select
# boxes) and inline code (0.75 em). A label too long for its column wraps where Streamlit would cut
# it with an ellipsis. The page's side and top padding shrink: at 1280 px the main
# column grows from 820 to 926 px, 823 at normal text size, so that a table or a
# row of controls that fits in normal mode fits here; and the sweep's progress stays
# in view at 1280x720. Presentation mode's tables are HTML (ui/tables.py: show_table),
# their cells at the body's size too.
_PRESENTATION_CSS = f"""<style>
html {{ font-size: {PAGE_TEXT_PX}px; }}
[data-testid=stMarkdownContainer] p, [data-testid=stCaptionContainer],
[data-testid=stFileUploaderDropzoneInstructions] span, [data-testid=stApp] input {{ font-size: 1rem; }}
.stMarkdownBadge {{ font-size: 1rem !important; }}
[data-testid=stMetricDelta], [data-testid=stSliderThumbValue], [data-testid=stSliderTickBar] {{ font-size: 1rem; }}
[data-testid=stMetricValue] p {{ font-size: inherit; }}
.stMarkdownEllipsis, .stMarkdownEllipsis p {{ white-space: normal; }}
[data-testid=stMarkdownContainer] code, [data-testid=stCaptionContainer] code {{ font-size: 1em; }}
[data-testid=stTable] th, [data-testid=stTable] td {{ font-size: 1rem; }}
[data-testid=stTable] td:not(:first-child) {{ text-align: right; }}
[data-testid=stMainBlockContainer] {{ padding: 2.5rem 1.5rem 6rem; }}
</style>"""
#: Both modes: inline code at no less than 0.75 rem (12 px in normal mode). Streamlit
#: sets it at 0.75 em, 10.5 px in a caption's 14 px (a recorded run's command). A
#: metric card's label and note wrap where Streamlit would cut them with an ellipsis
#: (the Block table's "Tokens" note at 1280 px in normal mode; presentation mode
#: wraps every such text).
_PAGE_CSS = """<style>
[data-testid=stMarkdownContainer] code, [data-testid=stCaptionContainer] code { font-size: max(0.75em, 0.75rem); }
:is([data-testid=stMetricLabel], [data-testid=stMetricDelta]) :is(.stMarkdownEllipsis, .stMarkdownEllipsis p) {
  white-space: normal; }
</style>"""

#: Plotly's modebar buttons the charts leave out: it keeps "Download plot as a PNG",
#: "Reset axes" (a drag still zooms) and Streamlit's fullscreen button.
MODEBAR_REMOVED = ("zoom2d", "pan2d", "zoomIn2d", "zoomOut2d", "autoScale2d")
#: The band (px) over a chart's title that holds the modebar (26 px high, at the top
#: right) in normal mode: over the title, it covered the end of a half-page chart's
#: title at 1280 px. Presentation mode has no modebar, and no band.
MODEBAR_BAND_PX = 28


def presenting() -> bool:
    """Whether this run draws the page in presentation mode (the sidebar's toggle)."""
    return current().settings.present


def text_scale() -> float:
    """How much larger than in normal mode the page's text is drawn now:
    :data:`TEXT_SCALE` in presentation mode, else 1."""
    return TEXT_SCALE if presenting() else 1.0


@contextmanager
def page_style() -> Iterator[float]:
    """Build the figures of the ``with`` block (``app.py``: the page's run) in
    presentation mode when the sidebar's toggle is on
    (:func:`explorer.style.presentation`), and then enlarge the page's text
    (:data:`PAGE_TEXT_PX`); yields the figures' scale."""
    present = presenting()
    # Only a style: Streamlit applies it without an element in the page.
    st.html(_PAGE_CSS + (_PRESENTATION_CSS if present else ""))
    with style.presentation(style.PRESENTATION_SCALE if present else 1) as scale:
        yield scale


@contextmanager
def under_modebar(fig: go.Figure) -> Iterator[go.Figure]:
    """``fig`` with a band of :data:`MODEBAR_BAND_PX` over its plot and title, for
    the ``with`` block: the height and top margin grow by the band, and a title hung
    from the figure's top edge (``yref="container"``, :func:`explorer.style.apply_style`)
    moves down by as much; then ``fig`` is as it was (``plotly_chart`` serialises
    the figure when called: a copy of an animation's frames would cost a second). A
    figure of no set height is left as it is."""
    layout = fig.layout
    height, top, title_y = layout.height, layout.margin.t, layout.title.y
    if height is None:
        yield fig
        return
    band = MODEBAR_BAND_PX
    hung = layout.title.yref == "container" and title_y is not None
    fig.update_layout(height=height + band, margin_t=(100 if top is None else top) + band)  # Plotly's default t: 100
    if hung:
        fig.update_layout(title_y=1 - ((1 - title_y) * height + band) / (height + band))
    try:
        yield fig
    finally:
        fig.update_layout(height=height, margin_t=top, title_y=title_y)


def show_chart(fig: go.Figure, *, key: str, parent=st, **kwargs):
    """``parent.plotly_chart(fig, key=key, theme=None, config=..., **kwargs)``: drawn
    as its layout says, with the short modebar of :data:`MODEBAR_REMOVED` in a band
    of its own (:func:`under_modebar`); presentation mode has none. Streamlit's chart
    theme would set its own (smaller, grey) fonts wherever the figure leaves one to
    its template, such as an axis title set after :func:`explorer.style.apply_style`.

    Parameters
    ----------
    fig : go.Figure
        The figure, built in the page's run (so at its scale, :func:`page_style`).
    key : str
        The chart's widget key.
    parent : module or container
        Where to draw it: ``st`` (default), a column, a container or an ``st.empty``.
    **kwargs
        Passed on to ``plotly_chart`` (``width``, ``on_select``, ...); a ``config``
        is laid over the modebar's.

    Returns
    -------
    What ``plotly_chart`` returns.
    """
    if presenting():
        modebar = {"displayModeBar": False, **kwargs.pop("config", {})}
        return parent.plotly_chart(fig, key=key, theme=None, config=modebar, **kwargs)
    modebar = {"modeBarButtonsToRemove": list(MODEBAR_REMOVED), **kwargs.pop("config", {})}
    with under_modebar(fig):
        return parent.plotly_chart(fig, key=key, theme=None, config=modebar, **kwargs)
