"""Decode benchmark: race the implementations live on the same inputs."""

import pandas as pd
import streamlit as st

from explorer import formatting, limits
from explorer.bench import figures as bench_figures
from explorer.bench import readouts
from paged_attention import IMPLEMENTATIONS, LABELS
from ui.benchmark import BenchmarkOOM, BenchmarkRefused, run_benchmark_locked
from ui.charts import show_chart
from ui.recorded import BENCH_KINDS, recorded_durations, show_recorded, show_recorded_pointer
from ui.sidebar import current, show_config_error

MAX_HISTORY = 20
LAST, HISTORY = "bench_last", "bench_history"
#: Results of the run in progress, kept as each is measured: a second click on Run
#: stops that run, and the run it starts reuses them.
PARTIAL = "bench_partial"

st.title("Decode benchmark")
st.markdown(
    "One decode step: every sequence's new query token attends to its whole cached context. "
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
controls[2].caption(f"{readouts.config_summary(config)} · warm-up {plan.warmup}, "
                    f"{formatting.count(plan.iters, 'timed call')}")
shared = readouts.shared_kv(config)
if shared is not None:
    kv = st.columns(3, gap="xsmall")
    kv[0].metric("KV read, logical", formatting.format_bytes(shared.logical_bytes, 3),
                 "prefix in every sequence", delta_color="off", delta_arrow="off", border=True,
                 help="K and V of every sequence's tokens: what a kernel that reads each sequence's blocks, "
                      "shared or not, reads")
    kv[1].metric("KV read, unique", formatting.format_bytes(shared.unique_bytes, 3),
                 f"-{100 * shared.saved_fraction:.0f}%: prefix once per group", delta_color="inverse",
                 delta_arrow="down", border=True, help="each shared block once: the least a decode step must read")
    kv[2].markdown(
        f"Triton reads the prefix's {formatting.count(shared.shared_blocks, 'shared block')} once per sequence; "
        f"{LABELS['triton_prefix']} once per group ({formatting.count(shared.prefix_groups, 'group')}). "
        "Bandwidths below count unique bytes."
    )
if plan.refusal:
    st.warning(plan.refusal, icon=":material/block:")
for note in plan.notes:
    st.info(f"Capped: {note} (the interpreter needs about a second per Triton call).", icon=":material/speed:")
stopped = st.session_state.get(PARTIAL)
if stopped is not None and not run:
    # Streamlit stops a running script when the page is left or a widget changes:
    # say so, rather than let the run vanish. What it measured is kept for a rerun.
    done, asked = len(stopped["results"]), stopped["key"][1]
    same = stopped["key"] == (config, tuple(names), plan.warmup, plan.iters)
    st.warning(
        f"The last run stopped before it finished ({done} of {formatting.count(len(asked), 'implementation')} "
        "measured), because the page was left or a setting changed while it ran. "
        + ("The settings have changed since; press **Run benchmark** to run them." if not same else
           "Press **Run benchmark** to finish it: what it measured is kept." if done else
           "Press **Run benchmark** to run it again."),
        icon=":material/pause_circle:",
    )


def _failed(status, label: str, message: str, icon: str) -> None:
    st.session_state.pop(PARTIAL, None)
    status.update(label=label, state="error", expanded=True)
    st.error(message, icon=icon)


def _run() -> None:
    key = (config, tuple(names), plan.warmup, plan.iters)
    partial = st.session_state.get(PARTIAL)
    if partial is None or partial["key"] != key:
        partial = st.session_state[PARTIAL] = {"key": key, "results": []}
    with st.status("Running the benchmark…", expanded=True) as status:
        bar = st.progress(0.0, text="preparing inputs")

        how = "interleaved rounds" if config.device.startswith("cuda") else "one implementation after another"

        def on_progress(done: int, total: int) -> None:
            bar.progress(done / total, text=f"{done:,} of {total:,} timed calls ({how})")

        def on_result(r, reused: bool) -> None:
            mark = "✓" if r.passed else "✗"
            note = " (measured by the run your click replaced)" if reused else ""
            st.write(f"{mark} **{r.label}**: median {formatting.format_duration(r.median_ms)} over "
                     f"{formatting.count(len(r.samples_ms), 'call')}{note}")

        def on_wait() -> None:
            st.info("Queued: another session is running a benchmark on this machine; yours starts when it ends.",
                    icon=":material/hourglass_top:")

        def on_own_wait() -> None:
            st.info("Your previous run is still finishing its timing rounds; this run takes over when it ends "
                    "and keeps what it measured.", icon=":material/hourglass_top:")

        quantization = []  # filled for an fp8 cache

        try:
            results, copy_gbps = run_benchmark_locked(
                config, names, warmup=plan.warmup, iters=plan.iters,
                on_progress=on_progress, on_result=on_result, on_wait=on_wait, on_own_wait=on_own_wait,
                done=partial["results"], on_quantization=quantization.append,
            )
        # A run stopped by a second click raises Streamlit's StopException (not an
        # Exception): its results stay in PARTIAL for the run that replaced it.
        except BenchmarkRefused as exc:
            return _failed(status, "Not run: not enough memory", str(exc), ":material/memory:")
        except BenchmarkOOM as exc:
            return _failed(status, "Out of GPU memory", str(exc), ":material/memory:")
        except ValueError as exc:
            return _failed(status, "Invalid configuration", str(exc), ":material/error:")
        except Exception as exc:  # the app must keep working whatever a run does
            return _failed(status, "The run failed", f"The run failed: {type(exc).__name__}: {exc}",
                           ":material/error:")
        st.session_state.pop(PARTIAL, None)
        bar.progress(1.0, text="done")
        status.update(label=f"Done: {formatting.count(len(results), 'implementation')}", state="complete",
                      expanded=False)
    history = st.session_state.setdefault(HISTORY, [])
    before = history[-1] if history else None
    change = readouts.run_change(before["config"] if before else None, config)
    if change == "same settings" and (before["warmup"], before["iters"]) != (plan.warmup, plan.iters):
        change = f"timed calls {before['iters']:,}→{plan.iters:,}" if before["iters"] != plan.iters else (
            f"warm-up {before['warmup']:,}→{plan.warmup:,}")
    entry = {
        "run": (history[-1]["run"] + 1) if history else 1,
        "change": change,
        "label": readouts.config_summary(config),
        "config": config,
        "warmup": plan.warmup,
        "iters": plan.iters,
        "results": results,
        "copy_gbps": copy_gbps,
        "quantization": quantization[0] if quantization else None,
    }
    history.append(entry)
    del history[:-MAX_HISTORY]
    st.session_state[LAST] = entry


if run:
    _run()


def _clear_history() -> None:
    st.session_state.pop(HISTORY, None)
    st.session_state.pop(LAST, None)


last = st.session_state.get(LAST)
history = st.session_state.get(HISTORY, [])
#: The page's one unit of time, for its cards, charts and tables alike, chosen
#: from every time it shows (the live runs' and the recorded ones').
unit = formatting.duration_unit(
    [t for h in history for r in h["results"] for t in (r.median_ms, r.gpu_time_ms)] + recorded_durations()
)
if last is None:
    if plan.refusal is None:  # a refused configuration shows the refusal alone
        st.info("Press **Run benchmark** to time the implementations on this configuration.", icon=":material/info:")
    show_recorded(BENCH_KINDS, config, expanded=config.device == "cpu")
    st.stop()

results, copy_gbps = last["results"], last["copy_gbps"]
reads_kv = not readouts.reads_no_kv(last["config"])
st.subheader(f"Run #{last['run']}")
st.caption(f"{last['label']} · warm-up {last['warmup']}, "
           f"{formatting.count(last['iters'], 'timed call')} per implementation")
if last["config"] != config:
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

rows = readouts.results_rows(results, copy_gbps, reads_kv=reads_kv)
# Half the default gap: four cards at 1280 px (with a desktop browser's scrollbar) then hold
# the widest value three significant digits write, "888,000 µs" (the recorded GPU runs keep
# the page in µs while the interpreted Triton kernel takes 100+ ms); the default gap cut it
# to "888,000 …" (checked in Chromium, tests/test_browser_benchmark.py).
cols = st.columns(len(results), gap="xsmall")
for col, r, row in zip(cols, results, rows):
    speed = row["speedup_vs_naive"]
    if not reads_kv:
        delta, color, arrow = None, "off", "off"
    elif r.name == "naive" or speed is None:
        delta, color, arrow = "baseline", "off", "off"
    elif speed >= 1:
        delta, color, arrow = f"{speed:.1f}× faster", "normal", "up"  # than naive: short enough for 1280 px
    else:
        delta, color, arrow = f"{1 / speed:.1f}× slower", "inverse", "down"
    gpu = f" · GPU time {formatting.format_duration(r.gpu_time_ms, unit)}" if r.gpu_time_ms is not None else ""
    col.metric(
        r.label, formatting.format_duration(r.median_ms, unit), delta, delta_color=color, delta_arrow=arrow, border=True,
        help=f"median call latency over {formatting.count(len(r.samples_ms), 'call')}: {formatting.format_duration(r.median_ms, unit)}{gpu}; "
             + ("" if r.name == "naive" or not reads_kv or speed is None
                else "the arrow compares it with Naive PyTorch; ")
             + ("correct" if r.passed else "INCORRECT") + " against the float64 reference",
    )

a, b = st.columns(2, gap="medium")
show_chart(bench_figures.latency_figure(results, unit=unit), key="bench_latency", parent=a, width="stretch")
if reads_kv:
    show_chart(bench_figures.speedup_figure(results), key="bench_speedup", parent=b, width="stretch")
else:
    b.info("**Speedup: not meaningful.** Every context is empty, so no implementation attends to anything.",
           icon=":material/block:")
a, b = st.columns(2, gap="medium")
if reads_kv:
    show_chart(bench_figures.bandwidth_figure(results, copy_gbps), key="bench_bandwidth", parent=a, width="stretch")
else:
    a.info("**Bandwidth: n/a.** No K or V is read when every context is empty.", icon=":material/block:")
quantization = last.get("quantization")
show_chart(bench_figures.accuracy_figure(results, quantization.max_abs_err if quantization else None),
           key="bench_accuracy", parent=b, width="stretch")
if quantization is not None:
    b.caption(readouts.quantization_caption(quantization, last["config"]))
if copy_gbps and reads_kv:
    st.caption(
        f"Copy bandwidth of this GPU, measured once per process: {copy_gbps:,.0f} GB/s (bytes read + written). "
        "Decode is memory-bound, so that is its ceiling. Where GPU time is far below call latency, "
        "launch overhead dominates the call."
    )

st.subheader("Results")
table = pd.DataFrame(rows)
if not reads_kv:  # say n/a rather than leave the columns out
    table["speedup_vs_naive"] = table["gbps"] = "n/a"
table = table.dropna(axis=1, how="all")  # no GPU columns on the CPU
# Times in the page's unit and bandwidths to three significant digits, as text the
# width of what it says (a NumberColumn's "%.3g" clipped 0.000612 to ".000612" at 1280 px).
TIMES = ["median_ms", "p20_ms", "p80_ms", "gpu_time_ms"]
for column in [c for c in TIMES if c in table]:
    table[column] = [formatting.duration_number(v, unit) if pd.notna(v) else "n/a" for v in table[column]]
for column in [c for c in ("gbps", "gpu_gbps") if c in table and reads_kv]:
    table[column] = [formatting.format_gbps(v) if pd.notna(v) else "n/a" for v in table[column]]
sharing = "unique_gbps" in table  # a shared prefix: bandwidth on unique bytes first, logical beside it
for column in [c for c in ("unique_gbps", "gpu_unique_gbps") if c in table]:
    table[column] = [formatting.format_gbps(v) if pd.notna(v) else "n/a" for v in table[column]]
BYTES = " (logical bytes)" if sharing else ""
na = {"speedup_vs_naive": st.column_config.TextColumn("Speedup vs naive"),
      "gbps": st.column_config.TextColumn(f"GB/s{BYTES}")}
#: What a speaker points at comes first, so it stays on screen at 1280 px.
FIRST = ["implementation", "correct", "median_ms", "gpu_time_ms", "speedup_vs_naive", "gpu_unique_gbps",
         "unique_gbps", "gbps", "pct_of_copy_bw", "max_tol_ratio"]
st.dataframe(
    table, hide_index=True, width="stretch", key="bench_table",
    column_order=[c for c in FIRST if c in table] + [c for c in table if c not in FIRST],
    column_config={
        "implementation": "Implementation",
        "device": "Device",
        "median_ms": st.column_config.TextColumn(f"Median ({unit})", alignment="right"),
        "p20_ms": st.column_config.TextColumn(f"p20 ({unit})", alignment="right"),
        "p80_ms": st.column_config.TextColumn(f"p80 ({unit})", alignment="right"),
        "gpu_time_ms": st.column_config.TextColumn(f"GPU time ({unit})", alignment="right"),
        "gpu_p20_ms": None,  # in the CSV; the table keeps to the call latency's spread
        "gpu_p80_ms": None,
        "speedup_vs_naive": st.column_config.NumberColumn("Speedup vs naive", format="%.3g×"),
        "gbps": st.column_config.TextColumn(f"GB/s{BYTES}", alignment="right"),
        "gpu_gbps": st.column_config.TextColumn(f"GB/s{BYTES} (GPU time)" if sharing else "GB/s (GPU time)",
                                                alignment="right"),
        "unique_gbps": st.column_config.TextColumn(
            "GB/s (unique bytes)", alignment="right",
            help="each shared block counted once: the bytes a decode step must read at least"),
        "gpu_unique_gbps": st.column_config.TextColumn("GB/s (unique, GPU time)", alignment="right"),
        "pct_of_copy_bw": st.column_config.NumberColumn("% of copy BW" + (" (unique)" if sharing else ""),
                                                        format="%.0f%%"),
        "max_abs_err": st.column_config.NumberColumn("Max abs err", format="%.2e"),
        # Relative error is large wherever the reference is near zero, even on a
        # passing row; the CSV keeps it, the table shows error / tolerance instead.
        "max_rel_err": None,
        "max_tol_ratio": st.column_config.NumberColumn(
            "Error / tolerance", format="%.2g",
            help="max |out - ref| / (atol + rtol |ref|): at most 1 exactly when every element passes"),
        "atol": st.column_config.NumberColumn("atol", format="%.2g"),  # bfloat16's 0.016, not "2e-02"
        "correct": "Correct",
        "samples": "Timed calls",
        **({} if reads_kv else na),
    },
)
csv = readouts.results_csv(last["run"], last["label"], rows,
                           quantization.max_abs_err if quantization is not None else None)
st.download_button(
    "Download CSV", csv, file_name=f"decode_benchmark_run{last['run']}.csv", mime="text/csv",
    icon=":material/download:", key="bench_csv",
)

st.subheader("Compare runs")
if len(history) < 2:
    st.caption("Change one setting in the sidebar and run again: each run of this session is kept here.")
show_chart(bench_figures.history_figure(history, unit), key="bench_history_chart", width="stretch")
summary = pd.DataFrame(
    [
        {"run": h["run"], "change": h.get("change", ""),
         "all correct": "yes" if all(r.passed for r in h["results"]) else "NO",
         **{r.label: formatting.duration_number(r.median_ms, unit) for r in h["results"]},
         "configuration": h["label"]}
        for h in history
    ]
)
st.dataframe(
    summary, hide_index=True, width="stretch", key="bench_history_table",
    column_config={label: st.column_config.TextColumn(f"{label} ({unit})", alignment="right")
                   for label in LABELS.values()},
)
st.button("Clear history", icon=":material/delete:", key="bench_clear", on_click=_clear_history)

show_recorded(BENCH_KINDS, config, expanded=config.device == "cpu")
