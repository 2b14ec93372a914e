"""Inside the kernel: the Triton kernel's walk and online softmax for one (sequence, head)."""

import streamlit as st

from explorer import formatting, limits
from explorer.bench import readouts
from explorer.kernel import figures as kernel_figures
from explorer.kernel import work_list_figures
from explorer.kernel.view import (
    BLOCK_N_CHOICES,
    launch_plan,
    prefix_groups,
    prefix_plan,
    row_splits,
    row_tiles,
    showcase_plan,
    split_note,
    trace_size_error,
    work_list,
    work_list_summary,
)
from explorer.limits import MAX_SPLITS
from paged_attention.tiling import cdiv
from ui.charts import show_chart
from ui.data import block_arrays_for, config_key, kernel_trace
from ui.inputs import bounded_number_input
from ui.page_state import seed_page
from ui.sidebar import current, show_config_error, sync_url

#: Trace columns that only say something when a prefix pass ran.
PREFIX_COLUMNS = ("pass", "sequences", "query_rows")

st.title("Inside the kernel")
st.markdown(
    "What `_paged_decode_kernel` does for one query head of one sequence of the sidebar's batch, replayed step by "
    "step: the **tiles** of `BLOCK_N` tokens it walks through the block table, the **online softmax** state after "
    "each tile, and, when a long context is split across programs (**split-K**, flash-decoding), how the splits "
    "are merged; when sequences share a prefix, the **prefix pass** that reads the shared blocks once per group. "
    "The replay runs on the CPU in float64 on random float32 inputs: it explains the algorithm, it "
    "does not time it."
)

result = current()
if show_config_error(result):
    st.stop()
config = result.config
too_big = limits.layout_size_error(config)
if too_big:
    st.error(too_big, icon=":material/error:")
    st.stop()
ss = st.session_state
tables, _ = block_arrays_for(config)
# Shared prefixes in the table: triton_decode(..., shared_prefixes="detect") reads them in a prefix pass first.
groups = prefix_groups(config, tables)
pre_plan = prefix_plan(config, tables, groups)

# On the page's first run in this session: the URL's sequence and query head (ik_seq, ik_head), else the
# longest sequence: it walks the most tiles.
seed_page("inside_the_kernel",
          {"ik_seq": max(range(config.batch_size), key=lambda b: config.lengths[b]), "ik_head": 0},
          bounds={"ik_seq": (0, config.batch_size - 1), "ik_head": (0, config.num_heads - 1)})
for key, top in (("ik_seq", config.batch_size - 1), ("ik_head", config.num_heads - 1)):
    if ss.get(key, 0) > top:
        ss[key] = top
if "ik_override" not in ss:  # first visit: if the kernel's own plan shows no merge, start on one that does
    showcase = showcase_plan(config, tables, int(ss["ik_seq"]), groups)
    if showcase:
        ss["ik_override"], ss["ik_showcase"] = True, True
        ss["ik_splits"], ss["ik_block_n"] = showcase
default_plan = launch_plan(config, tables, groups=groups)
if not ss.get("ik_override", False):  # the disabled override fields show the plan in use
    ss["ik_splits"], ss["ik_block_n"] = default_plan.num_splits, default_plan.block_n

