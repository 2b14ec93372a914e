"""benchmarks.decode_peers' attention options (--window, --soft-cap, --sinks, --set
options) and its XQA peer without a GPU: the flags, SDPA's mask against a float64
hand computation, XQA's block table, the option columns of the CSV, and the whole
loop on the CPU through fakes of FlashInfer's decode wrapper and XQA call, written
as FlashInfer 0.7.4's sources describe them."""

from __future__ import annotations

import math
import sys
import types

import pandas as pd
import pytest
import torch

from benchmarks import decode_peers as dp
from benchmarks.report import peers_table
from benchmarks.peers import Skipped, cli, configs
from benchmarks.peers.implementations import XQA
from benchmarks.peers.options import OPTION_PASSES, AttentionOptions, sink_logits
from benchmarks.peers.torch_peers import sdpa_bias, sdpa_contiguous
from benchmarks.peers.xqa import XQA_WORKSPACE_BYTES, xqa_block_table
from paged_attention import DecodeConfig, build_decode_inputs
from paged_attention.result_files import read_results, write_results
from paged_attention.results import result_row, status_row
from paged_attention.validation import check_decode_args

HAS_FP8_API = "kv_dtype" in DecodeConfig.__dataclass_fields__


def hand_decode(q, k_cache, v_cache, tables, lens, *, scale=None, k_scale=None, v_scale=None, window=None,
                soft_cap=None, sinks=None):
    """Decode with the attention options, in float64, one sequence and head at a time:
    the definitions of benchmarks/peers/options.py written out."""
    b, h, d = q.shape
    bs, kvh = k_cache.shape[1], k_cache.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(b, h, d, dtype=torch.float64)
    for i in range(b):
        n = int(lens[i])
        t = torch.arange(max(0, n - window) if window else 0, n)
        blocks = tables[i, t // bs].long()
        for j in range(h):
            k = k_cache[blocks, t % bs, j // (h // kvh)].double() * (1.0 if k_scale is None else float(k_scale))
            v = v_cache[blocks, t % bs, j // (h // kvh)].double() * (1.0 if v_scale is None else float(v_scale))
            s = scale * (k @ q[i, j].double())
            if soft_cap:
                s = soft_cap * torch.tanh(s / soft_cap)
            terms = [float(x) for x in s] + ([float(sinks[j])] if sinks is not None else [])
            if not terms:
                continue
            top = max(terms)
            p = torch.exp(s - top)
            den = float(p.sum()) + (math.exp(float(sinks[j]) - top) if sinks is not None else 0.0)
            out[i, j] = (p[:, None] * v).sum(0) / den
    return out


# -- the flags -----------------------------------------------------------------------------

def test_option_flags_give_one_pass():
    args = cli.parse_args(["--window", "128", "--soft-cap", "30", "--sinks"])
    assert args.passes == (AttentionOptions(window=128, soft_cap=30.0, sinks=True),)
    assert cli.parse_args([]).passes == (AttentionOptions(),) and not cli.parse_args([]).passes[0].any
    assert XQA in cli.parse_args([]).impl and XQA in cli.parse_args(["--set", "fp8"]).impl
    assert XQA in cli.parse_args(["--set", "ragged"]).impl


def test_options_set_runs_the_classic_configurations_once_per_pass():
    args = cli.parse_args(["--set", "options"])
    assert args.configs == configs.CONFIGS and args.dtype == ["float16"] and args.kv_dtype == ["same"]
    assert [(o.window, o.soft_cap, o.sinks) for o in args.passes] == [
        (None, None, False), (4096, None, False), (1024, None, False), (128, None, False), (None, 50.0, False),
        (None, None, True)]
    assert args.passes == OPTION_PASSES
    assert {"triton", "sdpa_contiguous", "flashinfer", "flashinfer_tc", XQA} <= set(args.impl)


@pytest.mark.parametrize("argv, message", [
    (["--set", "options", "--window", "64"], "--set options runs its own windows, soft cap and sinks; drop --window"),
    (["--set", "options", "--sinks"], "drop --sinks"),
    (["--window", "0"], "window must be a whole number of tokens, at least 1"),
    (["--soft-cap", "-2"], "soft_cap must be positive"),
    (["--soft-cap", "nan"], "soft_cap must be positive"),
])
def test_bad_option_flags_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        cli.parse_args(argv)
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_options_keywords_and_sinks_are_the_same_every_time():
    assert AttentionOptions().kwargs(4, "cpu") == {}
    kw = AttentionOptions(window=7, soft_cap=50, sinks=True).kwargs(4, "cpu")
    assert (kw["window"], kw["soft_cap"]) == (7, 50.0) and isinstance(kw["soft_cap"], float)
    assert kw["sinks"].dtype == torch.float32 and kw["sinks"].shape == (4,)
    assert torch.equal(kw["sinks"], sink_logits(4, "cpu")) and kw["sinks"].std() > 0.1  # drawn, not constant
    assert AttentionOptions(window=7, soft_cap=50, sinks=True).text() == "window 7, soft cap 50, sinks"
    assert AttentionOptions().text() == ""


# -- SDPA's mask ---------------------------------------------------------------------------

def test_sdpa_bias_by_hand():
    inf = -math.inf
    sinks = torch.tensor([0.5, -1.0])
    bias = sdpa_bias(torch.tensor([2, 4]), 4, 1, 2, window=3, sinks=sinks)
    assert bias.shape == (2, 1, 2, 5) and bias.dtype == torch.float32
    assert bias[0, 0].tolist() == [[0, 0, inf, inf, 0.5], [0, 0, inf, inf, -1.0]]
    assert bias[1, 0].tolist() == [[inf, 0, 0, 0, 0.5], [inf, 0, 0, 0, -1.0]]
    only_window = sdpa_bias(torch.tensor([2, 4]), 4, 1, 2, window=3)
    assert only_window.shape == (2, 1, 1, 4) and only_window[:, 0, 0].tolist() == [[0, 0, inf, inf], [inf, 0, 0, 0]]
    # two KV heads of two query heads each: head h = kv * group + g holds sinks[h]
    four = sdpa_bias(torch.tensor([1]), 1, 2, 2, sinks=torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert four[0, :, :, 1].tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.fixture(scope="module")
def small():
    """A ragged float32 batch with NaN past every context: windows cut inside blocks."""
    cfg = DecodeConfig(batch_size=3, context_lens=(1, 6, 11), num_heads=4, num_kv_heads=2, head_dim=8, block_size=4,
                       dtype="float32", device="cpu", seed=11, block_layout="shuffled")
    inputs = build_decode_inputs(cfg, poison=True)
    return inputs, check_decode_args(*inputs.args())


@pytest.mark.parametrize("window, sinks", [(3, False), (None, True), (4, True), (100, True)])
def test_sdpa_with_a_window_and_sinks_matches_the_hand_computation(small, window, sinks):
    inputs, shape = small
    attn = AttentionOptions(window=window, sinks=sinks).kwargs(shape.num_heads, "cpu")
    run = sdpa_contiguous(inputs, shape, attn)
    want = hand_decode(*inputs.args(), window=window, sinks=attn.get("sinks"))
    assert torch.allclose(run().double(), want, atol=2e-6, rtol=1e-5)
    assert run.note.startswith("window or sinks as an additive float mask")
    # the options change the answer: the test would catch a mask that does nothing
    assert (hand_decode(*inputs.args()) - want).abs().max() > 1e-3


def test_sdpa_skips_a_soft_cap_and_the_other_torch_peers_every_option(small):
    inputs, shape = small
    with pytest.raises(Skipped, match="^SDPA takes no logit soft cap$"):
        sdpa_contiguous(inputs, shape, {"soft_cap": 30.0})
    from benchmarks.peers.torch_peers import flex_paged, gather_sdpa

    for setup in (gather_sdpa, flex_paged):
        with pytest.raises(Skipped, match="sliding window"):
            setup(inputs, shape, {"window": 3})


# -- XQA's block table ---------------------------------------------------------------------

def test_xqa_block_table_by_hand():
    tables = torch.tensor([[3, -1, -1], [5, 6, -1], [9, 9, 9]], dtype=torch.int64)
    before = tables.clone()
    table = xqa_block_table(tables, torch.tensor([4, 5, 0]), 4)
    assert table.dtype == torch.int32 and table.is_contiguous()
    assert table.tolist() == [[3, 0], [5, 6], [0, 0]]
    assert torch.equal(tables, before)  # a copy: our table is not touched
    assert xqa_block_table(tables, torch.tensor([0, 0, 0]), 4).tolist() == [[0], [0], [0]]


@pytest.mark.parametrize("poison", [False, True])
def test_xqa_block_table_keeps_each_contexts_blocks_and_only_valid_ids(poison):
    lens = (0, 1, 37, 16, 33)
    cfg = DecodeConfig(batch_size=len(lens), context_lens=lens, num_heads=4, num_kv_heads=2, head_dim=8,
                       block_size=16, device="cpu", seed=3, block_layout="shuffled")
    inputs = build_decode_inputs(cfg, poison=poison)
    table = xqa_block_table(inputs.block_tables, inputs.context_lens, 16)
    assert table.shape == (len(lens), 3)
    assert 0 <= int(table.min()) and int(table.max()) < cfg.num_blocks
    for b, n in enumerate(lens):
        needed = -(-n // 16)
        assert table[b, :needed].tolist() == inputs.block_tables[b, :needed].tolist()
        assert table[b, needed:].eq(0).all()


# -- the CSV -------------------------------------------------------------------------------

def test_option_columns_round_trip_and_older_files_read_as_no_options(tmp_path, small):
    inputs, _ = small
    cfg = inputs.config
    ran = {"name": "triton", "label": "Triton", "median_ms": 0.5, "gpu_time_ms": 0.25, "bytes_moved": 1000,
           "gbps": 0.002, "gpu_gbps": 0.004, "max_abs_err": 1e-7, "passed": True}
    rows = [result_row(ran, cfg, window=128, soft_cap=50.0, sinks=True),
            status_row("flashinfer", "FlashInfer", "skipped", cfg, note="no sinks", sinks=True),
            result_row(ran, cfg)]
    back, _ = read_results(write_results(rows, tmp_path / "o.csv", None))
    assert [(r["window"], r["soft_cap"], r["sinks"]) for r in back] == [(128, 50.0, True), (None, None, True),
                                                                         (None, None, False)]
    assert type(back[0]["window"]) is int and type(back[0]["soft_cap"]) is float
    old = tmp_path / "old.csv"
    old.write_text("implementation,batch_size,median_ms,correct\ntriton,2,0.5,True\n")
    (row,), _ = read_results(old)
    assert (row["window"], row["soft_cap"], row["sinks"]) == (None, None, False)


# -- the whole loop through fakes ----------------------------------------------------------

class FakeDecodeWrapper:
    """FlashInfer's BatchDecodeWithPagedKVCacheWrapper with its window and soft cap, in
    float64: keeps kv_idx + window_left >= kv_len - 1, logits cap * tanh(sm_scale *
    k_scale * q.k / cap) (0.7.4's variants.cuh), output times v_scale."""

    def __init__(self, workspace, kv_layout, use_tensor_cores=False):
        assert kv_layout == "NHD" and workspace.dtype == torch.uint8
        self.resolved_backend = "fake"

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, *,
             q_data_type, kv_data_type, sm_scale, window_left=-1, logits_soft_cap=None):
        self.a = dict(indptr=indptr, indices=indices, last=last_page_len, kvh=num_kv_heads, page_size=page_size,
                      sm_scale=sm_scale, window_left=window_left, cap=logits_soft_cap or 0.0)

    def run(self, q, paged_kv_cache, *, out, k_scale=None, v_scale=None):
        a = self.a
        k_cache, v_cache = paged_kv_cache
        kvh, d = a["kvh"], q.shape[-1]
        for b in range(q.shape[0]):
            pages = a["indices"][a["indptr"][b]:a["indptr"][b + 1]].long()
            n = 0 if len(pages) == 0 else (len(pages) - 1) * a["page_size"] + int(a["last"][b])
            k = k_cache[pages].reshape(-1, kvh, d)[:n].double()
            v = v_cache[pages].reshape(-1, kvh, d)[:n].double()
            s = torch.einsum("kgd,nkd->kgn", q[b].double().reshape(kvh, -1, d), k) * a["sm_scale"] * (k_scale or 1.0)
            if a["cap"] > 0:
                s = a["cap"] * torch.tanh(s / a["cap"])
            if a["window_left"] >= 0:
                s[..., torch.arange(n) + a["window_left"] < n - 1] = -torch.inf
            out[b] = (torch.einsum("kgn,nkd->kgd", s.softmax(-1), v) * (v_scale or 1.0)).reshape(-1, d)
        return out


def fake_xqa(query, kv_cache, workspace_buffer, block_tables, seq_lens, max_seq_len, bmm1_scale=1.0, bmm2_scale=1.0,
             window_left=-1, out=None, sinks=None, kv_layout="HND", backend="auto"):
    """trtllm_batch_decode_with_kv_cache(..., backend="xqa") in float64, with its
    preconditions: a zeroed uint8 workspace, an int32 table of valid ids to its last
    column, int32 lengths, float32 sinks per query head; logits bmm1_scale * q.k, the
    last window_left + 1 tokens, exp(sink) in the denominator, output bmm2_scale * p.v."""
    assert backend == "xqa" and kv_layout == "NHD" and isinstance(kv_cache, tuple)
    assert workspace_buffer.dtype == torch.uint8 and workspace_buffer.numel() == XQA_WORKSPACE_BYTES
    assert not workspace_buffer.any()
    k_cache, v_cache = kv_cache
    assert block_tables.dtype == seq_lens.dtype == torch.int32 and block_tables.is_contiguous()
    assert 0 <= int(block_tables.min()) and int(block_tables.max()) < k_cache.shape[0]
    assert max_seq_len == int(seq_lens.max())
    bs, kvh, d = k_cache.shape[1], k_cache.shape[2], query.shape[-1]
    h = query.shape[1]
    assert sinks is None or (sinks.dtype == torch.float32 and sinks.shape == (h,))
    for b in range(query.shape[0]):
        n = int(seq_lens[b])
        t = torch.arange(max(0, n - window_left - 1) if window_left >= 0 else 0, n)
        k = k_cache[block_tables[b, t // bs].long(), t % bs].double().repeat_interleave(h // kvh, dim=1)
        v = v_cache[block_tables[b, t // bs].long(), t % bs].double().repeat_interleave(h // kvh, dim=1)
        s = torch.einsum("hd,nhd->hn", query[b].double(), k) * bmm1_scale
        if sinks is not None:
            s = torch.cat([s, sinks.double()[:, None]], dim=1)
            v = torch.cat([v, v.new_zeros(1, h, d)])
        out[b] = torch.einsum("hn,nhd->hd", s.softmax(-1), v) * bmm2_scale
    return out


@pytest.fixture
def on_cpu(monkeypatch):
    """The whole loop on the CPU through the fakes; the reference with options is the
    hand computation (paged_attention's reference may not take them yet)."""
    monkeypatch.setattr(dp, "DEVICE", "cpu")
    monkeypatch.setattr(dp, "gpu_time", lambda fn, **kw: 0.01)
    monkeypatch.setattr(dp, "time_calls", lambda fn, **kw: [0.02])
    small = {"num_heads": 4, "num_kv_heads": 2}
    monkeypatch.setitem(configs.CONFIG_SETS, "classic", [("ragged", 3, (1, 23, 40), small)])
    monkeypatch.setitem(configs.CONFIG_SETS, "options", [("small", 2, 40, small)])
    monkeypatch.setattr(dp, "reference_decode", hand_decode)
    module = types.ModuleType("flashinfer")
    module.__version__ = "fake"
    module.BatchDecodeWithPagedKVCacheWrapper = FakeDecodeWrapper
    module.decode = types.SimpleNamespace(trtllm_batch_decode_with_kv_cache=fake_xqa)
    monkeypatch.setitem(sys.modules, "flashinfer", module)


def run_on_cpu(tmp_path, *flags):
    out = tmp_path / "peers.csv"
    assert dp.main(["--head-dim", "16", "--dtype", "float16", "--call-iters", "1", "--out", str(out), *flags]) == 0
    rows, meta = read_results(out)
    return pd.DataFrame(rows).set_index("implementation"), meta


IMPLS = ["triton", "sdpa_contiguous", "flashinfer", XQA]


def ours_ran_or_waits(row):
    """Our row: correct, or skipped on a library that takes no option keywords yet."""
    return (row["status"] == "ok" and row["correct"]) or (
        row["status"] == "skipped" and row["note"].startswith("not in this library yet"))


def test_a_window_and_sinks_reach_every_peer_that_takes_them(on_cpu, tmp_path, capsys):
    table, meta = run_on_cpu(tmp_path, "--window", "9", "--sinks", "--impl", *IMPLS)
    assert "attention options, a pass over the configurations each: window 9, sinks" in capsys.readouterr().out
    assert meta["options"] == ["window 9, sinks"]
    assert table["window"].eq(9).all() and table["sinks"].eq(True).all() and table["soft_cap"].isna().all()
    for name in ("sdpa_contiguous", XQA):
        assert table.loc[name, "status"] == "ok" and table.loc[name, "correct"], name
    assert table.loc[XQA, "note"] == "backend xqa"
    assert table.loc["flashinfer", "status"] == "skipped" and "attention sinks" in table.loc["flashinfer", "note"]
    assert ours_ran_or_waits(table.loc["triton"])


def test_a_window_and_a_soft_cap_reach_flashinfers_wrapper(on_cpu, tmp_path):
    table, _ = run_on_cpu(tmp_path, "--window", "30", "--soft-cap", "0.5", "--impl", *IMPLS)
    assert table.loc["flashinfer", "status"] == "ok" and table.loc["flashinfer", "correct"]
    assert table.loc["flashinfer", "max_abs_err"] < 2e-3
    for name, what in (("sdpa_contiguous", "logit soft cap"), (XQA, "logit soft cap")):
        assert table.loc[name, "status"] == "skipped" and what in table.loc[name, "note"], name
    assert table["window"].eq(30).all() and table["soft_cap"].eq(0.5).all() and table["sinks"].eq(False).all()
    assert ours_ran_or_waits(table.loc["triton"])


@pytest.mark.skipif(not HAS_FP8_API, reason="the library's fp8 KV cache (DecodeConfig.kv_dtype) is not in yet")
def test_xqa_on_an_fp8_cache_with_sinks(on_cpu, tmp_path):
    out = tmp_path / "peers.csv"
    assert dp.main(["--head-dim", "16", "--dtype", "float16", "--call-iters", "1", "--out", str(out),
                    "--kv-dtype", "both", "--sinks", "--impl", "triton", XQA]) == 0
    table = pd.DataFrame(read_results(out)[0])
    xqa = table[table["implementation"] == XQA]
    assert xqa["kv_dtype"].tolist() == ["float16", "float8_e4m3fn"]
    assert xqa["status"].eq("ok").all() and xqa["correct"].all()


def test_options_set_through_the_fakes(on_cpu, tmp_path):
    out = tmp_path / "peers.csv"
    assert dp.main(["--set", "options", "--head-dim", "16", "--call-iters", "1", "--out", str(out),
                    "--impl", *IMPLS]) == 0
    table = pd.DataFrame(read_results(out)[0])
    assert len(table) == len(OPTION_PASSES) * len(IMPLS)
    passes = table.drop_duplicates(["window", "soft_cap", "sinks"])
    assert len(passes) == len(OPTION_PASSES)
    peers = table[table["implementation"] != "triton"]
    ran = peers[peers["status"] == "ok"]
    assert ran["correct"].all() and not table["status"].eq("failed").any()
    # each peer runs the options it takes and skips the others with a note
    assert (peers["status"] == "skipped").sum() == 3  # FlashInfer's sinks, SDPA's and XQA's soft cap
    assert ours_ran_or_waits(table[table["implementation"] == "triton"].iloc[0])
    # the doc table from the one run: a row per configuration and options, each against the plain pass
    lines = peers_table(str(out)).splitlines()
    assert len(lines) == 2 + len(OPTION_PASSES)
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["small float16 B=2 ctx=40 bs=16 H=4 D=16"] + [
        f"small float16 B=2 ctx=40 bs=16 H=4 D=16 [{o.text()}]" for o in OPTION_PASSES[1:]]
    assert "10.0 us, " in lines[2] and "plain" not in lines[2]
    assert lines[-1].count("x1.00 plain") >= 1 and "skipped" in lines[-1]  # sinks: FlashInfer's wrapper skips
