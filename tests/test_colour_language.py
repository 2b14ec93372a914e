"""One colour language (issue 27): on the Block table, Inside the kernel and Serving simulation pages,
physical block ids, sequences, reference counts, splits and launch order each have
their own palette, never one meaning's colour for another; every chart names its
meaning. The figures are built as each page builds them, and their colour scales
and marker colours read back."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from test_figures_kernel import kernel_trace
from test_figures_style import _lab

from explorer import style
from explorer.cache import cell_style, pool_figures, sharing_figures, walk_figures
from explorer.cache import figures as cache_figures
from explorer.cache.sharing import shared_prefix_batch, table_ref_counts
from explorer.kernel import figures as kernel_figures
from explorer.kernel import view as kernel_view
from explorer.kernel import work_list_figures
from paged_attention import DecodeConfig, assign_blocks

#: One meaning each, on every page: free, held outside the batch, unallocated or masked.
NEUTRAL = {style.FREE_COLOR, style.OTHER_COLOR, style.UNALLOCATED_COLOR}
#: Colours of two meanings on one page stay at least this far apart (CIE76 ΔE in
#: Lab: about 2 is the least a viewer notices, 10 a plainly different colour).
MIN_APART = 12
#: Far apart in Lab is not enough: a strong blue (#2E91E5) and the scale's pale ones
#: are 15 to 40 apart yet all read "blue". Two coloured (chroma 10 or more) colours of
#: different meanings also differ by this many degrees of CIELAB hue, or by this much
#: lightness (a dark olive beside a bright yellow).
HUE_APART, LIGHTNESS_APART = 25, 25


def rgb(color: str) -> tuple[int, int, int]:
    """``"#RRGGBB"`` or ``"rgb(r, g, b)"`` as integers."""
    color = color.strip()
    if color.startswith("#"):
        return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(float(v)) for v in re.findall(r"[\d.]+", color)[:3])
    return r, g, b


def colours(*sources) -> set[tuple[int, int, int]]:
    """The colours of colour scales (``[[position, colour], ...]``) and colour lists,
    less the neutral greys."""
    found = set()
    for source in sources:
        for item in source:
            color = item[1] if isinstance(item, (list, tuple)) else item
            if isinstance(color, str) and rgb(color) not in {rgb(c) for c in NEUTRAL}:
                found.add(rgb(color))
    return found


def legend_colours(fig, keep) -> list[str]:
    """The colours of a heatmap's legend-only squares (:func:`~explorer.cache.cell_style.add_legend_square`)."""
    return [t.marker.color for t in fig.data
            if t.type == "scatter" and t.marker.symbol == "square" and t.hoverinfo == "skip" and keep(t)]


def apart(a: set, b: set) -> float:
    """The Lab distance of the closest pair of colours of ``a`` and ``b``."""
    return min(float(np.linalg.norm(_lab("#%02X%02X%02X" % x) - _lab("#%02X%02X%02X" % y))) for x in a for y in b)


def assert_disjoint(meanings: dict[str, set], min_apart: float = MIN_APART) -> None:
    """No colour of one meaning is another's, nor even close to one."""
    for (a, ca), (b, cb) in itertools.combinations(meanings.items(), 2):
        assert ca and cb, (a, b)
        assert not ca & cb, f"{a} and {b} share {sorted(ca & cb)}"
        assert apart(ca, cb) >= min_apart, f"{a} and {b} come within {apart(ca, cb):.1f} of each other"


def lch(color: tuple[int, int, int]) -> tuple[float, float, float]:
    """Lightness, chroma and hue (degrees) in CIELAB."""
    lightness, a, b = _lab("#%02X%02X%02X" % color)
    return float(lightness), float(np.hypot(a, b)), float(np.degrees(np.arctan2(b, a)) % 360)


