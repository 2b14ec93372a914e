"""Parameter sweeps, without Streamlit: grids, CPU caps, the naive time budget,
the sweep job and its CSV."""

import math

import numpy as np
import pytest

from explorer import limits
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from explorer.sweep import view
from helpers import SWEEP_BASE as BASE
from helpers import fake_result, job_rows
from paged_attention import DecodeConfig

# -- grid --------------------------------------------------------------------------

@pytest.mark.parametrize("axis, low, high, points, spacing, expected", [
    ("context_len", 128, 32768, 9, "log", (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)),
    ("context_len", 100, 100, 5, "log", (100,)),
    ("batch_size", 1, 100, 5, "linear", (1, 26, 50, 75, 100)),
    ("head_dim", 32, 256, 4, "log", (32, 64, 128, 256)),
    ("head_dim", 30, 33, 12, "linear", (30, 31, 32, 33)),  # rounding removes repeats
    ("block_size", 1, 256, 9, "linear", (1, 2, 4, 8, 16, 32, 64, 128, 256)),  # powers of two whatever the spacing
    ("block_size", 3, 40, 12, "log", (4, 8, 16, 32)),
    ("block_size", 1, 256, 3, "log", (1, 16, 256)),
])
def test_sweep_values(axis, low, high, points, spacing, expected):
    assert sweep_grid.sweep_values(axis, low, high, points, spacing=spacing) == expected


def test_kv_head_grid_is_divisors_of_the_query_heads():
    assert sweep_grid.sweep_values("num_kv_heads", 1, 32, 12, num_heads=32) == (1, 2, 4, 8, 16, 32)
    assert sweep_grid.sweep_values("num_kv_heads", 2, 12, 12, num_heads=12) == (2, 3, 4, 6, 12)
    assert sweep_grid.sweep_values("num_kv_heads", 1, 64, 3, num_heads=64) == (1, 8, 64)


@pytest.mark.parametrize("args, kw, match", [
    (("depth", 1, 2, 2), {}, "axis must be one of"),
    (("context_len", 300, 200, 3), {}, "low <= high"),
    (("context_len", 0, 200, 3), {}, "between 1"),
    (("head_dim", 16, 1024, 3), {}, "between 1 and 512"),
    (("context_len", 16, 256, 0), {}, "points must be between"),
    (("context_len", 16, 256, 13), {}, "points must be between"),
    (("context_len", 16, 256, 3), {"spacing": "cubic"}, "spacing"),
    (("block_size", 5, 7, 3), {}, "no power of two"),
    (("num_kv_heads", 2, 6, 3), {"num_heads": 7}, "no divisor"),
    (("num_kv_heads", 1, 6, 3), {}, "needs num_heads"),
    (("context_len", 1.5, 6, 3), {}, "integer"),
])
def test_sweep_values_rejects(args, kw, match):
    with pytest.raises(ValueError, match=match):
        sweep_grid.sweep_values(*args, **kw)


def test_default_ranges_give_valid_grids():
    for cpu in (True, False):
        for axis in sweep_grid.AXES:
            low, high = sweep_grid.default_range(axis, BASE, cpu)
            points = sweep_grid.default_points(axis, low, high, cpu)
            assert 1 <= points <= (sweep_grid.CPU_MAX_POINTS if cpu else limits.MAX_POINTS)
            assert sweep_grid.sweep_values(axis, low, high, points, num_heads=BASE.num_heads)
    assert sweep_grid.default_points("context_len", 128, 32768, cpu=False) == 9


def test_point_config_per_axis():
    ragged = BASE.with_(batch_size=3, context_lens=(5, 40, 16), spare_blocks=4)
    assert sweep_grid.point_config(ragged, "context_len", 100).lengths == (100, 100, 100)
    grown = sweep_grid.point_config(ragged, "batch_size", 7)
    assert grown.lengths == (5, 40, 16, 5, 40, 16, 5)  # the ragged pattern repeats
    assert grown.spare_blocks == math.ceil(grown.num_blocks_used * 4 / ragged.num_blocks_used)
    assert sweep_grid.point_config(BASE, "batch_size", 5).lengths == (37,) * 5
    assert sweep_grid.point_config(BASE, "block_size", 64).block_size == 64
    assert sweep_grid.point_config(BASE, "head_dim", 80).head_dim == 80
    assert sweep_grid.point_config(BASE, "num_kv_heads", 4).num_kv_heads == 4
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        sweep_grid.point_config(BASE, "num_kv_heads", 3)


