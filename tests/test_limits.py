"""What the explorer refuses or caps: the table size, the CPU budget and its advice, clamped widget values."""

from explorer import limits
from explorer import settings as state
from paged_attention import DecodeConfig


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


def test_cpu_plan_counts_programs_not_only_tokens():
    """Many heads over short or empty contexts cost the interpreter per program."""
    cfg = DecodeConfig(batch_size=32, context_lens=8, num_heads=32, num_kv_heads=32, head_dim=16)
    assert limits.cpu_work(cfg) == 32 * 32 * limits.CPU_PROGRAM_COST
    assert limits.plan_run(cfg, 0, 1).refusal is not None
    empty = DecodeConfig(batch_size=4096, context_lens=0, num_heads=256, num_kv_heads=256, head_dim=16)
    assert "num_heads" in limits.plan_run(empty, 0, 1).refusal


def test_cpu_refusal_quotes_the_rule_of_cpu_work_and_what_to_lower():
    heads_bound = DecodeConfig(batch_size=5, context_lens=16)  # 5 x max(8 x 16, 32 x 64)
    assert limits.cpu_work_detail(heads_bound) == f"5 x max(8 x 16, 32 x 64) = {limits.cpu_work(heads_bound):,}"
    refusal = limits.plan_run(heads_bound, 0, 1).refusal
    assert limits.CPU_WORK_RULE in refusal and "= 10,240" in refusal
    assert "Lower the batch or query heads" in refusal
    tokens_bound = DecodeConfig(batch_size=4, context_lens=4096)
    assert "Lower the batch, KV heads or context" in limits.plan_run(tokens_bound, 0, 1).refusal
    assert limits.CPU_WORK_RULE.startswith(
        "batch_size x max(num_kv_heads x longest context, num_heads x 64 x new tokens per sequence)")
    assert limits.CPU_WORK_RULE.endswith(f"<= {limits.CPU_MAX_WORK:,}")


def test_cpu_plan_counts_each_new_token_as_programs():
    """The simple kernel runs a program per (query token, head): new tokens multiply
    the program term (at the most any sequence has), and the advice names them."""
    one = DecodeConfig(batch_size=2, context_lens=37, num_heads=4, num_kv_heads=2, head_dim=32)
    assert limits.cpu_work(one) == 2 * 4 * 64 and limits.cpu_work(one.with_(query_lens=1)) == limits.cpu_work(one)
    four = one.with_(query_lens=4)
    assert limits.cpu_work(four) == 2 * 4 * 64 * 4
    assert limits.cpu_work_detail(four) == "2 x max(2 x 37, 4 x 64 x 4) = 2,048"
    ragged = one.with_(query_lens=(1, 16))
    assert limits.cpu_work(ragged) == 2 * 4 * 64 * 16 and limits.plan_run(ragged, 0, 1).refusal is None
    many = DecodeConfig(batch_size=4, context_lens=37, num_heads=8, num_kv_heads=2, head_dim=32, query_lens=16)
    refusal = limits.plan_run(many, 0, 1).refusal
    assert "4 x max(2 x 37, 8 x 64 x 16) = 32,768" in refusal
    assert "Lower the batch, query heads or new tokens, or run on a GPU." in refusal


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


def test_clamp_value_names_the_limit_and_the_value_used():
    assert limits.clamp_value(5000, 1, 4096, "Batch size") == (
        4096, "**Batch size**: 5,000 is above the maximum, 4,096; using 4,096.")
    assert limits.clamp_value(-1, 0, 9, "Seed") == (0, "**Seed**: -1 is below the minimum, 0; using 0.")
    assert limits.clamp_value(9.5, 0.0, 8.0, "Rate") == (8.0, "**Rate**: 9.5 is above the maximum, 8; using 8.")
    assert limits.clamp_value(7, 1, 9, "x") == (7, None)


def test_cap_iterations_caps_on_the_cpu_only():
    assert limits.cap_iterations("cuda", 10, 50) == (10, 50, ())
    assert limits.cap_iterations("cpu", 0, 2) == (0, 2, ())
    warmup, iters, notes = limits.cap_iterations("cpu", 10, 50)
    assert (warmup, iters) == (limits.CPU_MAX_WARMUP, limits.CPU_MAX_ITERS)
    assert notes == (f"warm-up iterations capped from 10 to {limits.CPU_MAX_WARMUP} on the CPU",
                     f"timed iterations capped from 50 to {limits.CPU_MAX_ITERS} on the CPU")


def test_layout_size_guard_of_the_kernel_page_counts_table_and_pool():
    pool_too_big_to_draw = DecodeConfig(batch_size=4096, context_lens=3900, block_size=1)
    assert "draws pools" in limits.table_size_error(pool_too_big_to_draw)
    assert limits.layout_size_error(pool_too_big_to_draw) is None
    huge = DecodeConfig(batch_size=4096, context_lens=8000, block_size=1)
    error = limits.layout_size_error(huge)
    table, pool = 4096 * 8000, huge.num_blocks
    assert f"a block table of {table:,} entries" in error and f"a pool of {pool:,} blocks" in error
    assert f"{table + pool:,} in all; it lays out at most {limits.MAX_LAYOUT_ENTRIES:,}" in error
    largest = huge.with_(block_size=state.BLOCK_SIZES[-1], context_lens=1 << 20, spare_blocks=10_000_000)
    assert limits.layout_size_error(largest).endswith("Use a smaller batch, a shorter context or fewer spare blocks.")


def test_every_cap_lives_in_limits():
    """``MAX_*`` constants sat in 17 files: every one is defined in explorer/limits.py,
    and the modules that use one import it from there."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sources = [p for d in ("explorer", "ui", "app_pages") for p in (root / d).rglob("*.py")] + [root / "app.py"]
    defined = {p.relative_to(root).as_posix(): re.findall(r"^(MAX_[A-Z0-9_]+)\s*[:=]", p.read_text(), flags=re.M)
               for p in sources}
    assert {p: names for p, names in defined.items() if names} == {"explorer/limits.py": defined["explorer/limits.py"]}
    assert len(defined["explorer/limits.py"]) == len(set(defined["explorer/limits.py"])) >= 30


def test_block_sizes_run_up_to_the_largest_offered():
    assert state.BLOCK_SIZES == tuple(2 ** i for i in range(9)) and state.BLOCK_SIZES[-1] == limits.MAX_BLOCK_SIZE


def test_size_errors_write_every_number_with_thousands_separators():
    """Issue 27: the block-table page wrote "(batch 4096 x 65,536 blocks)"."""
    huge = DecodeConfig(batch_size=4096, context_lens=1 << 20, block_size=16)
    assert "(batch 4,096 x 65,536 blocks)" in limits.table_size_error(huge)
    assert "(batch 4,096 x 65,536 blocks)" in limits.layout_size_error(huge)
