"""The kernel trace with the attention options (sliding window, attention sinks,
logit soft-capping): it walks what the kernel reads and ends at the reference."""

import math

import pytest
import torch

from explorer.kernel.trace import trace_decode
from paged_attention import DecodeConfig, build_decode_inputs, default_device, reference_decode, tolerance
from paged_attention.triton_decode import prepare_triton_decode
from paged_attention.tile_walk import LOG2E

F64_ATOL = 1e-12
LENS = (300, 97, 30, 1)
WINDOW = 45  # mid-block for every block size below; longer than the third sequence
CAP = 4.0
OPTIONS = {
    "window": dict(window=WINDOW),
    "sinks": dict(sinks=True),
    "soft_cap": dict(soft_cap=CAP),
    "all three": dict(window=WINDOW, sinks=True, soft_cap=CAP),
}


def make_inputs(block_size, context_lens=LENS, dtype="float32", poison=True, **kw):
    # poison: slots and table entries before a window hold NaN/Inf and -1: the trace must not read them.
    config = DecodeConfig(batch_size=len(context_lens), context_lens=context_lens, num_heads=6, num_kv_heads=2,
                          head_dim=kw.pop("head_dim", 24), block_size=block_size, dtype=dtype, **kw)
    return build_decode_inputs(config, poison=poison)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("block_size, overrides", [
    (3, {}), (16, {"num_splits": 1}), (16, {"num_splits": 3}), (64, {"num_splits": 2, "block_n": 16}),
])
def test_trace_with_options_ends_at_the_reference(option, block_size, overrides):
    inputs = make_inputs(block_size, **OPTIONS[option])
    ref = reference_decode(*inputs.args(), **inputs.kwargs())
    for seq, head in [(0, 0), (1, 5), (2, 3), (3, 1)]:
        trace = trace_decode(inputs, seq, head, **overrides)
        torch.testing.assert_close(trace.output, ref[seq, head], atol=F64_ATOL, rtol=0)
        assert trace.max_abs_error < F64_ATOL
        if overrides.get("num_splits", 1) > 1 and seq == 0:
            assert trace.merged


@pytest.mark.parametrize("block_size, overrides", [(16, {"num_splits": 3}), (64, {"block_n": 16}), (3, {})])
def test_window_skips_the_blocks_before_it_and_masks_its_first_tile(block_size, overrides):
    inputs = make_inputs(block_size, window=WINDOW)
    n = LENS[0]
    start = n - WINDOW
    trace = trace_decode(inputs, 0, 2, **overrides)
    first = start // block_size
    assert trace.window_start == start and trace.first_block == first > 0
    tiles = trace.tiles
    # No tile reads a block before the window's; one table lookup per block from it on.
    assert tiles["first_block"].min() == first
    assert tiles["table_lookups"].sum() == math.ceil(n / block_size) - first
    assert tiles["valid_tokens"].sum() == WINDOW and (tiles["token_start"] >= start).all()
    head = tiles.iloc[0]
    assert head["token_start"] == start
    plan = trace.plan
    if plan.subtiles > 1:  # large blocks: the subtiles that end before the window's start are not walked
        skipped = (start % block_size) // plan.slots_per_tile
        assert head["subtile"] == skipped
        assert len(tiles[tiles["first_block"] == first]) == plan.subtiles - skipped
    else:  # the first tile's lanes before the window's start are masked
        assert head["masked_lanes"] >= start - first * block_size
    # The logits are the window's positions, in order.
    assert trace.logits["token"].tolist() == list(range(start, n))


def test_a_window_longer_than_the_context_reads_it_all():
    trace = trace_decode(make_inputs(16, window=WINDOW), 2, 0)
    assert trace.window_start == 0 and trace.first_block == 0
    assert trace.tiles["valid_tokens"].sum() == LENS[2]


