"""Issue 27 (the back row: every chart readable on a 1280x720 projector): in presentation mode's tight rows
(the Serving simulation's tables, the Block table with a large batch and the sidebar's shared prefix), the
shared-block diamond's tip met the top of its cell, touching the row above. The mark is now sized with the
row's height as drawn, so its tips keep a margin inside the drawn cell in every mode, tight rows or loose.
Extents are read back from each figure: the plot's pixel height (layout height less margins) over the y
axis' range gives a row's pixels; the diamond's tips are Plotly's (1.3 times its radius from its centre,
plotly.js ``symbol_defs``), its outline drawn half outside its edge."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_figures_serving import ALL_MARKS, _page_tables

from explorer import style
from explorer.cache import figures as cache_figures
from explorer.cache.sharing import table_ref_counts
from explorer.marks import SHARED_MARK
from explorer.serving.history import simulate
from paged_attention import DecodeConfig, assign_blocks

#: Plotly's diamond reaches 1.3 radii (0.65 marker sizes) from its centre.
PLOTLY_DIAMOND_REACH = 0.65


def mark_margins(fig) -> tuple[float, float, np.ndarray]:
    """A row's height as drawn (px), the shared mark's size, and for each mark the pixels between its tips
    (outline included) and the nearer edge, top or bottom, of the drawn cell it sits in (less half the 1 px
    gap between rows, where there is one)."""
    heat = fig.data[0]
    (mark,) = [t for t in fig.data if t.name == SHARED_MARK.name]
    rows = np.asarray(heat.y, dtype=float)
    stride = rows[1] - rows[0] if len(rows) > 1 else 1.0
    lo, hi = fig.layout.yaxis.range
    px = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / abs(lo - hi)  # px per y unit
    y = np.asarray(mark.y, dtype=float)
    assert len(y) > 0
    centre = rows[np.abs(rows[None, :] - y[:, None]).argmin(1)]  # the row each mark sits in
    half = PLOTLY_DIAMOND_REACH * mark.marker.size + mark.marker.line.width / 2
    cut = (heat.ygap or 0) / 2
    above = (y - (centre - stride / 2)) * px - half - cut  # rows grow downwards: a cell's top is centre - stride/2
    below = ((centre + stride / 2) - y) * px - half - cut
    return px * stride, mark.marker.size, np.minimum(above, below)


def block_table_page(batch: int):
    """The Block table page's table with the sidebar's shared prefix (40 tokens, one group)."""
    config = DecodeConfig(batch_size=batch, context_lens=tuple(40 + (37 * i) % 200 for i in range(batch)),
                          block_size=16, shared_prefix=40, prefix_groups=1)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    refs = table_ref_counts(tables, len(owner))
    return cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, ref_counts=refs)


def serving_tables(max_batch: int):
    """The Serving simulation's running block tables, sharing on, at their fullest step."""
    many = max_batch > 10
    config = replace(ALL_MARKS, num_blocks=1024, max_batch_size=max_batch, arrival_rate=6 if many else 0.05)
    history = simulate(config, 60 if many else 200)
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax()) if many else 195
    return _page_tables(history, step, config.num_blocks, "sequence")


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("page, loose, tight", [(block_table_page, 4, 64), (serving_tables, 6, 64)])
def test_shared_marks_keep_a_margin_inside_their_cells_in_tight_rows_and_loose(page, loose, tight, scale):
    with style.presentation(scale):
        loose_fig, tight_fig = page(loose), page(tight)
        least = style.scaled(cache_figures.MIN_SHARED_MARK_PX)
        gap = style.scaled(cache_figures.SHARED_MARK_GAP_PX)
    loose_row, loose_size, loose_margin = mark_margins(loose_fig)
    tight_row, tight_size, tight_margin = mark_margins(tight_fig)
    # The tight rows are too low for the least mark of before with a margin; the loose ones hold it.
    assert tight_row < 2 * PLOTLY_DIAMOND_REACH * least + style.scaled(cache_figures.SHARED_MARK_LINE_PX) + 2 < loose_row
    # The mark's margin from the cell's edge: the gap, cut (down to a pixel) where the band beside or above
    # the id needs it for the least mark (issue 27: marks sit in a corner clear of the id).
    assert loose_margin.min() >= cache_figures.MIN_EDGE_PX - 1e-6 and gap > 0
    assert tight_margin.min() >= cache_figures.MIN_EDGE_PX - 1e-6  # at least a pixel, however tight
    assert 0 < tight_size < loose_size  # the mark shrinks with the row, still drawn
    assert loose_size >= least  # and is as large as before where the row holds it
