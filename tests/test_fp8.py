"""fp8 KV caches (float8_e4m3fn, float8_e5m2) with per-tensor and per-KV-head scales:
every implementation against the float64 reference on the dequantized values, on
awkward sizes and dirty memory; how the inputs are quantized; the byte counts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paged_attention as pa
from helpers import IMPL_NAMES, IMPLS, PLAIN, assert_matches, at_serving_sizes, replay_with_a_new_query, run_and_compare, seed  # noqa: F401
from test_correctness import small_configs

FORMATS = ("float8_e4m3fn", "float8_e5m2")
SCALES = ("per_tensor", "per_head")


def fp8_config(device, seed, attention=PLAIN, **changes) -> pa.DecodeConfig:
    """Ragged with an empty row, GQA 3, head_dim 40, block_size 12, shuffled pool,
    the ``attention`` options."""
    base = dict(batch_size=4, context_lens=(0, 37, 1, 70), num_heads=6, num_kv_heads=2, head_dim=40,
                block_size=12, dtype="float16", kv_dtype="float8_e4m3fn", device=device, seed=seed,
                **attention.config())
    return pa.DecodeConfig(**{**base, **changes})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("kv_scale", SCALES)
@pytest.mark.parametrize("kv_dtype", FORMATS)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_matches_reference_on_dequantized_values(impl, kv_dtype, kv_scale, dtype, attention, device, seed):
    inputs = pa.build_decode_inputs(
        fp8_config(device, seed, attention, kv_dtype=kv_dtype, kv_scale=kv_scale, dtype=dtype), poison=True
    )
    assert inputs.k_cache.dtype == getattr(torch, kv_dtype)
    assert torch.isnan(inputs.k_cache.float()).any(), "the poisoned pool must hold NaN"
    out = run_and_compare(impl, inputs.args(), scales=inputs.scales(), options=inputs.options())
    assert out.dtype == getattr(torch, dtype)


@pytest.mark.parametrize("impl", IMPL_NAMES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=small_configs(), kv_dtype=st.sampled_from(FORMATS), kv_scale=st.sampled_from(SCALES))
def test_property_random_small_fp8_configs(impl, config, kv_dtype, kv_scale):
    """Odd head_dim and block_size, ragged lengths with 0, GQA/MQA, every block
    layout, dirty memory, attention options: the fp8 cache changes none of the rules."""
    config = config.with_(device=pa.default_device(), kv_dtype=kv_dtype, kv_scale=kv_scale)
    inputs = pa.build_decode_inputs(config, poison=True)
    run_and_compare(impl, inputs.args(), scales=inputs.scales(), options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_per_head_scales_far_apart(impl, attention, device, seed):
    """Scales far apart per KV head, a block shared by two sequences: a kernel that
    applies one head's scale to another (or drops one) is far off, and the check
    below proves the comparison would see it."""
    inputs = pa.build_decode_inputs(fp8_config(device, seed, attention, kv_scale="per_head"), poison=True)
    # Stored values reach 448: these keep dequantized values of order 0.2 to 9, as
    # amax scaling does, 25 to 40 times apart between the heads.
    k_scale = torch.tensor([0.01, 0.0004], device=device)
    v_scale = torch.tensor([0.0005, 0.02], device=device)
    tables = inputs.block_tables.clone()
    tables[2, 0] = tables[3, 5]  # sequence 2 reads sequence 3's last block (shared, in every window)
    args = (*inputs.args()[:3], tables, inputs.context_lens)
    options = inputs.options()
    run_and_compare(impl, args, scales=dict(k_scale=k_scale, v_scale=v_scale), options=options)
    swapped = pa.reference_decode(*args, k_scale=k_scale.flip(0), v_scale=v_scale.flip(0), **options)
    out = IMPLS[impl](*args, k_scale=k_scale, v_scale=v_scale, **options)
    with pytest.raises(AssertionError):
        assert_matches(out, inputs.query, swapped)


def test_reference_dequantizes_exactly(device, seed):
    """The reference on an fp8 cache equals the reference on the float64 products
    ``stored * scale``, bit for bit."""
    inputs = pa.build_decode_inputs(fp8_config(device, seed, kv_scale="per_head"), poison=True)
    k = inputs.k_cache.double() * inputs.k_scale.double()[:, None]
    v = inputs.v_cache.double() * inputs.v_scale.double()[:, None]
    fp8 = pa.reference_decode(*inputs.args(), **inputs.scales())
    plain = pa.reference_decode(inputs.query.double(), k, v, inputs.block_tables, inputs.context_lens)
    assert torch.equal(fp8, plain)


@pytest.mark.parametrize("kv_scale", SCALES)
@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_quantization_is_amax_scaling(kv_dtype, kv_scale, device, seed):
    config = fp8_config(device, seed, kv_dtype=kv_dtype, kv_scale=kv_scale, context_lens=(40, 9, 0, 17))
    inputs = pa.build_decode_inputs(config)
    k, _ = pa.unquantized_cache(config)
    fp8_max = torch.finfo(getattr(torch, kv_dtype)).max
    dims = (0, 1, 3) if kv_scale == "per_head" else (0, 1, 2, 3)
    amax = k.abs().amax(dim=dims)
    expected_scale = (amax / fp8_max).float()
    if kv_scale == "per_head":
        assert inputs.k_scale.dtype == torch.float32 and inputs.k_scale.shape == (config.num_kv_heads,)
        assert torch.equal(inputs.k_scale, expected_scale)
        scale = inputs.k_scale.double()[:, None]
    else:
        assert isinstance(inputs.k_scale, float) and inputs.k_scale == float(expected_scale)
        scale = inputs.k_scale
    covered = pa.poison.context_mask(inputs.block_tables, inputs.context_lens, config.num_blocks, config.block_size)
    dequantized = (inputs.k_cache.double() * scale)[covered]
    original = k.double()[covered]
    # Round to nearest: within half a step, 2**-4 (e4m3) or 2**-3 (e5m2) relative,
    # or the smallest subnormal's half step near zero.
    finfo = torch.finfo(getattr(torch, kv_dtype))
    rel = finfo.eps / 2
    step = finfo.smallest_normal * finfo.eps  # the smallest subnormal
    slack = rel * original.abs() + step * (scale.max() if torch.is_tensor(scale) else scale)
    assert ((dequantized - original).abs() <= slack * (1 + 1e-9)).all()
    assert not torch.equal(dequantized, original)  # it really was quantized


def test_fp8_config_counts_one_byte_per_element():
    half = pa.DecodeConfig(batch_size=2, context_lens=(100, 28), dtype="float16")
    fp8 = half.with_(kv_dtype="float8_e4m3fn")
    assert fp8.kv_element_size == 1 and half.kv_element_size == 2
    assert fp8.needed_kv_bytes() * 2 == half.needed_kv_bytes()
    assert fp8.kv_cache_bytes() * 2 == half.kv_cache_bytes()
    # the query and output stay float16
    qo = 2 * 2 * half.num_heads * half.head_dim * 2
    assert fp8.decode_bytes() == fp8.needed_kv_bytes() + qo
    assert half.with_(kv_dtype="float16").kv_dtype is None  # the query's own dtype is the default


@pytest.mark.parametrize("changes, message", [
    (dict(kv_dtype="float8"), r"kv_dtype must be the query's dtype \(float16\) or one of float8_e4m3fn, float8_e5m2"),
    (dict(kv_dtype="bfloat16"), r"kv_dtype must be the query's dtype"),
    (dict(kv_dtype="float8_e4m3fn", kv_scale="per_block"), r"kv_scale must be one of per_tensor, per_head"),
])
def test_bad_fp8_config_raises(changes, message):
    config = pa.DecodeConfig(**changes)
    with pytest.raises(ValueError, match=message):
        config.validate()
    with pytest.raises(ValueError, match=message):
        pa.build_decode_inputs(config)


@pytest.mark.parametrize("impl", sorted(pa.GRAPH_CAPTURABLE))
def test_prepared_launcher_reads_the_scale_tensor_in_place(impl, attention, device, seed):
    """A prepared launcher (and so a CUDA graph) reads the caller's scale tensors
    (and sink logits): refilling them in place changes the next call's output as
    the reference says."""
    inputs = pa.build_decode_inputs(fp8_config(device, seed, attention, kv_scale="per_head"), poison=True)
    k_scale, v_scale = inputs.k_scale.clone(), inputs.v_scale.clone()
    options = inputs.options()
    run = pa.prepare(impl, *inputs.args(), k_scale=k_scale, v_scale=v_scale, **options)
    run()
    k_scale.mul_(torch.tensor([3.0, 0.25], device=device))
    v_scale.mul_(torch.tensor([0.5, 4.0], device=device))
    if "sinks" in options:
        options["sinks"].copy_(torch.tensor([3.0, -2.0, 0.5, 1e4, -1e4, 0.0], device=device))
    expected = pa.reference_decode(*inputs.args(), k_scale=k_scale, v_scale=v_scale, **options)
    assert_matches(run().clone(), inputs.query, expected)


# -- on the GPU, at serving sizes ----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("kv_scale", SCALES)
@pytest.mark.parametrize("kv_dtype", FORMATS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_gpu_fp8_serving_batch(impl, dtype, kv_dtype, kv_scale, attention, seed):
    lengths = pa.ragged_lengths(7, 1, 4096, seed=seed) + (4096,)
    cfg = pa.DecodeConfig(
        batch_size=8, context_lens=lengths, num_heads=32, num_kv_heads=8, head_dim=128, block_size=16,
        dtype=dtype, kv_dtype=kv_dtype, kv_scale=kv_scale, device="cuda", seed=seed, block_layout="fragmented",
        **at_serving_sizes(attention).config(),
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    run_and_compare(impl, inputs.args(), scales=inputs.scales(), options=inputs.options())


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, block_size, num_heads, num_kv_heads, batch, length",
                         [(128, 16, 32, 8, 1, 32768), (128, 16, 32, 8, 64, 1000), (256, 32, 16, 2, 3, 5000),
                          (80, 1, 8, 8, 5, 300)],
                         ids=["split-k", "many", "d256", "d80-b1"])
@pytest.mark.parametrize("impl", ["triton", "triton_simple", "vectorized"])
def test_gpu_fp8_shapes_in_a_cuda_graph(impl, head_dim, block_size, num_heads, num_kv_heads, batch, length,
                                        attention, seed):
    cfg = pa.DecodeConfig(
        batch_size=batch, context_lens=length, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
        block_size=block_size, dtype="float16", kv_dtype="float8_e4m3fn", kv_scale="per_head", device="cuda",
        seed=seed, block_layout="shuffled", **at_serving_sizes(attention).config(),
    )
    inputs = pa.build_decode_inputs(cfg, poison=True)
    run = pa.prepare(impl, *inputs.args(), **inputs.kwargs())
    out = replay_with_a_new_query(run, inputs.query)
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args(), **inputs.kwargs()))


def _shape(batch, length, kv_dtype, block_size=16, num_kv_heads=8):
    blocks = -(-length // block_size)
    return pa.DecodeShape(
        batch_size=batch, num_heads=4 * num_kv_heads, num_kv_heads=num_kv_heads, head_dim=128,
        num_blocks=batch * blocks, block_size=block_size, max_num_blocks=blocks, scale=0.1,
        context_lens=torch.full((batch,), length), block_tables=torch.zeros(batch, blocks, dtype=torch.long),
        kv_dtype=kv_dtype,
    )


@pytest.mark.parametrize("batch, length, block_size, splits, block_n", [
    (64, 4096, 16, 2, 32), (32, 2048, 16, 4, 32), (128, 1024, 16, 1, 32), (32, 2048, 256, 4, 64),
    (8, 8192, 16, 16, 32),
])
def test_fp8_plan_runs_many_one_warp_programs(monkeypatch, batch, length, block_size, splits, block_n):
    """An fp8 batch of 64+ (sequence, KV head) rows: one warp per program, splits up to 1024 programs, small tiles,
    2 stages (docs/performance.md, "v13"); the same batch in float16 keeps 4 warps."""
    from paged_attention import launch_plan, runtime

    monkeypatch.setattr(runtime, "num_sms", lambda device: 132)
    plan = pa.plan_launch(_shape(batch, length, torch.float8_e4m3fn, block_size), torch.device("cpu"), torch.float16)
    assert (plan.num_warps, plan.num_splits, plan.block_n, plan.num_stages) == (1, splits, block_n, 2)
    assert batch * 8 * plan.num_splits >= launch_plan.FP8_ONE_WARP_PROGRAMS
    half = pa.plan_launch(_shape(batch, length, torch.float16, block_size), torch.device("cpu"), torch.float16)
    assert half.num_warps == 4 and half.num_stages == 3


@pytest.mark.parametrize("batch, length, warps, splits", [
    (16, 1024, 1, 8), (16, 2048, 1, 8), (8, 2048, 1, 16), (64, 256, 1, 2), (32, 512, 1, 4),
    (16, 236, 4, None), (8, 1024, 4, None), (16, 512, 4, None), (8, 256, 4, None),
])
def test_fp8_plan_runs_one_warp_only_where_it_reaches_1024_programs(monkeypatch, batch, length, warps, splits):
    """A uniform fp8 batch runs one-warp programs only if splits of at least 128 tokens give 1024 of them;
    otherwise the 4-warp plan of a 16-bit cache (v21: one-warp programs 1.2 to 2.1x slower at 128 to 512)."""
    from paged_attention import launch_plan, runtime

    monkeypatch.setattr(runtime, "num_sms", lambda device: 132)
    plan = pa.plan_launch(_shape(batch, length, torch.float8_e4m3fn), torch.device("cpu"), torch.float16)
    assert plan.num_warps == warps
    if warps == 1:
        assert plan.num_splits == splits and batch * 8 * plan.num_splits >= launch_plan.FP8_ONE_WARP_PROGRAMS
        assert plan.blocks_per_split * 16 >= launch_plan.FP8_ONE_WARP_SPLIT_TOKENS
    else:
        half = pa.plan_launch(_shape(batch, length, torch.float16), torch.device("cpu"), torch.float16)
        assert (plan.num_splits, plan.num_stages) == (half.num_splits, half.num_stages)


def test_fp8_plan_of_a_small_batch_and_overrides(monkeypatch):
    from paged_attention import runtime

    monkeypatch.setattr(runtime, "num_sms", lambda device: 132)
    small = pa.plan_launch(_shape(1, 32768, torch.float8_e4m3fn), torch.device("cpu"), torch.float16)
    assert small.num_warps == 4  # 8 rows: 1024 one-warp programs would be splits of 256 tokens
    fixed = pa.plan_launch(_shape(64, 4096, torch.float8_e4m3fn), torch.device("cpu"), torch.float16,
                           num_warps=4, num_splits=1)
    assert (fixed.num_warps, fixed.num_splits) == (4, 1)
