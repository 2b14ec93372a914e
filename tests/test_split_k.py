"""Split-K (flash-decoding): the Triton kernel's split plans, the merge by the last
split to finish, launchers reused or outgrown, and, on the GPU, split counts from 1
to more than the blocks and a race check of the merge. Inputs come from helpers' ``build`` (ragged,
shuffled, memory no context covers poisoned with NaN and Inf)."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from helpers import DTYPES, IMPL_NAMES, assert_matches, build, dtype_id, seed  # noqa: F401
from paged_attention.triton_decode_simple import prepare_triton_decode_simple
from window_support import option_sets, poison_outside_windows, random_sinks

# -- split-K (flash-decoding) --------------------------------------------------------

@pytest.mark.parametrize(
    "lengths, block_size, block_n, num_splits, expected_splits",
    [
        ((300, 77, 16), 16, 16, 1, 1),
        ((300, 77, 16), 16, 16, 2, 2),
        ((300, 77, 5), 16, 16, 3, 3),
        ((300, 0, 40, 5), 16, 16, 7, 7),  # an empty row, and rows shorter than the splits
        ((300, 33), 16, 16, 100, 19),  # more splits than blocks: one block each
        ((1100, 33), 16, 16, 1000, 69),  # more than 64 splits: the merge loops over chunks
        ((200, 5, 3), 16, 16, 7, 7),  # contexts of fewer tokens than splits
        ((45, 3), 4, 16, 7, None),  # tiles of four blocks; splits need not align with them
        ((700, 256, 1, 0), 256, 16, 3, 3),  # blocks larger than a tile
    ],
    ids=["k1", "k2", "k3", "k7-empty-row", "k100-more-than-blocks", "k1000-merge-chunks",
         "short-contexts", "small-blocks", "big-blocks"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=dtype_id)
def test_split_k(lengths, block_size, block_n, num_splits, expected_splits, dtype, merge, device, seed):
    inputs = build(device, seed, context_lens=lengths, block_size=block_size, dtype=dtype_id(dtype),
                   num_heads=4, num_kv_heads=2)
    args = inputs.args()
    shape = pa.check_decode_args(*args)
    plan = pa.plan_launch(shape, inputs.query.device, inputs.query.dtype, num_splits=num_splits, block_n=block_n)
    if expected_splits is None:
        assert 1 < plan.num_splits <= num_splits
    else:
        assert plan.num_splits == expected_splits
    launch = pa.prepare_triton_decode(*args, num_splits=num_splits, block_n=block_n)
    out = launch()
    assert torch.isfinite(out).all()
    assert_matches(out, inputs.query, pa.reference_decode(*args))
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.equal(out[b], torch.zeros_like(out[b]))


# -- with a window, sinks, a soft-cap --------------------------------------------------

OPTION_CASES = {
    # lengths, block_size, block_n, num_splits
    "k3": ((300, 77, 5), 16, 16, 3),
    "k7-empty-row": ((300, 0, 40, 5), 16, 16, 7),
    "small-blocks": ((45, 3, 90), 4, 16, 7),
    "big-blocks": ((700, 256, 1, 0), 256, 16, 3),  # a window starting in a block's later subtiles
}


@pytest.mark.parametrize("options", ["window", "sinks", "soft-cap", "all"])
@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_split_k_with_options(case, options, merge, device, seed):
    """Each option alone and all three, split and unsplit, against the reference;
    memory outside every window poisoned and table entries before each window's
    first block freed (-1, 2**31 - 1)."""
    lengths, block_size, block_n, num_splits = OPTION_CASES[case]
    dtype = "float32" if options in ("window", "soft-cap") else "float16"
    inputs = build(device, seed, context_lens=lengths, block_size=block_size, dtype=dtype, num_heads=4,
                   num_kv_heads=2)
    kw = option_sets(4, inputs.query.device, seed)[options]
    args = poison_outside_windows(inputs.args(), kw["window"]) if "window" in kw else inputs.args()
    expected = pa.reference_decode(*args, **kw)
    plain = pa.reference_decode(*inputs.args()) if "window" not in kw else None
    if plain is not None:  # the option changes the answer: a kernel that ignored it would fail
        assert (expected - plain).abs().max() > 10 * pa.tolerance(inputs.query.dtype)[0]
    for overrides in ({"num_splits": num_splits, "block_n": block_n}, {"num_splits": 1, "block_n": block_n}, {}):
        launch = pa.prepare_triton_decode(*args, **kw, **overrides)
        launch().fill_(float("nan"))
        out = launch()  # a second launch: the merge's counters were reset
        assert torch.isfinite(out).all()
        assert_matches(out, inputs.query, expected)
    assert_matches(pa.triton_decode_simple(*args, **kw), inputs.query, expected)
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.equal(out[b], torch.zeros_like(out[b]))


@pytest.mark.parametrize("window", [1, 16, 17, 64, 1000], ids=lambda w: f"w{w}")
def test_window_boundaries_on_blocks_and_tiles(window, device, seed):
    """Windows of one token, one block, a block and a token, a whole tile, and longer
    than every context: exact, whatever block the window's start falls in."""
    lengths = (1, 16, 17, 33, 64, 65, 200)
    inputs = build(device, seed, context_lens=lengths, dtype="float32")
    args = poison_outside_windows(inputs.args(), window)
    expected = pa.reference_decode(*args, window=window)
    out = pa.prepare_triton_decode(*args, window=window, num_splits=4, block_n=32)()
    assert_matches(out, inputs.query, expected)
    assert_matches(pa.triton_decode_simple(*args, window=window), inputs.query, expected)


