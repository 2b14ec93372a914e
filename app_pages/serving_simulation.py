"""Serving simulation: the block manager under traffic, step by step."""

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from explorer import formatting, limits
from explorer import settings as state
from explorer.bench import readouts
from explorer.cache import figures as cache_figures
from explorer.cache import sampling, sharing_figures
from explorer.limits import (
    MAX_ANIMATION_VALUES,
    MAX_LENGTH,
    MAX_POOL_BLOCKS,
    MAX_RATE,
    MAX_SAMPLES,
    MAX_SIM_BATCH,
    MAX_STEPS,
)
from explorer.serving import figures as serving_figures
from explorer.serving.history import valid_block_sizes
from explorer.serving.simulator import LENGTH_KINDS
from explorer.serving.tradeoff import DEFAULT_BLOCK_SIZES
from paged_attention import build_decode_inputs
from ui.benchmark import time_inputs_locked
from ui.charts import show_chart
from ui.data import SERVING_LABELS, block_size_table, serving_history
from ui.inputs import bounded_number_input
from ui.page_state import seed_page
from ui.run_guard import QueueNote, guarded
from ui.sidebar import current, show_config_error, sync_url
from ui.tables import number_column, sig3_columns

TRADEOFF_STEPS = 200
#: Block sizes whose kernel latency is measured on the CPU (the interpreter is slow).
CPU_TRADEOFF_SIZES = (4, 16, 64)
LATENCY, TRADEOFF_LATENCY = "sv_latency", "sv_tradeoff_latency"
#: What this page calls each of limits.cpu_work_levers.
LEVERS = {"batch": f"**{SERVING_LABELS['max_batch_size']}**", "query heads": "the sidebar's query heads",
          "KV heads": "the sidebar's KV heads", "context": "the longest prompt or output"}

st.title("Serving simulation")
st.markdown(
    "A serving engine's **block manager** (as in vLLM): requests arrive, their prompts take blocks from a shared "
    "pool, every decode step appends one token per running sequence and takes a new block only when the last one "
    "is full, and finished sequences give their blocks back for reuse. Scrub through the steps to watch the pool "
    "fill, fragment and recycle, and time the Triton kernel on the block table of any step."
)

result = current()
config, settings = result.config, result.settings
if result.error is not None:
    # This page builds its own batch: an error in the sidebar's batch (lengths, shared prefix,
    # prefix groups) does not stop it; the sidebar's model, cache, device and timing still must be valid.
    settings = settings.without_batch()
    try:
        config = settings.config()
    except ValueError as exc:  # an error outside the batch: the page cannot run
        show_config_error(replace(result, error=str(exc)))
        st.stop()
    st.caption(":material/info: The sidebar's batch has an error, which this page ignores: it uses the sidebar's "
               "heads, dtype and device only. Other pages show the error.")
cpu = config.device == "cpu"
ss = st.session_state

# Defaults: a GPU gets a pool under pressure (a queue forms at times); the CPU one
# small enough that the interpreted kernel times any step in seconds: the max batch
# is cut until a full batch of the longest requests, with the sidebar's heads,
# fits the CPU cap, and the arrival rate with it, so that the queue stays as short
# as at the nominal batch (at 0.2 requests a step, 4 slots left 9 waiting at the
# end and 1 slot 38).
DEFAULTS = {
    "sv_num_blocks": 64 if cpu else 1024, "sv_block_size": 8 if cpu else 16, "sv_max_batch": 6 if cpu else 32,
    "sv_rate": 0.2 if cpu else 0.28, "sv_prompt_kind": "long-tail", "sv_prompt_lo": 4 if cpu else 16,
    "sv_prompt_hi": 96 if cpu else 2048, "sv_output_kind": "long-tail", "sv_output_lo": 4 if cpu else 16,
    "sv_output_hi": 48 if cpu else 512, "sv_seed": 0, "sv_steps": 150 if cpu else 400,
    "sv_system_prompt": 0, "sv_samples": 1,  # no sharing: the plain block manager
    "sv_pool_colour": "sequence",
}
if cpu:
    nominal = DEFAULTS["sv_max_batch"]
    DEFAULTS["sv_max_batch"] = limits.largest_cpu_batch(
        config, DEFAULTS["sv_prompt_hi"] + DEFAULTS["sv_output_hi"], nominal)
    DEFAULTS["sv_rate"] = max(0.01, round(DEFAULTS["sv_rate"] * DEFAULTS["sv_max_batch"] / nominal, 2))
