"""AppTest suite for the Block table page: the table, the pool and the token walk
follow the sidebar, the sequence picker, the table-size limit and sampling, the
sharing scenario, the click that links the two charts, and the sidebar's shared
prefix shown as the Sharing scenario shows its own (marked table cells, the pool
coloured by reference count), every count saying whether it is logical or
physical. Assertions read the Plotly specs and metrics the page sends."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from test_app import BASE, TABLE, arr, assert_clean, chart, open_app

from explorer import settings as state
from explorer.cache.sharing import table_ref_counts
from explorer.cache.view import KV_BATCH_CARD, KV_CARD
from explorer.formatting import format_bytes
from paged_attention import assign_blocks
from paged_attention.inputs import OTHER

#: Four sequences of 128 tokens in blocks of 16, two groups sharing a 40-token prefix:
#: each group's first 2 blocks stand in both its members' rows.
PREFIX = {**BASE, "ctx_mode": "uniform", "ctx": "128", "block": "16", "prefix": "40", "prefix_groups": "2"}


def _layout(query):
    config = state.settings_from_query(query)[0].config()
    tables, owner = (t.numpy() for t in assign_blocks(config))
    return config, tables, owner, table_ref_counts(tables, config.num_blocks)


@pytest.mark.parametrize("layout", ["shuffled", "fragmented"])
def test_a_sidebar_shared_prefix_marks_and_counts_its_shared_blocks(layout):
    """Review at 1280x720: with the sidebar's shared prefix and Sharing off, no cell
    was marked and each shared block took one owner's colour. (A pool twice the
    batch's leaves the fragmented layout blocks that other sequences hold.)"""
    query = {**PREFIX, "layout": layout, "headroom": "100"}
    at = open_app(query, page=TABLE)
    assert_clean(at)
    config, tables, owner, refs = _layout(query)
    assert config.shared_blocks == 2 and refs.max() == 2 and int((refs > 1).sum()) == 4
    table = chart(at, "bt_table")
    (marks,) = [t for t in table["data"] if t["name"] == "shared block (2+ sequences)"]
    marked = {(int(s), int(j)) for s, j, _, _ in arr(marks["customdata"])}
    assert marked == {(s, j) for s in range(4) for j in range(2)}  # every member's first 2 logical blocks
    pool = chart(at, "bt_pool")
    assert pool["layout"]["title"]["text"] == "Physical block pool: sharing"
    z = arr(pool["data"][0]["z"]).ravel()[: config.num_blocks]
    assert np.array_equal(z, np.where(owner == OTHER, -1, refs))  # blocks outside the batch: their own colour
    legend = [t["name"] for t in pool["data"] if t.get("hoverinfo") == "skip" and t.get("name")]
    assert ((owner == OTHER).any() and "other sequences (not in batch)" in legend) == (layout == "fragmented")
    assert "2 sequences" in legend and any("shared prefix" in c.value for c in at.caption)


def test_every_count_says_whether_it_is_logical_or_physical():
    """ "Tokens cached" counted logical tokens beside "Blocks used" counting physical
    blocks, with no word saying which: a shared block's tokens counted once per member."""
    at = open_app(PREFIX, page=TABLE)
    assert_clean(at)
    config = state.settings_from_query(PREFIX)[0].config()
    values = {m.label: m.value for m in at.metric}
    deltas = {m.label: m.delta for m in at.metric}
    assert values["Tokens (logical)"] == f"{sum(config.lengths):,}" == "512"
    assert deltas["Tokens (logical)"] == f"{config.unique_tokens:,} stored (physical)" == "448 stored (physical)"
    assert values["Blocks used (physical)"] == f"{config.num_blocks_used:,}" == "28"
    assert "Wasted slots (physical)" in values
    # Without sharing the logical and physical counts agree, and no second count is shown.
    plain = open_app({**PREFIX, "prefix": "0"}, page=TABLE)
    assert {m.label: m.delta for m in plain.metric}["Tokens (logical)"] in (None, "")


