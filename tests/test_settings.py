"""The sidebar's settings, without Streamlit: defaults, KV-head choices and URL round trips (the presets
and attention options: test_presets.py)."""

import re

import pytest

from explorer import settings as state
from explorer.settings import Settings


def test_defaults_make_a_valid_config():
    config = state.default_settings().config()
    assert config.batch_size == state.default_settings().batch_size


@pytest.mark.parametrize("heads, wanted, expected", [(32, 8, 8), (32, 5, 4), (12, 5, 6), (7, 3, 1), (1, 9, 1)])
def test_kv_heads_are_divisors(heads, wanted, expected):
    options = state.kv_head_options(heads)
    assert all(heads % d == 0 for d in options)
    assert state.nearest_kv_heads(heads, wanted) == expected


def test_query_round_trip():
    s = Settings(batch_size=7, context_mode="uniform", context_len=333, num_heads=12, num_kv_heads=4, head_dim=80,
                 preset=state.CUSTOM, block_size=32, dtype="bfloat16", block_layout="fragmented", seed=5, pool_headroom=50,
                 warmup=2, iters=9, device="cpu")
    back, notes = state.settings_from_query(state.settings_to_query(s))
    assert notes == []
    assert back == s


def test_query_round_trip_with_edited_lengths():
    s = Settings(batch_size=3, context_mode="ragged", lengths=(5, 0, 97), device="cpu")
    query = state.settings_to_query(s)
    assert query["lens"] == "5,0,97"
    back, notes = state.settings_from_query(query)
    assert notes == [] and back.lengths == (5, 0, 97)
    assert back.config().lengths == (5, 0, 97)


def test_generated_lengths_are_not_written_to_the_url():
    s = Settings(batch_size=3, context_mode="ragged", device="cpu")
    s = Settings(**{**s.__dict__, "lengths": s.generated_lengths()})
    assert "lens" not in state.settings_to_query(s)


@pytest.mark.parametrize(
    "params, key",
    [
        ({"batch": "abc"}, "batch"),
        ({"batch": "0"}, "batch"),
        ({"batch": "1e9"}, "batch"),
        ({"ctx": "-5"}, "ctx"),
        ({"dtype": "float8"}, "dtype"),
        ({"layout": "random"}, "layout"),
        ({"block": "24"}, "block"),
        ({"device": "tpu"}, "device"),
        ({"preset": "GPT-5"}, "preset"),
        ({"head_dim": "1024"}, "head_dim"),
        ({"lens": "1,x,3"}, "lens"),
        ({"ctx_mode": ["ragged", "zigzag"]}, "ctx_mode"),
        ({"present": "banana"}, "present"),
        ({"present": "2"}, "present"),
    ],
)
def test_bad_query_values_fall_back_with_a_note(params, key):
    defaults = Settings(device="cpu")
    settings, notes = state.settings_from_query(params, defaults)
    assert len(notes) == 1 and f"`{key}=" in notes[0]
    settings.config()  # still valid


def test_kv_heads_that_do_not_divide_are_fixed():
    settings, notes = state.settings_from_query({"heads": "32", "kv_heads": "5"}, Settings(device="cpu"))
    assert settings.num_kv_heads == 4 and "multiple" in notes[0]
    assert settings.preset == state.CUSTOM


def test_lens_of_the_wrong_length_are_dropped():
    settings, notes = state.settings_from_query({"batch": "3", "ctx_mode": "ragged", "lens": "1,2"}, Settings(device="cpu"))
    assert settings.lengths is None and "lens" in notes[0]


def test_unknown_query_keys_are_ignored():
    settings, notes = state.settings_from_query({"utm_source": "talk"}, Settings(device="cpu"))
    assert notes == [] and settings == Settings(device="cpu")


def test_invalid_settings_raise_with_the_rule():
    with pytest.raises(ValueError, match=r"Shortest \(100\) must not exceed Longest \(10\)"):
        Settings(context_mode="ragged", ragged_low=100, ragged_high=10, device="cpu").config()
    with pytest.raises(ValueError, match="non-negative"):
        Settings(batch_size=2, context_mode="ragged", lengths=(4, -1), device="cpu").config()
    with pytest.raises(ValueError, match="multiple"):
        Settings(num_heads=32, num_kv_heads=5, device="cpu").config()


def test_pool_headroom_sets_spare_blocks():
    base = Settings(batch_size=2, context_mode="uniform", context_len=160, device="cpu")
    assert base.config().spare_blocks is None
    config = Settings(**{**base.__dict__, "pool_headroom": 200}).config()
    assert config.num_blocks_used == 20 and config.spare_blocks == 40 and config.num_blocks == 60


def test_bad_lens_say_what_is_used_instead():
    _, notes = state.settings_from_query({"batch": "3", "ctx_mode": "ragged", "lens": "a,b,c"})
    assert len(notes) == 1 and "using the lengths drawn from the spread" in notes[0] and "None" not in notes[0]
    _, notes = state.settings_from_query({"batch": "2", "ctx_mode": "ragged", "lens": "5"})
    assert "it holds 1 value for batch size 2" in notes[0] and "drawn from the spread" in notes[0]