def hue_clashes(a: set, b: set) -> list[tuple[str, str]]:
    """The pairs of a colour of ``a`` and one of ``b``, both coloured, of about one hue and one lightness."""
    clashes = []
    for x, y in itertools.product(a, b):
        (lx, cx, hx), (ly, cy, hy) = lch(x), lch(y)
        turn = abs(hx - hy) % 360
        if min(cx, cy) >= 10 and min(turn, 360 - turn) < HUE_APART and abs(lx - ly) < LIGHTNESS_APART:
            clashes.append(("#%02X%02X%02X" % x, "#%02X%02X%02X" % y))
    return clashes


def drawn_colours(heatmap) -> set[tuple[int, int, int]]:
    """The colours a heatmap's piecewise-constant colour scale gives the ``z`` values it draws."""
    z = np.asarray(heatmap.z, dtype=float)
    scale = heatmap.colorscale
    found = set()
    values = np.unique(z[np.isfinite(z)])
    lo = values.min() if heatmap.zmin is None else heatmap.zmin  # Plotly's autoscale without zmin, zmax
    hi = values.max() if heatmap.zmax is None else heatmap.zmax
    for v in values:
        t = (v - lo) / (hi - lo) if hi > lo else 0.0
        found.add(rgb([color for position, color in scale if position <= t][-1]))  # a step's later end wins
    return found


def key_text(text: str | None) -> str:
    return (text or "").replace(cell_style.COLORBAR_TITLE_GAP, "").replace("<br>", " ")


def block_table_page(sharing: bool, prefix: int = 0):
    """The Block table page's four charts, as the page draws them."""
    config = DecodeConfig(batch_size=4, context_lens=(236, 114, 57, 205), block_size=16, shared_prefix=prefix,
                          prefix_groups=2 if prefix else 1)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    refs = table_ref_counts(tables, len(owner))
    if sharing:
        b = shared_prefix_batch(config.lengths, 16, config.num_blocks, common_prompt=64, samples=2)
        tables, refs = b.block_tables, b.ref_counts
    shares = bool((refs > 1).any())
    table = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks,
                                             ref_counts=refs if shares else None)
    pool = (sharing_figures.pool_ref_count_figure(refs, tables, 16) if shares
            else pool_figures.pool_figure(owner, tables, config.lengths, 16))
    walk = walk_figures.token_walk_figure(tables[0], 236, 16, 0, config.num_blocks)
    path = walk_figures.block_walk_figure(tables[0], 236, 16, 0, config.num_blocks)
    return table, pool, walk, path, shares


@pytest.mark.parametrize("sharing, prefix", [(False, 0), (True, 0), (False, 40)])
def test_block_table_page_gives_each_meaning_its_own_palette(sharing, prefix):
    table, pool, walk, path, shares = block_table_page(sharing, prefix)
    assert shares == (sharing or prefix > 0)
    meanings = {
        "physical block id": colours(table.data[0].colorscale, walk.data[0].colorscale, path.data[0].marker.colorscale),
    }
    if shares:
        meanings["sequences holding the block"] = colours(pool.data[0].colorscale, legend_colours(pool, lambda t: True))
    else:
        meanings["sequence"] = colours(pool.data[0].colorscale,
                                       legend_colours(pool, lambda t: bool(t.meta and "sequence" in t.meta)))
    assert_disjoint(meanings)
    # Each chart names what its colour means, beside the scale or on the legend.
    assert key_text(table.data[0].colorbar.title.text) == cell_style.BLOCK_KEY
    assert key_text(walk.data[0].colorbar.title.text) == cell_style.BLOCK_KEY
    assert pool.layout.legend.title.text == (cell_style.POOL_REF_COUNT_KEY if shares else cell_style.SEQUENCE_KEY)
    for fig in (table, pool, walk):
        assert "colour = " in fig.layout.title.subtitle.text


