"""AppTest suite for the attention options (sliding window, logit soft-cap, sinks):
the sidebar's Attention expander and layer picker as presets fill them, their URL
fields, the Block table's cells outside the window and its readout, and a
Decode benchmark run that passes the options to every implementation and the
reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ui.benchmark as bench_ui  # noqa: E402
from explorer import settings as state  # noqa: E402
from explorer.cache import cell_style  # noqa: E402
from paged_attention import assign_blocks  # noqa: E402

from test_app import BASE, BENCH, TABLE, TINY, arr, assert_clean, chart, open_app, url_notes  # noqa: E402
from test_app_benchmark import _fake_result, exact_timed_calls  # noqa: E402,F401  (autouse)


def _param(at, key):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def _attention(at) -> tuple:
    """(window on, window, soft-cap on, cap, sinks) as the sidebar's widgets hold them."""
    ss = at.session_state
    return (ss["sb_window_on"], ss["sb_window"], ss["sb_soft_cap_on"], ss["sb_soft_cap"], ss["sb_sinks"])


def _expander(at):
    (label,) = [e.label for e in at.sidebar.expander if e.label.startswith("Attention")]
    return label


def test_a_preset_fills_the_options_and_the_layer_picker_sets_the_window():
    at = open_app(BASE)
    assert not [b for b in at.button_group if b.key == "sb_layer"]  # Llama: every layer alike
    assert _expander(at) == "Attention: full attention"
    at.selectbox(key="sb_preset").set_value("Gemma-2-9B").run()
    assert_clean(at)
    assert _attention(at) == (True, 4096, True, 50.0, False)
    layer = at.button_group(key="sb_layer")
    assert layer.value == "sliding" and layer.options[0] == "sliding (window 4,096)"
    assert (_param(at, "window"), _param(at, "soft_cap"), _param(at, "layer")) == ("4096", "50", "sliding")
    assert _expander(at) == "Attention: sliding window 4,096 · soft-cap 50"
    at.button_group(key="sb_layer").set_value("global").run()
    assert_clean(at)
    assert _attention(at)[0] is False and _attention(at)[2:] == (True, 50.0, False)
    assert at.selectbox(key="sb_preset").value == "Gemma-2-9B"
    assert _param(at, "window") is None and _param(at, "layer") == "global"
    at.selectbox(key="sb_preset").set_value("gpt-oss-20b").run()
    assert _attention(at)[0::2] == (True, False, True) and at.session_state["sb_window"] == 128
    assert at.button_group(key="sb_layer").value == "sliding"
    at.selectbox(key="sb_preset").set_value("Mistral-7B-v0.1").run()
    assert not [b for b in at.button_group if b.key == "sb_layer"]  # every layer slides
    assert _attention(at) == (True, 4096, False, 50.0, False)  # the cap box keeps its number, off


def test_editing_an_option_by_hand_switches_the_preset_as_the_heads_do():
    at = open_app({**BASE, "preset": "Mistral-7B-v0.1"})
    assert _attention(at)[:2] == (True, 4096)
    at.number_input(key="sb_window").set_value(1000).run()
    assert_clean(at)
    assert at.selectbox(key="sb_preset").value == state.CUSTOM and _param(at, "window") == "1000"
    at.number_input(key="sb_window").set_value(4096).run()
    assert at.selectbox(key="sb_preset").value == "Mistral-7B-v0.1"  # its numbers pick it back
    at.toggle(key="sb_window_on").set_value(False).run()
    assert at.selectbox(key="sb_preset").value == "Llama-3.1-8B" and _param(at, "window") is None
    at.toggle(key="sb_sinks").set_value(True).run()
    assert at.selectbox(key="sb_preset").value == state.CUSTOM and _param(at, "sinks") == "1"
    at.selectbox(key="sb_preset").set_value("Gemma-2-9B").run()
    at.toggle(key="sb_window_on").set_value(False).run()  # Gemma 2's global layer
    assert (at.selectbox(key="sb_preset").value, at.button_group(key="sb_layer").value) == ("Gemma-2-9B", "global")
    at.number_input(key="sb_soft_cap").set_value(30.0).run()
    assert at.selectbox(key="sb_preset").value == state.CUSTOM and _param(at, "soft_cap") == "30"
    assert_clean(at)


def test_window_and_cap_boxes_keep_to_their_bounds():
    at = open_app({**BASE, "preset": "Custom", "window": "64", "soft_cap": "20"})
    at.number_input(key="sb_soft_cap").set_value(0.0).run()
    assert at.number_input(key="sb_soft_cap").value == 0.1
    assert any("**Cap**" in w.value and "below the minimum" in w.value for w in at.sidebar.warning)
    at.number_input(key="sb_window").set_value(0).run()
    assert at.number_input(key="sb_window").value == 1
    assert_clean(at)


