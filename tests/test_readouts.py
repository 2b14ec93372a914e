"""Readouts of a configuration and its benchmark results: the memory summary, the config label, the results rows."""

from types import SimpleNamespace

import pytest

from explorer.bench import readouts
from paged_attention import DecodeConfig


def test_memory_summary_matches_config():
    config = DecodeConfig(batch_size=3, context_lens=(5, 16, 40), block_size=16, num_heads=4, num_kv_heads=2, head_dim=8)
    m = readouts.memory_summary(config)
    assert m.blocks_used == 1 + 1 + 3
    assert m.wasted_slots == 5 * 16 - 61
    assert m.kv_cache_bytes == config.kv_cache_bytes()
    assert m.wasted_fraction == pytest.approx(19 / 80)


def test_config_summary():
    text = readouts.config_summary(DecodeConfig(batch_size=2, context_lens=(10, 30), dtype="bfloat16"))
    assert "B=2" in text and "ctx=10-30" in text and "bfloat16" in text


def test_config_summary_leaves_out_what_the_caller_replaces():
    config = DecodeConfig(batch_size=2, context_lens=(10, 30), num_heads=8, num_kv_heads=2, head_dim=64,
                          block_size=16, kv_dtype="float8_e4m3fn", device="cpu")
    assert readouts.config_summary(config) == \
        "B=2 ctx=10-30 (mean 20) H=8/2 d=64 bs=16 float16 kv=fp8 e4m3 per tensor shuffled cpu"
    assert readouts.config_summary(config, without=("context_len",)) == \
        "B=2 H=8/2 d=64 bs=16 float16 kv=fp8 e4m3 per tensor shuffled cpu"
    assert readouts.config_summary(config, without=("num_kv_heads", "kv_dtype")) == \
        "B=2 ctx=10-30 (mean 20) H=8 d=64 bs=16 float16 shuffled cpu"
    for part, gone in (("batch_size", "B=2"), ("head_dim", "d=64"), ("block_size", "bs=16")):
        assert gone not in readouts.config_summary(config, without=(part,))
    with pytest.raises(ValueError, match="can leave out"):
        readouts.config_summary(config, without=("dtype",))


def _result(name, median, gpu=None, passed=True):
    return SimpleNamespace(
        name=name, label=name.title(), samples_ms=[median] * 3, median_ms=median, p20_ms=median, p80_ms=median,
        gpu_time_ms=gpu, host_ms=None, gbps=10.0, gpu_gbps=None if gpu is None else 20.0, max_abs_err=1e-4, max_rel_err=1e-3, max_tol_ratio=0.05,
        atol=2e-3, rtol=2e-3, passed=passed, device="cpu", bytes_moved=1000,
    )


def test_results_rows():
    rows = readouts.results_rows([_result("naive", 10.0), _result("triton", 2.0, gpu=1.0, passed=False)], copy_gbps=40.0)
    assert [r["speedup_vs_naive"] for r in rows] == [1.0, 5.0]
    assert [r["vs_naive"] for r in rows] == ["baseline", "faster"]  # readouts.rank's verdict, in the CSV too
    assert [r["host_overhead_ms"] for r in rows] == [None, 1.0]  # call latency − GPU time, where there is one
    assert rows[1]["pct_of_copy_bw"] == pytest.approx(50.0)  # GPU-time bandwidth where measured
    assert [r["correct"] for r in rows] == ["yes", "NO"]


def test_results_rows_of_an_empty_batch_have_no_bandwidth_or_speedup():
    assert readouts.reads_no_kv(DecodeConfig(batch_size=4, context_lens=(0, 0, 0, 0)))
    assert not readouts.reads_no_kv(DecodeConfig(batch_size=2, context_lens=(0, 1)))
    rows = readouts.results_rows([_result("naive", 10.0), _result("triton", 0.1, gpu=0.05)], copy_gbps=40.0,
                              reads_kv=False)
    for key in ("speedup_vs_naive", "gbps", "gpu_gbps", "pct_of_copy_bw"):
        assert [r[key] for r in rows] == [None, None], key
    assert [r["median_ms"] for r in rows] == [10.0, 0.1]


