"""The benchmark command line: bad flags refused before running, one small configuration run end to end."""

from __future__ import annotations


import pytest

from paged_attention import LABELS
from paged_attention.result_files import read_results


@pytest.mark.parametrize(
    "argv, rule",
    [
        (["--impl", "foo"], "is not an implementation"),
        (["--iters", "0"], "--iters must be at least 1"),
        (["--batch-size", "0", "--context-len", "5"], "batch_size must be a positive integer"),
        (["--batch-size", "4", "--context-len", "3", "5"], "one length or one per sequence"),
        (["--csv", "/nonexistent/dir/out.csv", "--batch-size", "1", "--context-len", "8"], "not writable"),
        (["--batch-size", "100000", "--context-len", "100000"], "GB is free"),
        (["--num-heads", "6", "--num-kv-heads", "4", "--batch-size", "1"], "multiple of num_kv_heads"),
        (["--window", "0", "--batch-size", "1"], "window must be an integer >= 1"),
        (["--soft-cap", "-2", "--batch-size", "1"], "soft_cap must be a finite number > 0"),
        (["--soft-cap", "inf", "--batch-size", "1"], "soft_cap must be a finite number > 0"),
    ],
)
def test_bench_cli_rejects_bad_flags_before_running(argv, rule, capsys):
    from paged_attention import bench

    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert rule in err and "Traceback" not in err


def test_bench_cli_runs_one_small_config(tmp_path, capsys):
    from paged_attention import bench

    out = tmp_path / "r.csv"
    argv = ["--batch-size", "2", "--context-len", "5", "17", "--num-heads", "4", "--num-kv-heads", "2",
            "--head-dim", "16", "--iters", "1", "--warmup", "0", "--csv", str(out)]
    assert bench.main(argv) == 0
    rows, meta = read_results(out)
    assert [(r["implementation"], r["label"]) for r in rows] == [(n, LABELS[n]) for n in ("naive", "vectorized", "triton")]
    assert all(r["correct"] and r["status"] == "ok" and r["median_ms"] > 0 for r in rows)
    assert all(r["context_lens"] == "5..17 (mean 11)" and (r["batch_size"], r["context_len"]) == (2, 17) for r in rows)
    assert all(r["bytes_moved"] == r["unique_bytes"] > 0 and r["max_abs_err"] < 2e-3 for r in rows)
    # no GPU: no GPU time nor copy bandwidth, so no fraction of it
    assert all(r["gpu_time_ms"] is None and r["pct_of_copy_bw"] is None for r in rows)
    assert meta["kind"] == "classic" and meta["gpu"] == "cpu" and meta["command"].endswith(f"--csv {out}")
    header = out.read_text().splitlines()[0].split(",")
    assert header.index("host_us") == header.index("gpu_p80_ms") + 1  # beside call latency and GPU time


def test_bench_cli_passes_the_attention_options(tmp_path, monkeypatch):
    """--window, --soft-cap and --sinks reach the configuration, the inputs and so every
    implementation and the reference; the bytes count the window's tokens only."""
    from paged_attention import bench

    seen = []
    real = bench.benchmark_implementations
    monkeypatch.setattr(bench, "benchmark_implementations",
                        lambda names, inputs, **kw: seen.append(inputs) or real(names, inputs, **kw))
    out = tmp_path / "r.csv"
    argv = ["--batch-size", "2", "--context-len", "40", "9", "--num-heads", "4", "--num-kv-heads", "2",
            "--head-dim", "16", "--window", "13", "--soft-cap", "2.5", "--sinks", "--impl", "naive", "vectorized",
            "--iters", "1", "--warmup", "0", "--csv", str(out)]
    assert bench.main(argv) == 0
    (inputs,) = seen
    assert (inputs.config.window, inputs.config.soft_cap, inputs.config.sinks) == (13, 2.5, True)
    assert set(inputs.options()) == {"window", "sinks", "soft_cap"} and inputs.sinks.shape == (4,)
    rows, _ = read_results(out)
    assert all(r["correct"] and r["max_abs_err"] < 2e-3 for r in rows)
    assert rows[0]["bytes_moved"] == inputs.config.decode_bytes() < inputs.config.with_(window=None).decode_bytes()


def test_results_count_logical_and_unique_bytes_of_a_shared_prefix():
    from paged_attention import DecodeConfig, build_decode_inputs
    from paged_attention.bench import benchmark_implementations
    from paged_attention.results import achieved_gbps, shares_kv

    config = DecodeConfig(batch_size=4, context_lens=(70, 64, 99, 64), num_heads=4, num_kv_heads=2, head_dim=32,
                          block_size=16, shared_prefix=40, prefix_groups=2)
    inputs = build_decode_inputs(config)
    plain, prefix = benchmark_implementations(["triton", "triton_prefix"], inputs, warmup=0, iters=1)
    for r in (plain, prefix):
        assert r.passed and shares_kv(r)
        assert (r.bytes_moved, r.unique_bytes) == (config.decode_bytes(), config.unique_decode_bytes())
        assert r.unique_gbps == pytest.approx(r.gbps * r.unique_bytes / r.bytes_moved)
        assert achieved_gbps(r, unique=True) == r.unique_gbps  # no GPU time on the CPU
    alone = benchmark_implementations(["vectorized"], build_decode_inputs(config.with_(shared_prefix=0)),
                                      warmup=0, iters=1)[0]
    assert not shares_kv(alone) and alone.unique_bytes == alone.bytes_moved


def test_bench_cli_runs_a_shared_prefix(tmp_path):
    from paged_attention import bench

    out = tmp_path / "r.csv"
    argv = ["--batch-size", "4", "--context-len", "64", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "32",
            "--shared-prefix", "32", "--prefix-groups", "2", "--impl", "vectorized", "triton_prefix",
            "--iters", "1", "--warmup", "0", "--csv", str(out)]
    assert bench.main(argv) == 0
    rows, _ = read_results(out)
    assert [r["label"] for r in rows] == ["Optimized PyTorch", "Triton (prefix-aware)"]
    for r in rows:
        assert (r["shared_prefix"], r["prefix_groups"]) == (32, 2) and r["unique_bytes"] < r["bytes_moved"]
        assert r["unique_gbps"] == pytest.approx(r["unique_bytes"] / r["median_ms"] / 1e6)


def test_a_budget_reaches_the_harness_and_keeps_the_minimum():
    from paged_attention import DecodeConfig, build_decode_inputs
    from paged_attention.bench import benchmark_implementations

    inputs = build_decode_inputs(DecodeConfig(batch_size=2, context_lens=(5, 30), num_heads=4, num_kv_heads=2,
                                              head_dim=16))
    (result,) = benchmark_implementations(["vectorized"], inputs, warmup=0, iters=3, budget_s=0.0)
    assert len(result.samples_ms) == 3 and result.host_ms is None  # no host time on the CPU


@pytest.mark.gpu
def test_gpu_benchmark_reports_host_time_of_the_prepared_calls():
    from paged_attention import DecodeConfig, build_decode_inputs
    from paged_attention.bench import benchmark_implementations

    inputs = build_decode_inputs(DecodeConfig(batch_size=2, context_lens=300, device="cuda"))
    results = benchmark_implementations(["naive", "vectorized", "triton", "triton_prefix"], inputs, warmup=2,
                                        iters=5)
    by_name = {r.name: r for r in results}
    assert by_name["naive"].host_ms is None and by_name["naive"].gpu_time_ms is None  # it synchronises
    for name in ("vectorized", "triton", "triton_prefix"):
        r = by_name[name]
        assert r.passed and r.host_ms > 0 and r.gpu_time_ms > 0
