"""What every page with controls of its own does with them on its first run in a
session: seed the widgets from the URL over the page's defaults
(:func:`seed_page`), and show the notes on the URL values it ignored until they
are dismissed (:func:`show_url_notes`). The fields are the page's entries of the
URL registry (:data:`explorer.page_urls.URL_FIELDS`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import streamlit as st

from explorer import page_urls
from explorer.url_fields import notes_box
from ui.sidebar import take_page_query

#: Session key of the set of pages seeded in this session.
_SEEDED = "page_state_seeded"


def _prefix(page: str) -> str:
    """The page's prefix (``"sw"``): the one its URL names and widget keys share."""
    names = [f.url for f in page_urls.page_fields(page)]
    return os.path.commonprefix(names).rstrip("_") or page


def seed_page(
    page: str,
    defaults: Mapping[str, Any],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    choices: Mapping[str, tuple] | None = None,
) -> bool:
    """On the page's first run in this session, put ``defaults`` into session
    state where it holds no value yet, and over them the page's values in the
    session's first URL
    (:func:`explorer.page_urls.read_page`, with ``bounds`` and ``choices`` for
    the limits the registry leaves to the page); on every run, show the notes on
    the values it ignored (:func:`show_url_notes`).

    Parameters
    ----------
    page : str
        The page's URL path (``"serving_simulation"``).
    defaults : mapping
        Widget key -> value for each of the page's controls.

    Returns
    -------
    bool
        True on the run that seeded the page.
    """
    ss = st.session_state
    seeded = ss.setdefault(_SEEDED, set())
    if page in seeded:
        show_url_notes(page)
        return False
    found, notes = page_urls.read_page(page, take_page_query(page), defaults, bounds=bounds, choices=choices)
    for key, value in defaults.items():  # a value already set (by a callback, a test) stays
        ss.setdefault(key, value)
    ss.update(found)
    seeded.add(page)
    show_url_notes(page, notes)
    return True


def show_url_notes(page: str, notes: list[str] | tuple[str, ...] | None = None) -> None:
    """Show (and keep, until dismissed) the notes on a page's ignored URL values,
    as the sidebar shows its own; ``notes`` replaces the kept ones."""
    ss = st.session_state
    prefix = _prefix(page)
    held = f"{prefix}_url_notes"
    if notes is not None:
        ss[held] = tuple(notes)
    shown = ss.get(held, ())
    if shown:
        st.warning(notes_box(shown), icon=":material/link_off:")
    if shown and st.button("Dismiss the URL notes", key=f"{prefix}_dismiss_url_notes"):
        ss[held] = ()
        st.rerun()
