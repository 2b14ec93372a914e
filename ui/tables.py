"""How pages show numbers in metric cards (:func:`show_cards`) and in a table: as the cards and charts beside it write
them (:func:`explorer.formatting.sig3_column`, three significant figures), in
right-aligned text columns (:func:`number_column`): a ``NumberColumn``'s printf
format cannot write three significant figures with thousands separators
(``"%.3g"`` wrote 1234 as "1.23e+03" and clipped 0.000612 to ".000612"); a
column's width in pixels at the page's text size (:func:`column_px`); and the one
way a page shows a table (:func:`show_table`): Streamlit's grid in normal mode, an
HTML table in presentation mode, whose text grows with the page's."""

from __future__ import annotations

import math
import re
from typing import Mapping

import pandas as pd
import streamlit as st

from explorer.cards import Card
from explorer.formatting import sig3_column
from ui.charts import presenting, text_scale

#: The CSS of a right-aligned cell of presentation mode's HTML table (:func:`presented_table`).
RIGHT_ALIGNED = "text-align: right !important"
#: Markdown's marks that ``st.table`` would read in a cell's text (it renders cells as Markdown).
_MARKDOWN_MARKS = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>~$|#"})


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


#: Characters of metric values (Streamlit's 2.25 rem digits) that one row of cards holds
#: across the main column at 1280 px, in either mode: about nine in a fifth of the row
#: ("32,768,000" was cut in the Block table's Tokens card, 151 px wide in normal mode).
VALUE_CHARS_PER_ROW = 45


def value_scale(cards: list[Card], widths) -> float:
    """The share (at most 1) of Streamlit's metric-value font size at which every
    value of ``cards`` fits its card, the cards side by side in columns of relative
    ``widths`` (one a card): ``1.0`` unless a value is longer than its card's share
    of :data:`VALUE_CHARS_PER_ROW`. A number cannot wrap, so a long one is drawn
    smaller rather than cut with an ellipsis."""
    total = sum(widths) or 1
    fits = [VALUE_CHARS_PER_ROW * w / total / max(1, len(card.value)) for card, w in zip(cards, widths)]
    return min([1.0, *fits])


def show_cards(cards: list[Card], columns=None, *, border: bool = False, gap: str = "small", parent=st) -> None:
    """One ``st.metric`` per card of a view model (:class:`explorer.cards.Card`), side
    by side in ``columns``: the columns themselves, or their relative widths (numbers,
    one a card), or by default one each of ``parent``, ``gap`` apart. In the last two
    cases a row whose values are too long for their cards (:func:`value_scale`) draws
    them all smaller, through the CSS of a keyed container."""
    if columns is None or all(isinstance(c, (int, float)) for c in columns):
        widths = list(columns or [1] * len(cards))
        scale = value_scale(cards, widths)
        if scale < 1.0:
            key = "cards_" + "_".join(re.sub(r"\W+", "", card.label)[:12] for card in cards)
            parent = parent.container(key=key)
            parent.html(f"<style>.st-key-{key} :is([data-testid=stMetricValue], [data-testid=stMetricValue] p) "
                        f"{{ font-size: {round(2.25 * scale, 3)}rem; }}</style>")
        columns = parent.columns(widths, gap=gap)
    for col, card in zip(columns, cards):
        col.metric(card.label, card.value, card.delta, help=card.help, delta_color=card.color,
                   delta_arrow=card.arrow, border=border)


def _label(name: str, config) -> str:
    """A column's header: its ``column_config`` entry's label (a string entry is one)."""
    if isinstance(config, str):
        return config
    return (config or {}).get("label") or name


