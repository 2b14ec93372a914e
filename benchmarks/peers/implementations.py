"""Which implementations ``benchmarks.decode_peers`` times, their names, and the
call each runs: ours (``prepare``, and the prefix-aware Triton kernel), the
PyTorch peers (:mod:`benchmarks.peers.torch_peers`) and FlashInfer's
(:mod:`benchmarks.peers.flashinfer`)."""

from __future__ import annotations

from benchmarks.peers import Skipped
from benchmarks.peers.flashinfer import FLASHINFER, flashinfer_cascade, flashinfer_decode
from benchmarks.peers.torch_peers import TORCH_PEERS
from paged_attention import LABELS as OUR_LABELS
from paged_attention import prepare

OURS = ("triton", "triton_simple", "vectorized")
IMPLS = list(OURS) + list(TORCH_PEERS) + list(FLASHINFER)
#: Implementations for shared prefixes; only ``--set prefix`` runs them by default.
PREFIX_IMPLS = ["triton_prefix", "flashinfer_cascade"]
ALL_IMPLS = IMPLS + PREFIX_IMPLS
#: Rows that need flashinfer.
FLASHINFER_ROWS = (*FLASHINFER, "flashinfer_cascade")
#: Implementations that take an fp8 cache; the other peers run on 16-bit caches only.
FP8_IMPLS = (*OURS, *FLASHINFER, "triton_prefix")
FP8_KV = ("float8_e4m3fn", "float8_e5m2")
#: How a row's ``label`` names each implementation.
LABELS: dict[str, str] = {
    **{name: OUR_LABELS[name] for name in (*OURS, "triton_prefix")},
    "sdpa_contiguous": "SDPA on a contiguous cache",
    "gather_sdpa": "gather + SDPA",
    "flex_paged": "FlexAttention paged decode",
    "flashinfer": "FlashInfer decode",
    "flashinfer_tc": "FlashInfer decode (tensor cores)",
    "flashinfer_cascade": "FlashInfer cascade",
}


def triton_prefix(inputs, scales):
    """Our prefix-aware Triton kernel: ``prepare_triton_decode(..., shared_prefixes="detect")``.

    Raises
    ------
    Skipped
        On a library whose ``prepare_triton_decode`` takes no ``shared_prefixes``
        (a TypeError naming it); any other error is the kernel's.
    """
    from paged_attention.triton_decode import prepare_triton_decode

    try:
        return prepare_triton_decode(*inputs.args(), shared_prefixes="detect", **scales)
    except TypeError as exc:
        if "shared_prefixes" not in str(exc):
            raise
        raise Skipped("prefix-aware kernel not available: prepare_triton_decode takes no shared_prefixes=") from None


def make_run(name, inputs, shape, scales, flashinfer):
    """The zero-argument callable that runs implementation ``name`` on ``inputs``."""
    if name in OURS:
        return prepare(name, *inputs.args(), **scales)
    if name == "triton_prefix":
        return triton_prefix(inputs, scales)
    if name in FLASHINFER:
        return flashinfer_decode(flashinfer, inputs, shape, scales, use_tensor_cores=FLASHINFER[name])
    if name == "flashinfer_cascade":
        return flashinfer_cascade(flashinfer, inputs, shape, scales)
    return TORCH_PEERS[name](inputs, shape)
