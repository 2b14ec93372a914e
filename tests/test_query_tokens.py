"""Several query tokens per sequence (draft tokens of speculative decoding) at their
edges, for every implementation against the float64 reference: ragged ``q_len``
including 1, new tokens that fill exactly one block, ``q_len`` equal to the
context, GQA and MQA, odd head_dim and block sizes, fp8 caches, split-K, the
balanced plan and shared prefixes (read per sequence: the prefix pass takes one
token per sequence), with windows, sinks and soft-caps. Two checks
that do not lean on the reference: each sequence's last token equals the
one-token decode step, and token ``i`` equals the one-token step of the context
cut after it (the causal rule). Draft tokens on every ordinary axis: the
``attention`` fixture of the correctness tests; their bad values at the end.
"""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from paged_attention.triton_launch import plan_triton_decode
from helpers import IMPL_NAMES, IMPLS, assert_matches, build, run_and_compare, seed  # noqa: F401

SMALL = dict(num_heads=4, num_kv_heads=2, head_dim=32, dtype="float32")

#: (context lengths, query lengths, block size, extra DecodeConfig fields).
CASES = {
    # ragged q_len with 1 among them; a context of one token (q_len = context)
    "ragged-with-one": ((1, 40, 23, 70), (1, 3, 1, 5), 16, {}),
    # 16 new tokens that fill exactly block 2 of 16 (positions 32..47)
    "fill-one-block": ((48, 30), (16, 2), 16, {}),
    # every token of the context is new (q_len = context)
    "all-new": ((7, 12), (7, 12), 5, {}),
    # MQA, odd head_dim and block size, an empty context beside draft tokens
    "mqa-odd-sizes": ((0, 19, 44), (1, 6, 4), 7, dict(num_heads=6, num_kv_heads=1, head_dim=20)),
    # MHA: one query head per KV head, so a tile's rows are the tokens only
    "mha": ((33, 21), (4, 8), 8, dict(num_heads=3, num_kv_heads=3, head_dim=24)),
    # every option at once, the window starting mid-block for each token
    "window-sinks-cap": ((61, 40, 9), (5, 2, 3), 8, dict(window=11, sinks=True, soft_cap=2.0)),
    # a window shorter than the draft: the first tokens' windows end before the last's start
    "window-shorter-than-draft": ((50, 37), (8, 6), 4, dict(window=3)),
}