# The page's first run in this session: the URL's values over the defaults.
seed_page("serving_simulation", DEFAULTS, choices={"sv_pool_colour": serving_figures.POOL_COLOR_MODES})
for key, value in DEFAULTS.items():
    ss.setdefault(key, value)
for key in ("sv_prompt_kind", "sv_output_kind", "sv_pool_colour"):
    if ss[key] is None:  # segmented control deselected
        ss[key] = DEFAULTS[key]

L = SERVING_LABELS
with st.container(border=True):
    c = st.columns(6)
    bounded_number_input(c[0], L["num_blocks"], 1, MAX_POOL_BLOCKS, step=64, key="sv_num_blocks",
                         persist_state="session", note_parent=st,
                         help="physical blocks in the KV-cache pool")
    c[1].selectbox(L["block_size"], state.BLOCK_SIZES, key="sv_block_size",
                   persist_state="session", help="tokens per block")
    bounded_number_input(c[2], L["max_batch_size"], 1, MAX_SIM_BATCH, step=1, key="sv_max_batch",
                         persist_state="session", note_parent=st,
                         help="most sequences decoding at once")
    bounded_number_input(c[3], L["arrival_rate"], 0.0, MAX_RATE, step=0.05, key="sv_rate",
                         persist_state="session", format="%.2f",
                         note_parent=st, help="mean new requests per decode step (Poisson)")
    bounded_number_input(c[4], L["seed"], 0, limits.MAX_SEED, step=1, key="sv_seed",
                         persist_state="session", note_parent=st,
                         help="the request stream depends on it alone")
    bounded_number_input(c[5], L["steps"], 1, MAX_STEPS, step=50, key="sv_steps",
                         persist_state="session", note_parent=st)
    p = st.columns([1.7, 1, 1, 0.2, 1.7, 1, 1], vertical_alignment="bottom")  # "uniform" whole at 1280 px
    p[0].segmented_control(L["prompt_len"], LENGTH_KINDS, key="sv_prompt_kind", persist_state="session",
                           help="uniform: every length in the range equally likely; long-tail: log-normal, "
                                "most short and a few long, as in chat traffic")
    p[4].segmented_control(L["output_len"], LENGTH_KINDS, key="sv_output_kind", persist_state="session")
    lengths = ((p[1], "sv_prompt_lo", "prompt_len", "low"), (p[2], "sv_prompt_hi", "prompt_len", "high"),
               (p[5], "sv_output_lo", "output_len", "low"), (p[6], "sv_output_hi", "output_len", "high"))
    for col, key, dist, bound in lengths:
        bounded_number_input(col, L[bound], 1, MAX_LENGTH, step=16, key=key, name=f"{L[dist]} {L[bound]}",
                             note_parent=st, persist_state="session")
    share_cols = st.columns([1, 1, 3], vertical_alignment="bottom")
    bounded_number_input(share_cols[0], L["system_prompt"], 0, MAX_LENGTH, step=16, key="sv_system_prompt",
                         persist_state="session", note_parent=st,
                         help="tokens every request's prompt starts with, before its own prompt; its full blocks are "
                              "shared through the prefix cache (0: none)")
    bounded_number_input(share_cols[1], L["samples"], 1, MAX_SAMPLES, step=1, key="sv_samples", persist_state="session",
                         note_parent=st, help="sequences per request (n), forked from the first: they share the "
                                              "prompt's blocks and copy a shared partly filled block on write")
    sync_url()  # the URL holds the page's settings as drawn
    share_cols[2].caption("Sharing is on when either is above its default (0, 1): the block manager then shares blocks "
                 "(prefix caching, fork, copy-on-write) and the page compares it with the same batch unshared.")

prompt = (ss["sv_prompt_kind"], int(ss["sv_prompt_lo"]), int(ss["sv_prompt_hi"]))
output = (ss["sv_output_kind"], int(ss["sv_output_lo"]), int(ss["sv_output_hi"]))
traffic = (int(ss["sv_max_batch"]), float(ss["sv_rate"]), prompt, output, int(ss["sv_seed"]))
num_blocks, block_size, steps = int(ss["sv_num_blocks"]), int(ss["sv_block_size"]), int(ss["sv_steps"])
system_prompt, samples = int(ss["sv_system_prompt"]), int(ss["sv_samples"])
sharing = system_prompt > 0 or samples > 1
try:
    history = serving_history(num_blocks, block_size, *traffic, steps, system_prompt, samples)
