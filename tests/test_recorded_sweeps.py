"""Recorded sweeps (the ``sweep`` kind of explorer/bench/recorded.py): benchmarks.record's sweep rows on
the CPU with a tiny configuration, written and read back as a recorded sweep; the
Sweep page's "Recorded on a GPU" section from a fake one in a temporary folder,
hidden when none is shipped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import TINY, assert_clean, chart, open_app  # noqa: E402

from benchmarks.record import sweep_rows  # noqa: E402
from explorer.bench import recorded  # noqa: E402
from explorer.sweep.runs import SWEEP_COLUMNS, rows_frame, sweep_csv  # noqa: E402
from paged_attention import DecodeConfig  # noqa: E402

SWEEP = "app_pages/sweep.py"
META = {"gpu": "Fake GPU", "driver": "1.0", "cuda": "13.0", "torch": "2.11", "triton": "3.6", "date": "2026-12-01",
        "copy_gbps": 1000.0, "axis": "context_len", "command": "python -m benchmarks.record --sweeps --out x",
        "config": {"batch_size": 2, "num_heads": 4}, "elapsed_s": 1.0}


@pytest.fixture(scope="module")
def rows():
    base = DecodeConfig(batch_size=2, context_lens=16, num_heads=4, num_kv_heads=2, head_dim=32, block_size=16,
                        dtype="float16", device="cpu")
    return sweep_rows(base, "context_len", (16, 37), ["naive", "vectorized", "triton"], warmup=0, iters=1,
                      naive_budget_s=30.0, device_name="CPU (Triton interpreter)", copy_gbps=None)


def load_recorded_sweep(path):
    return recorded.load_recorded_set(path, "sweep")


def load_recorded_sweeps(folder):
    return recorded.load_recorded(["sweep"], {"sweep": folder})


def _write(folder: Path, rows, name="fake_context_len", **meta) -> Path:
    path = folder / f"{name}.csv"
    path.write_text(sweep_csv(rows_frame(rows, "recorded")))
    path.with_suffix(".json").write_text(json.dumps({**META, **meta}))
    return path


def test_sweep_rows_are_the_pages_rows(rows):
    assert [(r["value"], r["implementation"], r["status"]) for r in rows] == [
        (v, n, "ok") for v in (16, 37) for n in ("naive", "vectorized", "triton")]
    assert all(r["correct"] == "yes" and r["median_ms"] > 0 for r in rows)
    assert set(rows[0]) == set(SWEEP_COLUMNS) - {"source"}


def test_naive_over_its_budget_is_skipped_not_dropped():
    base = DecodeConfig(batch_size=1, context_lens=16, num_heads=4, num_kv_heads=2, head_dim=32, block_size=16,
                        dtype="float16", device="cpu")
    rows = sweep_rows(base, "batch_size", (1,), ["naive", "vectorized"], warmup=0, iters=1, naive_budget_s=0.0,
                      device_name="cpu", copy_gbps=None)
    assert [(r["implementation"], r["status"]) for r in rows] == [("naive", "skipped"), ("vectorized", "ok")]
    assert "budget" in rows[0]["note"]


def test_a_cold_first_naive_call_does_not_skip_the_point(monkeypatch):
    """Review: the recorded H200 sweep skipped naive at 512 tokens, "~129 ms predicted"
    from one cold probing call, then timed it at 2,048 tokens in 13.4 ms. The recording
    probes as the page does: the faster of two calls."""
    from paged_attention import timing

    real, seen = timing.time_calls, []
    budget_s = 1.0  # the point makes 3 calls: warm-up 1 + 1 timed + the accuracy check

    def cold_first(fn, *, device, warmup, iters, flush=None):
        seen.append(iters)
        if len(seen) == 1:  # the probe's first call, one-time costs: half the budget (the point's calls 1.5x)
            fn()
            return [budget_s * 1e3 / 2]
        return real(fn, device=device, warmup=warmup, iters=iters, flush=flush)

    monkeypatch.setattr(timing, "time_calls", cold_first)
    base = DecodeConfig(batch_size=1, context_lens=16, num_heads=4, num_kv_heads=2, head_dim=32, block_size=16,
                        dtype="float16", device="cpu")
    rows = sweep_rows(base, "batch_size", (1,), ["naive", "vectorized"], warmup=1, iters=1, naive_budget_s=budget_s,
                      device_name="cpu", copy_gbps=None)
    assert [(r["implementation"], r["status"]) for r in rows] == [("naive", "ok"), ("vectorized", "ok")], rows[0]["note"]


def test_loader_reads_back_and_checks(tmp_path, rows):
    rec = load_recorded_sweep(_write(tmp_path, rows))
    assert rec.axis == "context_len" and set(rec.table["source"]) == {"recorded"}
    assert "driver 1.0" in rec.versions()
    assert [s.name for s in load_recorded_sweeps(tmp_path)] == ["fake_context_len"]
    # a sidecar that names its kind needs none from the caller
    (tmp_path / "other").mkdir()
    assert recorded.load_recorded_set(_write(tmp_path / "other", rows, kind="sweep")).kind == "sweep"
    assert load_recorded_sweeps(tmp_path / "none") == []
    with pytest.raises(ValueError, match="says batch_size"):
        load_recorded_sweep(_write(tmp_path, rows, name="b", axis="batch_size"))
    with pytest.raises(ValueError, match="missing metadata driver"):
        path = _write(tmp_path, rows, name="c")
        meta = json.loads(path.with_suffix(".json").read_text())
        del meta["driver"]
        path.with_suffix(".json").write_text(json.dumps(meta))
        load_recorded_sweep(path)
    with pytest.raises(ValueError, match="copy_gbps"):
        load_recorded_sweep(_write(tmp_path, rows, name="d", copy_gbps=-1))


def _page(monkeypatch, folder: Path, show: bool = True):
    monkeypatch.setitem(recorded.FOLDERS, "sweep", folder)
    from ui.recorded import recorded_sets as cached
    cached.clear()
    at = open_app(TINY, page=SWEEP)
    if show and at.get("toggle") and any(t.key == "sw_show_recorded" for t in at.toggle):
        assert not [c for c in at.get("plotly_chart") if "sw_recorded" in str(c.proto.id)]  # off by default
        at.toggle(key="sw_show_recorded").set_value(True).run()
    cached.clear()
    return at


def test_sweep_page_hides_the_section_when_none_is_shipped(monkeypatch, tmp_path):
    at = _page(monkeypatch, tmp_path)
    assert_clean(at)
    assert "Recorded on a GPU" not in [s.value for s in at.subheader]


def test_sweep_page_draws_a_recorded_sweep_labelled_as_recorded(monkeypatch, tmp_path, rows):
    _write(tmp_path, rows)
    _write(tmp_path, [{**r, "axis": "batch_size"} for r in rows], name="fake_batch", axis="batch_size")
    at = _page(monkeypatch, tmp_path)
    assert_clean(at)
    assert "Recorded on a GPU" in [s.value for s in at.subheader]
    picker = at.segmented_control(key="sw_recorded")
    assert len(picker.options) == 2 and picker.options[0].startswith("context length · Fake GPU")
    text = " ".join(m.value for m in at.markdown)
    assert "**Recorded on Fake GPU**" in text and "driver 1.0" in text
    spec = chart(at, "sw_recorded_latency")
    assert {t["meta"]["source"] for t in spec["data"]} == {"recorded"}
    assert all("(recorded)" in t["hovertemplate"] for t in spec["data"])
    # the GPU is named once, in the subtitle, not in every legend entry
    assert "recorded on Fake GPU" in spec["layout"]["title"]["subtitle"]["text"]
    assert all("Fake GPU" not in t["name"] for t in spec["data"])
    assert any("Drawn alone: no sweep run here yet" in c.value for c in at.caption)
    # how it was recorded, without the recording machine's output folder
    (how,) = [c.value for c in at.caption if "recorded with" in c.value]
    assert "recorded with `python -m benchmarks.record --sweeps`" in how and "--out" not in how
    # the live table and CSV are this session's only: none before a run
    assert not [d for d in at.dataframe if "sw_table" in d.proto.id]


def test_the_recorded_caption_writes_the_values_as_the_ticks_do(monkeypatch, tmp_path, rows):
    """Review: the recorded sweep's x ticks read "2k, 8k" and its caption "2,048, 8,192"."""
    _write(tmp_path, [{**r, "value": {16: 2048, 37: 8192}[r["value"]]} for r in rows])
    at = _page(monkeypatch, tmp_path)
    assert_clean(at)
    ticks = chart(at, "sw_recorded_latency")["layout"]["xaxis"]["ticktext"]
    assert list(ticks) == ["2k", "8k"]
    assert any(c.value.startswith(f"context length (tokens) over {', '.join(ticks)}; ") for c in at.caption)