def test_run_change_names_what_differs_from_the_run_before():
    from explorer.bench.readouts import run_change
    from paged_attention import DecodeConfig as C

    assert run_change(None, C()) == "first run"
    assert run_change(C(), C()) == "same settings"
    assert run_change(C(), C(block_size=32)) == "block_size 16→32"
    assert run_change(C(), C(batch_size=8, seed=1)) == "batch 4→8, seed 0→1"  # uniform lengths follow the batch
    assert run_change(C(), C(batch_size=8, seed=1, dtype="bfloat16")) == "batch 4→8, dtype float16→bfloat16 +1 more"
    assert run_change(C(context_lens=512), C(context_lens=2048)) == "ctx 512→2,048"
    assert run_change(C(batch_size=3, context_lens=(5, 40, 16)), C(batch_size=3, context_lens=(5, 30, 40))) == (
        "ctx lengths")
    assert run_change(C(batch_size=2, context_lens=(5, 40)), C(batch_size=2, context_lens=(0, 40))) == (
        "ctx 5-40→0-40")


def test_memory_summary_of_an_fp8_cache_counts_one_byte_per_value():
    half = DecodeConfig(batch_size=3, context_lens=(17, 300, 1), block_size=16)
    fp8 = half.with_(kv_dtype="float8_e4m3fn")
    m16, m8 = readouts.memory_summary(half), readouts.memory_summary(fp8)
    assert m8.kv_cache_bytes * 2 == m16.kv_cache_bytes
    assert m8.block_bytes * 2 == m16.block_bytes == 2 * 16 * half.num_kv_heads * half.head_dim * 2
    assert (m16.kv_dtype, m16.kv_element_bytes, m8.kv_dtype, m8.kv_element_bytes) == ("float16", 2, "fp8 e4m3", 1)


def test_fp8_cache_in_the_summary_and_the_run_history():
    half = DecodeConfig(batch_size=4, context_lens=128, dtype="float16")
    fp8 = half.with_(kv_dtype="float8_e5m2", kv_scale="per_head")
    assert "float16 kv=fp8 e5m2 per KV head shuffled" in readouts.config_summary(fp8)
    assert "kv=" not in readouts.config_summary(half)
    assert readouts.run_change(half, fp8) == "KV cache float16→fp8 e5m2"
    assert readouts.run_change(fp8, fp8.with_(kv_scale="per_tensor")) == "scales per KV head→per tensor"
    assert readouts.run_change(half, half.with_(dtype="bfloat16")) == "dtype float16→bfloat16"


def test_quantization_caption_in_plain_words():
    """Review: "4.2e+02× the float32 tolerance", and "that exact answer on the fp8
    cache against the float64 reference on the original, unquantized values"."""
    from explorer.bench.quantization import QuantizationError

    config = DecodeConfig(batch_size=1, context_lens=(5,), dtype="float32", kv_dtype="float8_e4m3fn")
    caption = readouts.quantization_caption(QuantizationError("fp8 e4m3", 0.022, 419.7), config)
    assert "420× the float32 tolerance" in caption and "e+" not in caption
    assert ("how far the exact answer on the fp8 cache is from the exact answer on the original values "
            "before quantization") in caption
    assert "()" not in readouts.quantization_caption(QuantizationError("fp8 e4m3", 0.022, None), config)


def test_format_times():
    from explorer.formatting import format_times

    assert [format_times(v) for v in (419.7, 1.5, 0.5, 12345, 999_999, 2.5e7)] == [
        "420×", "1.5×", "0.5×", "12,300×", "1,000,000×", "2.5e+7×"]
    # Under SCIENTIFIC_BELOW, the mantissa's zeros dropped, not the exponent's ("1.20e-10" read "1.20e-1×").
    assert [format_times(v) for v in (1.2e-10, 1e-7, 3e-20)] == ["1.2e-10×", "1e-7×", "3e-20×"]