def test_every_sequence_colour_of_a_large_batch_keeps_clear_of_the_other_meanings():
    """Review at 1280x720, batch 64: the pool's colours reached the blues (#2E91E5,
    #511CFB, #2ED9FF) of the block table beside it. Every colour a 64-sequence pool
    draws, its whole cycle, stays apart from the block ids' blues, the new-token star's
    yellow, and the reference counts' oranges (the Serving
    simulation draws them beside its table by sequence), in Lab and in hue."""
    config = DecodeConfig(batch_size=64, context_lens=tuple(1 + (37 * i * i) % 2000 for i in range(64)),
                          block_size=16, query_lens=3, window=256)
    tables, owner = (t.numpy() for t in assign_blocks(config))
    table = cache_figures.block_table_figure(tables, config.lengths, 16, config.num_blocks, window=256,
                                             query_lens=config.query_lengths)
    pool = pool_figures.pool_figure(owner, tables, config.lengths, 16)
    used = drawn_colours(pool.data[0]) - {rgb(c) for c in NEUTRAL}
    assert used == colours(style.SEQUENCE_COLORS)  # 64 sequences: every colour of the cycle
    (stars,) = [t for t in table.data if t.name == cell_style.NEW_TOKENS]
    meanings = {
        "sequence": used,
        "physical block id": colours(table.data[0].colorscale),
        "new tokens": {rgb(stars.marker.color)},
        "sequences holding the block": colours(style.REF_COUNT_COLORS, sharing_figures.REF_LEVEL_COLORS),
    }
    for meaning, others in meanings.items():
        if meaning != "sequence":
            pair = {"sequence": used, meaning: others}
            assert_disjoint(pair)
            assert not hue_clashes(used, others), (meaning, hue_clashes(used, others))


def test_the_old_sequence_blues_would_clash_with_the_block_ids():
    """The check above catches what the review saw: the old palette's blues, though
    15 to 80 apart from the scale's in Lab, share its hue."""
    blues = colours(style.BLOCK_COLORSCALE)
    for old in ("#2E91E5", "#511CFB", "#2ED9FF"):
        assert hue_clashes({rgb(old)}, blues), old


def test_the_block_table_and_the_sharing_pool_no_longer_share_dark_purple():
    """Review at 1280x720: the block table coloured block 0 dark purple (Viridis) and
    the sharing pool beside it coloured a block held by 4 sequences the same."""
    table, pool, *_ = block_table_page(sharing=True)
    # Side by side in the sharing view: a block id never passes for a count, not even nearly.
    assert apart(colours(table.data[0].colorscale), colours(pool.data[0].colorscale)) >= 40


def kernel_page():
    """The Inside the kernel page's four charts for a row of 4 splits, as the page draws them."""
    config, tables, plan, trace = kernel_trace(num_splits=4)
    work = kernel_view.work_list(plan, config.lengths, query_group_size=2)
    return (work_list_figures.work_list_figure(work, config.lengths, 16, highlight=0),
            kernel_figures.kernel_walk_figure(trace.tiles, 300, 16, plan.block_n, num_blocks=config.num_blocks),
            kernel_figures.online_softmax_figure(trace.tiles, final_error=trace.max_abs_error),
            kernel_figures.split_merge_figure(trace.splits))


def test_kernel_page_gives_each_meaning_its_own_palette():
    work, walk, softmax, merge = kernel_page()
    programs = next(t for t in work.data if t.name == "programs")
    lines = [t.line.color for t in softmax.data if re.fullmatch(r"split \d+", t.name)]
    assert len(set(lines)) == 4
    assert_disjoint({
        "physical block id": colours(walk.data[0].marker.colorscale),
        "split": colours(lines, merge.data[0].marker.color, merge.data[1].marker.color),
        "launch order": colours(programs.marker.color),
    })
    assert key_text(walk.data[0].marker.colorbar.title.text) == cell_style.BLOCK_KEY
    assert softmax.layout.legend.title.text == kernel_figures.SPLIT_KEY
    assert "colour and number = launch order" in work.layout.title.subtitle.text


