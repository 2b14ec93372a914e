"""benchmarks.launch_overhead without a GPU: its flags, and the whole loop on the CPU
(Triton interpreted, a tiny configuration; its timings are real, asserted only to be there)."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest

from benchmarks import launch_overhead as lo
from benchmarks.peers.flashinfer import FLASHINFER_MISSING
from paged_attention.samples import FASTER, INDISTINGUISHABLE, SLOWER
from test_decode_peers_cli import FakeDecodeWrapper


def test_flags_and_defaults():
    args = lo.parse_args([])
    assert args.impl == list(lo.IMPLS) and args.host_calls == 2000 and args.budget == 10.0
    assert lo.CONFIGS == [(2, 60), (1, 512), (16, 256), (4, 2048), (1, 32768)]
    assert lo.parse_args(["--impl", "triton", "triton", "vectorized:eager"]).impl == ["triton", "vectorized:eager"]


@pytest.mark.parametrize("argv", [["--host-calls", "0"], ["--min-rounds", "0"], ["--budget", "-1"],
                                  ["--impl", "naive"]])
def test_bad_flags_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as done:
        lo.parse_args(argv)
    assert done.value.code == 2


@pytest.fixture
def on_cpu(monkeypatch):
    monkeypatch.setattr(lo, "DEVICE", "cpu")
    monkeypatch.setattr(lo, "CONFIGS", [(2, 23)])
    monkeypatch.setitem(lo.BASE, "num_heads", 4)
    monkeypatch.setitem(lo.BASE, "num_kv_heads", 2)
    monkeypatch.setitem(lo.BASE, "head_dim", 16)
    monkeypatch.setitem(sys.modules, "flashinfer", None)


def run_on_cpu(tmp_path, *impls):
    out = tmp_path / "launch.csv"
    argv = ["--impl", *impls, "--host-calls", "1", "--min-rounds", "2", "--budget", "0", "--warmup", "0",
            "--out", str(out)]
    assert lo.main(argv) == 0
    return pd.read_csv(out)


def test_whole_run_on_the_cpu(on_cpu, tmp_path, capsys):
    table = run_on_cpu(tmp_path, "triton", "vectorized", "vectorized:eager", "sdpa_contiguous", "flashinfer")
    printed = capsys.readouterr().out
    assert FLASHINFER_MISSING in printed and "host time over 1 back-to-back calls" in printed
    assert table["impl"].tolist() == ["triton", "vectorized", "vectorized:eager", "sdpa_contiguous"]
    assert table["correct"].all() and (table["rounds"] == 2).all()
    assert (table["host_calls"] == lo.HOST_BATCH).all() and (table["host_us"] > 0).all()
    assert not table["graphed"].fillna(False).any()  # no CUDA graphs on the CPU
    assert "gpu_ms" not in table  # nor GPU time


def test_fake_flashinfer_row_and_the_verdicts(on_cpu, monkeypatch, tmp_path, capsys):
    module = types.ModuleType("flashinfer")
    module.__version__ = "fake"
    module.BatchDecodeWithPagedKVCacheWrapper = FakeDecodeWrapper
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    table = run_on_cpu(tmp_path, "triton", "flashinfer")
    assert table["impl"].tolist() == ["triton", "flashinfer"] and table["correct"].all()
    assert "Our Triton call latency against each peer's" in capsys.readouterr().out
    judged = lo.verdicts(table)
    assert judged["peer"].tolist() == ["flashinfer"] and judged["triton_is"].iloc[0] in (FASTER, SLOWER,
                                                                                          INDISTINGUISHABLE)


def test_verdicts_by_hand():
    table = pd.DataFrame([
        dict(batch=1, context=8, impl="triton", call_ms=1.0, call_p20_ms=0.9, call_p80_ms=1.1),
        dict(batch=1, context=8, impl="sdpa_contiguous", call_ms=2.0, call_p20_ms=1.9, call_p80_ms=2.1),
        dict(batch=1, context=8, impl="flashinfer", call_ms=1.05, call_p20_ms=1.0, call_p80_ms=1.2),
    ])
    judged = lo.verdicts(table).set_index("peer")["triton_is"].to_dict()
    assert judged == {"flashinfer": INDISTINGUISHABLE, "sdpa_contiguous": FASTER}
