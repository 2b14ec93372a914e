"""Serving simulation: the block manager under traffic, step by step."""

import numpy as np
import streamlit as st

from explorer import formatting, limits
from explorer import settings as state
from explorer.cache import sharing_figures
from explorer.serving import figures as serving_figures
from explorer.serving import table_figures, tradeoff_figures, view
from explorer.serving.history import valid_block_sizes
from explorer.serving.tradeoff import DEFAULT_BLOCK_SIZES
from explorer.serving.traffic import LENGTH_KINDS
from ui.charts import presenting, show_chart
from ui.data import block_size_table, serving_history
from ui.inputs import bounded_number_input, choice
from ui.serving import page_config, seed_controls, time_block_sizes, time_triton, window_section, window_toggle
from ui.sidebar import sync_url
from ui.tables import number_column, show_cards, show_table

LATENCY, TRADEOFF_LATENCY = "sv_latency", "sv_tradeoff_latency"
L = view.LABELS
KEEP = dict(persist_state="session", note_parent=st)

st.title("Serving simulation")
st.markdown(
    "A serving engine's **block manager** (as in vLLM): requests arrive, their prompts take blocks from a shared "
    "pool, every decode step appends one token per running sequence and takes a new block only when the last one "
    "is full, and finished sequences give their blocks back for reuse. Scrub through the steps to watch the pool "
    "fill, fragment and recycle, and time the Triton kernel on the block table of any step."
)
config, settings = page_config()
cpu = config.device == "cpu"
ss = st.session_state
defaults = view.page_defaults(config)
seed_controls(defaults, serving_figures.POOL_COLOR_MODES)

with st.container(border=True):
    c = st.columns(6)
    bounded_number_input(c[0], L["num_blocks"], 1, limits.MAX_POOL_BLOCKS, step=64, key="sv_num_blocks", **KEEP,
                         help="physical blocks in the KV-cache pool")
    c[1].selectbox(L["block_size"], state.BLOCK_SIZES, key="sv_block_size", persist_state="session",
                   help="tokens per block")
    bounded_number_input(c[2], L["max_batch_size"], 1, limits.MAX_SIM_BATCH, step=1, key="sv_max_batch", **KEEP,
                         help="most sequences decoding at once")
    bounded_number_input(c[3], L["arrival_rate"], 0.0, limits.MAX_RATE, step=0.05, key="sv_rate", format="%.2f",
                         **KEEP, help="mean new requests per decode step (Poisson)")
    bounded_number_input(c[4], L["seed"], 0, limits.MAX_SEED, step=1, key="sv_seed", **KEEP,
                         help="the request stream depends on it alone")
    bounded_number_input(c[5], L["steps"], 1, limits.MAX_STEPS, step=50, key="sv_steps", **KEEP)
    p = st.columns([1.7, 1, 1, 0.2, 1.7, 1, 1], vertical_alignment="bottom")  # "uniform" whole at 1280 px
    choice(p[0], L["prompt_len"], LENGTH_KINDS, key="sv_prompt_kind", persist_state="session",
           help="uniform: every length in the range equally likely; long-tail: log-normal, "
                "most short and a few long, as in chat traffic")
    choice(p[4], L["output_len"], LENGTH_KINDS, key="sv_output_kind", persist_state="session")
    for col, key, dist, bound in ((p[1], "sv_prompt_lo", "prompt_len", "low"), (p[2], "sv_prompt_hi", "prompt_len", "high"),
                                  (p[5], "sv_output_lo", "output_len", "low"), (p[6], "sv_output_hi", "output_len", "high")):
        bounded_number_input(col, L[bound], 1, limits.MAX_LENGTH, step=16, key=key, name=f"{L[dist]} {L[bound]}", **KEEP)
    s = st.columns([1, 1, 3], vertical_alignment="bottom")
    bounded_number_input(s[0], L["system_prompt"], 0, limits.MAX_LENGTH, step=16, key="sv_system_prompt", **KEEP,
                         help="tokens every request's prompt starts with, before its own prompt; its full blocks are "
                              "shared through the prefix cache (0: none)")
    bounded_number_input(s[1], L["samples"], 1, limits.MAX_SAMPLES, step=1, key="sv_samples", **KEEP,
                         help="sequences per request (n), forked from the first: they share the prompt's blocks "
                              "and copy a shared partly filled block on write")
    sync_url()  # the URL holds the page's settings as drawn
    s[2].caption("Sharing is on when either is above its default (0, 1): the block manager then shares blocks "
                 "(prefix caching, fork, copy-on-write) and the page compares it with the same batch unshared.")
    window_toggle(config.window)

