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
from benchmarks.peers import cli, configs
from benchmarks.peers import flashinfer as fi
from benchmarks.peers.implementations import IMPLS
from paged_attention import DecodeConfig, build_decode_inputs
from paged_attention.result_files import read_results
from paged_attention.results import context_summary

HAS_FP8_API = "kv_dtype" in DecodeConfig.__dataclass_fields__


def test_help_on_a_machine_without_a_gpu(capsys):
    with pytest.raises(SystemExit) as done:
        dp.main(["--help"])
    assert done.value.code == 0
    assert "--kv-dtype" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, dtypes, kv, impls, count",
    [
        ([], ["float16", "bfloat16"], ["same"], IMPLS, len(configs.CONFIGS)),
        (["--set", "fp8"], ["float16"], ["same", "float8_e4m3fn"], cli.SET_DEFAULTS["fp8"][2], 6),
        (["--set", "ragged"], ["float16"], ["same"], cli.SET_DEFAULTS["ragged"][2], 11),
        (["--kv-dtype", "float8_e5m2", "both"], ["float16", "bfloat16"], ["same", "float8_e5m2", "float8_e4m3fn"],
         IMPLS, len(configs.CONFIGS)),
        (["--set", "fp8", "--kv-dtype", "float8_e4m3fn", "--impl", "triton", "flashinfer_tc", "--dtype", "bfloat16"],
         ["bfloat16"], ["float8_e4m3fn"], ["triton", "flashinfer_tc"], 6),
        (["--only", "small"], ["float16", "bfloat16"], ["same"], IMPLS, 4),
    ],
)
def test_flags_and_set_defaults(argv, dtypes, kv, impls, count):
    args = cli.parse_args(argv)
    assert args.dtype == dtypes
    assert args.kv_dtype == kv  # the 16-bit cache first: the fp8 rows' speedups need it
    assert list(args.impl) == list(impls)
    assert len(args.configs) == count


def test_unknown_or_empty_choices_are_refused(capsys):
    for argv in (["--set", "fp8", "--only", "small"], ["--kv-dtype", "float16"], ["--impl", "flashinfer_fp8"]):
        with pytest.raises(SystemExit) as done:
            cli.parse_args(argv)
        assert done.value.code == 2
    assert "selects no configuration" in capsys.readouterr().err


