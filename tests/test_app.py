"""AppTest suite for the shared sidebar: every sidebar control, URLs that
reproduce a view, bad input, number boxes and presentation mode (the Block table
page's own suite is test_app_block_table.py). Also the AppTest helpers the other
page suites import (``open_app``, ``chart``, ``arr``, ``TINY``). Assertions read
the Plotly specs the pages send."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from explorer import limits, settings as state  # noqa: E402
from explorer import style
from explorer.cache.view import KV_CARD
from explorer.formatting import format_bytes  # noqa: E402
from paged_attention import assign_blocks, execution_mode  # noqa: E402
from ui import charts  # noqa: E402

APP = str(ROOT / "app.py")
BENCH = "app_pages/decode_benchmark.py"
TABLE = "app_pages/block_table.py"
#: The block-table tests start here, whatever this machine's defaults (a GPU's are larger).
BASE = {"batch": "4", "ctx_mode": "ragged", "lo": "16", "hi": "256", "spread": "long-tail", "seed": "0"}
#: A configuration the Triton interpreter runs in well under a second per call.
TINY = {"batch": "2", "ctx_mode": "uniform", "ctx": "37", "heads": "4", "kv_heads": "2", "head_dim": "32",
        "preset": "Custom", "warmup": "0", "iters": "2", "block": "16"}
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU caps and CPU defaults")


def open_app(query: dict | None = None, page: str | None = None, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()


def chart(at: AppTest, key: str) -> dict:
    """The Plotly spec of the chart with widget key ``key``."""
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith(f"-{key}"):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key!r}; have {[e.proto.id for e in at.get('plotly_chart')]}")


def results(at: AppTest):
    """The Decode benchmark's two results tables (time per call; accuracy and
    bandwidth) as one frame, joined on the implementation."""
    times, checks = at.dataframe[0].value, at.dataframe[1].value
    return times.merge(checks, on="implementation")


def result_columns(at: AppTest) -> dict:
    """The column configs (header, tooltip, width) of both results tables, by key."""
    return {**json.loads(at.dataframe[0].proto.columns), **json.loads(at.dataframe[1].proto.columns)}


def assert_clean(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def url_notes(where) -> list[str]:
    """The notes on ignored URL values in ``where`` (an AppTest, or its sidebar), one
    per value: the bullets of the one box that holds a place's notes
    (:func:`explorer.url_fields.notes_box`)."""
    boxes = [w.value for w in where.warning if w.value.startswith("**URL: ")]
    return [line.removeprefix("- ") for box in boxes for line in box.splitlines()[1:]]


def arr(value) -> np.ndarray:
    """A Plotly spec array as float NumPy: plain lists (None -> NaN) or typed arrays
    (``{"dtype", "bdata", "shape"}``, base64), which Plotly uses for NumPy data."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).astype(float)
        shape = value.get("shape")
        return data.reshape([int(n) for n in str(shape).split(",")]) if shape else data
    return np.array([[np.nan if v is None else v for v in row] if isinstance(row, list) else
                     (np.nan if row is None else row) for row in value], dtype=float)


def test_execution_mode_is_shown():
    at = open_app()
    badge = at.sidebar.markdown[0].value
    assert ("Triton interpreter" if execution_mode() == "interpreter" else "Triton compiled") in badge


SIDEBAR_CHANGES = [
    ("number_input", "sb_batch_size", 6, "batch", "6"),
    ("selectbox", "sb_spread", "uniform", "spread", "uniform"),
    ("number_input", "sb_ragged_low", 40, "lo", "40"),
    ("number_input", "sb_ragged_high", 120, "hi", "120"),
    ("selectbox", "sb_num_kv_heads", 4, "kv_heads", "4"),
    ("number_input", "sb_head_dim", 96, "head_dim", "96"),
    ("selectbox", "sb_block_size", 32, "block", "32"),
    ("selectbox", "sb_dtype", "bfloat16", "dtype", "bfloat16"),
    ("selectbox", "sb_block_layout", "fragmented", "layout", "fragmented"),
    ("selectbox", "sb_block_layout", "contiguous", "layout", "contiguous"),
    ("selectbox", "sb_device", "cpu", "device", "cpu"),
    ("selectbox", "sb_pool_headroom", 100, "headroom", "100"),
    ("number_input", "sb_seed", 7, "seed", "7"),
    ("number_input", "sb_warmup", 0, "warmup", "0"),
    ("number_input", "sb_iters", 2, "iters", "2"),
]