@pytest.mark.parametrize("groups, words", [
    (1, "The sidebar's shared prefix: the first 4 logical blocks of every sequence point to the same physical "
        "blocks."),
    (2, "The sidebar's shared prefix: in each of 2 groups of consecutive sequences, the first 4 logical blocks of "
        "every member point to the same physical blocks."),
])
def test_the_shared_prefix_caption_counts_its_groups_and_names_the_mark_as_drawn(groups, words):
    """Review at 1280x720: one group read "in each of 1 group of consecutive sequences",
    and "a white diamond" named a diamond drawn outlined in black."""
    at = open_app({**PREFIX, "prefix": "64", "prefix_groups": str(groups)}, page=TABLE)
    assert_clean(at)
    (caption,) = [c.value for c in at.caption if c.value.startswith("The sidebar's shared prefix")]
    assert caption.startswith(words) and "1 group" not in caption
    (marks,) = [t for t in chart(at, "bt_table")["data"] if t["name"] == "shared block (2+ sequences)"]
    assert marks["marker"]["symbol"] == "diamond"
    assert (marks["marker"]["color"], marks["marker"]["line"]["color"]) == ("#FFFFFF", "#111827")  # white, black
    assert "A white diamond outlined in black (◇) marks a block more than one sequence holds" in caption
    (pool_words,) = [c.value for c in at.caption if c.value.startswith("Colour = how many sequences hold")]
    assert ("every sequence" in pool_words) == (groups == 1) and ("every member of its group" in pool_words) == (
        groups > 1)


def test_a_prefix_shorter_than_a_block_shares_no_block():
    """12 tokens of prefix in blocks of 16: every member's first block is its own
    (a copy), so the page draws the unshared view."""
    at = open_app({**PREFIX, "prefix": "12"}, page=TABLE)
    assert_clean(at)
    assert chart(at, "bt_pool")["layout"]["title"]["text"] == "Physical block pool"
    assert all("shared" not in (t.get("name") or "") for t in chart(at, "bt_table")["data"])


# -- the page -------------------------------------------------------------------

def test_block_table_default_page_matches_assign_blocks():
    at = open_app()
    assert_clean(at)
    assert at.title[0].value == "Block table"
    config = state.default_settings().config()
    tables, owner = assign_blocks(config)
    spec = chart(at, "bt_table")
    z = arr(spec["data"][0]["z"])
    t = tables.numpy()
    assert z.shape == t.shape
    assert np.array_equal(np.isnan(z), t < 0)
    assert np.array_equal(z[t >= 0], t[t >= 0])
    assert "physical block" in spec["data"][0]["hovertemplate"]
    assert spec["data"][1]["name"] == "unallocated (-1)"
    assert (t < 0).any()  # the default ragged batch shows unallocated entries
    pool = chart(at, "bt_pool")
    codes = arr(pool["data"][0]["z"]).ravel()[: len(owner)]
    assert np.array_equal(codes == 0, owner.numpy() == -1)
    walk = chart(at, "bt_walk")
    assert walk["layout"]["title"]["text"] == "Token walk of sequence 0"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Blocks used (physical)"] == f"{config.num_blocks_used:,}"
    assert {m.label: m.delta for m in at.metric}["Blocks used (physical)"] == f"of {config.num_blocks:,} in the pool"
    assert metrics["Tokens (logical)"] == f"{sum(config.lengths):,}"


def test_uniform_context_mode():
    at = open_app({"batch": "4"})
    at.number_input(key="sb_ragged_low").set_value(40).run()
    at.button_group(key="sb_context_mode").set_value("uniform").run()
    at.number_input(key="sb_context_len").set_value(100).run()
    assert_clean(at)
    z = arr(chart(at, "bt_table")["data"][0]["z"])
    assert z.shape == (4, 7) and np.isnan(z).sum() == 0  # 100 tokens = 7 blocks, none unallocated
    wasted = {m.label: m for m in at.metric}["Wasted slots (physical)"]
    assert wasted.value == f"{4 * (7 * 16 - 100)}"
    assert wasted.delta == f"{100 * 4 * (7 * 16 - 100) / (4 * 7 * 16):.1f}% of allocated"
    assert at.query_params["ctx_mode"] in ("uniform", ["uniform"])
    at.button_group(key="sb_context_mode").set_value("ragged").run()  # hidden fields kept their values
    assert_clean(at)
    assert at.number_input(key="sb_ragged_low").value == 40


