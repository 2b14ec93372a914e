"""A metric card as the pages show it (``st.metric``), the one type every page's
view model returns: the Decode benchmark's implementation cards, the Serving
simulation's step and window cards, Inside the kernel's trace cards."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """One ``st.metric(label, value, delta, help=help, delta_color=color,
    delta_arrow=arrow)``: ``value`` and ``delta`` already written by
    :mod:`explorer.formatting`. A ``delta`` is a note ("of 8 at most") unless
    ``color`` and ``arrow`` make it a change against a baseline
    (``"normal"``/``"inverse"``, ``"auto"``/``"up"``/``"down"``)."""

    label: str
    value: str
    delta: str | None = None
    help: str | None = None
    color: str = "off"
    arrow: str = "off"