controls = view.Controls.from_state(ss, config.window)
try:
    history = serving_history(*controls.simulation)
except ValueError as exc:
    st.error(f"**Invalid simulation.** {formatting.sentence(str(exc))}", icon=":material/error:")
    st.stop()
metrics, steps, sharing = history.metrics, controls.steps, controls.sharing
busiest = int(metrics["blocks_in_use"].to_numpy().argmax())
ss["sv_step"], ss["sv_step_held"] = view.held_step(ss.get("sv_step"), ss.get("sv_step_held"), steps, busiest)
if steps > 1:
    step = st.slider("Decode step", 0, steps - 1, key="sv_step", persist_state="session",
                     help="drag to move through the simulation; every chart on the page follows")
else:  # a slider needs two ends
    step = 0
    st.caption("Decode step 0, the only one (raise **Steps** to move through a longer run).")
record, changes = history.records[step], history.changes(step)
show_cards(view.step_cards(history, step, controls.max_batch, sharing))

# Presentation mode: the pool and the tables across the page, one under the other: in two fifths of it the
# tables' cells were 7 px wide, their shared marks 2 to 3 px.
stacked = presenting()
left, right = (st.container(), st.container()) if stacked else st.columns([3, 2], gap="medium")
with left:
    tables = record.block_tables()
    colour_by = choice(
        st, "Colour the pool by", serving_figures.POOL_COLOR_MODES, key="sv_pool_colour", persist_state="session",
        help="sequence: the sequence owning each block (a shared block: its lowest seq_id); reference count: how "
             f"many running sequences hold each block ({', '.join(view.ref_levels(controls.max_batch)[1])})"
    )
    show_chart(serving_figures.serving_pool_figure(
        record.pool_owner(), tables, record.context_lens, controls.block_size, step=step, taken=changes.taken,
        freed=changes.freed, recycled=changes.recycled, copied=changes.copied, revived=changes.revived,
        color_by=colour_by, sharing=sharing, seq_ids=record.seq_ids, max_holders=controls.max_batch,
        **({"plot_width": table_figures.STACKED_PLOT_PX} if stacked else {})),
        key="sv_pool_chart", width="stretch")
    st.caption(view.pool_caption(colour_by, sharing, controls.num_blocks, controls.max_batch))
with right:
    if record.num_running:
        refs = np.bincount(record.blocks, minlength=controls.num_blocks) if sharing else None
        show_chart(table_figures.running_tables_figure(
            tables, record.context_lens, controls.block_size, controls.num_blocks, seq_ids=record.seq_ids,
            color_by=colour_by, ref_counts=refs, window=controls.window, max_holders=controls.max_batch,
            plot_width=table_figures.STACKED_PLOT_PX if stacked else table_figures.TABLE_PLOT_PX),
            key="sv_table_chart", width="stretch")
        st.caption(view.table_caption(sharing, colour_by, controls.max_batch))
    else:
        st.info(f"No sequence is running after step {step}: the block table is empty.", icon=":material/info:")

if sharing:
    st.subheader("Sharing")
    st.markdown(view.sharing_summary(history, step))
    show_chart(sharing_figures.sharing_timeline_figure(metrics, step, controls.num_blocks), key="sv_sharing_chart",
               width="stretch")
    st.caption("Without sharing: the same running sequences at each step, each in blocks of its own "
               "(ceil(context_len / block_size) each); above the dashed line that batch would not fit the pool. "
               "Both lines follow one simulation, the one with sharing, so the schedule is the same.")

window_section(controls, history, step)
show_chart(serving_figures.serving_timeline_figure(metrics, step, controls.num_blocks), key="sv_timeline_chart",
           width="stretch")
st.caption("Blocks in use follow the load; wasted slots stay below one block per running sequence (internal "
           "fragmentation only: a paged cache has no external fragmentation, any free block serves any sequence); "
           "a queue forms when the batch or the pool is full.")

if st.toggle("Play the pool over time (animation)", key="sv_anim", persist_state="session",
             help="replays the pool in the browser; built only while this is on, as it is a large figure"):
    if controls.num_blocks > limits.MAX_POOL_CELLS:
        st.caption(f"The animation draws pools of up to {formatting.count(limits.MAX_POOL_CELLS, 'block')}.")
    else:
        most = view.animation_frames(steps, controls.num_blocks, limits.MAX_ANIMATION_FRAMES)
        frames = serving_figures.animation_steps(steps, most)
        owners = np.stack([history.records[f].pool_owner() for f in frames])
        show_chart(serving_figures.pool_animation_figure(owners, frames, controls.block_size), key="sv_anim_chart",
                   width="stretch")
        st.caption(view.animation_caption(frames))

