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
    "x-thin": "diagonal cross", "circle": "dot", "diamond": "diamond",
}
#: The word for each colour a mark takes (its fill, or a line-only symbol's line).
COLOUR_WORDS = {
    "#FFFFFF": "white", "#111827": "black", "#FACC15": "yellow", "#374151": "dark grey",
}
#: Symbols drawn by their line alone: their colour is the line's.
LINE_ONLY = ("x-thin",)


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
    "copied": Mark("copy-on-write", "star", "#FACC15", "#111827"),
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