def test_cpu_caps_drop_thin_and_cap_iterations():
    base = BASE.with_(batch_size=4, num_kv_heads=2)  # 8 x context <= 8192: contexts up to 1024 fit
    values = sweep_grid.sweep_values("context_len", 16, 16384, 11)
    grid = sweep_grid.cap_grid(base, "context_len", values, warmup=10, iters=50)
    assert max(grid.values) <= limits.CPU_MAX_WORK // 8
    assert len(grid.values) <= sweep_grid.CPU_MAX_POINTS and grid.values[0] == 16
    assert (grid.warmup, grid.iters) == (limits.CPU_MAX_WARMUP, limits.CPU_MAX_ITERS)
    notes = " ".join(grid.notes)
    assert "points dropped" in notes and "thinned" in notes and "capped from 50" in notes
    small = sweep_grid.cap_grid(base, "context_len", (16, 32), warmup=0, iters=2)
    assert small.values == (16, 32) and small.notes == ()


# -- the job and its CSV -----------------------------------------------------------------

def test_job_runs_point_by_point_and_cancel_ends_it_at_once():
    job = sweep_runs.SweepJob(BASE, "context_len", (16, 32, 64), ("naive", "vectorized", "triton"), 0, 2, 1.0, "test")
    assert job.running and job.calls == 3 and job.config_at(1).lengths == (32, 32)
    rows = job_rows()
    assert job.record(rows[:3])
    job.cancel()
    assert job.state == "cancelled" and job.message == "Cancelled after 1 of 3 points."
    assert not job.record(rows[3:6])  # the point in flight when Cancel was pressed is dropped
    assert (job.state, job.next_index, len(job.rows)) == ("cancelled", 1, 3)
    assert job.message == "Cancelled after 1 of 3 points."
    frame = job.frame()
    assert list(frame.columns) == list(sweep_runs.SWEEP_COLUMNS) and len(frame) == 3
    job.fail("too late")  # a failure after Cancel changes nothing
    assert job.state == "cancelled"
    done = sweep_runs.SweepJob(BASE, "context_len", (16,), ("triton",), 0, 2, 1.0, "test")
    assert view.progress(job).message == "Cancelled after 1 of 3 points. The points done are kept below."
    assert not view.cancelled_before_any(job)
    assert done.record(rows[2:3])
    assert done.state == "done"
    done.cancel()
    assert done.state == "done"  # cancelling a finished sweep changes nothing
    with pytest.raises(RuntimeError, match="done"):
        done.record(rows[:3])
    with pytest.raises(ValueError, match="at least one point"):
        sweep_runs.SweepJob(BASE, "context_len", (), ("triton",), 0, 2, 1.0, "test")


def test_cancel_before_the_first_point_says_so_and_not_that_points_are_kept():
    """Issue 27: "Cancelled after 0 of 4 points. The points done are kept below." with
    nothing below."""
    job = sweep_runs.SweepJob(BASE, "context_len", (16, 32, 64, 100), ("triton",), 0, 2, 1.0, "test")
    assert not view.cancelled_before_any(job)  # running
    job.cancel()
    assert job.message == "Cancelled before the first point finished."
    assert view.progress(job).message == ("Cancelled before the first point finished. Press **Run sweep** to "
                                          "start again, or upload a saved sweep below.")
    assert view.progress(job).text == "0 of 4 points" and view.cancelled_before_any(job)
    assert not view.cancelled_before_any(None)


def test_job_keeps_the_rows_of_a_failed_point_and_says_when_it_waited():
    job = sweep_runs.SweepJob(BASE, "context_len", (16, 32), ("triton",), 0, 2, 1.0, "test")
    job.set_waiting("other")
    assert (job.waiting, job.waited) == ("other", "other")
    job.set_waiting(None)
    assert (job.waiting, job.waited) == (None, "other")
    job.fail("out of memory", job_rows()[2:3])
    assert (job.state, job.message, len(job.rows), job.next_index) == ("failed", "out of memory", 1, 0)
    assert not job.wait(0)
    job.finish()
    assert job.wait(0)