def _build(device, seed, lengths, q_lens, block_size, extra):
    fields = {**SMALL, **extra}
    return build(device, seed, context_lens=lengths, query_lens=q_lens, block_size=block_size, **fields)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_draft_token_edges(impl, case, device, seed):
    inputs = _build(device, seed, *CASES[case])
    assert inputs.query.shape[0] == sum(CASES[case][1])
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("case", ["ragged-with-one", "window-sinks-cap", "mqa-odd-sizes"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_last_token_equals_the_one_token_step(impl, case, device, seed):
    """Each sequence's last query token sits where the one-token step's does and
    sees the same positions: its output is that step's (within the tolerance)."""
    inputs = _build(device, seed, *CASES[case])
    one = inputs.config.with_(query_lens=1)
    single = pa.build_decode_inputs(one, poison=True)
    if single.sinks is not None:
        single.sinks.copy_(inputs.sinks)
    out = IMPLS[impl](*inputs.args(), **inputs.options())
    last = torch.tensor(inputs.config.query_lengths).cumsum(0) - 1
    assert_matches(out[last.to(out.device)], single.query, pa.reference_decode(*single.args(), **single.options()))


def test_token_i_sees_the_context_up_to_itself(device, seed):
    """The causal rule, from its definition: token ``i`` of a sequence with
    ``q`` new tokens equals a one-token step on the context cut to ``n - q + 1 + i``
    tokens, for the reference and the Triton kernel."""
    n, q = 29, 6
    inputs = build(device, seed, context_lens=(n,), query_lens=(q,), block_size=4, **SMALL)
    full = pa.reference_decode(*inputs.args(), **inputs.options())
    out = pa.triton_decode(*inputs.args(), **inputs.options())
    query, k, v, table, lens = inputs.args()
    for i in range(q):
        cut = torch.tensor([n - q + 1 + i], dtype=lens.dtype, device=lens.device)
        expected = pa.reference_decode(query[i : i + 1], k, v, table, cut)
        torch.testing.assert_close(full[i : i + 1], expected, atol=1e-12, rtol=1e-12)
        assert_matches(out[i : i + 1], query[i : i + 1], expected)


@pytest.mark.parametrize("num_splits", [1, 2, 5])
@pytest.mark.parametrize("balanced", [False, True])
def test_draft_tokens_under_every_split_plan(num_splits, balanced, merge, device, seed):
    """Split-K merges each token's partials apart (its own row of the split
    buffers), the fused merge with several tokens per program included."""
    inputs = build(device, seed, context_lens=(300, 120, 7), query_lens=(8, 5, 7), block_size=16, window=100,
                   sinks=True, **SMALL)
    run = pa.prepare_triton_decode(*inputs.args(), **inputs.options(), num_splits=num_splits, balanced=balanced)
    assert_matches(run(), inputs.query, pa.reference_decode(*inputs.args(), **inputs.options()))


@pytest.mark.parametrize("window", [None, 20])
def test_draft_tokens_beside_shared_prefixes(window, device, seed):
    """With draft tokens the prefix pass is not run: ``"detect"`` finds no group and
    each sequence's programs read its shared blocks (exact), and groups given
    explicitly are refused before any kernel runs."""
    inputs = build(device, seed, context_lens=(33, 40, 40, 50), query_lens=(3, 1, 4, 2), block_size=4,
                   shared_prefix=30, prefix_groups=2, window=window, sinks=True, **SMALL)
    launch = plan_triton_decode(*inputs.args(), **inputs.options(), shared_prefixes="detect")
    assert launch.prefix is None and launch.groups == ()
    out = pa.triton_decode(*inputs.args(), **inputs.options(), shared_prefixes="detect")
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args(), **inputs.options()))
    plain = pa.build_decode_inputs(inputs.config.with_(query_lens=1), poison=True)
    groups = pa.find_shared_prefixes(plain.block_tables.cpu(), plain.context_lens.cpu(), 4)
    assert groups  # the table does share blocks
    with pytest.raises(ValueError, match="one query token per sequence"):
        pa.triton_decode(*inputs.args(), **inputs.options(), shared_prefixes=groups)