def test_soft_cap_caps_the_traced_logits():
    inputs = make_inputs(16, soft_cap=CAP, seed=3)
    trace = trace_decode(inputs, 0, 4, num_splits=2)
    logits = trace.logits
    assert trace.soft_cap == CAP and len(logits) == LENS[0]
    assert (logits["capped"].abs() <= CAP).all()
    torch.testing.assert_close(torch.tensor(logits["capped"].to_numpy()),
                               CAP * torch.tanh(torch.tensor(logits["raw"].to_numpy()) / CAP), atol=1e-14, rtol=0)
    # The raw logits are scale * q.k; the online softmax runs on the capped ones (log2 units).
    shape_scale = 1 / math.sqrt(24)
    k = inputs.k_cache[inputs.block_tables[0, 0], 5, 4 // 3].double()
    assert logits["raw"].iloc[5] == pytest.approx(float(inputs.query[0, 4].double() @ k) * shape_scale, abs=1e-12)
    first = trace.tiles.iloc[0]
    assert first["tile_max"] == pytest.approx(LOG2E * CAP * math.tanh(first["raw_max"] / CAP), abs=1e-12)
    plain = trace_decode(make_inputs(16, seed=3), 0, 4, num_splits=2)
    assert plain.soft_cap is None and (plain.logits["raw"] == plain.logits["capped"]).all()
    assert (plain.logits["raw"] == logits["raw"]).all()


@pytest.mark.parametrize("sinks", [False, True])
def test_the_sink_term_joins_the_denominator_only_with_sinks(sinks):
    inputs = make_inputs(16, sinks=sinks)
    trace = trace_decode(inputs, 0, 1, num_splits=3)
    if not sinks:
        assert trace.sink is None and trace.sink_term == 0 and trace.sink_share == 0
    else:
        sink = float(inputs.sinks[1])
        assert trace.sink == pytest.approx(sink)
        assert trace.sink_term == pytest.approx(2 ** (sink * LOG2E - trace.m_final), rel=1e-12)
        assert 0 < trace.sink_share < 1
    # The splits' shares and the sink's make the whole softmax mass.
    assert trace.splits["share"].sum() + trace.sink_share == pytest.approx(1.0, abs=1e-12)
    assert trace.l_final == pytest.approx((trace.splits["weight"] * trace.splits["l"]).sum(), rel=1e-12)


def test_a_shared_prefix_with_options_ends_at_the_reference():
    lens = (1400, 1100, 1040, 1800)
    inputs = make_inputs(16, context_lens=lens, shared_prefix=1024, prefix_groups=2, window=400, sinks=True,
                         soft_cap=CAP)
    ref = reference_decode(*inputs.args(), **inputs.kwargs())
    for seq, head in [(0, 0), (2, 4), (3, 5)]:
        trace = trace_decode(inputs, seq, head, shared_prefixes="detect")
        torch.testing.assert_close(trace.output, ref[seq, head], atol=F64_ATOL, rtol=0)


def test_trace_with_options_agrees_with_the_triton_kernel():
    inputs = make_inputs(64, context_lens=(150, 61), head_dim=16, window=WINDOW, sinks=True, soft_cap=CAP,
                         device=default_device())
    plan = trace_decode(inputs, 0, 0, num_splits=2, block_n=16).plan
    assert plan.subtiles == 4 and plan.num_splits == 2
    out = prepare_triton_decode(*inputs.args(), **inputs.kwargs(), plan=plan)().cpu()
    atol, rtol = tolerance(inputs.query.dtype)
    for seq, head in [(0, 0), (1, 5)]:
        trace = trace_decode(inputs, seq, head, plan=plan)
        torch.testing.assert_close(trace.output.cpu(), out[seq, head].double(), atol=atol, rtol=rtol)


def test_the_trace_refuses_bad_options_as_the_launcher_does():
    inputs = make_inputs(16)
    with pytest.raises(ValueError, match="window must be an integer"):
        trace_decode(inputs, 0, 0, window=0)
    with pytest.raises(ValueError, match="soft_cap must be a finite number"):
        trace_decode(inputs, 0, 0, soft_cap=-1.0)
    with pytest.raises(ValueError, match="sinks must be float32"):
        trace_decode(inputs, 0, 0, sinks=torch.zeros(5))