def test_sequence_picker_drives_token_walk():
    at = open_app(BASE)
    at.number_input(key="bt_seq").set_value(3).run()
    assert_clean(at)
    spec = chart(at, "bt_walk")
    assert spec["layout"]["title"]["text"] == "Token walk of sequence 3"
    config = state.settings_from_query(BASE)[0].config()
    tables, _ = assign_blocks(config)
    z = arr(spec["data"][0]["z"])
    assert np.array_equal(z[:, 0], tables[3, : config.blocks_per_sequence[3]].numpy())
    n = config.blocks_per_sequence[3]  # the walk's sentence counts logical blocks, and says so
    assert any(f"in **{n} logical block{'s' * (n != 1)}**" in m.value for m in at.markdown)
    at.number_input(key="sb_batch_size").set_value(2).run()  # the picked sequence no longer exists
    assert_clean(at)
    assert at.number_input(key="bt_seq").value == 1


def test_table_too_large_is_refused():
    at = open_app({"batch": "4096", "ctx_mode": "uniform", "ctx": str(1 << 20), "block": "1"})
    assert not at.exception
    assert any("at most" in e.value for e in at.error)


@pytest.mark.slow
def test_large_table_is_sampled_and_stays_small():
    at = open_app({"batch": "256", "ctx_mode": "uniform", "ctx": "32768", "layout": "shuffled"}, timeout=120)
    assert_clean(at)
    spec = chart(at, "bt_table")
    assert arr(spec["data"][0]["z"]).size <= 20_000
    assert any("Sampled for the browser" in c.value for c in at.caption)
    assert any("Aggregated for the browser" in c.value for c in at.caption)
    assert sum(len(e.proto.spec) for e in at.get("plotly_chart")) < 8_000_000


def test_reruns_do_not_grow_memory():
    at = open_app(BASE)
    for seed in range(8):  # fill the bounded caches
        at.number_input(key="sb_seed").set_value(seed).run()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for seed in range(8, 20):
        at.number_input(key="sb_seed").set_value(seed).run()
    growth = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert_clean(at)
    assert growth < 8 * 2**20, f"grew {growth / 2**20:.1f} MiB over 12 reruns"


def _sharing_on(query):
    """The Block table page at ``query``, Sharing on: 2 samples per request, a 64-token common prompt."""
    at = open_app(query)
    at.toggle(key="bt_share").set_value(True).run()
    at.number_input(key="bt_samples").set_value(2).run()
    at.number_input(key="bt_common").set_value(64).run()
    return at


def test_block_table_sharing_scenario_marks_shared_cells_and_states_the_saving():
    from explorer.cache.sharing import shared_prefix_batch

    at = _sharing_on(BASE)
    assert_clean(at)
    config = state.settings_from_query(BASE)[0].config()
    b = shared_prefix_batch(config.lengths, config.block_size, config.num_blocks, 64, 2)
    block = config.kv_cache_bytes() // config.num_blocks
    saving = next(m.value for m in at.markdown if m.value.startswith("**Sharing saves"))
    # Each block count says physical or logical; the card beside it counts the same blocks, the pool's in its note.
    assert saving.startswith(f"**Sharing saves {b.blocks_saved} physical blocks of {b.blocks_unshared}**")
    assert f"holds {b.blocks_used} physical blocks" in saving and "one per logical block" in saving
    assert f"Physical blocks held by more than one sequence: {b.shared_blocks}" in saving
    kv = next(m for m in at.metric if m.label == KV_BATCH_CARD)
    assert kv.value == format_bytes(b.blocks_used * block, significant=3) and f"({kv.value})" in saving
    assert f"{config.num_blocks} physical blocks, free ones included" in kv.help
    assert format_bytes(b.blocks_saved * block, significant=3) in saving
    assert f"{b.cow_copies} copy-on-write copies" in saving and f"found {b.prefix_hits} of" in saving
    assert {m.label: m.value for m in at.metric}["Blocks used (physical)"] == str(b.blocks_used)
    table = chart(at, "bt_table")
    assert np.array_equal(arr(table["data"][0]["z"]), np.where(b.block_tables < 0, np.nan, b.block_tables),
                          equal_nan=True)
    (marks,) = [t for t in table["data"] if t["name"] == "shared block (2+ sequences)"]
    marked = arr(marks["customdata"])
    assert len(marked) == int((b.ref_counts[b.block_tables[b.block_tables >= 0]] > 1).sum())
    pool = chart(at, "bt_pool")
    assert pool["layout"]["title"]["text"] == "Physical block pool: sharing"
    assert np.array_equal(arr(pool["data"][0]["z"]).ravel()[: config.num_blocks], b.ref_counts)
    # The walk follows the shared table.
    walk = chart(at, "bt_walk")
    assert set(arr(walk["data"][0]["z"]).ravel()[~np.isnan(arr(walk["data"][0]["z"]).ravel())]) == \
        set(b.block_tables[0][b.block_tables[0] >= 0].tolist())
    # Off again: the unshared page, no marks.
    at.toggle(key="bt_share").set_value(False).run()
    assert_clean(at)
    assert all("shared" not in (d.get("name") or "") for d in chart(at, "bt_table")["data"])
    assert chart(at, "bt_pool")["layout"]["title"]["text"] == "Physical block pool"


