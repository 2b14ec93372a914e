"""AppTest suite of the new tokens per sequence (draft tokens, issue 25): the
sidebar's control (one number for all, or per sequence), its URL and bad values,
the Block table page's marks and the Decode benchmark run with them. The Settings
and URL rules without Streamlit: test_settings.py."""

from __future__ import annotations

import pytest

from explorer import limits
from explorer.cache.cell_style import NEW_TOKENS
from test_app import BENCH, TABLE, TINY, arr, assert_clean, chart, open_app


def _warnings(at) -> list[str]:
    return [w.value for w in at.sidebar.warning]


def test_one_new_token_is_todays_view():
    """The default (1) writes nothing to the URL and changes nothing on the page."""
    at = open_app(TINY, page=TABLE)
    assert_clean(at)
    assert at.number_input(key="sb_query_len").value == 1 and "new_tokens" not in at.query_params
    assert not any("Query and output rows" in m.value for m in at.sidebar.markdown)


def test_the_number_box_sets_the_new_tokens_for_every_sequence():
    at = open_app(TINY, page=TABLE)
    at.number_input(key="sb_query_len").set_value(4).run()
    assert_clean(at)
    assert at.query_params["new_tokens"] == "4"
    assert any("Query and output rows: **8**" in m.value for m in at.sidebar.markdown)


def test_the_number_box_is_capped_at_the_limit_and_says_so():
    at = open_app(TINY, page=TABLE)
    at.number_input(key="sb_query_len").set_value(40).run()
    assert_clean(at)
    assert at.number_input(key="sb_query_len").value == limits.MAX_QUERY_LEN
    assert any(f"40 is above the maximum, {limits.MAX_QUERY_LEN}" in w for w in _warnings(at))
    assert at.query_params["new_tokens"] == str(limits.MAX_QUERY_LEN)


def test_per_sequence_new_tokens_from_the_url_fill_the_editor():
    at = open_app({**TINY, "batch": "3", "new_tokens": "1,4,2"}, page=TABLE)
    assert_clean(at)
    assert at.segmented_control(key="sb_query_mode").value == "ragged"
    assert at.query_params["new_tokens"] == "1,4,2"
    assert any("Query and output rows: **7**" in m.value for m in at.sidebar.markdown)
    # back to one value for all: the box's number (the largest of the list) for every sequence
    at.segmented_control(key="sb_query_mode").set_value("uniform").run()
    assert_clean(at)
    assert at.query_params["new_tokens"] == "4"


def test_switching_to_per_sequence_starts_from_the_number_capped_at_each_context():
    at = open_app({**TINY, "batch": "2", "ctx_mode": "ragged", "lens": "3,37", "new_tokens": "5"}, page=TABLE)
    at.segmented_control(key="sb_query_mode").set_value("ragged").run()
    assert_clean(at)
    assert at.query_params["new_tokens"] == "3,5"


@pytest.mark.parametrize("raw, why", [("0", "must be between 1 and 16"), ("99", "must be between 1 and 16"),
                                      ("lots", "not a whole number"), ("2,x", "not a whole number")])
def test_bad_new_tokens_in_the_url_are_named_and_ignored(raw, why):
    at = open_app({**TINY, "new_tokens": raw}, page=TABLE)
    assert_clean(at)
    assert any(f"new_tokens={raw}` ignored ({why}); using 1." in w for w in _warnings(at))
    assert at.number_input(key="sb_query_len").value == 1 and "new_tokens" not in at.query_params


def test_per_sequence_new_tokens_of_another_count_are_named_and_ignored():
    at = open_app({**TINY, "batch": "2", "new_tokens": "1,2,3"}, page=BENCH)
    assert_clean(at)
    assert any("`new_tokens` ignored: it holds 3 values for batch size 2" in w for w in _warnings(at))


def test_per_sequence_new_tokens_over_a_context_are_clamped_and_said():
    """A URL's value above its sequence's context (the new tokens are in it) is
    brought down to the context, and the note under the editor says so."""
    at = open_app({**TINY, "batch": "2", "ctx_mode": "ragged", "lens": "3,37", "new_tokens": "6,6"}, page=TABLE)
    assert_clean(at)
    assert at.query_params["new_tokens"] == "3,6"
    assert any("new_tokens of sequence 0**: 6 is above the maximum, 3; using 3." in w for w in _warnings(at))


# -- Block table -------------------------------------------------------------------

def _trace_names(spec: dict) -> list[str]:
    return [t.get("name") for t in spec["data"]]


def test_block_table_stars_the_new_tokens_and_counts_them():
    at = open_app({**TINY, "new_tokens": "4"}, page=TABLE)
    assert_clean(at)
    table, walk = chart(at, "bt_table"), chart(at, "bt_walk")
    stars = next(t for t in table["data"] if t.get("name") == NEW_TOKENS)
    # two sequences of 37 tokens: positions 33..36 sit in logical block 2 of each
    assert arr(stars["customdata"]).reshape(-1, 6)[:, :5].tolist() == [[0, 2, 33, 36, 4], [1, 2, 33, 36, 4]]
    walk_stars = next(t for t in walk["data"] if t.get("name") == NEW_TOKENS)
    assert arr(walk_stars["customdata"]).reshape(-1, 4)[:, 0].tolist() == [33, 34, 35, 36]
    tokens = next(m for m in at.metric if m.label == "Tokens (logical)")
    assert tokens.value == "74" and tokens.proto.delta == "8 new (queries)"
    assert any("positions 33–36, starred" in m.value for m in at.markdown)
    assert any("A yellow star marks a block that holds new tokens" in c.value and "8 query tokens" in c.value
               for c in at.caption)


def test_block_table_with_one_new_token_has_no_stars():
    at = open_app(TINY, page=TABLE)
    assert_clean(at)
    for key in ("bt_table", "bt_walk"):
        assert NEW_TOKENS not in _trace_names(chart(at, key))
    tokens = next(m for m in at.metric if m.label == "Tokens (logical)")
    assert not tokens.proto.delta
    assert not any("yellow star" in c.value for c in at.caption)