@pytest.mark.parametrize("kind, key, value, param, text", SIDEBAR_CHANGES, ids=[c[1] + "=" + str(c[2]) for c in SIDEBAR_CHANGES])
def test_each_sidebar_control(kind, key, value, param, text):
    at = open_app(BASE)
    getattr(at, kind)(key=key).set_value(value).run()
    assert_clean(at)
    assert at.query_params[param] == [text] or at.query_params[param] == text
    settings, notes = state.settings_from_query({k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()})
    assert notes == []
    tables, _ = assign_blocks(settings.config())
    z = arr(chart(at, "bt_table")["data"][0]["z"])
    assert z.shape == tuple(tables.shape)  # the figure follows the sidebar at once


def test_preset_fills_heads_and_editing_switches_to_custom():
    at = open_app(BASE)
    at.selectbox(key="sb_preset").set_value("Gemma-2-9B").run()
    assert (at.number_input(key="sb_num_heads").value, at.selectbox(key="sb_num_kv_heads").value,
            at.number_input(key="sb_head_dim").value) == (16, 8, 256)
    at.selectbox(key="sb_preset").set_value("Phi-3-mini").run()
    assert at.selectbox(key="sb_num_kv_heads").value == 32 and at.number_input(key="sb_head_dim").value == 96
    at.number_input(key="sb_num_heads").set_value(12).run()
    assert_clean(at)
    kv = at.selectbox(key="sb_num_kv_heads")
    assert kv.options == ["1", "2", "3", "4", "6", "12"] and kv.value == 12
    assert at.selectbox(key="sb_preset").value == "Custom"
    at.number_input(key="sb_num_heads").set_value(12).run()
    at.selectbox(key="sb_num_kv_heads").set_value(12).run()
    at.number_input(key="sb_head_dim").set_value(64).run()
    assert at.selectbox(key="sb_preset").value == "GPT-2"  # matching heads pick the preset back


def test_url_reproduces_a_view():
    query = {"batch": "3", "ctx_mode": "ragged", "lens": "5,40,16", "layout": "contiguous", "block": "8"}
    at = open_app(query)
    assert_clean(at)
    assert not at.warning
    z = arr(chart(at, "bt_table")["data"][0]["z"])
    assert z.shape == (3, 5)
    assert np.array_equal(z[1], np.arange(1, 6))  # contiguous: sequence 1 follows sequence 0's one block
    assert at.query_params["lens"] in ("5,40,16", ["5,40,16"])


def test_bad_query_params_fall_back_and_say_so():
    at = open_app({"batch": "lots", "dtype": "float8", "kv_heads": "5", "block": "-3", "seed": "x" * 500})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    for key in ("batch=lots", "dtype=float8", "block=-3", "kv_heads=5"):
        assert key in warnings
    default = str(state.default_settings().batch_size)
    assert at.query_params["batch"] in (default, [default])  # the URL is rewritten to the defaults used
    # The notes stay until dismissed (a later change of settings does not hide them).
    at.number_input(key="sb_seed").set_value(3).run()
    assert url_notes(at)
    at.button(key="sb_dismiss_url_notes").click().run()
    assert_clean(at)
    assert not url_notes(at)
    assert not [b for b in at.button if b.key == "sb_dismiss_url_notes"]