def test_sharing_marks_its_copy_on_write_copies_and_says_which_prompts_are_short():
    """Review 3 (common prompt 64, 2 samples): the summary counted 2 copy-on-write copies that neither
    chart marked, and the caption said every prompt starts with the common prompt while sequence 2's
    request holds only 56 tokens of it. The copies get the Serving page's mark in the pool and in the
    table cells pointing to them, each with a legend entry; the caption names the requests' sequences
    and the short request's tokens and blocks."""
    from explorer.cache.sharing import shared_prefix_batch
    from explorer.marks import POOL_CHANGE_MARKS

    at = _sharing_on(BASE)
    assert_clean(at)
    config = state.settings_from_query(BASE)[0].config()
    b = shared_prefix_batch(config.lengths, config.block_size, config.num_blocks, 64, 2)
    assert b.cow_copies == len(b.copied) == 2 and all(b.ref_counts[k] == 1 for k in b.copied)
    star = POOL_CHANGE_MARKS["copied"]
    pool, table = chart(at, "bt_pool"), chart(at, "bt_table")
    (in_pool,) = [t for t in pool["data"] if t["name"] == star.name]
    assert sorted(int(k) for k in arr(in_pool["customdata"])[:, 0]) == sorted(b.copied)
    (in_table,) = [t for t in table["data"] if t["name"] == star.name]
    cells = {(int(s), int(j)) for s, j, _ in arr(in_table["customdata"])}
    assert cells == {(int(s), int(j)) for s, j in zip(*np.nonzero(np.isin(b.block_tables, b.copied)))}
    for mark in (in_pool, in_table):
        assert (mark["marker"]["symbol"], mark["marker"]["color"], mark["marker"]["line"]["color"]) == (
            star.symbol, star.fill, star.line) and mark.get("showlegend") is not False
    short = [s for s in range(config.batch_size) if b.prompt_lens[s] < 64]
    assert short == [2, 3] and b.prompt_lens[2] == config.lengths[2] - 1  # the short request: sequences 2 and 3
    words = " ".join(c.value for c in at.caption)
    assert "Each request's 2 samples are adjacent sequences: 0–1, 2–3." in words
    assert "Sequences 2 at a time" not in words and "held by every request's samples" not in words
    n = b.prompt_lens[2]
    assert f"sequences 2–3: a prompt of {n} tokens, {-(-n // config.block_size)} blocks" in words
    assert f"copy-on-write copy ({b.cow_copies} here)" in words and star.words in words


def test_copy_on_write_and_new_tokens_are_two_shapes_on_one_page():
    """Review 3: with Sharing on and draft tokens, a copy-on-write copy and a cell holding new tokens
    were both yellow stars. Every marker the page draws has one meaning (one legend name per symbol),
    each as registered in :data:`explorer.marks.ALL_MARKS`."""
    from explorer.marks import ALL_MARKS, NEW_TOKEN_MARK, POOL_CHANGE_MARKS

    at = _sharing_on({**BASE, "new_tokens": "3"})
    assert_clean(at)
    meanings: dict[str, set[str]] = {}
    for key in ("bt_table", "bt_pool", "bt_walk"):
        for t in chart(at, key)["data"]:
            symbol = (t.get("marker") or {}).get("symbol")
            # squares: the legend's colour swatches and the invisible click targets, not marks
            if t.get("type") == "scatter" and t.get("mode", "").startswith("markers") and symbol not in (None, "square"):
                meanings.setdefault(symbol, set()).add(t["name"])
    assert {NEW_TOKEN_MARK.name, POOL_CHANGE_MARKS["copied"].name} <= set().union(*meanings.values())
    assert all(len(names) == 1 for names in meanings.values()), meanings
    registered = {m.name: m.symbol for m in ALL_MARKS}
    assert all(registered[name] == symbol for symbol, names in meanings.items() for name in names
               if name in registered), meanings


