"""The marks drawn over the cache's grids (a step's pool changes, a partly filled
block, a shared block in a block table) and the words that name them: each mark is
a Plotly symbol with a fill and an outline, and a caption names it by
:attr:`Mark.words`, read from that symbol and fill, so the words and the drawing
cannot drift apart. One shape means one thing on a page: no two marks here share
a symbol (tests/test_colour_language.py checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The word for each symbol a mark takes (Plotly's symbol names).
SHAPE_WORDS = {
    "triangle-up": "triangle", "hourglass": "hourglass", "star": "star", "pentagon": "pentagon",
    "x-thin": "diagonal cross", "circle": "dot", "diamond": "diamond", "circle-open": "ring", "cross": "plus",
    "circle-cross-open": "crosshair", "asterisk-open": "asterisk",
}
#: The word for each colour a mark takes (its fill, or a line-only symbol's line).
COLOUR_WORDS = {
    "#FFFFFF": "white", "#111827": "black", "#FACC15": "yellow", "#374151": "dark grey", "#FDE047": "yellow",
}
#: Symbols drawn by their line alone: their colour is the line's.
LINE_ONLY = ("x-thin", "circle-open", "circle-cross-open", "asterisk-open")


@dataclass(frozen=True)
class Mark:
    """One mark: its legend name, Plotly ``symbol``, ``fill`` and outline ``line``
    (colours as ``#RRGGBB``, keys of :data:`COLOUR_WORDS`)."""

    name: str
    symbol: str
    fill: str
    line: str

    @property
    def words(self) -> str:
        """The mark as a caption names it: colour and shape ("black pentagon"), a
        white one "outlined in black" (its outline is what shows on a light cell).

        Raises
        ------
        KeyError
            On a symbol or colour without a word (:data:`SHAPE_WORDS`, :data:`COLOUR_WORDS`).
        """
        colour = COLOUR_WORDS[self.line if self.symbol in LINE_ONLY else self.fill]
        outline = f" outlined in {COLOUR_WORDS[self.line]}" if colour == "white" else ""
        return f"{colour} {SHAPE_WORDS[self.symbol]}{outline}"


#: The marks of a step's pool changes, by the keys of
#: :meth:`~explorer.serving.snapshot.PoolChanges.marks`.
POOL_CHANGE_MARKS = {
    "taken": Mark("taken", "triangle-up", "#FFFFFF", "#111827"),
    "recycled": Mark("recycled", "hourglass", "#111827", "#FFFFFF"),
    "copied": Mark("copy-on-write", "cross", "#FACC15", "#111827"),  # a plus: the star is the new tokens'
    "revived": Mark("revived", "pentagon", "#111827", "#FFFFFF"),  # not green: the sequences' greens
    "freed": Mark("freed", "x-thin", "#374151", "#374151"),
}
#: A partly filled last block, in the pool.
PARTLY_FILLED_MARK = Mark("partly filled last block", "circle", "#111827", "#FFFFFF")
#: A block table cell whose physical block more than one sequence holds (the Block
#: table page's table and the Serving simulation's running tables alike).
SHARED_MARK = Mark("shared block (2+ sequences)", "diamond", "#FFFFFF", "#111827")
#: Every mark one page may show together (the Serving simulation's pool and tables).
PAGE_MARKS = (*POOL_CHANGE_MARKS.values(), PARTLY_FILLED_MARK, SHARED_MARK)
#: A row's own token on Inside the kernel's causal mask (a diamond there meant a shared
#: block's mark on the Block table and Serving pages: issue 27, review 3).
OWN_TOKEN_MARK = Mark("own token", "circle-open", "#111827", "#111827")
#: This step's new (draft) tokens in the Block table's cells and the token walk's slots
#: (a copy-on-write copy was a yellow star too: issue 27, review 3).
NEW_TOKEN_MARK = Mark("new tokens (this step's queries)", "star", "#FDE047", "#111827")
#: The finished row's output on Inside the kernel's online softmax: where the answer lands (a black
#: star there was the new tokens' shape, and outside this registry: issue 27, back row).
OUTPUT_MARK = Mark("the output", "circle-cross-open", "#111827", "#111827")
#: Each tile's own max on the online softmax, on or under the running max's line (a dash there was lost
#: in the line): drawn in its split's colour, so its words are its shape's (:data:`SHAPE_WORDS`; a ring
#: there was the own token's).
TILE_MAX_MARK = Mark("tile's own max", "asterisk-open", "#111827", "#111827")
#: Every mark of every page: one symbol, one meaning across them all.
ALL_MARKS = (*PAGE_MARKS, OWN_TOKEN_MARK, NEW_TOKEN_MARK, OUTPUT_MARK, TILE_MAX_MARK)

#: How far a Plotly diamond reaches from its centre, in its marker size (1.3 times its radius).
DIAMOND_REACH = 0.65


def diamond_fit(room_px: float, line_px: float, most_px: float = math.inf) -> tuple[float, float]:
    """The marker size and outline width (px) of the largest diamond, at most ``most_px``, whose
    extent tip to tip, its outline included (``2 * DIAMOND_REACH * size + outline``), is ``room_px``: its
    outline ``line_px``, or a sixth of its size for a diamond too small for that (the white fill
    stays inside a thinner line)."""
    room = max(float(room_px), 0.0)
    size = (room - line_px) / (2 * DIAMOND_REACH)
    if size < 6 * line_px:
        size = room / (2 * DIAMOND_REACH + 1 / 6)
    size = min(size, most_px)
    return size, min(line_px, size / 6)


def diamond_extent(size: float, line_px: float) -> float:
    """Pixels a diamond of marker ``size`` and outline ``line_px`` spans, tip to tip (the outline is
    drawn on its edge, half of it outside)."""
    return 2 * DIAMOND_REACH * size + line_px


#: How far each symbol reaches from its centre, in its marker size, along its wider axis
#: (plotly.js ``symbol_defs``): the half side of the square box that holds it.
SYMBOL_REACH = {
    "circle": 0.5, "diamond": DIAMOND_REACH, "hourglass": 0.5, "triangle-up": 0.87, "star": 0.7,
    "pentagon": 0.5, "x-thin": 0.7, "circle-open": 0.5, "cross": 0.6, "circle-cross-open": 0.5, "asterisk-open": 0.6,
}
#: A cell text character's width, in its font size (an upper estimate for digits).
TEXT_CHAR_WIDTH = 0.6
#: The least share of its size a mark keeps for :func:`corner_fit`'s ``side_margin``.
SIDE_MARGIN_KEEP = 0.9


def corner_fit(cell_w: float, cell_h: float, text_w: float, text_h: float, *, symbol: str, line: float,
               margin: float, floor: float, most: float = math.inf,
               corner: str = "top-left", shared: bool = False,
               side_margin: float | None = None) -> tuple[float, float, float]:
    """Where and how large a mark goes in a cell ``cell_w`` by ``cell_h`` px whose centred id text
    is ``text_w`` by ``text_h`` px (0 where none is written): in the ``corner`` ("top-left",
    "top-right", "bottom-left", "bottom-right"; ``shared``: another mark may take the corner
    beside it, so it keeps to its half of the cell's width), its box (outline ``line`` px included) ``margin`` px inside the cell and
    ``margin`` px clear of the text, beside it or above/below it, whichever leaves more room.

    Returns ``(dx, dy, size)``: the mark's centre from the cell's centre in px (x right, y down)
    and its Plotly marker size: as large as fits, at most ``most``, at least ``floor`` where the
    room holds it (the margin cut, down to 1 px, first); where even that does not, the most that
    fits, so the mark never covers the text nor leaves the cell. ``side_margin`` (default ``margin``,
    never less): the px it keeps from the cell's left or right edge instead, so that marks of cells side
    by side stand apart, each nearer its own cell's middle, where the mark keeps :data:`SIDE_MARGIN_KEEP` of
    its size (else ``margin``: a readable mark first)."""
    if side_margin is not None and side_margin > margin:
        args = {"symbol": symbol, "line": line, "margin": margin, "floor": floor, "most": most, "corner": corner,
                "shared": shared}
        plain = corner_fit(cell_w, cell_h, text_w, text_h, **args)
        inset = _corner_fit(cell_w, cell_h, text_w, text_h, side_margin=side_margin, **args)
        return inset if inset[2] >= SIDE_MARGIN_KEEP * plain[2] else plain
    return _corner_fit(cell_w, cell_h, text_w, text_h, symbol=symbol, line=line, margin=margin, floor=floor,
                       most=most, corner=corner, shared=shared)


def _corner_fit(cell_w: float, cell_h: float, text_w: float, text_h: float, *, symbol: str, line: float,
                margin: float, floor: float, most: float, corner: str, shared: bool,
                side_margin: float | None = None) -> tuple[float, float, float]:
    """:func:`corner_fit` with ``side_margin`` from the cell's sides, or where the floor does not fit, ``margin``."""
    reach = SYMBOL_REACH[symbol]
    sides = (side_margin, None) if side_margin is not None and side_margin > margin else (None,)
    for wide in sides:
        def edge(m: float, wide: float | None = wide) -> float:  # the px from the left or right edge
            return m if wide is None else max(wide, m)

        def room(m: float) -> float:  # the box's side
            e = edge(m)
            clear = max((cell_w - text_w) / 2 - e - m, (cell_h - text_h) / 2 - 2 * m) if text_w > 0 else math.inf
            return min(cell_w / 2 - e - m / 2 if shared else cell_w - 2 * e, cell_h - 2 * m, clear)

        m, side = margin, room(margin)
        if (side - line) / (2 * reach) < floor:  # the widest margin, down to 1 px, that holds the floor
            lo, hi = min(margin, 1.0), margin
            for _ in range(20):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if (room(mid) - line) / (2 * reach) >= floor else (lo, mid)
            m, side = lo, room(lo)
        held = (side - line) / (2 * reach) >= floor
        if held or wide is None:
            break
    size = max(min((side - line) / (2 * reach), most), 0.0)
    if held:
        size = max(size, min(floor, most))
    half = reach * size + line / 2
    up, left = corner.split("-")
    return ((-1.0 if left == "left" else 1.0) * (cell_w / 2 - edge(m) - half),
            (-1.0 if up == "top" else 1.0) * (cell_h / 2 - m - half), size)
