"""Page controls in the URL (explorer.page_urls): parsing, notes, writing."""

from __future__ import annotations

from explorer.page_urls import PAGE_URL_KEYS, PageField, page_params, page_query, read_fields

FIELDS = [PageField("sw_axis", "sw_axis", choices=("context_len", "batch_size")),
          PageField("sw_from", "sw_low", bounds=(1, 100)),
          PageField("sw_block", "sw_block", choices=(1, 2, 4))]
DEFAULTS = {"sw_axis": "context_len", "sw_low": 16, "sw_block": 1}


def test_valid_values_are_read_by_widget_key():
    values, notes = read_fields(FIELDS, {"sw_axis": "batch_size", "sw_from": "7", "sw_block": "4"}, DEFAULTS)
    assert values == {"sw_axis": "batch_size", "sw_low": 7, "sw_block": 4} and notes == []


def test_absent_and_unknown_keys_are_left_out():
    values, notes = read_fields(FIELDS, {"batch": "3", "other": "x"}, DEFAULTS)
    assert values == {} and notes == []


def test_lists_take_the_last_value():
    values, _ = read_fields(FIELDS, {"sw_from": ["3", "9"]}, DEFAULTS)
    assert values == {"sw_low": 9}


def test_garbage_is_ignored_and_named():
    values, notes = read_fields(
        FIELDS, {"sw_axis": "sideways", "sw_from": "lots", "sw_block": "3"}, DEFAULTS)
    assert values == {}
    assert len(notes) == 3
    assert notes[0].startswith("`sw_axis=sideways` ignored (must be one of context_len, batch_size)")
    assert notes[0].endswith("using 'context_len'.")
    assert "`sw_from=lots` ignored (not a whole number); using 16." == notes[1]
    assert "sw_block=3" in notes[2] and "must be one of 1, 2, 4" in notes[2]


def test_out_of_range_is_ignored_and_named():
    values, notes = read_fields(FIELDS, {"sw_from": "0"}, DEFAULTS)
    assert values == {} and notes == ["`sw_from=0` ignored (must be between 1 and 100); using 16."]
    values, notes = read_fields(FIELDS, {"sw_from": "101"}, DEFAULTS)
    assert values == {} and "must be between 1 and 100" in notes[0]


def test_page_query_writes_the_page_keys_only():
    state = {"sw_axis": "batch_size", "sw_low": 2.0, "sw_high": 8, "sw_points": 3, "sw_spacing": None,
             "ik_seq": 1, "sb_batch_size": 4}
    assert page_query("sweep", state) == {"sw_axis": "batch_size", "sw_from": "2", "sw_to": "8", "sw_points": "3"}
    assert page_query("block_table", state) == {} and page_query(None, state) == {}


def test_page_query_round_trips_through_read_fields():
    state = {"ik_seq": 3, "ik_head": 5}
    query = page_query("inside_the_kernel", state)
    fields = [PageField(url, key, bounds=(0, 10)) for url, key in PAGE_URL_KEYS["inside_the_kernel"].items()]
    assert read_fields(fields, query, {}) == (state, [])


def test_page_params_picks_the_page_keys():
    params = {"batch": "3", "sw_axis": "head_dim", "sw_to": ["9"], "ik_seq": "1"}
    assert page_params("sweep", params) == {"sw_axis": "head_dim", "sw_to": "9"}
    assert page_params("block_table", params) == {}


def test_decimal_fields():
    field = [PageField("sv_rate", "sv_rate", bounds=(0.0, 8.0), decimal=True)]
    assert read_fields(field, {"sv_rate": "0.25"}, {}) == ({"sv_rate": 0.25}, [])
    for bad in ("nan", "inf", "9", "x"):
        values, notes = read_fields(field, {"sv_rate": bad}, {"sv_rate": 0.2})
        assert values == {} and len(notes) == 1 and notes[0].endswith("using 0.2.")
