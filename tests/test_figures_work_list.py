"""The launch's work list (explorer.kernel.view.work_list) and its figure:
every needed block of every drawn row read by exactly one program, labelled by
launch order; the balanced plan of a ragged batch and the equal splits of a
uniform one; shared-prefix programs; sampled batches."""

import numpy as np
import pytest

from explorer import limits
from explorer.kernel import view as kernel_view
from explorer.kernel import work_list_figures
from paged_attention import DecodeConfig, assign_blocks
from paged_attention.work_list import build_work_list


def setup(context_lens, block_size=16, num_kv_heads=2, **kw):
    # One KV head leaves the CPU's small program budget (4 "SMs") to few rows: long ones get cut.
    config = DecodeConfig(batch_size=len(context_lens), context_lens=context_lens, num_heads=3 * num_kv_heads,
                          num_kv_heads=num_kv_heads,
                          head_dim=16, block_size=block_size, dtype="float32", **kw)
    tables = assign_blocks(config)[0].numpy()
    groups = kernel_view.prefix_groups(config, tables)
    plan = kernel_view.launch_plan(config, tables, groups=groups)
    prefix = kernel_view.prefix_plan(config, tables, groups)
    work = kernel_view.work_list(plan, config.lengths, groups=groups, prefix=prefix, query_group_size=3)
    return config, plan, prefix, groups, work