except ValueError as exc:
    st.error(f"**Invalid simulation.** {formatting.sentence(str(exc))}", icon=":material/error:")
    st.stop()
metrics = history.metrics

if "sv_step" not in ss:  # start at the busiest step: the pool under the most pressure
    ss["sv_step"] = int(metrics["blocks_in_use"].to_numpy().argmax())
# Fewer steps than the chosen one show the last; the chosen step is kept (as (chosen, shown)) and comes back when
# Steps grows again, unless the slider was moved meanwhile: then that is the choice.
held = ss.get("sv_step_held")
chosen = held[0] if held and ss["sv_step"] == held[1] else ss["sv_step"]
ss["sv_step"] = min(chosen, steps - 1)
ss["sv_step_held"] = (chosen, ss["sv_step"]) if ss["sv_step"] != chosen else None
if steps > 1:
    step = st.slider("Decode step", 0, steps - 1, key="sv_step", persist_state="session",
                     help="drag to move through the simulation; every chart on the page follows")
else:  # a slider needs two ends
    step = 0
    st.caption("Decode step 0, the only one (raise **Steps** to move through a longer run).")
record = history.records[step]
row = metrics.iloc[step]
changes = history.changes(step)

# Values stay short (a number) so that six fit side by side; the detail goes below.
m = st.columns(6)
quiet = dict(delta_color="off", delta_arrow="off")
m[0].metric("Running", f"{record.num_running:,}", f"of {traffic[0]:,} at most", **quiet,
            help=f"sequences decoding at this step; at most {traffic[0]:,} ({L['max_batch_size']})")
m[1].metric("Waiting", f"{int(row['waiting']):,}", help="requests queued for a batch slot or for blocks")
m[2].metric("Blocks in use", f"{int(row['blocks_in_use']):,}",
            f"of {num_blocks:,} · {100 * row['blocks_in_use'] / num_blocks:.0f}%", **quiet,
            help=f"blocks holding some sequence's tokens, of the {num_blocks:,} in the pool")
m[3].metric("Wasted slots", f"{int(row['wasted_slots']):,}", f"{100 * row['wasted_fraction']:.1f}% of allocated",
            **quiet, help="allocated but unfilled slots in each sequence's last block (internal fragmentation)")
m[4].metric("Finished so far", f"{int(row['finished']):,}")
m[5].metric("Blocks taken", f"{len(changes.taken):,}",
            f"{len(changes.freed):,} freed · " + (f"{len(changes.copied):,} copied" if sharing
                                                 else f"{len(changes.recycled):,} recycled"), **quiet,
            help=f"blocks taken from the free list during step {step} (copy-on-write copies included) and "
                 "returned to it (their last reference gone); "
                 + ("copied: copy-on-write copies. A block that only gains or loses a reference is neither taken "
                    "nor freed." if sharing else "recycled: taken blocks that an earlier sequence had released"))

