"""How pages show numbers in metric cards (:func:`show_cards`) and in a table: as the cards and charts beside it write
them (:func:`explorer.formatting.sig3_column`, three significant figures), in
right-aligned text columns (:func:`number_column`): a ``NumberColumn``'s printf
format cannot write three significant figures with thousands separators
(``"%.3g"`` wrote 1234 as "1.23e+03" and clipped 0.000612 to ".000612"); and a
column's width in pixels at the page's text size (:func:`column_px`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.cards import Card
from explorer.formatting import sig3_column
from ui.charts import text_scale


def number_column(label: str, **kwargs) -> st.column_config.TextColumn:
    """A right-aligned column for numbers written by :func:`sig3_columns`
    (``kwargs``: ``help``, ``width``, ... of ``TextColumn``)."""
    return st.column_config.TextColumn(label, alignment="right", **kwargs)


def column_px(width: int | None) -> int | None:
    """A table column's ``width`` (px, chosen for normal mode's text) at the page's
    text size now (:func:`ui.charts.text_scale`): presentation mode's grid draws its
    text larger, which a column as wide as before would cut. None stays None (the
    grid sizes the column to its content)."""
    return None if width is None else round(width * text_scale())


def sig3_columns(table: pd.DataFrame, columns, missing: str = "n/a") -> pd.DataFrame:
    """``table`` with each of ``columns`` that it has as :func:`sig3_column` text
    (``missing`` where a value is missing)."""
    return table.assign(**{c: sig3_column(table[c], missing) for c in columns if c in table})


def show_cards(cards: list[Card], columns=None, *, border: bool = False, gap: str = "small", parent=st) -> None:
    """One ``st.metric`` per card of a view model (:class:`explorer.cards.Card`), side
    by side in ``columns`` (by default one each of ``parent``, ``gap`` apart)."""
    for col, card in zip(columns or parent.columns(len(cards), gap=gap), cards):
        col.metric(card.label, card.value, card.delta, help=card.help, delta_color=card.color,
                   delta_arrow=card.arrow, border=border)
