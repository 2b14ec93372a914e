"""The Decode benchmark page's runs on screen: a run in its status box, kept in
the session's history, and the cards and tables of the last one, drawn from the
view models of :mod:`explorer.bench.view` (the running itself is
:mod:`ui.benchmark`'s)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd
import streamlit as st

from explorer.bench import view
from explorer.formatting import count, format_duration
from paged_attention import DecodeConfig
from paged_attention.results import BenchResult
from ui import benchmark as runner
from ui.benchmark import timing_budget
from ui.run_guard import QueueNote, guarded
from explorer.cards import Card
from ui import tables
from ui.tables import column_px, show_table

#: Session keys: the last run's entry, the session's runs, and the results of the
#: run in progress, kept as each is measured (a second click on Run stops that
#: run, and the run it starts reuses them).
LAST, HISTORY, PARTIAL = "bench_last", "bench_history", "bench_partial"


def run_key(config: DecodeConfig, names: list[str], warmup: int, iters: int) -> view.RunKey:
    """What makes two runs the same run (:class:`explorer.bench.view.PartialRun`)."""
    return (config, tuple(names), warmup, iters)


def run_in_status(config: DecodeConfig, names: list[str], warmup: int, iters: int) -> None:
    """The Decode benchmark's Run button: time ``names`` in a status box that
    follows each timed call and each result, then keep the run as the session's
    last and in its history (:data:`LAST`, :data:`HISTORY`); a refusal or failure
    is an error in the box, and keeps nothing."""
    key = run_key(config, names, warmup, iters)
    partial = st.session_state.get(PARTIAL)
    if partial is None or partial.key != key:
        partial = st.session_state[PARTIAL] = view.PartialRun(key)
    with st.status("Running the benchmark…", expanded=True) as status:
        bar = st.progress(0.0, text="preparing inputs")
        how = "interleaved rounds" if config.device.startswith("cuda") else "one implementation after another"

        def on_result(r: BenchResult, reused: bool) -> None:
            note = " (measured by the run your click replaced)" if reused else ""
            st.write(f"{'✓' if r.passed else '✗'} **{r.label}**: median {format_duration(r.median_ms)} over "
                     f"{count(len(r.samples_ms), 'call')}{note}")

        quantization = []  # filled for an fp8 cache
        # A run stopped by a second click raises Streamlit's StopException (not an
        # Exception): its results stay in PARTIAL for the run that replaced it.
        with QueueNote("yours starts when it ends",
                       "this run takes over when it ends and keeps what it measured") as queue:
            out = guarded(
                runner.run_benchmark_locked, config, names, warmup=warmup, iters=iters, status=status,
                on_progress=lambda done, total: bar.progress(done / total, text=f"{done:,} of {total:,} timed "
                                                                                 f"calls ({how})"),
                on_result=on_result, on_wait=queue.on_wait, on_own_wait=queue.on_own_wait,
                done=partial.results, on_quantization=quantization.append, budget_s=timing_budget(config.device),
            )
        if out is None:  # refused or failed: the error is in the box, and nothing is kept
            st.session_state.pop(PARTIAL, None)
            return
        results, copy_gbps = out
        st.session_state.pop(PARTIAL, None)
        bar.progress(1.0, text="done")
        status.update(label=f"Done: {count(len(results), 'implementation')}", state="complete", expanded=False)
    history = st.session_state.get(HISTORY, [])
    entry = view.next_entry(history, config, warmup, iters, results, copy_gbps,
                            quantization[0] if quantization else None, timing_budget(config.device))
    st.session_state[HISTORY] = view.kept(history, entry)
    st.session_state[LAST] = entry


def clear_history() -> None:
    """Forget the session's runs (the Clear history button)."""
    st.session_state.pop(HISTORY, None)
    st.session_state.pop(LAST, None)


def show_cards(cards: list[Card], parent=st) -> None:
    """The implementations' cards, side by side, bordered."""
    # Half the default gap: four cards at 1280 px (with a desktop browser's scrollbar)
    # then hold the widest value three significant digits write, "888,000 µs" (the
    # recorded GPU runs keep the page in µs while the interpreted Triton kernel takes
    # 100+ ms); the default gap cut it to "888,000 …" (tests/test_browser_benchmark.py).
    tables.show_cards(cards, border=True, gap="xsmall", parent=parent)


def show_results_tables(tables: Sequence[view.ResultsTable], keys: Sequence[str]) -> None:
    """The results tables, each under its title: every cell is text in the one
    number format, headers, tooltips and widths from ``table.columns`` (the widths
    at the page's text size, :func:`ui.tables.column_px`; an HTML table in
    presentation mode, :func:`ui.tables.show_table`)."""
    for table, key in zip(tables, keys):
        st.markdown(f"**{table.title}**")
        show_table(
            pd.DataFrame(table.rows, columns=[c.key for c in table.columns]), key=key,
            column_config={c.key: st.column_config.TextColumn(
                c.label, help=c.help, width=column_px(c.width), alignment="right" if c.numeric else "left")
                for c in table.columns},
        )


def show_history_table(history: list[view.RunEntry], unit: str, key: str) -> None:
    """The "Compare runs" table under its title: a row per run, each
    implementation's median in ``unit`` (the title's)."""
    labels = {r.label for h in history for r in h.results}
    st.markdown(f"**{view.history_title(unit)}**")
    show_table(pd.DataFrame(view.history_rows(history, unit)), key=key,
               column_config={label: st.column_config.TextColumn(label, alignment="right") for label in labels})
