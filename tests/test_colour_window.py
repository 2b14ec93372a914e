"""Issue 27 (a speaker's review): the block table painted the blocks outside a sliding
window (held, not read) a grey next to the pool's free grey: block 13 grey in the
table, held in the pool. They keep their own colour, hatched."""

from __future__ import annotations

import numpy as np
import pytest
from test_colour_language import ciede2000, rgb

from explorer import style
from explorer.cache import cell_style
from explorer.cache import figures as cache_figures
from explorer.cache.window import first_read_blocks
from paged_attention import DecodeConfig, assign_blocks

#: The least CIEDE2000 difference between a held cell and the free grey.
FREE_APART_DE00 = 10


def _cell_colour(heatmap, r: int, c: int) -> str | None:
    """The colour ``heatmap`` paints cell ``r, c`` (None: it leaves it empty)."""
    z = np.asarray(heatmap.z, dtype=float)
    if not np.isfinite(z[r, c]):
        return None
    finite = z[np.isfinite(z)]
    lo = finite.min() if heatmap.zmin is None else heatmap.zmin
    hi = finite.max() if heatmap.zmax is None else heatmap.zmax
    t = (z[r, c] - lo) / (hi - lo) if hi > lo else 0.0
    return [color for position, color in heatmap.colorscale if position <= t][-1]


@pytest.mark.parametrize("color_by", ["physical", "sequence"])
def test_outside_window_cells_keep_a_held_colour_under_a_hatch(color_by):
    # /block_table?preset=Gemma-2-9B&layer=sliding&window=64&batch=3&ctx_mode=uniform&ctx=200
    config = DecodeConfig(batch_size=3, context_lens=(200, 200, 200), block_size=16, window=64)
    tables = assign_blocks(config)[0].numpy()
    fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=64,
                                           color_by=color_by)
    first = first_read_blocks(np.array(config.lengths), 16, 64)
    outside = (np.arange(tables.shape[1])[None, :] < first[:, None]) & (tables >= 0)
    assert outside.sum() == 3 * 8
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    for r, c in zip(*np.nonzero(outside)):
        # what is seen under any hatch: the last heatmap that fills the cell
        drawn = [col for col in (_cell_colour(h, r, c) for h in heatmaps) if col is not None][-1]
        hexed = "#%02X%02X%02X" % rgb(drawn)
        assert ciede2000(hexed, style.FREE_COLOR) >= FREE_APART_DE00, (r, c, hexed)
    bars = [t for t in fig.data if t.type == "bar" and t.name == cell_style.OUTSIDE_WINDOW and t.showlegend is False]
    assert len(bars) == 1 and bars[0].marker.pattern.shape == "/"
    # each such cell hatched, in strips around its id (tests/test_block_table_ink.py), inside the cell
    hatched = {(round(b + h / 2), round(x)) for x, b, h in zip(bars[0].x, bars[0].base, bars[0].y)}
    assert sorted(hatched) == sorted((int(r), int(c)) for r, c in zip(*np.nonzero(outside)))
    assert all(0 < w <= 1 for w in bars[0].width)