st.subheader("Decode latency at this step")
if config.is_fp8:
    st.caption(f":material/info: This page times a {config.dtype} KV cache: the sidebar's "
               f"{formatting.kv_dtype_label(config.kv_dtype)} cache is used on the Decode benchmark and Sweep pages.")
heads = dict(num_heads=config.num_heads, num_kv_heads=config.num_kv_heads, head_dim=config.head_dim,
             dtype=config.dtype, device=config.device, seed=config.seed)
tradeoff_ms = None


def measured() -> dict:
    """The steps timed in this session for the simulation shown: ``step ->`` :func:`view.latency_row`."""
    return ss.get(LATENCY, {}).get(context, {})


context = (controls.num_blocks, controls.block_size, *controls.traffic, steps, tuple(sorted(heads.items())))
if record.num_running == 0:
    st.caption("No sequence runs at this step; pick another step to time the kernel.")
else:
    snap = record.snapshot()
    dconfig = snap.decode_config(**heads)
    plan = limits.plan_run(dconfig, settings.warmup, settings.iters, view.LEVERS)  # not the sidebar's batch
    a, b = st.columns([1, 3], vertical_alignment="center")
    clicked = a.button("Time Triton on this step", type="primary", icon=":material/timer:", key="sv_time",
                       disabled=plan.refusal is not None, width="stretch")
    b.caption(view.step_timing_caption(dconfig, plan.warmup, plan.iters))
    if plan.refusal:
        st.warning(plan.refusal, icon=":material/block:")
    for note in plan.notes:
        st.info(f"Capped: {note}.", icon=":material/speed:")
    if clicked:
        with st.spinner("Timing the Triton kernel…"):
            r = time_triton(dconfig, lambda: snap.decode_inputs(**heads), plan.warmup, plan.iters)
        if r is not None:
            ss.setdefault(LATENCY, {}).setdefault(context, {})[step] = view.latency_row(
                record, r.median_ms, r.gbps, r.passed)
step_results = st.container()  # filled at the end, in the page's one unit once the block sizes are timed too

st.subheader("Block size trade-off")
sizes, dropped = valid_block_sizes(history.config, DEFAULT_BLOCK_SIZES, controls.pool_tokens)
intro, *notes = view.tradeoff_intro(controls.pool_tokens, sharing, dropped)
st.markdown(intro)
for note in notes:
    st.caption(note)
if sizes:
    table, busiest_steps = block_size_table(controls.pool_tokens, *controls.traffic, view.TRADEOFF_STEPS, tuple(sizes))
    timing = view.plan_tradeoff(busiest_steps, sizes, controls.block_size, cpu, heads, settings.warmup, settings.iters)
    t_key = (controls.pool_tokens, *controls.traffic, tuple(sorted(heads.items())))
    a, b = st.columns([1.35, 3], vertical_alignment="center")  # the label whole at 1280 px
    go_measure = a.button("Time Triton per block size", icon=":material/speed:", key="sv_tradeoff_run",
                          width="stretch", disabled=not timing.plans)
    b.caption(timing.caption(cpu))
    if timing.refusal():
        st.warning(timing.refusal(), icon=":material/block:")
    if go_measure:  # over the sizes timed before on these inputs: a run that fails keeps them
        ss.setdefault(TRADEOFF_LATENCY, {}).setdefault(t_key, {}).update(time_block_sizes(timing))
    tradeoff_ms = ss.get(TRADEOFF_LATENCY, {}).get(t_key)
    show_chart(tradeoff_figures.tradeoff_figure(table, tradeoff_ms, current=controls.block_size,
                                               unit=view.page_duration_unit(measured(), tradeoff_ms)),
               key="sv_tradeoff_chart", width="stretch")
    st.caption("Waste grows with the block size: up to block_size − 1 slots per running sequence. Small blocks "
               "cost the kernel one block-table lookup per block and shorter contiguous reads; measure to see "
               "that side on this device.")

timed = measured()
if timed:  # one unit for Triton's latency on the page: the card, the table and the block-size chart
    unit = view.page_duration_unit(timed, tradeoff_ms)
    if step in timed:
        show_cards([view.latency_card(timed[step], unit)], [step_results], border=True)
    numbers = {c: number_column(c) for c in (f"median ({unit})", "GB/s")}  # numbers as text, right-aligned
    show_table(view.latency_table(timed, unit), numbers, key="sv_latency_table", parent=step_results)