def test_block_table_pick_outlines_both_charts_and_survives_a_smaller_pool():
    at = open_app(BASE)
    config = state.settings_from_query(BASE)[0].config()
    tables, _ = assign_blocks(config)
    block = int(tables[1, 0])
    at.session_state["bt_pick"] = (block, block)  # what a click on the cell stores
    at.run()
    assert_clean(at)
    outline = {t["name"]: t for t in chart(at, "bt_table")["data"]}["selected block"]
    xs, ys = outline["x"][:5], outline["y"][:5]
    assert (min(xs), max(xs), min(ys), max(ys)) == (-0.5, 0.5, 0.5, 1.5)  # sequence 1, logical block 0
    assert "selected block" in {t["name"] for t in chart(at, "bt_pool")["data"]}
    assert any(f"Block {block}: 1 table cell of 1 sequence (1) points here" in m.value for m in at.markdown)
    # A pick past the pool (left from other settings) is dropped without a fuss.
    at.session_state["bt_pick"] = (10**9, 10**9)
    at.run()
    assert_clean(at)
    assert all(t["name"] != "selected block" for t in chart(at, "bt_table")["data"])
    assert any("Click a table cell to find its block in the pool" in c.value for c in at.caption)


@pytest.mark.parametrize("order", ["prefix-first", "sharing-first"])
def test_block_table_sharing_scenario_with_a_sidebar_shared_prefix(order):
    """The sidebar's shared prefix makes the pool smaller than the unshared batch; the
    Sharing scenario lays out its own sharing from unshared tables, so it must size
    its pool for those (it crashed: "the batch holds 32 blocks without sharing but
    the pool has 27")."""
    query = {**BASE, "ctx_mode": "uniform", "ctx": "128", "prefix": "64", "prefix_groups": "2"}
    at = open_app(query if order == "prefix-first" else BASE)
    at.toggle(key="bt_share").set_value(True).run()
    if order == "sharing-first":
        at = open_app(query)
        at.toggle(key="bt_share").set_value(True).run()
    assert_clean(at)
    assert any(m.value.startswith("**Sharing saves") for m in at.markdown)


def test_block_table_sharing_refuses_a_batch_too_big_to_write_token_by_token():
    at = open_app({**BASE, "ctx_mode": "uniform", "ctx": "100000", "batch": "4"})
    at.toggle(key="bt_share").set_value(True).run()
    assert not at.exception
    assert any("at most 250,000 tokens" in e.value and "turn Sharing off" in e.value for e in at.error)
    assert not at.get("plotly_chart")


def test_cards_write_every_count_exactly():
    """Re-review of issue 27 at ?batch=4096: "357k" stood beside "24,343" and "27,385"
    in one row of cards; then every count went to three significant figures, and at
    ?batch=32&lo=100&hi=4000 "30,100 tokens" and "1,900 blocks" stood beside "227 wasted
    slots", which nobody could check by hand. Counts are exact, with thousands separators."""
    from explorer.bench.readouts import memory_summary
    from explorer.cache.view import table_cards

    config = state.settings_from_query({**BASE, "batch": "4096"})[0].config()
    mem = memory_summary(config)
    cards = table_cards(config, mem, None, False, pool_blocks=config.num_blocks)
    values = {c.label: c.value for c in cards}
    assert values["Sequences"] == "4,096"
    assert values["Tokens (logical)"] == f"{sum(config.lengths):,}"
    assert values["Blocks used (physical)"] == f"{config.num_blocks_used:,}"
    assert values["Wasted slots (physical)"] == f"{config.wasted_slots:,}"
    for card in cards[:4]:
        assert "k" not in card.value and "M" not in card.value, card
    assert cards[2].delta == f"of {config.num_blocks:,} in the pool"


