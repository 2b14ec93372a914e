"""The sidebar's state logic, without Streamlit: settings, URL round trips, caps, readouts."""

from types import SimpleNamespace

import pytest

from paged_attention import DecodeConfig
from explorer import formatting, limits, readouts, settings as state
from explorer.settings import Settings


def test_defaults_make_a_valid_config():
    config = state.default_settings().config()
    assert config.batch_size == state.default_settings().batch_size


@pytest.mark.parametrize("heads", list(state.MODEL_PRESETS.values()))
def test_presets_are_valid(heads):
    h, kv, d = heads
    Settings(num_heads=h, num_kv_heads=kv, head_dim=d, preset=state.preset_for(h, kv, d)).config()
    assert state.preset_for(h, kv, d) != state.CUSTOM


def test_preset_for_unknown_heads_is_custom():
    assert state.preset_for(24, 6, 80) == state.CUSTOM


@pytest.mark.parametrize("heads, wanted, expected", [(32, 8, 8), (32, 5, 4), (12, 5, 6), (7, 3, 1), (1, 9, 1)])
def test_kv_heads_are_divisors(heads, wanted, expected):
    options = state.kv_head_options(heads)
    assert all(heads % d == 0 for d in options)
    assert state.nearest_kv_heads(heads, wanted) == expected


def test_query_round_trip():
    s = Settings(batch_size=7, context_mode="uniform", context_len=333, num_heads=12, num_kv_heads=4, head_dim=80,
                 preset=state.CUSTOM, block_size=32, dtype="bfloat16", block_layout="fragmented", seed=5, pool_headroom=50,
                 warmup=2, iters=9, device="cpu")
    back, notes = state.settings_from_query(state.settings_to_query(s))
    assert notes == []
    assert back == s


def test_query_round_trip_with_edited_lengths():
    s = Settings(batch_size=3, context_mode="ragged", lengths=(5, 0, 97), device="cpu")
    query = state.settings_to_query(s)
    assert query["lens"] == "5,0,97"
    back, notes = state.settings_from_query(query)
    assert notes == [] and back.lengths == (5, 0, 97)
    assert back.config().lengths == (5, 0, 97)


def test_generated_lengths_are_not_written_to_the_url():
    s = Settings(batch_size=3, context_mode="ragged", device="cpu")
    s = Settings(**{**s.__dict__, "lengths": s.generated_lengths()})
    assert "lens" not in state.settings_to_query(s)


@pytest.mark.parametrize(
    "params, key",
    [
        ({"batch": "abc"}, "batch"),
        ({"batch": "0"}, "batch"),
        ({"batch": "1e9"}, "batch"),
        ({"ctx": "-5"}, "ctx"),
        ({"dtype": "float8"}, "dtype"),
        ({"layout": "random"}, "layout"),
        ({"block": "24"}, "block"),
        ({"device": "tpu"}, "device"),
        ({"preset": "GPT-5"}, "preset"),
        ({"head_dim": "1024"}, "head_dim"),
        ({"lens": "1,x,3"}, "lens"),
        ({"ctx_mode": ["ragged", "zigzag"]}, "ctx_mode"),
    ],
)
def test_bad_query_values_fall_back_with_a_note(params, key):
    defaults = Settings(device="cpu")
    settings, notes = state.settings_from_query(params, defaults)
    assert len(notes) == 1 and f"`{key}=" in notes[0]
    settings.config()  # still valid


def test_kv_heads_that_do_not_divide_are_fixed():
    settings, notes = state.settings_from_query({"heads": "32", "kv_heads": "5"}, Settings(device="cpu"))
    assert settings.num_kv_heads == 4 and "multiple" in notes[0]
    assert settings.preset == state.CUSTOM


def test_lens_of_the_wrong_length_are_dropped():
    settings, notes = state.settings_from_query({"batch": "3", "ctx_mode": "ragged", "lens": "1,2"}, Settings(device="cpu"))
    assert settings.lengths is None and "lens" in notes[0]


