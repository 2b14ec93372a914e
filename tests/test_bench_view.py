"""The Decode benchmark page's view models (explorer.bench.view, readouts.rank):
the ranking rule, host overhead, the cards, the results table, the run history."""

import statistics
from types import SimpleNamespace

import pytest

from explorer import limits
from explorer.bench import readouts, view
from explorer.formatting import format_duration, format_speedup
from paged_attention import DecodeConfig
from paged_attention.samples import FASTER, INDISTINGUISHABLE, SLOWER
from paged_attention.timing import percentile

LABELS = {"naive": "Naive PyTorch", "vectorized": "Optimized PyTorch", "triton": "Triton"}


def _result(name, samples, gpu=None, passed=True, host=None):
    return SimpleNamespace(
        name=name, label=LABELS[name], device="cpu" if gpu is None else "cuda:0", samples_ms=samples,
        median_ms=statistics.median(samples), p20_ms=percentile(samples, 0.2), p80_ms=percentile(samples, 0.8),
        gpu_time_ms=gpu, gpu_p20_ms=gpu, gpu_p80_ms=gpu, host_ms=host, gbps=1.0, gpu_gbps=None if gpu is None else 2.0,
        max_abs_err=2.4e-4, max_rel_err=0.1, max_tol_ratio=0.0812, atol=0.016, rtol=0.016, passed=passed,
        bytes_moved=1000,
    )


#: Five runs of three timed calls on a busy 2-core host (synthetic, shaped like the
#: laptop's in issue 23): the medians rank Optimized PyTorch faster, faster, slower.
NOISY = [
    ([125.0, 131.0, 160.0], [52.0, 55.0, 140.0]),
    ([120.0, 128.0, 150.0], [58.0, 60.0, 135.0]),
    ([118.0, 119.0, 140.0], [105.0, 130.0, 150.0]),
    ([122.0, 126.0, 180.0], [60.0, 62.0, 130.0]),
    ([119.0, 124.0, 131.0], [110.0, 121.0, 170.0]),
]


def test_overlapping_ranges_are_indistinguishable_whatever_the_medians_say():
    verdicts = [readouts.rank([_result("naive", naive), _result("vectorized", opt)])[1].verdict for naive, opt in NOISY]
    medians = [statistics.median(opt) < statistics.median(naive) for naive, opt in NOISY]
    assert medians == [True, True, False, True, True]  # the medians alone flip the ranking
    # so the page ranks them the same way in 5 of 5 runs, or calls them indistinguishable
    assert len({v for v in verdicts if v != INDISTINGUISHABLE}) <= 1
    assert INDISTINGUISHABLE in verdicts
    assert all(v != SLOWER for v in verdicts)
    # and it never words a speedup it cannot back
    for (naive, opt), verdict in zip(NOISY, verdicts):
        ranks = readouts.rank([_result("naive", naive), _result("vectorized", opt)])
        words = view.rank_words(ranks[1].verdict, ranks[1].speedup)
        assert ("faster" in words) == (verdict == FASTER) and "slower" not in words


@pytest.mark.parametrize("a, b, verdict", [
    ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], "faster"),
    ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], "slower"),
    ([1.0, 2.0, 5.0], [4.0, 5.0, 6.0], "faster"),  # a's p80 (3.8) under b's p20 (4.4), though a's max is not
    ([1.0, 2.0, 9.0], [4.0, 5.0, 6.0], "indistinguishable"),  # a's p80 (6.2) past b's p20
    ([3.0, 3.0, 3.0], [3.0, 3.0, 3.0], "indistinguishable"),  # equal ranges touch
])
def test_rank_compares_the_p20_p80_ranges(a, b, verdict):
    ra, rb = _result("triton", a), _result("naive", b)
    if verdict == "indistinguishable":
        assert not (ra.p80_ms < rb.p20_ms or rb.p80_ms < ra.p20_ms)
    assert readouts.rank([rb, ra])[1].verdict == verdict


