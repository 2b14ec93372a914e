"""Block table: how a batch's tokens map onto the physical block pool."""

import streamlit as st

from explorer import formatting, limits
from explorer import settings as state
from explorer.bench import readouts
from explorer.cache import block_link, pool_figures, sampling, sharing_figures, walk_figures
from explorer.cache import figures as cache_figures
from explorer.cache import view as cache_view
from explorer.cache.cell_style import NEW_TOKEN_COLOR
from explorer.cache.sharing import table_ref_counts
from explorer.cache.window import window_reads
from explorer.limits import MAX_CONTEXT, MAX_SAMPLES
from explorer.style import FULL_FIGURE_PX, FULL_PLOT_WIDTH_PX, SEQUENCE_COLORS
from paged_attention.inputs import OTHER
from ui.charts import presenting, show_chart
from ui.data import block_arrays_for, shared_batch_for
from ui.inputs import bounded_number_input
from ui.sidebar import current, show_config_error
from ui.tables import show_cards

DEFAULT_COMMON_PROMPT = 64

st.title("Block table")
st.markdown(
    "A paged KV cache stores each sequence's keys and values in fixed-size **physical blocks** "
    "drawn from one shared pool. The **block table** maps each sequence's *logical* blocks to "
    "physical ones; the decode kernel follows it. Everything here follows the sidebar."
)

result = current()
if show_config_error(result):
    st.stop()
config = result.config
too_big = limits.table_size_error(config)
if too_big:
    st.error(too_big, icon=":material/error:")
    st.stop()

toggle_col, common_col, samples_col = st.columns([2, 1, 1], vertical_alignment="bottom")
sharing = toggle_col.toggle(
    "Sharing: n samples per request, a common prompt", key="bt_share", persist_state="session",
    help="Group the batch into requests of n samples whose prompts start with the same tokens, and lay it out "
         "with a block manager that shares blocks: prefix caching of full blocks, fork, copy-on-write.",
)
if sharing:
    common_prompt = bounded_number_input(common_col, "Common prompt (tokens)", 0, MAX_CONTEXT, step=1,
                                         value=DEFAULT_COMMON_PROMPT, key="bt_common",
                                         persist_state="session", note_parent=st,
                                         help="tokens every request's prompt starts with (a system prompt)")
    samples = bounded_number_input(samples_col, "Samples per request", 1, MAX_SAMPLES, step=1, value=2,
                                   key="bt_samples", persist_state="session", note_parent=st,
                                   help="sequences per request (n): consecutive sequences of the batch")
    set_aside = cache_view.prefix_set_aside_note(config, common_prompt, samples)
    if set_aside:
        st.info(set_aside, icon=":material/layers_clear:")
    too_many = limits.sharing_size_error(config)
    if too_many:
        st.error(too_many, icon=":material/error:")
        st.stop()

lengths = config.lengths
# This step's new tokens (draft tokens), marked only when asked for: one new token is today's view.
queries = config.query_lengths if config.has_query_lens else None
mem = readouts.memory_summary(config)
if sharing:
    shared = shared_batch_for(config, common_prompt, samples)
    tables, owner, refs = shared.block_tables, shared.pool_owner, shared.ref_counts
    st.markdown(shared.saving_note(mem.block_bytes))
else:
    tables, owner = block_arrays_for(config)
    refs = table_ref_counts(tables, len(owner))
# The sidebar's shared prefix shares blocks too: it gets the scenario's marks and colours.
shares = sharing or bool((refs > 1).any())

# A click on either chart picks physical blocks; both charts outline them. The
# pick is kept as (first, last) and checked against the pool on every run: the
# settings may have changed since (a smaller pool, another layout).
num_blocks = len(owner)


def _pick_from(chart_key: str):
    def store():
        blocks = block_link.picked_blocks(st.session_state.get(chart_key), num_blocks)
        st.session_state["bt_pick"] = None if blocks is None else (blocks.start, blocks.stop - 1)
    return store


pick = block_link.valid_pick(st.session_state.get("bt_pick"), num_blocks)

preset = state.MODEL_PRESETS.get(result.settings.preset)
show_cards(cache_view.table_cards(config, mem, shared if sharing else None, shares, pool_blocks=num_blocks,
                                  num_layers=preset.num_layers if preset else None),
           [0.75, 1.1, 1.25, 1.25, 1.15])  # the longer labels wider (KV cache, one layer: one line in presentation mode)

if config.window is not None:
    reads = window_reads(lengths, config.block_size, config.window, queries, block_tables=tables)
    physical = reads.physical_note()
    st.markdown(f":material/filter_center_focus: **{reads.note()}" + (f"; {physical}" if physical else "")
                + f"**: {reads.detail()}. {reads.explain_unread()}")

