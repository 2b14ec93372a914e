"""AppTest suite for the Serving simulation page: its controls, the step slider,
bad input, the CPU caps and timing Triton on a step. Assertions read the Plotly
specs the page sends."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import CPU_ONLY, TINY, arr, assert_clean, chart, url_notes  # noqa: E402

from explorer import formatting, limits  # noqa: E402
from explorer.serving import figures as serving_figures  # noqa: E402
from explorer.style import SEQUENCE_COLORS  # noqa: E402
from explorer.serving.history import simulate  # noqa: E402
from paged_attention import execution_mode  # noqa: E402
from explorer.serving.view import serving_config  # noqa: E402

SERVING = "app_pages/serving_simulation.py"

#: A small simulation that every machine runs the same way (the page's defaults differ).
SIM = {"sv_num_blocks": 64, "sv_block_size": 8, "sv_max_batch": 6, "sv_rate": 0.3, "sv_prompt_lo": 4,
       "sv_prompt_hi": 96, "sv_output_lo": 4, "sv_output_hi": 48, "sv_steps": 120}


def open_serving(**changes) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in TINY.items():
        at.query_params[key] = value
    for key, value in {**SIM, **changes}.items():
        at.session_state[key] = value
    at.switch_page(SERVING)
    return at.run()


def sim_history():
    config = serving_config(SIM["sv_num_blocks"], SIM["sv_block_size"], SIM["sv_max_batch"], SIM["sv_rate"],
                            ("long-tail", SIM["sv_prompt_lo"], SIM["sv_prompt_hi"]),
                            ("long-tail", SIM["sv_output_lo"], SIM["sv_output_hi"]), 0)
    return simulate(config, SIM["sv_steps"])


def pool_codes(at: AppTest, num_blocks: int) -> np.ndarray:
    return arr(chart(at, "sv_pool_chart")["data"][0]["z"]).ravel()[:num_blocks]


def test_serving_page_starts_at_the_busiest_step():
    at = open_serving()
    assert_clean(at)
    history = sim_history()
    step = int(history.metrics["blocks_in_use"].to_numpy().argmax())
    assert at.slider(key="sv_step").value == step
    owner = history.records[step].pool_owner()
    assert np.array_equal(pool_codes(at, 64) == 0, owner == -1)
    blocks = next(m for m in at.metric if m.label == "Physical blocks")  # the pool size moved to the delta
    assert (blocks.value, blocks.delta) == (f"{(owner >= 0).sum()}", f"of 64 · {formatting.format_percent((owner >= 0).mean())}")
    table = chart(at, "sv_table_chart")
    assert table["layout"]["yaxis"]["ticktext"] == [str(s) for s in history.records[step].seq_ids]
    timeline = chart(at, "sv_timeline_chart")
    assert arr(timeline["data"][0]["y"]).tolist() == history.metrics["blocks_in_use"].tolist()
    at.toggle(key="sv_anim").set_value(True).run()
    assert_clean(at)
    frames = chart(at, "sv_anim_chart")["frames"]
    assert len(frames) == 61 and frames[-1]["name"] == "119"  # every 2nd step, and the last
    bars = chart(at, "sv_tradeoff_chart")["data"][0]
    assert bars["x"] == ["1", "2", "4", "8", "16", "32", "64", "128", "256"]


def test_serving_slider_moves_every_figure():
    history = sim_history()
    at = open_serving()
    for step in (5, 60):
        at.slider(key="sv_step").set_value(step).run()
        assert_clean(at)
        pool = chart(at, "sv_pool_chart")
        assert pool["layout"]["title"]["text"] == f"Physical block pool after step {step}"
        owner = history.records[step].pool_owner()
        assert np.array_equal(pool_codes(at, 64) == 0, owner == -1)
        freed = history.changes(step).freed
        marks = {t["name"]: t for t in pool["data"]}
        got = set(arr(marks["freed"]["customdata"])[:, 0].astype(int)) if len(freed) else set()
        assert got == set(freed)
        shapes = chart(at, "sv_timeline_chart")["layout"]["shapes"]
        assert {s["x0"] for s in shapes} == {step}


def test_serving_with_one_step_draws_it_without_a_slider():
    at = open_serving()
    at.number_input(key="sv_steps").set_value(1).run()
    assert_clean(at)
    assert not at.slider and any("Decode step 0, the only one" in c.value for c in at.caption)
    assert chart(at, "sv_pool_chart")["layout"]["title"]["text"].endswith("after step 0")


def test_serving_step_comes_back_when_steps_grow_again():
    """Steps down to 1 and back: the slider returns to the step chosen before, not to an empty step 0."""
    at = open_serving()
    at.slider(key="sv_step").set_value(60).run()
    at.number_input(key="sv_steps").set_value(1).run()
    at.number_input(key="sv_steps").set_value(40).run()  # the chosen step is still out of range: the last
    assert_clean(at)
    assert at.slider(key="sv_step").value == 39
    at.number_input(key="sv_steps").set_value(120).run()
    assert at.slider(key="sv_step").value == 60
    assert chart(at, "sv_pool_chart")["layout"]["title"]["text"] == "Physical block pool after step 60"
    at.number_input(key="sv_steps").set_value(40).run()
    at.slider(key="sv_step").set_value(10).run()  # a step chosen meanwhile is the choice from then on
    at.number_input(key="sv_steps").set_value(120).run()
    assert_clean(at)
    assert at.slider(key="sv_step").value == 10


def test_serving_controls_change_the_simulation():
    at = open_serving()
    at.selectbox(key="sv_block_size").set_value(16).run()
    assert_clean(at)
    bars = chart(at, "sv_tradeoff_chart")["data"][0]
    assert bars["marker"]["line"]["width"][bars["x"].index("16")] == 2  # the chosen block size is outlined
    assert "of 16 slots" in chart(at, "sv_pool_chart")["layout"]["title"]["subtitle"]["text"]
    at.number_input(key="sv_rate").set_value(0.0).run()
    assert_clean(at)
    assert {m.label: m.value for m in at.metric}["Running"] == "0"  # no traffic, nothing runs
    assert any("No sequence is running" in i.value for i in at.info)
    at.segmented_control(key="sv_prompt_kind").set_value("uniform").run()
    at.number_input(key="sv_rate").set_value(0.5).run()
    assert_clean(at)


@pytest.mark.parametrize("changes, message", [
    ({"sv_prompt_lo": 200, "sv_prompt_hi": 100}, "Prompt length needs shortest <= longest"),
    ({"sv_num_blocks": 4}, "The pool must hold the longest request: Prompt length longest + Output length longest"),
])
def test_invalid_simulation_shows_an_error(changes, message):
    at = open_serving(**changes)
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert not at.get("plotly_chart")


def test_time_triton_on_a_step_and_across_block_sizes():
    at = open_serving()
    step = at.slider(key="sv_step").value
    at.button(key="sv_time").click().run()
    assert_clean(at)
    metric = next(m for m in at.metric if m.label == f"Triton decode at step {step}")
    assert float(metric.value.split()[0].replace(",", "")) > 0
    table = at.dataframe[0].value
    assert table["step"].tolist() == [step] and table["correct"].tolist() == ["yes"]
    (column,) = [c for c in table.columns if c.startswith("median (")]
    assert metric.value == f"{table[column].iloc[0]} {column[8:-1]}"  # the card and its table agree ("382 ms", "382")

    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    spec = chart(at, "sv_tradeoff_chart")
    line = spec["data"][1]
    expected = ["4", "16", "64"] if execution_mode() == "interpreter" else ["1", "2", "4", "8", "16", "32", "64", "128", "256"]
    assert line["x"] == expected and all(y > 0 for y in line["y"])
    # One unit for Triton's latency on the page (issue 27): the chart's axis, the card and the table.
    (rows,) = at.session_state["sv_latency"].values()
    (per_size,) = at.session_state["sv_tradeoff_latency"].values()
    times = {s: r["median_ms"] for s, r in rows.items()}
    unit = formatting.duration_unit([*times.values(), *per_size.values()])
    assert spec["layout"]["yaxis2"]["title"]["text"] == f"Triton latency ({unit})"
    metric = next(m for m in at.metric if m.label == f"Triton decode at step {step}")
    table = at.dataframe[0].value
    assert metric.value == formatting.format_duration(times[step], unit) and f"median ({unit})" in table.columns
    assert "GB/s" in table.columns


def _serving_with_a_large_step() -> AppTest:
    """The Serving page with a batch of up to 32 sequences of up to 1,000-token prompts
    (the sidebar's default heads: 32/8/128): over the CPU cap at every block size."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**SIM, "sv_num_blocks": 512, "sv_max_batch": 32, "sv_rate": 1.0, "sv_prompt_hi": 1000}.items():
        at.session_state[key] = value
    return at.switch_page(SERVING).run()


@CPU_ONLY
def test_cpu_refuses_to_time_a_large_step():
    at = _serving_with_a_large_step()
    assert not at.exception
    assert any("On the CPU the benchmark runs only when" in w.value for w in at.warning)
    assert at.button(key="sv_time").disabled


@pytest.mark.gpu
def test_gpu_times_triton_on_a_serving_step():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for key, value in {**TINY, "device": "cuda"}.items():
        at.query_params[key] = value
    at.switch_page(SERVING).run()
    at.button(key="sv_time").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["correct"].tolist() == ["yes"] and float(table["GB/s"].iloc[0].replace(",", "")) > 0


@CPU_ONLY
def test_serving_defaults_fit_the_cpu_cap_so_the_first_clicks_work():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)  # the sidebar's defaults: 32/8/128 heads
    at.switch_page(SERVING).run()
    assert_clean(at)
    assert at.number_input(key="sv_max_batch").value == 4  # 4 x 32 heads x 64 = 8,192, the cap
    assert at.number_input(key="sv_rate").value == 0.13  # 0.2 for 6 slots, scaled to 4
    waiting = at.metric[1].value  # at the busiest step
    assert int(waiting) <= 5  # the queue stays short (0.2 a step into 4 slots: 10 waiting there)
    assert not at.button(key="sv_time").disabled and not at.button(key="sv_tradeoff_run").disabled
    assert not any("CPU" in w.value for w in at.warning)
    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    line = chart(at, "sv_tradeoff_chart")["data"][1]
    assert line["x"] == ["4", "16", "64"] and all(y > 0 for y in line["y"])  # every size timed, none refused