def test_the_palettes_are_disjoint_everywhere():
    """The palettes themselves never share a colour, whichever page draws them, and
    those that share a page (the Serving simulation's pool by reference count beside
    its table by sequence too) stay apart."""
    palettes = {
        "physical block id": colours(style.BLOCK_COLORSCALE),
        "sequence": colours(style.SEQUENCE_COLORS),
        "sequences holding the block": colours(style.REF_COUNT_COLORS, sharing_figures.REF_LEVEL_COLORS),
        "split": colours(style.SPLIT_COLORS, style.SPLIT_COLORSCALE),
        "launch order": colours(style.LAUNCH_ORDER_COLORSCALE),
        "share held by this batch": colours(style.BATCH_SHARE_COLORSCALE),
    }
    assert_disjoint(palettes, min_apart=0)
    assert not {rgb(c) for c in NEUTRAL} & set().union(*palettes.values())
    for page in (("physical block id", "sequence", "sequences holding the block"),
                 ("physical block id", "split", "launch order")):
        assert_disjoint({meaning: palettes[meaning] for meaning in page})


def test_reference_counts_darken_with_more_holders():
    top = 6
    lightness = [sum(rgb(sharing_figures.ref_color(k, top))) for k in range(1, top + 1)]
    assert lightness == sorted(lightness, reverse=True) and len(set(lightness)) == top
    assert sharing_figures.ref_color(0, top) == style.FREE_COLOR
    assert np.all(np.diff([sum(rgb(c)) for c in sharing_figures.REF_LEVEL_COLORS]) < 0)


#: Thin lines across a chart are told apart less easily than cells: the Serving
#: simulation's metric lines stay this far from every other meaning of the page.
METRIC_APART = 25


def test_serving_page_metric_lines_keep_apart_from_its_palettes():
    """Issue 27: the Serving simulation's metric lines were teal #0F766E, amber #F59E0B and red #DC2626, which
    read as sequences 5, 9 and 2 of the pool and the tables beside (and the amber as a reference count). Each
    metric line takes a colour of its own, far from the page's sequences, reference counts, block ids and greys."""
    from explorer.serving import figures as serving_figures
    from explorer.serving.history import simulate
    from explorer.serving.traffic import LengthDist, ServingConfig

    config = ServingConfig(num_blocks=48, block_size=4, max_batch_size=5, arrival_rate=0.6,
                           prompt_len=LengthDist("long-tail", 2, 40), output_len=LengthDist("uniform", 2, 20), seed=3)
    fig = serving_figures.serving_timeline_figure(simulate(config, 30).metrics, step=10, num_blocks=48)
    lines = {t.name: rgb(t.line.color) for t in fig.data if t.name in serving_figures.METRIC_COLORS}
    assert set(lines) == set(serving_figures.METRIC_COLORS)
    others = {
        "sequence": colours(style.SEQUENCE_COLORS),
        "sequences holding the block": colours(style.REF_COUNT_COLORS, sharing_figures.REF_LEVEL_COLORS),
        "physical block id": colours(style.BLOCK_COLORSCALE),
        "free, unallocated or outside the batch": {rgb(c) for c in NEUTRAL},
    }
    for name, line in lines.items():
        for meaning, palette in others.items():
            assert apart({line}, palette) >= METRIC_APART, f"the {name!r} line comes near a {meaning} colour"
    for (a, ca), (b, cb) in itertools.combinations(lines.items(), 2):
        assert apart({ca}, {cb}) >= METRIC_APART, (a, b)


