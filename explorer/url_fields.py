"""Values in the URL: what one accepts (:class:`UrlField`), the one reader that
turns a URL's text into values or notes (:func:`read_fields`) and the one writer
that turns values back into text (:func:`write_fields`).

The sidebar's fields (:data:`explorer.settings.SIDEBAR_FIELDS`) and every page's
(:data:`explorer.page_urls.URL_FIELDS`, the registry) are read and written here.
A URL may hold anything: a value that does not parse, lies outside its range or
is not among its choices is ignored, and a note names it (shortened to a
readable length) and the value used instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from explorer.formatting import count, format_number, plain, shorten

#: What a field holds: a whole number, any finite number, one of its choices, an
#: on/off flag (``1`` or ``0``), comma-separated whole numbers, or either of the last
#: two (``"int_or_ints"``: ``4`` one value for all, ``1,3,2`` one per sequence; a
#: trailing comma, ``4,``, makes a list of one).
KINDS = ("int", "float", "choice", "flag", "ints", "int_or_ints")


@dataclass(frozen=True)
class UrlField:
    """One value in the URL.

    Parameters
    ----------
    url : str
        Its name in the URL (``batch``, ``sw_from``).
    key : str
        What it is read into: the session-state key of the page's widget, or
        the :class:`~explorer.settings.Settings` field of the sidebar.
    kind : str
        One of :data:`KINDS`.
    bounds : tuple of two numbers, optional
        Inclusive range of an ``"int"``, ``"float"``, ``"ints"`` or ``"int_or_ints"``
        field (each of its numbers). None: given when it is read (limits that depend on other
        settings, such as a sequence index under the batch size).
    choices : tuple, optional
        The values a ``"choice"`` field accepts, compared as text and read as the
        choice itself (``"16"`` reads as the int 16). None: given when read.
    on_by_default : bool
        A ``"flag"`` whose control starts on: it is written ``0`` when off, so
        that a copied URL restores off (left out, it would read as the default, on).
    """

    url: str
    key: str
    kind: str = "int"
    bounds: tuple[float, float] | None = None
    choices: tuple | None = None
    on_by_default: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.on_by_default and self.kind != "flag":
            raise ValueError(f"on_by_default is for a flag; {self.url} is of kind {self.kind!r}")


def last_value(raw: str | Sequence[str]) -> str:
    """A URL parameter's value as text; of a repeated parameter, the last."""
    if isinstance(raw, (list, tuple)):
        return str(raw[-1]) if raw else ""
    return str(raw)


def _whole(text: str, bounds: tuple[float, float]) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("not a whole number") from None
    return _within(value, bounds)


def _within(value: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(f"must be between {format_number(low)} and {format_number(high)}")
    return value


def parse(field: UrlField, raw: str, bounds: tuple[float, float] | None = None, choices: tuple | None = None) -> Any:
    """The value of ``field`` that the URL text ``raw`` holds.

    ``bounds`` and ``choices`` replace the field's own (for limits known only
    when it is read).

    Raises
    ------
    ValueError
        Saying why ``raw`` is not a value of ``field`` (``"must be between 1 and
        4,096"``, ``"not a whole number"``, ``"must be one of ..."``), in the words
        of the URL notes.
    """
    bounds = bounds if bounds is not None else field.bounds
    choices = choices if choices is not None else field.choices
    text = raw.strip()
    if field.kind == "choice":
        by_text = {str(c): c for c in choices}
        if text not in by_text:
            raise ValueError(f"must be one of {', '.join(by_text)}")
        return by_text[text]
    if field.kind == "flag":
        if text not in ("0", "1"):
            raise ValueError("must be 0 or 1")
        return text == "1"
    if field.kind == "ints" or (field.kind == "int_or_ints" and "," in text):
        parts = [p for p in text.split(",") if p.strip()]
        if not parts:
            raise ValueError("expected comma-separated whole numbers")
        return tuple(_whole(p, bounds) for p in parts)
    if field.kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("not a number") from None
        if not math.isfinite(value):
            raise ValueError("not a number")
        return _within(value, bounds)
    return _whole(text, bounds)


def _describe(field: UrlField, value: Any) -> str:
    """How a note names the value used instead of an ignored one."""
    return str(int(bool(value))) if field.kind == "flag" else repr(value)


def read_fields(
    fields: Sequence[UrlField],
    params: Mapping[str, str | Sequence[str]],
    defaults: Mapping[str, Any],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    choices: Mapping[str, tuple] | None = None,
    fallbacks: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The values of ``fields`` that ``params`` (a URL's query) holds, by key, never raising.

    Parameters
    ----------
    fields : sequence of UrlField
    params : mapping
        URL name -> text (or a list of texts: the last counts).
    defaults : mapping
        Key -> the value used when the URL's is ignored, as the note names it.
    bounds, choices : mapping, optional
        Key -> the bounds (choices) of a field, replacing its own.
    fallbacks : mapping, optional
        Key -> how a note names what is used instead, when that is not a value
        (``"the lengths drawn from the spread"``).

    Returns
    -------
    values : dict
        Key -> value, for each field whose URL value is valid; a field absent
        from ``params`` or ignored is left out.
    notes : list of str
        One line per ignored value: ``"`batch=lots` ignored (not a whole number);
        using 4."``, the value quoted as typed (:func:`~explorer.formatting.plain`)
        and cut to a readable length (:func:`~explorer.formatting.shorten`).
    """
    bounds, choices, fallbacks = bounds or {}, choices or {}, fallbacks or {}
    values: dict[str, Any] = {}
    notes: list[str] = []
    for f in fields:
        if f.url not in params:
            continue
        raw = last_value(params[f.url])
        try:
            values[f.key] = parse(f, raw, bounds.get(f.key), choices.get(f.key))
        except ValueError as exc:
            used = fallbacks.get(f.key) or _describe(f, defaults.get(f.key))
            notes.append(f"{plain(f'{f.url}={shorten(raw)}')} ignored ({exc}); using {used}.")
    return values, notes


def write_fields(fields: Sequence[UrlField], values: Mapping[str, Any]) -> dict[str, str]:
    """URL query parameters of ``fields`` from ``values`` (key -> value): a field
    without a value (absent or None) is left out, a flag is written ``1`` when on
    and left out when off (``0`` when off for a flag on by default:
    :attr:`UrlField.on_by_default`), ``"ints"`` comma-separated (an ``"int_or_ints"``
    list too, one value with a trailing comma, so it reads back as a list), a
    whole-number float
    (a number box's value, as the browser sends it) without its ``.0``."""
    out: dict[str, str] = {}
    for f in fields:
        value = values.get(f.key)
        if value is None:
            continue
        if f.kind == "flag":
            if value or f.on_by_default:
                out[f.url] = "1" if value else "0"
            continue
        if f.kind == "ints" or (f.kind == "int_or_ints" and isinstance(value, (tuple, list))):
            out[f.url] = ",".join(str(int(v)) for v in value) + ("," if f.kind == "int_or_ints" and len(value) == 1
                                                                  else "")
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        out[f.url] = str(value)
    return out


def notes_box(notes: Sequence[str]) -> str:
    """The notes of :func:`read_fields` (and the other notes on a URL's ignored
    values) as the text of one box: a line that counts them, then a bullet per
    value. Eleven bad values were eleven boxes, 1,900 px of a sidebar.

    >>> print(notes_box(["`batch=lots` ignored (not a whole number); using 4."]))
    **URL: 1 value ignored**
    - `batch=lots` ignored (not a whole number); using 4.
    """
    return "\n".join([f"**URL: {count(len(notes), 'value')} ignored**", *(f"- {note}" for note in notes)])