def test_csv_round_trip():
    frame = sweep_runs.rows_frame(job_rows(copy=4000.0), "this session")
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(frame).encode(), "uploaded: x.csv")
    assert list(back.columns) == list(sweep_runs.SWEEP_COLUMNS)
    assert (back["source"] == "uploaded: x.csv").all()
    for col in ("value", "median_ms", "gbps", "gpu_gbps", "copy_gbps", "predicted_ms", "pct_of_copy_bw"):
        np.testing.assert_allclose(back[col].to_numpy(float), frame[col].to_numpy(float), equal_nan=True)
    assert list(back["status"]) == list(frame["status"]) and "skipped" in set(back["status"])
    assert list(back["note"]) == list(frame["note"])


def test_minimal_csv_is_accepted():
    text = "axis,value,implementation,status,median_ms\ncontext_len,16,triton,ok,0.1\ncontext_len,32,naive,skipped,\n"
    frame = sweep_runs.read_sweep_csv(text, "up")
    assert list(frame["label"]) == ["Triton", "Naive PyTorch"] and frame["gbps"].isna().all()
    assert list(frame["measured_at"]) == ["", ""] and list(frame["cached"]) == ["", ""]  # a CSV from before them
    assert sweep_runs.cache_note(frame) is None


def test_cache_note_counts_points_and_says_when_they_were_measured():
    frame = sweep_runs.rows_frame(job_rows(values=(16, 32, 64)), "this session")
    assert sweep_runs.cache_note(frame) is None
    frame["measured_at"] = "2026-12-01T06:12:40Z"
    frame.loc[frame["value"] == 64, "measured_at"] = "2026-12-01T06:30:02Z"
    frame.loc[frame["value"] == 16, "cached"] = "yes"
    assert sweep_runs.cache_note(frame) == ("1 of 3 points reused from this server's cache, measured at 06:12 UTC, not "
                                       "timed again for this sweep; **Clear cache** to re-time them.")
    frame.loc[frame["value"] == 64, "cached"] = "yes"
    assert sweep_runs.cache_note(frame).startswith("2 of 3 points reused from this server's cache, measured between "
                                              "06:12 and 06:30 UTC")
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(frame).encode(), "up")
    assert list(back["cached"]) == list(frame["cached"].fillna("")) and list(back["measured_at"]) == list(
        frame["measured_at"])


GOOD = "axis,value,implementation,status,median_ms\ncontext_len,16,triton,ok,0.1\n"


@pytest.mark.parametrize("data, match", [
    (b"", "empty"),
    (b"\xff\xfe\x00garbage\x00", "not UTF-8"),
    (b"x" * (limits.MAX_CSV_BYTES + 1), "MB"),
    ('a,b\n1,"unterminated\n', "not a readable CSV|lacks"),
    ("value,implementation\n1,triton\n", "lacks the columns axis, status, median_ms"),
    ("axis,value,implementation,status,median_ms\n", "no rows"),
    (GOOD + "batch_size,16,triton,ok,0.1\n", "varies one axis"),
    (GOOD.replace("context_len", "depth"), "unknown axis"),
    (GOOD.replace(",16,", ",-3,"), "positive integer"),
    (GOOD.replace(",16,", ",abc,"), "positive integer"),
    (GOOD.replace(",16,", ",inf,"), "positive integer.*; found inf$"),
    (GOOD.replace(",16,", ",1e300,"), "positive integer of at most 1,048,576 .*; found 1e\\+300$"),
    (GOOD.replace(",16,", ",2.5,"), "positive integer.*; found 2.5$"),
    (GOOD.replace(",16,", ",1048577,"), "found 1,048,577$"),
    (GOOD.replace(",16,", ",,"), "found an empty cell$"),
    (GOOD.replace("triton", ""), "unknown implementation an empty cell"),
    (GOOD.replace("0.1", "inf"), "positive, finite median_ms"),
    (GOOD.replace("triton", "cuda_magic"), "unknown implementation"),
    (GOOD.replace(",ok,", ",maybe,"), "unknown status"),
    (GOOD.replace("0.1", ""), "positive, finite median_ms"),
])
def test_bad_csv_is_a_clear_error(data, match):
    with pytest.raises(ValueError, match=match):
        sweep_runs.read_sweep_csv(data, "up")


def test_inf_in_an_optional_column_reads_as_missing():
    frame = sweep_runs.read_sweep_csv(GOOD.replace("median_ms\n", "median_ms,gbps\n").replace("0.1\n", "0.1,inf\n"), "up")
    assert frame["gbps"].isna().all() and frame["value"].tolist() == [16]