left, right = st.columns([3, 2], gap="medium")
with left:
    tables = record.block_tables()
    colour_by = st.segmented_control(
        "Colour the pool by", serving_figures.POOL_COLOR_MODES, key="sv_pool_colour", persist_state="session",
        help="sequence: the sequence owning each block (a shared block: its lowest seq_id); reference count: how "
             "many running sequences hold each block (1, 2, 3–4, 5+)") or DEFAULTS["sv_pool_colour"]
    show_chart(
        serving_figures.serving_pool_figure(record.pool_owner(), tables, record.context_lens, block_size, step=step,
                                    taken=changes.taken, freed=changes.freed, recycled=changes.recycled,
                                    copied=changes.copied, revived=changes.revived, color_by=colour_by,
                                    sharing=sharing, seq_ids=record.seq_ids),
        key="sv_pool_chart", width="stretch",
    )
    per_cell = sampling.pool_grid_shape(num_blocks)[2]
    colours = ("Colour = the sequence owning the block (by seq_id; a shared block: its lowest), grey = free, "
               "● = a partly filled last block. " if colour_by == "sequence" else
               "Colour = how many running sequences hold the block (its reference count: 1, 2, 3–4, 5+), "
               "grey = free. ")
    if per_cell == 1:
        st.caption(
            colours + "Marks: what left the free list or went back to it during this step. ▲ = taken for new "
            "tokens, ◆ = taken again after an earlier sequence released it (recycled), "
            + ("★ = a copy-on-write copy (a new block: a sample's first write into a shared partly filled "
               "block), ⬟ = revived: a cached block that a prefix-cache hit took back from the free list, " if sharing else "")
            + "✕ = freed (its last reference gone). "
            + ("A block that only gains or loses a reference (a prefix-cache hit on a block in use, a fork, a "
               "sample finishing while others still hold it) is not marked: colour by reference count to see it. "
               if sharing else "")
            + "Freed blocks go to the back of the free list, so new sequences scatter over the pool: the block "
            "table absorbs it."
        )
    else:  # too many blocks for one cell each: the figure shades cells by use and draws no markers
        st.caption(
            f"{num_blocks:,} blocks are too many to draw one by one: each cell stands for {per_cell:,} blocks, "
            + ("shaded by the share of them in use" if colour_by == "sequence" else
               "coloured by the most sequences holding one of them")
            + ", and the per-block marks (taken, recycled, freed) are left out. A smaller pool shows every block."
        )
with right:
    if record.num_running:
        refs = np.bincount(record.blocks, minlength=num_blocks) if sharing else None
        show_chart(
            cache_figures.block_table_figure(tables, record.context_lens, block_size, num_blocks,
                                       seq_ids=record.seq_ids, title="Block tables of the running sequences",
                                       color_by="sequence", ref_counts=refs,
                                       plot_width=180),  # two fifths of a 1280 px page, less the colour bar
            key="sv_table_chart", width="stretch",
        )
        st.caption("One row per running sequence (its seq_id), in its colour in the pool: the physical block "
                   "behind each logical block. "
                   + ("A white diamond marks a block more than one running sequence holds; the pool colours a "
                      "shared block by the lowest seq_id holding it. " if sharing else "")
                   + "This table and the lengths are what the decode kernel receives at this step.")
    else:
        st.info(f"No sequence is running after step {step}: the block table is empty.", icon=":material/info:")

if sharing:
    st.subheader("Sharing")
    saved = int(row["blocks_unshared"] - row["blocks_in_use"])
    queries, hits = int(row["prefix_queries"]), int(row["prefix_hits"])
    rate = f"{100 * hits / queries:.0f}%" if queries else "no full prompt block looked up yet"
    st.markdown(
        f"Requests of **{formatting.count(samples, 'sample')}** whose prompts start with the same "
        f"**{formatting.count(system_prompt, 'token')}**. At step {step} the running sequences hold "
        f"**{formatting.count(int(row['blocks_in_use']), 'block')}** with sharing against "
        f"**{int(row['blocks_unshared']):,}** without (**{saved:,} saved**"
        + (f", {100 * saved / row['blocks_unshared']:.0f}%" if row["blocks_unshared"] else "") + "). "
        f"Up to this step: **{formatting.count(int(row['cow_copies']), 'copy-on-write copy', 'copy-on-write copies')}** "
        f"(a sample's first write into a shared partly filled block), and a **prefix-cache hit rate of {rate}**"
        + (f" ({hits:,} of {formatting.count(queries, 'full prompt block')} found cached)." if queries else ".")
    )
    show_chart(sharing_figures.sharing_timeline_figure(metrics, step, num_blocks), key="sv_sharing_chart", width="stretch")
    st.caption("Without sharing: the same running sequences at each step, each in blocks of its own "
               "(ceil(context_len / block_size) each); above the dashed line that batch would not fit the pool. "
               "Both lines follow one simulation, the one with sharing, so the schedule is the same.")

show_chart(serving_figures.serving_timeline_figure(metrics, step, num_blocks), key="sv_timeline_chart", width="stretch")
st.caption(
    "Blocks in use follow the load; wasted slots stay below one block per running sequence (internal "
    "fragmentation only: a paged cache has no external fragmentation, any free block serves any sequence); "
    "a queue forms when the batch or the pool is full."
)