def test_many_bad_url_values_are_one_box_of_notes():
    """Issue 27: eleven bad URL values were eleven warning boxes, 1,900 px of the
    sidebar, the Presentation toggle pushed off screen. One box, a bullet a value,
    each naming the field, the rule and what is used instead."""
    hostile = {"batch": "abc", "ctx": "-5", "heads": "999999", "lens": "1,2,x", "new_tokens": "0", "soft_cap": "nan",
               "present": "maybe", "block": "7", "preset": "foo", "seed": "9" * 400, "window": "9" * 400}
    at = open_app(hostile, page=TABLE)
    assert_clean(at)
    (box,) = [w for w in at.sidebar.warning if w.value.startswith("**URL: ")]
    notes = url_notes(at.sidebar)
    assert box.value.splitlines()[0] == "**URL: 11 values ignored**"
    fields = [n.split("`")[1].split("=")[0] for n in notes]
    assert sorted(fields) == sorted(hostile)  # one bullet a field
    assert all("` ignored (" in n and "); using " in n for n in notes)  # the field, the rule, what is used
    assert "`batch=abc` ignored (not a whole number); using 4." in notes
    assert len([b for b in at.button if b.key == "sb_dismiss_url_notes"]) == 1
    # the Presentation toggle over the notes, in view however long they are
    order = [getattr(e, "key", None) or str(getattr(e, "value", ""))[:7] for e in at.sidebar]
    assert order.index("sb_present") < order.index("**URL: ") < order.index("sb_dismiss_url_notes")
    at.button(key="sb_dismiss_url_notes").click().run()
    assert not [w for w in at.sidebar.warning if w.value.startswith("**URL: ")]


def test_a_long_url_value_is_quoted_short():
    """A 400-digit URL value was echoed whole in the sidebar."""
    at = open_app({**TINY, "seed": "9" * 400})
    assert_clean(at)
    (note,) = [w.value for w in at.sidebar.warning if "seed=" in w.value]
    quoted = note.split("`")[1]
    assert quoted.startswith("seed=999") and quoted.endswith("…") and len(quoted) < 60
    assert at.number_input(key="sb_seed").value == 0  # the default is used


def test_ragged_range_breaking_the_rule_shows_error():
    at = open_app(BASE)
    at.number_input(key="sb_ragged_low").set_value(500).run()
    assert not at.exception
    assert any("Shortest (500) must not exceed Longest" in e.value for e in at.error)
    assert not at.get("plotly_chart")
    at.switch_page(BENCH).run()
    assert any("Shortest (500) must not exceed Longest" in e.value for e in at.error)
    at.number_input(key="sb_ragged_low").set_value(16).run()
    assert_clean(at)


@pytest.mark.parametrize("query, words", [
    ({**BASE, "prefix": "32", "prefix_groups": "10"}, "Prefix groups (10) must be from 1 to Batch size (4)."),
    ({**BASE, "prefix": "500", "ctx_mode": "uniform", "ctx": "128"},
     "Shared prefix (500 tokens) must not exceed Tokens per sequence (128)."),
])
def test_shared_prefix_errors_use_the_sidebars_labels(query, words):
    at = open_app(query, page=TABLE)
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(words in e for e in errors), errors
    assert not any("shared_prefix" in e or "prefix_groups" in e or "batch_size" in e for e in errors), errors


def test_prefix_groups_box_is_bounded_by_the_batch_size():
    at = open_app({**BASE, "prefix": "32", "prefix_groups": "2"}, page=TABLE)
    assert_clean(at)
    at.number_input(key="sb_prefix_groups").set_value(10).run()
    assert at.number_input(key="sb_prefix_groups").value == 4
    assert any("Prefix groups" in w.value and "using 4" in w.value for w in at.warning)
    assert_clean(at)


# -- number boxes --------------------------------------------------------------

