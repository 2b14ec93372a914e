"""Issue 27, review 4: the Block table pool's marks were about 4 px in normal mode (the partly filled
dot touching the ids, the copy-on-write plus a speck), and presentation mode grew every pool mark only
with the text (the Serving pool's 10 px marks in 55 px cells). The Block table's pool now lays its cells
out to hold each mark at :data:`~explorer.cache.pool_figures.POOL_MARK_PX` clear of the ids, presentation
mode's marks grow by the scale squared (:func:`~explorer.cache.pool_figures.mark_px`), and the Serving
pool's rows hold its dots at that size. Sizes and boxes are computed from the figures (``mark_boxes``:
each mark's box, its cell's and its id's, in px of the plot each is drawn in)."""

from __future__ import annotations

import pytest
from test_marks_clear_of_ids import mark_boxes

from explorer import style
from explorer.cache import pool_figures, sharing_figures
from explorer.cache.cell_style import NARROW_PLOT_PX
from explorer.cache.sharing import shared_prefix_batch
from explorer.settings import default_settings
from paged_attention import assign_blocks

#: The least size (px) of a pool mark at 1280x720 in normal mode (read from the back of a room); presentation
#: mode's is this times its scale squared.
READABLE_PX = 7
#: The Sharing toggle's defaults on the Block table page (app_pages/block_table.py).
COMMON_PROMPT, SAMPLES = 64, 2
#: The page's pool across the page in presentation mode (app_pages/block_table.py), at two fifths of it otherwise.
ACROSS = {"plot_width": style.FULL_PLOT_WIDTH_PX, "figure_px": style.FULL_FIGURE_PX}


def block_table_pools(scale: float) -> list[tuple[str, object, float]]:
    """The Block table page's pool for the sidebar's defaults, Sharing off and on (its defaults), as the
    page draws it at ``scale``, with the plot width (px, at that scale) it is laid out for."""
    config = default_settings().config()
    wide = ACROSS if scale > 1 else {}
    width = style.FULL_PLOT_WIDTH_PX if scale > 1 else NARROW_PLOT_PX
    with style.presentation(scale):
        tables, owner = (t.numpy() for t in assign_blocks(config))
        plain = pool_figures.pool_figure(owner, tables, config.lengths, config.block_size, fit_ids=True, **wide)
        shared = shared_prefix_batch(tuple(config.lengths), config.block_size, config.num_blocks, COMMON_PROMPT,
                                     SAMPLES)
        sharing = sharing_figures.pool_ref_count_figure(shared.ref_counts, shared.block_tables, config.block_size,
                                                        fit_ids=True, copied=shared.copied, **wide)
        plot_w = style.plot_width_px(width)
    return [("sharing off", plain, plot_w), ("sharing on", sharing, plot_w)]


def _gap(mark, text) -> float:
    """Pixels between a mark's box and its id's box (the larger of the horizontal and vertical gaps)."""
    return max(text[0] - mark[1], mark[0] - text[1], text[2] - mark[3], mark[2] - text[3])


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_block_table_pool_marks_are_readable_and_clear_of_the_ids(scale):
    least = READABLE_PX * scale ** 2  # 7 px in normal mode, 15.75 in presentation mode
    seen = set()
    for case, fig, plot_w in block_table_pools(scale):
        assert fig.data[0].texttemplate == "%{text}", case  # every id written
        boxes = mark_boxes(fig, plot_w)
        assert boxes, case
        for t in fig.data:
            if isinstance(t.meta, dict) and t.meta.get("mark") and t.customdata is not None:
                assert t.marker.size >= least - 1e-6, (case, t.name, t.marker.size)
        for name, mark, cell, text in boxes:
            seen.add(name)
            assert mark[0] >= cell[0] - 1e-6 and mark[1] <= cell[1] + 1e-6, (case, name)  # inside its cell
            assert mark[2] >= cell[2] - 1e-6 and mark[3] <= cell[3] + 1e-6, (case, name)
            assert _gap(mark, text) >= style.scaled(pool_figures.POOL_MARK_GAP_PX) - 1e-6, (case, name)
    assert seen == {"partly filled last block", "copy-on-write"}


def test_presentation_mode_grows_pool_marks_by_the_scale_squared():
    """The mark size the pools hold, and the caps of POOL_MARK_PLACES, grow 2.25 times in presentation mode."""
    with style.presentation(style.PRESENTATION_SCALE):
        assert pool_figures.mark_px(READABLE_PX) == pytest.approx(READABLE_PX * style.PRESENTATION_SCALE ** 2)
    assert pool_figures.mark_px(READABLE_PX) == READABLE_PX
    assert pool_figures.POOL_MARK_PX >= READABLE_PX
