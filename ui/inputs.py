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

A whole-number box is sent to the browser as a float box. Streamlit's browser
reads an integer box's text with ``parseInt``, so ``1e3`` arrives as 1 and ``3.7``
as 3, silently; a float box reads it whole (``parseFloat``), and the callback
rounds a fraction to the nearest whole number with a note, as it does for a
value out of range.
"""

from __future__ import annotations

import math
from typing import Callable

import streamlit as st

from explorer.formatting import format_number
from explorer.limits import clamp_value

#: Session-state key of the notes: ``widget key -> (value used, message)``.
NOTES = "clamp_notes"
#: Session-state key of each box's last value, ``widget key -> value``, put back when the box is cleared.
LAST = "clamp_last_values"
#: Session-state key of the whole-number boxes' keys (sent to the browser as float boxes).
WHOLE = "whole_number_boxes"


def _whole_values_as_ints() -> None:
    """Give every whole-number box's session value back as an int.

    A float box's value comes back from the browser as a float on every rerun
    (``4.0``), and the pages read some boxes' values before drawing them (the
    sidebar's ragged lengths use the seed): each box's first call of a run puts
    them all back as ints. A box already drawn in this run holds an int already
    (and may no longer be set)."""
    ss = st.session_state
    for key in ss.get(WHOLE, ()):
        if isinstance(ss.get(key), float) and math.isfinite(ss[key]):
            try:
                ss[key] = math.floor(ss[key] + 0.5)
            except st.errors.StreamlitAPIException:
                pass


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
    starting value (default ``min_value``). Returns the widget's value (an int
    when ``min_value``, ``max_value`` and ``step`` are ints).
    """
    ss = st.session_state
    start = kwargs.pop("value", min_value)
    whole = all(isinstance(v, int) for v in (min_value, max_value, kwargs.get("step", 1)))
    if whole:  # a float box, so that "1e3" and "3.7" reach the callback as typed (see the module's docstring)
        kwargs["step"] = float(kwargs.get("step", 1))
        kwargs.setdefault("format", "%.0f")
    if whole:
        ss.setdefault(WHOLE, set()).add(key)
        _whole_values_as_ints()
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
            if whole and used != math.floor(used + 0.5):
                used = math.floor(used + 0.5)
                note = (f"**{name or label}**: {format_number(value)} is not a whole number; "
                        f"using {format_number(used)}.")
            if whole:
                used = int(used)
            ss[key] = used
            if note:
                notes[key] = (used, note)
        if on_change is not None:
            on_change()

    # value=None makes a cleared box arrive as None rather than as a made-up default.
    value = parent.number_input(label, key=key, value=None, on_change=clamp, **kwargs)
    if whole and value is not None:
        value = int(value)
    ss.setdefault(LAST, {})[key] = value
    notes = ss.get(NOTES, {})
    if key in notes:
        used, note = notes[key]
        if value == used:
            (note_parent or parent).warning(note, icon=":material/vertical_align_center:")
        else:  # changed since (by the app, or another page's callback)
            del notes[key]
    return value