def test_unknown_query_keys_are_ignored():
    settings, notes = state.settings_from_query({"utm_source": "talk"}, Settings(device="cpu"))
    assert notes == [] and settings == Settings(device="cpu")


def test_invalid_settings_raise_with_the_rule():
    with pytest.raises(ValueError, match=r"Shortest \(100\) must not exceed Longest \(10\)"):
        Settings(context_mode="ragged", ragged_low=100, ragged_high=10, device="cpu").config()
    with pytest.raises(ValueError, match="non-negative"):
        Settings(batch_size=2, context_mode="ragged", lengths=(4, -1), device="cpu").config()
    with pytest.raises(ValueError, match="multiple"):
        Settings(num_heads=32, num_kv_heads=5, device="cpu").config()


def test_pool_headroom_sets_spare_blocks():
    base = Settings(batch_size=2, context_mode="uniform", context_len=160, device="cpu")
    assert base.config().spare_blocks is None
    config = Settings(**{**base.__dict__, "pool_headroom": 200}).config()
    assert config.num_blocks_used == 20 and config.spare_blocks == 40 and config.num_blocks == 60


def test_memory_summary_matches_config():
    config = DecodeConfig(batch_size=3, context_lens=(5, 16, 40), block_size=16, num_heads=4, num_kv_heads=2, head_dim=8)
    m = readouts.memory_summary(config)
    assert m.blocks_used == 1 + 1 + 3
    assert m.wasted_slots == 5 * 16 - 61
    assert m.kv_cache_bytes == config.kv_cache_bytes()
    assert m.wasted_fraction == pytest.approx(19 / 80)


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1536, "1.54 kB"), (3 * 2**30, "3.22 GB")])
def test_format_bytes(n, text):
    assert formatting.format_bytes(n) == text


def test_table_size_guard():
    small = DecodeConfig(batch_size=256, context_lens=32768, block_size=16)
    assert limits.table_size_error(small) is None
    huge = DecodeConfig(batch_size=4096, context_lens=1 << 20, block_size=1)
    assert "at most" in limits.table_size_error(huge)
    assert limits.table_size_error(huge).endswith("Use a larger block size, a smaller batch or a shorter context.")


def test_table_size_advice_drops_the_block_size_once_it_is_the_largest():
    largest = DecodeConfig(batch_size=4096, context_lens=1 << 20, block_size=state.BLOCK_SIZES[-1])
    error = limits.table_size_error(largest)
    assert error.endswith("Use a smaller batch or a shorter context.") and "block size" not in error.split(". ")[-1]


def test_cpu_plan_refuses_large_and_caps_iterations():
    big = DecodeConfig(batch_size=16, context_lens=256, num_kv_heads=8)
    assert "interpreter" in limits.plan_run(big, 10, 50).refusal
    small = DecodeConfig(batch_size=2, context_lens=60)
    plan = limits.plan_run(small, 10, 50)
    assert plan.refusal is None and (plan.warmup, plan.iters) == (limits.CPU_MAX_WARMUP, limits.CPU_MAX_ITERS)
    assert len(plan.notes) == 2
    assert limits.plan_run(small, 0, 2) == limits.RunPlan(0, 2)


def test_config_summary():
    text = readouts.config_summary(DecodeConfig(batch_size=2, context_lens=(10, 30), dtype="bfloat16"))
    assert "B=2" in text and "ctx=10-30" in text and "bfloat16" in text


def _result(name, median, gpu=None, passed=True):
    return SimpleNamespace(
        name=name, label=name.title(), samples_ms=[median] * 3, median_ms=median, p10_ms=median, p90_ms=median,
        gpu_time_ms=gpu, gbps=10.0, gpu_gbps=None if gpu is None else 20.0, max_abs_err=1e-4, max_rel_err=1e-3, max_tol_ratio=0.05,
        atol=2e-3, rtol=2e-3, passed=passed, device="cpu", bytes_moved=1000,
    )


