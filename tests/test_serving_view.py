"""The Serving simulation page's view model: the step it holds, its cards, captions and timing plan."""

import pytest

from explorer import formatting, page_urls
from explorer.serving import view
from explorer.serving.history import StepRecord, simulate
from explorer.serving.tradeoff import block_size_tradeoff
from explorer.serving.traffic import LengthDist, ServingConfig
from paged_attention import DecodeConfig

SIM = ServingConfig(num_blocks=64, block_size=8, max_batch_size=6, arrival_rate=0.3,
                    prompt_len=LengthDist("long-tail", 4, 96), output_len=LengthDist("long-tail", 4, 48), seed=0)
HEADS = dict(num_heads=4, num_kv_heads=2, head_dim=32, dtype="float32", device="cpu", seed=0)


def test_held_step_starts_at_the_busiest_and_brings_a_choice_back():
    shown, held = view.held_step(None, None, 120, busiest=61)
    assert (shown, held) == (61, None)
    shown, held = view.held_step(60, held, 1, 61)  # Steps down to 1: the last step, the choice kept
    assert (shown, held) == (0, (60, 0))
    shown, held = view.held_step(shown, held, 40, 61)  # still out of range
    assert (shown, held) == (39, (60, 39))
    assert view.held_step(shown, held, 120, 61) == (60, None)  # back, once it fits
    shown, held = view.held_step(60, None, 40, 61)
    assert view.held_step(10, held, 120, 61) == (10, None)  # moved meanwhile: that is the choice


def test_cards_count_what_the_pool_marks():
    history = simulate(SIM, 120)
    step = int(history.metrics["recycled"].to_numpy().argmax())
    cards = {c.label: c for c in view.step_cards(history, step, 6, sharing=False)}
    c = history.changes(step)
    assert cards["Blocks taken"].value == str(len(c.taken))
    assert cards["Blocks taken"].delta == f"{len(c.freed)} freed · {len(c.recycled)} recycled"
    in_use = int(history.metrics["blocks_in_use"].iloc[step])
    assert cards["Physical blocks"].delta == f"of 64 · {formatting.format_percent(in_use / 64)}"
    assert all(len(card.value) <= 7 for card in cards.values())


def test_blocks_taken_under_sharing_counts_physical_against_logical():
    """Review at 1280x720: with sharing, the card counted physical blocks only (and six
    cards cut its delta to "0 freed · 2 recycl…"). Five cards now; under sharing the
    card sets the physical blocks taken against the logical entries the tables
    gained, the pool's mark counts in its help."""
    from dataclasses import replace

    history = simulate(replace(SIM, num_blocks=96, system_prompt=20, samples=3), 120)
    m = history.metrics
    gained = [history.logical_blocks_added(s) for s in range(history.steps)]
    for s in range(1, history.steps):  # the tables' entries, counted directly
        before, now = history.records[s - 1], history.records[s]
        had = dict(zip(before.seq_ids.tolist(), before.blocks_per_sequence.tolist()))
        assert gained[s] == sum(max(n - had.get(q, 0), 0) for q, n in zip(now.seq_ids.tolist(),
                                                                            now.blocks_per_sequence.tolist()))
    step = max(range(history.steps), key=lambda s: gained[s] - int(m["taken"].iloc[s]))
    assert gained[step] > int(m["taken"].iloc[step])  # a fork or a prefix-cache hit: more logical than physical
    cards = {c.label: c for c in view.step_cards(history, step, 6, sharing=True)}
    assert len(cards) == 5 and all(len(card.delta or "") <= 22 for card in cards.values())
    taken = cards["Blocks taken"]
    assert (taken.value, taken.delta) == (str(len(history.changes(step).taken)), f"physical ({gained[step]} logical)")
    assert view.change_counts(history.changes(step), True) in taken.help
    assert cards["Waiting"].delta == f"{int(m['finished'].iloc[step])} finished so far"


def test_page_defaults_fit_the_cpu_cap():
    small = DecodeConfig(batch_size=1, context_lens=(16,), num_heads=32, num_kv_heads=8, head_dim=128)
    cpu = view.page_defaults(small)
    assert cpu["sv_max_batch"] == 4 and cpu["sv_rate"] == 0.13  # 4 x 32 heads x 64 = 8,192, the cap
    gpu = view.page_defaults(small.with_(device="cuda"))
    assert (gpu["sv_num_blocks"], gpu["sv_max_batch"]) == (1024, 32)
    assert {f.key for f in page_urls.page_fields("serving_simulation")} == set(cpu)  # the URL registry's fields