with st.container(border=True):
    c = st.columns([1, 1, 1.3, 1, 1], vertical_alignment="bottom")
    seq = bounded_number_input(c[0], "Sequence", 0, config.batch_size - 1, step=1, key="ik_seq",
                               persist_state="session", note_parent=st)
    head = bounded_number_input(c[1], "Query head", 0, config.num_heads - 1, step=1, key="ik_head",
                                persist_state="session", note_parent=st)
    override = c[2].toggle("Override plan", key="ik_override", persist_state="session",
                           on_change=lambda: ss.pop("ik_showcase", None),
                           help="override the launch plan: the kernel's heuristic picks the tile and the split "
                                "count from the whole batch and the GPU; override them to see how the walk changes")
    splits = bounded_number_input(c[3], "Splits", 1, MAX_SPLITS, step=1, key="ik_splits",
                                  persist_state="session", disabled=not override,
                                  note_parent=st, help="programs along the context (split-K); 1 = no split")
    block_n = c[4].selectbox("BLOCK_N (tokens per tile)", BLOCK_N_CHOICES, key="ik_block_n",
                             persist_state="session", disabled=not override)
    sync_url()  # the URL holds the sequence and head as drawn
    plan = (launch_plan(config, tables, num_splits=int(splits), block_n=int(block_n), groups=groups) if override
            else default_plan)
    group = config.num_heads // config.num_kv_heads
    n = config.lengths[seq]
    mine = next((g for g in groups if seq in g.sequences), None)
    tile = (f"{formatting.count(plan.blocks_per_tile, 'block')} of {formatting.count(plan.slots_per_tile, 'slot')}"
            if plan.subtiles == 1 else f"1/{plan.subtiles} of a block of {config.block_size}")
    st.caption(
        f"{'Overridden' if override else 'Default'} plan for {readouts.config_summary(config)}: "
        f"BLOCK_N = {plan.block_n} tokens per tile ({tile}); "
        + (f"{formatting.count(plan.num_splits, 'split')} of {formatting.count(plan.blocks_per_split, 'block')} "
           f"({formatting.count(plan.tokens_per_split, 'token')}) for the longest sequence"
           if max(config.lengths, default=0) else "no split: every context is empty")
        + f" · sequence {seq} holds {formatting.count(n, 'token')} · query head {head} reads "
        f"KV head {head // group} (GQA group of {group})"
    )
    if override and ss.get("ik_showcase"):
        own_splits, own_tiles = row_splits(default_plan, n), row_tiles(default_plan, n)
        st.info(
            f"The kernel's own plan for this batch (BLOCK_N = {default_plan.block_n}, "
            f"{formatting.count(default_plan.num_splits, 'split')}) walks sequence {seq} as "
            f"{formatting.count(own_splits, 'split')} of {formatting.count(own_tiles, 'tile')} in all"
            + (": nothing to merge" if own_splits < 2 else "") + ". To show the tiles and the split-K merge, this "
            "page opened with **Override plan** on; turn it off to see the kernel's own plan (the output is the same "
            "to float64 rounding).", icon=":material/call_split:")
    capped = split_note(config, int(splits), plan) if override else None
    if capped:
        st.info(capped, icon=":material/call_split:")

work = work_list(plan, config.lengths, groups=groups, prefix=pre_plan, query_group_size=group)
st.subheader("1 · The launch: which program reads which blocks")
st.markdown(("**Overridden plan.** " if override else "")
            + work_list_summary(plan, work, config.num_kv_heads, pre_plan)
            + f" Sequence {seq}, traced below, is the marked row.")
show_chart(work_list_figures.work_list_figure(work, config.lengths, config.block_size, highlight=int(seq)),
           key="ik_work_chart", width="stretch")
if mine is not None:
    members = formatting.count(len(mine.sequences), "sequence")
    per_tile = work[(work["seq"] == seq) & (work["pass"] == "prefix")]["sequences"]
    rows = int(per_tile.max()) * group
    st.info(
        f"Sequence {seq} shares its first {formatting.count(mine.num_blocks, 'block')} "
        f"({formatting.count(mine.num_blocks * config.block_size, 'token')}) with its group of {members} "
        f"({', '.join(map(str, mine.sequences[:12]))}{', …' if len(mine.sequences) > 12 else ''}). The **prefix "
        f"pass** reads them once for the group: each of its programs holds up to {rows} query rows (sequences x "
        f"the {formatting.count(group, 'query head')} of one KV head) as one tile. Its partials come first below "
        "(**prefix** tiles); the sequence's own programs walk the rest, and the merge takes them all.",
        icon=":material/group_work:")

error = trace_size_error(n, plan)
if error:
    st.error(error, icon=":material/error:")
    st.stop()
if n == 0:
    if any(config.lengths):
        st.info(f"Sequence {seq} has no cached tokens: every program of this row returns at once and the output "
                "is zero. Pick another sequence.", icon=":material/info:")
    else:  # no other sequence to pick
        st.info("Every sequence is empty (no cached tokens): every program returns at once and the output is "
                "zero. Give the sequences tokens in the sidebar to see the walk.", icon=":material/info:")
    st.stop()

trace = kernel_trace(config_key(config), int(seq), int(head), plan, groups, pre_plan)
tiles, split_rows = trace["tiles"], trace["splits"]
err = trace["max_abs_error"]

m = st.columns(5)
m[0].metric("Tokens", f"{n:,}", help=f"{formatting.count(cdiv(n, config.block_size), 'block')} of {config.block_size}")
m[1].metric("Tiles walked", f"{len(tiles):,}", help="online-softmax updates, all splits together")
m[2].metric("Block-table lookups", f"{int(tiles['table_lookups'].sum()):,}",
            help="one per block: a tile loads each of its blocks' table entries once; later subtiles reuse it")
num_prefix = int((split_rows["pass"] == "prefix").sum())
if num_prefix:
    m[3].metric("Partials merged", f"{len(split_rows)}", f"{num_prefix} prefix", delta_color="off",
                delta_arrow="off", help="the prefix pass's pieces of the shared blocks, then the row's own programs")
else:
    m[3].metric("Splits that run", f"{len(split_rows)}", f"of {plan.num_splits}", delta_color="off",
                delta_arrow="off", help="splits past this sequence's last block return at once")