def test_too_many_rows():
    text = "axis,value,implementation,status,median_ms\n" + "context_len,16,triton,ok,0.1\n" * (limits.MAX_CSV_ROWS + 1)
    with pytest.raises(ValueError, match="at most"):
        sweep_runs.read_sweep_csv(text, "up")


# -- the CPU cap -----------------------------------------------------------------------

def test_cpu_grid_with_no_point_quotes_the_rule_of_cpu_work():
    base = DecodeConfig(batch_size=5, context_lens=64)  # 32 query heads: 5 x 32 x 64 = 10,240 at any context
    values = sweep_grid.sweep_values("context_len", 16, 256, 3)
    grid = sweep_grid.cap_grid(base, "context_len", values, warmup=0, iters=1)
    assert grid.values == () and grid.refusal is not None
    assert limits.CPU_WORK_RULE in grid.refusal and "5 x max(8 x 16, 32 x 64) = 10,240" in grid.refusal
    assert grid.refusal.endswith("Lower the sidebar's batch or query heads.")
    assert "batch_size x num_kv_heads x longest context" not in grid.refusal
    on_batch = sweep_grid.cap_grid(base, "batch_size", (2, 4, 8), warmup=0, iters=1)
    assert on_batch.values == (2, 4)
    assert any(limits.CPU_WORK_RULE in note for note in on_batch.notes)
    over = sweep_grid.cap_grid(base, "batch_size", (5, 8), warmup=0, iters=1)
    assert over.refusal.endswith("Lower the batch size (sequences) range, or the sidebar's query heads.")
    tokens = sweep_grid.cap_grid(base.with_(num_heads=8), "context_len", (2048, 4096), warmup=0, iters=1)
    assert tokens.refusal.endswith("Lower the context length (tokens) range, or the sidebar's batch or KV heads.")


def test_a_sweep_comparing_caches_times_each_value_with_both():
    caches = sweep_grid.compared_caches(BASE)
    assert caches == (None, "float8_e4m3fn")
    assert sweep_grid.compared_caches(BASE.with_(kv_dtype="float8_e5m2")) == (None, "float8_e5m2")
    job = sweep_runs.SweepJob(BASE, "context_len", (16, 32), ("triton",), 0, 2, 1.0, "test", caches=caches)
    assert job.total == 4
    assert [job.value_at(i) for i in range(4)] == [16, 16, 32, 32]
    assert [job.config_at(i).kv_dtype for i in range(4)] == [None, "float8_e4m3fn"] * 2
    assert job.config_at(3).lengths == (32, 32)
    assert sweep_runs.SweepJob(BASE, "context_len", (16,), ("triton",), 0, 2, 1.0, "test").total == 1


def test_sweep_rows_and_csv_carry_the_cache_dtype():
    fp8 = sweep_grid.point_config(BASE.with_(kv_dtype="float8_e4m3fn", kv_scale="per_head"), "context_len", 16)
    row = sweep_runs.status_row("naive", "skipped", fp8, "context_len", 16, note="x")
    assert (row["kv_dtype"], row["kv_scale"]) == ("float8_e4m3fn", "per_head")
    assert row["bytes_moved"] == fp8.decode_bytes() < fp8.with_(kv_dtype=None).decode_bytes()
    rows = [row, sweep_runs.status_row("naive", "skipped", fp8.with_(kv_dtype=None), "context_len", 16, note="x")]
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(sweep_runs.rows_frame(rows, "me")), "up")
    assert list(back["kv_dtype"]) == ["float8_e4m3fn", "float16"] and list(back["kv_scale"]) == ["per_head", ""]
    # a CSV from before fp8 caches: the cache had the compute dtype
    old = "axis,value,implementation,status,median_ms,dtype\ncontext_len,16,triton,ok,0.1,bfloat16\n"
    assert list(sweep_runs.read_sweep_csv(old, "up")["kv_dtype"]) == ["bfloat16"]


def test_cache_bytes_ratio_and_its_words():
    assert sweep_grid.cache_bytes_ratio([None, "float8_e4m3fn"], "float16") == 0.5
    assert sweep_grid.cache_bytes_ratio(["float32", "float8_e5m2"]) == 0.25
    assert sweep_grid.cache_bytes_ratio(["bfloat16", "float8_e5m2"]) == 0.5
    assert sweep_grid.bytes_fraction(0.5) == "half the bytes"
    assert sweep_grid.bytes_fraction(0.25) == "a quarter of the bytes"