def test_sinks_are_read_at_every_launch(device, seed):
    """The launcher reads the caller's sinks tensor when it launches: a refill in
    place changes the next launch (as a CUDA graph replay would see it)."""
    inputs = build(device, seed, context_lens=(300, 0, 40), dtype="float32")
    sinks = random_sinks(8, inputs.query.device, seed)
    launch = pa.prepare_triton_decode(*inputs.args(), sinks=sinks, num_splits=3, block_n=16)
    simple = prepare_triton_decode_simple(*inputs.args(), sinks=sinks)
    assert_matches(launch(), inputs.query, pa.reference_decode(*inputs.args(), sinks=sinks))
    sinks.copy_(random_sinks(8, inputs.query.device, seed + 1) + 3)
    expected = pa.reference_decode(*inputs.args(), sinks=sinks)
    for run in (launch, simple):
        out = run()
        assert_matches(out, inputs.query, expected)
        assert torch.equal(out[1], torch.zeros_like(out[1]))  # an empty context stays zero with sinks


def test_a_window_follows_a_context_that_grew_past_its_plan(device, seed):
    """A windowed launcher prepared for short contexts, relaunched after they grew:
    the window's start comes from the live length, and the table entries before
    the new window's first block, freed meanwhile, are never read."""
    inputs = build(device, seed, context_lens=(300, 40), dtype="float32")
    grown = inputs.context_lens.clone()
    inputs.context_lens.copy_(torch.tensor([100, 40]))
    launch = pa.prepare_triton_decode(*inputs.args(), window=50, num_splits=4, block_n=16)
    inputs.context_lens.copy_(grown)
    args = poison_outside_windows(inputs.args(), 50)
    inputs.block_tables.copy_(args[3])
    for _ in range(2):
        launch().fill_(float("nan"))
        assert_matches(launch(), inputs.query, pa.reference_decode(*args, window=50))


def test_split_launcher_reuses_its_output(device, seed):
    """Every launch rewrites the whole output: the merge's arrival counters are
    reset by the program that merges, so a second launch merges again."""
    inputs = build(device, seed, context_lens=(300, 0, 40), dtype="float32")
    launch = pa.prepare_triton_decode(*inputs.args(), num_splits=5, block_n=16)
    first = launch().clone()
    for _ in range(2):
        launch().fill_(float("nan"))
        again = launch()
        assert torch.equal(first, again)
    assert again is launch()
    assert_matches(again, inputs.query, pa.reference_decode(*inputs.args()))


@pytest.mark.parametrize("balanced", [False, True])
def test_split_launcher_reads_a_context_that_grew_past_its_plan(balanced, device, seed):
    """A launcher prepared for short contexts, relaunched after the lengths grew in
    place (as a CUDA graph replays), still reads every block: each sequence's last
    program runs on to the context's end at launch time, and every launch merges.
    (The first split plan cut the context at its last split; earlier, the merge
    waited for splits that did not exist and wrote nothing.)"""
    inputs = build(device, seed, context_lens=(300, 40), dtype="float32")
    grown = inputs.context_lens.clone()
    inputs.context_lens.copy_(torch.tensor([100, 40]))
    launch = pa.prepare_triton_decode(*inputs.args(), num_splits=4, block_n=16, balanced=balanced)
    plan = pa.plan_launch(pa.check_decode_args(*inputs.args()), inputs.query.device, inputs.query.dtype,
                          num_splits=4, block_n=16, balanced=balanced)
    covered = plan.num_splits * plan.tokens_per_split
    assert 100 <= covered < 300
    inputs.context_lens.copy_(grown)
    for _ in range(2):
        launch().fill_(float("nan"))
        assert_matches(launch(), inputs.query, pa.reference_decode(*inputs.args()))


def test_split_launcher_of_contexts_that_shrank_merges_empty_programs(device, seed):
    """Lengths that shrink after planning leave programs with no blocks: each still
    writes an empty partial and counts as arrived, so the merge runs every launch."""
    inputs = build(device, seed, context_lens=(300, 250), dtype="float32")
    launch = pa.prepare_triton_decode(*inputs.args(), num_splits=5, block_n=16)
    inputs.context_lens.copy_(torch.tensor([20, 0]))
    for _ in range(2):
        launch().fill_(float("nan"))
        out = launch()
        assert_matches(out, inputs.query, pa.reference_decode(*inputs.args()))
        assert torch.equal(out[1], torch.zeros_like(out[1]))


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_prepared_launcher_of_empty_contexts_writes_zeros_every_call(impl, device, seed):
    """Nothing to attend to is still a call that writes its output: zeros, every time."""
    inputs = build(device, seed, context_lens=(0, 0, 0), dtype="float16")
    launch = pa.prepare(impl, *inputs.args())
    for _ in range(2):
        launch().fill_(float("nan"))
        out = launch()
        assert torch.equal(out, torch.zeros_like(out))



