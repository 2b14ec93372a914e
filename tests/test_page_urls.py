"""The URL field registry (explorer.page_urls) and its one reader and writer
(explorer.url_fields): parsing, notes, writing, and the registry's own rules."""

from __future__ import annotations

from dataclasses import fields

import pytest

from explorer import page_urls
from explorer.formatting import QUOTE_CHARS
from explorer.page_urls import SIDEBAR, URL_FIELDS, page_fields, page_params, page_query, read_page
from explorer.settings import SIDEBAR_FIELDS, Settings
from explorer.url_fields import UrlField, read_fields, write_fields

FIELDS = [UrlField("sw_axis", "sw_axis", "choice", choices=("context_len", "batch_size")),
          UrlField("sw_from", "sw_low", bounds=(1, 100)),
          UrlField("sw_block", "sw_block", "choice", choices=(1, 2, 4))]
DEFAULTS = {"sw_axis": "context_len", "sw_low": 16, "sw_block": 1}


def test_valid_values_are_read_by_widget_key():
    values, notes = read_fields(FIELDS, {"sw_axis": "batch_size", "sw_from": " 7", "sw_block": "4"}, DEFAULTS)
    assert values == {"sw_axis": "batch_size", "sw_low": 7, "sw_block": 4} and notes == []


def test_absent_and_unknown_keys_are_left_out():
    values, notes = read_fields(FIELDS, {"batch": "3", "other": "x"}, DEFAULTS)
    assert values == {} and notes == []


def test_lists_take_the_last_value():
    values, _ = read_fields(FIELDS, {"sw_from": ["3", "9"]}, DEFAULTS)
    assert values == {"sw_low": 9}


def test_garbage_is_ignored_and_named_with_its_rule():
    values, notes = read_fields(FIELDS, {"sw_axis": "sideways", "sw_from": "lots", "sw_block": "3"}, DEFAULTS)
    assert values == {}
    assert notes == ["`sw_axis=sideways` ignored (must be one of context_len, batch_size); using 'context_len'.",
                     "`sw_from=lots` ignored (not a whole number); using 16.",
                     "`sw_block=3` ignored (must be one of 1, 2, 4); using 1."]


@pytest.mark.parametrize("raw", ["0", "101", "7.5"])
def test_out_of_range_or_fractional_is_ignored(raw):
    values, notes = read_fields(FIELDS, {"sw_from": raw}, DEFAULTS)
    assert values == {} and len(notes) == 1 and notes[0].endswith("using 16.")
    assert ("must be between 1 and 100" in notes[0]) == (raw != "7.5")


def test_a_long_value_is_quoted_cut_to_a_readable_length():
    """A 400-digit URL value was echoed whole in the sidebar."""
    values, (note,) = read_fields(FIELDS, {"sw_from": "9" * 400}, DEFAULTS)
    quoted = note.split("`")[1]
    assert values == {} and len(quoted) == len("sw_from=") + QUOTE_CHARS and quoted.endswith("…")


def test_bounds_and_choices_given_when_read_replace_the_fields_own():
    values, notes = read_fields(FIELDS, {"sw_from": "500", "sw_block": "8"}, DEFAULTS,
                                bounds={"sw_low": (1, 1000)}, choices={"sw_block": (8, 16)})
    assert values == {"sw_low": 500, "sw_block": 8} and notes == []


def test_decimal_flag_and_list_fields():
    rate = [UrlField("sv_rate", "sv_rate", "float", bounds=(0.0, 8.0))]
    assert read_fields(rate, {"sv_rate": "0.25"}, {}) == ({"sv_rate": 0.25}, [])
    for bad in ("nan", "inf", "9", "x"):
        values, notes = read_fields(rate, {"sv_rate": bad}, {"sv_rate": 0.2})
        assert values == {} and len(notes) == 1 and notes[0].endswith("using 0.2.")
    flag = [UrlField("present", "present", "flag")]
    assert read_fields(flag, {"present": "1"}, {}) == ({"present": True}, [])
    assert read_fields(flag, {"present": "yes"}, {"present": False})[1] == [
        "`present=yes` ignored (must be 0 or 1); using 0."]
    lens = [UrlField("lens", "lengths", "ints", bounds=(0, 10))]
    assert read_fields(lens, {"lens": "1, 2,3"}, {}) == ({"lengths": (1, 2, 3)}, [])
    for bad in ("", "1,x", "1,11"):
        assert read_fields(lens, {"lens": bad}, {}, fallbacks={"lengths": "the drawn ones"})[1][0].endswith(
            "using the drawn ones.")


def test_one_value_or_a_list_field():
    """``int_or_ints``: one number for all, or one per sequence (the new tokens)."""
    q = [UrlField("new_tokens", "query_lens", "int_or_ints", bounds=(1, 16))]
    assert read_fields(q, {"new_tokens": "4"}, {}) == ({"query_lens": 4}, [])
    assert read_fields(q, {"new_tokens": "1, 4,2"}, {}) == ({"query_lens": (1, 4, 2)}, [])
    assert read_fields(q, {"new_tokens": "3,"}, {}) == ({"query_lens": (3,)}, [])
    for value in (4, (1, 4, 2), (3,)):
        assert read_fields(q, write_fields(q, {"query_lens": value}), {}) == ({"query_lens": value}, [])
    assert write_fields(q, {"query_lens": (3,)}) == {"new_tokens": "3,"}
    for bad in ("0", "17", "1,17", "x", "2.5", ""):
        values, notes = read_fields(q, {"new_tokens": bad}, {"query_lens": 1})
        assert values == {} and len(notes) == 1 and notes[0].endswith("using 1.")


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of int, float, choice, flag, ints, int_or_ints"):
        UrlField("x", "x", "text")


