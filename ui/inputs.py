"""Number inputs whose limits the app applies, so the box shows the value in use.

Given ``min_value`` / ``max_value``, Streamlit's ``number_input`` refuses an
out-of-range entry in the browser: the box keeps what was typed (outlined red, the
reason in a hover tooltip) while the script keeps the previous value, so the page
would silently use a number the box does not show. :func:`bounded_number_input`
gives the browser no bounds; its ``on_change`` callback clamps the value into
range before the script runs, so the box and the page agree, and a warning under
the box names the limit for as long as the clamped value stays.

A cleared box keeps its previous value. Streamlit's browser side sends a cleared
box as the widget's default, which for ``number_input`` without ``value`` is
``min_value`` or 0: a number nobody typed (a cleared "Tokens per sequence" would
empty the batch). So the widget is made nullable (``value=None``), a cleared box
arrives as None, and the callback puts back the value the box last held.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from explorer.limits import clamp_value

#: Session-state key of the notes: ``widget key -> (value used, message)``.
NOTES = "clamp_notes"
#: Session-state key of each box's last value, ``widget key -> value``, put back when the box is cleared.
LAST = "clamp_last_values"


def bounded_number_input(
    parent,
    label: str,
    min_value: float,
    max_value: float,
    *,
    key: str,
    on_change: Callable[[], None] | None = None,
    name: str | None = None,
    note_parent=None,
    **kwargs,
):
    """``parent.number_input(label, key=key, **kwargs)`` kept within
    ``[min_value, max_value]`` by the app rather than the browser.

    ``on_change`` runs after the clamp. The note names the input ``name``
    (default ``label``) and goes to ``note_parent`` (default ``parent``; pass
    ``st`` to put it below a row of columns). A ``value`` in ``kwargs`` is the
    starting value (default ``min_value``). Returns the widget's value.
    """
    ss = st.session_state
    start = kwargs.pop("value", min_value)
    if ss.get(key) is None:
        ss[key] = start

    def clamp() -> None:
        notes = ss.setdefault(NOTES, {})
        notes.pop(key, None)
        value = ss.get(key)
        if value is None:  # the box was cleared: keep what it held
            ss[key] = ss.get(LAST, {}).get(key, start)
        else:
            used, note = clamp_value(value, min_value, max_value, name or label)
            if note:
                ss[key] = used
                notes[key] = (used, note)
        if on_change is not None:
            on_change()

    # value=None makes a cleared box arrive as None rather than as a made-up default.
    value = parent.number_input(label, key=key, value=None, on_change=clamp, **kwargs)
    ss.setdefault(LAST, {})[key] = value
    notes = ss.get(NOTES, {})
    if key in notes:
        used, note = notes[key]
        if value == used:
            (note_parent or parent).warning(note, icon=":material/vertical_align_center:")
        else:  # changed since (by the app, or another page's callback)
            del notes[key]
    return value
