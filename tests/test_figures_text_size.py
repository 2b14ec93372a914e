"""Text a projector shows from the back row (issue 27): the Block table and Inside the
kernel pages' figures set no font under 12 px, and numbers in cells or bars too
small for 12 px text are left out (the hover has them), never shrunk."""

from __future__ import annotations

import numpy as np
import pytest
from test_colour_language import block_table_page, kernel_page

from explorer import formatting, style
from explorer.cache import cell_style, pool_figures, walk_figures
from explorer.cache import figures as cache_figures
from paged_attention import DecodeConfig, assign_blocks


def explicit_font_sizes(fig) -> list[float]:
    """Every font size ``fig`` sets, in its layout and traces (not Plotly's template),
    and its ``uniformtext`` minimum."""
    sizes: list[float] = []

    def walk(node, parent: str = "") -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if parent.endswith("font") and key == "size" and isinstance(value, (int, float)):
                    sizes.append(value)
                elif key != "template":
                    walk(value, key)
        elif isinstance(node, list):
            for item in node:
                walk(item, parent)

    spec = fig.to_plotly_json()
    walk(spec)
    minsize = spec["layout"].get("uniformtext", {}).get("minsize")
    return sizes + ([minsize] if minsize is not None else [])


#: Plotly draws an exponent (``exponentformat="power"``: 10⁻⁴) at this share of the tick size.
SUPERSCRIPT_SHARE = 0.75


def rendered_tick_sizes(fig) -> list[float]:
    """The sizes Plotly draws ``fig``'s tick labels at: the tick font's, and an
    exponent's :data:`SUPERSCRIPT_SHARE` of it on a log axis that writes powers of
    ten as superscripts (``exponentformat="power"``, no ``tickformat``)."""
    layout = fig.to_plotly_json()["layout"]
    base = layout.get("font", {}).get("size") or 12
    sizes = []
    for key, axis in layout.items():
        if not key.startswith(("xaxis", "yaxis")):
            continue
        tick = axis.get("tickfont", {}).get("size") or base
        sizes.append(tick)
        if axis.get("type") == "log" and axis.get("exponentformat") == "power" and not axis.get("tickformat"):
            sizes.append(SUPERSCRIPT_SHARE * tick)
    return sizes


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_error_chart_ticks_meet_the_minimum_at_their_rendered_size(scale):
    """Review at 1280x720 (issue 27): the error chart's log ticks 10⁻¹ ... 10⁻⁴ drew
    their exponents at 10.5 px (15.75 px in presentation mode): a superscript is
    0.75 of the tick font. Every tick text, exponents included, is at least 12 px
    (18 px in presentation mode)."""
    from types import SimpleNamespace

    from explorer.bench import accuracy_figures

    results = [SimpleNamespace(name=n, label=label, max_abs_err=e, max_rel_err=1.0, max_tol_ratio=r, atol=1e-3,
                               rtol=1e-3, passed=True)
               for n, label, e, r in (("naive", "Naive PyTorch", 2e-4, 0.21), ("triton", "Triton", 3e-7, 3e-4))]
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(results)
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"
    sizes = rendered_tick_sizes(fig) + explicit_font_sizes(fig)
    assert min(sizes) >= (12 if scale == 1 else 18), sorted(sizes)[:3]
    # Tick texts of their own, at the tick size (no superscript exponents), in formatting's notation.
    assert fig.layout.yaxis.tickmode == fig.layout.yaxis2.tickmode == "array"
    assert list(fig.layout.yaxis2.ticktext) == [formatting.sig3_trim(v) for v in fig.layout.yaxis2.tickvals]


@pytest.mark.parametrize("sharing", [False, True])
def test_block_table_page_sets_no_text_under_12_px(sharing):
    for fig in block_table_page(sharing)[:4]:
        sizes = explicit_font_sizes(fig)
        assert sizes and min(sizes) >= 12, (fig.layout.title.text, sorted(sizes)[:3])


def test_kernel_page_sets_no_text_under_12_px_and_hides_what_does_not_fit():
    for fig in kernel_page():
        sizes = explicit_font_sizes(fig) + rendered_tick_sizes(fig)
        assert sizes and min(sizes) >= 12, (fig.layout.title.text, sorted(sizes)[:3])
        if any(t.type == "bar" and t.text is not None for t in fig.data):
            # Plotly shrinks a bar's text to fit the bar unless told to hide it instead.
            assert fig.layout.uniformtext.mode == "hide" and fig.layout.uniformtext.minsize >= 12


def _cell_text(fig) -> tuple[bool, float]:
    heat = fig.data[0]
    return heat.texttemplate is not None, heat.textfont.size


def test_cell_numbers_are_12_px_where_they_fit_and_left_out_where_not():
    """The token walk wrote 9 px numbers (about 7 px on a 1280 px screen) in cells
    17 px wide: three digits of 12 px text need 26."""
    short = walk_figures.token_walk_figure(np.arange(3), 40, 16, num_blocks=8)  # tokens 0-39: two digits
    assert _cell_text(short) == (True, style.font_px("cell"))
    long = walk_figures.token_walk_figure(np.arange(15), 236, 16, num_blocks=45)  # tokens up to 235
    assert _cell_text(long)[0] is False
    config = DecodeConfig(batch_size=4, context_lens=(236, 114, 57, 205), block_size=16)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    table = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks)  # 15 columns, ids < 100
    assert _cell_text(table) == (True, style.font_px("cell"))
    wide_ids = cache_figures.block_table_figure(tables + 900, config.lengths, 16, 1000)  # 3-digit ids
    assert _cell_text(wide_ids) == (True, style.font_px("cell")) and wide_ids.data[0].showscale is False  # the bar gives way
    wider_ids = cache_figures.block_table_figure(tables + 9000, config.lengths, 16, 10000)  # 4-digit ids
    assert _cell_text(wider_ids)[0] is False and wider_ids.data[0].showscale is not False
    pool = pool_figures.pool_figure(owner, tables, config.lengths, 16)
    assert _cell_text(pool) == (True, style.font_px("cell"))


