"""Block table: how a batch's tokens map onto the physical block pool."""

import streamlit as st

from explorer import figures, formatting, limits, readouts
from ui.charts import show_chart
from ui.data import block_arrays_for
from ui.inputs import bounded_number_input
from ui.sidebar import current, show_config_error

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

tables, owner = block_arrays_for(config)
lengths = config.lengths
mem = readouts.memory_summary(config)

# Short values with the detail on the grey line under them: five metrics share a
# row, and long values were cut off ("44,141 …") on a 1280-pixel screen.
quiet = dict(delta_color="off", delta_arrow="off")
c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Sequences", formatting.compact(config.batch_size))
c2.metric("Tokens cached", formatting.compact(sum(lengths)), help=formatting.count(sum(lengths), "token"))
c3.metric("Blocks used", formatting.compact(mem.blocks_used), f"of {formatting.compact(mem.blocks_in_pool)} in the pool",
          **quiet, help=f"{formatting.count(mem.blocks_used, 'block')} hold this batch's tokens; the pool has "
                        f"{mem.blocks_in_pool:,}")
c4.metric("Wasted slots", formatting.compact(mem.wasted_slots), f"{100 * mem.wasted_fraction:.1f}% of allocated",
          **quiet, help="allocated but unfilled slots in each sequence's last block, as a share of all allocated slots")
c5.metric("KV cache", formatting.format_bytes(mem.kv_cache_bytes, significant=3),
          f"{formatting.format_bytes(mem.block_bytes, significant=3)} per block", **quiet,
          help=f"K and V pools in {mem.kv_dtype} ({formatting.count(mem.kv_element_bytes, 'byte')} per value): "
               f"{mem.kv_cache_bytes:,} bytes; one block of {config.block_size} tokens holds "
               f"{mem.block_bytes:,} bytes of K and V")

left, right = st.columns([3, 2], gap="medium")
with left:
    show_chart(
        figures.block_table_figure(tables, lengths, config.block_size, config.num_blocks),
        key="bt_table", width="stretch",
    )
    note = figures.block_table_grid(*tables.shape).note("sequence", "logical block")
    st.caption(note or "Hover a cell for its token range and fill. Pale cells are unallocated (-1).")
with right:
    show_chart(
        figures.pool_figure(owner, tables, lengths, config.block_size), key="bt_pool", width="stretch",
    )
    rows, cols, per_cell = figures.pool_grid_shape(len(owner))
    if per_cell > 1:
        st.caption(
            f"Aggregated for the browser: {len(owner):,} blocks drawn as {rows * cols:,} cells of {per_cell} "
            f"consecutive blocks each; partly filled blocks are not marked at this scale."
        )
    else:
        st.caption("Grey blocks are free; a dark dot marks a sequence's partly filled last block.")

st.subheader("Token walk")
if st.session_state.get("bt_seq", 0) >= config.batch_size:
    st.session_state["bt_seq"] = config.batch_size - 1
pick, info = st.columns([1, 4], vertical_alignment="bottom")
seq = bounded_number_input(pick, "Sequence", 0, config.batch_size - 1, step=1, key="bt_seq",
                           persist_state="session", note_parent=st)
needed = config.blocks_per_sequence[seq]
info.markdown(
    f"Sequence **{seq}** holds **{formatting.count(lengths[seq], 'token')}** in **{formatting.count(needed, 'block')}**; "
    f"token *t* lives in logical block *t* // {config.block_size}, slot *t* % {config.block_size}, "
    f"and the block table sends that logical block to a physical one."
)
walk, path = st.columns([3, 2], gap="medium")
show_chart(
    figures.token_walk_figure(tables[seq], lengths[seq], config.block_size, seq, config.num_blocks),
    key="bt_walk", parent=walk, width="stretch",
)
show_chart(
    figures.block_walk_figure(tables[seq], lengths[seq], config.block_size, seq, config.num_blocks),
    key="bt_path", parent=path, width="stretch",
)
walk_grid = figures.sample_grid(needed, config.block_size, figures.MAX_WALK_CELLS)
if walk_grid.sampled:
    st.caption(walk_grid.note("logical block", "slot"))