@CPU_ONLY
def test_serving_says_up_front_when_no_block_size_fits_the_cpu_cap():
    at = _serving_with_a_large_step()
    assert not at.exception
    assert at.button(key="sv_tradeoff_run").disabled
    (note,) = [w.value for w in at.warning if w.value.startswith("Nothing to time")]
    assert limits.CPU_WORK_RULE in note and "11 x max(8 x 1,006, 32 x 64) = 88,528" in note
    assert note.endswith("Lower **Max batch**, the sidebar's KV heads or the longest prompt or output.")
    assert not any("Not timed" in i.value for i in at.info)


def test_serving_metrics_stay_short_enough_to_fit():
    at = open_serving(sv_num_blocks=16_384, sv_steps=1000, sv_rate=2.0)
    assert_clean(at)
    values = {m.label: m.value for m in at.metric}
    assert all(len(v) <= 7 for v in values.values()), values  # six side by side: "16,384" fits, "561 / 16,384" not
    blocks = next(m for m in at.metric if m.label == "Physical blocks")
    assert blocks.delta.startswith("of 16,384 · ")


@CPU_ONLY
def test_serving_step_refusal_names_max_batch_not_the_sidebar_batch():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**SIM, "sv_num_blocks": 512, "sv_max_batch": 999, "sv_rate": 1.0, "sv_prompt_hi": 1000}.items():
        at.session_state[key] = value
    at.switch_page(SERVING).run()
    assert not at.exception
    assert at.button(key="sv_time").disabled
    (refusal,) = [w.value for w in at.warning if w.value.startswith("On the CPU the benchmark runs only when")]
    assert "Lower **Max batch**, the sidebar's KV heads or the longest prompt or output, or run on a GPU." in refusal
    assert "Lower the batch" not in refusal