def test_rank_gives_the_speedup_and_its_range_which_straddles_one_exactly_when_indistinguishable():
    naive, opt, triton = _result("naive", [10.0, 12.0, 14.0]), _result("vectorized", [9.0, 11.0, 13.0]), \
        _result("triton", [2.0, 2.1, 2.2])
    ranks = readouts.rank([naive, opt, triton])
    assert [k.verdict for k in ranks] == ["baseline", "indistinguishable", "faster"]
    assert ranks[1].speedup == pytest.approx(12 / 11)
    assert (ranks[1].low, ranks[1].high) == pytest.approx((naive.p20_ms / opt.p80_ms, naive.p80_ms / opt.p20_ms))
    assert ranks[1].low < 1 < ranks[1].high and 1 < ranks[2].low
    assert [k.verdict for k in readouts.rank([opt, triton])] == [None, None]  # no baseline, no verdict


def test_host_overhead_is_call_latency_minus_gpu_time_and_none_without_one():
    assert readouts.host_overhead_ms(_result("triton", [0.07, 0.0708, 0.072], gpu=0.0046)) == pytest.approx(0.0662)
    assert readouts.host_overhead_ms(_result("triton", [0.01], gpu=0.012)) == 0.0  # noise, not a negative cost
    assert readouts.host_overhead_ms(_result("naive", [10.0])) is None  # the CPU: no GPU time to subtract


def test_cards_say_indistinguishable_and_agree_with_the_table():
    results = [_result("naive", [10.0, 12.0, 14.0]), _result("vectorized", [9.0, 11.0, 13.0]),
               _result("triton", [382.5, 382.5, 400.0])]
    cards = view.cards(results, "ms")
    assert [(c.delta, c.color, c.arrow) for c in cards] == [
        ("baseline", "off", "off"), ("indistinguishable", "off", "off"),
        (f"{format_speedup(382.5 / 12)} slower", "inverse", "down")]
    assert cards[2].value == "382 ms" and "INCORRECT" not in cards[2].help
    rows = readouts.results_rows(results)
    times, checks = view.results_tables(rows, "ms")
    cells = {c.key: [row[c.key] for row in t.rows] for t in (times, checks) for c in t.columns}
    assert [c.value for c in cards] == [f"{v} ms" for v in cells["median_ms"]]  # "382 ms" over "382"
    assert times.title == "Time per call (ms)"
    assert cells["speedup_vs_naive"] == ["baseline", "indistinguishable", cards[2].delta]
    assert cells["atol"] == ["0.0160"] * 3 and cells["max_tol_ratio"] == ["0.0812"] * 3
    # no GPU column on the CPU, nor a host overhead column: there is no GPU time
    assert not {"gpu_time_ms", "host_overhead_ms", "pct_of_copy_bw"} & set(cells)
    assert [c.key for c in times.columns][:2] == ["implementation", "median_ms"]
    assert [c.key for c in checks.columns][:2] == ["implementation", "correct"]
    faster = view.cards([_result("naive", [10.0]), _result("vectorized", [2.0])], "ms")[1]
    assert (faster.delta, faster.color, faster.arrow) == (f"{format_speedup(5.0)} faster", "normal", "up")
    assert [c.delta for c in view.cards(results, "ms", reads_kv=False)] == [None] * 3


def test_results_table_on_a_gpu_shows_host_overhead_in_the_pages_unit():
    results = [_result("naive", [1.0, 1.1, 1.2]), _result("triton", [0.07, 0.0708, 0.072], gpu=0.0046, host=0.041)]
    rows = readouts.results_rows(results, copy_gbps=4000.0)
    table, checks = view.results_tables(rows, "µs")
    labels = {c.key: c.label for c in table.columns}
    assert [c.key for c in table.columns] == ["implementation", "median_ms", "p20_ms", "p80_ms", "gpu_time_ms",
                                              "host_overhead_ms", "host_ms", "speedup_vs_naive"]
    assert table.title == "Time per call (µs)"  # the unit of every time in the table
    assert (labels["host_overhead_ms"], labels["host_ms"]) == ("Host overhead", "Host time/call")
    assert [row["host_overhead_ms"] for row in table.rows] == ["n/a", "66.2"]
    assert [row["host_ms"] for row in table.rows] == ["n/a", "41.0"]  # back to back, measured by the harness
    assert [row["gpu_time_ms"] for row in table.rows] == ["n/a", "4.60"]
    # the bandwidth the fraction of the copy bandwidth is of: from GPU time where measured
    assert [row["achieved_gbps"] for row in checks.rows] == ["1.00", "2.00"]
    assert [row["pct_of_copy_bw"] for row in checks.rows] == ["0.0250%", "0.0500%"]
    summary = view.overhead_summary(results, "µs")
    assert "Triton" in summary and format_duration(0.0662, "µs") in summary and "93.5%" in summary
    assert view.overhead_summary(results[:1], "µs") is None