def test_tradeoff_times_one_batch_and_names_what_is_over_the_cap():
    result = block_size_tradeoff(SIM, (4, 8, 16, 64), steps=60, pool_tokens=512)
    busiest = {b: StepRecord.from_snapshot(s) for b, s in result.snapshots.items()}
    timing = view.plan_tradeoff(busiest, [4, 8, 16, 64], 8, True, HEADS, 1, 3)
    assert timing.candidates == (4, 16, 64) and timing.source == 8  # the page's block size gives the batch
    assert {c.lengths for c in timing.configs.values()} == {tuple(timing.batch.context_lens.tolist())}
    assert set(timing.plans) == {4, 16, 64} and timing.refusal() is None
    assert "block size 8's busiest step" in timing.caption(True)
    big = view.plan_tradeoff(busiest, [4, 8, 16, 64], 8, True, {**HEADS, "num_heads": 64, "num_kv_heads": 64}, 1, 3)
    assert big.refused and big.refusal().startswith("Nothing to time" if not big.plans else "Not timed")


@pytest.mark.parametrize("frames, text", [([0, 5, 10, 11], "4 frames (every 5 steps, and the last)"),
                                          ([0, 1], "2 frames;")])
def test_animation_caption(frames, text):
    assert view.animation_caption(frames).startswith(text)


def test_triton_latency_has_one_unit_on_the_page():
    """Issue 27: the step card read "1.16 s" and the block-size chart "Triton latency
    (ms)": the page picks one unit from every latency it shows, and the card and the
    table write it; the table's bandwidth column says "GB/s" as the card does."""
    rows = {3: {"step": 3, "running": 2, "tokens": 40, "median_ms": 1160.0, "gbps": 0.0123, "correct": "yes"},
            9: {"step": 9, "running": 4, "tokens": 90, "median_ms": 980.0, "gbps": 0.0234, "correct": "yes"}}
    unit = view.page_duration_unit(rows, {4: 1500.0, 16: 1250.0})
    assert unit == "s"
    assert view.page_duration_unit(rows) == "s"
    assert view.page_duration_unit({9: rows[9]}, {4: 0.5}) == "ms"  # the block sizes' times count too
    assert view.page_duration_unit({}) == "ms"
    card = view.latency_card(rows[9], unit)
    assert card.value == "0.980 s" and card.delta.startswith("0.0234 GB/s")
    table = view.latency_table(rows, unit)
    assert list(table.columns) == ["step", "running", "tokens", "median (s)", "GB/s", "correct"]
    assert table["median (s)"].tolist() == ["1.16", "0.980"] and table["GB/s"].tolist() == ["0.0123", "0.0234"]
    assert view.latency_table({9: rows[9]})["median (ms)"].tolist() == ["980"]  # alone: its own unit


def test_every_count_says_logical_or_physical():
    """Issue 27 review: "Blocks in use 43 of 64", "Wasted slots" and the sharing
    sentence's "39 blocks with sharing against 53 without (14 saved)" did not say
    whether they count physical blocks or block-table entries. The cards are labelled
    physical as on the Block table page; the sentence counts the tables' logical
    blocks and the physical ones that hold them, with sharing and without."""
    from dataclasses import replace

    history = simulate(replace(SIM, num_blocks=96, system_prompt=20, samples=3), 120)
    m = history.metrics
    step = int((m["blocks_unshared"] - m["blocks_in_use"]).to_numpy().argmax())
    record = history.records[step]
    in_use, unshared = int(m["blocks_in_use"].iloc[step]), int(m["blocks_unshared"].iloc[step])
    assert unshared == int(record.blocks_per_sequence.sum()) > in_use == len(set(record.blocks.tolist()))
    cards = {c.label: c for c in view.step_cards(history, step, 6, sharing=True)}
    assert cards["Physical blocks"].value == str(in_use)
    wasted = cards["Wasted slots"]
    assert wasted.value == str(int(m["wasted_slots"].iloc[step]))
    assert wasted.delta == f"{formatting.format_percent(float(m['wasted_fraction'].iloc[step]))} of physical"
    assert all(len(card.label) <= 16 for card in cards.values())  # not cut at 1280 px ("Blocks in use (physi…")
    assert all(len(card.delta or "") <= 22 for card in cards.values())
    text = view.sharing_summary(history, step)
    assert f"list **{unshared} logical blocks**, held in **{in_use} physical blocks** with sharing" in text
    assert f"would take {unshared} physical blocks (**{unshared - in_use} physical saved**" in text


def test_sharing_chart_counts_physical_blocks():
    from dataclasses import replace

    from explorer.cache.sharing_figures import sharing_timeline_figure

    metrics = simulate(replace(SIM, system_prompt=20, samples=2), 30).metrics
    fig = sharing_timeline_figure(metrics, 5, 64)
    assert fig.layout.yaxis.title.text == "physical blocks"
    assert all("physical blocks" in t.hovertemplate for t in fig.data)
