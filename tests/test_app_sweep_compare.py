"""AppTest suite for the Sweep page's comparisons: an uploaded CSV beside this
session's sweep (and the errors of a bad one), a 16-bit cache against an fp8 one,
and the points table they fill (helpers: ``test_app_sweep``)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import TINY, arr, assert_clean, chart, open_app  # noqa: E402
from test_app_sweep import SWEEP, live_charts, run_sweep, sweep_grid, traces, upload  # noqa: E402

import ui.sweep as sweep_ui  # noqa: E402
from explorer.sweep import runs, view  # noqa: E402
from helpers import job_rows  # noqa: E402


def test_uploaded_csv_is_compared_side_by_side():
    other = runs.rows_frame(job_rows(values=(16, 32), copy=4000.0), "h200")
    other["device_name"] = "NVIDIA H200"
    at = upload(open_app(TINY, page=SWEEP), "h200.csv", runs.sweep_csv(other).encode())
    assert_clean(at)
    bandwidth = chart(at, "sw_bandwidth_chart")  # the upload alone: its ceiling is drawn
    assert [s["y0"] for s in bandwidth["layout"]["shapes"]] == [4000.0]
    (up,) = traces(chart(at, "sw_latency_chart"), implementation="triton", kind="timed")
    assert up["meta"]["source"] == "uploaded: h200.csv"

    at = sweep_grid(at, 16, 32, 2)
    at = run_sweep(at)
    assert_clean(at)
    mine, theirs = traces(chart(at, "sw_latency_chart"), implementation="triton", kind="timed")
    assert (mine["meta"]["source"], theirs["meta"]["source"]) == ("this session", "uploaded: h200.csv")
    assert (mine["line"]["dash"], theirs["line"]["dash"]) == ("solid", "dash")
    ratio = chart(at, "sw_ratio_chart")
    (triton,) = [t for t in ratio["data"] if (t.get("meta") or {}).get("implementation") == "triton"]
    mine_ms = at.session_state[sweep_ui.JOB].frame().query("implementation == 'triton'")["median_ms"].to_numpy()
    np.testing.assert_allclose(arr(triton["y"]), 0.1 / mine_ms)
    sources = set(at.dataframe[0].value["source"])
    assert sources == {"this session", "upload"}  # the upload's name is in its caption and the charts


@pytest.mark.parametrize("data, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8"),
    (b"implementation,median_ms\ntriton,1\n", "lacks the columns"),
    (b"axis,value,implementation,status,median_ms\ncontext_len,16,warp_magic,ok,1\n", "Unknown implementation"),
])
def test_bad_upload_is_an_error_not_a_traceback(data, message):
    at = upload(open_app(TINY, page=SWEEP), "bad.csv", data)
    assert not at.exception
    assert any("Cannot compare with `bad.csv`" in e.value and message in e.value for e in at.error)
    assert not live_charts(at)


def test_uploaded_names_are_shown_as_typed_not_as_markdown():
    frame = runs.rows_frame(job_rows(values=(16, 32)), "x")
    frame["device_name"] = ":red[RED] **GPU**"
    at = upload(open_app(TINY, page=SWEEP), "$x$.csv", runs.sweep_csv(frame).encode())
    assert_clean(at)
    (caption,) = [c.value for c in at.caption if "from" in c.value and "row" in c.value]
    assert caption.startswith(f"`$x$.csv`: {len(frame)} rows from `:red[RED] **GPU**`;"), caption


def test_upload_of_another_axis_is_not_overlaid():
    other = runs.rows_frame(job_rows(values=(16, 32)), "x")
    other["axis"] = "batch_size"
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2)
    at = run_sweep(at)
    at = upload(at, "batch.csv", runs.sweep_csv(other).encode())
    assert_clean(at)
    assert any("varies batch size" in w.value for w in at.warning)
    assert {t["meta"]["source"] for t in chart(at, "sw_latency_chart")["data"] if t.get("meta")} == {"this session"}


def test_upload_of_this_sessions_own_sweep_says_the_ratio_is_one_by_construction():
    sweep_ui.measure.clear()
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=120), 16, 32, 2, budget=0.0)
    at = run_sweep(at)
    own = runs.sweep_csv(at.session_state[sweep_ui.JOB].frame()).encode()
    at = upload(at, "mine.csv", own)
    assert_clean(at)
    (note,) = [w.value for w in at.warning if "by construction" in w.value]
    assert note.startswith("4 timings of the upload are this session's own measurements")
    older = pd.read_csv(io.BytesIO(own)).drop(columns=["measured_at", "cached"]).to_csv(index=False)
    at = upload(at, "older.csv", older.encode())  # a CSV from before measured_at: nothing to match
    assert_clean(at)
    assert not any("by construction" in w.value for w in at.warning)
    sweep_ui.measure.clear()


def test_sweep_compares_a_float16_and_an_fp8_cache_in_one_chart():
    at = sweep_grid(open_app(TINY, page=SWEEP, timeout=180), 16, 32, 2, budget=0.0)
    at.checkbox(key="sw_compare_kv").check().run()
    assert any("each with a float16 and an fp8 e4m3 KV cache" in c.value for c in at.caption)
    at = run_sweep(at)
    assert_clean(at)
    job = at.session_state[sweep_ui.JOB]
    assert job.state == "done" and job.total == 4
    # Counted as the caption counts: points, each with both caches.
    assert [p.proto.text for p in at.get("progress")] == ["4 of 4 runs (2 points × 2 caches)"]
    table = at.dataframe[0].value
    assert list(table["kv_dtype"]) == ["float16"] * 3 + ["fp8 e4m3"] * 3 + ["float16"] * 3 + ["fp8 e4m3"] * 3
    assert (table[table["status"] == "ok"]["correct"] == "yes").all()
    frame = job.frame()
    fp8 = frame[frame["kv_dtype"] == "float8_e4m3fn"]["bytes_moved"].to_numpy()
    half = frame[frame["kv_dtype"] == "float16"]["bytes_moved"].to_numpy()
    assert (fp8 < half).all()  # one byte per K and V value
    assert "kv_dtype" in runs.sweep_csv(frame).splitlines()[0].split(",")

    for key in ("sw_latency_chart", "sw_bandwidth_chart"):
        lines = traces(chart(at, key), implementation="triton", kind="timed")
        assert [t["name"] for t in lines] == ["Triton · float16", "Triton · fp8 e4m3"]
        assert [t["line"]["dash"] for t in lines] == ["solid", "dash"]
        true_x = [arr(t["customdata"])[:, 2] if key == "sw_latency_chart" else arr(t["x"]) for t in lines]  # latency: x dodged
        assert all(x.tolist() == [16, 32] for x in true_x)
    ratio = chart(at, "sw_kv_ratio_chart")
    assert ratio["layout"]["title"]["text"] == "fp8 e4m3 cache against float16"
    assert {t["meta"]["implementation"] for t in ratio["data"] if t.get("meta")} >= {"vectorized", "triton"}

    # Its own CSV uploaded back: the time ratio compares the first cache only, and says so.
    at = upload(at, "sweep_context_len.csv", runs.sweep_csv(frame).encode())
    assert_clean(at)
    ratio = chart(at, "sw_ratio_chart")
    assert ratio["layout"]["title"]["text"].replace("<br>", " ") == "Time ratio between the two sweeps: float16 cache only"
    assert any("Only the points with a float16 cache are compared" in c.value for c in at.caption)


def test_cache_comparison_words_the_byte_ratio_from_the_two_element_sizes():
    at = open_app({**TINY, "dtype": "float32"}, page=SWEEP)
    help_text = at.checkbox(key="sw_compare_kv").help
    assert "a quarter of the bytes" in help_text and "half the bytes" not in help_text  # fp8 is 1 byte of float32's 4
    base = runs.rows_frame(job_rows(values=(16, 32), skip_from=1000), "x").assign(dtype="float32")
    both = pd.concat([base.assign(kv_dtype="float32"), base.assign(kv_dtype="float8_e5m2")], ignore_index=True)
    at = upload(at, "f32.csv", runs.sweep_csv(both).encode())
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "KV cache over its time" in c.value]
    assert "a quarter of the bytes can approach 0.25" in note and "0.5" not in note
    assert "half the bytes can approach 0.5" in next(  # float16: half
        c.value for c in upload(open_app(TINY, page=SWEEP), "f16.csv", runs.sweep_csv(
            pd.concat([base.assign(dtype="float16", kv_dtype="float16"),
                       base.assign(dtype="float16", kv_dtype="float8_e5m2")], ignore_index=True)).encode()).caption
        if "KV cache over its time" in c.value)
    assert "half the bytes" in open_app(TINY, page=SWEEP).checkbox(key="sw_compare_kv").help


def test_points_table_is_narrow_enough_for_1280_px():
    base = runs.rows_frame(job_rows(values=(16, 32), skip_from=1000), "x")
    both = pd.concat([base.assign(kv_dtype="float16"), base.assign(kv_dtype="float8_e5m2")], ignore_index=True)
    at = upload(open_app(TINY, page=SWEEP), "sweep_context_len.csv", runs.sweep_csv(both).encode())
    assert_clean(at)
    table = at.dataframe[0].value
    # p20 and p80 are the latency chart's bars (and in the CSV); the upload is "upload"
    assert list(table.columns) == ["source", "value", "label", "kv_dtype", "status", "correct", "median_ms", "gbps",
                                   "max_abs_err"]
    assert set(table["source"]) == {"upload"} and set(table["kv_dtype"]) == {"float16", "fp8 e5m2"}
    # every number as the one format writes it: three significant figures
    assert set(table["median_ms"]) == {"0.160", "0.500", "0.100", "0.320"}
    value = json.loads(at.dataframe[0].proto.columns)["value"]
    assert (value["label"], value["help"]) == ("context length", "context length (tokens)")  # header, tooltip
    assert value["width"] >= view.header_px("context length")  # wide enough not to cut it


