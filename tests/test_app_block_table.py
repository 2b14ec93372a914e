"""AppTest suite for the Block table page with the sidebar's shared prefix: the
sharing it makes is shown as the Sharing scenario shows its own (marked table cells,
the pool coloured by reference count), and every count says whether it is logical
or physical. Assertions read the Plotly specs and metrics the page sends."""

from __future__ import annotations

import numpy as np
import pytest
from test_app import BASE, TABLE, arr, assert_clean, chart, open_app

from explorer import settings as state
from explorer.cache.sharing import table_ref_counts
from explorer.formatting import compact
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
    assert values["Tokens (logical)"] == compact(sum(config.lengths)) == "512"
    assert deltas["Tokens (logical)"] == f"{compact(config.unique_tokens)} stored (physical)" == "448 stored (physical)"
    assert values["Blocks used (physical)"] == compact(config.num_blocks_used) == "28"
    assert "Wasted slots (physical)" in values
    # Without sharing the logical and physical counts agree, and no second count is shown.
    plain = open_app({**PREFIX, "prefix": "0"}, page=TABLE)
    assert {m.label: m.delta for m in plain.metric}["Tokens (logical)"] in (None, "")


def test_a_prefix_shorter_than_a_block_shares_no_block():
    """12 tokens of prefix in blocks of 16: every member's first block is its own
    (a copy), so the page draws the unshared view."""
    at = open_app({**PREFIX, "prefix": "12"}, page=TABLE)
    assert_clean(at)
    assert chart(at, "bt_pool")["layout"]["title"]["text"] == "Physical block pool"
    assert all("shared" not in (t.get("name") or "") for t in chart(at, "bt_table")["data"])