def test_serving_page_gives_each_mark_shape_one_meaning():
    """Issue 27 review: a diamond meant "recycled" (black, in the pool) and "shared" (white, in the running
    block tables) on one page. Each marker symbol drawn on the Serving page's pool and tables now means one
    thing (squares are the colour keys' legend entries and the click targets), and a shared block is the
    Block table page's mark."""
    from explorer.marks import PAGE_MARKS, SHARED_MARK
    from explorer.serving import figures as serving_figures
    from explorer.serving import table_figures
    from explorer.serving.history import simulate
    from explorer.serving.traffic import LengthDist, ServingConfig

    config = ServingConfig(num_blocks=64, block_size=8, max_batch_size=6, arrival_rate=0.05,
                           prompt_len=LengthDist("long-tail", 4, 40), output_len=LengthDist("long-tail", 4, 24),
                           seed=0, system_prompt=16, samples=2)
    history = simulate(config, 200)
    record, c = history.records[195], history.changes(195)
    tables = record.block_tables()
    refs = np.bincount(record.blocks, minlength=64)
    pool = serving_figures.serving_pool_figure(
        record.pool_owner(), tables, record.context_lens, 8, taken=c.taken, freed=c.freed, recycled=c.recycled,
        copied=c.copied, revived=c.revived, sharing=True, seq_ids=record.seq_ids)
    table = table_figures.running_tables_figure(tables, record.context_lens, 8, 64, seq_ids=record.seq_ids,
                                                ref_counts=refs)
    meanings: dict[str, set[str]] = {}
    for t in (*pool.data, *table.data):
        if t.type == "scatter" and t.mode == "markers" and t.marker.symbol not in (None, "square"):
            meanings.setdefault(t.marker.symbol, set()).add(t.name)
    assert {"recycled", "shared block (2+ sequences)"} <= set().union(*meanings.values())
    assert all(len(names) == 1 for names in meanings.values()), meanings
    assert len({m.symbol for m in PAGE_MARKS}) == len(PAGE_MARKS)
    # The Block table page's shared mark is the serving tables' one.
    table_page = block_table_page(True)[0]
    (ours,) = [t for t in table.data if t.name == SHARED_MARK.name]
    (theirs,) = [t for t in table_page.data if t.name == SHARED_MARK.name]
    for mark in (ours, theirs):
        assert (mark.marker.symbol, mark.marker.color, mark.marker.line.color) == (
            SHARED_MARK.symbol, SHARED_MARK.fill, SHARED_MARK.line)


def test_a_batch_past_the_palette_says_its_colours_repeat():
    """Re-review of issue 27 at ?batch=64: the pool said "colour = sequence" with a
    legend of only "free" and "partly filled": 64 sequences in 12 colours, and no
    word that a colour stands for several. The legend's title and the caption say so."""
    from explorer.cache import view as cache_view

    n = len(style.SEQUENCE_COLORS)
    for batch, repeats in ((n, False), (n + 1, True), (64, True)):
        config = DecodeConfig(batch_size=batch, context_lens=[40] * batch, block_size=16)
        tables, owner = (t.numpy() for t in assign_blocks(config))
        fig = pool_figures.pool_figure(owner, tables, config.lengths, 16)
        title = fig.layout.legend.title.text
        listed = [t.meta["sequence"] for t in fig.data if t.meta and "sequence" in t.meta]
        assert len(listed) == (0 if repeats else batch)
        assert (f"repeats every {n} sequences" in title) == repeats, (batch, title)
        caption = cache_view.pool_caption(len(owner), False, False, 1, n if batch > n else None)
        assert (f"Colours repeat every {n} sequences" in caption) == repeats


def test_serving_page_metric_lines_take_hues_of_their_own():
    """Issue 27 re-review: "blocks in use" was Triton's blue (the block-size chart's latency line) and of the
    block ids' hue; "wasted slots" a purple beside the sequences' lavender. Each metric line, and the sharing
    chart's "with sharing" (blocks in use too), keeps clear of the sequences', reference counts' and block ids'
    hues and of Triton's line, and the lines of one another."""
    from explorer.serving import figures as serving_figures

    lines = {name: rgb(c) for name, c in serving_figures.METRIC_COLORS.items()}
    assert rgb(sharing_figures.SHARED_LINE_COLOR) == lines["blocks in use"]  # one meaning, one colour
    others = {
        "sequence": colours(style.SEQUENCE_COLORS),
        "sequences holding the block": colours(style.REF_COUNT_COLORS, sharing_figures.REF_LEVEL_COLORS),
        "physical block id": colours(style.BLOCK_COLORSCALE),
        "Triton's latency line": {rgb(style.impl_color("triton"))},
    }
    for name, line in lines.items():
        for meaning, palette in others.items():
            assert apart({line}, palette) >= METRIC_APART, (name, meaning)
            assert not hue_clashes({line}, palette), (name, meaning, hue_clashes({line}, palette))
    for (a, ca), (b, cb) in itertools.combinations(lines.items(), 2):
        assert not hue_clashes({ca}, {cb}), (a, b)


