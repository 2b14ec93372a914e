"""The benchmark command line: bad flags refused before running, one small configuration run end to end."""

from __future__ import annotations


import pytest


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
    table = out.read_text()
    assert table.count("yes") == 3 and "Triton" in table