def test_session_sweep_beside_a_recorded_one_names_settings_and_hides_an_empty_ratio(monkeypatch, tmp_path, rows):
    from test_app_sweep import run_sweep, sweep_grid

    # recorded at other context lengths, and with other settings than TINY's
    _write(tmp_path, [{**r, "value": r["value"] * 100} for r in rows],
           config={"batch_size": 8, "num_heads": 32, "head_dim": 128})
    at = sweep_grid(_page(monkeypatch, tmp_path), 16, 32, 2)
    at = run_sweep(at)
    assert_clean(at)
    captions = [c.value for c in at.caption]
    assert any("recorded vs this session: batch 8 vs 2, 32 vs 4 heads, head_dim 128 vs 32" in c for c in captions)
    assert any(c.startswith("No time ratio: the two sweeps share no measured context length") for c in captions)
    assert not [c for c in at.get("plotly_chart") if str(c.proto.id).endswith("-sw_recorded_ratio")]
    spec = chart(at, "sw_recorded_latency")
    assert "dashed: recorded on Fake GPU" in spec["layout"]["title"]["subtitle"]["text"]
    assert max(len(t["name"]) for t in spec["data"]) <= 40  # "Optimized PyTorch · this session"


def test_session_sweep_sharing_points_draws_the_ratio(monkeypatch, tmp_path, rows):
    from test_app_sweep import run_sweep, sweep_grid

    _write(tmp_path, rows)
    at = sweep_grid(_page(monkeypatch, tmp_path), 16, 32, 2)
    at = run_sweep(at)
    assert_clean(at)
    spec = chart(at, "sw_recorded_ratio")
    assert spec["layout"]["title"]["text"] == "Time ratio: recorded on Fake GPU over this session"
    assert not any(c.value.startswith("No time ratio") for c in at.caption)