def _cell_text(value, number_format: str | None) -> str:
    """A cell as the grid writes it: a number in its column's printf format (a
    ``NumberColumn``'s), a whole float as an integer, a missing value empty; Markdown's
    marks escaped (``st.table`` renders cells as Markdown)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if number_format:
            return number_format % value
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
    return str(value).translate(_MARKDOWN_MARKS)


def presented_table(frame: pd.DataFrame, column_config: Mapping[str, object], css: pd.DataFrame | None = None):
    """``frame`` as presentation mode's ``st.table`` shows it: every cell as text
    (:func:`_cell_text`), under the headers of ``column_config`` (the grid's, a string
    or a ``st.column_config`` entry per column), in ``frame``'s column order; numbers and
    right-aligned columns right-aligned, their headers too, each cell with its CSS of ``css`` (a frame of
    CSS declarations like ``frame``, or None). Returns a pandas ``Styler``."""
    aligned, texts = [], {}
    for name in frame.columns:
        config = column_config.get(name)
        config = config if isinstance(config, dict) else {}
        number_format = (config.get("type_config") or {}).get("format")
        numeric = pd.api.types.is_numeric_dtype(frame[name]) and not pd.api.types.is_bool_dtype(frame[name])
        aligned.append(config.get("alignment") == "right" or (numeric and config.get("alignment") is None))
        texts[_label(name, column_config.get(name))] = [_cell_text(v, number_format) for v in frame[name]]
    shown = pd.DataFrame(texts)
    # "!important": st.table writes "text-align: left" on each text cell's own style
    # attribute, which outranks the Styler's id selectors (issue 27: presentation
    # mode's numbers were left-aligned beside normal mode's right-aligned ones).
    styles = [[RIGHT_ALIGNED if right else "" for right in aligned]] * len(shown)
    if css is not None:
        styles = [[";".join(filter(None, (a, b))) for a, b in zip(row, extra)]
                  for row, extra in zip(styles, css.to_numpy().tolist())]
    styler = shown.style.apply(lambda _: pd.DataFrame(styles, index=shown.index, columns=shown.columns), axis=None)
    # The headers of those columns above their numbers: st.table keeps a Styler's
    # table styles (``th.col<i>``, its header classes), where a cell style reaches no header.
    return styler.set_table_styles([{"selector": f"th.col{i}", "props": RIGHT_ALIGNED}
                                    for i, right in enumerate(aligned) if right], overwrite=False)


def show_table(frame: pd.DataFrame, column_config: Mapping[str, object], *, key: str,
               css: pd.DataFrame | None = None, height: int | None = None, parent=st) -> None:
    """A table of ``frame`` (index hidden) as wide as the page: in normal mode
    Streamlit's grid (``st.dataframe`` with ``column_config``, ``height`` px or its own),
    in presentation mode an HTML table (``st.table``, :func:`presented_table`: the same
    cells in the same order, whose text the page's style sets at its body size,
    :data:`ui.charts.PAGE_TEXT_PX`): the grid, drawn on a canvas, sets its font at
    0.875 rem whatever a style says, 15.75 px at presentation mode's root font. Each
    column of the HTML table is as wide as its text, which wraps at spaces rather than
    being cut; the headers' tooltips (``help``) are the grid's alone, and the table is
    shown whole (no ``height``).

    Parameters
    ----------
    frame : pd.DataFrame
        The cells, one column per ``column_config`` entry or Streamlit's own header.
    column_config : mapping of str to str or dict
        Per column of ``frame``: its header, or a ``st.column_config`` entry.
    key : str
        The grid's widget key (normal mode).
    css : pd.DataFrame or None
        CSS declarations per cell (``"font-weight: bold"``), indexed as ``frame``.
    height : int or None
        The grid's height in px; None: Streamlit's (up to ten rows, then it scrolls).
    parent : module or container
        Where to draw it (``st`` by default).
    """
    if presenting():
        parent.table(presented_table(frame, column_config, css), hide_index=True)
        return
    data = frame if css is None else frame.style.apply(lambda _: css, axis=None)
    parent.dataframe(data, hide_index=True, width="stretch", key=key, column_config=dict(column_config),
                     **({} if height is None else {"height": height}))
