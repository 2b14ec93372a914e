"""The one result schema (paged_attention/results.py) and its files
(paged_attention/result_files.py): the row and its bandwidth, the writer and the
reader, and every results CSV written before the schema, read into it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from paged_attention import DecodeConfig, LABELS, build_decode_inputs
from paged_attention.bench import benchmark_implementations
from paged_attention.result_files import (
    LEGACY_COLUMNS,
    read_results,
    results_csv,
    sidecar,
    versions,
    write_results,
    writer_of,
)
from paged_attention.results import (
    COLUMNS,
    RESULT_COLUMNS,
    achieved_gbps,
    context_summary,
    correct_text,
    gbps,
    pct_of_copy,
    result_row,
    status_row,
)

ROOT = Path(__file__).resolve().parents[1]
#: Every results CSV shipped or kept in docs/data, of this schema or an earlier one.
SHIPPED = sorted((ROOT / "explorer" / "bench" / "recorded_runs").rglob("*.csv"))
LEGACY = [p for p in sorted((ROOT / "docs" / "data").rglob("*.csv"))
          if writer_of(next(csv.reader(p.open()))) in LEGACY_COLUMNS]
CONFIG = DecodeConfig(batch_size=3, context_lens=(25, 40, 16), num_heads=4, num_kv_heads=2, head_dim=16,
                      shared_prefix=16, prefix_groups=1)


@pytest.fixture(scope="module")
def results():
    return benchmark_implementations(["naive", "triton_prefix"], build_decode_inputs(CONFIG), warmup=0, iters=2)


def test_bandwidth_is_bytes_over_time():
    assert gbps(2_000_000, 0.5) == pytest.approx(4.0)  # 2 MB in 0.5 ms
    assert gbps(None, 1.0) is None and gbps(1, float("nan")) is None and gbps(1, 0.0) is None
    assert pct_of_copy(1000.0, 4000.0) == 25.0 and pct_of_copy(1000.0, None) is None
    row = {"gbps": 10.0, "gpu_gbps": float("nan"), "unique_gbps": 4.0, "gpu_unique_gbps": 8.0}
    assert achieved_gbps(row) == 10.0 and achieved_gbps(row, unique=True) == 8.0  # GPU time where measured
    assert achieved_gbps({"gbps": None, "gpu_gbps": None}) is None


def test_a_result_row_is_the_schema(results):
    row = result_row(results[1], CONFIG, copy_gbps=40.0, device_name="cpu", warmup=0, iters=2, note="x")
    assert list(row) == list(RESULT_COLUMNS)
    r = results[1]
    assert (row["implementation"], row["label"], row["correct"], row["status"]) == (
        "triton_prefix", LABELS["triton_prefix"], True, "ok")
    assert (row["context_len"], row["context_lens"], row["tokens"]) == (40, "16..40 (mean 27)", 81)
    assert (row["bytes_moved"], row["unique_bytes"]) == (CONFIG.decode_bytes(), CONFIG.unique_decode_bytes())
    assert row["unique_bytes"] < row["bytes_moved"]  # the shared block once
    assert row["gbps"] == gbps(r.bytes_moved, r.median_ms) and row["unique_gbps"] == gbps(r.unique_bytes, r.median_ms)
    # no GPU time on the CPU: the fraction of copy counts the unique bytes over the call latency
    assert row["gpu_time_ms"] is None and row["pct_of_copy_bw"] == pytest.approx(100 * row["unique_gbps"] / 40.0)
    assert row["host_us"] is None and row["max_abs_err"] == r.max_abs_err
    skipped = status_row("naive", "Naive PyTorch", "skipped", CONFIG, note="over budget")
    assert list(skipped) == list(RESULT_COLUMNS) and skipped["median_ms"] is None and skipped["correct"] is None
    with pytest.raises(ValueError, match="status must be skipped, failed or refused"):
        status_row("naive", "Naive PyTorch", "ok", CONFIG, note="")
    assert [correct_text(c) for c in (True, False, None, "yes", "NO", "")] == ["yes", "NO", "", "yes", "NO", ""]
    assert context_summary((7, 7)) == "7" and context_summary(()) == ""


def test_written_rows_read_back_as_they_were(tmp_path, results):
    rows = [{**result_row(r, CONFIG, copy_gbps=40.0, device_name="cpu", warmup=0, iters=2), "speedup": 1.5}
            for r in results] + [{**status_row("vectorized", "v", "failed", CONFIG, note="boom, twice",
                                             copy_gbps=40.0),
                                  "speedup": None}]
    meta = sidecar(kind="classic", command="python -m x", device="cpu", copy_gbps=40.0, title="t")
    path = write_results(rows, tmp_path / "r.csv", meta, leading=("speedup",))
    header = path.read_text().splitlines()[0].split(",")
    assert header == ["speedup", *RESULT_COLUMNS]
    back, back_meta = read_results(path)
    assert back_meta == meta and back_meta["peers"] == {} and back_meta["gpu"] == "cpu"
    for mine, theirs in zip(rows, back):
        for column, (kind, _) in COLUMNS.items():
            want = mine[column]
            if kind is str:
                assert theirs[column] == (want or ""), column
            elif want is None:
                assert theirs[column] is None, column
            else:
                assert theirs[column] == pytest.approx(want) and type(theirs[column]) is kind, column
        assert theirs["speedup"] == mine["speedup"]
    assert read_results(tmp_path / "r.csv")[0] == back
    (tmp_path / "r.json").unlink()
    assert read_results(path)[1] is None


def test_versions_name_every_library_once():
    meta = {"gpu": "G", "driver": "1", "cuda": "13", "torch": "2", "triton": "3", "peers": {"flashinfer": "0.7"},
            "date": "2026-12-01"}
    assert versions(meta) == "G · driver 1 · CUDA 13 · torch 2 · Triton 3 · FlashInfer 0.7 · recorded 2026-12-01"
    assert "FlashInfer" not in versions({**meta, "peers": {}})
    with pytest.raises(ValueError, match="kind must be one of"):
        sidecar(kind="mystery", command="x", device="cpu")


@pytest.mark.parametrize("path", SHIPPED + LEGACY, ids=[str(p.relative_to(ROOT)) for p in SHIPPED + LEGACY])
def test_every_results_csv_reads_into_the_schema(path):
    rows, meta = read_results(path)
    header = next(csv.reader(path.open()))
    names = LEGACY_COLUMNS.get(writer_of(header), {})
    assert rows and all(list(r)[:len(RESULT_COLUMNS)] == list(RESULT_COLUMNS) for r in rows)
    old = list(csv.DictReader(path.open()))
    for row, cells in zip(rows, old):
        assert row["implementation"] and row["status"] in ("ok", "skipped", "failed")
        assert row["label"] == LABELS.get(row["implementation"], row["label"])  # ours named as the library does
        assert row["kv_dtype"] in (row["dtype"], "float8_e4m3fn", "float8_e5m2")
        assert row["query_lens"] == (cells.get("query_lens") or "1")  # files before it ran one query token
        if row["status"] != "ok":
            continue
        assert isinstance(row["correct"], bool) and row["bytes_moved"] > 0 and row["unique_bytes"] > 0
        # the four bandwidths and the bytes agree (one function computed the missing ones)
        assert row["gbps"] == pytest.approx(row["bytes_moved"] / row["median_ms"] / 1e6)
        assert row["unique_gbps"] == pytest.approx(row["unique_bytes"] / row["median_ms"] / 1e6)
        if row["gpu_time_ms"] is not None:
            assert row["gpu_unique_gbps"] == pytest.approx(row["unique_bytes"] / row["gpu_time_ms"] / 1e6)
        # the old file's own numbers survive under their new names
        for old_name, new_name in names.items():
            if cells.get(old_name) not in (None, "") and COLUMNS.get(new_name, (str,))[0] is float:
                assert row[new_name] == pytest.approx(float(cells[old_name])), old_name
        if "frac_copy" in cells:  # decode_peers' fraction of the copy bandwidth, now a percentage
            assert row["pct_of_copy_bw"] == pytest.approx(100 * float(cells["frac_copy"]))
        if meta is not None and row["copy_gbps"] is not None:
            assert math.isclose(row["copy_gbps"], meta["copy_gbps"], rel_tol=1e-3)


def test_a_row_names_the_query_tokens_per_sequence():
    """Draft tokens (issue 25): ``query_lens`` says how many new tokens each sequence
    brought, and the bytes count K and V once plus a query and an output row each."""
    config = CONFIG.with_(shared_prefix=0, query_lens=(1, 4, 16))
    inputs = build_decode_inputs(config)
    (r,) = benchmark_implementations(["vectorized"], inputs, warmup=0, iters=1)
    row = result_row(r, config)
    assert row["query_lens"] == "1..16 (mean 7)" and r.passed
    assert row["bytes_moved"] == config.decode_bytes() == (
        2 * 81 * 2 * 16 * 2 + 2 * 21 * 4 * 16 * 2)  # K+V of 81 tokens x 2 KV heads, query+output of 21 rows
    assert result_row(r, config.with_(query_lens=4))["query_lens"] == "4"
    assert result_row(r, CONFIG)["query_lens"] == "1"
    assert status_row("naive", "n", "skipped", config, note="")["query_lens"] == "1..16 (mean 7)"


def test_a_file_from_before_query_tokens_reads_one(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text(results_csv([{"implementation": "triton", "batch_size": 2, "query_lens": None}]))
    (row,), _ = read_results(path)
    assert row["query_lens"] == "1"
    path.write_text(results_csv([{"implementation": "triton", "batch_size": 2, "query_lens": "1..4 (mean 2)"}]))
    assert read_results(path)[0][0]["query_lens"] == "1..4 (mean 2)"


def test_a_cell_of_the_wrong_type_names_its_column_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(results_csv([{"implementation": "triton", "batch_size": 2}]).replace(",2,", ",2.5,"))
    with pytest.raises(ValueError, match=r"bad.csv: batch_size must be a whole number; line 2 holds '2.5'"):
        read_results(path)
    path.write_text("")
    with pytest.raises(ValueError, match="not a readable CSV"):
        read_results(path)
    path.write_text("implementation\ntriton\n")
    path.with_suffix(".json").write_text("[1]")
    with pytest.raises(ValueError, match="bad.json: must hold a JSON object"):
        read_results(path)