def test_cleared_number_box_keeps_its_previous_value():
    at = open_app({**TINY, "batch": "4", "ctx_mode": "uniform", "ctx": "37"}, page=BENCH)
    for key, kept in (("sb_batch_size", 4), ("sb_context_len", 37)):
        at.number_input(key=key).set_value(None).run()  # what a cleared (nullable) box sends
        assert not at.exception
        assert at.number_input(key=key).value == kept
    assert at.query_params["batch"] == "4" and at.query_params["ctx"] == "37"
    assert not any("minimum" in w.value for w in at.sidebar.warning)


def test_number_typed_beyond_the_maximum_is_clamped_and_said():
    at = open_app({**TINY, "batch": "4"}, page=BENCH)
    at.number_input(key="sb_batch_size").set_value(5000).run()
    assert not at.exception
    assert at.number_input(key="sb_batch_size").value == limits.MAX_BATCH  # the box shows the value in use
    assert any(f"5,000 is above the maximum, {limits.MAX_BATCH:,}; using {limits.MAX_BATCH:,}" in w.value
               for w in at.sidebar.warning)
    assert at.query_params["batch"] == str(limits.MAX_BATCH)
    at.number_input(key="sb_batch_size").set_value(3).run()  # a value in range: the note goes
    assert not any("above the maximum" in w.value for w in at.sidebar.warning)
    at.number_input(key="sb_iters").set_value(0).run()
    assert at.number_input(key="sb_iters").value == 1
    assert any("0 is below the minimum, 1; using 1" in w.value for w in at.sidebar.warning)


def test_fraction_typed_in_a_whole_number_box_is_rounded_and_said():
    """An integer box dropped a fraction without a word (3.7 became 3; in the
    browser, which reads an integer box with parseInt, "1e3" became 1): the box is
    a float box whose callback rounds and says so (tests/test_browser_app.py types them)."""
    at = open_app({**TINY, "batch": "4"}, page=BENCH)
    at.number_input(key="sb_batch_size").set_value(3.7).run()
    assert not at.exception
    assert at.number_input(key="sb_batch_size").value == 4
    assert any("3.7 is not a whole number; using 4" in w.value for w in at.sidebar.warning)
    assert at.query_params["batch"] == "4"
    at.number_input(key="sb_batch_size").set_value(1000.0).run()  # what the browser sends for "1e3"
    assert at.number_input(key="sb_batch_size").value == 1000
    assert isinstance(at.number_input(key="sb_batch_size").value, int)
    assert at.query_params["batch"] == "1000"
    assert not any("whole number" in w.value for w in at.sidebar.warning)
    at.number_input(key="sb_seed").set_value(2.5).run()  # another whole-number box, in a row of two
    assert at.number_input(key="sb_seed").value == 3
    assert any("2.5 is not a whole number; using 3" in w.value for w in at.sidebar.warning)


# -- presentation mode ---------------------------------------------------------

def _plot_px(spec: dict) -> float:
    layout = spec["layout"]
    return layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]


@pytest.mark.parametrize("page, keys", [(TABLE, ("bt_table", "bt_pool", "bt_walk", "bt_path")),
                                        ("app_pages/inside_the_kernel.py", ("ik_walk_chart", "ik_softmax_chart"))])
def test_presentation_mode_from_the_url_builds_every_chart_at_its_scale(page, keys):
    """present=1 builds the page's figures at the presentation scale: their text
    and their plot areas larger (it made the block table's cells smaller)."""
    plain = open_app(TINY, page=page)
    at = open_app({**TINY, "present": "1"}, page=page)
    assert_clean(at)
    assert at.toggle(key="sb_present").value is True and at.query_params["present"] == "1"
    for key in keys:
        small, big = chart(plain, key), chart(at, key)
        assert big["layout"]["font"]["size"] == style.BASE_FONT_PX * style.PRESENTATION_SCALE
        assert big["layout"]["title"]["font"]["size"] > small["layout"]["title"]["font"]["size"]
        assert _plot_px(big) > _plot_px(small), key
    at.toggle(key="sb_present").set_value(False).run()  # off again: plain charts, and the URL drops it
    for key in keys:
        assert chart(at, key)["layout"]["font"] == chart(plain, key)["layout"]["font"]
        assert _plot_px(chart(at, key)) == _plot_px(chart(plain, key))
    assert "present" not in at.query_params


