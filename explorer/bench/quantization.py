"""The error an fp8 KV cache itself costs, told apart from each kernel's own error.

The implementations are checked against the float64 reference on the
*dequantized* cache, the values they were given (the kernel error, with the
compute dtype's tolerance). Storing K and V in 8 bits moved those values first:
the quantization error is how far the exact answer on the fp8 cache (that same
reference) lies from the float64 reference on the original, unquantized values,
what a cache in the compute dtype's precision or better would give. Every exact
kernel has it; no kernel can remove it, so it has no pass/fail tolerance here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.formatting import kv_dtype_label
from paged_attention import (
    DecodeConfig,
    DecodeInputs,
    reference_decode,
    tolerance,
    unquantized_cache,
)


@dataclass(frozen=True)
class QuantizationError:
    """The quantization error of one fp8 configuration.

    ``max_abs_err`` is ``max |ref_fp8 - ref_unquantized|`` and ``max_tol_ratio``
    the same in units of the compute dtype's tolerance,
    ``max |ref_fp8 - ref| / (atol + rtol |ref|)``; both None when it was not
    measured, and ``note`` says why (not enough memory).
    """

    kv_dtype: str
    max_abs_err: float | None
    max_tol_ratio: float | None
    note: str | None = None


def unquantized_config(config: DecodeConfig) -> DecodeConfig:
    """A configuration whose inputs take what measuring the quantization error
    allocates beside the fp8 inputs: float32 K and V pools (and a float32 query),
    so memory can be checked by the one rule before anything is allocated."""
    return config.with_(kv_dtype=None, kv_scale="per_tensor", dtype="float32")


def quantization_error(inputs: DecodeInputs, reference: torch.Tensor) -> QuantizationError:
    """The quantization error of the fp8 ``inputs``.

    Parameters
    ----------
    inputs : DecodeInputs
        From :func:`~paged_attention.build_decode_inputs` with an fp8 ``kv_dtype``.
    reference : Tensor
        ``reference_decode(*inputs.args(), **inputs.kwargs())``: float64
        ``[batch_size, num_heads, head_dim]``, the exact answer on the fp8 cache.

    Returns
    -------
    QuantizationError

    Raises
    ------
    ValueError
        If the cache is not fp8.
    """
    config = inputs.config
    if not config.is_fp8:
        raise ValueError(f"the quantization error is for an fp8 cache; this one is {config.dtype}")
    k32, v32 = unquantized_cache(config)
    # The reference widens every value it reads to float64, so a float32 query and
    # pools give exactly the answer of their float64 copies, in half their memory.
    unquantized = reference_decode(inputs.query.float(), k32, v32, inputs.block_tables, inputs.context_lens,
                                   **inputs.options())  # the same window, sinks and soft-cap
    del k32, v32
    atol, rtol = tolerance(config.torch_dtype)
    diff = (reference - unquantized).abs()
    if not diff.numel():
        return QuantizationError(kv_dtype_label(config.kv_dtype), 0.0, 0.0)
    return QuantizationError(
        kv_dtype_label(config.kv_dtype), float(diff.max()), float((diff / (atol + rtol * unquantized.abs())).max())
    )
