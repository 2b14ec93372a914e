"""The URL field registry: every value the app keeps in the URL, the sidebar's and
each page's own, declared once (:data:`URL_FIELDS`), read and written without
Streamlit through :mod:`explorer.url_fields`.

The sidebar's fields are :data:`explorer.settings.SIDEBAR_FIELDS`. A page may add
its own controls, under URL names prefixed per page (``sw_`` for the Sweep), so
a speaker can prepare a deck of links that open a page with its controls set.
``ui/sidebar.py`` writes the open page's fields beside the sidebar's
(:func:`page_query`) and drops every other page's; a page reads its fields once
per session, when its widgets are first created (:func:`read_page`, through
``ui.page_state.seed_page``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from explorer.limits import (
    MAX_BATCH,
    MAX_HEADS,
    MAX_LENGTH,
    MAX_POINTS,
    MAX_POOL_BLOCKS,
    MAX_RATE,
    MAX_SAMPLES,
    MAX_SEED,
    MAX_SIM_BATCH,
    MAX_STEPS,
)
from explorer.serving.traffic import LENGTH_KINDS
from explorer.settings import BLOCK_SIZES, SIDEBAR_FIELDS
from explorer.sweep.grid import AXES, SPACINGS
from explorer.url_fields import UrlField, last_value, read_fields, write_fields

#: The registry's entry of the sidebar (shown on every page).
SIDEBAR = "sidebar"
_LENGTH = dict(bounds=(1, MAX_LENGTH))

#: Every URL field, by where it belongs: :data:`SIDEBAR`, or a page's URL path.
#: A field whose bounds or choices are None gets them from its page when read
#: (they depend on other settings: the sweep's range on its axis, a sequence
#: index on the batch), or from a figure module a logic module must not import.
URL_FIELDS: dict[str, tuple[UrlField, ...]] = {
    SIDEBAR: SIDEBAR_FIELDS,
    "sweep": (
        UrlField("sw_axis", "sw_axis", "choice", choices=tuple(AXES)),
        UrlField("sw_from", "sw_low"),  # the axis' limits, sweep.grid.AXIS_LIMITS
        UrlField("sw_to", "sw_high"),
        UrlField("sw_points", "sw_points", bounds=(1, MAX_POINTS)),
        UrlField("sw_spacing", "sw_spacing", "choice", choices=SPACINGS),
    ),
    "inside_the_kernel": (
        UrlField("ik_seq", "ik_seq", bounds=(0, MAX_BATCH - 1)),
        UrlField("ik_head", "ik_head", bounds=(0, MAX_HEADS - 1)),
    ),
    "serving_simulation": (
        UrlField("sv_num_blocks", "sv_num_blocks", bounds=(1, MAX_POOL_BLOCKS)),
        UrlField("sv_block_size", "sv_block_size", "choice", choices=BLOCK_SIZES),
        UrlField("sv_max_batch", "sv_max_batch", bounds=(1, MAX_SIM_BATCH)),
        UrlField("sv_rate", "sv_rate", "float", bounds=(0.0, MAX_RATE)),
        UrlField("sv_seed", "sv_seed", bounds=(0, MAX_SEED)),
        UrlField("sv_steps", "sv_steps", bounds=(1, MAX_STEPS)),
        UrlField("sv_prompt_kind", "sv_prompt_kind", "choice", choices=tuple(LENGTH_KINDS)),
        UrlField("sv_prompt_lo", "sv_prompt_lo", **_LENGTH),
        UrlField("sv_prompt_hi", "sv_prompt_hi", **_LENGTH),
        UrlField("sv_output_kind", "sv_output_kind", "choice", choices=tuple(LENGTH_KINDS)),
        UrlField("sv_output_lo", "sv_output_lo", **_LENGTH),
        UrlField("sv_output_hi", "sv_output_hi", **_LENGTH),
        UrlField("sv_system_prompt", "sv_system_prompt", bounds=(0, MAX_LENGTH)),
        UrlField("sv_samples", "sv_samples", bounds=(1, MAX_SAMPLES)),
        UrlField("sv_pool_colour", "sv_pool_colour", "choice"),  # serving.figures.POOL_COLOR_MODES
        UrlField("sv_free_window", "sv_free_window", "flag", on_by_default=True),
    ),
}


def page_fields(page: str | None) -> tuple[UrlField, ...]:
    """The URL fields of the page at URL path ``page`` (none for a page without
    its own, or for None; the sidebar's are :data:`SIDEBAR`'s)."""
    return () if page in (None, SIDEBAR) else URL_FIELDS.get(page, ())


def read_page(
    page: str,
    params: Mapping[str, str | Sequence[str]],
    defaults: Mapping[str, Any],
    *,
    keys: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    choices: Mapping[str, tuple] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The values of ``page``'s fields (those with a key in ``keys``, by default
    all) that ``params`` holds, by widget key, and a note per ignored one
    (:func:`explorer.url_fields.read_fields`, whose ``bounds`` and ``choices``
    give the limits a field leaves to its page)."""
    fields = [f for f in page_fields(page) if keys is None or f.key in keys]
    return read_fields(fields, params, defaults, bounds=bounds, choices=choices)


def page_query(page: str | None, values: Mapping[str, Any]) -> dict[str, str]:
    """URL query parameters of ``page``'s controls, from their widget values
    (``values``: session state); a control without a value is left out."""
    return write_fields(page_fields(page), values)


def page_params(page: str | None, params: Mapping[str, str | Sequence[str]]) -> dict[str, str]:
    """The entries of ``params`` that are ``page``'s URL fields."""
    names = {f.url for f in page_fields(page)}
    return {k: last_value(v) for k, v in params.items() if k in names}