def _shared(name, median, gpu=None):
    """A result of a batch with a shared prefix: 1000 logical bytes, 400 unique."""
    r = _result(name, median, gpu)
    r.unique_bytes, r.unique_gbps, r.gpu_unique_gbps = 400, 4.0, None if gpu is None else 8.0
    return r


def test_results_rows_of_a_shared_prefix_add_bandwidth_on_unique_bytes():
    rows = readouts.results_rows([_shared("naive", 10.0), _shared("triton_prefix", 2.0, gpu=1.0)], copy_gbps=40.0)
    assert [(r["gbps"], r["unique_gbps"], r["gpu_unique_gbps"]) for r in rows] == [(10.0, 4.0, None),
                                                                                   (10.0, 4.0, 8.0)]
    # the fraction of the copy bandwidth counts unique bytes (GPU time where measured)
    assert [r["pct_of_copy_bw"] for r in rows] == [pytest.approx(10.0), pytest.approx(20.0)]
    # nothing shared: no unique columns, the CSV as before
    assert "unique_gbps" not in readouts.results_rows([_result("naive", 10.0)])[0]


def test_shared_prefix_byte_figures_each_say_what_they_count():
    """Issue 27: with a shared prefix the cards read "KV read, logical 786 kB / unique
    524 kB" (K and V) and the bandwidth chart "590 kB per decode step ... (852 kB
    logical)" (K and V, the query and the output): two values, as read, of one
    quantity. The cards name K+V (readouts.KV_BYTES) and show the configuration's K
    and V bytes; the chart names every byte a step moves (readouts.STEP_BYTES) and
    shows those, unique and logical."""
    from explorer.bench import figures as bench_figures
    from explorer.bench import view
    from explorer.formatting import format_bytes

    config = DecodeConfig(batch_size=4, context_lens=48, num_heads=32, num_kv_heads=8, head_dim=128,
                          shared_prefix=32, prefix_groups=2)
    logical, unique = view.shared_kv_cards(readouts.shared_kv(config))
    assert [logical.value, unique.value] == [format_bytes(config.needed_kv_bytes(), 3),
                                             format_bytes(config.unique_kv_bytes(), 3)] == ["786 kB", "524 kB"]
    assert all(card.label.startswith(f"{readouts.KV_BYTES} read") for card in (logical, unique))
    results = [_result(name, 1.0) for name in ("naive", "vectorized", "triton")]
    for r in results:
        r.bytes_moved, r.unique_bytes = config.decode_bytes(), config.unique_decode_bytes()
        r.unique_gbps, r.gpu_unique_gbps = r.gbps, r.gpu_gbps
    subtitle = bench_figures.bandwidth_figure(results).layout.title.subtitle.text.replace("<br>", " ")
    assert readouts.STEP_BYTES in subtitle
    assert format_bytes(config.unique_decode_bytes(), 3) in subtitle
    assert format_bytes(config.decode_bytes(), 3) in subtitle
    # without a shared prefix: one figure, of the same quantity, named alike
    alone = [_result(name, 1.0) for name in ("naive", "triton")]
    subtitle = bench_figures.bandwidth_figure(alone).layout.title.subtitle.text.replace("<br>", " ")
    assert readouts.STEP_BYTES in subtitle and format_bytes(alone[0].bytes_moved, 3) in subtitle


def test_shared_kv_counts_the_prefix_once_per_group():
    assert readouts.shared_kv(DecodeConfig(batch_size=4, context_lens=64)) is None
    config = DecodeConfig(batch_size=4, context_lens=64, block_size=16, shared_prefix=48, prefix_groups=2,
                          num_heads=4, num_kv_heads=2, head_dim=8)
    kv = readouts.shared_kv(config)
    per_token = 2 * 2 * 8 * 2  # K and V, KV heads, head_dim, float16
    assert kv.logical_bytes == 4 * 64 * per_token
    assert kv.unique_bytes == (4 * 64 - 2 * 3 * 16) * per_token  # 3 shared blocks held by 2 groups, not 4 sequences
    assert kv.saved_fraction == pytest.approx(96 / 256)
    assert "prefix=48×2 groups" in readouts.config_summary(config)
    assert readouts.run_change(config.with_(prefix_groups=1), config) == "prefix groups 1→2"