def test_sets_hold_the_configurations_asked_for():
    fp8 = configs.CONFIG_SETS["fp8"]
    assert {(b, lens) for _, b, lens, over in fp8 if not over} >= {(64, 4096), (1, 32768), (128, 1024)}
    ragged = configs.CONFIG_SETS["ragged"]
    uniform = [(b, max(lens)) for kind, b, lens, _ in ragged if kind == "ragged"]
    assert sorted({b for b, _ in uniform}) == [4, 8, 16, 32, 64] and len(uniform) == 10
    for kind, b, lens, over in ragged:
        assert len(lens) == b and min(lens) >= 1 and max(lens) <= 32768 and over == {}
    assert max(top for _, top in uniform[:5]) <= 8192 < max(top for _, top in uniform[5:])
    (tail,) = [lens for kind, _, lens, _ in ragged if kind == "long-tail"]
    assert sorted(tail)[len(tail) // 2] < 32768 // 8 < max(tail)  # most short, a few long
    assert context_summary((5, 5)) == "5" and context_summary((1, 9)) == "1..9 (mean 5)"


@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_flashinfer_indices_are_each_sequences_needed_blocks(poison, index_dtype):
    lens = (0, 1, 37, 16, 33, 0, 17)
    cfg = DecodeConfig(batch_size=len(lens), context_lens=lens, num_heads=4, num_kv_heads=2, head_dim=8,
                       block_size=16, device="cpu", seed=3, block_layout="shuffled")
    inputs = build_decode_inputs(cfg, poison=poison)  # poison: junk ids past each row's needed blocks
    tables = inputs.block_tables.to(index_dtype)
    indptr, indices, last = fi.flashinfer_page_indices(tables, inputs.context_lens, cfg.block_size)
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
    assert fi.load_flashinfer() is None
    assert capsys.readouterr().out.strip() == fi.FLASHINFER_MISSING


@pytest.fixture
def on_cpu(monkeypatch):
    """The whole loop on the CPU: one small ragged configuration, timings stubbed."""
    monkeypatch.setattr(dp, "DEVICE", "cpu")
    monkeypatch.setattr(dp, "gpu_time", lambda fn, **kw: 0.01)
    monkeypatch.setattr(dp, "time_calls", lambda fn, **kw: [0.02])
    monkeypatch.setitem(configs.CONFIG_SETS, "classic", [("ragged", 3, (1, 23, 40), {"num_heads": 4, "num_kv_heads": 2})])
    monkeypatch.setitem(sys.modules, "flashinfer", None)


def run_on_cpu(tmp_path, *flags, meta=False):
    """The run's rows, read back with the one reader (and its sidecar, with ``meta``)."""
    out = tmp_path / "peers.csv"
    assert dp.main(["--head-dim", "16", "--dtype", "float16", "--call-iters", "1", "--out", str(out), *flags]) == 0
    rows, sidecar = read_results(out)
    return (pd.DataFrame(rows), sidecar) if meta else pd.DataFrame(rows)


def test_whole_run_on_the_cpu(on_cpu, tmp_path, capsys):
    table, meta = run_on_cpu(tmp_path, "--impl", "triton", "vectorized", "sdpa_contiguous", "flashinfer", meta=True)
    printed = capsys.readouterr().out
    assert fi.FLASHINFER_MISSING in printed and "GPU time in ms" in printed
    assert table["implementation"].tolist() == ["triton", "vectorized", "sdpa_contiguous"]
    assert table["correct"].all() and table["kv_dtype"].eq("float16").all()
    assert table["context_lens"].iloc[0] == "1..40 (mean 21)" and table["kind"].eq("ragged").all()
    # every peer's largest error against the float64 reference, and the sidecar of the run
    assert (table["max_abs_err"] < 2e-3).all() and table["max_abs_err"].notna().all()
    assert (meta["kind"], meta["set"], meta["peers"]) == ("peers", "classic", {})
    assert meta["command"].startswith("python -m benchmarks.decode_peers --head-dim 16")


@pytest.mark.skipif(not HAS_FP8_API, reason="the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
def test_whole_run_on_the_cpu_with_an_fp8_cache(on_cpu, tmp_path, capsys):
    table = run_on_cpu(tmp_path, "--kv-dtype", "both", "--impl", "triton", "sdpa_contiguous")
    printed = capsys.readouterr().out
    assert "sdpa_contiguous: no fp8 cache; they run on the 16-bit cache only" in printed
    assert list(zip(table["kv_dtype"], table["implementation"])) == [
        ("float16", "triton"), ("float16", "sdpa_contiguous"), ("float8_e4m3fn", "triton")]
    assert table["correct"].all() and table["status"].eq("ok").all()
    fp8 = table[table["kv_dtype"] == "float8_e4m3fn"].iloc[0]
    assert fp8["speedup_vs_triton_16bit"] == pytest.approx(1.0) and fp8["kv_scale"] == "per_tensor"
    qo = 2 * 3 * 4 * 16 * 2  # query and output: batch 3, 4 heads of 16, float16
    assert fp8["bytes_moved"] - qo == (table["bytes_moved"].iloc[0] - qo) / 2  # 1 byte per K or V element, not 2


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
    monkeypatch.setitem(configs.CONFIG_SETS, "classic", [("ragged", 4, (0, 1, 23, 40), {"num_heads": 4, "num_kv_heads": 2})])
    table = run_on_cpu(tmp_path, "--kv-dtype", kv, "--impl", "triton", "flashinfer", "flashinfer_tc")
    assert table["correct"].all() and table["status"].eq("ok").all()
    assert table["note"].str.startswith("backend fake").sum() == len(table) * 2 // 3
    if kv == "both":
        assert table["kv_dtype"].tolist() == ["float16"] * 3 + ["float8_e4m3fn"] * 3


@pytest.mark.skipif(not HAS_FP8_API, reason="the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
def test_flashinfer_skips_per_head_scales_and_float32(on_cpu, fake_flashinfer, tmp_path):
    table = run_on_cpu(tmp_path, "--kv-dtype", "float8_e4m3fn", "--kv-scale", "per_head", "--impl", "triton",
                       "flashinfer")
    row = table.set_index("implementation").loc["flashinfer"]
    assert row["status"] == "skipped" and pd.isna(row["gpu_time_ms"]) and "not per KV head" in row["note"]
    table = run_on_cpu(tmp_path, "--dtype", "float32", "--impl", "flashinfer")
    assert "float16 or bfloat16 queries" in table["note"].iloc[0]


def test_a_flashinfer_call_no_graph_captures_is_timed_plainly(on_cpu, fake_flashinfer, monkeypatch, tmp_path):
    def no_graph(fn, **kw):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(dp, "gpu_time", no_graph)
    table = run_on_cpu(tmp_path, "--impl", "triton", "flashinfer").set_index("implementation")
    assert table.loc["triton", "status"] == "failed"  # ours: a failure
    assert "RuntimeError: operation not permitted" in table.loc["triton", "note"]
    assert table.loc["flashinfer", "gpu_time_ms"] == table.loc["flashinfer", "median_ms"] == 0.02
    assert table.loc["flashinfer", "note"].startswith("backend fake; no CUDA graph (RuntimeError")


# -- --set prefix ------------------------------------------------------------------------

def test_prefix_set_holds_the_shapes_asked_for():
    args = cli.parse_args(["--set", "prefix"])
    assert args.dtype == ["float16"] and args.kv_dtype == ["same"]
    assert args.impl == ["triton", "triton_prefix", "sdpa_contiguous", "flashinfer_tc", "flashinfer_cascade"]
    shapes = [(b, over["shared_prefix"], lens - over["shared_prefix"], over["prefix_groups"])
              for kind, b, lens, over in args.configs]
    assert shapes == [(64, 8192, 256, 1), (32, 32768, 512, 1), (128, 2048, 128, 1), (16, 4096, 1024, 1),
                      (64, 4096, 256, 4), (32, 0, 2048, 1)]
    assert {kind for kind, *_ in args.configs} == {"prefix"}
    assert "triton_prefix" not in cli.parse_args([]).impl  # classic runs what it ran before


def test_cascade_indices_by_hand():
    # block 4; groups {0, 1} and {2, 3, 4}; prefix 9 tokens: 2 shared pages, the 9th token in each own block.
    tables = torch.tensor([
        [10, 11, 20, 21, -1],
        [10, 11, 22, -1, -1],
        [30, 31, 40, 41, 42],
        [30, 31, 43, 7, 7],  # junk past the needed blocks
        [30, 31, 44, 45, -1],
    ], dtype=torch.int32)
    lens = torch.tensor([14, 9, 20, 11, 13])
    levels = fi.cascade_page_indices(tables, lens, 4, 2, (0, 0, 1, 1, 1))
    as_lists = {key: [t.tolist() for t in value] for key, value in levels.items()}
    assert as_lists == {
        "qo_indptr": [[0, 2, 5], [0, 1, 2, 3, 4, 5]],
        "kv_indptr": [[0, 2, 4], [0, 2, 3, 6, 7, 9]],
        "kv_indices": [[10, 11, 30, 31], [20, 21, 22, 40, 41, 42, 43, 44, 45]],
        "kv_last_page_len": [[4, 4], [2, 1, 4, 3, 1]],
    }
    assert all(t.dtype == torch.int32 for value in levels.values() for t in value)
    # Nothing shared: one level, every sequence's pages.
    one = fi.cascade_page_indices(tables, lens, 4, 0, (0, 0, 1, 1, 1))
    assert [len(v) for v in one.values()] == [1, 1, 1, 1]
    assert one["kv_indptr"][0].tolist() == [0, 4, 7, 12, 15, 19]
    assert one["kv_last_page_len"][0].tolist() == [2, 1, 4, 3, 1]
    # A sequence that holds only the shared pages gets no own page and length 0.
    edge = fi.cascade_page_indices(tables[:2], torch.tensor([8, 9]), 4, 2, (0, 0))
    assert edge["kv_indptr"][1].tolist() == [0, 0, 1] and edge["kv_last_page_len"][1].tolist() == [0, 1]
    with pytest.raises(ValueError, match="non-decreasing"):
        fi.cascade_page_indices(tables, lens, 4, 2, (0, 1, 0, 1, 1))


@pytest.mark.parametrize("poison", [False, True])
def test_cascade_indices_cover_each_sequences_tokens_once(poison):
    cfg = DecodeConfig(batch_size=7, context_lens=(40, 37, 70, 23, 51, 35, 64), block_size=8, shared_prefix=21,
                       prefix_groups=3, num_heads=4, num_kv_heads=2, head_dim=8, seed=5)
    inputs = build_decode_inputs(cfg, poison=poison)
    levels = fi.cascade_page_indices(inputs.block_tables, inputs.context_lens, 8, cfg.shared_blocks,
                                     cfg.prefix_group_of)
    (qo0, qo1), (ip0, ip1), (ix0, ix1), (last0, last1) = levels.values()
    for b, n in enumerate(cfg.lengths):
        g = int(torch.searchsorted(qo0, b, right=True)) - 1  # the level-0 request whose rows hold b
        assert g == cfg.prefix_group_of[b]
        pages = torch.cat([ix0[ip0[g]:ip0[g + 1]], ix1[ip1[b]:ip1[b + 1]]]).long()
        keys = inputs.k_cache[pages].reshape(-1, 2, 8)
        own = (int(ip1[b + 1] - ip1[b]) - 1) * 8 + int(last1[b])
        shared = len(ix0[ip0[g]:ip0[g + 1]]) * 8
        assert shared + own == n
        keys = torch.cat([keys[:shared], keys[shared:shared + own]])
        t = torch.arange(n)
        assert torch.equal(keys, inputs.k_cache[inputs.block_tables[b, t // 8].long(), t % 8])


class FakeCascadeWrapper:
    """FlashInfer's MultiLevelCascadeAttentionWrapper as its documentation describes it, in
    float64 on the CPU: per level, each request's query rows attend over its pages; the
    levels' softmax states are merged."""

    def __init__(self, num_levels, workspace, kv_layout="NHD"):
        assert kv_layout == "NHD" and workspace.dtype == torch.uint8
        self.num_levels = num_levels

    def plan(self, qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size, causal=False, *, sm_scale, q_data_type, kv_data_type):
        assert len(qo_indptr_arr) == self.num_levels and not causal
        self.levels = list(zip(qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr, paged_kv_last_page_len))
        self.kvh, self.page_size, self.sm_scale = num_kv_heads, page_size, sm_scale
        self.dtypes = (q_data_type, kv_data_type)

    def run(self, q, paged_kv_cache):
        k_cache, v_cache = paged_kv_cache
        assert (q.dtype, k_cache.dtype) == self.dtypes
        b, h, d = q.shape
        num = torch.zeros(b, h, d, dtype=torch.float64)
        den = torch.zeros(b, h, dtype=torch.float64)
        top = torch.full((b, h), -torch.inf, dtype=torch.float64)
        for qo, indptr, indices, last in self.levels:
            for r in range(len(qo) - 1):
                pages = indices[indptr[r]:indptr[r + 1]].long()
                n = 0 if len(pages) == 0 else (len(pages) - 1) * self.page_size + int(last[r])
                if n == 0:
                    continue
                k = k_cache[pages].reshape(-1, self.kvh, d)[:n].double()
                v = v_cache[pages].reshape(-1, self.kvh, d)[:n].double()
                for row in range(int(qo[r]), int(qo[r + 1])):
                    s = torch.einsum("kgd,nkd->kgn", q[row].double().reshape(self.kvh, -1, d), k).reshape(h, n)
                    s = s * self.sm_scale
                    new_top = torch.maximum(top[row], s.max(-1).values)
                    fix = torch.exp(top[row] - new_top)
                    p = torch.exp(s - new_top[:, None])
                    vv = v.repeat_interleave(h // self.kvh, dim=1).transpose(0, 1)  # [h, n, d]
                    num[row] = num[row] * fix[:, None] + torch.einsum("hn,hnd->hd", p, vv)
                    den[row] = den[row] * fix + p.sum(-1)
                    top[row] = new_top
        return (num / den[..., None]).to(q.dtype)


@pytest.fixture
def prefix_on_cpu(on_cpu, monkeypatch):
    """``--set prefix`` with tiny sizes: a shared prefix ending inside a block, two groups,
    and a control with nothing shared."""
    small = {"num_heads": 4, "num_kv_heads": 2}
    monkeypatch.setitem(configs.CONFIG_SETS, "prefix", [
        ("prefix", 5, 40, {"shared_prefix": 21, "prefix_groups": 2, **small}),
        ("prefix", 3, 30, {"shared_prefix": 0, "prefix_groups": 1, **small}),
    ])
    module = types.ModuleType("flashinfer")
    module.__version__ = "fake"
    module.BatchDecodeWithPagedKVCacheWrapper = FakeDecodeWrapper
    module.MultiLevelCascadeAttentionWrapper = FakeCascadeWrapper
    monkeypatch.setitem(sys.modules, "flashinfer", module)


def test_prefix_set_on_the_cpu(prefix_on_cpu, tmp_path, capsys):
    table = run_on_cpu(tmp_path, "--set", "prefix")
    printed = capsys.readouterr().out
    assert "GB/s and fraction of copy count UNIQUE bytes" in printed
    assert table["implementation"].tolist() == cli.SET_DEFAULTS["prefix"][2] * 2
    ran = table.dropna(subset=["gpu_time_ms"])
    assert ran["correct"].all()
    assert not table["status"].eq("failed").any()
    # The prefix-aware kernel runs, or is skipped with a note on a library without it.
    prefix_rows = table[table["implementation"] == "triton_prefix"]
    assert prefix_rows["correct"].eq(True).all() or prefix_rows["note"].str.contains("not available").all()
    assert set(ran["implementation"]) >= {"triton", "sdpa_contiguous", "flashinfer_tc", "flashinfer_cascade"}
    first, control = table.iloc[0], table.iloc[-1]
    per_token = 2 * 2 * 16 * 2  # K and V, 2 heads of 16, float16, in bytes
    qo = 2 * 5 * 4 * 16 * 2  # the query and the output
    assert first["bytes_moved"] == 5 * 40 * per_token + qo
    assert first["unique_bytes"] == (5 * 40 - 3 * 16) * per_token + qo  # 1 shared block, 5 members, 2 groups
    assert control["bytes_moved"] == control["unique_bytes"]
    assert (first["shared_prefix"], first["prefix_groups"]) == (21, 2)
    # GB/s from the unique bytes over the GPU time, and its share of the copy bandwidth (none on the CPU)
    assert first["gpu_unique_gbps"] == pytest.approx(first["unique_bytes"] / 1e6 / 0.01)  # MB per ms is GB/s
    assert pd.isna(first["pct_of_copy_bw"])