def test_serving_page_marks_take_no_sequence_colour():
    """Issue 27 re-review: the "revived" pentagon was filled green (#22C55E) among the sequences' greens. A mark
    on the pool or the tables is told by its shape and drawn in black, white or grey, or (the copy star) in a
    colour far from every sequence's and of another hue."""
    from explorer.marks import PAGE_MARKS

    sequences = colours(style.SEQUENCE_COLORS)
    for mark in PAGE_MARKS:
        for colour in (mark.fill, mark.line):
            if lch(rgb(colour))[1] < 10:
                continue  # black, white, grey
            assert apart({rgb(colour)}, sequences) >= METRIC_APART, (mark.name, colour)
            assert not hue_clashes({rgb(colour)}, sequences), (mark.name, colour)


def ciede2000(x: str, y: str) -> float:
    """The CIEDE2000 colour difference of two ``#RRGGBB`` colours (Sharma, Wu and Dalal 2005; Lab of
    :func:`~test_figures_style._lab`, D65): about 1 is the least a viewer notices; it weighs hue and
    chroma differences of strong colours less than CIE76 does, as the eye does."""
    return _ciede2000(_lab(x), _lab(y))


def _ciede2000(lab1, lab2) -> float:
    (l1, a1, b1), (l2, a2, b2) = (tuple(float(v) for v in lab) for lab in (lab1, lab2))
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    h1, h2 = (np.degrees(np.arctan2(b, a)) % 360 if c else 0.0 for a, b, c in ((a1, b1, c1), (a2, b2, c2)))
    turn = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    d_h = 2 * np.sqrt(c1 * c2) * np.sin(np.radians(turn / 2))
    l_mean, c_mean = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (1 - 0.17 * np.cos(np.radians(h_mean - 30)) + 0.24 * np.cos(np.radians(2 * h_mean))
         + 0.32 * np.cos(np.radians(3 * h_mean + 6)) - 0.20 * np.cos(np.radians(4 * h_mean - 63)))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_mean, 1 + 0.015 * c_mean * t
    r_t = (-2 * np.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7))
           * np.sin(np.radians(60 * np.exp(-(((h_mean - 275) / 25) ** 2)))))
    dl, dc, dh = (l2 - l1) / s_l, (c2 - c1) / s_c, d_h / s_h
    return float(np.sqrt(dl ** 2 + dc ** 2 + dh ** 2 + r_t * dc * dh))