def test_attention_options_in_the_summary_the_run_history_and_the_note():
    plain = DecodeConfig(batch_size=3, context_lens=(10, 100, 300), num_heads=4, num_kv_heads=2, head_dim=8)
    windowed = plain.with_(window=64, soft_cap=50.0, sinks=True)
    assert readouts.config_summary(windowed).endswith(" window=64 soft_cap=50 sinks")
    assert readouts.config_summary(plain) == readouts.config_summary(windowed).rsplit(" window=", 1)[0]
    assert readouts.run_change(plain, windowed, most=3) == "window off→64, soft-cap off→50, sinks off→on"
    assert readouts.run_change(windowed, windowed.with_(window=128)) == "window 64→128"
    assert readouts.attention_note(plain) is None
    note = readouts.attention_note(windowed)
    assert note.startswith("**Attention: sliding window 64 · soft-cap 50 · sinks.**")
    # the window's tokens (10 + 64 + 64 of 410) and DecodeConfig's bytes, which count only those
    assert "138 of 410 tokens" in note and windowed.needed_kv_bytes() == 2 * 138 * 2 * 8 * 2
    assert readouts.attention_note(plain.with_(window=300)).endswith(
        "The sliding window (300 tokens) covers every context here: it leaves nothing unread.")
    assert readouts.attention_note(plain.with_(soft_cap=30.0)) == (
        "**Attention: soft-cap 30.** Every implementation and the float64 reference run with it.")


def test_new_tokens_in_the_label_the_change_and_the_note():
    base = DecodeConfig(batch_size=4, context_lens=128, num_heads=32, num_kv_heads=8, head_dim=128)
    four, ragged = base.with_(query_lens=4), base.with_(query_lens=(1, 4, 16, 2))
    assert "q=" not in readouts.config_summary(base)
    assert readouts.config_summary(four).startswith("B=4 ctx=128 q=4 H=32/8")
    assert " q=1-16 " in readouts.config_summary(ragged)
    assert "q=" not in readouts.config_summary(ragged, without=("query_lens",))
    assert readouts.run_change(base, four) == "new tokens 1→4"
    assert readouts.run_change(four, ragged) == "new tokens 4→1-16"
    assert readouts.run_change(four, base.with_(query_lens=(4, 4, 4, 4))) == "same settings"
    assert readouts.run_change(ragged, base.with_(query_lens=(16, 4, 1, 2))) == "new tokens"
    assert readouts.query_note(base) is None
    note = readouts.query_note(ragged)
    assert note.startswith("**New tokens: 1 to 16 per sequence, 23 query tokens a step.**")
    assert "over its 23 query tokens" in note and "once" in note
    # with a window, the tokens read start at each sequence's first new token's window
    windowed = readouts.attention_note(ragged.with_(window=64))
    assert "each new token reads the 64 tokens up to itself" in windowed


def test_config_summary_writes_its_numbers_with_thousands_separators():
    """Issue 27: the benchmark's caption read ``window=4096`` beside an info box's "sliding window 4,096"."""
    config = DecodeConfig(batch_size=2, context_lens=(1500, 20000), block_size=16, window=4096, soft_cap=50.0,
                          shared_prefix=1024)
    text = readouts.config_summary(config)
    assert "ctx=1,500-20,000 (mean 10,750)" in text
    assert "window=4,096" in text and "soft_cap=50" in text and "prefix=1,024×" in text
    assert "ctx=64" in readouts.config_summary(config.with_(context_lens=(64, 64), shared_prefix=0))