def test_bad_attention_values_in_the_url_are_noted_and_left_off():
    at = open_app({**BASE, "window": "0", "soft_cap": "huge", "sinks": "2", "layer": "local"})
    assert_clean(at)
    notes = " ".join(w.value for w in at.sidebar.warning)
    for key in ("window=0", "soft_cap=huge", "sinks=2", "layer=local"):
        assert key in notes
    assert _attention(at)[0::2] == (False, False, False)
    assert "window" not in at.query_params and "soft_cap" not in at.query_params


def test_a_global_layer_beside_a_window_in_the_url_is_the_global_layer_and_says_so():
    """``layer=global&window=4096`` opened Gemma 2's sliding layer without a word."""
    at = open_app({**BASE, "preset": "Gemma-2-9B", "layer": "global", "window": "4096"})
    assert_clean(at)
    (note,) = [n for n in url_notes(at.sidebar) if "window=4096" in n]
    assert note.startswith("`window=4096` ignored: `layer=global` picks a global layer of Gemma-2-9B")
    assert at.button_group(key="sb_layer").value == "global" and _attention(at)[0] is False
    assert _param(at, "window") is None and _param(at, "layer") == "global"  # the URL says what is shown


def test_an_old_preset_name_in_the_url_opens_the_new_preset():
    at = open_app({**BASE, "preset": "Mistral-7B", "heads": "32", "kv_heads": "8", "head_dim": "128"})
    assert_clean(at)
    assert at.selectbox(key="sb_preset").value == "Mistral-7B-v0.1" and _param(at, "preset") == "Mistral-7B-v0.1"


# -- Block table ----------------------------------------------------------------------

def test_block_table_greys_the_blocks_outside_the_window_and_counts_those_read():
    query = {**BASE, "preset": "Custom", "window": "40"}
    at = open_app(query, page=TABLE)
    assert_clean(at)
    settings, _ = state.settings_from_query(query)
    config = settings.config()
    tables, _ = assign_blocks(config)
    lengths = np.array(config.lengths)
    first = np.maximum(lengths - 40, 0) // config.block_size
    outside = (np.arange(tables.shape[1])[None, :] < first[:, None]) & (tables.numpy() >= 0)
    assert outside.any()
    spec = chart(at, "bt_table")
    hatch = next(t for t in spec["data"] if t.get("name") == cell_style.OUTSIDE_WINDOW and t["type"] == "bar")
    assert {(round(b + h / 2), round(x)) for x, b, h in zip(arr(hatch["x"]), arr(hatch["base"]), arr(hatch["y"]))} == {
        (int(r), int(c)) for r, c in zip(*np.nonzero(outside))}
    held = sum(config.blocks_per_sequence)
    read = held - int(first.sum())
    assert any(f"Logical blocks read: {read} of {held} (window 40)" in m.value for m in at.markdown)
    assert any("K and V read per step" in m.value for m in at.sidebar.markdown)
    at.toggle(key="sb_window_on").set_value(False).run()
    assert not [t for t in chart(at, "bt_table")["data"] if t.get("name") == cell_style.OUTSIDE_WINDOW]
    assert not any("blocks read:" in m.value for m in at.markdown)


# -- Decode benchmark -----------------------------------------------------------------

def test_a_windowed_run_passes_the_options_to_every_implementation_and_the_reference(monkeypatch):
    seen = {}
    real_reference = bench_ui.reference_decode

    def reference(*args, **kwargs):
        seen["reference"] = kwargs
        return real_reference(*args, **kwargs)

    def runner(names, inputs, **kwargs):
        seen["implementations"] = inputs.kwargs()
        return [_fake_result(name, name, [1.0, 1.1, 1.2], None) for name in names]

    bench_ui.inputs_slot().release()
    monkeypatch.setattr(bench_ui, "reference_decode", reference)
    monkeypatch.setattr(bench_ui, "benchmark_implementations", runner)
    at = open_app({**TINY, "window": "16", "soft_cap": "20", "sinks": "1"}, page=BENCH, timeout=120)
    assert_clean(at)
    (note,) = [i.value for i in at.info if "Attention:" in i.value]
    assert note.startswith("**Attention: sliding window 16 · soft-cap 20 · sinks.**") and "32 of 74 tokens" in note
    assert any("window=16 soft_cap=20 sinks" in c.value for c in at.caption)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    for kwargs in (seen["reference"], seen["implementations"]):
        assert (kwargs["window"], kwargs["soft_cap"]) == (16, 20.0)
        assert kwargs["sinks"].dtype == torch.float32 and kwargs["sinks"].shape == (4,)
    assert torch.equal(seen["reference"]["sinks"], seen["implementations"]["sinks"])
    bench_ui.inputs_slot().release()


@pytest.mark.parametrize("options", [{"window": "16"}, {"soft_cap": "5"}, {"sinks": "1"},
                                     {"window": "9", "soft_cap": "5", "sinks": "1"}])
def test_a_run_with_attention_options_passes_against_the_reference(options):
    at = open_app({**TINY, **options}, page=BENCH, timeout=180)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    table = at.dataframe[1].value  # the accuracy table
    assert (table["correct"] == "yes").all(), table[["implementation", "correct"]]