@pytest.mark.gpu
@pytest.mark.parametrize("num_splits", [None, 1, 2, 3, 7, 16, 64, 1000])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_gpu_split_k(num_splits, dtype, merge, seed):
    """Few sequences, long contexts: the case split-K exists for. ``None`` is the
    heuristic's own choice."""
    cfg = pa.DecodeConfig(
        batch_size=3, context_lens=(16384, 0, 2500), num_heads=32, num_kv_heads=8, head_dim=128,
        block_size=16, dtype=dtype_id(dtype), device="cuda", seed=seed,
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    overrides = {} if num_splits is None else {"num_splits": num_splits}
    out = pa.prepare_triton_decode(*inputs.args(), **overrides)()
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args()))
    assert torch.equal(out[1], torch.zeros_like(out[1]))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "batch, context", [(1, 32768), (8, 8192), (3, 5000)], ids=["b1-32k", "b8-8k", "b3-5k"]
)
def test_gpu_merge_is_race_free(batch, context, merge, seed):
    """The fused merge (by the last split to finish) relies on a release/acquire arrival counter, the
    spread merge on its launch following the decode's; a missed ordering would show as an occasional
    wrong or stale row. Replay a CUDA graph
    of many launches, poisoning the output before each, and demand bit-identical
    results every time (the merge order is fixed, whichever program merges)."""
    cfg = pa.DecodeConfig(
        batch_size=batch, context_lens=context, num_heads=32, num_kv_heads=8, head_dim=128,
        block_size=16, dtype="float16", device="cuda", seed=seed, block_layout="shuffled",
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    launch = pa.prepare_triton_decode(*inputs.args())
    plan = pa.plan_launch(pa.check_decode_args(*inputs.args()), inputs.query.device, inputs.query.dtype)
    assert plan.num_splits > 1
    expected = launch().clone()
    assert_matches(expected, inputs.query, pa.reference_decode(*inputs.args()))
    out = launch()
    results = torch.empty(20, *out.shape, dtype=out.dtype, device=out.device)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(results.shape[0]):
                out.fill_(float("nan"))
                results[i].copy_(launch())
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(25):  # 500 launches
        results.fill_(0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(results, expected.expand_as(results))


#: Serving-size modes of the GPU options test: (launcher keywords, configuration
#: changes, the window "window" and "all" use).
SERVING_MODES = {
    "triton": ({}, {}, 1000),  # the window starts inside a block (3096)
    "triton-ragged": ({}, dict(context_lens=pa.ragged_lengths(32, 1, 4096, seed=1)), 1000),
    "triton-prefix": (dict(shared_prefixes="detect"), dict(shared_prefix=2048, prefix_groups=4), 3000),
    "simple": (None, {}, 1000),
}


@pytest.mark.gpu
@pytest.mark.parametrize("options", ["window", "sinks", "soft-cap", "all"])
@pytest.mark.parametrize("kv", ["float16", "float8_e4m3fn"])
@pytest.mark.parametrize("mode", list(SERVING_MODES))
def test_gpu_options_at_serving_sizes(mode, kv, options, seed):
    """32 sequences of 4096 tokens, 32/8 heads of 128, blocks of 16, with each option
    and all three, fp16 and fp8 (per-head scales): the default plan (split-K or
    balanced), the prefix pass (its window starting inside the shared prefix) and
    the simple grid, against the reference; memory outside the windows poisoned."""
    extra, changes, window = SERVING_MODES[mode]
    fp8 = dict(kv_dtype=kv, kv_scale="per_head") if kv != "float16" else {}
    cfg = pa.DecodeConfig(**{**dict(batch_size=32, context_lens=4096, num_heads=32, num_kv_heads=8, head_dim=128,
                                     block_size=16, dtype="float16", device="cuda", seed=seed, block_layout="shuffled"),
                             **fp8, **changes})
    inputs = pa.build_decode_inputs(cfg, poison=True)
    kw = dict(option_sets(32, "cuda", seed)[options])
    if "window" in kw:
        kw["window"] = window
    args = poison_outside_windows(inputs.args(), window) if "window" in kw else inputs.args()
    scales = inputs.scales()
    expected = pa.reference_decode(*args, **scales, **kw)
    if extra is None:
        out = prepare_triton_decode_simple(*args, **scales, **kw)()
    else:
        out = pa.prepare_triton_decode(*args, **scales, **kw, **extra)()
    assert torch.isfinite(out).all()
    assert_matches(out, inputs.query, expected)

