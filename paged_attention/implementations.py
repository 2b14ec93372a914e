"""The decode implementations by name, with the labels the app and CLI show."""

from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

import torch

from .naive import naive_decode
from .triton_decode import prepare_triton_decode, triton_decode
from .triton_decode_simple import prepare_triton_decode_simple, triton_decode_simple
from .validation import check_decode_args, kv_scale_tensors
from .vectorized import vectorized_decode, vectorized_decode_unchecked

DecodeFn = Callable[..., torch.Tensor]

#: The three implementations the app races, by key. Each takes
#: ``(query, k_cache, v_cache, block_tables, context_lens, *, scale=None,
#: k_scale=None, v_scale=None)``; the scales are for an fp8 cache.
IMPLEMENTATIONS: Mapping[str, DecodeFn] = {
    "naive": naive_decode,
    "vectorized": vectorized_decode,
    "triton": triton_decode,
}

#: Extra variants the benchmarks and app can show beside the three.
VARIANTS: Mapping[str, DecodeFn] = {
    "triton_simple": triton_decode_simple,
    # A prefix pass over the blocks groups of sequences share (found in the block
    # table), then the decode kernel for each sequence's own blocks.
    "triton_prefix": partial(triton_decode, shared_prefixes="detect"),
}

LABELS: Mapping[str, str] = {
    "naive": "Naive PyTorch",
    "vectorized": "Optimized PyTorch",
    "triton": "Triton",
    "triton_simple": "Triton (simple grid)",
    "triton_prefix": "Triton (prefix-aware)",
}


def get_implementation(name: str) -> DecodeFn:
    """The decode function registered as ``name`` (in IMPLEMENTATIONS or VARIANTS).

    Raises
    ------
    ValueError
        If no implementation has that name.
    """
    table = {**IMPLEMENTATIONS, **VARIANTS}
    if name not in table:
        raise ValueError(f"unknown implementation {name!r}; choose from {', '.join(table)}")
    return table[name]


def prepare(
    name: str,
    *args: torch.Tensor,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
) -> Callable[[], torch.Tensor]:
    """Validate the arguments once and return a zero-argument callable that runs
    implementation ``name`` on them.

    For ``"vectorized"`` and the Triton kernels the callable does no
    host synchronisation, so a CUDA graph can capture it. ``"naive"`` reads the
    block table on the host by design and cannot be captured.

    Parameters
    ----------
    name : str
        A key of IMPLEMENTATIONS or VARIANTS.
    *args : Tensor
        ``query, k_cache, v_cache, block_tables, context_lens``.
    scale : float, optional
        Softmax scale.
    k_scale, v_scale : float or Tensor, optional
        Dequantization scales of an fp8 cache (see
        :func:`paged_attention.validation.check_decode_args`).

    Raises
    ------
    ValueError
        On an unknown name, a wrong number of tensors, or invalid arguments.

    Notes
    -----
    The callable is bound to the sizes it was prepared with, context lengths
    included (they set the Triton kernel's split plan and the gather length of
    ``"vectorized"``). Tensors may be refilled in place between calls, as a CUDA
    graph replay does, but prepare again when the context lengths change.
    """
    if len(args) != 5:
        raise ValueError(
            f"prepare takes the five decode tensors (query, k_cache, v_cache, block_tables, context_lens); "
            f"got {len(args)}"
        )
    fn = get_implementation(name)
    scales = dict(k_scale=k_scale, v_scale=v_scale)
    if name == "triton":
        return prepare_triton_decode(*args, scale=scale, **scales)
    if name == "triton_prefix":
        return prepare_triton_decode(*args, scale=scale, shared_prefixes="detect", **scales)
    if name == "triton_simple":
        return prepare_triton_decode_simple(*args, scale=scale, **scales)
    shape = check_decode_args(*args, scale, **scales)
    if name == "vectorized":
        device_scales = kv_scale_tensors(shape, k_scale, v_scale, args[0].device)
        return lambda: vectorized_decode_unchecked(*args, shape, *device_scales)
    return lambda: fn(*args, scale=scale, **scales)


GRAPH_CAPTURABLE = frozenset({"vectorized", "triton", "triton_simple", "triton_prefix"})