@CPU_ONLY
def test_block_sizes_are_timed_on_one_batch(monkeypatch):
    # Each block size on its own busiest step would time different token and
    # sequence counts; the trade-off must differ in block size alone.
    import ui.benchmark as bench_ui

    seen = []
    real = bench_ui.time_inputs_locked

    def spy(config, build, names, **kwargs):
        seen.append(config)
        return real(config, build, names, **kwargs)

    monkeypatch.setattr(bench_ui, "time_inputs_locked", spy)
    at = open_serving(sv_num_blocks=32)  # a pool so tight that each block size's busiest step runs another batch
    at.button(key="sv_tradeoff_run").click().run()
    assert_clean(at)
    assert [c.block_size for c in seen] == [4, 16, 64]
    assert len({(c.batch_size, c.lengths) for c in seen}) == 1 and sum(seen[0].lengths) > 0
    assert any("one batch for every block size" in c.value and "block size 8's busiest step" in c.value
               for c in at.caption)  # the page's own block size (8), though the CPU times only 4, 16 and 64
    spec = chart(at, "sv_tradeoff_chart")
    assert "one batch laid out in each block size" in spec["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")


def test_serving_block_tables_use_the_pools_sequence_colours():
    at = open_serving()
    assert_clean(at)
    table, pool = chart(at, "sv_table_chart"), chart(at, "sv_pool_chart")
    assert table["data"][0]["colorscale"] == pool["data"][0]["colorscale"]
    assert "colour = sequence, as in the pool" in table["layout"]["title"]["subtitle"]["text"]


