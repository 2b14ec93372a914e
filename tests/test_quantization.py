"""The fp8 quantization error the Decode benchmark page shows beside each kernel's
own error: its definition, and that a 16-bit cache has none."""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from explorer.bench.quantization import quantization_error, unquantized_config


@pytest.mark.parametrize("kv_scale", ["per_tensor", "per_head"])
@pytest.mark.parametrize("kv_dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantization_error_is_the_fp8_answer_against_the_unquantized_one(kv_dtype, kv_scale):
    config = pa.DecodeConfig(batch_size=3, context_lens=(0, 37, 70), num_heads=6, num_kv_heads=2, head_dim=40,
                             block_size=12, kv_dtype=kv_dtype, kv_scale=kv_scale)
    inputs = pa.build_decode_inputs(config)
    fp8 = pa.reference_decode(*inputs.args(), **inputs.scales())
    k32, v32 = pa.unquantized_cache(config)
    exact = pa.reference_decode(inputs.query.double(), k32.double(), v32.double(), inputs.block_tables,
                                inputs.context_lens)
    q = quantization_error(inputs, fp8)
    assert q.max_abs_err == float((fp8 - exact).abs().max()) > 0
    atol, rtol = pa.tolerance(torch.float16)
    assert q.max_tol_ratio == pytest.approx(float(((fp8 - exact).abs() / (atol + rtol * exact.abs())).max()))
    assert q.kv_dtype == {"float8_e4m3fn": "fp8 e4m3", "float8_e5m2": "fp8 e5m2"}[kv_dtype] and q.note is None
    # 3 or 2 mantissa bits to float16's 10: the error fp8 storage costs is beyond float16's tolerance
    assert q.max_tol_ratio > 1


def test_quantization_error_needs_an_fp8_cache_and_memory_of_float32_pools():
    config = pa.DecodeConfig(batch_size=2, context_lens=(5, 9), num_heads=4, num_kv_heads=2, head_dim=16)
    inputs = pa.build_decode_inputs(config)
    with pytest.raises(ValueError, match="fp8 cache"):
        quantization_error(inputs, pa.reference_decode(*inputs.args()))
    fp8 = config.with_(kv_dtype="float8_e4m3fn")
    assert unquantized_config(fp8).kv_cache_bytes() == 4 * fp8.kv_cache_bytes()