def test_the_cards_and_the_pool_chart_count_the_same_blocks_exactly():
    """Review at 1280x720 (?batch=32&ctx_mode=ragged&lo=100&hi=4000): the Blocks used
    card said "of 2,130 in the pool" beside the pool chart's "2,134 blocks"."""
    query = {"batch": "32", "ctx_mode": "ragged", "lo": "100", "hi": "4000"}
    at = open_app(query, page=TABLE)
    assert_clean(at)
    config = state.settings_from_query(query)[0].config()
    pool = chart(at, "bt_pool")
    drawn = int(pool["layout"]["title"]["subtitle"]["text"].split(" blocks")[0].replace(",", ""))
    cards = {m.label: m for m in at.metric}
    assert drawn == config.num_blocks == 2134
    assert cards["Blocks used (physical)"].delta == f"of {drawn:,} in the pool"
    assert cards["Blocks used (physical)"].value == f"{config.num_blocks_used:,}"
    assert cards["Tokens (logical)"].value == f"{sum(config.lengths):,}"
    wasted = config.num_blocks_used * config.block_size - sum(config.lengths)
    assert cards["Wasted slots (physical)"].value == f"{wasted:,}" == f"{config.wasted_slots:,}"


def test_the_kv_cache_card_says_it_is_one_layer_and_adds_up_the_model():
    """Review at 1280x720: with the Llama-3.1-8B preset (32 layers) the card's 2.95 MB
    read as the model's cache; it is one layer's K and V pools."""
    at = open_app(BASE, page=TABLE)
    config = state.settings_from_query(BASE)[0].config()
    kv = next(m for m in at.metric if m.label == KV_CARD)
    assert "one layer" in kv.label
    assert kv.value == format_bytes(config.kv_cache_bytes(), significant=3)
    assert kv.delta == f"{format_bytes(32 * config.kv_cache_bytes(), significant=3)} for 32 layers"
    custom = open_app({**BASE, "preset": "Custom", "heads": "4", "kv_heads": "2", "head_dim": "32"}, page=TABLE)
    config = state.settings_from_query({**BASE, "preset": "Custom", "heads": "4", "kv_heads": "2",
                                        "head_dim": "32"})[0].config()
    kv = next(m for m in custom.metric if m.label == KV_CARD)
    assert kv.delta == f"{format_bytes(config.kv_cache_bytes() // config.num_blocks, significant=3)} per block"


def test_block_table_shared_marks_sit_inside_their_cells():
    """Re-review of issue 27 (1280x720, presentation): the table's shared diamonds sat
    over each cell's top-left border. Placed as the Serving tables place theirs: inside
    the cell, in its top-left corner clear of its id."""
    at = open_app(BASE)
    at.toggle(key="bt_share").set_value(True).run()
    assert_clean(at)
    table = chart(at, "bt_table")
    heat = table["data"][0]
    (marks,) = [t for t in table["data"] if t["name"] == "shared block (2+ sequences)"]
    x, y = arr(marks["x"]).astype(float), arr(marks["y"]).astype(float)
    assert len(x) > 0
    seqs, cols = arr(marks["customdata"])[:, 0].astype(float), arr(marks["customdata"])[:, 1].astype(float)
    # In its own cell's top-left corner (a later review: the mark sat over ids; its box is checked clear of the
    # id in tests/test_marks_clear_of_ids.py).
    assert ((x > cols - 0.5) & (x < cols)).all(), x - cols
    assert heat.get("texttemplate") is not None  # the ids are written: the mark goes in a corner clear of them
    lift = seqs - y  # rows grow downwards: above the row's centre, inside the cell's top edge (0.5)
    assert ((lift > 0) & (lift < 0.5)).all(), lift


def test_kv_card_bytes_are_the_drawn_pools():
    """Second review of issue 27 (?prefix=32&batch=4&new_tokens=2&window=64, Sharing
    on): the KV cache card said 2.49 MB, the sidebar pool's bytes, while its help
    named the sharing scenario's pool of 45 blocks (45 x 65,536 = 2,949,120 bytes).
    The card's bytes are the drawn pool's blocks times one block's bytes."""
    from explorer.bench.readouts import memory_summary
    from explorer.cache.view import table_cards

    config = state.settings_from_query({**BASE, "batch": "4"})[0].config()
    mem = memory_summary(config)
    pool = config.num_blocks + 7  # a larger pool than the sidebar's, as the sharing scenario draws
    (card,) = [c for c in table_cards(config, mem, None, False, pool_blocks=pool) if c.label == KV_CARD]
    assert f"whole pool of {pool:,} physical blocks" in card.help
    assert f"{pool * mem.block_bytes:,} bytes;" in card.help
    assert card.value == format_bytes(pool * mem.block_bytes)
    (same,) = [c for c in table_cards(config, mem, None, False, pool_blocks=config.num_blocks) if c.label == KV_CARD]
    assert same.value == format_bytes(mem.kv_cache_bytes)  # the sidebar's own pool: unchanged