# -- sharing: a common system prompt and n samples per request ------------------------------

SHARING = {"sv_system_prompt": 20, "sv_samples": 3, "sv_num_blocks": 96}
COPY = serving_figures.POOL_CHANGE_MARKS["copied"].name  # the copy-on-write mark's legend name


def test_serving_block_tables_follow_the_pool_into_reference_counts():
    """Issue 27: the pool by reference count beside tables in sequence colours that said "colour = sequence, as
    in the pool". The page colours the tables as the pool: each cell the pool's level of its block, so said."""
    at = open_serving(**SHARING, sv_pool_colour="reference count")
    assert_clean(at)
    table, pool = chart(at, "sv_table_chart"), chart(at, "sv_pool_chart")
    levels = arr(pool["data"][0]["z"]).ravel()
    z, blocks = arr(table["data"][0]["z"]), arr(table["data"][0]["customdata"])[..., 4].astype(int)
    held = ~np.isnan(z)
    assert held.any() and np.array_equal(z[held], levels[blocks[held]])
    assert table["data"][0]["colorscale"] == pool["data"][0]["colorscale"]
    subtitle = table["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")
    assert "colour = sequences holding the block, as in the pool" in subtitle and "colour = sequence," not in subtitle
    assert table["layout"]["legend"]["title"]["text"] == pool["layout"]["legend"]["title"]["text"]
    assert any("coloured as in the pool by how many running sequences hold it" in c.value for c in at.caption)


def sharing_history():
    config = serving_config(SHARING["sv_num_blocks"], SIM["sv_block_size"], SIM["sv_max_batch"], SIM["sv_rate"],
                            ("long-tail", SIM["sv_prompt_lo"], SIM["sv_prompt_hi"]),
                            ("long-tail", SIM["sv_output_lo"], SIM["sv_output_hi"]), 0,
                            SHARING["sv_system_prompt"], SHARING["sv_samples"])
    return simulate(config, SIM["sv_steps"])


def test_serving_without_sharing_shows_no_sharing_chart():
    at = open_serving()
    assert_clean(at)
    assert at.number_input(key="sv_system_prompt").value == 0 and at.number_input(key="sv_samples").value == 1
    assert not any(e.proto.id.endswith("-sv_sharing_chart") for e in at.get("plotly_chart"))
    assert not any("copy-on-write" in m.value for m in at.markdown)


def test_serving_with_sharing_draws_both_lines_and_states_cow_and_hit_rate():
    at = open_serving(**SHARING)
    assert_clean(at)
    metrics = sharing_history().metrics
    spec = chart(at, "sv_sharing_chart")
    lines = {t["name"]: arr(t["y"]) for t in spec["data"]}
    assert lines["with sharing"].tolist() == metrics["blocks_in_use"].tolist()
    assert lines["without sharing"].tolist() == metrics["blocks_unshared"].tolist()
    assert (lines["with sharing"] <= lines["without sharing"]).all()
    assert (lines["with sharing"] < lines["without sharing"]).any()
    assert lines["pool size"].tolist() == [96, 96]
    step = at.slider(key="sv_step").value
    row = metrics.iloc[step]
    text = next(m.value for m in at.markdown if "copy-on-write" in m.value)
    assert f"**{int(row['cow_copies']):,} copy-on-write cop" in text
    rate = formatting.format_percent(row["prefix_hits"] / row["prefix_queries"])
    assert f"prefix-cache hit rate of {rate}**" in text and row["prefix_hits"] > 0
    # the block table marks the shared cells
    table = {t.get("name"): t for t in chart(at, "sv_table_chart")["data"]}
    assert "shared block (2+ sequences)" in table
    at.slider(key="sv_step").set_value(5).run()
    assert_clean(at)
    assert {s["x0"] for s in chart(at, "sv_sharing_chart")["layout"]["shapes"]} == {5}