@pytest.mark.parametrize("chars, width, fits", [(2, 280 / 16, True), (3, 280 / 16, False), (3, 26, True)])
def test_cell_text_fits_counts_the_pixels_of_12_px_text(chars, width, fits):
    assert cell_style.cell_text_fits(1, 1, chars, width, 20) is fits
    assert cell_style.cell_text_fits(1, 1, chars, width, 14) is False  # a row shorter than a line of text


def _bar_text_px(fig, trace) -> float:
    """The size Plotly draws ``trace``'s bar text at: its own, else the template's."""
    return trace.textfont.size or fig.layout.template.data.bar[0].textfont.size


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_tradeoff_bar_labels_grow_with_the_mode_and_stay_whole(scale):
    """Review at 1280x720 in presentation mode: the trade-off's value labels
    ("82.6%") were hidden, all but "0%": uniformtext hid outside text wider than its
    bar. They are drawn whole (constraintext "none") at the cell size of the mode,
    and each fits its category's slot of the full-width chart; the block sizes
    stay upright."""
    from test_figures_serving import SERVING

    from explorer.serving import tradeoff_figures
    from explorer.serving.tradeoff import block_size_tradeoff

    table = block_size_tradeoff(SERVING, (1, 2, 4, 8, 16, 32, 64, 128, 256), steps=40, pool_tokens=512).table
    with style.presentation(scale):
        fig = tradeoff_figures.tradeoff_figure(table, current=8)
        slot = style.plot_width_px(style.FULL_PLOT_WIDTH_PX) / len(table)
        cell = style.font_px("cell")
    bars = fig.data[0]
    assert bars.constraintext == "none" and bars.textposition == "outside"
    assert _bar_text_px(fig, bars) == cell >= (12 if scale == 1 else 18)
    assert max(len(t) for t in bars.text) * 0.58 * cell <= slot
    assert fig.layout.xaxis.tickangle == 0 and list(fig.layout.xaxis.ticktext) == [str(b) for b in table["block_size"]]


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
def test_split_merge_ticks_stay_upright_and_its_values_whole_where_they_fit(scale):
    """Review at 1280x720 in presentation mode: Plotly tilted "split 0" ... "split 3"
    on both panels; then they staggered on two rows (even at 1920, bars 100 px
    wide) and the share labels ("34.1%") were left to the hover. The ticks are the
    split numbers on one upright row ("split" is the axis title), and both panels'
    value labels are written whole at the cell size in either mode: each fits a
    bar's slot of the panel as drawn (224 px at 1280 in presentation mode)."""
    from test_figures_kernel import kernel_trace

    from explorer.kernel import figures as kernel_figures

    _, _, _, trace = kernel_trace(num_splits=4)
    with style.presentation(scale):
        fig = kernel_figures.split_merge_figure(trace.splits)
        slot = kernel_figures.merge_panel_px() / len(trace.splits)
        cell = style.font_px("cell")
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):
        assert axis.tickangle == 0 and list(axis.ticktext) == [str(s) for s in trace.splits["split"]]
        assert list(axis.tickvals) == list(fig.data[0].x) and axis.title.text == "split"
    m, share = fig.data
    for bars in (m, share):
        assert bars.text is not None and bars.constraintext == "none" and _bar_text_px(fig, bars) == cell
        assert max(kernel_figures.value_label_px(t, cell) for t in bars.text) <= slot
    assert list(share.text) == [formatting.format_percent(v) for v in trace.splits["share"]]


#: Chromium drew the Block table page's table 476 px wide at 1280x720, the sidebar open.
TABLE_FIGURE_PX = 476


@pytest.mark.parametrize("window", [None, 64])
def test_block_ids_stay_in_their_cells_in_presentation_mode(window):
    """Review at 1280x720 in presentation mode: the block table's ids vanished (15
    columns of 18 px ids did not fit beside the colour bar) and the ids a window
    leaves unread were struck through. Now the bar gives way where that makes room:
    the ids, unread ones too, are written at 18 px and fit their cells (two Arial
    digits, 0.556 of the size each, and a pixel each side) across the figure less
    its margins. In normal mode the bar stays beside them."""
    config = DecodeConfig(batch_size=4, context_lens=(236, 114, 57, 205), block_size=16)  # the page's default
    tables, _ = (t.numpy() for t in assign_blocks(config))
    normal = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=window)
    with style.presentation():
        fig = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=window)
        size = style.font_px("cell")
    assert _cell_text(normal) == (True, 12) and normal.data[0].showscale is not False
    heat = fig.data[0]
    assert _cell_text(fig) == (True, size) and size >= 18 and heat.showscale is False
    plot = TABLE_FIGURE_PX - fig.layout.margin.l - fig.layout.margin.r
    assert plot / tables.shape[1] >= 2 * 0.556 * size + 2
    assert "colour = physical block id" in fig.layout.title.subtitle.text  # the colour still named
    ids = [t for t in fig.data if t.name == cell_style.OUTSIDE_WINDOW + " ids"]
    assert len(ids) == (window is not None)
    for written in ids:  # the ids above the hatch, at the cells' size
        assert written.mode == "text" and written.textfont.size == size