def test_results_rows():
    rows = readouts.results_rows([_result("naive", 10.0), _result("triton", 2.0, gpu=1.0, passed=False)], copy_gbps=40.0)
    assert [r["speedup_vs_naive"] for r in rows] == [1.0, 5.0]
    assert rows[1]["pct_of_copy_bw"] == pytest.approx(50.0)  # GPU-time bandwidth where measured
    assert [r["correct"] for r in rows] == ["yes", "NO"]


def test_cpu_plan_counts_programs_not_only_tokens():
    """Many heads over short or empty contexts cost the interpreter per program."""
    cfg = DecodeConfig(batch_size=32, context_lens=8, num_heads=32, num_kv_heads=32, head_dim=16)
    assert limits.cpu_work(cfg) == 32 * 32 * limits.CPU_PROGRAM_COST
    assert limits.plan_run(cfg, 0, 1).refusal is not None
    empty = DecodeConfig(batch_size=4096, context_lens=0, num_heads=256, num_kv_heads=256, head_dim=16)
    assert "num_heads" in limits.plan_run(empty, 0, 1).refusal


# -- review fixes ----------------------------------------------------------------

def test_cpu_refusal_quotes_the_rule_of_cpu_work_and_what_to_lower():
    heads_bound = DecodeConfig(batch_size=5, context_lens=16)  # 5 x max(8 x 16, 32 x 64)
    assert limits.cpu_work_detail(heads_bound) == f"5 x max(8 x 16, 32 x 64) = {limits.cpu_work(heads_bound):,}"
    refusal = limits.plan_run(heads_bound, 0, 1).refusal
    assert limits.CPU_WORK_RULE in refusal and "= 10,240" in refusal
    assert "Lower the batch or query heads" in refusal
    tokens_bound = DecodeConfig(batch_size=4, context_lens=4096)
    assert "Lower the batch, KV heads or context" in limits.plan_run(tokens_bound, 0, 1).refusal
    assert limits.CPU_WORK_RULE.startswith("batch_size x max(num_kv_heads x longest context, num_heads x 64)")
    assert limits.CPU_WORK_RULE.endswith(f"<= {limits.CPU_MAX_WORK:,}")


def test_cpu_advice_names_only_what_can_still_fall():
    many_heads = DecodeConfig(batch_size=1, context_lens=16, num_heads=256, num_kv_heads=8)  # 1 x 256 x 64
    assert limits.cpu_work_levers(many_heads) == ("query heads",)
    assert "Lower the query heads, or run on a GPU." in limits.plan_run(many_heads, 0, 1).refusal
    long_ctx = DecodeConfig(batch_size=1, context_lens=4096, num_heads=8, num_kv_heads=8)  # 1 x 8 x 4,096
    assert limits.cpu_work_levers(long_ctx) == ("KV heads", "context")
    assert "Lower the KV heads or context, or run on a GPU." in limits.plan_run(long_ctx, 0, 1).refusal
    one_kv = DecodeConfig(batch_size=1, context_lens=9000, num_heads=1, num_kv_heads=1)
    assert limits.cpu_work_levers(one_kv) == ("context",)
    assert limits.cpu_work_levers(DecodeConfig(batch_size=5, context_lens=16)) == ("batch", "query heads")
    names = {"batch": "**Max batch**", "query heads": "the sidebar's query heads"}
    worded = limits.plan_run(DecodeConfig(batch_size=5, context_lens=16), 0, 1, names).refusal
    assert "Lower **Max batch** or the sidebar's query heads, or run on a GPU." in worded


def test_largest_cpu_batch_fits_the_cap():
    heads = DecodeConfig()  # 32 query heads, 8 KV heads
    assert limits.largest_cpu_batch(heads, 144, 6) == 4  # 4 x 32 x 64 = 8192
    assert limits.cpu_work(heads.with_(batch_size=4, context_lens=144)) <= limits.CPU_MAX_WORK
    assert limits.largest_cpu_batch(heads, 144, 3) == 3
    assert limits.largest_cpu_batch(heads.with_(num_heads=256, num_kv_heads=8), 144, 6) == 1