@pytest.mark.parametrize("lab1, lab2, expected", [  # Sharma, Wu and Dalal's test data, pairs 1, 7, 17, 25
    ((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425), ((50, 0, 0), (50, -1, 2), 2.3669),
    ((50, 2.5, 0), (73, 25, -18), 27.1492), ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
])
def test_ciede2000_gives_the_published_differences(lab1, lab2, expected):
    assert _ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


#: Sequence colours stay this far apart in CIEDE2000 (the plotly colours before came 14.2 apart:
#: #00A08B and #00CC96, #117733 and #6C7C32, #1CA71C and #86CE00, the greens the review could not tell apart).
SEQUENCES_APART_DE00 = 19
#: ... this far from every block id, reference count and the new-token star ...
OTHER_MEANINGS_APART_DE00 = 22
#: ... and this far from the greys of free, outside the batch and unallocated.
GREYS_APART_DE00 = 24
#: The least WCAG contrast of a cell's id against its sequence colour, in the text colour Plotly
#: writes on it (of white and its dark grey #444, the one of more contrast: ``Color.contrast``).
MIN_TEXT_CONTRAST = 3.5


def wcag_contrast(x: str, y: str) -> float:
    def luminance(color):
        c = np.array(rgb(color)) / 255
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    hi, lo = sorted((luminance(x), luminance(y)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_sequence_colours_are_told_apart_from_one_another_and_from_every_other_meaning():
    """Issue 27 review (the back row, a 1280x720 projector): on the Serving simulation page three greens read
    alike. The twelve sequence colours are now far apart in CIEDE2000, pairwise and from the block ids' blues,
    the reference counts' oranges, the new-token star and the greys, and an id written on any of them reads."""
    palette = style.SEQUENCE_COLORS
    assert len(palette) == 12 and len(set(palette)) == 12
    closest = min((ciede2000(a, b), a, b) for a, b in itertools.combinations(palette, 2))
    assert closest[0] >= SEQUENCES_APART_DE00, closest
    others = [c for _, c in style.BLOCK_COLORSCALE] + [*style.REF_COUNT_COLORS, *sharing_figures.REF_LEVEL_COLORS,
                                                       cell_style.NEW_TOKEN_COLOR]
    nearest = min((ciede2000(a, b), a, b) for a in palette for b in others)
    assert nearest[0] >= OTHER_MEANINGS_APART_DE00, nearest
    greyest = min((ciede2000(a, g), a, g) for a in palette for g in NEUTRAL)
    assert greyest[0] >= GREYS_APART_DE00, greyest
    for color in palette:
        assert max(wcag_contrast(color, "#FFFFFF"), wcag_contrast(color, "#444444")) >= MIN_TEXT_CONTRAST, color
    # The colours repeat: each one's neighbour in the cycle (the next sequence) is plainly another.
    assert min(ciede2000(a, b) for a, b in zip(palette, palette[1:] + palette[:1])) >= 2 * SEQUENCES_APART_DE00


#: Neighbouring reference counts (k and k + 1 holders, and the Serving simulation's levels) stay this far
#: apart in CIEDE2000: ColorBrewer's Oranges gave 1 and 2 holders #FDAE6B and #FD8D3C, 8.6 apart.
REF_STEPS_APART_DE00 = 14


def test_neighbouring_reference_counts_are_plainly_different_and_named_alike_on_both_pages():
    """Issue 27 review (a 1280x720 projector): the oranges of "1 sequence" and "2 sequences" read alike, and the
    Block table page wrote "one sequence" where the Serving simulation wrote "1 sequence". Each count up to the
    palette's length now takes its own colour of the palette, 14+ CIEDE2000 from the next, on both pages, and
    both pages' legends name a count in the same words."""
    from test_figures_serving import SHARED, _pool

    from explorer.serving.history import simulate
    palette = style.REF_COUNT_COLORS
    steps = [ciede2000(a, b) for a, b in itertools.pairwise(palette)]
    assert min(steps) >= REF_STEPS_APART_DE00, steps
    for top in range(2, len(palette) + 1):
        drawn = [sharing_figures.ref_color(k, top) for k in range(1, top + 1)]
        assert min(ciede2000(a, b) for a, b in itertools.pairwise(drawn)) >= REF_STEPS_APART_DE00, top
    levels = sharing_figures.REF_LEVEL_COLORS
    assert min(ciede2000(a, b) for a, b in itertools.pairwise(levels)) >= REF_STEPS_APART_DE00
    # Still oranges and browns (CIELAB hue 40 to 80 degrees), and clear of the greys.
    assert all(40 <= lch(rgb(c))[2] <= 80 and lch(rgb(c))[1] >= 30 for c in palette)
    assert min(ciede2000(c, g) for c in palette for g in NEUTRAL) >= GREYS_APART_DE00
    # The Block table's sharing pool (counts 1, 2 and 4) and the Serving simulation's (levels) say the same.
    _, block_pool, *_ = block_table_page(sharing=True)
    history = simulate(SHARED, 150)
    serving_pool = _pool(history, int(history.metrics["copied"].to_numpy().argmax()), color_by="reference count",
                         sharing=True)

    def squares(fig):
        return {t.name: t.marker.color for t in fig.data if t.type == "scatter" and t.marker.symbol == "square"
                and t.hoverinfo == "skip"}
    block, serving = squares(block_pool), squares(serving_pool)
    for name in ("1 sequence", "2 sequences"):
        assert rgb(block[name]) == rgb(serving[name]), name
    assert ciede2000(block["1 sequence"], block["2 sequences"]) >= REF_STEPS_APART_DE00
