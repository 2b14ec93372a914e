"""The Block table page's two walk charts (issue 27's 1280x720 review): the block
walk's x ticks spaced for the narrow column it is drawn in, and the token walk's
subtitle naming the cells' numbers only where it writes them."""

from __future__ import annotations

import numpy as np
import pytest
from test_figures_paged_cache import _tick_gap_px

from explorer import style
from explorer.cache import cell_style, walk_figures

#: The block walk's plot area as Chromium drew it at 1280 px, in the page's narrow
#: column (``?batch=32&ctx_mode=ragged&lo=100&hi=4000``): 225 px, 232 in presentation mode.
WALK_DRAWN_PX = {1.0: 225, style.PRESENTATION_SCALE: 232}


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
def test_block_walk_x_ticks_stay_apart_in_the_narrow_column(scale):
    """Review at 1280x720: with 224 logical blocks the walk's x labels ran together
    ("80100120140...220"): they were spaced for a 400 px plot, not the 225 px one drawn."""
    needed = 224
    row = np.random.default_rng(0).permutation(2134)[:needed]
    with style.presentation(scale):
        fig = walk_figures.block_walk_figure(row, needed * 16 - 10, 16, num_blocks=2134)
        size = style.font_px("tick")
    ticks = fig.layout.xaxis.tickvals
    widest = max(len(t) for t in fig.layout.xaxis.ticktext) * style.DIGIT_WIDTH * size
    assert len(ticks) >= 3
    assert _tick_gap_px(ticks, needed, WALK_DRAWN_PX[scale]) >= widest + 0.5 * size


@pytest.mark.parametrize("scale", [1.0, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("context_len", [20, 40, 236, 3582])
def test_token_walk_subtitle_names_cell_numbers_only_where_it_writes_them(scale, context_len):
    """Review at 1280x720: the walk's subtitle said "cell numbers: token position" at the
    default settings (236 tokens in blocks of 16), where no cell holds a number."""
    needed = -(-context_len // 16)
    row = np.arange(needed)[::-1] + 3
    with style.presentation(scale):
        fig = walk_figures.token_walk_figure(row, context_len, 16, num_blocks=needed + 3)
    written = fig.data[0].texttemplate is not None
    assert (cell_style.WALK_CELL_KEY in fig.layout.title.subtitle.text) == written
    if context_len == 20 and scale == 1.0:  # two blocks: room for every position
        assert written
    if context_len >= 236:  # the page's default sequence and longer: none
        assert not written
