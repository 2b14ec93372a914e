"""Sliding windows, attention sinks and logit soft-capping at their edges, for every
implementation against the float64 reference: a window of one token, a window as
long as the context or longer, windows that start or end mid-block or exactly on a
block boundary, inside a shared prefix, behind freed table entries; sinks of ±1e4
and sinks beside an empty context; logits far beyond the cap, a cap on an fp8
cache. The options on every ordinary axis: the ``attention`` fixture of the
correctness tests (``test_correctness.py`` and the others); their bad values:
``test_validation.py``.
"""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from helpers import IMPL_NAMES, IMPLS, assert_matches, build, run_and_compare, seed  # noqa: F401

SMALL = dict(num_heads=4, num_kv_heads=2, head_dim=32, dtype="float32")


def _sinks(values, device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


# -- windows ---------------------------------------------------------------------------

#: (context lengths, window) in blocks of 16. Starts and ends are given per sequence.
WINDOWS = {
    # one token: the query sees only the last position
    "one-token": ((1, 16, 17, 45, 70), 1),
    # as long as every context, or longer: the whole context (starts at 0)
    "whole-context": ((1, 16, 17, 45), 45),
    "longer-than-context": ((1, 16, 17, 45), 1000),
    # 37 - 10 = 27: starts mid-block 1, ends mid-block 2; 45 - 10 = 35 likewise
    "mid-block-both-ends": ((37, 45, 21), 10),
    # 48 - 16 = 32 and 64 - 16 = 48: starts exactly on a block boundary, ends on one
    "on-block-boundaries": ((48, 64, 40), 16),
    # equal lengths: the gather of whole blocks from the window's first block
    "equal-lengths": ((53, 53, 53), 22),
    "equal-lengths-aligned": ((64, 64), 32),
    # one sequence's window starts at 0, the others' later; an empty one
    "starts-at-zero-and-later": ((13, 14, 70, 0), 13),
}


@pytest.mark.parametrize("case", WINDOWS)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_window_edges(impl, case, device, seed):
    lengths, window = WINDOWS[case]
    inputs = build(device, seed, context_lens=lengths, window=window, **SMALL)
    out = run_and_compare(impl, inputs.args(), options=inputs.options())
    if window >= max(lengths):  # the whole context: plain attention
        assert_matches(out, inputs.query, pa.reference_decode(*inputs.args()))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_window_of_one_token_returns_its_value(impl, dtype, device, seed):
    """With a window of 1 and no sink the softmax has one term: the output is the
    last token's value, whatever the logits."""
    inputs = build(device, seed, context_lens=(1, 16, 17, 45), window=1, dtype=dtype, num_heads=4, num_kv_heads=2,
                   head_dim=32)
    out = run_and_compare(impl, inputs.args(), options=inputs.options())
    lens, bs = inputs.context_lens.long(), inputs.config.block_size
    blocks = inputs.block_tables.long()[torch.arange(4), (lens - 1) // bs]
    last = inputs.v_cache[blocks, (lens - 1) % bs]  # [batch, kv_heads, head_dim]
    assert_matches(out, inputs.query, last.double().repeat_interleave(2, dim=1))


@pytest.mark.parametrize("impl", [*IMPL_NAMES, "triton_prefix"])
@pytest.mark.parametrize("window", [3, 20, 30, 60])
def test_window_starting_inside_a_shared_prefix(impl, window, device, seed):
    """Prefix of 40 tokens (2 shared blocks of 16) in two groups: windows that start
    in the shared blocks (or before them), so some members read part of the shared
    prefix and others none of it."""
    inputs = build(device, seed, context_lens=(40, 45, 52, 70, 41, 80), shared_prefix=40, prefix_groups=2,
                   window=window, **SMALL)
    assert inputs.config.shared_blocks == 2
    fn = pa.get_implementation(impl)
    out = fn(*inputs.args(), **inputs.options())
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args(), **inputs.options()))


