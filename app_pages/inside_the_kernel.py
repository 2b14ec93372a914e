"""Inside the kernel: the Triton kernel's walk and online softmax for one (sequence, head), and with
draft tokens its tile's rows and their causal mask."""

import streamlit as st

from explorer import formatting, limits
from explorer.bench import readouts
from explorer.kernel import figures as kernel_figures
from explorer.kernel import mask_figures, notes, option_figures, work_list_figures
from explorer.kernel.tables import TILE_NUMBERS, split_table, split_text, tile_text, with_sink
from explorer.kernel.view import (
    BLOCK_N_CHOICES,
    launch_plan,
    prefix_groups,
    prefix_plan,
    showcase_plan,
    split_note,
    trace_cards,
    trace_size_error,
    window_block,
    work_list,
    work_list_summary,
)
from explorer.limits import MAX_SPLITS
from ui.charts import show_chart
from ui.data import block_arrays_for, config_key, kernel_trace
from ui.inputs import bounded_number_input
from ui.page_state import seed_page
from ui.sidebar import current, show_config_error, sync_url
from ui.tables import column_px, number_column, show_cards, show_table

#: Tile-table columns that only say something when a prefix pass ran.
PREFIX_COLUMNS = ("pass", "sequences", "query_rows")

st.title("Inside the kernel")
st.markdown(notes.INTRO)

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

drafts = max(config.query_lengths) > 1  # new tokens per sequence: the tile holds each one's rows
with st.container(border=True):
    if drafts:  # two rows: six boxes in one lost their step buttons at 1280 px
        top, bottom = st.columns(3, vertical_alignment="bottom"), st.columns([1.3, 1, 1], vertical_alignment="bottom")
        c = [top[0], top[1], top[2], *bottom]
    else:
        c = st.columns([1, 1, 1.3, 1, 1], vertical_alignment="bottom")
    seq = bounded_number_input(c[0], "Sequence", 0, config.batch_size - 1, step=1, key="ik_seq",
                               persist_state="session", note_parent=st)
    head = bounded_number_input(c[1], "Query head", 0, config.num_heads - 1, step=1, key="ik_head",
                                persist_state="session", note_parent=st)
    q_len = config.query_lengths[seq]
    token = None
    if drafts:
        # Another sequence (or its new tokens changed): start at its last token, the plain step's.
        if ss.get("ik_token") is None or ss.get("ik_token_of") != (seq, q_len) or ss["ik_token"] > q_len - 1:
            ss["ik_token"] = q_len - 1
        ss["ik_token_of"] = (seq, q_len)
        token = bounded_number_input(c.pop(2), "New token", 0, q_len - 1, step=1, key="ik_token", note_parent=st,
                                     disabled=q_len < 2, help=f"which of the sequence's {q_len} new tokens to trace "
                                     "(0: the first draft token); each scores the context up to its own position")
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
    group, n = config.num_heads // config.num_kv_heads, config.lengths[seq]
    mine = next((g for g in groups if seq in g.sequences), None)
    st.caption(notes.plan_caption(plan, config, readouts.config_summary(config), seq, head, token, override))
    if override and ss.get("ik_showcase"):
        st.info(notes.showcase_note(default_plan, config, seq), icon=":material/call_split:")
    capped = split_note(config, int(splits), plan) if override else None
    if capped:
        st.info(capped, icon=":material/call_split:")

work = work_list(plan, config.lengths, groups=groups, prefix=pre_plan, query_group_size=group,
                 window_starts=config.window_starts if config.window else None)
st.subheader("1 · The launch: which program reads which blocks")
st.markdown(("**Overridden plan.** " if override else "")
            + work_list_summary(plan, work, config.num_kv_heads, pre_plan)
            + f" Sequence {seq}, traced below, is the marked row.")
show_chart(work_list_figures.work_list_figure(work, config.lengths, config.block_size, highlight=int(seq)),
           key="ik_work_chart", width="stretch")