# Presentation mode: each chart across the page, one under the other: in two fifths of it the pool and the
# walk through it kept their 232 px plots while only their height grew (issue 27, review 4).
stacked = presenting()
wide = {"plot_width": FULL_PLOT_WIDTH_PX, "figure_px": FULL_FIGURE_PX} if stacked else {}


def _side_by_side():
    return (st.container(), st.container()) if stacked else st.columns([3, 2], gap="medium")


left, right = _side_by_side()
with left:
    show_chart(
        cache_figures.block_table_figure(tables, lengths, config.block_size, config.num_blocks,
                                         ref_counts=refs if shares else None, highlight=pick, window=config.window,
                                         query_lens=queries, copied=shared.copied if sharing else None),
        key="bt_table", width="stretch", on_select=_pick_from("bt_table"), selection_mode="points",
    )
    grid = cache_figures.block_table_grid(*tables.shape)
    st.caption(cache_view.table_caption(config, grid, samples if sharing else None, shares,
                                        shared if sharing else None, common_prompt if sharing else 0))
    if queries:
        st.caption(cache_view.new_tokens_caption(config, NEW_TOKEN_COLOR))
with right:
    show_chart(
        sharing_figures.pool_ref_count_figure(refs, tables, config.block_size, highlight=pick, other=owner == OTHER,
                                              fit_ids=True, copied=shared.copied if sharing else None, **wide)
        if shares else pool_figures.pool_figure(owner, tables, lengths, config.block_size, highlight=pick,
                                                fit_ids=True, **wide),
        key="bt_pool", width="stretch", on_select=_pick_from("bt_pool"), selection_mode="points",
    )
    st.caption(cache_view.pool_caption(len(owner), sharing, shares, config.prefix_groups,
                                       len(SEQUENCE_COLORS) if config.batch_size > len(SEQUENCE_COLORS) else None))

# Streamlit's charts report clicks, not hover: a click is what links the two.
if pick is None:
    st.caption(":material/ads_click: Click a table cell to find its block in the pool, or a pool block to find "
               "the cells that point to it.")
else:
    per_cell = sampling.pool_grid_shape(num_blocks)[2]
    st.markdown(":material/ads_click: " + block_link.pick_note(tables, pick, grid)
                + (f" The pool outlines the cell of {per_cell:,} blocks that holds it." if per_cell > 1 and len(pick) == 1 else "")
                + " Double-click a chart to clear.")

st.subheader("Token walk")
if st.session_state.get("bt_seq", 0) >= config.batch_size:
    st.session_state["bt_seq"] = config.batch_size - 1
pick, info = st.columns([1, 4], vertical_alignment="bottom")
seq = bounded_number_input(pick, "Sequence", 0, config.batch_size - 1, step=1, key="bt_seq",
                           persist_state="session", note_parent=st)
needed = config.blocks_per_sequence[seq]
q_seq = queries[seq] if queries else None
if q_seq is None:
    new_words = ""
elif lengths[seq] == 0:  # a sequence with no cached token still has its one query row (zero output)
    new_words = " It holds no token to star: its one query row attends to nothing, and its output is zero."
elif q_seq == 1:
    new_words = (f" Its last token (position {lengths[seq] - 1}, starred) is this step's new token: "
                 "a query row that attends to the positions up to itself.")
else:
    new_words = (f" Its last {formatting.count(q_seq, 'token')} (positions {lengths[seq] - q_seq}–{lengths[seq] - 1}, "
                 "starred) are this step's new tokens: each is a query row that attends to the positions up to itself.")
info.markdown(
    f"Sequence **{seq}** holds **{formatting.count(lengths[seq], 'token')}** in **{formatting.count(needed, 'logical block')}**; "
    f"token *t* lives in logical block *t* // {config.block_size}, slot *t* % {config.block_size}, "
    f"and the block table sends that logical block to a physical one.{new_words}"
)
walk, path = _side_by_side()
show_chart(
    walk_figures.token_walk_figure(tables[seq], lengths[seq], config.block_size, seq, config.num_blocks,
                                   query_len=q_seq),
    key="bt_walk", parent=walk, width="stretch",
)
show_chart(
    walk_figures.block_walk_figure(tables[seq], lengths[seq], config.block_size, seq, config.num_blocks),
    key="bt_path", parent=path, width="stretch",
)
walk_grid = sampling.sample_grid(needed, config.block_size, limits.MAX_WALK_CELLS)
if walk_grid.sampled:
    st.caption(walk_grid.note("logical block", "slot"))
