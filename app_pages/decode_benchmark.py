"""Decode benchmark: race the implementations live on the same inputs."""

import streamlit as st

from explorer import formatting, limits
from explorer.bench import figures as bench_figures
from explorer.bench import readouts, view
from explorer.bench.accuracy_figures import accuracy_figure
from paged_attention import IMPLEMENTATIONS, LABELS
from ui import benchmark_view as bench_view
from ui.benchmark import timing_budget
from ui.charts import show_chart
from ui.recorded import BENCH_KINDS, show_recorded, show_recorded_pointer
from ui.sidebar import current, show_config_error
from ui.tables import show_cards

st.title("Decode benchmark")
st.markdown(
    "One decode step: every sequence's new query token (with draft tokens, each of its new tokens) attends to its "
    "cached context (with a sliding window, its last tokens only). "
    "**Run** times each implementation on the *same* inputs and checks it against a float64 reference. "
    "Changing the sidebar never reruns the benchmark by itself."
)

result = current()
if show_config_error(result):
    st.stop()
config, settings = result.config, result.settings
plan = limits.plan_run(config, settings.warmup, settings.iters)

if config.device == "cpu":
    st.warning(
        "**CPU mode: these are not GPU timings.** Without a GPU the Triton kernel runs in Triton's "
        "interpreter (NumPy on the CPU), thousands of times slower than compiled; the PyTorch versions "
        "run on the CPU. Use this mode to check correctness and to see the app work; run on a GPU to "
        "compare speed.",
        icon=":material/warning:",
    )
    show_recorded_pointer()

controls = st.columns([2, 2, 3], vertical_alignment="center")
include_simple = controls[0].checkbox(
    f"Include {LABELS['triton_simple']}", key="bench_include_simple", persist_state="session",
    help="the textbook Triton kernel: one program per (sequence, query head), a table lookup per token",
)
# Without a shared prefix the prefix-aware kernel is the Triton one: offered only with one.
include_prefix = config.shared_prefix > 0 and controls[0].checkbox(
    f"Include {LABELS['triton_prefix']}", value=True, key="bench_include_prefix", persist_state="session",
    help="reads each prefix group's shared blocks once for all its sequences (a prefix pass), then each "
         "sequence's own blocks, and merges the two",
)
names = [*IMPLEMENTATIONS, *(["triton_simple"] if include_simple else []),
         *(["triton_prefix"] if include_prefix else [])]
run = controls[1].button(
    "Run benchmark", type="primary", icon=":material/play_arrow:", key="bench_run",
    disabled=plan.refusal is not None, width="stretch",
)
controls[2].caption(f"{readouts.config_summary(config)} · "
                    f"{view.timing_text(plan.warmup, plan.iters, timing_budget(config.device))}")
# A run's status box under the buttons, as the sweep's progress: in view at 1280x720 once
# Run is pressed (in presentation mode too), over the notes below.
progress = st.container()
attention = readouts.attention_note(config)
if attention is not None:
    st.info(attention, icon=":material/filter_center_focus:")
queries = readouts.query_note(config)
if queries is not None:
    st.info(queries, icon=":material/stacks:")
shared = readouts.shared_kv(config)
if shared is not None:
    kv = st.columns(3, gap="xsmall")
    show_cards(view.shared_kv_cards(shared), kv[:2], border=True)
    kv[2].markdown(
        f"Triton reads the prefix's {formatting.count(shared.shared_blocks, 'shared block')} once per sequence; "
        f"{LABELS['triton_prefix']} once per group ({formatting.count(shared.prefix_groups, 'group')}). "
        f"Bandwidths below count unique bytes: {readouts.STEP_BYTES}, each shared block once."
    )
if plan.refusal:
    st.warning(plan.refusal, icon=":material/block:")
for note in plan.notes:
    st.info(f"Capped: {note} (the interpreter needs about a second per Triton call).", icon=":material/speed:")
stopped = st.session_state.get(bench_view.PARTIAL)
if stopped is not None and not run:
    # Streamlit stops a running script when the page is left or a widget changes:
    # say so, rather than let the run vanish. What it measured is kept for a rerun.
    st.warning(view.stopped_note(stopped, bench_view.run_key(config, names, plan.warmup, plan.iters)),
               icon=":material/pause_circle:")

if run:
    with progress:
        bench_view.run_in_status(config, names, plan.warmup, plan.iters)