def test_serving_pool_by_reference_count_with_sharing_marks():
    """The pool's colour mode: a widget in the URL; by reference count the shared blocks stand out in few levels,
    and the step's marks are the block manager's events, not differences of the owner map."""
    history = sharing_history()
    at = open_serving(**SHARING)
    assert_clean(at)
    assert at.segmented_control(key="sv_pool_colour").value == "sequence"
    step = int(history.metrics["copied"].to_numpy().argmax())
    at.slider(key="sv_step").set_value(step).run()
    record = history.records[step]
    shared = int(np.flatnonzero(np.bincount(record.blocks) > 1)[0])
    lowest = min(s for s, row in zip(record.seq_ids, record.block_tables()) if shared in row)
    assert pool_codes(at, 96)[shared] == 2 + lowest % len(SEQUENCE_COLORS)  # a shared block: its lowest holder
    at.segmented_control(key="sv_pool_colour").set_value("reference count").run()
    assert_clean(at)
    assert at.query_params["sv_pool_colour"] in ("reference count", ["reference count"])
    pool = chart(at, "sv_pool_chart")
    refs = np.bincount(history.records[step].blocks, minlength=96)
    levels = np.select([refs == 0, refs == 1, refs == 2, refs <= 4], [0, 1, 2, 3], 4)
    assert (pool_codes(at, 96) == levels).all() and (levels >= 2).any()
    marks = {t["name"]: t for t in pool["data"]}
    assert {"1 sequence", "2 sequences", "3–4 sequences", "5–6 sequences"} <= set(marks)
    c = history.changes(step)
    got = set(arr(marks[COPY]["customdata"])[:, 0].astype(int))
    assert got == set(c.copied) and got
    copy_words = serving_figures.POOL_CHANGE_MARKS["copied"].words  # the caption names the mark as drawn
    assert any(f"{copy_words} = a copy-on-write copy" in cap.value and "reference count" in cap.value
               for cap in at.caption)
    taken = next(m for m in at.metric if m.label == "Blocks taken")
    recycled = len(set(c.recycled) - set(c.copied))
    assert (taken.value, taken.delta) == (f"{len(c.taken)}", f"physical ({history.logical_blocks_added(step)} logical)")
    assert f"{len(c.freed)} freed · {recycled} recycled · {len(c.copied)} copied" in taken.help


def test_serving_blocks_taken_counts_what_the_pool_marks_under_sharing():
    """The card named only copies under sharing while the pool marked recycled blocks too: at a step that
    recycles blocks it does not copy, the card's counts are the pool's marks, one by one."""
    history = sharing_history()
    m = history.metrics
    step = int(np.flatnonzero((m["recycled"] > m["copied"]) & (m["freed"] > 0))[0])
    c = history.changes(step)
    assert set(c.recycled) - set(c.copied)  # a recycled block that is not a copy
    at = open_serving(**SHARING)
    at.slider(key="sv_step").set_value(step).run()
    assert_clean(at)
    names = {mark.name for mark in serving_figures.POOL_CHANGE_MARKS.values()}
    marks = {t["name"]: 0 if t.get("customdata") is None else len(arr(t["customdata"]))
             for t in chart(at, "sv_pool_chart")["data"] if t.get("name") in names}
    taken = next(m for m in at.metric if m.label == "Blocks taken")
    listed = taken.help.split("counted as the pool marks them: ", 1)[1].split(".", 1)[0]  # the delta: physical · logical
    counts = dict(reversed(part.split(" ", 1)) for part in listed.split(" · "))
    assert counts["recycled"] == str(marks["recycled"]) and marks["recycled"] > 0
    assert counts["copied"] == str(marks[COPY]) and counts["freed"] == str(marks["freed"])
    assert int(taken.value) == marks["taken"] + marks["recycled"] + marks[COPY]


