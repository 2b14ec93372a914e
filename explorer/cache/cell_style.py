"""What the cache's grids share: the words that name what a colour means, a legend
square for each category (heatmaps have no legend of their own), the owners'
categorical colour scale, and in-cell text: its size and when cells can hold it.
"""

from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go

from explorer.cache.picking import GRID_PAD
from explorer.formatting import line_count, wrap_words
from explorer.limits import MAX_TEXT_CELLS
from explorer.marks import NEW_TOKEN_MARK, TEXT_CHAR_WIDTH
from explorer.style import (
    FREE_COLOR,
    HALF_FIGURE_PX,
    OTHER_COLOR,
    SEQUENCE_COLORS,
    font_px,
    line_chars,
    plot_width_px,
    scaled,
)

#: What a colour means, as every legend, colour bar and subtitle of the cache views
#: says it (the palettes: :mod:`explorer.style`).
BLOCK_KEY = "colour = physical block id"
SEQUENCE_KEY = "colour = sequence"
REF_COUNT_KEY = "colour = sequences holding the block"
#: The pool's own key for its reference counts: its cells are physical blocks, while the
#: block table beside it writes physical block ids in its cells (issue 27).
POOL_REF_COUNT_KEY = "colour = sequences holding the physical block"
#: What the token walk writes in its cells (the block table writes physical block ids).
WALK_CELL_KEY = "cell numbers: token position"
#: Table cells before a sliding window's first block: held, not read. They keep their
#: own colour (a block id's blue, or the sequence's) under white hatching
#: (:data:`OUTSIDE_WINDOW_HATCH`) around their id (:func:`hatch_frame`), a bold line where the
#: window starts, named so in the legend and the hover. Filled grey, they read as the
#: pool's free blocks (issue 27: block 13 grey in the table, held in the pool).
OUTSIDE_WINDOW = "outside the window: held, not read"
OUTSIDE_WINDOW_HATCH = "/"
OUTSIDE_WINDOW_HATCH_COLOR = "#FFFFFF"
OUTSIDE_WINDOW_EDGE = "#475569"
#: The "–" of an unallocated table entry on :data:`~explorer.style.UNALLOCATED_COLOR`: slate at
#: 7:1 WCAG contrast (issue 27: #94A3B8 came 2.3:1, too faint to read from the back row).
UNALLOCATED_INK = "#475569"
#: Ink for ids on light and on dark cells, each cell the one of more WCAG contrast
#: (:func:`ink_on`). Black, not the page's #111827: with it a cell of relative luminance
#: near 0.2 (a mid-blue block id, a lime sequence) had neither ink at 4.5:1 (review 3: grey
#: #444 on mid-blue, white on lime, Plotly's own choice); with black every colour has one
#: at 4.58:1 or more.
DARK_INK, LIGHT_INK = "#000000", "#FFFFFF"
#: The least WCAG contrast of an id written in a cell against the cell's colour.
MIN_INK_CONTRAST = 4.5
#: This step's new tokens (draft tokens verified in one step): the last ``q`` positions of
#: each sequence, already in the cache, each a query row. A yellow star outlined dark
#: (:data:`~explorer.marks.NEW_TOKEN_MARK`, a shape no other meaning uses) marks the
#: table cells and the walk's slots that hold them, named so in the legend and the hover.
NEW_TOKENS = NEW_TOKEN_MARK.name
NEW_TOKEN_COLOR = NEW_TOKEN_MARK.fill
NEW_TOKEN_LINE = NEW_TOKEN_MARK.line
#: Characters per line of a colour bar's title (about the bar and its tick labels'
#: width). A colour key's words are at the size of the bar's tick labels
#: (:func:`~explorer.style.font_px` ``"tick"``), the numbers written in cells at
#: ``"cell"`` size: cells too small for it get no text rather than smaller text.
COLORBAR_TITLE_LINE = 9
#: An empty last line of a colour bar's title: Plotly sets the bar 5 px under its
#: title, and a tick at the bar's top end reaches half a label above it, so the top
#: label ran into the title (issue 27: "6" touching "block id"). Plotly drops a
#: trailing blank line; a space in a tiny span it keeps, a line high.
COLORBAR_TITLE_GAP = '<br><span style="font-size:1px"> </span>'
#: A digit's width and a line's height, in units of the font size (Arial, Helvetica
#: and Segoe UI digits are 0.55 of it), and the pixels a cell keeps clear each side
#: of its text.
DIGIT_WIDTH, LINE_HEIGHT, CELL_PAD_PX = 0.56, 1.25, 1
#: Plot-area widths (px) of the Block table page's charts on a 1280 px screen, less
#: their margins and colour bars, at scale 1 (:func:`~explorer.style.plot_width_px`):
#: one in the wider column (three fifths of the page: the block table, the token
#: walk) and one in the narrower (the pool). In-cell text is written only where it fits these.
WIDE_PLOT_PX = 280
NARROW_PLOT_PX = 220
#: The pool's plot area at 1280 px beside its colour bar (an aggregated pool, many
#: holders), at scale 1: Chromium drew it 146 px wide (137 px in presentation mode).
#: Its x ticks are spaced for this width, not the page's wider plots'.
NARROW_BAR_PLOT_PX = 140
#: The block table's plot area at 1280 px without its colour bar, at scale 1: its
#: figure (Chromium drew it 476 px wide, the sidebar open) less its margins. Where
#: presentation mode's ids fit the cells only without the bar, the bar gives way:
#: each cell's number then says its block, the bar's whole job.
TABLE_BARE_PLOT_PX = 390


