"""Page controls in the URL: each page's own URL keys, read and written without Streamlit.

The sidebar's settings are in the URL (:mod:`explorer.settings`). A page may add
its own controls, under keys prefixed per page (``sw_`` for the Sweep), so a
speaker can prepare a deck of links that open a page with its controls set.
:data:`PAGE_URL_KEYS` says which keys belong to which page (by its URL path);
``ui/sidebar.py`` writes the open page's keys beside the sidebar's and drops
every other page's. A page reads its keys once per session, when its widgets are
first created (:func:`read_fields`): a value that does not parse, lies outside
its range or is not among its choices is ignored, and a note says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from explorer.formatting import plain
from explorer.settings import last_value


@dataclass(frozen=True)
class PageField:
    """One page control in the URL: its URL name, its widget key, and what it accepts.

    Exactly one of ``choices`` (the values allowed, compared as strings and
    returned as the choice itself) or ``bounds`` (an inclusive range: of whole
    numbers, or of any finite number when ``decimal``).
    """

    url: str
    key: str
    choices: tuple | None = None
    bounds: tuple[float, float] | None = None
    decimal: bool = False


#: The URL name -> widget key of each page's controls, by the page's URL path.
PAGE_URL_KEYS: dict[str, dict[str, str]] = {
    "sweep": {"sw_axis": "sw_axis", "sw_from": "sw_low", "sw_to": "sw_high", "sw_points": "sw_points",
              "sw_spacing": "sw_spacing"},
    "inside_the_kernel": {"ik_seq": "ik_seq", "ik_head": "ik_head"},
    "serving_simulation": {key: key for key in (
        "sv_num_blocks", "sv_block_size", "sv_max_batch", "sv_rate", "sv_seed", "sv_steps", "sv_prompt_kind",
        "sv_prompt_lo", "sv_prompt_hi", "sv_output_kind", "sv_output_lo", "sv_output_hi", "sv_system_prompt",
        "sv_samples", "sv_pool_colour")},
}


def read_fields(
    fields: Sequence[PageField], params: Mapping[str, str | Sequence[str]], defaults: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The values of ``fields`` found in ``params``, by widget key, never raising.

    A field absent from ``params`` is left out. A value that does not parse, lies
    outside ``bounds`` or is not among ``choices`` is left out too, and a note (in
    the words of the sidebar's URL notes) names it and the value used instead,
    ``defaults[field.key]``.
    """
    values: dict[str, Any] = {}
    notes: list[str] = []
    for f in fields:
        if f.url not in params:
            continue
        raw = last_value(params[f.url])
        try:
            if f.choices is not None:
                by_text = {str(c): c for c in f.choices}
                if raw.strip() not in by_text:
                    raise ValueError(f"must be one of {', '.join(by_text)}")
                values[f.key] = by_text[raw.strip()]
            else:
                low, high = f.bounds
                try:
                    value = float(raw.strip()) if f.decimal else int(raw.strip())
                except ValueError:
                    raise ValueError("not a number" if f.decimal else "not a whole number") from None
                if value != value or value in (float("inf"), float("-inf")):
                    raise ValueError("not a number")
                if not low <= value <= high:
                    raise ValueError(f"must be between {low:,} and {high:,}")
                values[f.key] = value
        except ValueError as exc:
            used = defaults.get(f.key)
            notes.append(f"{plain(f'{f.url}={raw}')} ignored ({exc}); using {used!r}.")
    return values, notes


def page_query(page: str | None, values: Mapping[str, Any]) -> dict[str, str]:
    """URL query parameters of ``page``'s controls, from their widget values
    (``values``: session state); a control without a value is left out."""
    out: dict[str, str] = {}
    for url, key in PAGE_URL_KEYS.get(page or "", {}).items():
        value = values.get(key) if key in values else None
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():  # a whole-number box's value, as the browser sends it
            value = int(value)
        out[url] = str(value)
    return out


def page_params(page: str | None, params: Mapping[str, str | Sequence[str]]) -> dict[str, str]:
    """The entries of ``params`` that are ``page``'s URL keys."""
    keys = PAGE_URL_KEYS.get(page or "", {})
    return {k: last_value(v) for k, v in params.items() if k in keys}
