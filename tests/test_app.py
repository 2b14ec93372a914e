"""AppTest suite for the shared sidebar and the Block table page: every sidebar
control, URLs that reproduce a view, bad input, the table-size limit, and number
boxes. Also the AppTest helpers the other page suites import (``open_app``,
``chart``, ``arr``, ``TINY``). Assertions read the Plotly specs the pages send."""

from __future__ import annotations

import base64
import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from explorer import settings as state  # noqa: E402
from explorer import style
from explorer.formatting import format_bytes  # noqa: E402
from paged_attention import assign_blocks, execution_mode  # noqa: E402

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


def assert_clean(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def arr(value) -> np.ndarray:
    """A Plotly spec array as float NumPy: plain lists (None -> NaN) or typed arrays
    (``{"dtype", "bdata", "shape"}``, base64), which Plotly uses for NumPy data."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).astype(float)
        shape = value.get("shape")
        return data.reshape([int(n) for n in str(shape).split(",")]) if shape else data
    return np.array([[np.nan if v is None else v for v in row] if isinstance(row, list) else
                     (np.nan if row is None else row) for row in value], dtype=float)


# -- block table page ----------------------------------------------------------

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
    at.number_input(key="sb_batch_size").set_value(2).run()  # the picked sequence no longer exists
    assert_clean(at)
    assert at.number_input(key="bt_seq").value == 1


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
    assert any("URL: " in w.value for w in at.warning)
    at.button(key="sb_dismiss_url_notes").click().run()
    assert_clean(at)
    assert not any("URL: " in w.value for w in at.warning)
    assert not [b for b in at.button if b.key == "sb_dismiss_url_notes"]


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
     "Shared prefix (tokens) (500) must not exceed Tokens per sequence (128)."),
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


def test_block_table_sharing_scenario_marks_shared_cells_and_states_the_saving():
    from explorer.cache.sharing import shared_prefix_batch

    at = open_app(BASE)
    at.toggle(key="bt_share").set_value(True).run()
    at.number_input(key="bt_samples").set_value(2).run()
    at.number_input(key="bt_common").set_value(64).run()
    assert_clean(at)
    config = state.settings_from_query(BASE)[0].config()
    b = shared_prefix_batch(config.lengths, config.block_size, config.num_blocks, 64, 2)
    block = config.kv_cache_bytes() // config.num_blocks
    saving = next(m.value for m in at.markdown if m.value.startswith("**Sharing saves"))
    assert saving.startswith(f"**Sharing saves {b.blocks_saved} blocks of {b.blocks_unshared}**")
    assert format_bytes(b.blocks_saved * block, significant=3) in saving
    assert f"{b.cow_copies} copy-on-write copies" in saving and f"found {b.prefix_hits} of" in saving
    assert {m.label: m.value for m in at.metric}["Blocks used (physical)"] == str(b.blocks_used)
    table = chart(at, "bt_table")
    assert np.array_equal(arr(table["data"][0]["z"]), np.where(b.block_tables < 0, np.nan, b.block_tables),
                          equal_nan=True)
    marks = table["data"][-1]
    assert marks["name"] == "shared block (2+ sequences)"
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
    assert at.number_input(key="sb_batch_size").value == state.MAX_BATCH  # the box shows the value in use
    assert any(f"5,000 is above the maximum, {state.MAX_BATCH:,}; using {state.MAX_BATCH:,}" in w.value
               for w in at.sidebar.warning)
    assert at.query_params["batch"] == str(state.MAX_BATCH)
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

def test_presentation_mode_from_the_url_enlarges_the_charts():
    plain = chart(open_app(TINY), "bt_table")
    at = open_app({**TINY, "present": "1"})
    assert_clean(at)
    assert at.toggle(key="sb_present").value is True
    big = chart(at, "bt_table")
    assert big["layout"]["font"]["size"] == pytest.approx(plain["layout"]["font"]["size"] * style.PRESENTATION_SCALE)
    assert big["layout"]["title"]["font"]["size"] > plain["layout"]["title"]["font"]["size"]
    assert big["layout"]["height"] > plain["layout"]["height"]
    assert at.query_params["present"] == "1"
    at.toggle(key="sb_present").set_value(False).run()  # off again: plain charts, and the URL drops it
    assert chart(at, "bt_table")["layout"]["font"] == plain["layout"]["font"]
    assert "present" not in at.query_params


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
        metric = next(m for m in at.metric if m.label == "KV cache")
        return memory, metric.value, metric.delta

    config = state.settings_from_query(BASE)[0].config()
    memory, value, delta = readouts()
    assert "float16: 2 bytes per value" in memory
    assert value == format_bytes(config.kv_cache_bytes(), significant=3)
    assert delta == f"{format_bytes(config.kv_cache_bytes() // config.num_blocks, significant=3)} per block"

    at.selectbox(key="sb_kv_dtype").set_value("float8_e4m3fn").run()
    assert_clean(at)
    fp8 = config.with_(kv_dtype="float8_e4m3fn")
    memory, value, delta = readouts()
    assert "fp8 e4m3: 1 byte per value" in memory
    assert f"**{format_bytes(fp8.kv_cache_bytes())}**" in memory
    assert value == format_bytes(config.kv_cache_bytes() // 2, significant=3)
    assert delta == f"{format_bytes(config.kv_cache_bytes() // config.num_blocks // 2, significant=3)} per block"
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