m[4].metric("Error vs reference", f"{err:.1e}", "matches" if err < 1e-10 else "MISMATCH",
            delta_color="normal" if err < 1e-10 else "inverse", delta_arrow="off",
            help="max |trace − full softmax|: the merged output of the replay against reference_decode "
                 "(float64, one full softmax)")


def explained(fig, key: str, text: str) -> None:
    chart, words = st.columns([3, 1.15], gap="medium")
    show_chart(fig, key=key, parent=chart, width="stretch")
    words.markdown(text)


st.subheader("2 · The walk: tiles and block-table lookups")
explained(
    kernel_figures.kernel_walk_figure(tiles, n, config.block_size, plan.block_n, num_blocks=config.num_blocks),
    "ik_walk_chart",
    f"""
Each bar is one **tile**: the `BLOCK_N = {plan.block_n}` lanes a program processes at once, laid out as
{tile}. Its colours are the **physical blocks** it reads, found through the **block table**; a tile looks up
each of its blocks' entries once, so the number of **table lookups** is the number of blocks, not tokens.

Hatched lanes are **masked**: past the end of the context (the last, partly filled block), past the end of the
split, or padding when the block size is not a power of two. They load nothing and score −∞.

{"Dotted lines separate the **splits**: each is a separate program walking its own stretch of the context." if len(split_rows) > 1 else "One program walks the whole context (no split)."}
{"The grey band holds the **prefix pass**'s tiles: the same blocks, read once for every sequence of the group." if num_prefix else ""}
""",
)

st.subheader("3 · Online softmax: running max m and normalizer l")
explained(
    kernel_figures.online_softmax_figure(tiles, final_error=err),
    "ik_softmax_chart",
    f"""
The kernel never holds all scores at once. After each tile it keeps three things: the **running max m** of the
scores seen, the **normalizer l** = Σ 2^(s − m) over them, and the unnormalised output **acc** = Σ 2^(s − m)·v.

When a tile brings a new maximum, the old l and acc are **rescaled** by α = 2^(m_old − m_new) (hover a point);
otherwise α = 1. Scores are in base-2 units (scale·log₂e), so the kernel can use `exp2`.

The bottom panel is the distance of the partial answer **acc / l** to the final output: it falls as the tiles
cover more of the context, and reaches float64 rounding (~1e-16) at the end of the row's last split (the dotted
line: each split against its own exact answer). The star is the output the kernel returns{" after the merge" if
len(split_rows) > 1 else ""}.
""",
)

st.subheader("4 · Split-K: merging the splits")
if len(split_rows) > 1:
    explained(
        kernel_figures.split_merge_figure(split_rows),
        "ik_merge_chart",
        """
With **split-K** (flash-decoding) several programs share one sequence's context, so a short batch still fills
the GPU. Each split ends with its own (m, l, acc), relative to its **own** max.

The last program of the row to finish (an atomic counter tells it, so no second kernel is launched) rescales
each split to the common max with the **weight** w = 2^(m − max m) and sums:
out = Σ w·acc / Σ w·l. A split's **share** w·l / Σ w·l is the part of the softmax mass its tokens carry: one
with a low max contributes little.
""" + ("""
The **prefix** partials were written by the prefix pass before this launch, into the row's first slots; the
merge treats them like any split's.
""" if num_prefix else ""),
    )
    st.dataframe(
        split_rows if num_prefix else split_rows.drop(columns=list(PREFIX_COLUMNS), errors="ignore"),
        hide_index=True, width="stretch", key="ik_split_table",
        column_config={c: st.column_config.NumberColumn(c, format="%.4g") for c in ("m", "l", "weight", "share",
                                                                                      "err_vs_row")},
    )
else:
    if plan.num_splits > 1:
        reason = f" (the plan has {plan.num_splits}, but the others start past its last block)"
        fix = ("Pick a longer sequence, or raise **Splits** so that each covers fewer blocks," if override
               else "Pick a longer sequence, or turn on **Override plan** and raise **Splits**,")
    else:
        reason = ""
        fix = "Raise **Splits**" if override else "Turn on **Override plan** and raise **Splits**"
    st.info(f"This row runs as one split{reason}: there is nothing to merge. {fix} to see the merge; the result "
            "stays the same to float64 rounding.", icon=":material/call_split:")

with st.expander(f"Every tile ({formatting.count(len(tiles), 'row')})"):
    st.dataframe(
        tiles.assign(physical_blocks=tiles["physical_blocks"].map(lambda b: ", ".join(map(str, b))))
        .drop(columns=[] if num_prefix else list(PREFIX_COLUMNS), errors="ignore"),
        hide_index=True, width="stretch", key="ik_tile_table",
        column_config={c: st.column_config.NumberColumn(c, format="%.4g")
                       for c in ("tile_max", "m", "alpha", "l", "err_vs_split", "err_vs_row")},
    )
