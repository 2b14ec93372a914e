"""Text along a categorical x axis that stays upright and apart at every text size:
tick labels (implementation names, split names, block sizes) broken at spaces and
hyphens, staggered on two rows, or thinned, to fit a category's share of the
plot; and a row of values over the plot, one over each category (a speedup, a
bandwidth), broken and staggered likewise but never thinned; and two vertical axes
whose labels stay a line and a half apart (:func:`tick_room_px`): a pool grid's
"first block" axis, block ids written whole and thinned, and a log axis spanning a
decade or two (:func:`log_ticks`: 1, 2, 5 and such, as many as fit)."""

from __future__ import annotations

import itertools
import math
import re
from typing import Sequence

import plotly.graph_objects as go

from explorer.formatting import format_number, line_count, wrap_words
from explorer.style import (DIGIT_WIDTH, HALF_PLOT_WIDTH_PX, LABEL_CHAR_WIDTH, LINE_HEIGHT, font_px, plot_width_px,
                           presentation_scale, scaled)

#: A soft hyphen: where a long word of a value row may break ("indistin-" over
#: "guishable") when it is wider than the room of its category; dropped where it does not.
SOFT_HYPHEN = "\u00ad"
#: Pixels at scale 1 between a value row and the plot area.
ROW_GAP_PX = 4
#: Room kept between neighbouring labels of a value row, as a share of their size.
LABEL_GAP = 0.5
#: Characters of a value row narrower than a digit, and their width as a share of
#: the font size (Arial's i, l, t, f, r and punctuation are 0.22 to 0.33 of it; a
#: tenth more here, as every width estimate of the charts keeps).
NARROW_CHARS, NARROW_WIDTH = "ijltfr.,:;!'()-", 0.33


def _text_px(word: str, size: float) -> float:
    """Estimated width (px) of ``word`` at ``size`` px: :data:`~explorer.style.DIGIT_WIDTH`
    a character, :data:`NARROW_WIDTH` a narrow one (its tags, ``<b>``, take none)."""
    return sum(NARROW_WIDTH if c in NARROW_CHARS else DIGIT_WIDTH for c in re.sub(r"<[^>]*>", "", word)) * size


def set_category_ticks(fig: go.Figure, labels: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX,
                       **where) -> None:
    """Tick labels of a categorical x axis that fit a category's share of a plot
    ``plot_width`` px wide at scale 1 (:func:`plot_width_px`; by default a half-page
    chart's, :data:`HALF_PLOT_WIDTH_PX`) at the tick size of now, always upright
    (``tickangle=0``): broken into lines at their spaces; where a word alone is
    wider than its share (five implementation names at presentation size), on two
    staggered rows, every other label a row lower, so that each has two shares;
    where even that is too narrow, only every k-th label is written (the hover
    names every category). The bottom margin grows to hold them. ``where``
    (``row``, ``col``) picks the axis of a subplot; default all.

    Returns nothing; :func:`category_tick_layout` gives the choice it makes."""
    labels = list(dict.fromkeys(labels))
    text = category_tick_layout([str(label) for label in labels], plot_width)[0]
    # A whole category's width at each end: dots, unlike bars, would otherwise get
    # an axis that ends at the outer dots and cuts their labels in half.
    fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=text, tickangle=0, automargin=True,
                     range=[-0.5, len(labels) - 0.5], **where)


