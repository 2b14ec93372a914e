"""Recorded GPU sets (explorer/bench/recorded.py, the one loader of every kind):
loading and checking the shipped files, the rules a malformed set breaks, matching
the sidebar's configuration, and ``benchmarks.record``."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch

from explorer.bench import recorded as rec
from paged_attention import DecodeConfig
from paged_attention.result_files import read_results

SHIPPED = sorted(rec.RECORDED_DIR.rglob("*.csv"))
H200 = rec.RECORDED_DIR / "h200_2026-11-29.csv"


def _config(batch=4, ctx=2048, **overrides) -> DecodeConfig:
    base = dict(batch_size=batch, context_lens=ctx, num_heads=32, num_kv_heads=8, head_dim=128, block_size=16,
                dtype="float16", device="cpu")
    return DecodeConfig(**{**base, **overrides})


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_set_loads(path):
    s = rec.load_recorded_set(path)
    assert s.name == path.stem and len(s.table) > 0 and s.kind == rec.load_recorded_set(path, s.kind).kind
    assert s.meta["copy_gbps"] > 0 and s.meta["gpu"]
    assert path.parent == rec.FOLDERS[s.kind]
    timed = s.table[s.table["status"] == "ok"]
    assert (timed["pct_of_copy_bw"] > 0).all() and timed["bytes_moved"].gt(0).all()
    if s.kind == "classic":
        for layout in s.layouts:
            rows = rec.recorded_rows(s, layout)
            assert (rows["pct_of_copy_bw"] > 0).all() and rows["key"].notna().all()


def test_load_recorded_orders_kinds_and_reads_those_asked_for():
    sets = rec.load_recorded()
    assert [s.kind for s in sets] == ["classic"] + ["peers"] * 4 + ["sweep"] * 2
    assert [s.meta["set"] for s in sets if s.kind == "peers"] == list(rec.SETS)
    assert [s.axis for s in sets if s.kind == "sweep"] == ["context_len", "batch_size"]  # the order of AXES
    assert {s.kind for s in rec.load_recorded(["peers"])} == {"peers"}


def test_h200_set_is_the_documented_classic_tables():
    (s,) = [s for s in rec.load_recorded() if s.name == "h200_2026-11-29"]
    assert s.meta["gpu"] == "NVIDIA H200" and s.meta["driver"] == "580.159.04" and s.meta["cuda"] == "13.0"
    assert (s.meta["torch"], s.meta["triton"], s.meta["copy_gbps"]) == ("2.11.0+cu130", "3.6.0", 4240)
    assert s.configs == [(2, 60), (1, 512), (16, 256), (4, 2048)] and s.layouts == ["contiguous", "shuffled"]
    # the rows of the files docs/benchmarks.md tabulates, read through the same mapping
    measured = ["label", "batch_size", "context_len", "median_ms", "gpu_time_ms", "gbps", "max_abs_err", "correct"]
    for layout in s.layouts:
        doc, _ = read_results(rec.RECORDED_DIR.parents[2] / "docs" / "data" / f"classic_{layout}.csv")
        mine = s.table[s.table["block_layout"] == layout].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine[measured], pd.DataFrame(doc)[measured], check_dtype=False)
    # what the old CSV left to its sidecar, every row now says
    assert set(s.table["num_heads"]) == {32} and set(s.table["head_dim"]) == {128} and set(s.table["dtype"]) == {
        "float16"}
    assert "H200" in s.versions() and "2026-11-29" in s.versions()


def test_rows_take_bandwidth_from_gpu_time_where_measured():
    s = rec.load_recorded_set(H200)
    rows = rec.recorded_rows(s, "shuffled").set_index(["batch_size", "context_len", "key"])
    triton = rows.loc[(4, 2048, "triton")]
    # same bytes as the CSV's call-latency GB/s, over the GPU time
    assert triton["gbps"] == pytest.approx(1461.2294786885332 * 0.02300800010561943 / 0.01579359918832779)
    assert triton["pct_of_copy_bw"] == pytest.approx(100 * triton["gbps"] / 4240)
    naive = rows.loc[(4, 2048, "naive")]
    assert pd.isna(naive["gpu_time_ms"]) and naive["gbps"] == pytest.approx(8.60525326379141)
    assert triton["configuration"] == "batch 4 × 2,048 tokens"


@pytest.mark.parametrize("overrides, expected", [
    ({}, (4, 2048)),
    ({"batch": 2, "ctx": 60, "block_layout": "contiguous"}, (2, 60)),
    ({"batch": 4, "ctx": 2047}, None),
    ({"batch": 2, "ctx": (60, 61)}, None),
    ({"num_kv_heads": 4}, None),
    ({"head_dim": 64}, None),
    ({"dtype": "bfloat16"}, None),
    ({"block_size": 32}, None),
    ({"kv_dtype": "float8_e4m3fn"}, None),  # recorded with a float16 cache
    ({"shared_prefix": 1024}, None),  # recorded sharing nothing
    ({"query_lens": 4}, None),  # recorded with one query token per sequence
    ({"query_lens": 1}, (4, 2048)),
])
def test_matching_config(overrides, expected):
    s = rec.load_recorded_set(H200)
    assert rec.matching_config(s, _config(**overrides)) == expected


def _copy_set(tmp_path):
    shutil.copy(H200, tmp_path / "s.csv")
    shutil.copy(H200.with_suffix(".json"), tmp_path / "s.json")
    return tmp_path / "s.csv"


def _edit_csv(path, fn):
    path.write_text(fn(pd.read_csv(path, dtype=str)).to_csv(index=False))


def _cell(row, col, value):
    """A change of one cell of the CSV (read as text)."""
    def edit(path):
        def put(t):
            t.loc[row, col] = value
            return t
        _edit_csv(path, put)
    return edit


def _edit_meta(path, fn):
    side = path.with_suffix(".json")
    meta = json.loads(side.read_text())
    fn(meta)
    side.write_text(json.dumps(meta))


@pytest.mark.parametrize("breaks, rule", [
    (lambda p: p.with_suffix(".json").unlink(), "no metadata file s.json"),
    (lambda p: p.with_suffix(".json").write_text("{"), "not valid JSON"),
    (lambda p: p.with_suffix(".json").write_text("[]"), "must hold a JSON object"),
    (lambda p: _edit_meta(p, lambda m: m.pop("driver")), "missing metadata driver"),
    (lambda p: _edit_meta(p, lambda m: m["config"].pop("head_dim")), "head_dim must be a positive number in every row"),
    (lambda p: _edit_meta(p, lambda m: m.update(copy_gbps=0)), "copy_gbps must be a positive number"),
    (lambda p: _edit_meta(p, lambda m: m.update(copy_gbps="4240")), "copy_gbps must be a positive number"),
    (lambda p: p.write_text(""), "not a readable CSV"),
    (lambda p: _edit_csv(p, lambda t: t.drop(columns="median_ms")), "median_ms must be a positive number in every timed row"),
    (lambda p: _edit_csv(p, lambda t: t.iloc[:0]), "has no rows"),
    (_cell(0, "layout", "random"), "block_layout must be one of"),
    (_cell(0, "implementation", "cuBLAS"), "unknown implementation cuBLAS"),
    (_cell(1, "median_ms", "-1.0"), "median_ms must be a positive"),
    (_cell(0, "batch_size", "two"), "batch_size must be a whole number; line 2 holds 'two'"),
    (_cell(0, "batch_size", "0"), "batch_size must be a positive"),
    (_cell(1, "gpu_time_ms", "fast"), "gpu_time_ms must be a number; line 3 holds 'fast'"),
    (_cell(1, "gpu_time_ms", "0"), "gpu_time_ms must be a positive"),
    (_cell(0, "correct", "maybe"), "correct must be True or False"),
    (_cell(0, "correct", ""), "correct must be True or False in every timed row"),
    (_cell(1, "implementation", "Naive PyTorch"),
     "repeats a (block_layout, batch_size, context_len, implementation) row"),
    (lambda p: _edit_meta(p, lambda m: m.update(kind="peers")), "says kind peers, but the set was read as classic"),
])
def test_malformed_set_names_the_rule(tmp_path, breaks, rule):
    path = _copy_set(tmp_path)
    rec.load_recorded_set(path)  # intact before the edit
    breaks(path)
    with pytest.raises(ValueError) as info:
        rec.load_recorded(["classic"], {"classic": tmp_path})
    assert rule in str(info.value)


def test_load_recorded_orders_newest_first(tmp_path):
    path = _copy_set(tmp_path)
    newer = tmp_path / "newer.csv"
    shutil.copy(path, newer)
    shutil.copy(path.with_suffix(".json"), newer.with_suffix(".json"))
    _edit_meta(newer, lambda m: m.update(date="2026-12-05"))
    assert [s.name for s in rec.load_recorded(["classic"], {"classic": tmp_path})] == ["newer", "s"]
    assert rec.load_recorded(["classic"], {"classic": tmp_path / "none"}) == []
    with pytest.raises(ValueError, match="says kind classic, but the set was read as peers"):
        rec.load_recorded(["peers"], {"peers": tmp_path})


def test_record_writes_a_set_the_app_loads(tmp_path):
    from benchmarks.record import write_recorded

    s = rec.load_recorded_set(H200)
    out = write_recorded(s.table.assign(p20_ms=s.table["median_ms"]), s.meta, tmp_path / "mine.csv")
    again = rec.load_recorded_set(out)
    assert again.meta == s.meta and (again.table["p20_ms"] == s.table["median_ms"]).all()
    # written in the one schema: read back, the rows are the legacy file's, mapped
    assert "implementation,label,batch_size" in out.read_text().splitlines()[0]
    pd.testing.assert_frame_equal(again.table.drop(columns="p20_ms"), s.table.drop(columns="p20_ms"),
                                  check_dtype=False)
    with pytest.raises(ValueError, match="copy_gbps"):
        write_recorded(s.table, {**s.meta, "copy_gbps": -1}, tmp_path / "bad.csv")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only refusal")
def test_record_refuses_without_a_gpu(tmp_path, capsys):
    from benchmarks.record import main

    with pytest.raises(SystemExit) as info:
        main(["--out", str(tmp_path / "x.csv")])
    assert "needs a CUDA GPU" in str(info.value.code)
    assert not (tmp_path / "x.csv").exists()


def test_a_shown_command_leaves_out_the_output_folder():
    assert rec.shown_command("python -m benchmarks.record --sweeps --out /root/out/sweeps") == \
        "python -m benchmarks.record --sweeps"
    assert rec.shown_command("python -m benchmarks.record --peers a.csv --out=x/y.csv --date 2026-12-01") == \
        "python -m benchmarks.record --peers a.csv --date 2026-12-01"
    assert rec.shown_command("python -m paged_attention.bench --csv c.csv") == \
        "python -m paged_attention.bench --csv c.csv"