def colorbar_title_lines(key: str, width: int = COLORBAR_TITLE_LINE) -> list[str]:
    """The lines of :func:`colorbar_title`'s words: ``key`` broken at its spaces into
    lines of at most ``width`` characters (a longer word stays whole)."""
    lines: list[str] = []
    for word in key.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def colorbar_title(key: str, width: int = COLORBAR_TITLE_LINE) -> dict:
    """A colour bar's title saying ``key`` (e.g. :data:`BLOCK_KEY`) in the lines of
    :func:`colorbar_title_lines`, at the size of the bar's tick labels (Plotly's
    larger default ran into the top one), a line clear of the top one
    (:data:`COLORBAR_TITLE_GAP`)."""
    return dict(text="<br>".join(colorbar_title_lines(key, width)) + COLORBAR_TITLE_GAP,
                font=dict(size=font_px("tick")))


def legend_key_text(key: str, width_px: float = HALF_FIGURE_PX) -> str:
    """``key`` broken at its spaces into lines of a legend's title that fit a figure
    ``width_px`` wide at the size of now (:func:`~explorer.style.line_chars` of
    ``"tick"`` text): on one line, presentation mode's "colour = sequences holding the
    physical block" ran past the edge of a figure in two fifths of the page (issue 27)."""
    return wrap_words(key, line_chars("tick", width_px))


def legend_key(fig: go.Figure, key: str, width_px: float = HALF_FIGURE_PX) -> int:
    """Title ``fig``'s legend with ``key``, on its own lines above the entries, broken
    for a figure ``width_px`` wide (:func:`legend_key_text`; :data:`~explorer.style.NARROW_FIGURE_PX`
    in two fifths of the page). Returns the title's lines."""
    text = legend_key_text(key, width_px)
    fig.update_layout(legend=dict(title=dict(text=text, side="top", font=dict(size=font_px("tick")))))
    return line_count(text)


def cell_text_fits(n_rows: int, n_cols: int, chars: int, plot_width: float, plot_height: float) -> bool:
    """Whether text of ``chars`` characters at the cell text size of now
    (:func:`~explorer.style.font_px` ``"cell"``) fits in every cell of an ``n_rows x
    n_cols`` grid drawn over ``plot_width`` px (at scale 1:
    :func:`~explorer.style.plot_width_px`) by ``plot_height`` px (at the current
    scale), and the grid has at most :data:`~explorer.limits.MAX_TEXT_CELLS` cells."""
    n_rows, n_cols = max(int(n_rows), 1), max(int(n_cols), 1)
    size = font_px("cell")
    return (n_rows * n_cols <= MAX_TEXT_CELLS
            and plot_width_px(plot_width) / n_cols >= chars * DIGIT_WIDTH * size + 2 * CELL_PAD_PX
            and plot_height / n_rows >= LINE_HEIGHT * size)


def owner_colorscale() -> tuple[list, int]:
    """The pool's categorical colour scale for owner codes (0 free, 1 other,
    ``2 + seq % len(SEQUENCE_COLORS)`` a sequence), and how many codes it has."""
    colors = [FREE_COLOR, OTHER_COLOR, *SEQUENCE_COLORS]
    return [[(i + j) / len(colors), c] for i, c in enumerate(colors) for j in (0, 1)], len(colors)


def add_legend_square(fig: go.Figure, color: str, name: str, line: str | None = None, meta: dict | None = None) -> None:
    """A legend entry for a heatmap category (heatmaps have no legend of their own)."""
    fig.update_layout(showlegend=True)
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            marker=dict(symbol="square", size=12, color=color, line=dict(color=line or color, width=1)),
            name=name,
            hoverinfo="skip",
            meta=meta,
        )
    )


