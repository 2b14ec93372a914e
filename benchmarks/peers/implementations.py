"""Which implementations ``benchmarks.decode_peers`` times, their names, and the
call each runs: ours (``prepare``, and the prefix-aware Triton kernel), the
PyTorch peers (:mod:`benchmarks.peers.torch_peers`) and FlashInfer's
(:mod:`benchmarks.peers.flashinfer`, :mod:`benchmarks.peers.xqa`); each with the
attention keywords of its pass (:mod:`benchmarks.peers.options`)."""

from __future__ import annotations

from benchmarks.peers import Skipped
from benchmarks.peers.flashinfer import FLASHINFER, flashinfer_cascade, flashinfer_decode
from benchmarks.peers.torch_peers import TORCH_PEERS
from benchmarks.peers.xqa import flashinfer_xqa
from paged_attention import LABELS as OUR_LABELS
from paged_attention import prepare

OURS = ("triton", "triton_simple", "vectorized")
#: FlashInfer's XQA decode kernel (``trtllm_batch_decode_with_kv_cache(..., backend="xqa")``).
XQA = "flashinfer_xqa"
IMPLS = list(OURS) + list(TORCH_PEERS) + list(FLASHINFER) + [XQA]
#: Implementations for shared prefixes; only ``--set prefix`` runs them by default.
PREFIX_IMPLS = ["triton_prefix", "flashinfer_cascade"]
ALL_IMPLS = IMPLS + PREFIX_IMPLS
#: Rows that need flashinfer.
FLASHINFER_ROWS = (*FLASHINFER, XQA, "flashinfer_cascade")
#: Implementations that take an fp8 cache; the other peers run on 16-bit caches only.
FP8_IMPLS = (*OURS, *FLASHINFER, XQA, "triton_prefix")
FP8_KV = ("float8_e4m3fn", "float8_e5m2")
#: How a row's ``label`` names each implementation.
LABELS: dict[str, str] = {
    **{name: OUR_LABELS[name] for name in (*OURS, "triton_prefix")},
    "sdpa_contiguous": "SDPA on a contiguous cache",
    "gather_sdpa": "gather + SDPA",
    "flex_paged": "FlexAttention paged decode",
    "flashinfer": "FlashInfer decode",
    "flashinfer_tc": "FlashInfer decode (tensor cores)",
    XQA: "FlashInfer XQA decode",
    "flashinfer_cascade": "FlashInfer cascade",
}


def ours(call, attn: dict):
    """``call(**attn)``, our library's prepared call with the attention keywords.

    Raises
    ------
    Skipped
        On a library that takes none of them yet (a TypeError naming one); any other
        error is the library's.
    """
    try:
        return call(**attn)
    except TypeError as exc:
        named = [key for key in attn if key in str(exc)]
        if not named:
            raise
        raise Skipped(f"not in this library yet: it takes no {', '.join(key + '=' for key in named)}") from None


def triton_prefix(inputs, scales, attn=None):
    """Our prefix-aware Triton kernel: ``prepare_triton_decode(..., shared_prefixes="detect")``.

    Raises
    ------
    Skipped
        On a library whose ``prepare_triton_decode`` takes no ``shared_prefixes``
        or none of the attention keywords ``attn`` (a TypeError naming it); any
        other error is the kernel's.
    """
    from paged_attention.triton_decode import prepare_triton_decode

    try:
        return ours(lambda **kw: prepare_triton_decode(*inputs.args(), shared_prefixes="detect", **scales, **kw),
                    attn or {})
    except TypeError as exc:
        if "shared_prefixes" not in str(exc):
            raise
        raise Skipped("prefix-aware kernel not available: prepare_triton_decode takes no shared_prefixes=") from None


def make_run(name, inputs, shape, scales, flashinfer, attn=None):
    """The zero-argument callable that runs implementation ``name`` on ``inputs``,
    with the attention keywords ``attn`` (:meth:`~benchmarks.peers.options.AttentionOptions.kwargs`;
    none for a plain decode)."""
    attn = attn or {}
    if name in OURS:
        return ours(lambda **kw: prepare(name, *inputs.args(), **scales, **kw), attn)
    if name == "triton_prefix":
        return triton_prefix(inputs, scales, attn)
    if name in FLASHINFER:
        return flashinfer_decode(flashinfer, inputs, shape, scales, attn, use_tensor_cores=FLASHINFER[name])
    if name == XQA:
        return flashinfer_xqa(flashinfer, inputs, shape, scales, attn)
    if name == "flashinfer_cascade":
        return flashinfer_cascade(flashinfer, inputs, shape, scales, attn)
    return TORCH_PEERS[name](inputs, shape, attn)
