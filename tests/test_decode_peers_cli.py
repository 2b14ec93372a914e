"""benchmarks.decode_peers without a GPU: its flags and sets, FlashInfer's index arrays
built from our block table, the run without FlashInfer, and the whole loop on the CPU
(Triton interpreted, timings stubbed)."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest
import torch

from benchmarks import decode_peers as dp
from paged_attention import DecodeConfig, build_decode_inputs

HAS_FP8_API = "kv_dtype" in DecodeConfig.__dataclass_fields__


def test_help_on_a_machine_without_a_gpu(capsys):
    with pytest.raises(SystemExit) as done:
        dp.main(["--help"])
    assert done.value.code == 0
    assert "--kv-dtype" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, dtypes, kv, impls, count",
    [
        ([], ["float16", "bfloat16"], ["same"], dp.IMPLS, len(dp.CONFIGS)),
        (["--set", "fp8"], ["float16"], ["same", "float8_e4m3fn"], dp.SET_DEFAULTS["fp8"][2], 6),
        (["--set", "ragged"], ["float16"], ["same"], dp.SET_DEFAULTS["ragged"][2], 11),
        (["--kv-dtype", "float8_e5m2", "both"], ["float16", "bfloat16"], ["same", "float8_e5m2", "float8_e4m3fn"],
         dp.IMPLS, len(dp.CONFIGS)),
        (["--set", "fp8", "--kv-dtype", "float8_e4m3fn", "--impl", "triton", "flashinfer_tc", "--dtype", "bfloat16"],
         ["bfloat16"], ["float8_e4m3fn"], ["triton", "flashinfer_tc"], 6),
        (["--only", "small"], ["float16", "bfloat16"], ["same"], dp.IMPLS, 4),
    ],
)
def test_flags_and_set_defaults(argv, dtypes, kv, impls, count):
    args = dp.parse_args(argv)
    assert args.dtype == dtypes
    assert args.kv_dtype == kv  # the 16-bit cache first: the fp8 rows' speedups need it
    assert list(args.impl) == list(impls)
    assert len(args.configs) == count


def test_unknown_or_empty_choices_are_refused(capsys):
    for argv in (["--set", "fp8", "--only", "small"], ["--kv-dtype", "float16"], ["--impl", "flashinfer_fp8"]):
        with pytest.raises(SystemExit) as done:
            dp.parse_args(argv)
        assert done.value.code == 2
    assert "selects no configuration" in capsys.readouterr().err


def test_sets_hold_the_configurations_asked_for():
    fp8 = dp.CONFIG_SETS["fp8"]
    assert {(b, lens) for _, b, lens, over in fp8 if not over} >= {(64, 4096), (1, 32768), (128, 1024)}
    ragged = dp.CONFIG_SETS["ragged"]
    uniform = [(b, max(lens)) for kind, b, lens, _ in ragged if kind == "ragged"]
    assert sorted({b for b, _ in uniform}) == [4, 8, 16, 32, 64] and len(uniform) == 10
    for kind, b, lens, over in ragged:
        assert len(lens) == b and min(lens) >= 1 and max(lens) <= 32768 and over == {}
    assert max(top for _, top in uniform[:5]) <= 8192 < max(top for _, top in uniform[5:])
    (tail,) = [lens for kind, _, lens, _ in ragged if kind == "long-tail"]
    assert sorted(tail)[len(tail) // 2] < 32768 // 8 < max(tail)  # most short, a few long
    assert dp.describe_lengths((5, 5)) == "5" and dp.describe_lengths((1, 9)) == "1..9 (mean 5)"


@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_flashinfer_indices_are_each_sequences_needed_blocks(poison, index_dtype):
    lens = (0, 1, 37, 16, 33, 0, 17)
    cfg = DecodeConfig(batch_size=len(lens), context_lens=lens, num_heads=4, num_kv_heads=2, head_dim=8,
                       block_size=16, device="cpu", seed=3, block_layout="shuffled")
    inputs = build_decode_inputs(cfg, poison=poison)  # poison: junk ids past each row's needed blocks
    tables = inputs.block_tables.to(index_dtype)
    indptr, indices, last = dp.flashinfer_page_indices(tables, inputs.context_lens, cfg.block_size)
    assert indptr.dtype == indices.dtype == last.dtype == torch.int32
    assert indptr.tolist() == [0, 0, 1, 4, 5, 8, 8, 10]
    assert last.tolist() == [0, 1, 5, 16, 1, 0, 1]
    for b, n in enumerate(lens):
        needed = -(-n // cfg.block_size)
        assert indices[indptr[b]:indptr[b + 1]].tolist() == tables[b, :needed].tolist()
        # FlashInfer's length of a request: 0 without pages, else (pages - 1) * page_size + last.
        pages = int(indptr[b + 1] - indptr[b])
        assert (0 if pages == 0 else (pages - 1) * cfg.block_size + int(last[b])) == n
        # Its pages hold exactly this sequence's tokens, in order.
        keys = inputs.k_cache[indices[indptr[b]:indptr[b + 1]].long()].reshape(-1, 2, 8)[:n]
        t = torch.arange(n)
        assert torch.equal(keys, inputs.k_cache[tables[b, t // cfg.block_size].long(), t % cfg.block_size])
    assert 0 <= int(indices.min()) and int(indices.max()) < cfg.num_blocks


def test_without_flashinfer_one_note_and_no_rows(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # makes `import flashinfer` fail
    assert dp.load_flashinfer() is None
    assert capsys.readouterr().out.strip() == dp.FLASHINFER_MISSING


@pytest.fixture
def on_cpu(monkeypatch):
    """The whole loop on the CPU: one small ragged configuration, timings stubbed."""
    monkeypatch.setattr(dp, "DEVICE", "cpu")
    monkeypatch.setattr(dp, "gpu_time", lambda fn, **kw: 0.01)
    monkeypatch.setattr(dp, "time_calls", lambda fn, **kw: [0.02])
    monkeypatch.setitem(dp.CONFIG_SETS, "classic", [("ragged", 3, (1, 23, 40), {"num_heads": 4, "num_kv_heads": 2})])
    monkeypatch.setitem(sys.modules, "flashinfer", None)


def run_on_cpu(tmp_path, *flags):
    out = tmp_path / "peers.csv"
    assert dp.main(["--head-dim", "16", "--dtype", "float16", "--call-iters", "1", "--out", str(out), *flags]) == 0
    return pd.read_csv(out)


def test_whole_run_on_the_cpu(on_cpu, tmp_path, capsys):
    table = run_on_cpu(tmp_path, "--impl", "triton", "vectorized", "sdpa_contiguous", "flashinfer")
    printed = capsys.readouterr().out
    assert dp.FLASHINFER_MISSING in printed and "GPU time in ms" in printed
    assert table["impl"].tolist() == ["triton", "vectorized", "sdpa_contiguous"]
    assert table["correct"].all() and table["kv_dtype"].eq("float16").all()
    assert table["lengths"].iloc[0] == "1..40 (mean 21)"


@pytest.mark.skipif(not HAS_FP8_API, reason="the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
def test_whole_run_on_the_cpu_with_an_fp8_cache(on_cpu, tmp_path, capsys):
    table = run_on_cpu(tmp_path, "--kv-dtype", "both", "--impl", "triton", "sdpa_contiguous")
    printed = capsys.readouterr().out
    assert "sdpa_contiguous: no fp8 cache; they run on the 16-bit cache only" in printed
    assert list(zip(table["kv_dtype"], table["impl"])) == [
        ("float16", "triton"), ("float16", "sdpa_contiguous"), ("float8_e4m3fn", "triton")]
    assert table["correct"].all() and "error" not in table
    fp8 = table[table["kv_dtype"] == "float8_e4m3fn"].iloc[0]
    assert fp8["speedup_vs_triton_16bit"] == pytest.approx(1.0) and fp8["kv_scale"] == "per_tensor"
    assert fp8["kv_mb"] == pytest.approx(table["kv_mb"].iloc[0] / 2)  # 1 byte per element, not 2


class FakeDecodeWrapper:
    """FlashInfer's BatchDecodeWithPagedKVCacheWrapper as its documentation describes it,
    in float64 on the CPU: pages from (indptr, indices, last_page_len), logits scaled by
    sm_scale * k_scale, output by v_scale."""

    def __init__(self, workspace, kv_layout, use_tensor_cores=False):
        assert kv_layout == "NHD" and workspace.dtype == torch.uint8
        self.resolved_backend = "fake-tc" if use_tensor_cores else "fake"

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, *,
             q_data_type, kv_data_type, sm_scale):
        self.plan_args = dict(indptr=indptr, indices=indices, last=last_page_len, kvh=num_kv_heads,
                              page_size=page_size, q_dtype=q_data_type, kv_dtype=kv_data_type, sm_scale=sm_scale)

    def run(self, q, paged_kv_cache, *, out, k_scale=None, v_scale=None):
        a = self.plan_args
        k_cache, v_cache = paged_kv_cache
        assert q.dtype == a["q_dtype"] and k_cache.dtype == v_cache.dtype == a["kv_dtype"]
        assert all(isinstance(s, (float, type(None))) for s in (k_scale, v_scale))
        kvh, d = a["kvh"], q.shape[-1]
        for b in range(q.shape[0]):
            pages = a["indices"][a["indptr"][b]:a["indptr"][b + 1]].long()
            n = 0 if len(pages) == 0 else (len(pages) - 1) * a["page_size"] + int(a["last"][b])
            k = k_cache[pages].reshape(-1, kvh, d)[:n].double()
            v = v_cache[pages].reshape(-1, kvh, d)[:n].double()
            qb = q[b].double().reshape(kvh, -1, d)
            p = (torch.einsum("kgd,nkd->kgn", qb, k) * a["sm_scale"] * (k_scale or 1.0)).softmax(-1)
            out[b] = (torch.einsum("kgn,nkd->kgd", p, v) * (v_scale or 1.0)).reshape(-1, d)
        return out


@pytest.fixture
def fake_flashinfer(monkeypatch):
    module = types.ModuleType("flashinfer")
    module.__version__ = "fake"
    module.BatchDecodeWithPagedKVCacheWrapper = FakeDecodeWrapper
    monkeypatch.setitem(sys.modules, "flashinfer", module)


@pytest.mark.parametrize("kv", ["same", "both"])
def test_flashinfer_rows_through_a_fake_flashinfer(on_cpu, fake_flashinfer, monkeypatch, tmp_path, kv):
    if kv == "both" and not HAS_FP8_API:
        pytest.skip("the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
    # Empty and one-token sequences: FlashInfer gets no pages and a last-page length of 0 for the first.
    monkeypatch.setitem(dp.CONFIG_SETS, "classic", [("ragged", 4, (0, 1, 23, 40), {"num_heads": 4, "num_kv_heads": 2})])
    table = run_on_cpu(tmp_path, "--kv-dtype", kv, "--impl", "triton", "flashinfer", "flashinfer_tc")
    assert table["correct"].all() and "error" not in table
    assert table["note"].str.startswith("backend fake").sum() == len(table) * 2 // 3
    if kv == "both":
        assert table["kv_dtype"].tolist() == ["float16"] * 3 + ["float8_e4m3fn"] * 3


@pytest.mark.skipif(not HAS_FP8_API, reason="the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
def test_flashinfer_skips_per_head_scales_and_float32(on_cpu, fake_flashinfer, tmp_path):
    table = run_on_cpu(tmp_path, "--kv-dtype", "float8_e4m3fn", "--kv-scale", "per_head", "--impl", "triton",
                       "flashinfer")
    row = table.set_index("impl").loc["flashinfer"]
    assert pd.isna(row["gpu_ms"]) and "not per KV head" in row["note"]
    table = run_on_cpu(tmp_path, "--dtype", "float32", "--impl", "flashinfer")
    assert "float16 or bfloat16 queries" in table["note"].iloc[0]


def test_a_flashinfer_call_no_graph_captures_is_timed_plainly(on_cpu, fake_flashinfer, monkeypatch, tmp_path):
    def no_graph(fn, **kw):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(dp, "gpu_time", no_graph)
    table = run_on_cpu(tmp_path, "--impl", "triton", "flashinfer").set_index("impl")
    assert "RuntimeError: operation not permitted" in table.loc["triton", "error"]  # ours: a failure
    assert table.loc["flashinfer", "gpu_ms"] == table.loc["flashinfer", "call_ms"] == 0.02
    assert table.loc["flashinfer", "note"].startswith("backend fake; no CUDA graph (RuntimeError")
