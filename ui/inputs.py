"""Number inputs whose limits the app applies, so the box shows the value in use: a
number box (:func:`bounded_number_input`) and a per-sequence column of whole numbers
(:func:`sequence_editor`: the sidebar's ragged lengths and new tokens), and the
one builder of the app's segmented controls (:func:`choice`).

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
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from explorer.formatting import format_number
from explorer.limits import clamp_value

#: Session-state key of the notes: ``widget key -> (value used, message)``.
NOTES = "clamp_notes"
#: Session-state key of each box's last value, ``widget key -> value``, put back when the box is cleared.
LAST = "clamp_last_values"
#: Session-state key of the whole-number boxes' keys (sent to the browser as float boxes).
WHOLE = "whole_number_boxes"
#: Session-state key of each segmented control's last choice, ``widget key -> value``.
CHOSEN = "choice_last_values"


def choice(parent, label: str, options: Sequence, *, key: str, **kwargs):
    """A single-choice segmented control that always holds one of ``options``: the
    app's only builder of them (tests/test_architecture.py).

    Streamlit's segmented control empties itself when its selected option is
    clicked again, and a page then fell back to the default: one stray click on
    "Ragged" replaced the ragged batch by 128 tokens for all (issue 27). So a value
    that arrives empty (that click) or stale (an old session, options that
    changed) is replaced, before the widget is built, by the control's last
    choice, else by its first option: never by a default the user did not pick;
    the browser then shows the choice again. (Not Streamlit's ``required=True``:
    with it, an edit of a number box on the Sweep page was lost now and then, 3
    runs in 10 of tests/test_browser_sweep.py's copied-URL test; the controls that
    had it before keep it, the Layer picker so that its ``on_change`` never sees an
    empty value.) ``kwargs`` go to ``segmented_control`` (``default`` excepted: the
    session state holds the value). Returns the choice."""
    ss, options = st.session_state, tuple(options)
    last = ss.setdefault(CHOSEN, {})
    if ss.get(key) not in options:
        ss[key] = last[key] if last.get(key) in options else options[0]
    last[key] = parent.segmented_control(label, options, key=key, **kwargs)
    return last[key]


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


def sequence_editor(
    prefix: str,
    title: str,
    column: str,
    bounds: Sequence[tuple[int, int]],
    *,
    shown: Mapping[str, Sequence] | None = None,
    reset: tuple[str, tuple[int, ...]] | None = None,
    short: str | None = None,
) -> tuple[tuple[int, ...] | None, str | None]:
    """One whole number per sequence, edited in a grid in an expander, kept in range
    by the app: the values in use, or None and an error.

    The grid starts from the values in session state ``f"{prefix}_base"`` (the caller
    sets them, one per sequence). A value outside its sequence's ``bounds`` (``(low,
    high)`` per sequence) is clamped, the grid redrawn with the values in use, and a
    warning under it names each value and its limit, as :func:`bounded_number_input`
    does for a box, for as long as the clamped values stay; values already in the base
    that a limit no longer admits (a shorter context) are clamped so too.

    Parameters
    ----------
    prefix : str
        Session keys: ``_base``, ``_editor_<hash>``, ``_notes`` and ``_reset`` after it.
    title : str
        The expander's label, before the count: ``"Per-sequence lengths (3)"``.
    column : str
        The edited column's name; a note says ``"column of sequence 2"``.
    bounds : sequence of (int, int)
        Each sequence's inclusive range.
    shown : mapping, optional
        Read-only columns beside it (name -> one value per sequence).
    reset : (str, tuple of int), optional
        A button's label and the values it puts back.
    short : str, optional
        The edited column's header, when shorter than ``column``.
    """
    ss = st.session_state
    base, notes = _clamped(ss[f"{prefix}_base"], bounds, column)
    if notes:  # a limit the base no longer meets (a shorter context, a URL's value): before the grid is drawn
        ss[f"{prefix}_base"] = base
        ss[f"{prefix}_notes"] = (base, notes)
    editor_key = f"{prefix}_editor_{hash(base) & 0xFFFFFFFF:x}"
    with st.expander(f"{title} ({len(base)})", expanded=False):
        # The edited column before the read-only ones: the sidebar is too narrow for three wide columns.
        frame = pd.DataFrame({"sequence": range(len(base)), column: base, **(shown or {})})
        # Beside read-only columns, short headers and narrow columns, so all fit the sidebar.
        narrow = {"sequence": ("seq", 52), **{name: (name, 60) for name in shown or {}}} if shown else {}
        config = {name: st.column_config.NumberColumn(label, width=px, format="%d")
                  for name, (label, px) in narrow.items()}
        edited = st.data_editor(
            frame, key=editor_key, disabled=["sequence", *(shown or {})], hide_index=True, num_rows="fixed",
            height=min(320, 38 + 35 * len(base)), width="stretch",
            # No min_value / max_value: the grid would clamp (and drop a minus sign) without a word;
            # the values arrive as typed and are clamped below, with a note.
            column_config={**config, column: st.column_config.NumberColumn(
                short or column, step=1, format="%d", width=72 if shown else None)},
        )
        if reset is not None and st.button(reset[0], key=f"{prefix}_reset", width="stretch"):
            ss[f"{prefix}_base"] = reset[1]
            ss.pop(editor_key, None)
            st.rerun()
    try:
        values = tuple(int(v) for v in edited[column].tolist())
    except (TypeError, ValueError):
        return None, f"{column} must be a whole number for every sequence (an edited cell is empty)"
    clamped, notes = _clamped(values, bounds, column)
    if notes:  # start the grid again from the values in use, so it shows them, and say why
        ss[f"{prefix}_base"] = clamped
        ss[f"{prefix}_notes"] = (clamped, notes)
        ss.pop(editor_key, None)
        st.rerun()
    held = ss.get(f"{prefix}_notes")
    if held and held[0] == values:  # the notes stay while the clamped values do
        for note in held[1]:
            st.warning(note, icon=":material/vertical_align_center:")
    else:
        ss.pop(f"{prefix}_notes", None)
    return values, None


def _clamped(values: Sequence[int], bounds: Sequence[tuple[int, int]], column: str) -> tuple[tuple[int, ...], tuple]:
    """``values`` each brought into its bounds, and a note per value changed."""
    checked = [clamp_value(n, *limit, f"{column} of sequence {seq}") for seq, (n, limit) in enumerate(zip(values, bounds))]
    return tuple(int(used) for used, _ in checked), tuple(note for _, note in checked if note)