def test_serving_pool_colour_from_the_url():
    from test_app import open_app
    query = {**TINY, **{k: str(v) for k, v in {**SIM, **SHARING}.items()}, "sv_pool_colour": "reference count"}
    at = open_app(query, page=SERVING, timeout=120)
    assert_clean(at)
    assert at.segmented_control(key="sv_pool_colour").value == "reference count"
    assert "5–6 sequences" in {t["name"] for t in chart(at, "sv_pool_chart")["data"]}
    bad = open_app({**query, "sv_pool_colour": "owner"}, page=SERVING, timeout=120)
    assert any("sv_pool_colour=owner" in n for n in url_notes(bad))
    assert bad.segmented_control(key="sv_pool_colour").value == "sequence"


@pytest.mark.parametrize("changes, message", [
    ({"sv_samples": 7}, "Samples per request must be at most Max batch"),
    ({"sv_system_prompt": 600}, "The pool must hold the longest request: Common system prompt (tokens) + Prompt"),
])
def test_invalid_sharing_shows_an_error(changes, message):
    at = open_serving(**{**SHARING, **changes})
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert not at.get("plotly_chart")


def test_serving_settings_from_the_url():
    from test_app import open_app
    query = {**TINY, "sv_num_blocks": "48", "sv_block_size": "4", "sv_max_batch": "3", "sv_rate": "0.25",
             "sv_steps": "60", "sv_prompt_kind": "uniform", "sv_prompt_hi": "40", "sv_samples": "2"}
    at = open_app(query, page=SERVING, timeout=120)
    assert_clean(at)
    assert not url_notes(at)
    assert at.number_input(key="sv_num_blocks").value == 48 and at.selectbox(key="sv_block_size").value == 4
    assert at.number_input(key="sv_max_batch").value == 3 and at.number_input(key="sv_rate").value == 0.25
    assert at.number_input(key="sv_steps").value == 60 and at.number_input(key="sv_prompt_hi").value == 40
    assert at.number_input(key="sv_samples").value == 2 and at.session_state["sv_prompt_kind"] == "uniform"
    q = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert {k: q.get(k) for k in query if k.startswith("sv_")} == {k: v for k, v in query.items() if k.startswith("sv_")}
    assert "sv_output_hi" in q  # every setting is in the URL, the defaults too


def test_serving_bad_url_values_are_named():
    from test_app import open_app
    at = open_app({**TINY, "sv_num_blocks": "0", "sv_rate": "nan", "sv_block_size": "3", "sv_steps": "60"},
                  page=SERVING, timeout=120)
    assert not at.exception
    notes = url_notes(at)
    for text in ("sv_num_blocks=0", "sv_rate=nan", "sv_block_size=3"):
        assert any(text in n for n in notes), (text, notes)
    assert at.number_input(key="sv_steps").value == 60
    assert at.query_params["sv_num_blocks"] != "0"


def test_serving_runs_despite_an_error_in_the_sidebars_batch():
    from test_app import open_app
    # TINY's batch, ragged (236 and 114 tokens): a 128-token prefix is longer than the second
    query = {**TINY, "ctx_mode": "ragged", "lo": "16", "hi": "256", "prefix": "128", "prefix_groups": "2",
             **{k: str(v) for k, v in SIM.items()}}
    at = open_app(query, page=SERVING, timeout=120)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("sidebar's batch has an error" in c.value for c in at.caption)
    assert at.number_input(key="sv_num_blocks").value == SIM["sv_num_blocks"]
    assert at.get("plotly_chart")
    # the block table page, which uses the batch, still refuses it
    at.switch_page("app_pages/block_table.py").run()
    assert any("Shared prefix (128 tokens) must not exceed" in e.value for e in at.error)


def test_serving_bad_url_values_are_named_despite_an_error_in_the_sidebars_batch():
    from test_app import open_app
    query = {**TINY, "ctx_mode": "ragged", "lo": "16", "hi": "256", "prefix": "128", "prefix_groups": "2",
             "sv_pool_colour": "garbage", "sv_steps": "-5"}
    at = open_app(query, page=SERVING, timeout=120)
    assert not at.exception
    notes = url_notes(at)
    for text in ("sv_pool_colour=garbage", "sv_steps=-5"):
        assert any(text in n for n in notes), (text, notes)
    assert at.segmented_control(key="sv_pool_colour").value == "sequence"