def test_an_ignored_url_value_is_quoted_as_typed_never_as_markdown():
    """A backtick in a shared link's value must not close the code span and let the
    rest render as Markdown (bold, links) inside the app's warning."""
    _, notes = state.settings_from_query({"seed": "` **BIG** [click](http://a.io) `"})
    (note,) = notes
    span, rest = note[1:].split("`", 1)
    assert "**BIG** [click](http://a.io)" in span  # all of it inside one code span
    assert rest.startswith(" ignored (") and "http" not in rest


def test_presentation_mode_is_in_the_url_only_when_on():
    assert "present" not in state.settings_to_query(Settings(device="cpu"))
    on = Settings(device="cpu", present=True)
    assert state.settings_to_query(on)["present"] == "1"
    assert state.settings_from_query(state.settings_to_query(on)) == (on, [])
    assert state.settings_from_query({"present": "0"}, Settings(device="cpu"))[0].present is False
    _, notes = state.settings_from_query({"present": "banana"}, Settings(device="cpu"))
    assert notes == ["`present=banana` ignored (must be 0 or 1); using 0."]


def test_kv_cache_dtype_and_scales_round_trip_through_the_url():
    s = Settings(kv_dtype="float8_e5m2", kv_scale="per_head", device="cpu")
    query = state.settings_to_query(s)
    assert (query["kv_dtype"], query["kv_scale"]) == ("float8_e5m2", "per_head")
    back, notes = state.settings_from_query(query)
    assert notes == [] and back == s
    config = back.config()
    assert (config.kv_dtype, config.kv_scale, config.kv_element_size) == ("float8_e5m2", "per_head", 1)
    # "same as compute" is today's cache; its scales choice is kept but means nothing
    same = Settings(kv_scale="per_head", device="cpu").config()
    assert same == Settings(device="cpu").config() and not same.is_fp8


@pytest.mark.parametrize("key, value", [("kv_dtype", "int4"), ("kv_dtype", "float8"), ("kv_scale", "per_row")])
def test_bad_kv_cache_values_in_the_url_fall_back_with_a_note(key, value):
    settings, notes = state.settings_from_query({key: value, "kv_dtype": "float8_e4m3fn", **{key: value}})
    assert len(notes) == 1 and f"{key}={value}" in notes[0] and "must be one of" in notes[0]
    assert settings.config().kv_element_size == (2 if key == "kv_dtype" else 1)


def test_shared_prefix_round_trips_through_the_url_only_when_set():
    plain_query = state.settings_to_query(Settings(device="cpu"))
    assert "prefix" not in plain_query and "prefix_groups" not in plain_query
    s = Settings(device="cpu", batch_size=4, context_mode="uniform", context_len=64, shared_prefix=40, prefix_groups=2)
    query = state.settings_to_query(s)
    assert (query["prefix"], query["prefix_groups"]) == ("40", "2")
    back, notes = state.settings_from_query(query)
    assert notes == [] and back == s
    config = back.config()
    assert (config.shared_prefix, config.prefix_groups, config.shared_blocks) == (40, 2, 2)


def test_prefix_groups_mean_nothing_without_a_shared_prefix():
    # a hidden groups value neither changes the configuration nor breaks it (more groups than sequences)
    hidden = Settings(device="cpu", batch_size=2, prefix_groups=8).config()
    assert hidden == Settings(device="cpu", batch_size=2).config() and hidden.prefix_groups == 1


@pytest.mark.parametrize("params, key", [({"prefix": "-3"}, "prefix"), ({"prefix": "lots"}, "prefix"),
                                         ({"prefix_groups": "0"}, "prefix_groups"),
                                         ({"prefix_groups": "99999"}, "prefix_groups")])
def test_bad_prefix_values_in_the_url_fall_back_with_a_note(params, key):
    settings, notes = state.settings_from_query(params, Settings(device="cpu"))
    assert len(notes) == 1 and notes[0].startswith(f"`{key}=") and "ignored" in notes[0]
    assert (settings.shared_prefix, settings.prefix_groups) == (0, 1)


@pytest.mark.parametrize("changes, rule", [
    (dict(shared_prefix=100), "Shared prefix (100 tokens) must not exceed Tokens per sequence (64)."),
    (dict(shared_prefix=16, prefix_groups=5), "Prefix groups (5) must be from 1 to Batch size (4)."),
    (dict(shared_prefix=50, context_mode="ragged", lengths=(64, 40, 64, 64)),
     "Shared prefix (50 tokens) must not exceed any sequence's length; sequence 1 holds only 40 tokens."),
])
def test_a_prefix_the_batch_cannot_hold_raises_the_rule_in_the_sidebars_words(changes, rule):
    s = Settings(**{**dict(device="cpu", batch_size=4, context_mode="uniform", context_len=64), **changes})
    with pytest.raises(ValueError, match=re.escape(rule)) as info:
        s.config()
    assert "shared_prefix" not in str(info.value) and "prefix_groups" not in str(info.value)
    assert "batch_size" not in str(info.value)