def assert_each_block_read_once(work, lengths, block_size):
    for seq, n in enumerate(lengths):
        rows = work[work["seq"] == seq]
        covered = np.concatenate([np.arange(a, b) for a, b in zip(rows["first_block"], rows["end_block"])] + [[]])
        assert np.array_equal(np.sort(covered), np.arange(-(-n // block_size))), seq
        own = rows[rows["pass"] == "own"]
        assert len(own) >= 1  # every sequence has the program that writes its output


RAGGED = (2000, 40, 97, 300, 0, 64)


def test_ragged_batch_gets_balanced_pieces_longest_first():
    config, plan, _, _, work = setup(RAGGED, num_kv_heads=1)
    assert plan.balanced
    assert_each_block_read_once(work, config.lengths, 16)
    assert (work["pass"] == "own").all()
    # One row per program of the launch's own work list, in its order.
    items = build_work_list(plan, kernel_view.decode_shape(config, np.zeros((6, 1))).context_lens).items
    assert list(work["order"]) == list(range(len(items))) and list(work["seq"]) == items[:, 0].tolist()
    sizes = (work["end_block"] - work["first_block"]).to_numpy()
    assert np.all(np.diff(sizes) <= 0)  # longest pieces first
    for seq, rows in work.groupby("seq"):  # about equal pieces, none over the cap
        lens = (rows["end_block"] - rows["first_block"]).to_numpy()
        assert lens.max() <= plan.blocks_per_split
        assert len(rows) == len(plan.sequence_items(config.lengths[seq]))
    assert len(work[work["seq"] == 0]) > 1 and len(work[work["seq"] == 1]) == 1  # long cut, short whole
    text = kernel_view.work_list_summary(plan, work, config.num_kv_heads)
    assert text.startswith("**Balanced plan**")
    assert f"at most {plan.blocks_per_split} blocks" in text
    assert f"**{len(work)} programs per KV head**" in text


def test_uniform_batch_gets_equal_splits_in_sequence_order():
    config, plan, _, _, work = setup((1000,) * 4)
    assert not plan.balanced
    assert_each_block_read_once(work, config.lengths, 16)
    assert list(work["seq"]) == sorted(work["seq"])
    assert set(work["first_block"]) == set(range(0, 63, plan.blocks_per_split))
    text = kernel_view.work_list_summary(plan, work, config.num_kv_heads)
    assert text.startswith("**Equal splits**") and f"**{len(work)} programs per KV head**" in text


def test_shared_prefix_programs_read_the_group_blocks_once_per_group():
    config, plan, prefix, groups, work = setup((700, 420, 380, 900, 260), shared_prefix=256, prefix_groups=2)
    assert [g.sequences for g in groups] == [(0, 1, 2), (3, 4)]
    assert_each_block_read_once(work, config.lengths, 16)
    pre = work[work["pass"] == "prefix"]
    assert set(pre["seq"]) == {0, 1, 2, 3, 4}
    # One program per (group, piece) holds every member: its rows share one order and read the same blocks.
    for order, rows in pre.groupby("order"):
        assert rows["sequences"].nunique() == 1 and int(rows["sequences"].iloc[0]) == len(rows)
        assert rows[["first_block", "end_block"]].drop_duplicates().shape[0] == 1
    own = work[work["pass"] == "own"]
    assert (own["first_block"] >= 16).all() and (own["slot"] >= 1).all()  # after the prefix's slot
    text = kernel_view.work_list_summary(plan, work, config.num_kv_heads, prefix)
    assert "**prefix pass**" in text
    fig = work_list_figures.work_list_figure(work, config.lengths, 16, highlight=3)
    (bars,) = [t for t in fig.data if t.name == "prefix pass"]
    assert sorted(bars.text) == sorted(f"P{o}" for o in pre["order"])


@pytest.mark.parametrize("lengths", [RAGGED, (1000,) * 4])
def test_work_list_figure_draws_every_program_labelled_by_launch_order(lengths):
    config, plan, _, _, work = setup(lengths, num_kv_heads=1)
    fig = work_list_figures.work_list_figure(work, config.lengths, 16, highlight=3)
    bars = fig.data[0]
    assert bars.name == "programs"
    full = work[work["end_block"] > work["first_block"]]
    assert list(bars.text) == [str(o) for o in full["order"]]
    assert np.array_equal(np.array(bars.base, dtype=int), full["first_block"].to_numpy())
    custom = np.array(bars.customdata, dtype=int)
    rows, note = work_list_figures.work_rows(len(lengths), 3)
    assert note == "" and rows == list(range(len(lengths)))
    for seq, n in enumerate(config.lengths):  # each drawn row's needed blocks covered once
        mine = np.array(bars.y) == seq
        covered = np.concatenate([np.arange(b, b + k) for b, k in
                                  zip(np.array(bars.base)[mine].astype(int), np.array(bars.x)[mine].astype(int))]
                                 + [[]])
        assert np.array_equal(np.sort(covered), np.arange(-(-n // 16)))
        assert (custom[mine, 0] == seq).all()
    labels = list(fig.layout.yaxis.ticktext)
    assert labels[3] == "<b>▶ seq 3</b>" and labels[0] == "seq 0"
    band, outline = fig.layout.shapes
    assert (band.y0, band.y1) == (outline.y0, outline.y1) == (2.5, 3.5)
    assert (outline.x0, outline.x1) == (0, -(-lengths[3] // 16))
    if 0 in lengths:  # the empty sequence: a hatched bar of a readable width and its words, on its row
        by_name = {t.name: t for t in fig.data}
        rows = [seq for seq, n in enumerate(config.lengths) if n == 0]
        assert list(by_name["empty sequences"].y) == list(by_name["empty sequence label"].y) == rows
        assert all(w > 0 for w in by_name["empty sequences"].x)
        assert list(by_name["empty sequence label"].text) == [work_list_figures.EMPTY_LABEL] * len(rows)


def test_work_list_figure_samples_a_big_batch_and_keeps_the_traced_row():
    lengths = tuple(64 + 37 * (i % 11) for i in range(100))
    config, plan, _, _, work = setup(lengths)
    fig = work_list_figures.work_list_figure(work, config.lengths, 16, highlight=7)
    rows, note = work_list_figures.work_rows(100, 7)
    assert len(rows) <= limits.MAX_WORK_ROWS + 1 and 7 in rows and rows == sorted(rows)
    assert "sampled for the browser: every 4th sequence and the traced one" in note
    assert note in fig.layout.title.subtitle.text.replace("<br>", " ")
    bars = fig.data[0]
    drawn = work[work["seq"].isin(rows) & (work["end_block"] > work["first_block"])]
    assert len(bars.x) == len(drawn)
    assert sorted(set(np.array(bars.customdata)[:, 0].astype(int))) == rows
    assert len(fig.layout.yaxis.ticktext) == len(rows)
    assert fig.layout.yaxis.ticktext[rows.index(7)] == "<b>▶ seq 7</b>"


def test_work_list_figure_of_empty_contexts_says_so():
    config, plan, _, _, work = setup((0, 0))
    fig = work_list_figures.work_list_figure(work, config.lengths, 16)
    assert "empty" in fig.layout.annotations[0].text


def test_blocks_before_the_window_are_the_tiles_charts_grey_and_named():
    """Review 3 (issue 27, gpt-oss-20b): the blocks before the window of the traced row
    showed its cream band (the traced outline's orange), unexplained; the tiles chart draws
    them grey and names them. The work list draws them in that grey, as it looks over white,
    and its subtitle names them."""
    import re as regex

    from explorer.kernel import figures as kernel_figures
    from explorer.kernel.walk_layout import WINDOW_LABEL_BG

    config = DecodeConfig(batch_size=2, context_lens=(240, 100), num_heads=4, num_kv_heads=2, head_dim=16,
                          block_size=16, dtype="float32", window=64)
    tables = assign_blocks(config)[0].numpy()
    plan = kernel_view.launch_plan(config, tables)
    work = kernel_view.work_list(plan, config.lengths, query_group_size=2, window_starts=config.window_starts)
    fig = work_list_figures.work_list_figure(work, config.lengths, 16, highlight=0)
    (band,) = [t for t in fig.data if t.name == kernel_figures.OUTSIDE_WINDOW]
    skipped = [s // 16 for s in config.window_starts]
    assert list(band.y) == [i for i, b in enumerate(skipped) if b] and list(band.x) == [b for b in skipped if b]
    assert set(band.base) == {0}
    # The tiles chart's band, its translucent fill over the white plot, is this grey.
    walk = kernel_figures.kernel_walk_figure(
        kernel_view.trace_row(config, tables, 0, 0, plan=plan).tiles, 240, 16, plan.block_n,
        window_start=config.window_starts[0])
    (fill,) = [t.fillcolor for t in walk.data if t.name == kernel_figures.OUTSIDE_WINDOW]
    *rgb, alpha = (float(v) for v in regex.findall(r"[\d.]+", fill))
    over_white = [255 - alpha * (255 - c) for c in rgb]
    assert band.marker.color == WINDOW_LABEL_BG
    drawn = [int(band.marker.color[i:i + 2], 16) for i in (1, 3, 5)]
    assert all(abs(a - b) <= 1 for a, b in zip(drawn, over_white)), (drawn, over_white)  # 8-bit rounding
    assert band.marker.color not in (work_list_figures.HIGHLIGHT_LINE, work_list_figures.HIGHLIGHT_FILL)
    assert f"grey = {kernel_figures.OUTSIDE_WINDOW}" in fig.layout.title.subtitle.text.replace("<br>", " ")
    plain = work_list_figures.work_list_figure(*setup((240, 100))[4:], (240, 100), 16, highlight=0)
    assert all(t.name != kernel_figures.OUTSIDE_WINDOW for t in plain.data)
