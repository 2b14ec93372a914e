"""Every decode implementation against the float64 reference, one axis at a time.

Each axis (dtype, head_dim, block_size, head grouping, block layout, ...) is swept
on its own around a small base case, for every implementation, so a failure names
the axis and the implementation. Inputs are fresh per test (``seed`` fixture). On
the CPU the Triton kernels run in Triton's interpreter, so the sizes stay small;
the ``gpu`` tests at the end repeat the comparisons at serving sizes. Inputs that
break naive kernels (strides, hostile logits, huge offsets, empty sequences):
``test_hostile_inputs.py``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paged_attention as pa
from paged_attention.inputs import OTHER
from helpers import DTYPES, IMPL_NAMES, IMPLS, assert_matches, at_serving_sizes, build, dtype_id, paged_inputs, replay_with_a_new_query, run_and_compare, seed  # noqa: F401

TRITON_IMPLS = ("triton", "triton_simple")


# -- the API surface --------------------------------------------------------------

def test_registry_names_every_implementation():
    assert set(pa.IMPLEMENTATIONS) == {"naive", "vectorized", "triton"}
    assert "triton_simple" in pa.VARIANTS
    assert not set(pa.VARIANTS) & set(pa.IMPLEMENTATIONS)
    assert set(pa.LABELS) == set(pa.IMPLEMENTATIONS) | set(pa.VARIANTS)
    assert all(isinstance(label, str) and label for label in pa.LABELS.values())
    assert pa.IMPLEMENTATIONS["naive"] is pa.naive_decode
    assert pa.IMPLEMENTATIONS["vectorized"] is pa.vectorized_decode
    assert pa.IMPLEMENTATIONS["triton"] is pa.triton_decode
    assert pa.VARIANTS["triton_simple"] is pa.triton_decode_simple
    for name in IMPL_NAMES:
        assert pa.get_implementation(name) is IMPLS[name]
    with pytest.raises(ValueError, match="unknown implementation"):
        pa.get_implementation("flash")


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_prepare_runs_the_named_implementation(impl, attention, device, seed):
    inputs = build(device, seed, attention=attention, context_lens=(3, 40, 17))
    launch = pa.prepare(impl, *inputs.args(), scale=0.2, **inputs.options())
    expected = pa.reference_decode(*inputs.args(), scale=0.2, **inputs.options())
    assert_matches(launch(), inputs.query, expected)
    assert_matches(launch(), inputs.query, expected)  # a launcher runs again


# -- one axis at a time -----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_dtypes(impl, dtype, attention, device, seed):
    inputs = build(device, seed, attention=attention, dtype=dtype_id(dtype), head_dim=128)
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("head_dim", [64, 80, 96, 112, 128, 256, 1, 24, 200, 512])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_head_dims(impl, head_dim, attention, device, seed):
    inputs = build(device, seed, attention=attention, head_dim=head_dim, context_lens=(1, 16, 17, 45))
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("block_size", [1, 3, 8, 12, 16, 32, 100, 256])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_block_sizes(impl, block_size, attention, device, seed):
    # float32 halves the Triton tile, so block 32 fills a tile and 256 spans eight.
    inputs = build(device, seed, attention=attention, block_size=block_size, dtype="float32")
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize(
    "num_heads, num_kv_heads",
    [(4, 4), (8, 2), (28, 4), (8, 1), (6, 2)],
    ids=["mha", "gqa4", "gqa7", "mqa", "gqa3"],
)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_head_groups(impl, num_heads, num_kv_heads, attention, device, seed):
    inputs = build(
        device, seed, attention=attention, num_heads=num_heads, num_kv_heads=num_kv_heads,
        dtype="bfloat16", context_lens=(1, 16, 33, 50),
    )
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("layout", pa.BLOCK_LAYOUTS)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_block_layouts(impl, layout, attention, device, seed):
    inputs = build(device, seed, attention=attention, block_layout=layout, spare_blocks=40, context_lens=(20, 1, 130, 64, 47))
    if layout == "fragmented":
        assert bool((inputs.pool_owner == OTHER).any())
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize(
    "head_dim, dtype, block_size, num_heads, num_kv_heads",
    [
        (256, torch.float32, 256, 4, 2),  # Triton tile of 16 tokens walks a block in 16 subtiles
        (80, torch.bfloat16, 12, 28, 4),
        (112, torch.float16, 3, 8, 1),
        (96, torch.float32, 1, 4, 4),
    ],
    ids=["d256-f32-b256", "d80-bf16-b12-gqa7", "d112-f16-b3-mqa", "d96-f32-b1-mha"],
)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_mixed_axes(impl, head_dim, dtype, block_size, num_heads, num_kv_heads, attention, device, seed):
    inputs = build(
        device, seed, attention=attention, head_dim=head_dim, dtype=dtype_id(dtype), block_size=block_size,
        num_heads=num_heads, num_kv_heads=num_kv_heads, context_lens=(block_size + 1, 1, 300),
    )
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_long_tail_ragged_batch(impl, attention, device, seed):
    lengths = pa.ragged_lengths(6, 1, 300, seed=seed, spread="long-tail")
    inputs = build(device, seed, attention=attention, context_lens=lengths, block_size=8, dtype="float32")
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.parametrize("scale", [0.03, 0.5, 2.0])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_explicit_scale(impl, scale, attention, device, seed):
    inputs = build(device, seed, attention=attention, dtype="float32", context_lens=(5, 40, 33))
    out = run_and_compare(impl, inputs.args(), scale=scale, options=inputs.options())
    default = pa.reference_decode(*inputs.args(), **inputs.options())
    assert (out.double() - default).abs().max() > 1e-2  # the scale was honoured


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_default_scale_is_inverse_sqrt_head_dim(impl, attention, device, seed):
    inputs = build(device, seed, attention=attention, dtype="float32", head_dim=80, context_lens=(5, 40))
    expected = pa.reference_decode(*inputs.args(), scale=80 ** -0.5, **inputs.options())
    run_and_compare(impl, inputs.args(), expected=expected, options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_int64_tables_and_lengths(impl, attention, device, seed):
    inputs = build(device, seed, attention=attention, context_lens=(1, 40, 17))
    q, k, v, tables, lens = inputs.args()
    run_and_compare(impl, (q, k, v, tables.long(), lens.long()), options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_descending_physical_ids(impl, attention, device, seed):
    lengths = (40, 29, 8)  # 5, 4 and 1 blocks of 8
    ids = ([12, 11, 10, 9, 8], [7, 6, 5, 4], [3])
    args = paged_inputs(
        lengths, ids, num_blocks=14, block_size=8, num_heads=8, num_kv_heads=2,
        dtype=torch.float16, device=device, seed=seed, window=attention.window,
    )
    run_and_compare(impl, args, options=attention.options(8, device, seed))


@st.composite
def small_configs(draw):
    batch = draw(st.integers(1, 3))
    num_kv_heads = draw(st.integers(1, 3))
    lens = tuple(draw(st.lists(st.integers(0, 90), min_size=batch, max_size=batch)))
    return pa.DecodeConfig(
        batch_size=batch,
        context_lens=lens,
        query_lens=draw(query_lens(lens)),
        num_heads=num_kv_heads * draw(st.integers(1, 5)),
        num_kv_heads=num_kv_heads,
        head_dim=draw(st.integers(1, 80)),
        block_size=draw(st.integers(1, 40)),
        dtype=draw(st.sampled_from(["float32", "float16", "bfloat16"])),
        block_layout=draw(st.sampled_from(pa.BLOCK_LAYOUTS)),
        spare_blocks=draw(st.integers(0, 4)),
        seed=draw(st.integers(0, 2**31 - 1)),
        **draw(attention_options()),
    )


def query_lens(lens: tuple[int, ...]):
    """DecodeConfig's ``query_lens`` for contexts ``lens``: one token each, or 1 to
    6 draft tokens per sequence (at most its context)."""
    drafts = st.tuples(*(st.integers(1, max(1, min(n, 6))) for n in lens))
    return st.one_of(st.just(1), drafts)


@st.composite
def attention_options(draw) -> dict:
    """DecodeConfig's attention fields, each set or not: a window from 1 to past
    every context, a soft-cap from far below the logits to far above, sinks."""
    return dict(
        window=draw(st.one_of(st.none(), st.integers(1, 100))),
        soft_cap=draw(st.one_of(st.none(), st.floats(0.05, 50.0))),
        sinks=draw(st.booleans()),
    )


@pytest.mark.parametrize("impl", IMPL_NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=small_configs(), scale=st.one_of(st.none(), st.floats(0.01, 2.0)))
def test_property_random_small_configs(impl, config, scale):
    """The axes crossed at random, attention options included: any small
    configuration matches the reference."""
    inputs = pa.build_decode_inputs(config.with_(device=pa.default_device()), poison=True)
    run_and_compare(impl, inputs.args(), scale=scale, options=inputs.options())


# -- on the GPU, at serving sizes ----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_gpu_serving_batch(impl, dtype, attention, seed):
    lengths = pa.ragged_lengths(7, 1, 4096, seed=seed) + (4096,)
    cfg = pa.DecodeConfig(
        batch_size=8, context_lens=lengths, num_heads=32, num_kv_heads=8, head_dim=128,
        block_size=16, dtype=dtype_id(dtype), device="cuda", seed=seed, block_layout="fragmented",
        **at_serving_sizes(attention).config(),
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.gpu
@pytest.mark.parametrize(
    "head_dim, block_size, num_heads, num_kv_heads",
    [(64, 1, 8, 8), (80, 12, 28, 4), (128, 256, 8, 1), (256, 32, 16, 2)],
    ids=["d64-b1-mha", "d80-b12-gqa7", "d128-b256-mqa", "d256-b32-gqa8"],
)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_gpu_shapes(impl, dtype, head_dim, block_size, num_heads, num_kv_heads, attention, seed):
    lengths = (1, block_size, block_size + 1, 1000, 4095, 2 * block_size, 3000, 17)
    cfg = pa.DecodeConfig(
        batch_size=8, context_lens=lengths, num_heads=num_heads, num_kv_heads=num_kv_heads,
        head_dim=head_dim, block_size=block_size, dtype=dtype_id(dtype), device="cuda", seed=seed,
        **at_serving_sizes(attention).config(),
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    run_and_compare(impl, inputs.args(), options=inputs.options())


@pytest.mark.gpu
@pytest.mark.skipif(pa.execution_mode() == "interpreter", reason="the Triton kernels are interpreted here")
@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_gpu_compiled_triton_rejects_cpu_tensors(impl, seed):
    inputs = build("cpu", seed, context_lens=(5, 20))
    with pytest.raises(ValueError, match="CUDA tensors"):
        IMPLS[impl](*inputs.args())


@pytest.mark.gpu
@pytest.mark.parametrize("lengths", [(300, 300, 300), (300, 0, 17, 64, 1), (5, 3)], ids=["uniform", "ragged", "short"])
@pytest.mark.parametrize("impl", sorted(pa.GRAPH_CAPTURABLE))
def test_gpu_prepared_implementations_replay_in_a_cuda_graph(impl, lengths, attention, seed):
    """``prepare`` promises no host synchronisation for these: capture one call in a
    CUDA graph, refill the query in place, replay, and compare with the reference."""
    inputs = build("cuda", seed, attention=attention, context_lens=lengths, dtype="float16")
    run = pa.prepare(impl, *inputs.args(), **inputs.options())
    out = replay_with_a_new_query(run, inputs.query)
    assert torch.isfinite(out).all()
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args(), **inputs.options()))