def test_results_rows_of_an_empty_batch_have_no_bandwidth_or_speedup():
    assert readouts.reads_no_kv(DecodeConfig(batch_size=4, context_lens=(0, 0, 0, 0)))
    assert not readouts.reads_no_kv(DecodeConfig(batch_size=2, context_lens=(0, 1)))
    rows = readouts.results_rows([_result("naive", 10.0), _result("triton", 0.1, gpu=0.05)], copy_gbps=40.0,
                              reads_kv=False)
    for key in ("speedup_vs_naive", "gbps", "gpu_gbps", "pct_of_copy_bw"):
        assert [r[key] for r in rows] == [None, None], key
    assert [r["median_ms"] for r in rows] == [10.0, 0.1]


def test_bad_lens_say_what_is_used_instead():
    _, notes = state.settings_from_query({"batch": "3", "ctx_mode": "ragged", "lens": "a,b,c"})
    assert len(notes) == 1 and "using the lengths drawn from the spread" in notes[0] and "None" not in notes[0]
    _, notes = state.settings_from_query({"batch": "2", "ctx_mode": "ragged", "lens": "5"})
    assert "it holds 1 value for batch size 2" in notes[0] and "drawn from the spread" in notes[0]


@pytest.mark.parametrize("ms, text", [(0.001683, "1.68 µs"), (0.5162, "516 µs"), (0.99996, "1.00 ms"),
                                      (12.34, "12.3 ms"), (1234.0, "1.23 s"), (0.0, "0 µs"), (0.0001, "0.100 µs")])
def test_format_duration(ms, text):
    assert formatting.format_duration(ms) == text


@pytest.mark.parametrize("n, noun, text", [(1, "sequence", "1 sequence"), (0, "sequence", "0 sequences"),
                                           (1200, "token", "1,200 tokens"), (2, "block size", "2 block sizes")])
def test_count(n, noun, text):
    assert formatting.count(n, noun) == text


def test_plain_is_a_code_span_that_cannot_be_closed_early():
    assert formatting.plain("# **bold** :material/home: $x$ `c`\n1. h200_v1.csv") == (
        "`# **bold** :material/home: $x$ 'c' 1. h200_v1.csv`")


@pytest.mark.parametrize("text, expected", [
    ("the CSV has a header but no rows", "The CSV has a header but no rows."),
    ("num_heads (6) must be a multiple", "num_heads (6) must be a multiple."),  # code names keep their case
    ("`lens` ignored", "`lens` ignored."),
    ("From (3) must not exceed To (2).", "From (3) must not exceed To (2)."),  # one full stop, not two
])
def test_sentence(text, expected):
    assert formatting.sentence(text) == expected


def test_clamp_value_names_the_limit_and_the_value_used():
    assert limits.clamp_value(5000, 1, 4096, "Batch size") == (
        4096, "**Batch size**: 5,000 is above the maximum, 4,096; using 4,096.")
    assert limits.clamp_value(-1, 0, 9, "Seed") == (0, "**Seed**: -1 is below the minimum, 0; using 0.")
    assert limits.clamp_value(9.5, 0.0, 8.0, "Rate") == (8.0, "**Rate**: 9.5 is above the maximum, 8; using 8.")
    assert limits.clamp_value(7, 1, 9, "x") == (7, None)


@pytest.mark.parametrize("n, significant, text", [
    (1536, None, "1.54 kB"), (813_600_000, 3, "814 MB"), (2_950_000, 3, "2.95 MB"), (512, 3, "512 B"),
    (50 * 10**9, 3, "50.0 GB"), (0, 3, "0 B"),
])
def test_format_bytes(n, significant, text):
    assert formatting.format_bytes(n, significant) == text