def test_modebar_has_a_band_of_its_own_and_none_in_presentation_mode():
    """Issue 27: Plotly's modebar covered the end of a half-page chart's title at
    1280 px. In normal mode it is short (the PNG download, reset, fullscreen) and sits
    in a band over the title; presentation mode has none (tests/test_browser_app.py
    checks what Chromium draws)."""
    plain = open_app(TINY, page=TABLE)
    at = open_app({**TINY, "present": "1"}, page=TABLE)
    for element in plain.get("plotly_chart"):
        config, spec = json.loads(element.proto.config), json.loads(element.proto.spec)
        assert config == {"modeBarButtonsToRemove": list(charts.MODEBAR_REMOVED)}
        layout = spec["layout"]
        title_top_px = (1 - layout["title"]["y"]) * layout["height"]  # the title hangs from its y
        assert title_top_px >= charts.MODEBAR_BAND_PX, element.proto.id
    for element in at.get("plotly_chart"):
        assert json.loads(element.proto.config) == {"displayModeBar": False}


def test_bad_presentation_value_in_the_url_is_named():
    at = open_app({**TINY, "present": "banana"})
    assert_clean(at)
    assert any("`present=banana` ignored" in w.value for w in at.sidebar.warning)
    assert at.toggle(key="sb_present").value is False
    assert "present" not in at.query_params