def add_new_token_marks(fig: go.Figure, x, y, customdata, hovertemplate: str, cell_px: float,
                        share: float = 0.45) -> None:
    """Stars (:data:`NEW_TOKEN_COLOR`) at ``x``, ``y`` (data coordinates: a corner of
    each cell that holds new tokens, or its centre), with the hover ``hovertemplate``
    over ``customdata``, ``share`` of a cell of ``cell_px`` pixels wide (4 to 16 px),
    and a legend entry :data:`NEW_TOKENS`; one trace, named so."""
    fig.update_layout(showlegend=True)
    fig.add_trace(go.Scatter(
        x=x, y=y, mode="markers", customdata=customdata, hovertemplate=hovertemplate, cliponaxis=False,
        marker=dict(symbol=NEW_TOKEN_MARK.symbol, size=max(4.0, min(share * cell_px, 16.0)), color=NEW_TOKEN_COLOR,
                    line=dict(color=NEW_TOKEN_LINE, width=1)),
        name=NEW_TOKENS,
    ))


def _rgb(color: str) -> np.ndarray:
    """``"#RRGGBB"`` or ``"rgb(r, g, b)"`` as three floats 0 to 255."""
    return np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)] if color.startswith("#")
                    else [float(v) for v in color[color.index("(") + 1:-1].split(",")[:3]], dtype=float)