@pytest.mark.parametrize("filler", ["minus-one", "stale", "past-the-pool"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_freed_entries_before_the_window(impl, filler, device, seed):
    """An engine frees the blocks a window has left: every table entry before each
    window's first block holds -1, a stale id (a block of another sequence) or an
    id past the pool, and the output is the reference's on the intact table."""
    inputs = build(device, seed, context_lens=(70, 33, 100, 5), window=19, spare_blocks=2, **SMALL)
    q, k, v, tables, lens = inputs.args()
    expected = pa.reference_decode(*inputs.args(), **inputs.options())
    first = (lens.long() - 19).clamp_min(0) // 16  # 3, 0, 5, 0
    before = torch.arange(tables.shape[1], device=tables.device)[None, :] < first[:, None]
    assert int(before.sum()) == 8
    fill = {"minus-one": -1, "stale": int(tables[1, 0]), "past-the-pool": inputs.config.num_blocks + 3}[filler]
    freed = torch.where(before, torch.full_like(tables, fill), tables)
    run_and_compare(impl, (q, k, v, freed, lens), expected=expected, options=inputs.options())


# -- sinks ------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_huge_and_very_negative_sinks(impl, device, seed):
    """A sink of 1e4 takes all the weight (the head's output is zero), one of -1e4
    none (the head's output is plain attention's); neither overflows."""
    inputs = build(device, seed, context_lens=(1, 37, 70), **SMALL)
    sinks = _sinks([1e4, -1e4, 1e4, -1e4], device)
    out = run_and_compare(impl, inputs.args(), options=dict(sinks=sinks))
    assert torch.equal(out[:, 0::2], torch.zeros_like(out[:, 0::2]))
    plain = pa.reference_decode(*inputs.args())
    assert_matches(out[:, 1::2], inputs.query[:, 1::2], plain[:, 1::2])
    run_and_compare(impl, inputs.args(), options=dict(sinks=sinks, window=5, soft_cap=2.0))


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_sink_beside_the_logits_halves_the_weights(impl, device, seed):
    """Equal keys give every token logit ``s``; a sink of ``s + log(n)`` takes half the
    weight, so the output is half the mean of the values, exactly."""
    inputs = build(device, seed, context_lens=(8, 8), block_size=4, window=None, **SMALL)
    q, k, v, tables, lens = inputs.args()
    k = k.clone()
    k[tables.long().flatten()] = 0.5  # every token's key; logit = scale * 0.5 * sum(q)
    logits = (q.double() * 0.5).sum(-1) * 32 ** -0.5  # [batch, heads]
    sinks = (logits[0] + torch.log(torch.tensor(8.0, dtype=torch.float64))).float()
    q = q.clone()
    q[1] = q[0]  # both rows share the logits of row 0
    out = run_and_compare(impl, (q, k, v, tables, lens), options=dict(sinks=sinks))
    values = v[tables.long()].float().mean(dim=(1, 2))  # [batch, kv_heads, head_dim]
    assert_matches(out, q, 0.5 * values.double().repeat_interleave(2, dim=1))


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_sinks_with_empty_contexts_give_zero_rows(impl, device, seed):
    inputs = build(device, seed, context_lens=(0, 23, 0), sinks=True, **SMALL)
    out = run_and_compare(impl, inputs.args(), options=inputs.options())
    assert torch.equal(out[0::2], torch.zeros_like(out[0::2])) and out[1].abs().max() > 0
    empty = build(device, seed, context_lens=(0, 0), sinks=True, window=4, soft_cap=3.0, **SMALL)
    out = run_and_compare(impl, empty.args(), options=empty.options())
    assert torch.equal(out, torch.zeros_like(out))


# -- soft-capping ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_logits_far_beyond_the_cap(impl, dtype, device, seed):
    """A query scaled up 300 times gives logits of about ±1e3 (beyond float16's
    exp range): a cap of 5 squeezes them into (-5, 5), and the kernel must cap
    before the softmax's max, in float32."""
    inputs = build(device, seed, context_lens=(1, 16, 37, 70), dtype=dtype, num_heads=4, num_kv_heads=2,
                   head_dim=32, soft_cap=5.0)
    q = (inputs.query.float() * 300).to(inputs.query.dtype)
    args = (q, *inputs.args()[1:])
    tokens = torch.arange(70, device=device)
    keys = inputs.k_cache[inputs.block_tables[3].long()[tokens // 16], tokens % 16, 0]  # sequence 3, KV head 0
    logits = 32 ** -0.5 * (keys.double() @ q[3, 0].double())
    assert float(logits.abs().max()) > 50  # far past the cap
    out = run_and_compare(impl, args, options=inputs.options())
    uncapped = pa.reference_decode(*args)
    assert (out.double() - uncapped).abs().max() > 0.1  # the cap was honoured


@pytest.mark.parametrize("kv_dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_soft_cap_on_an_fp8_cache(impl, kv_dtype, device, seed):
    """The cap applies to the logits of the dequantized keys (``stored * scale``),
    per KV head, with a window and sinks too."""
    config = pa.DecodeConfig(batch_size=4, context_lens=(0, 37, 1, 70), num_heads=6, num_kv_heads=2, head_dim=40,
                             block_size=12, dtype="float16", kv_dtype=kv_dtype, kv_scale="per_head", device=device,
                             seed=seed, soft_cap=0.8)
    inputs = pa.build_decode_inputs(config, poison=True)
    run_and_compare(impl, inputs.args(), scales=inputs.scales(), options=inputs.options())
    both = pa.build_decode_inputs(config.with_(window=17, sinks=True), poison=True)
    run_and_compare(impl, both.args(), scales=both.scales(), options=both.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_each_option_changes_the_answer(impl, device, seed):
    """The test design's own check: each option alone moves the output far past
    tolerance, so a kernel that ignored one would fail the comparisons above."""
    inputs = build(device, seed, context_lens=(30, 45, 70), **SMALL)
    plain = IMPLS[impl](*inputs.args())
    for options in (dict(window=7), dict(soft_cap=0.5), dict(sinks=_sinks([4.0, 5.0, 3.0, 6.0], device))):
        out = run_and_compare(impl, inputs.args(), options=options)
        assert (out - plain).abs().max() > 0.05, options
