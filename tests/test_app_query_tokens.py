"""AppTest suite of the new tokens per sequence (draft tokens, issue 25): the
sidebar's control (one number for all, or per sequence), its URL and bad values,
the Block table page's marks and the Decode benchmark run with them. The Settings
and URL rules without Streamlit: test_settings.py."""

from __future__ import annotations

import csv
import io

import pytest
import torch

import ui.benchmark as bench_ui
from explorer import formatting, limits
from explorer import settings as state
from explorer.bench import view
from explorer.cache.cell_style import NEW_TOKEN_COLOR, NEW_TOKENS
from paged_attention import TOLERANCES
from test_app import BENCH, TABLE, TINY, arr, assert_clean, chart, open_app
from test_app_benchmark import exact_timed_calls  # noqa: F401  (autouse: the timed calls asked for)
from ui import benchmark_view as bench_view


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
    (caption,) = [c.value for c in at.caption if "A yellow star marks a block that holds new tokens" in c.value]
    assert "8 query tokens" in caption
    # Words and marker agree (review: ":material/star:" drew an outline ☆ beside filled yellow stars).
    assert caption.startswith(f':color[★]{{foreground="{NEW_TOKEN_COLOR}"}} ') and ":material/star" not in caption
    assert stars["marker"]["symbol"] == "star" and stars["marker"]["color"] == NEW_TOKEN_COLOR


def test_block_table_with_one_new_token_has_no_stars():
    at = open_app(TINY, page=TABLE)
    assert_clean(at)
    for key in ("bt_table", "bt_walk"):
        assert NEW_TOKENS not in _trace_names(chart(at, key))
    tokens = next(m for m in at.metric if m.label == "Tokens (logical)")
    assert not tokens.proto.delta
    assert not any("yellow star" in c.value for c in at.caption)


# -- Decode benchmark --------------------------------------------------------------

def test_benchmark_runs_every_implementation_with_four_new_tokens_per_sequence():
    """q_len 4 on two sequences of 37 tokens: 8 query rows a step. Every implementation
    gets them (through inputs.kwargs()), passes against the float64 reference, and the
    page shows time per step and per token (a step's over 8), bandwidth on
    decode_bytes() and the query_lens column in the CSV."""
    query = {**TINY, "new_tokens": "4"}
    at = open_app(query, page=BENCH, timeout=180)
    assert any(i.value.startswith("**New tokens: 4 per sequence, 8 query tokens a step.**") for i in at.info)
    assert any("q=4" in c.value for c in at.caption)
    at.checkbox(key="bench_include_simple").check().run()
    at.button(key="bench_run").click().run()
    assert_clean(at)
    config = state.settings_from_query(query)[0].config()
    slot = bench_ui.inputs_slot()
    assert slot.key == config and slot.inputs.query.shape[0] == 8 and slot.inputs.query_lens.tolist() == [4, 4]
    assert slot.reference.shape[0] == 8

    last = at.session_state[bench_view.LAST]
    results = last.results
    assert [r.name for r in results] == ["naive", "vectorized", "triton", "triton_simple"]
    assert all(r.passed for r in results)
    # the error chart: every implementation within float16's tolerance of the float64 reference
    accuracy = chart(at, "bench_accuracy")
    assert len(accuracy["data"][0]["y"]) == 4 and max(accuracy["data"][0]["y"]) < TOLERANCES[torch.float16][0]
    # bandwidth: K and V once a step, plus a query and an output row per token
    want_bytes = 2 * 74 * 2 * 32 * 2 + 2 * 8 * 4 * 32 * 2
    assert config.decode_bytes() == want_bytes and all(r.bytes_moved == want_bytes for r in results)
    bandwidth = chart(at, "bench_bandwidth")["data"][0]
    assert bandwidth["y"] == pytest.approx([want_bytes / r.median_ms / 1e6 for r in results])

    # per token = per step / 8, on the cards and in the table, in the live run's one unit
    unit = formatting.duration_unit(view.history_durations([last]))
    cards = {m.label: m.value for m in at.metric}
    for r in results:
        assert cards[r.label] == formatting.format_duration(r.median_ms, unit)
        assert cards[f"{r.label}, per token"] == formatting.format_duration(r.median_ms / 8, unit)
    table = at.dataframe[0].value  # the time table: the time per token after the step's
    assert list(table.columns)[:3] == ["implementation", "median_ms", "per_token_ms"]
    assert list(table["per_token_ms"]) == [formatting.duration_number(r.median_ms / 8, unit) for r in results]
    assert list(table["median_ms"]) == [formatting.duration_number(r.median_ms, unit) for r in results]

    rows = list(csv.DictReader(io.StringIO(view.results_csv(last))))
    assert {row["query_lens"] for row in rows} == {"4"}
    assert [float(row["median_ms_per_token"]) for row in rows] == pytest.approx([r.median_ms / 8 for r in results])

    # back to one new token: the history names the change, and the per-token cards go
    at.number_input(key="sb_query_len").set_value(1).run()
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert list(at.dataframe[2].value["change"]) == ["first run", "new tokens 4→1"]
    assert not any(m.label.endswith(", per token") for m in at.metric)
    assert "per_token_ms" not in at.dataframe[0].value.columns
    assert not any(i.value.startswith("**New tokens") for i in at.info)


def test_many_new_tokens_are_refused_on_the_cpu_with_the_rule():
    """Sixteen new tokens of eight heads over four sequences: the simple kernel's
    programs grow with them, and the CPU cap says so before anything runs."""
    at = open_app({**TINY, "batch": "4", "heads": "8", "new_tokens": "16"}, page=BENCH)
    assert_clean(at)
    refusal = next(w.value for w in at.warning if "On the CPU the benchmark runs only when" in w.value)
    assert limits.CPU_WORK_RULE in refusal and "4 x max(2 x 37, 8 x 64 x 16) = 32,768" in refusal
    assert "new tokens" in refusal.split("Lower", 1)[1] and at.button(key="bench_run").disabled


@pytest.mark.parametrize(("lens", "expect"), [
    ("0,17", "no token to star"),  # review 4: "its last 1 token (positions -1–-1, starred) are ..."
    ("1,17", "Its last token (position 0, starred) is this step's new token"),
])
def test_the_token_walk_words_for_a_sequence_shorter_than_its_new_tokens(lens, expect):
    at = open_app({**TINY, "ctx_mode": "ragged", "lens": lens, "new_tokens": "3"}, page=TABLE)
    assert_clean(at)
    words = [m.value for m in at.markdown if "token *t* lives in logical block" in m.value]
    assert len(words) == 1 and expect in words[0]
    assert "-1" not in words[0]