def _luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG relative luminance of sRGB colours ``[..., 3]`` (0 to 255)."""
    c = np.asarray(rgb, dtype=float) / 255
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return lin @ np.array([0.2126, 0.7152, 0.0722])


def contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two colours (``"#RRGGBB"`` or ``"rgb(r, g, b)"``), 1 to 21."""
    hi, lo = sorted((float(_luminance(_rgb(a))), float(_luminance(_rgb(b)))), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _inks(rgb: np.ndarray) -> np.ndarray:
    """The ink of more WCAG contrast on each colour of ``rgb`` ``[..., 3]``."""
    lum = _luminance(rgb)
    dark, light = float(_luminance(_rgb(DARK_INK))), float(_luminance(_rgb(LIGHT_INK)))
    return np.where((lum + 0.05) / (dark + 0.05) >= (light + 0.05) / (lum + 0.05), DARK_INK, LIGHT_INK)


def ink_on(color: str) -> str:
    """:data:`DARK_INK` or :data:`LIGHT_INK` on ``color`` (``"#RRGGBB"`` or ``"rgb(r, g, b)"``):
    the one of more WCAG contrast, at least 4.58:1 on any colour."""
    return str(_inks(_rgb(color)))


def scale_inks(values, colorscale: list) -> np.ndarray:
    """The ink (:func:`ink_on`) on each cell of ``values`` (0 to 1 along ``colorscale``, as Plotly
    draws it: linear in sRGB between its stops)."""
    v = np.clip(np.nan_to_num(np.asarray(values, dtype=float)), 0.0, 1.0)
    stops = np.array([float(p) for p, _ in colorscale])
    rgb = np.stack([_rgb(c) for _, c in colorscale])
    return _inks(np.stack([np.interp(v, stops, rgb[:, i]) for i in range(3)], axis=-1))


def palette_inks(codes, colors) -> np.ndarray:
    """The ink (:func:`ink_on`) on each cell of integer ``codes`` into ``colors`` (NaN or out of range:
    the first colour's)."""
    inks = np.array([ink_on(c) for c in colors], dtype=object)
    idx = np.nan_to_num(np.asarray(codes, dtype=float), nan=0).astype(np.int64)
    return inks[np.clip(idx, 0, len(colors) - 1)]


def cell_words(text) -> np.ndarray:
    """The words :func:`inked` cell text shows, its markup left out (what a reader sees in each cell)."""
    text = np.asarray(text, dtype=object)
    return np.vectorize(lambda t: re.sub(r"<[^>]*>", "", t) if isinstance(t, str) else t, otypes=[object])(text)


def cell_inks(text) -> np.ndarray:
    """The ink :func:`inked` gave each cell's text (``""`` where none)."""
    text = np.asarray(text, dtype=object)
    found = np.vectorize(lambda t: (re.match(r'<span style="color:([^"]+)">', t) or [None, ""])[1]
                         if isinstance(t, str) else "", otypes=[object])
    return found(text)


def inked(text, inks) -> np.ndarray:
    """Cell ``text`` each written in its ``inks`` colour: ``<span style="color:…">`` markup that
    Plotly's heatmap text keeps per cell (its ``textfont.color`` is one colour for all, and its
    own choice, white or #444 by brightness, fell short of 4.5:1). Empty text stays empty."""
    text, inks = np.asarray(text, dtype=object), np.broadcast_to(np.asarray(inks, dtype=object), np.shape(text))
    out = np.empty(text.shape, dtype=object)
    for i in np.ndindex(text.shape):
        out[i] = f'<span style="color:{inks[i]}">{text[i]}</span>' if text[i] not in ("", None) else ""
    return out


def hatch_frame(x, y, width, height, text_box: tuple[float, float] | None = None) -> np.ndarray:
    """The rectangles ``[n, 4]`` (x0, x1, y0, y1, data units) that hatch the cells centred at
    ``x``, ``y`` (``width`` x ``height`` each): without ``text_box`` each whole cell; with it
    (``(w, h)``, data units: the box of the id written at each cell's centre) the frame
    around that box, a strip above and below it across the cell and one either side of it,
    so that no hatch line runs through the digits (issue 27: white stripes over ids read
    as strike-throughs). Strips of no width or height are left out."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    width = np.broadcast_to(np.asarray(width, dtype=float), x.shape)
    x0, x1, y0, y1 = x - width / 2, x + width / 2, y - height / 2, y + height / 2
    if text_box is None:
        return np.stack([x0, x1, y0, y1], axis=-1).reshape(-1, 4)
    tw, th = np.minimum(text_box[0], width) / 2, min(text_box[1], height) / 2
    strips = np.concatenate([
        np.stack([x0, x1, y0, y - th], -1), np.stack([x0, x1, y + th, y1], -1),   # above and below the id
        np.stack([x0, x - tw, y - th, y + th], -1), np.stack([x + tw, x1, y - th, y + th], -1),  # either side
    ]).reshape(-1, 4)
    return strips[(strips[:, 1] - strips[:, 0] > 1e-9) & (strips[:, 3] - strips[:, 2] > 1e-9)]


def id_box(digits: int, plot_width: float, n_cols: int, plot_height: float, y_span: float) -> tuple[float, float]:
    """The box ``(w, h)`` (data units: columns, rows) an id of ``digits`` digits takes at a
    cell's centre (:data:`~explorer.marks.TEXT_CHAR_WIDTH` of the cell font size a digit, a
    font size high), :data:`CELL_PAD_PX` clear around it, in a grid of ``n_cols`` columns over
    ``plot_width`` px (at scale 1: the narrowest it is drawn, where the box spans the most
    columns) and ``y_span`` rows over ``plot_height`` px, each axis padded by
    :data:`~.picking.GRID_PAD` either end."""
    per_x = plot_width_px(plot_width) / (n_cols + 2 * GRID_PAD)
    per_y = plot_height / (y_span + 2 * GRID_PAD)
    pad = 2 * scaled(CELL_PAD_PX)
    return (digits * TEXT_CHAR_WIDTH * font_px("cell") + pad) / per_x, (font_px("cell") + pad) / per_y


def add_outside_window(fig: go.Figure, x, y, width, height, ids, colors, key_color: str,
                       text_box: tuple[float, float] | None = None) -> None:
    """Hatch the cells centred at ``x``, ``y`` (data units, ``width`` x ``height``
    each) white (:data:`OUTSIDE_WINDOW_HATCH`) over their own colour, write ``ids``
    (None: no text) in ink for each cell's ``colors`` (:func:`ink_on`), the hatching
    around the ids' ``text_box`` (``(w, h)`` in data units: :func:`hatch_frame`), and
    add a legend entry :data:`OUTSIDE_WINDOW`: a hatched ``key_color`` square. Traces:
    the hatch bars (one per rectangle of :func:`hatch_frame`) and the legend bar (of no
    height; both named :data:`OUTSIDE_WINDOW`), then the ids (``OUTSIDE_WINDOW + " ids"``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    pattern = dict(shape=OUTSIDE_WINDOW_HATCH, fgcolor=OUTSIDE_WINDOW_HATCH_COLOR, solidity=0.25, size=10)
    fig.update_layout(showlegend=True, barmode="overlay")
    rects = hatch_frame(x, y, width, height, text_box if ids is not None else None)
    fig.add_trace(go.Bar(
        x=(rects[:, 0] + rects[:, 1]) / 2, y=rects[:, 3] - rects[:, 2], base=rects[:, 2],
        width=rects[:, 1] - rects[:, 0], offset=-(rects[:, 1] - rects[:, 0]) / 2,
        marker=dict(color="rgba(0,0,0,0)", line=dict(width=0), pattern=dict(pattern, bgcolor="rgba(0,0,0,0)")),
        hoverinfo="skip", showlegend=False, name=OUTSIDE_WINDOW,
    ))
    # One bar of no height left of the axes' range: a bar without data gets an empty swatch.
    fig.add_trace(go.Bar(x=[-1e6], y=[0.0], base=y[:1], width=[1.0], name=OUTSIDE_WINDOW, hoverinfo="skip",
                         marker=dict(color=key_color, line=dict(color=OUTSIDE_WINDOW_EDGE, width=1),
                                     pattern=dict(pattern, fillmode="overlay"))))
    if ids is not None:
        fig.add_trace(go.Scatter(
            x=x, y=y, mode="text", text=list(ids), cliponaxis=False, hoverinfo="skip", showlegend=False,
            textfont=dict(size=font_px("cell"), color=[ink_on(c) for c in colors], shadow="none"),
            name=OUTSIDE_WINDOW + " ids",
        ))
