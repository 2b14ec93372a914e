"""AppTest suite for the Inside the kernel page: the traced sequence and head,
launch-plan overrides, limits and bad input. Assertions read the Plotly specs
the page sends."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import arr, assert_clean, chart, open_app, url_notes  # noqa: E402

from explorer import formatting  # noqa: E402
from explorer import settings as state  # noqa: E402
from explorer.kernel.view import decode_shape  # noqa: E402
from paged_attention import assign_blocks, plan_launch  # noqa: E402

KERNEL = "app_pages/inside_the_kernel.py"
RAGGED = {"batch": "3", "ctx_mode": "ragged", "lens": "300,97,1", "heads": "6", "kv_heads": "2", "head_dim": "24",
          "preset": "Custom", "block": "16", "dtype": "float32", "lo": "1", "hi": "300"}


def test_kernel_page_traces_the_longest_sequence():
    at = open_app(RAGGED, page=KERNEL)
    assert_clean(at)
    assert at.number_input(key="ik_seq").value == 0
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens"] == "300" and metrics["Table lookups"] == "19"
    assert float(metrics["Error vs reference"]) < 1e-12
    # Three significant figures (issue 27: a review saw "2.5e-16"), as sig3 writes it.
    assert metrics["Error vs reference"] == formatting.sig3(float(metrics["Error vs reference"]))
    assert re.fullmatch(r"0|\d\.\d\de-\d\d", metrics["Error vs reference"]), metrics["Error vs reference"]
    config = state.settings_from_query(RAGGED)[0].config()
    tables, _ = assign_blocks(config)
    walk = chart(at, "ik_walk_chart")["data"][0]
    base = arr(walk["base"]).astype(int)
    assert np.array_equal(arr(walk["customdata"])[:, 0].astype(int), tables[0].numpy()[base // 16])
    assert sorted(np.concatenate([np.arange(b, b + n) for b, n in zip(base, arr(walk["x"]).astype(int))])) == \
        list(range(300))
    softmax = chart(at, "ik_softmax_chart")
    errors = [t for t in softmax["data"] if t["name"].startswith("error vs final")]
    star = [t for t in softmax["data"] if t["name"] == "output"]
    if len(errors) == 1:  # one split (the CPU's plan): its last tile is the final answer
        assert arr(errors[0]["y"])[-1] < 1e-12
    else:  # split-K (a GPU's plan): only the merge, drawn as the star, is the final answer
        assert star and arr(star[0]["y"])[-1] < 1e-12


def test_kernel_page_follows_sequence_head_and_plan_overrides():
    at = open_app(RAGGED, page=KERNEL)
    at.number_input(key="ik_seq").set_value(1).run()
    at.number_input(key="ik_head").set_value(5).run()
    assert_clean(at)
    assert {m.label: m.value for m in at.metric}["Tokens"] == "97"
    assert any("query head 5 reads KV head 1" in c.value for c in at.caption)
    at.toggle(key="ik_override").set_value(True).run()
    at.number_input(key="ik_splits").set_value(3).run()
    runs = {m.label: (m.value, m.delta) for m in at.metric}["Splits that run"]
    assert runs == ("1", "of 3")  # 97 tokens: all in split 0
    assert any("nothing to merge" in i.value for i in at.info)
    at.number_input(key="ik_seq").set_value(0).run()
    at.selectbox(key="ik_block_n").set_value(16).run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Splits that run"] == "3" and metrics["Tiles walked"] == "19"  # a 16-token tile per block
    assert float(metrics["Error vs reference"]) < 1e-12
    merge = chart(at, "ik_merge_chart")
    assert sum(arr(merge["data"][1]["y"])) == pytest.approx(100)
    assert len(merge["data"][0]["x"]) == 3
    at.toggle(key="ik_override").set_value(False).run()
    assert {m.label: m.value for m in at.metric}["Tiles walked"] != "19"


@pytest.mark.parametrize("query, kind, message", [
    ({"batch": "1", "ctx_mode": "uniform", "ctx": "40000"}, "error", "traces at most"),
    ({"batch": "2", "ctx_mode": "ragged", "lo": "500", "hi": "20"}, "error", "Shortest (500) must not exceed Longest (20)"),
])
def test_kernel_page_limits_and_bad_input(query, kind, message):
    at = open_app(query, page=KERNEL)
    assert not at.exception
    assert any(message in e.value for e in getattr(at, kind))


@pytest.mark.gpu
def test_gpu_kernel_page_traces_the_plan_of_the_gpu():
    query = {**RAGGED, "device": "cuda", "dtype": "float16"}
    at = open_app(query, page=KERNEL)
    assert_clean(at)
    if at.toggle(key="ik_override").value:  # opened on a showcase plan (the GPU's shows no merge here)
        at.toggle(key="ik_override").set_value(False).run()
        assert_clean(at)
    config = state.settings_from_query(query)[0].config()
    tables, _ = assign_blocks(config)
    plan = plan_launch(decode_shape(config, tables.numpy()), torch.device("cuda"), torch.float16)
    assert f"BLOCK_N = {plan.block_n} tokens per tile" in " ".join(c.value for c in at.caption)
    assert float({m.label: m.value for m in at.metric}["Error vs reference"]) < 1e-12


def test_kernel_page_explains_an_empty_sequence():
    at = open_app({"batch": "2", "ctx_mode": "ragged", "lens": "0,20", "lo": "0", "hi": "20"}, page=KERNEL)
    assert at.number_input(key="ik_seq").value == 1  # starts on the longest
    at.number_input(key="ik_seq").set_value(0).run()
    assert_clean(at)
    assert any("no cached tokens" in i.value for i in at.info)


def test_kernel_page_says_when_the_split_override_is_capped():
    query = {"batch": "3", "ctx_mode": "ragged", "lens": "0,5000,31", "lo": "0", "hi": "5000"}
    at = open_app(query, page=KERNEL)
    at.toggle(key="ik_override").set_value(True).run()
    at.number_input(key="ik_splits").set_value(256).run()
    assert_clean(at)
    assert {m.label: (m.value, m.delta) for m in at.metric}["Splits that run"] == ("157", "of 157")
    (note,) = [i.value for i in at.info if "Splits capped" in i.value]
    assert note.startswith("Splits capped from 256 to 157: the longest sequence has 313 blocks of 16 tokens")
    at.number_input(key="ik_splits").set_value(8).run()
    assert not any("Splits capped" in i.value for i in at.info)


def test_kernel_page_says_when_every_sequence_is_empty():
    at = open_app({"batch": "3", "ctx_mode": "uniform", "ctx": "0"}, page=KERNEL)
    assert_clean(at)
    (info,) = [i.value for i in at.info if "no cached tokens" in i.value]
    assert info.startswith("Every sequence is empty")
    assert "Pick another sequence" not in info


def test_kernel_page_has_its_own_size_limit_not_the_pool_drawing_one():
    """The page draws no pool: a pool too large to draw on the Block table page is traced here."""
    query = {"batch": "4096", "ctx_mode": "uniform", "ctx": "3900", "block": "1"}
    at = open_app(query, page=KERNEL, timeout=120)
    assert_clean(at)
    assert {m.label: m.value for m in at.metric}["Tokens"] == "3,900"
    at = open_app({**query, "ctx": "8000"}, page=KERNEL, timeout=120)
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "draws pools" not in error and "lays out the whole batch" in error
    assert error.endswith("Use a larger block size, a smaller batch, a shorter context or fewer spare blocks.")


def test_kernel_page_opens_on_a_walk_with_tiles_and_a_merge():
    """The first view shows what the page is for; the note says the plan is overridden, and any choice stays."""
    at = open_app(page=KERNEL)
    assert_clean(at)
    metrics = {m.label: (m.value, m.delta) for m in at.metric}
    assert int(metrics["Splits that run"][0]) >= 2 and int(metrics["Tiles walked"][0]) >= 4
    chart(at, "ik_merge_chart")
    (note,) = [i.value for i in at.info if "kernel's own plan" in i.value]
    if at.toggle(key="ik_override").value:  # the CPU's own plan walks the default batch as one split
        assert "nothing to merge" in note and "turn it off to see the kernel's own plan" in note
    at.number_input(key="ik_splits").set_value(2).run()
    assert {m.label: m.delta for m in at.metric}["Splits that run"] == "of 2"
    at.toggle(key="ik_override").set_value(False).run()
    assert_clean(at)
    assert not any("kernel's own plan" in i.value for i in at.info)
    at.switch_page("app_pages/block_table.py").run()
    at.switch_page(KERNEL).run()
    assert at.toggle(key="ik_override").value is False  # the speaker's choice is kept


def test_kernel_page_sequence_and_head_from_the_url():
    at = open_app({**RAGGED, "ik_seq": "1", "ik_head": "5"}, page=KERNEL)
    assert_clean(at)
    assert at.number_input(key="ik_seq").value == 1 and at.number_input(key="ik_head").value == 5
    assert {m.label: m.value for m in at.metric}["Tokens"] == "97"
    assert not url_notes(at)
    assert at.query_params["ik_seq"] in ("1", ["1"]) and at.query_params["ik_head"] in ("5", ["5"])
    at.number_input(key="ik_head").set_value(2).run()
    assert at.query_params["ik_head"] in ("2", ["2"])


def test_kernel_page_bad_sequence_in_the_url_is_named():
    at = open_app({**RAGGED, "ik_seq": "3", "ik_head": "x"}, page=KERNEL)
    assert not at.exception
    notes = url_notes(at)
    assert any("ik_seq=3" in n and "between 0 and 2" in n and "using 0" in n for n in notes), notes
    assert any("ik_head=x" in n for n in notes), notes
    assert at.number_input(key="ik_seq").value == 0  # the longest sequence, as without a URL
    assert at.query_params["ik_seq"] in ("0", ["0"])


def test_kernel_page_draws_the_work_list_of_a_ragged_batch():
    at = open_app({**RAGGED, "kv_heads": "1"}, page=KERNEL)
    assert_clean(at)
    config = state.settings_from_query({**RAGGED, "kv_heads": "1"})[0].config()
    work = chart(at, "ik_work_chart")
    bars = work["data"][0]
    assert bars["name"] == "programs"
    custom = arr(bars["customdata"]).astype(int)
    for seq, n in enumerate(config.lengths):  # every needed block of every sequence read by one program
        mine = custom[:, 0] == seq
        covered = np.concatenate([np.arange(a, b + 1) for a, b in zip(custom[mine, 3], custom[mine, 4])])
        assert np.array_equal(np.sort(covered), np.arange(-(-n // 16)))
    assert [int(t) for t in bars["text"]] == list(custom[:, 1])  # labelled by launch order
    assert work["layout"]["yaxis"]["ticktext"][0] == "<b>▶ seq 0</b>"  # the traced (longest) sequence
    (summary,) = [m.value for m in at.markdown if "programs per KV head" in m.value]
    assert summary.startswith("**Balanced plan**") and "Sequence 0, traced below, is the marked row." in summary
    at.number_input(key="ik_seq").set_value(2).run()
    assert chart(at, "ik_work_chart")["layout"]["yaxis"]["ticktext"][2] == "<b>▶ seq 2</b>"


def _shared_prefix_page():
    """The page on a shared-prefix batch: the sidebar has no shared-prefix fields yet, so
    this stands in for it, leaving the config where ``ui.sidebar.current`` reads it."""
    import sys
    from pathlib import Path

    import streamlit as st

    root = Path.cwd()
    sys.path.insert(0, str(root))
    import ui.sidebar as sidebar
    from explorer.settings import Settings
    from paged_attention import DecodeConfig

    config = DecodeConfig(batch_size=5, context_lens=(1400, 1100, 1024, 1800, 1040), num_heads=6, num_kv_heads=2,
                          head_dim=24, block_size=16, dtype="float32", device="cpu", shared_prefix=1024,
                          prefix_groups=2)
    st.session_state[sidebar._RESULT] = sidebar.SidebarResult(settings=Settings(), config=config, error=None)
    page = root / "app_pages" / "inside_the_kernel.py"
    exec(compile(page.read_text(), str(page), "exec"), {"__name__": "__main__"})


def test_kernel_page_traces_the_prefix_pass_of_a_shared_prefix_group():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_shared_prefix_page, default_timeout=60).run()
    assert_clean(at)
    assert at.number_input(key="ik_seq").value == 3  # the longest
    assert at.toggle(key="ik_override").value is False  # the prefix pass already makes a merge
    (note,) = [i.value for i in at.info if "prefix pass" in i.value]
    assert note.startswith("Sequence 3 shares its first 64 blocks (1,024 tokens) with its group of 2 sequences (3, 4)")
    metrics = {m.label: (m.value, m.delta) for m in at.metric}
    assert metrics["Partials merged"][1] == "2 prefix"  # the CPU plan: 2 pieces of 32 shared blocks
    assert float(metrics["Error vs reference"][0]) < 1e-12
    work = chart(at, "ik_work_chart")
    assert [t["name"] for t in work["data"]][:2] == ["programs", "prefix pass"]
    walk = chart(at, "ik_walk_chart")
    assert walk["layout"]["yaxis"]["ticktext"][0].startswith("prefix 0 · tile 0")
    merge = chart(at, "ik_merge_chart")
    assert merge["data"][0]["x"][0] == "prefix 0" and merge["data"][0]["x"][-1].startswith("split")
    assert sum(arr(merge["data"][1]["y"])) == pytest.approx(100)
    assert_split_table_fits(at, prefix=True)


def assert_split_table_fits(at, prefix: bool) -> None:
    """The split table shows its columns side by side within the page's main column at
    1280 px: each has a set width, and together they fit (review at 1280x720: the
    last of the trace's twelve columns was cut off)."""
    import json

    from explorer.kernel.tables import MAIN_COLUMN_PX, PREFIX_COLUMNS, SPLIT_TABLE

    (table,) = [d for d in at.dataframe if "weight" in d.value.columns]  # a read-only table has no id
    config = json.loads(table.proto.columns)
    shown = list(table.value.columns)
    assert shown == [c for c in SPLIT_TABLE if prefix or c not in PREFIX_COLUMNS]
    widths = [config[c]["width"] for c in shown]
    assert all(isinstance(w, int) and w > 0 for w in widths)
    assert sum(widths) <= MAIN_COLUMN_PX, sum(widths)
    assert {"m", "l", "weight", "share"} <= set(shown)  # what the merge takes from each split
    # Numbers as the merge chart writes them, three significant figures, right-aligned (issue 27: "1.714", 0.3409).
    for name in ("m", "l", "weight", "share", "err_vs_row"):
        assert config[name].get("alignment") == "right", (name, config[name])
        assert all(isinstance(v, str) for v in table.value[name]), name
    assert table.value["share"].str.endswith("%").all()


def test_kernel_page_split_table_fits_the_page():
    at = open_app(page=KERNEL)  # opens on a plan that merges
    assert_clean(at)
    assert_split_table_fits(at, prefix=False)


def test_kernel_page_traces_window_sinks_and_soft_cap_from_the_sidebar():
    at = open_app(RAGGED, page=KERNEL)
    at.toggle(key="sb_window_on").set_value(True).run()
    at.number_input(key="sb_window").set_value(45).run()
    at.toggle(key="sb_soft_cap_on").set_value(True).run()
    at.number_input(key="sb_soft_cap").set_value(1.5).run()
    at.toggle(key="sb_sinks").set_value(True).run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    # The window's blocks only: tokens 255..299 lie in blocks 15..18.
    assert metrics["Tokens"] == "300" and metrics["Table lookups"] == "4"
    assert float(metrics["Error vs reference"]) < 1e-12
    walk = chart(at, "ik_walk_chart")["data"]
    (band,) = [t for t in walk if t["name"] == "outside the window: not read"]
    assert max(arr(band["x"])) == 255 and arr(band["customdata"])[0] == 15
    read = walk[0]
    assert arr(read["base"]).min() >= 255 and arr(read["x"]).sum() == 45
    logits = chart(at, "ik_logits_chart")["data"]
    raw, capped = (arr(t["y"]).astype(float) for t in logits[:2])
    assert len(capped) == 45 and np.abs(capped).max() <= 1.5
    np.testing.assert_allclose(capped, 1.5 * np.tanh(raw / 1.5), atol=1e-12)
    softmax = chart(at, "ik_softmax_chart")["data"]
    (sink,) = [t for t in softmax if t["name"] == "sink"]
    low, high = arr(sink["y"]).astype(float)
    assert high > low > 0
    at.toggle(key="ik_override").set_value(True).run()
    at.number_input(key="ik_splits").set_value(3).run()
    assert_clean(at)
    assert float({m.label: m.value for m in at.metric}["Error vs reference"]) < 1e-12
    merge = chart(at, "ik_merge_chart")["data"]
    assert list(merge[0]["x"])[-1] == "sink" and 0 < float(arr(merge[1]["y"])[-1]) < 100
    assert np.isclose(arr(merge[1]["y"]).astype(float).sum(), 100)
    (table,) = [d.value for d in at.dataframe if "weight" in d.value.columns]  # a read-only table has no id
    assert table.iloc[-1]["split"] == "sink" and table["share"].str.endswith("%").all()  # as the chart writes it
    assert np.isclose(table["share"].str.rstrip("%").astype(float).sum(), 100, atol=0.1 * len(table))
    words = " ".join(m.value for m in at.markdown)
    for term in ("**Sliding window**", "**Logit soft-capping**", "**Attention sink**"):
        assert term in words


def test_kernel_page_without_options_shows_none_of_their_marks():
    at = open_app(RAGGED, page=KERNEL)
    assert_clean(at)
    assert all(t["name"] != "outside the window: not read" for t in chart(at, "ik_walk_chart")["data"])
    assert all(t["name"] != "sink" for t in chart(at, "ik_softmax_chart")["data"])
    assert "ik_logits_chart" not in {getattr(e, "key", None) for e in at.main}
    words = " ".join(m.value for m in at.markdown)
    assert "**Sliding window**" not in words and "**Attention sink**" not in words