if mine is not None:
    per_tile = work[(work["seq"] == seq) & (work["pass"] == "prefix")]["sequences"]
    st.info(notes.prefix_note(seq, mine.sequences, mine.num_blocks, config.block_size, int(per_tile.max()) * group,
                              group), icon=":material/group_work:")

error = trace_size_error(n, plan, window_block(config, seq))
if error:
    st.error(error, icon=":material/error:")
    st.stop()
if n == 0:
    st.info(notes.empty_note(seq, any(config.lengths)), icon=":material/info:")
    st.stop()

trace = kernel_trace(config_key(config), int(seq), int(head), plan, groups, pre_plan,
                     int(token) if q_len > 1 else None)
tiles, split_rows = trace["tiles"], trace["splits"]
err = trace["max_abs_error"]

num_prefix = int((split_rows["pass"] == "prefix").sum())
show_cards(trace_cards(tiles, split_rows, plan.num_splits, n, config.block_size, err))


def explained(fig, key: str, text: str) -> None:
    chart, words = st.columns([3, 1.15], gap="medium")
    show_chart(fig, key=key, parent=chart, width="stretch")
    words.markdown(text)


st.subheader("2 · The walk: tiles and block-table lookups")
explained(kernel_figures.kernel_walk_figure(tiles, n, config.block_size, plan.block_n, num_blocks=config.num_blocks,
                                           window_start=trace["window_start"]), "ik_walk_chart",
          notes.walk_note(plan.block_n, notes.tile_words(plan, config.block_size), len(split_rows) > 1, bool(num_prefix),
                          notes.window_note(config.window, trace["window_start"], trace["first_block"])))
if trace["query_lens"] > 1:
    explained(mask_figures.tile_mask_figure(trace["tile_rows"], trace["mask"], context_len=n, token=trace["token"],
                                            head=int(head)), "ik_mask_chart",
              notes.mask_note(trace["query_lens"], group, trace["token"], int(head), trace["position"], config.window,
                              int(tiles["causal_masked"].sum())))
if trace["soft_cap"] is not None:
    explained(option_figures.logits_figure(trace["logits"], trace["soft_cap"]), "ik_logits_chart", notes.soft_cap_note(
        trace["soft_cap"], int((trace["logits"]["raw"].abs() > trace["soft_cap"]).sum())))

st.subheader("3 · Online softmax: running max m and normalizer l")
sink_m = trace["sink_m"]
explained(kernel_figures.online_softmax_figure(tiles, final_error=err, l_final=trace["l_final"],
                                               sink_term=trace["sink_term"]), "ik_softmax_chart",
          notes.softmax_note(len(split_rows) > 1, notes.sink_note(trace["sink"], trace["sink_share"])))

st.subheader("4 · Split-K: merging the splits")
if len(split_rows) > 1:
    explained(kernel_figures.split_merge_figure(split_rows, sink_m=sink_m, sink_share=trace["sink_share"]),
              "ik_merge_chart", notes.merge_note(bool(num_prefix)))
    # Chosen columns of set widths: all twelve of the trace's were cut off at 1280 px.
    columns = split_table(bool(num_prefix))
    show_table(
        split_text(with_sink(split_rows, sink_m, trace["sink_term"], trace["sink_share"])[list(columns)]),
        key="ik_split_table",
        column_config={name: (number_column if c.number else st.column_config.Column)(
            c.label, width=column_px(c.width), help=c.help) for name, c in columns.items()},
    )
else:
    st.info(notes.no_merge_note(plan.num_splits, override), icon=":material/call_split:")

with st.expander(f"Every tile ({formatting.count(len(tiles), 'row')})"):
    st.dataframe(
        tile_text(tiles).drop(columns=[] if num_prefix else list(PREFIX_COLUMNS), errors="ignore"),
        hide_index=True, width="stretch", key="ik_tile_table",
        column_config={c: number_column(c) for c in TILE_NUMBERS},
    )