def category_tick_layout(labels: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX) -> tuple[list[str], int, int]:
    """What :func:`set_category_ticks` writes under ``labels``: the tick texts
    (``""`` for a category left unlabelled, ``<br>`` breaks), the rows they take
    turns on (1, or 2 when staggered) and the stride k (every k-th labelled).
    A label's lines are at most ``rows * k`` shares wide (``LABEL_CHAR_WIDTH`` per
    character, a tenth more than Arial's average: neighbours never touch)."""
    # A hyphen is a break too ("(prefix-" over "aware)"): the pieces are measured and wrapped as words.
    labels = [" ".join(str(label).replace("-", "- ").split()) for label in labels]
    n = max(len(labels), 1)
    share = plot_width_px(plot_width) / n
    char_px = LABEL_CHAR_WIDTH * font_px("tick")

    def longest(stride: int) -> int:
        return max((len(word) for label in labels[::stride] for word in label.split()), default=0)

    rows, stride = next(((r, k) for k in range(1, n + 1) for r in (1, 2)
                         if longest(k) * char_px <= share * r * k or k == n))
    width = max(int(share * rows * stride / char_px), 1)
    wrapped = [wrap_words(label, width).replace("- ", "-") if i % stride == 0 else "" for i, label in enumerate(labels)]
    if rows == 2:  # the second row starts under the first row's deepest label
        depth = max((line_count(t) for t in wrapped[::2 * stride]), default=1)
        wrapped = [("<br>" * depth + t) if t and (i // stride) % 2 else t for i, t in enumerate(wrapped)]
    return wrapped, rows, stride


def label_row_layout(texts: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX) -> tuple[list[str], int, int]:
    """What :func:`add_label_row` writes over the categories: the texts broken into
    lines (at spaces, and at a :data:`SOFT_HYPHEN` written as "-"), the rows they take
    turns on (label ``i`` on row ``i % rows``, the first row nearest the plot), and
    the lines of the deepest text. Every text stays whole: the fewest rows whose
    room, ``rows`` categories' shares, holds each text's widest word at the label
    size of now (:func:`_text_px`), breaking at a soft hyphen only a word that no
    room of at most two shares holds. Label ``i`` spans at most ``rows`` shares
    centred on its category, less :data:`LABEL_GAP` of its size, so that it stays
    clear of the next label of its row."""
    n = max(len(texts), 1)
    share = plot_width_px(plot_width) / n
    size = font_px("label")

    def words(text: str, hyphens: bool) -> list[str]:
        return text.replace(SOFT_HYPHEN, "- ").split() if hyphens else text.replace(SOFT_HYPHEN, "").split()

    def room(text: str, rows: int, hyphens: bool) -> bool:
        return all(_text_px(w, size) + LABEL_GAP * size <= share * rows for w in words(text, hyphens))

    hyphens = not any(all(room(t, r, False) for t in texts) for r in (1, 2))
    rows = next((r for r in range(1, n + 1) if all(room(t, r, hyphens) for t in texts)), n)
    wrapped = []
    for text in texts:  # words joined on a line while the line fits the room
        lines: list[str] = []
        for word in words(text, hyphens):
            joined = f"{lines[-1]} {word}" if lines and not lines[-1].endswith("-") else None
            if joined is not None and _text_px(joined, size) + LABEL_GAP * size <= share * rows:
                lines[-1] = joined
            else:
                lines.append(word)
        wrapped.append("<br>".join(lines))
    return wrapped, rows, max((line_count(t) for t in wrapped), default=1)


def label_row_px(texts: Sequence[str], plot_width: float = HALF_PLOT_WIDTH_PX) -> float:
    """Pixels, in px at scale 1 (:func:`~explorer.style.apply_style`'s ``above_plot``,
    which it grows by the scale), that :func:`add_label_row` takes over the plot at
    the scale of now."""
    _, rows, lines = label_row_layout(texts, plot_width)
    return rows * lines * LINE_HEIGHT * font_px("label") / presentation_scale() + ROW_GAP_PX


def add_label_row(fig: go.Figure, categories: Sequence[str], texts: Sequence[str], colors: Sequence[str],
                  plot_width: float = HALF_PLOT_WIDTH_PX, **annotation) -> list[str]:
    """Write ``texts`` over the plot, each over its category (of ``categories``, the x
    axis' values) in its colour, in the layout of :func:`label_row_layout`: a row
    of values that never overlap, whatever the heights of the marks below them.
    Keep :func:`label_row_px` above the plot (``apply_style(above_plot=...)``).

    Returns the texts as written (with their breaks)."""
    wrapped, rows, lines = label_row_layout(texts, plot_width)
    line_px = LINE_HEIGHT * font_px("label")
    gap = scaled(ROW_GAP_PX)
    for i, (x, text, color) in enumerate(zip(categories, wrapped, colors)):
        if not text:
            continue
        fig.add_annotation(x=x, xref="x", y=1, yref="paper", yanchor="bottom", showarrow=False, text=text,
                           yshift=(i % rows) * lines * line_px + gap, font=dict(size=font_px("label"), color=color),
                           **annotation)
    return wrapped


def first_block_ticks(n_rows: int, blocks_per_row: int, plot_height: float, most: int = 10) -> dict:
    """Tick settings of a pool grid's "first block" (y) axis, ``n_rows`` rows of
    ``blocks_per_row`` blocks on ``plot_height`` px (at the current scale): the first
    block id of every k-th row, upright and written whole with thousands separators
    (block ids are labels, not quantities: "524,288", never "524k"), at most ``most``,
    k rows apart so that neighbours stay a line and a half of tick text apart."""
    fit = max(int(plot_height // tick_room_px()), 1)
    step = max(1, math.ceil(n_rows / min(most, fit)))  # rows >= plot_height / fit >= room apart
    rows = list(range(0, max(n_rows, 1), step))
    return dict(tickmode="array", tickvals=rows, ticktext=[format_number(r * blocks_per_row) for r in rows],
                tickangle=0)


def tick_room_px() -> float:
    """Pixels, at the current scale, between neighbouring labels of a vertical axis
    (upright text, one line each): a line and a half of tick text."""
    return (LINE_HEIGHT + 0.5) * font_px("tick")


#: The mantissas of a log axis' ticks in each decade, coarsest first: the ticks of
#: :func:`log_ticks` are the finest of these whose labels stay apart.
LOG_MANTISSAS: tuple[tuple[float, ...], ...] = ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 5, 7))


def log_ticks(lo: float, hi: float, plot_height: float,
              mantissas: Sequence[Sequence[float]] = LOG_MANTISSAS) -> dict:
    """Tick settings of a vertical log axis whose range is ``lo`` to ``hi`` (decades,
    as Plotly's ``range``) on ``plot_height`` px at the current scale: the values of
    the finest :data:`LOG_MANTISSAS` whose neighbours stay :func:`tick_room_px`
    apart (every k-th decade when not even each decade does), written by
    :func:`~explorer.formatting.format_number` ("0.3", "1", "10", "1,000"). Plotly's own
    ticks on a span of one or two decades label every 2, 3, ... 9 there, piled on
    one another where a decade is short (issue 27: 0.5 to 0.9 under 1). ``mantissas``:
    the sets to choose from, coarsest first (default :data:`LOG_MANTISSAS`)."""
    px_per_decade = plot_height / max(hi - lo, 1e-9)
    room = tick_room_px()

    def values(mantissas: Sequence[float], every: int = 1) -> list[float]:
        out = [round(m * 10.0 ** k, max(0, 2 - k)) for k in range(math.floor(lo), math.ceil(hi) + 1)
               if k % every == 0 for m in mantissas]
        return [v for v in out if lo - 1e-9 <= math.log10(v) <= hi + 1e-9]

    def fits(ticks: list[float]) -> bool:
        logs = [math.log10(v) for v in ticks]
        return all((b - a) * px_per_decade >= room for a, b in itertools.pairwise(logs))

    chosen = values((1,), max(1, math.ceil(room / px_per_decade)))
    for each in mantissas:
        ticks = values(each)
        if not fits(ticks):
            break
        chosen = ticks
    return {"tickmode": "array", "tickvals": chosen, "ticktext": [format_number(v) for v in chosen]}