def test_an_empty_batch_table_says_n_a_for_bandwidth_and_speedup():
    results = [_result("naive", [0.1]), _result("triton", [0.05])]
    rows = readouts.results_rows(results, reads_kv=False)
    times, checks = view.results_tables(rows, "ms", reads_kv=False)
    assert [row["speedup_vs_naive"] for row in times.rows] == ["n/a", "n/a"]
    assert [row["achieved_gbps"] for row in checks.rows] == ["n/a", "n/a"]


def test_each_results_table_fits_a_1280_px_page_with_every_column_a_gpu_run_has():
    """Issue 27: the one results table of a run cut its "Max abs err" column at 1280 px
    on the CPU, and a GPU run's five more columns ran further past. Each table fits
    the page's main column, a GPU run's with a shared prefix too (the browser test
    checks that each column holds its text: tests/test_browser_app.py)."""
    results = [_result("naive", [1.0, 1.1, 1.2]), _result("triton", [0.07, 0.0708, 0.072], gpu=0.0046, host=0.041)]
    for r in results:
        r.unique_bytes, r.unique_gbps, r.gpu_unique_gbps = 600, 0.6, None if r.gpu_time_ms is None else 1.2
    rows = readouts.results_rows(results, copy_gbps=4000.0)
    tables = view.results_tables(rows, "µs")
    shown = {c.key for t in tables for c in t.columns}
    assert shown == (set(view.TIME_COLUMNS) | set(view.CHECK_COLUMNS)) - {"per_token_ms"}  # every column this run has
    assert next(c.label for c in tables[1].columns if c.key == "achieved_gbps") == "GB/s (unique)"
    assert [row["achieved_gbps"] for row in tables[1].rows] == ["0.600", "1.20"]
    drafts = DecodeConfig(batch_size=2, context_lens=(20, 30), query_lens=(2, 4))
    with_tokens = view.results_tables(readouts.results_rows(results, copy_gbps=4000.0, config=drafts), "µs")
    assert {c.key for t in with_tokens for c in t.columns} == shown - set(view.NOT_WITH_PER_TOKEN) | {"per_token_ms"}
    for table in (*tables, *with_tokens):
        assert all(c.width for c in table.columns)
        assert sum(c.width for c in table.columns) <= view.TABLE_WIDTH_PX, table.title


def test_history_entries_are_numbered_named_by_their_change_and_capped():
    config = DecodeConfig(batch_size=2, context_lens=37)
    results = [_result("naive", [10.0]), _result("triton", [2.0], passed=False)]
    first = view.next_entry([], config, 1, 3, results, None)
    assert (first.run, first.change, first.reads_kv) == (1, "first run", True)
    again = view.next_entry([first], config, 1, 5, results, None)
    assert (again.run, again.change) == (2, "timed calls 3→5")
    assert view.next_entry([again], config, 0, 5, results, None).change == "warm-up 1→0"
    assert view.next_entry([again], config.with_(seed=1), 1, 5, results, None).change == "seed 0→1"
    history = []
    for _ in range(limits.MAX_HISTORY + 3):
        history = view.kept(history, view.next_entry(history, config, 1, 3, results, None))
    assert len(history) == limits.MAX_HISTORY and history[-1].run == limits.MAX_HISTORY + 3
    rows = view.history_rows([first], "ms")
    assert rows == [{"run": 1, "change": "first run", "all correct": "NO", "Naive PyTorch": "10.0",
                     "Triton": "2.00"}]
    assert view.history_title("ms") == "Median call latency per run (ms)"


def test_a_stopped_run_says_what_to_do_next():
    key = (DecodeConfig(), ("naive", "triton"), 1, 3)
    partial = view.PartialRun(key, [object()])
    assert "1 of 2 implementations measured" in view.stopped_note(partial, key)
    assert "finish it" in view.stopped_note(partial, key)
    assert "settings have changed" in view.stopped_note(partial, (DecodeConfig(seed=1), *key[1:]))
    assert "run it again" in view.stopped_note(view.PartialRun(key), key)