@pytest.mark.parametrize("kv_dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("kv_scale", ["per_tensor", "per_head"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_draft_tokens_on_an_fp8_cache(impl, kv_dtype, kv_scale, device, seed):
    inputs = build(device, seed, context_lens=(45, 16, 3), query_lens=(4, 16, 3), block_size=16,
                   kv_dtype=kv_dtype, kv_scale=kv_scale, num_heads=8, num_kv_heads=2, head_dim=64)
    run_and_compare(impl, inputs.args(), scales=inputs.scales(), options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_one_token_each_as_query_lens(impl, device, seed):
    """``query_lens`` of ones is the plain step: the Triton kernel takes its plain
    path (bit for bit), the others agree within the tolerance."""
    inputs = build(device, seed, context_lens=(1, 17, 40), **SMALL)
    ones = torch.ones(3, dtype=torch.int32, device=inputs.query.device)
    plain = IMPLS[impl](*inputs.args())
    with_ones = IMPLS[impl](*inputs.args(), query_lens=ones)
    if impl == "triton":
        assert torch.equal(plain, with_ones)
    assert_matches(with_ones, inputs.query, pa.reference_decode(*inputs.args()))


@pytest.mark.parametrize("impl", ["naive", "vectorized", "triton", "triton_simple", "triton_prefix"])
def test_prepared_call_with_draft_tokens(impl, device, seed):
    inputs = build(device, seed, context_lens=(40, 23), query_lens=(3, 5), block_size=8, shared_prefix=16, **SMALL)
    call = pa.prepare(impl, *inputs.args(), **inputs.options())
    assert_matches(call(), inputs.query, pa.reference_decode(*inputs.args(), **inputs.options()))


# -- bad values --------------------------------------------------------------------------

def _args(device):
    inputs = build(device, 0, context_lens=(5, 9), query_lens=(2, 3), block_size=4, **SMALL)
    return inputs.args(), inputs.query_lens


@pytest.mark.parametrize("impl", IMPL_NAMES)
@pytest.mark.parametrize("bad, rule", [
    (lambda q: q.new_tensor([2, 2]), "adds up to 4"),  # the query has 5 rows
    (lambda q: q.new_tensor([0, 5]), r"query_lens\[0\] = 0 must lie in \[1"),
    (lambda q: q.new_tensor([2, 10]), r"query_lens\[1\] = 10 must lie in \[1, max\(1, context_lens\[1\]\) = 9\]"),
    (lambda q: q.float(), "int32 or int64"),
    (lambda q: q[:1], r"shape \[batch_size\] = \[2\]"),
    (lambda q: [2, 3], "integer tensor"),
])
def test_bad_query_lens_are_refused_before_any_kernel(impl, bad, rule):
    args, q_lens = _args("cpu")
    with pytest.raises(ValueError, match=rule):
        IMPLS[impl](*args, query_lens=bad(q_lens))


def test_draft_rows_without_query_lens_are_refused():
    """Five query rows for two sequences: without ``query_lens`` the batch sizes disagree."""
    args, _ = _args("cpu")
    with pytest.raises(ValueError, match="block_tables has 2 rows but query has batch_size 5"):
        pa.reference_decode(*args)


def test_config_refuses_query_lens_past_the_context():
    with pytest.raises(ValueError, match=r"query_lens\[1\] = 4 must be an integer in \[1"):
        pa.DecodeConfig(batch_size=2, context_lens=(5, 3), query_lens=(1, 4)).validate()
    with pytest.raises(ValueError, match="positive integer"):
        pa.DecodeConfig(query_lens=0).validate()
    capped = pa.DecodeConfig(batch_size=3, context_lens=(0, 2, 9), query_lens=4)
    assert capped.query_lengths == (1, 2, 4)


# -- on the GPU, at serving sizes ----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", [None, "float8_e4m3fn"])
@pytest.mark.parametrize("window", [None, 1500])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_gpu_draft_tokens_at_serving_sizes(impl, window, kv_dtype, seed):
    """Ragged contexts up to 4096 and 1 to 16 draft tokens (a 16 that fills a
    block), GQA 4, in a CUDA graph where the implementation is graphed."""
    lengths = pa.ragged_lengths(7, 16, 4096, seed=seed) + (4096,)
    cfg = pa.DecodeConfig(
        batch_size=8, context_lens=lengths, query_lens=(1, 2, 3, 4, 5, 8, 16, 4), num_heads=32, num_kv_heads=8,
        head_dim=128, block_size=16, dtype="float16", kv_dtype=kv_dtype, device="cuda", seed=seed,
        block_layout="fragmented", window=window, sinks=window is not None,
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    call = pa.prepare(impl, *inputs.args(), **inputs.kwargs())
    assert_matches(call(), inputs.query, pa.reference_decode(*inputs.args(), **inputs.kwargs()))


@pytest.mark.gpu
@pytest.mark.parametrize("q_len", [2, 4, 8, 16])
def test_gpu_draft_tokens_split_k_long_context(q_len, merge, seed):
    """One sequence of 32768 tokens: split-K across many programs, each token's
    partials merged apart."""
    cfg = pa.DecodeConfig(batch_size=1, context_lens=32768, query_lens=q_len, num_heads=32, num_kv_heads=8,
                          head_dim=128, block_size=16, dtype="bfloat16", device="cuda", seed=seed)
    inputs = pa.build_decode_inputs(cfg, poison=True)
    run_and_compare("triton", inputs.args(), options=inputs.options())