def test_sharing_says_it_sets_the_sidebar_prefix_aside():
    """Review (#4): with the sidebar's shared prefix and Sharing on, the scenario drew
    its own sharing and the sidebar's prefix was dropped without a word."""
    at = open_app(PREFIX, page=TABLE)
    assert not [i for i in at.info if "set aside" in i.value]  # Sharing off: the prefix is drawn
    at.toggle(key="bt_share").set_value(True).run()
    assert_clean(at)
    common, samples = at.number_input(key="bt_common").value, at.number_input(key="bt_samples").value
    (note,) = [i.value for i in at.info if "set aside" in i.value]
    assert note.startswith("**The sidebar's shared prefix of 40 tokens in 2 groups is set aside** while the "
                           "Sharing scenario draws its own")
    assert f"a common prompt of {common} tokens, {samples} samples per request" in note
    at.toggle(key="bt_share").set_value(False).run()
    assert not [i for i in at.info if "set aside" in i.value]
    bare = open_app({**PREFIX, "prefix": "0"}, page=TABLE)  # nothing to set aside
    bare.toggle(key="bt_share").set_value(True).run()
    assert_clean(bare)
    assert not [i for i in bare.info if "set aside" in i.value]


@pytest.mark.parametrize("sharing", [False, True])
def test_the_window_note_counts_logical_blocks_and_the_physical_ones_behind_them(sharing):
    """Review (#5): "Blocks read: 15 of 21" did not say logical or physical. It counts
    table entries (logical blocks); with shared blocks (the sidebar's prefix, or the
    Sharing scenario's) it names the distinct physical blocks behind them too,
    counted here token by token from the table the page draws."""
    query = {**PREFIX, "window": "40"}
    at = open_app(query, page=TABLE)
    if sharing:
        at.toggle(key="bt_share").set_value(True).run()
    assert_clean(at)
    config = state.settings_from_query(query)[0].config()
    tables = np.where(np.isnan(z := arr(chart(at, "bt_table")["data"][0]["z"]).astype(float)), -1, z).astype(int)
    read = {(s, t // 16) for s, n in enumerate(config.lengths) for t in range(max(0, n - 40), n)}
    held = {(s, t // 16) for s, n in enumerate(config.lengths) for t in range(n)}
    physical = len({tables[c] for c in read}), len({tables[c] for c in held})
    (note,) = [m.value for m in at.markdown if "blocks read:" in m.value]
    assert f"**Logical blocks read: {len(read)} of {len(held)} (window 40); physical blocks: " \
           f"{physical[0]} of {physical[1]}, a shared block counted once**" in note
    assert physical[1] < len(held)  # the two counts differ here: some block is shared


def test_card_values_too_long_for_their_cards_are_drawn_smaller():
    """A row of cards keeps Streamlit's value size while every value fits its card's
    share of the row (nine characters in a fifth), and draws the whole row smaller, in
    proportion, when one does not: "32,768,000" in the Block table's Tokens card
    (1.1 of 5.5 of the row) at nine tenths."""
    from explorer.cards import Card
    from ui.tables import VALUE_CHARS_PER_ROW, value_scale

    widths = [0.75, 1.1, 1.25, 1.25, 1.15]
    row = [Card("Sequences", "1,024"), Card("Tokens", "9,999,999"), Card("Blocks", "1,536,500"),
           Card("Wasted", "0"), Card("KV", "113 GB")]
    assert value_scale(row, widths) == 1.0
    row[1] = Card("Tokens", "32,768,000")
    assert value_scale(row, widths) == pytest.approx(VALUE_CHARS_PER_ROW * 1.1 / 5.5 / 10) == pytest.approx(0.9)
    halves = [1, 1]  # two cards of half the row hold 22.5 characters each
    assert value_scale([Card("a", "x" * 22)] * 2, halves) == 1.0
    assert value_scale([Card("a", "x" * 30), Card("b", "y")], halves) == pytest.approx(0.75)