def test_the_writer_writes_what_the_reader_reads():
    values = {"sw_axis": "batch_size", "sw_low": 2.0, "sw_block": None}
    query = write_fields(FIELDS, values)
    assert query == {"sw_axis": "batch_size", "sw_from": "2"}  # a whole float as a box sends it, no None
    assert read_fields(FIELDS, query, DEFAULTS) == ({"sw_axis": "batch_size", "sw_low": 2}, [])
    both = [UrlField("present", "present", "flag"), UrlField("lens", "lengths", "ints")]
    assert write_fields(both, {"present": False, "lengths": (3, 0)}) == {"lens": "3,0"}
    assert write_fields(both, {"present": True}) == {"present": "1"}


def test_a_flag_on_by_default_is_written_off_so_that_a_copied_url_restores_off():
    """The serving page's "free blocks outside the window" starts on: left out of the
    URL when off, a copied URL read it back on."""
    flag = UrlField("sv_free_window", "sv_free_window", "flag", on_by_default=True)
    for value, text in ((False, "0"), (True, "1")):
        query = write_fields([flag], {"sv_free_window": value})
        assert query == {"sv_free_window": text}
        assert read_fields([flag], query, {"sv_free_window": True}) == ({"sv_free_window": value}, [])
    (field,) = [f for f in page_fields("serving_simulation") if f.key == "sv_free_window"]
    assert field.on_by_default
    with pytest.raises(ValueError, match="on_by_default is for a flag"):
        UrlField("batch", "batch_size", on_by_default=True)


# -- the registry ----------------------------------------------------------------

def test_every_url_name_and_key_is_declared_once():
    urls = [f.url for group in URL_FIELDS.values() for f in group]
    assert len(urls) == len(set(urls))
    for group in URL_FIELDS.values():
        assert len({f.key for f in group}) == len(group)


def test_the_sidebars_fields_are_the_settings_fields():
    assert URL_FIELDS[SIDEBAR] is SIDEBAR_FIELDS
    assert {f.key for f in SIDEBAR_FIELDS} == {f.name for f in fields(Settings)}


@pytest.mark.parametrize("page, prefix", [("sweep", "sw_"), ("inside_the_kernel", "ik_"),
                                          ("serving_simulation", "sv_")])
def test_a_pages_names_share_its_prefix(page, prefix):
    group = page_fields(page)
    assert group and all(f.url.startswith(prefix) and f.key.startswith(prefix) for f in group)


def test_pages_without_fields_and_the_sidebar_have_no_page_fields():
    assert page_fields("block_table") == page_fields(None) == page_fields(SIDEBAR) == ()


def test_page_query_writes_the_page_keys_only():
    state = {"sw_axis": "batch_size", "sw_low": 2.0, "sw_high": 8, "sw_points": 3, "sw_spacing": None,
             "ik_seq": 1, "sb_batch_size": 4}
    assert page_query("sweep", state) == {"sw_axis": "batch_size", "sw_from": "2", "sw_to": "8", "sw_points": "3"}
    assert page_query("block_table", state) == {} and page_query(None, state) == {}


def test_page_query_round_trips_through_read_page():
    state = {"ik_seq": 3, "ik_head": 5}
    assert read_page("inside_the_kernel", page_query("inside_the_kernel", state), {}) == (state, [])
    # Limits the page gives when it reads: a sequence of a smaller batch.
    values, notes = read_page("inside_the_kernel", {"ik_seq": "3"}, {"ik_seq": 0}, bounds={"ik_seq": (0, 1)})
    assert values == {} and notes == ["`ik_seq=3` ignored (must be between 0 and 1); using 0."]


def test_read_page_reads_the_keys_asked_for():
    query = {"sw_axis": "batch_size", "sw_points": "4"}
    assert read_page("sweep", query, {}, keys=("sw_axis",)) == ({"sw_axis": "batch_size"}, [])
    assert read_page("sweep", query, {}, keys=("sw_points",)) == ({"sw_points": 4}, [])


def test_page_params_picks_the_page_keys():
    params = {"batch": "3", "sw_axis": "head_dim", "sw_to": ["9"], "ik_seq": "1"}
    assert page_params("sweep", params) == {"sw_axis": "head_dim", "sw_to": "9"}
    assert page_params("block_table", params) == {} and page_params(None, params) == {}


def test_the_serving_pages_fields_hold_its_widget_defaults():
    """Every default the serving page gives its controls reads back through its
    fields (the registry and the page agree on keys and limits)."""
    from explorer.serving.figures import POOL_COLOR_MODES

    defaults = {"sv_num_blocks": 1024, "sv_block_size": 16, "sv_max_batch": 32, "sv_rate": 0.28,
                "sv_prompt_kind": "long-tail", "sv_prompt_lo": 16, "sv_prompt_hi": 2048, "sv_output_kind": "uniform",
                "sv_output_lo": 16, "sv_output_hi": 512, "sv_seed": 0, "sv_steps": 400, "sv_system_prompt": 0,
                "sv_samples": 1, "sv_pool_colour": "reference count", "sv_free_window": True}
    query = page_query("serving_simulation", defaults)
    assert set(query) == {f.url for f in page_urls.URL_FIELDS["serving_simulation"]}
    assert read_page("serving_simulation", query, {}, choices={"sv_pool_colour": POOL_COLOR_MODES}) == (defaults, [])