def test_sweep_rows_and_csv_carry_the_shared_prefix():
    shared = sweep_grid.point_config(BASE.with_(batch_size=4, shared_prefix=16, prefix_groups=2), "context_len", 64)
    row = sweep_runs.status_row("triton", "skipped", shared, "context_len", 64, note="x")
    assert (row["shared_prefix"], row["prefix_groups"]) == (16, 2)
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(sweep_runs.rows_frame([row], "me")), "up")
    assert (back["shared_prefix"].iloc[0], back["prefix_groups"].iloc[0]) == (16, 2)


# -- the window axis ---------------------------------------------------------------------

def test_the_window_axis_sets_the_window_and_keeps_the_sidebars_contexts():
    long = BASE.with_(batch_size=2, context_lens=(100, 300), soft_cap=30.0, sinks=True)
    assert sweep_grid.AXIS_LIMITS["window"] == (1, limits.MAX_WINDOW)
    assert sweep_grid.sweep_values("window", 16, 512, 6) == (16, 32, 64, 128, 256, 512)
    config = sweep_grid.point_config(long, "window", 64)
    assert (config.window, config.lengths, config.soft_cap, config.sinks) == (64, (100, 300), 30.0, True)
    assert config.num_blocks_used == long.num_blocks_used  # the pool holds the whole contexts still
    # the default range runs from 16 to past the longest context, where the time goes flat
    assert sweep_grid.default_range("window", long, cpu=True) == (16, 600)
    assert sweep_grid.default_range("window", long.with_(context_lens=5), cpu=False) == (5, 10)
    with pytest.raises(ValueError, match="window"):
        sweep_grid.sweep_values("window", 0, 16, 3)


@pytest.mark.parametrize("window", [1, 16, 99, 100, 150, 300, 301, 4096])
def test_window_points_move_the_bytes_of_min_window_context(window):
    base = BASE.with_(batch_size=2, context_lens=(100, 300))
    config = sweep_grid.point_config(base, "window", window)
    per_token = 2 * base.num_kv_heads * base.head_dim * config.kv_element_size
    query_out = 2 * base.batch_size * base.num_heads * base.head_dim * config.element_size
    row = sweep_runs.status_row("triton", "skipped", config, "window", window, note="x")
    assert row["bytes_moved"] == (min(window, 100) + min(window, 300)) * per_token + query_out
    assert (row["window"], row["axis"], row["value"]) == (window, "window", window)
    # past the longest context a window reads what no window does
    if window >= 300:
        assert row["bytes_moved"] == base.decode_bytes()


def test_sweep_rows_and_csv_carry_the_attention_options():
    options = BASE.with_(window=20, soft_cap=25.0, sinks=True)
    rows = [sweep_runs.result_row(fake, sweep_grid.point_config(options, "context_len", v), "context_len", v,
                                  copy_gbps=None, device_name="test", warmup=0, iters=2)
            for v, fake in ((16, fake_result("triton", 0.1)), (64, fake_result("triton", 0.1)))]
    assert [(r["window"], r["soft_cap"], r["sinks"]) for r in rows] == [(20, 25.0, True)] * 2
    back = sweep_runs.read_sweep_csv(sweep_runs.sweep_csv(sweep_runs.rows_frame(rows, "me")), "up")
    assert list(back["window"]) == [20, 20] and list(back["soft_cap"]) == [25.0, 25.0]
    assert list(back["context_len"]) == [16, 64]
    window_csv = sweep_runs.sweep_csv(sweep_runs.rows_frame(job_rows(axis="window", values=(8, 4096)), "me"))
    assert set(sweep_runs.read_sweep_csv(window_csv, "up")["axis"]) == {"window"}


def test_the_summary_line_names_the_attention_options_but_not_the_axis():
    options = BASE.with_(window=20, soft_cap=25.0, sinks=True)
    assert view.settings_in_force(options, "context_len").endswith("window=20 soft_cap=25 sinks")
    assert view.settings_in_force(options, "window").endswith("cpu soft_cap=25 sinks")
    assert "window" in view.AXIS_NOTES