last = st.session_state.get(bench_view.LAST)
history = st.session_state.get(bench_view.HISTORY, [])
#: The live runs' one unit of time, for their cards, charts and tables alike, chosen
#: from this session's runs. The recorded section keeps its own (show_recorded's):
#: an H200's µs are not rewritten in ms because a CPU run read ms (review 3).
unit = formatting.duration_unit(view.history_durations(history))
if last is None:
    if plan.refusal is None:  # a refused configuration shows the refusal alone
        st.info("Press **Run benchmark** to time the implementations on this configuration.", icon=":material/info:")
    show_recorded(BENCH_KINDS, config, expanded=config.device == "cpu")
    st.stop()

results, copy_gbps, reads_kv = last.results, last.copy_gbps, last.reads_kv
st.subheader(f"Run #{last.run}")
st.caption(last.caption())
if last.config != config:
    st.caption(":material/info: The sidebar changed since this run; press **Run benchmark** to measure it.")
if not reads_kv:
    st.warning(
        "**Every context is empty: there is nothing to attend to.** No K or V is read; each implementation only "
        "checks its inputs and writes a zero output (the Triton wrapper skips its kernel altogether; the simple "
        "grid still launches one that finds no tokens). The "
        "times below are call overhead, so bandwidth is n/a and speedups between implementations are not "
        "meaningful (they are left out). Give some sequence a context to measure decode.",
        icon=":material/block:",
    )
bench_view.show_cards(view.cards(results, unit, reads_kv=reads_kv))
per_token = view.token_cards(results, unit, last.config)
if per_token:  # several new tokens a step: what one of them costs
    bench_view.show_cards(per_token)

a, b = st.columns(2, gap="medium")
show_chart(bench_figures.latency_figure(results, unit=unit), key="bench_latency", parent=a, width="stretch")
if reads_kv:
    show_chart(bench_figures.speedup_figure(results), key="bench_speedup", parent=b, width="stretch")
else:
    b.info("**Speedup: not meaningful.** Every context is empty, so no implementation attends to anything.",
           icon=":material/block:")
overhead = view.overhead_summary(results, unit)
if overhead is not None:
    a, b = st.columns(2, gap="medium", vertical_alignment="center")
    show_chart(bench_figures.overhead_figure(results, unit), key="bench_overhead", parent=a, width="stretch")
    b.markdown(overhead)
else:
    st.info("**Host overhead: needs a GPU.** Host overhead is call latency minus GPU time, and on the CPU there "
           "is no GPU time: every call here is host work from end to end. On a GPU this chart shows how much of "
           "each call is launch overhead, the part a CUDA graph removes.", icon=":material/memory:")
a, b = st.columns(2, gap="medium")
if reads_kv:
    show_chart(bench_figures.bandwidth_figure(results, copy_gbps), key="bench_bandwidth", parent=a, width="stretch")
else:
    a.info("**Bandwidth: n/a.** No K or V is read when every context is empty.", icon=":material/block:")
show_chart(accuracy_figure(results, last.quantization_error), key="bench_accuracy", parent=b, width="stretch")
if last.quantization is not None:
    b.caption(readouts.quantization_caption(last.quantization, last.config))
if copy_gbps and reads_kv:
    st.caption(
        f"Copy bandwidth of this GPU, measured once per process: {formatting.format_gbps(copy_gbps)} GB/s "
        "(bytes read + written). Decode is memory-bound, so that is its ceiling."
    )

st.subheader("Results")
rows = readouts.results_rows(results, copy_gbps, reads_kv=reads_kv, config=last.config)
bench_view.show_results_tables(view.results_tables(rows, unit, reads_kv=reads_kv),
                               keys=("bench_table", "bench_checks"))
st.download_button(
    "Download CSV", view.results_csv(last),
    file_name=f"decode_benchmark_run{last.run}.csv", mime="text/csv", icon=":material/download:", key="bench_csv",
)

st.subheader("Compare runs")
if len(history) < 2:
    st.caption("Change one setting in the sidebar and run again: each run of this session is kept here.")
show_chart(bench_figures.history_figure(history, unit), key="bench_history_chart", width="stretch")
bench_view.show_history_table(history, unit, key="bench_history_table")
st.button("Clear history", icon=":material/delete:", key="bench_clear", on_click=bench_view.clear_history)

show_recorded(BENCH_KINDS, config, expanded=config.device == "cpu")