if st.toggle("Play the pool over time (animation)", key="sv_anim", persist_state="session",
             help="replays the pool in the browser; built only while this is on, as it is a large figure"):
    if num_blocks > limits.MAX_POOL_CELLS:
        st.caption(f"The animation draws pools of up to {limits.MAX_POOL_CELLS:,} blocks.")
    else:
        count = max(2, min(steps, limits.MAX_ANIMATION_FRAMES, MAX_ANIMATION_VALUES // num_blocks))
        frames = np.array(serving_figures.animation_steps(steps, count))
        owners = np.stack([history.records[s].pool_owner() for s in frames])
        show_chart(serving_figures.pool_animation_figure(owners, frames.tolist(), block_size), key="sv_anim_chart",
                   width="stretch")
        spacing = f" (every {frames[1] - frames[0]} steps, and the last)" if len(frames) > 2 else ""
        st.caption(f"{formatting.count(len(frames), 'frame')}{spacing}; press Play (the animation runs in the browser).")

# -- the kernel on this step ----------------------------------------------------------

st.subheader("Decode latency at this step")
if config.is_fp8:
    st.caption(f":material/info: This page times a {config.dtype} KV cache: the sidebar's "
               f"{formatting.kv_dtype_label(config.kv_dtype)} cache is used on the Decode benchmark and Sweep pages.")
heads = dict(num_heads=config.num_heads, num_kv_heads=config.num_kv_heads, head_dim=config.head_dim,
             dtype=config.dtype, device=config.device, seed=config.seed)
context = (num_blocks, block_size, *traffic, steps, tuple(sorted(heads.items())))


def _time_triton(dconfig, make_inputs, warmup: int, iters: int):
    """Median ms and GB/s of the Triton kernel on ``make_inputs()`` (inputs of
    ``dconfig``); raises as time_inputs_locked."""
    with QueueNote("this run starts when it ends") as note:
        (r,) = time_inputs_locked(dconfig, make_inputs, ["triton"], warmup=warmup, iters=iters,
                                  on_wait=note.on_wait, on_own_wait=note.on_own_wait)
    return r


if record.num_running == 0:
    st.caption("No sequence runs at this step; pick another step to time the kernel.")
else:
    dconfig = record.snapshot().decode_config(**heads)
    plan = limits.plan_run(dconfig, settings.warmup, settings.iters, LEVERS)  # the sidebar's batch is not used here
    a, b = st.columns([1, 3], vertical_alignment="center")
    clicked = a.button("Time Triton on this step", type="primary", icon=":material/timer:", key="sv_time",
                       disabled=plan.refusal is not None, width="stretch")
    b.caption(f"{readouts.config_summary(dconfig)} · warm-up {plan.warmup}, "
              f"{formatting.count(plan.iters, 'timed call')} · heads, "
              "head dim, dtype and device from the sidebar; random K/V in this step's blocks")
    if plan.refusal:
        st.warning(plan.refusal, icon=":material/block:")
    for note in plan.notes:
        st.info(f"Capped: {note}.", icon=":material/speed:")
    if clicked:
        with st.spinner("Timing the Triton kernel…"):
            snap = record.snapshot()
            r = guarded(_time_triton, snap.decode_config(**heads), lambda: snap.decode_inputs(**heads),
                             plan.warmup, plan.iters)
        if r is not None:
            ss.setdefault(LATENCY, {}).setdefault(context, {})[step] = {
                "step": step, "running": record.num_running, "tokens": int(record.context_lens.sum()),
                "median_ms": r.median_ms, "gbps": r.gbps, "correct": "yes" if r.passed else "NO",
            }
measured = ss.get(LATENCY, {}).get(context, {})
if step in measured:
    r = measured[step]
    st.metric(f"Triton decode at step {step}", formatting.format_ms(r['median_ms']),  # in the table's unit
              f"{formatting.format_gbps(r['gbps'])} GB/s · {formatting.count(r['running'], 'sequence')}, "
              f"{formatting.count(r['tokens'], 'token')}",
              delta_color="off",
              delta_arrow="off", border=True)
if measured:
    latency_rows = pd.DataFrame(sorted(measured.values(), key=lambda r: r["step"]))
    st.dataframe(sig3_columns(latency_rows, ("median_ms", "gbps")), hide_index=True, width="stretch",
                 key="sv_latency_table",
                 column_config={"median_ms": number_column("Median (ms)"), "gbps": number_column("GB/s")})

# -- block size trade-off --------------------------------------------------------------

st.subheader("Block size trade-off")
pool_tokens = num_blocks * block_size
sizes, dropped = valid_block_sizes(history.config, DEFAULT_BLOCK_SIZES, pool_tokens)
st.markdown(
    f"The same request stream replayed for {TRADEOFF_STEPS} steps with every block size, the pool keeping the "
    f"same memory ({pool_tokens:,} token slots). Larger blocks mean fewer block-table entries and lookups per "
    "sequence, but more slots wasted in each sequence's partly filled last block."
)
if sharing:
    st.caption("Replayed without sharing (no system prompt, one sample per request): the trade-off is the "
               "plain block manager's.")
if dropped:
    st.caption(f"Block sizes {', '.join(map(str, dropped))} left out: a pool of {pool_tokens:,} slots in blocks "
               "that large cannot hold the longest request.")
if sizes:
    table, busiest = block_size_table(pool_tokens, *traffic, TRADEOFF_STEPS, tuple(sizes))
    candidates = [b for b in sizes if b in CPU_TRADEOFF_SIZES] if cpu else sizes
    # Every block size is timed on the same batch, so that block size is all that
    # differs: the running sequences of one busiest step (this page's block size if
    # it was simulated), laid out in blocks of each size.
    source = block_size if block_size in busiest else next(iter(candidates), None)
    shared = busiest[source].snapshot() if source is not None and busiest[source].num_running else None
    # Plan every size before offering the button, so that it times what it says.
    plans, refused, configs = {}, {}, {}
    for b_size in candidates if shared is not None else ():
        dcfg = shared.decode_config(**heads).with_(block_size=b_size, spare_blocks=None)
        plan = limits.plan_run(dcfg, settings.warmup, settings.iters)
        configs[b_size] = dcfg
        if plan.refusal:
            refused[b_size] = dcfg
        else:
            plans[b_size] = plan
    t_key = (pool_tokens, *traffic, tuple(sorted(heads.items())))
    a, b = st.columns([1.35, 3], vertical_alignment="center")  # the label whole at 1280 px
    go_measure = a.button("Time Triton per block size", icon=":material/speed:", key="sv_tradeoff_run",
                          width="stretch", disabled=not plans)
    same = (f"the {formatting.count(shared.num_running, 'running sequence')} ({shared.tokens_stored:,} tokens) "
            f"of block size {source}'s busiest step" if shared is not None else "one busiest step")
    b.caption(f"Times the Triton kernel on one batch for every block size: {same}, laid out in blocks of each "
              "size (same tokens per sequence, so block size is all that differs), with the sidebar's heads, head "
              "dim, dtype and device."
              + (f" On the CPU only block sizes {', '.join(map(str, candidates))} are candidates (the interpreter "
                 "is slow)." if cpu else ""))
    if refused:
        some, first = ", ".join(map(str, refused)), next(iter(refused.values()))
        st.warning(
            f"{'Not timed' if plans else 'Nothing to time'}: the batch at block size"
            f"{'s' if len(refused) > 1 else ''} {some} is over the CPU cap ({limits.CPU_WORK_RULE}; block size "
            f"{next(iter(refused))}: {limits.cpu_work_detail(first)}). Lower "
            f"{formatting.join_or([LEVERS[lever] for lever in limits.cpu_work_levers(first)])}.",
            icon=":material/block:",
        )
    if go_measure:
        latencies = {}
        bar = st.progress(0.0, text="timing")
        for i, (b_size, plan) in enumerate(plans.items()):
            bar.progress(i / len(plans), text=f"block size {b_size} ({i + 1}/{len(plans)})")
            r = guarded(_time_triton, configs[b_size], lambda c=configs[b_size]: build_decode_inputs(c),
                             plan.warmup, plan.iters)
            if r is None:
                break
            latencies[b_size] = r.median_ms
        bar.progress(1.0, text=f"timed {formatting.count(len(latencies), 'block size')}")
        ss.setdefault(TRADEOFF_LATENCY, {})[t_key] = latencies
    latency = ss.get(TRADEOFF_LATENCY, {}).get(t_key)
    show_chart(serving_figures.tradeoff_figure(table, latency, current=block_size), key="sv_tradeoff_chart",
               width="stretch")
    st.caption("Waste grows with the block size: up to block_size − 1 slots per running sequence. Small blocks "
               "cost the kernel one block-table lookup per block and shorter contiguous reads; measure to see "
               "that side on this device.")