def test_fp8_kv_cache_halves_the_memory_readouts():
    at = open_app(BASE)
    assert_clean(at)
    assert at.selectbox(key="sb_kv_dtype").value == "same"
    assert not [b for b in at.button_group if b.key == "sb_kv_scale"]  # scales are for fp8 only

    def readouts() -> tuple[str, str, str]:
        memory = next(m.value for m in at.sidebar.markdown if "KV cache:" in m.value)
        metric = next(m for m in at.metric if m.label == KV_CARD)
        return memory, metric.value, metric.delta

    config = state.settings_from_query(BASE)[0].config()
    memory, value, delta = readouts()
    assert "float16: 2 bytes per value" in memory
    assert value == format_bytes(config.kv_cache_bytes(), significant=3)
    assert delta == f"{format_bytes(32 * config.kv_cache_bytes(), significant=3)} for 32 layers"  # Llama-3.1-8B

    at.selectbox(key="sb_kv_dtype").set_value("float8_e4m3fn").run()
    assert_clean(at)
    fp8 = config.with_(kv_dtype="float8_e4m3fn")
    memory, value, delta = readouts()
    assert "fp8 e4m3: 1 byte per value" in memory
    assert f"**{format_bytes(fp8.kv_cache_bytes())}**" in memory
    assert value == format_bytes(config.kv_cache_bytes() // 2, significant=3)
    assert delta == f"{format_bytes(32 * config.kv_cache_bytes() // 2, significant=3)} for 32 layers"
    at.button_group(key="sb_kv_scale").set_value("per_head").run()
    assert_clean(at)
    assert at.query_params["kv_dtype"] in ("float8_e4m3fn", ["float8_e4m3fn"])
    assert at.query_params["kv_scale"] in ("per_head", ["per_head"])


def test_kv_cache_dtype_from_the_url_and_a_bad_one_named():
    at = open_app({**BASE, "kv_dtype": "float8_e5m2", "kv_scale": "per_head"})
    assert_clean(at)
    assert not at.warning
    assert at.selectbox(key="sb_kv_dtype").value == "float8_e5m2"
    assert at.button_group(key="sb_kv_scale").value == "per_head"
    at = open_app({**BASE, "kv_dtype": "int4", "kv_scale": "per_row"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "kv_dtype=int4" in warnings and "kv_scale=per_row" in warnings
    assert at.selectbox(key="sb_kv_dtype").value == "same"
    assert at.query_params["kv_dtype"] in ("same", ["same"])  # rewritten to the value used


def test_fp8_wording_matches_the_sidebar():
    """Review: the KV-cache option "same as compute" named no control (the dtype box
    was labelled "dtype"), the Scales option read "per head" (they are per KV head),
    and its help spoke of "the largest |value| it covers over the format's largest
    finite number"."""
    at = open_app({**TINY, "kv_dtype": "float8_e4m3fn"})
    assert at.selectbox(key="sb_dtype").label == "Compute dtype"
    assert "same as compute dtype" in at.selectbox(key="sb_kv_dtype").options
    scales = next(e for e in at.sidebar if getattr(e, "proto", None) is not None
                  and "each scale maps" in (getattr(e.proto, "help", "") or ""))
    assert "each scale maps the largest value it covers to fp8's largest number" in scales.proto.help
    assert "per KV head" in [o.content for o in scales.proto.options]


def test_large_typed_number_is_quoted_with_separators_not_an_exponent():
    """Review: typing 99999999 said "1e+08 is above the maximum"."""
    at = open_app(TINY, page=BENCH)
    at.number_input(key="sb_batch_size").set_value(99999999).run()
    assert not at.exception
    assert any("99,999,999 is above the maximum, 4,096" in w.value for w in at.sidebar.warning), \
        [w.value for w in at.sidebar.warning]
    assert not any("e+" in w.value for w in at.sidebar.warning)


def test_kv_heads_changed_to_keep_a_divisor_is_said():
    """Review: −5 query heads became 1 with a note, but KV heads went from 2 to 1 silently."""
    at = open_app(TINY, page=BENCH)  # 4 query heads, 2 KV heads
    at.number_input(key="sb_num_heads").set_value(-5).run()
    assert not at.exception
    assert at.number_input(key="sb_num_heads").value == 1 and at.selectbox(key="sb_num_kv_heads").value == 1
    notes = [w.value for w in at.sidebar.warning]
    assert any("**Query heads**: -5 is below the minimum" in n for n in notes), notes
    assert "**KV heads**: 2 does not divide 1 query head; using 1, the nearest divisor." in notes
    at.number_input(key="sb_num_heads").set_value(8).run()  # KV heads stays 1 (a divisor): the note goes
    assert not any("KV heads" in w.value for w in at.sidebar.warning)


# -- the run guard and the queue note (ui/run_guard.py) ---------------------------

def _guarded_page():
    import streamlit as st

    from ui.benchmark import BenchmarkOOM, BenchmarkRefused
    from ui.run_guard import QueueNote, guarded

    def fail(exc):
        raise exc

    for exc in (BenchmarkRefused("too big for free memory"), BenchmarkOOM("out of memory"),
                ValueError("num_heads must be a multiple of num_kv_heads"), RuntimeError("boom")):
        with st.status("run") as status:
            assert guarded(fail, exc, status=status) is None
    st.session_state["ran"] = guarded(lambda a, b=0: a + b, 2, b=3)
    with QueueNote("yours starts when it ends") as waited:
        waited.on_wait()
    with QueueNote("yours starts when it ends"):
        pass  # a run that did not wait leaves nothing


def test_the_run_guard_turns_each_failure_into_an_error_and_a_waited_run_into_a_caption():
    at = AppTest.from_function(_guarded_page, default_timeout=30).run()
    assert not at.exception
    assert [e.value for e in at.error] == ["too big for free memory", "out of memory",
                                           "num_heads must be a multiple of num_kv_heads",
                                           "The run failed: RuntimeError: boom"]
    assert [s.state for s in at.status] == ["error"] * 4
    assert [s.label for s in at.status] == ["Not run: not enough memory", "Out of GPU memory",
                                            "Invalid configuration", "The run failed"]
    assert at.session_state["ran"] == 5
    assert not at.info  # no box stays once the runs are over
    assert [c.value for c in at.caption] == [":material/hourglass_bottom: Queued behind another session's run, then run."]