def test_without_batch_keeps_the_model_and_resets_only_the_batch():
    broken = Settings(device="cpu", batch_size=4, context_mode="ragged", ragged_low=16, ragged_high=256,
                      shared_prefix=64, prefix_groups=9, num_heads=8, num_kv_heads=2, head_dim=32,
                      dtype="float32", seed=5, warmup=2, iters=7)
    with pytest.raises(ValueError):
        broken.config()
    fixed = broken.without_batch()
    config = fixed.config()
    defaults = state.default_settings()
    assert (config.num_heads, config.num_kv_heads, config.head_dim, config.dtype, config.device, config.seed) == (
        8, 2, 32, "float32", "cpu", 5)
    assert (fixed.warmup, fixed.iters) == (2, 7)
    assert (fixed.batch_size, fixed.shared_prefix, fixed.prefix_groups, fixed.lengths) == (
        defaults.batch_size, 0, 1, None)


# -- new tokens per sequence (draft tokens, issue 25) ------------------------------

def test_new_tokens_are_in_the_url_only_when_not_one():
    assert "new_tokens" not in state.settings_to_query(Settings(device="cpu"))
    assert Settings(device="cpu").config().query_lens == 1
    uniform = Settings(device="cpu", batch_size=3, context_mode="uniform", context_len=40, query_lens=4)
    assert state.settings_to_query(uniform)["new_tokens"] == "4"
    back, notes = state.settings_from_query(state.settings_to_query(uniform))
    assert notes == [] and back == uniform
    config = back.config()
    assert (config.query_lens, config.query_lengths, config.num_query_tokens) == (4, (4, 4, 4), 12)


def test_per_sequence_new_tokens_round_trip_through_the_url():
    ragged = Settings(device="cpu", batch_size=3, context_mode="ragged", lengths=(5, 1, 97), query_lens=(2, 1, 16))
    query = state.settings_to_query(ragged)
    assert query["new_tokens"] == "2,1,16"
    back, notes = state.settings_from_query(query)
    assert notes == [] and back == ragged and back.config().query_lengths == (2, 1, 16)
    # one sequence: a trailing comma keeps the list a list
    one = Settings(device="cpu", batch_size=1, context_mode="uniform", context_len=9, query_lens=(3,))
    assert state.settings_to_query(one)["new_tokens"] == "3,"
    assert state.settings_from_query(state.settings_to_query(one)) == (one, [])


def test_one_value_for_all_is_capped_at_each_context():
    s = Settings(device="cpu", batch_size=3, context_mode="ragged", lengths=(2, 0, 30), query_lens=8)
    assert s.config().query_lengths == (2, 1, 8)


@pytest.mark.parametrize("raw, why", [("0", "must be between 1 and 16"), ("17", "must be between 1 and 16"),
                                      ("two", "not a whole number"), ("1,x", "not a whole number"),
                                      ("2.5", "not a whole number"), (",", "expected comma-separated")])
def test_bad_new_tokens_in_the_url_fall_back_with_a_note(raw, why):
    settings, notes = state.settings_from_query({"batch": "2", "new_tokens": raw}, Settings(device="cpu"))
    assert notes == [f"`new_tokens={raw}` ignored ({why} whole numbers); using 1." if why.startswith("expected")
                     else f"`new_tokens={raw}` ignored ({why}); using 1."]
    assert settings.query_lens == 1 and settings.config().num_query_tokens == 2


def test_new_tokens_of_the_wrong_count_are_dropped_with_a_note():
    settings, notes = state.settings_from_query({"batch": "3", "new_tokens": "2,3"}, Settings(device="cpu"))
    assert settings.query_lens == 1
    assert notes == ["`new_tokens` ignored: it holds 2 values for batch size 3; using 1 (give one value for all, "
                     "or one per sequence)."]


@pytest.mark.parametrize("changes, rule", [
    (dict(query_lens=(1, 9, 1, 1)), "New tokens of sequence 1 (9) must not exceed its context (8 tokens): "
                                    "the new tokens are already in the cache."),
    (dict(query_lens=(1, 2)), "New tokens per sequence holds 2 values for Batch size (4): give one per sequence."),
])
def test_new_tokens_the_batch_cannot_hold_raise_the_rule_in_the_sidebars_words(changes, rule):
    s = Settings(**{**dict(device="cpu", batch_size=4, context_mode="uniform", context_len=8), **changes})
    with pytest.raises(ValueError, match=re.escape(rule)) as info:
        s.config()
    assert "query_lens" not in str(info.value)


def test_without_batch_puts_the_new_tokens_back_to_one():
    s = Settings(device="cpu", batch_size=2, context_mode="uniform", context_len=8, query_lens=(3, 2))
    assert s.without_batch().query_lens == 1 and s.without_batch().config().num_query_tokens == 4
