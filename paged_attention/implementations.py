"""The decode implementations by name, with the labels the app and CLI show."""

from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

import torch

from .launcher import PreparedCall
from .naive import naive_decode
from .triton_decode import prepare_triton_decode, triton_decode
from .triton_decode_simple import prepare_triton_decode_simple, triton_decode_simple
from .validation import check_decode_args, kv_scale_tensors
from .vectorized import vectorized_decode, vectorized_decode_unchecked

DecodeFn = Callable[..., torch.Tensor]

#: The three implementations the app races, by key. Each (and each of VARIANTS, and
#: :func:`prepare` after the name) takes ``(query, k_cache, v_cache, block_tables,
#: context_lens, *, scale=None, k_scale=None, v_scale=None, window=None, sinks=None,
#: soft_cap=None, query_lens=None)``: the scales are for an fp8 cache; ``window``
#: (int >= 1) attends to the last ``window`` positions, ``sinks`` (float32
#: ``[num_heads]``) adds one logit per head to the softmax's denominator,
#: ``soft_cap`` (float > 0) caps the scaled logits to ``soft_cap * tanh(s /
#: soft_cap)``, ``query_lens`` (integer ``[batch_size]``) gives each sequence
#: several query tokens, causal among themselves (see
#: :func:`~paged_attention.validation.check_decode_args`).
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


#: The implementations whose prepared call does no host synchronisation, so
#: :func:`prepare` captures it into a CUDA graph (and a timing harness may too).
GRAPH_CAPTURABLE = frozenset({"vectorized", "triton", "triton_simple", "triton_prefix"})


def prepare(
    name: str,
    *args: torch.Tensor,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
    graph: bool = True,
) -> PreparedCall:
    """Validate the arguments once and return a zero-argument callable that runs
    implementation ``name`` on them.

    For the names in :data:`GRAPH_CAPTURABLE` (``"vectorized"`` and the Triton
    kernels) the launch does no host synchronisation: on a CUDA device it is
    captured here into a CUDA graph, and each call replays it
    (:class:`~paged_attention.launcher.PreparedCall`): a few microseconds of host
    time instead of Python's and Triton's dispatch, the same output bit for bit.
    ``"naive"`` reads the block table on the host by design and is never graphed.

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
    window : int, optional
        Sliding window: attend to the last ``window`` positions of each context.
    sinks : Tensor, optional
        float32 ``[num_heads]`` on the query's device: an attention-sink logit per
        query head. Read on every call, like the scale tensors: refilling it in
        place changes the next call's output.
    soft_cap : float, optional
        Logit soft-capping of the scaled logits.
    query_lens : Tensor, optional
        int32 or int64 ``[batch_size]`` on the query's device: query tokens per
        sequence (the query then has ``sum(query_lens)`` rows). Read once, here.
    graph : bool
        Capture the launch into a CUDA graph where it can be (default); False
        launches through Python on every call.

    Returns
    -------
    PreparedCall
        ``call() -> Tensor`` of the query's shape;
        ``call.graphed`` says whether it replays a graph (False on the CPU).

    Raises
    ------
    ValueError
        On an unknown name, a wrong number of tensors, or invalid arguments.

    Notes
    -----
    The callable is bound to the sizes it was prepared with, context lengths
    included (they set the Triton kernel's split plan and the gather length of
    ``"vectorized"``). Tensors may be refilled in place between calls and the next
    call reads the new values; prepare again when the context lengths change. The
    Triton launchers return the same output tensor on every call, and so does
    every graphed call (``"vectorized"`` on a GPU too): clone a result to keep it.
    """
    if len(args) != 5:
        raise ValueError(
            f"prepare takes the five decode tensors (query, k_cache, v_cache, block_tables, context_lens); "
            f"got {len(args)}"
        )
    fn = get_implementation(name)
    # Only the options given travel on, so a plain call takes each implementation's
    # plain path.
    options = dict(window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens)
    options = {k: v for k, v in options.items() if v is not None}
    kwargs = dict(k_scale=k_scale, v_scale=v_scale, **options)
    return PreparedCall(_launch(name, fn, args, scale, kwargs), args[0].device,
                        graph=graph and name in GRAPH_CAPTURABLE)


def _launch(name: str, fn: DecodeFn, args: tuple[torch.Tensor, ...], scale: float | None,
            kwargs: dict) -> Callable[[], torch.Tensor]:
    """The launch of implementation ``name`` on ``args`` (``kwargs``: the scales and
    the attention options given), validated once."""
    if name == "triton":
        return prepare_triton_decode(*args, scale=scale, **kwargs)
    if name == "triton_prefix":
        return prepare_triton_decode(*args, scale=scale, shared_prefixes="detect", **kwargs)
    if name == "triton_simple":
        return prepare_triton_decode_simple(*args, scale=scale, **kwargs)
    shape = check_decode_args(*args, scale, **kwargs)
    if name == "vectorized":
        device_scales = kv_scale_tensors(shape, kwargs["k_scale"], kwargs["v_scale"], args[0].device)
        return lambda: vectorized_decode_unchecked(*args, shape, *device_scales, kwargs.get("sinks"),
                                                   kwargs.get("query_lens"))
    return lambda: fn(*args, scale=scale, **kwargs)


