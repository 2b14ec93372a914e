"""Model presets (explorer/presets.py): each model's published numbers, its layer
kinds, matching settings back to a preset, and the presets in the sidebar's
settings and URLs (the layer kind, old names)."""

import pytest

from explorer import settings as state
from explorer.presets import GLOBAL, MODEL_PRESETS, SLIDING, Attention, ModelPreset, preset_for
from explorer.settings import Settings

#: name -> (heads, KV heads, head_dim, layers, sliding layers, window, soft-cap, sinks), from each
#: model's config.json (num_attention_heads, num_key_value_heads, head_dim, num_hidden_layers,
#: sliding_window and its layer pattern, attn_logit_softcapping, sinks).
PUBLISHED = {
    "Llama-3.1-8B": (32, 8, 128, 32, 0, None, None, False),
    "Llama-3-70B": (64, 8, 128, 80, 0, None, None, False),
    "Mistral-7B-v0.1": (32, 8, 128, 32, 32, 4096, None, False),
    "Gemma-2-9B": (16, 8, 256, 42, 21, 4096, 50.0, False),
    "Gemma-3-12B": (16, 8, 256, 48, 40, 1024, None, False),
    "gpt-oss-20b": (64, 8, 64, 24, 12, 128, None, True),
    "Qwen2.5-7B": (28, 4, 128, 28, 0, None, None, False),
    "Qwen3-8B": (32, 8, 128, 36, 0, None, None, False),
    "Qwen3-0.6B": (16, 8, 128, 28, 0, None, None, False),
    "Phi-3-mini": (32, 32, 96, 32, 0, None, None, False),
    "GPT-2": (12, 12, 64, 12, 0, None, None, False),
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_presets_hold_the_published_numbers(name):
    heads, kv, dim, layers, sliding, window, cap, sinks = PUBLISHED[name]
    p = MODEL_PRESETS[name]
    assert (p.heads, p.num_layers, p.window, p.soft_cap, p.sinks) == ((heads, kv, dim), layers, window, cap, sinks)
    assert p.layer_counts().get(SLIDING, 0) == sliding and sum(p.layer_counts().values()) == layers
    assert p.mixed == (0 < sliding < layers)


def test_layer_patterns_follow_each_model():
    gemma2, gemma3, oss = (MODEL_PRESETS[n] for n in ("Gemma-2-9B", "Gemma-3-12B", "gpt-oss-20b"))
    # Gemma 2 and gpt-oss alternate, the even layers sliding; Gemma 3 has five sliding layers to a global one.
    assert [gemma2.layer_kind(i) for i in range(4)] == [SLIDING, GLOBAL, SLIDING, GLOBAL]
    assert [oss.layer_kind(i) for i in range(4)] == [SLIDING, GLOBAL, SLIDING, GLOBAL]
    assert [gemma3.layer_kind(i) for i in range(12)] == [SLIDING] * 5 + [GLOBAL] + [SLIDING] * 5 + [GLOBAL]
    assert gemma2.attention(SLIDING) == Attention(4096, 50.0, False)
    assert gemma2.attention(GLOBAL) == Attention(None, 50.0, False)  # the soft-cap is on every layer
    assert oss.attention(GLOBAL) == Attention(None, None, True)
    assert MODEL_PRESETS["Mistral-7B-v0.1"].layer_counts() == {SLIDING: 32}
    assert MODEL_PRESETS["Llama-3.1-8B"].layer_counts() == {GLOBAL: 32}


def test_describe_says_each_layer_kind():
    assert MODEL_PRESETS["Gemma-2-9B"].describe() == (
        "42 layers: 21 sliding (window 4,096), 21 global; soft-cap 50 on every layer")
    assert MODEL_PRESETS["gpt-oss-20b"].describe() == (
        "24 layers: 12 sliding (window 128), 12 global; attention sinks on every layer")
    assert MODEL_PRESETS["Mistral-7B-v0.1"].describe() == "32 layers, all sliding (window 4,096)"


def test_preset_for_matches_heads_and_attention():
    assert preset_for(32, 8, 128) == "Llama-3.1-8B"  # the first of the three with these heads
    assert preset_for(32, 8, 128, prefer="Qwen3-8B") == "Qwen3-8B"  # the one chosen, while it matches
    assert preset_for(32, 8, 128, Attention(window=4096)) == "Mistral-7B-v0.1"
    assert preset_for(32, 8, 128, Attention(window=4096), prefer="Qwen3-8B") == "Mistral-7B-v0.1"
    assert preset_for(16, 8, 256, Attention(None, 50.0)) == "Gemma-2-9B"  # its global layer
    assert preset_for(16, 8, 256, Attention(1024)) == "Gemma-3-12B"
    assert preset_for(16, 8, 256) == "Gemma-3-12B"  # Gemma 3's global layer: no soft-cap
    for custom in [Attention(4000), Attention(4096, 30.0), Attention(4096, None, True)]:
        assert preset_for(16, 8, 256, custom) == state.CUSTOM
    assert preset_for(24, 6, 80) == state.CUSTOM


def test_a_preset_without_a_window_has_one_layer_kind():
    p = ModelPreset(8, 2, 64, 4, global_every=2)  # no window: every layer global, whatever the pattern
    assert p.layer_counts() == {GLOBAL: 4} and not p.mixed and p.kind_of(Attention()) == GLOBAL


# -- in the settings ----------------------------------------------------------------

def test_settings_pass_only_the_options_in_force():
    assert Settings(device="cpu").attention_options() == {}
    s = Settings(device="cpu", window=64, soft_cap=30.0, sinks=True)
    assert s.attention_options() == {"window": 64, "soft_cap": 30.0, "sinks": True}
    assert Settings(device="cpu", sinks=False, window=8).attention_options() == {"window": 8}


@pytest.mark.parametrize("name", list(MODEL_PRESETS))
def test_every_preset_and_layer_makes_a_valid_config(name):
    p = MODEL_PRESETS[name]
    for kind in p.layer_counts():
        a = p.attention(kind)
        s = Settings(device="cpu", preset=name, num_heads=p.num_heads, num_kv_heads=p.num_kv_heads,
                     head_dim=p.head_dim, window=a.window, soft_cap=a.soft_cap, sinks=a.sinks, layer=kind)
        assert state.with_matching_preset(s) == s  # the preset and layer stand
        config = s.config()
        assert (config.window, config.soft_cap, config.sinks) == (a.window, a.soft_cap, a.sinks)


def test_a_preset_named_alone_in_the_url_brings_its_heads_and_attention():
    s, notes = state.settings_from_query({"preset": "Gemma-2-9B"}, Settings(device="cpu"))
    assert notes == [] and s.preset == "Gemma-2-9B" and s.layer == SLIDING
    assert (s.num_heads, s.num_kv_heads, s.head_dim, s.window, s.soft_cap, s.sinks) == (16, 8, 256, 4096, 50.0, False)
    s, notes = state.settings_from_query({"preset": "gpt-oss-20b", "layer": "global"}, Settings(device="cpu"))
    assert notes == [] and (s.preset, s.layer, s.window, s.sinks) == ("gpt-oss-20b", GLOBAL, None, True)


@pytest.mark.parametrize("query, expect, note", [
    # a preset with a layer picker: its global layer, the window ignored
    ({"preset": "Gemma-2-9B", "layer": "global", "window": "4096"}, ("Gemma-2-9B", GLOBAL, None),
     "`window=4096` ignored: `layer=global` picks a global layer of Gemma-2-9B"),
    ({"preset": "gpt-oss-20b", "layer": "global", "window": "128"}, ("gpt-oss-20b", GLOBAL, None),
     "`window=128` ignored: `layer=global` picks a global layer of gpt-oss-20b"),
    # no layer picker (the default Llama, then the window's Mistral; Mistral named; Custom): the window stays
    ({"layer": "global", "window": "4096"}, ("Mistral-7B-v0.1", SLIDING, 4096),
     "`layer=global` ignored: Mistral-7B-v0.1 has no layer picker"),
    ({"preset": "Mistral-7B-v0.1", "layer": "global"}, ("Mistral-7B-v0.1", SLIDING, 4096),
     "`layer=global` ignored: Mistral-7B-v0.1 has no layer picker"),
    ({"preset": "Custom", "layer": "global", "window": "77"}, ("Custom", SLIDING, 77),
     "`layer=global` ignored: Custom has no layer picker"),
    # heads and window that match Gemma 2's sliding layer
    ({"layer": "global", "window": "4096", "heads": "16", "head_dim": "256", "soft_cap": "50"},
     ("Gemma-2-9B", SLIDING, 4096), "`layer=global` ignored: these heads and window are Gemma-2-9B's sliding layer"),
])
def test_a_global_layer_beside_a_window_is_resolved_one_way_and_said(query, expect, note):
    """``?layer=global&window=4096`` ended on a sliding window and said nothing: a global
    layer attends to the whole context. With a layer picker the global layer wins,
    without one the window; a note names what was ignored."""
    s, notes = state.settings_from_query(query, Settings(device="cpu"))
    assert (s.preset, s.layer, s.window) == expect
    assert len(notes) == 1 and notes[0].startswith(note), notes
    assert s.config().window == expect[2]
    # the settings read back from their own URL as they are, with no note
    assert state.settings_from_query(state.settings_to_query(s)) == (s, [])


@pytest.mark.parametrize("old, new, window", [("Llama-3-8B", "Llama-3.1-8B", None),
                                              ("Mistral-7B", "Mistral-7B-v0.1", 4096)])
def test_old_preset_names_in_urls_still_work(old, new, window):
    query = {"preset": old, "heads": "32", "kv_heads": "8", "head_dim": "128"}  # as the old app wrote them
    s, notes = state.settings_from_query(query, Settings(device="cpu"))
    assert notes == [] and (s.preset, s.window) == (new, window)


@pytest.mark.parametrize("name, layer", [(n, k) for n, p in MODEL_PRESETS.items() for k in p.layer_counts()])
def test_presets_and_layers_round_trip_through_the_url(name, layer):
    p = MODEL_PRESETS[name]
    a = p.attention(layer)
    s = Settings(device="cpu", preset=name, num_heads=p.num_heads, num_kv_heads=p.num_kv_heads, head_dim=p.head_dim,
                 window=a.window, soft_cap=a.soft_cap, sinks=a.sinks, layer=layer if p.mixed else SLIDING)
    query = state.settings_to_query(s)
    assert ("layer" in query) == p.mixed
    assert state.settings_from_query(query) == (s, [])


def test_custom_attention_round_trips_and_a_window_off_its_preset_is_custom():
    s = Settings(device="cpu", preset=state.CUSTOM, window=77, soft_cap=12.5, sinks=True)
    query = state.settings_to_query(s)
    assert (query["window"], query["soft_cap"], query["sinks"]) == ("77", "12.5", "1") and "layer" not in query
    assert state.settings_from_query(query) == (s, [])
    plain = state.settings_to_query(Settings(device="cpu"))
    assert not {"window", "soft_cap", "sinks", "layer"} & set(plain)
    # a window Mistral does not have: its heads stay, the preset becomes Custom
    s, notes = state.settings_from_query({"preset": "Mistral-7B-v0.1", "window": "1000"}, Settings(device="cpu"))
    assert notes == [] and (s.preset, s.window, s.num_heads) == (state.CUSTOM, 1000, 32)
    # Gemma 2 with its window turned off is its global layer
    s, _ = state.settings_from_query({"preset": "Gemma-2-9B", "layer": "sliding", "soft_cap": "50"},
                                     Settings(device="cpu"))
    assert (s.preset, s.layer, s.window) == ("Gemma-2-9B", SLIDING, 4096)


@pytest.mark.parametrize("params, note", [
    ({"window": "0"}, "`window=0` ignored (must be between 1 and 1,048,576); using no window (the whole context)."),
    ({"window": "lots"}, "`window=lots` ignored (not a whole number); using no window (the whole context)."),
    ({"window": "99999999"}, "`window=99999999` ignored (must be between 1 and 1,048,576); using no window "
                             "(the whole context)."),
    ({"soft_cap": "0"}, "`soft_cap=0` ignored (must be between 0.1 and 1,000); using no soft-cap."),
    ({"soft_cap": "inf"}, "`soft_cap=inf` ignored (not a number); using no soft-cap."),
    ({"sinks": "yes"}, "`sinks=yes` ignored (must be 0 or 1); using 0."),
    ({"layer": "local"}, "`layer=local` ignored (must be one of sliding, global); using 'sliding'."),
])
def test_bad_attention_values_in_the_url_fall_back_with_a_note(params, note):
    s, notes = state.settings_from_query(params, Settings(device="cpu"))
    assert notes == [note]
    assert s.attention_options() == {}


def test_a_bad_window_for_a_preset_falls_back_to_the_presets():
    s, notes = state.settings_from_query({"preset": "Mistral-7B-v0.1", "window": "-1"}, Settings(device="cpu"))
    assert notes == ["`window=-1` ignored (must be between 1 and 1,048,576); using 4096."]
    assert (s.preset, s.window) == ("Mistral-7B-v0.1", 4096)