def test_the_csv_download_is_the_one_result_schema_with_the_pages_columns_after_it(tmp_path):
    from paged_attention.result_files import read_results
    from paged_attention.results import RESULT_COLUMNS

    config = DecodeConfig(batch_size=2, context_lens=37)
    results = [_result("naive", [10.0, 11.0, 12.0]), _result("triton", [2.0, 2.1, 2.2], gpu=0.5, host=0.04)]
    for r in results:
        r.unique_bytes, r.unique_gbps, r.gpu_unique_gbps = r.bytes_moved, r.gbps, r.gpu_gbps
    entry = view.next_entry([], config, 1, 3, results, 4000.0)
    header, *lines = view.results_csv(entry).splitlines()
    columns = header.split(",")
    assert columns[:2] == ["run", "config"] and tuple(columns[2:2 + len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert columns[2 + len(RESULT_COLUMNS):] == ["speedup_vs_naive", "vs_naive", "host_overhead_ms", "max_tol_ratio"]
    path = tmp_path / "run1.csv"
    path.write_text(view.results_csv(entry))
    rows, _ = read_results(path)
    assert [row["implementation"] for row in rows] == ["naive", "triton"]
    assert rows[1]["host_us"] == pytest.approx(40.0) and rows[1]["iters"] == 3
    fp8 = view.results_csv(view.next_entry([], config, 1, 3, results, None,
                                           SimpleNamespace(max_abs_err=0.022)))
    header, line = fp8.splitlines()[:2]
    assert header.endswith(",fp8_quantization_error") and line.endswith(",0.022")


def test_time_per_token_is_the_steps_over_its_query_tokens():
    """Draft tokens (issue 25), by hand: 3 sequences with 1, 4 and 5 new tokens make
    10 query tokens a step, so a 12 ms step costs 1.2 ms a token, on the cards, in the
    table (after the median, now named per step) and nowhere for one token a sequence."""
    config = DecodeConfig(batch_size=3, context_lens=(20, 30, 40), query_lens=(1, 4, 5))
    results = [_result("naive", [10.0, 12.0, 14.0]), _result("triton", [0.3, 0.35, 0.4])]
    assert readouts.per_token_ms(12.0, config) == pytest.approx(1.2)
    cards = view.token_cards(results, "ms", config)
    assert [(c.label, c.value, c.delta) for c in cards] == [
        ("Naive PyTorch, per token", "1.20 ms", "÷ 10 query tokens"), ("Triton, per token", "0.0350 ms", "÷ 10 query tokens")]
    assert "12.0 ms" in cards[0].help and (cards[0].color, cards[0].arrow) == ("off", "off")
    table, _ = view.results_tables(readouts.results_rows(results, config=config), "ms")
    assert [c.key for c in table.columns][:3] == ["implementation", "median_ms", "per_token_ms"]
    assert "host_ms" not in {c.key for c in table.columns}  # its place, so the table still fits
    assert [row["per_token_ms"] for row in table.rows] == ["1.20", "0.0350"]
    assert [row["median_ms"] for row in table.rows] == ["12.0", "0.350"]
    labels = {c.key: c.label for c in table.columns}
    assert (labels["median_ms"], labels["per_token_ms"]) == ("Median per step", "Per token")
    assert table.title == "Time per call (ms)"
    one = DecodeConfig(batch_size=3, context_lens=(20, 30, 40))
    assert view.token_cards(results, "ms", one) == []
    plain, _ = view.results_tables(readouts.results_rows(results, config=one), "ms")
    assert "per_token_ms" not in {c.key for c in plain.columns}
    assert {c.key: c.label for c in plain.columns}["median_ms"] == "Median"


def test_significant_docstring_examples_run_and_hold():
    """Issue 27 (round 4): ``significant``'s docstring said ``0.016 -> "0.016"`` and
    ``1e-05 -> "1e-05"``, not what it writes ("0.0160", "0.0000100"). Its examples are
    doctests now, run here, so a wrong one fails."""
    import doctest

    from explorer.bench import view

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in finder.find(view.significant, "significant", globs={"significant": view.significant})
             if t.examples]
    assert tests and sum(len(t.examples) for t in tests) >= 2
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    # the prose's examples are the doctest's values
    doc = view.significant.__doc__
    for value, text in ((0.016, "0.0160"), (1e-05, "0.0000100"), (0.000244, "0.000244")):
        assert view.significant(value) == text and f'"{text}"' in doc
