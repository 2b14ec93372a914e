"""Our decode implementations against the kernels people would otherwise reach for.

On the same inputs, in one process, for each configuration:

* ``triton``           our Triton kernel (grouped GQA, split-K) on the paged cache;
* ``triton_simple``    the textbook (batch, head)-grid Triton kernel;
* ``vectorized``       Optimized PyTorch (one gather, two batched products);
* ``gather_sdpa``      the usual PyTorch path: gather the pages into a padded
                       contiguous cache, then ``scaled_dot_product_attention``;
* ``flex_paged``       FlexAttention's paged decode
                       (``torch.nn.attention.experimental._paged_attention``, compiled);
* ``sdpa_contiguous``  SDPA on a cache that was already contiguous (no paging at all):
                       the speed paging would have to match to be free;
* ``flashinfer``       FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` (CUDA-core
                       decode) on our pools, which are its NHD paged layout;
* ``flashinfer_tc``    the same wrapper with ``use_tensor_cores=True``;
* ``triton_prefix``    (``--set prefix``) our prefix-aware Triton kernel,
                       ``prepare_triton_decode(..., shared_prefixes="detect")``;
                       skipped with a note on a library without it;
* ``flashinfer_cascade`` (``--set prefix``) FlashInfer's
                       ``MultiLevelCascadeAttentionWrapper`` with two levels: each
                       prefix group's shared pages once for all its query rows,
                       then each sequence's own pages.

The FlashInfer rows need ``flashinfer`` installed; without it they are skipped with
a note. Its index arrays and ``plan()`` are built outside the timing; only
``run()`` is timed.

``--set`` picks the configurations: ``classic`` (default) those of
docs/benchmarks.md; ``ragged`` lengths drawn uniformly in 1..8192 and 1..32768 at
batches 4 to 64, and one long-tailed draw; ``fp8`` the large configurations;
``prefix`` batches whose sequences share a prompt (issue 15): shared prefix P and
own suffix S per sequence, the batch cut into prefix groups, and one control with
nothing shared. For ``prefix`` the bandwidth counts the UNIQUE bytes (a shared
block once, :meth:`DecodeConfig.unique_decode_bytes`), the floor a kernel that
reads each shared block once can reach; the CSV carries the logical (``kv_mb``)
and the unique (``kv_unique_mb``) megabytes of K and V.
``--kv-dtype`` picks how the cache is stored: ``same`` (the compute dtype, as
before) and/or ``float8_e4m3fn`` / ``float8_e5m2`` with per-tensor or per-head
scales (``--kv-scale``); ``--set fp8`` runs ``same`` and ``float8_e4m3fn`` by
default, so the 16-bit and the 8-bit cache of each configuration are timed in one
run. An fp8 row's speedups are against the 16-bit-cache rows of its configuration
in the same run: our Triton kernel's, and the same implementation's. SDPA,
gather+SDPA and FlexAttention take no fp8 cache: they run on the 16-bit cache only.

Each output is checked against the float64 reference (for an fp8 cache, on the
dequantized values). Times are GPU times from CUDA-graph replays with the L2
flushed (by a read) before every call, and the plain-call latency; bandwidth
counts the bytes a decode step must move, K and V in the cache's own dtype. The
copy bandwidth of the device is measured in the same run. With ``--out`` the CSV
is rewritten after every configuration, so a run cut short keeps what it measured.

Usage (on a GPU host)::

    python -m benchmarks.decode_peers --out peers.csv
    python -m benchmarks.decode_peers --set fp8 --out peers_fp8.csv
    python -m benchmarks.decode_peers --set ragged --out peers_ragged.csv
    python -m benchmarks.decode_peers --set prefix --out peers_prefix.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from paged_attention import DecodeConfig, build_decode_inputs, cdiv, prepare, reference_decode
from paged_attention.bench import check_accuracy
from paged_attention.timing import L2Flusher, gpu_time, measure_copy_bandwidth, time_calls
from paged_attention.config import ragged_lengths

BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, block_layout="shuffled")

#: (name, batch_size, context_lens, overrides): the configurations of docs/benchmarks.md.
CONFIGS = [
    ("large", 32, 2048, {}),
    ("large", 64, 4096, {}),
    ("large", 8, 8192, {}),
    ("large", 128, 1024, {}),
    ("large", 1, 32768, {}),
    ("large", 32, 2048, {"block_size": 256, "num_heads": 16}),
    ("small", 2, 60, {}),
    ("small", 1, 512, {}),
    ("small", 16, 256, {}),
    ("small", 4, 2048, {}),
    ("ragged", 64, ragged_lengths(64, 1, 8192, seed=1), {}),
]

#: Ragged batches: lengths uniform in 1..8192 and in 1..32768 at batches 4 to 64, and
#: one long-tailed (log-uniform) draw: a few long conversations among many short ones.
RAGGED_CONFIGS = [
    ("ragged", batch, ragged_lengths(batch, 1, longest, seed=1), {})
    for longest in (8192, 32768)
    for batch in (4, 8, 16, 32, 64)
] + [("long-tail", 32, ragged_lengths(32, 1, 32768, seed=1, spread="long-tail"), {})]

#: Shared prompts (issue 15): (batch, shared prefix P, own suffix S, prefix groups);
#: every sequence holds P + S tokens. The last shares nothing: the control.
PREFIX_SHAPES = [
    (64, 8192, 256, 1),
    (32, 32768, 512, 1),
    (128, 2048, 128, 1),
    (16, 4096, 1024, 1),
    (64, 4096, 256, 4),
    (32, 0, 2048, 1),
]
PREFIX_CONFIGS = [
    ("prefix", batch, prefix + suffix, {"shared_prefix": prefix, "prefix_groups": groups})
    for batch, prefix, suffix, groups in PREFIX_SHAPES
]

CONFIG_SETS = {
    "classic": CONFIGS,
    "ragged": RAGGED_CONFIGS,
    "fp8": [c for c in CONFIGS if c[0] == "large"],
    "prefix": PREFIX_CONFIGS,
}

#: Where the inputs live and the kernels run (the CLI tests point it at the CPU).
DEVICE = "cuda"


def context_lengths(lens: int | tuple[int, ...], batch: int) -> tuple[int, ...]:
    """Every sequence's length, whether the configuration gives one or a tuple."""
    return tuple(lens) if isinstance(lens, tuple) else (lens,) * batch


def describe_lengths(lens: tuple[int, ...]) -> str:
    """``"2048"`` for a uniform batch, ``"1..8141 (mean 4071)"`` for a ragged one."""
    if min(lens) == max(lens):
        return str(lens[0])
    return f"{min(lens)}..{max(lens)} (mean {sum(lens) / len(lens):.0f})"


def sdpa_contiguous(inputs, shape):
    """SDPA over a cache that is already contiguous per sequence (built outside the timing)."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh, group = shape.num_kv_heads, shape.query_group_size
    n = shape.max_context_len
    cols = cdiv(n, shape.block_size)
    k = k_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    v = v_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    q4 = q.reshape(b, kvh, group, d)
    mask = None
    if int(shape.context_lens.min()) != n:  # ragged: a length mask, as any padded layout needs
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :]
    return lambda: F.scaled_dot_product_attention(q4, k, v, attn_mask=mask, scale=shape.scale).reshape(b, h, d)


def gather_sdpa(inputs, shape):
    """Gather every sequence's pages into a padded contiguous cache, then SDPA (both timed)."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh = shape.num_kv_heads
    cols = cdiv(shape.max_context_len, shape.block_size)
    n = cols * shape.block_size
    # Slots past a context (a ragged batch, or a partly filled last block) need a mask.
    ragged = bool((shape.context_lens != n).any())

    def run():
        idx = tables[:, :cols].long().clamp_min(0)
        k = k_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        v = v_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :] if ragged else None
        return F.scaled_dot_product_attention(
            q[:, :, None, :], k, v, attn_mask=mask, scale=shape.scale, enable_gqa=True
        ).reshape(b, h, d)

    return run


_flex_compiled = None


def flex_paged(inputs, shape):
    """FlexAttention paged decode, using its own physical layout ``[1, kv_heads, pages * page_size, dim]``."""
    global _flex_compiled
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _flex_compiled is None:
        _flex_compiled = torch.compile(flex_attention, fullgraph=True)
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    num_blocks, bs, kvh, _ = k_cache.shape
    dev = q.device
    k_flex = k_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()
    v_flex = v_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()

    paged = PagedAttention(num_blocks, bs, b, device=str(dev))
    cols = cdiv(shape.max_context_len, bs)
    table = tables[:, :cols].long()
    needed = cdiv(lens.long(), bs)
    used = torch.arange(cols, device=dev)[None, :] < needed[:, None]
    paged.page_table[:, :cols] = torch.where(used, table, -1)
    rows, logical = torch.nonzero(used, as_tuple=True)
    paged.physical_to_logical[rows, table[rows, logical]] = logical
    paged.capacity[:] = needed * bs

    def causal_free(bi, hi, qi, ki):
        return ki < lens[bi]

    # The block mask's KV block must equal the page size; its query block is padded.
    logical_mask = create_block_mask(causal_free, b, None, 1, cols * bs, device=dev, BLOCK_SIZE=bs)
    block_mask = paged.convert_logical_block_mask(logical_mask, torch.arange(b, device=dev), kv_len=lens.long())
    q4 = q[:, :, None, :]
    errors = []
    for options in FLEX_KERNEL_OPTIONS:
        run = lambda options=options: _flex_compiled(  # noqa: E731
            q4, k_flex, v_flex, block_mask=block_mask, scale=shape.scale, enable_gqa=True,
            kernel_options=options or None,
        ).reshape(b, h, d)
        try:
            run()
        except Exception as exc:  # this torch's flex decoding rejects these tile options
            errors.append(f"{options}: {str(exc).splitlines()[0][:100]}")
            continue
        return run
    raise RuntimeError("FlexAttention paged decode failed with every kernel option tried: " + " | ".join(errors))


#: Tile options tried in order until FlexAttention compiles for page size 16 (its
#: default tiles do not divide a 16-token page for some shapes).
FLEX_KERNEL_OPTIONS = ({}, {"BLOCK_M": 16, "BLOCK_N": 16})


PEERS = {"sdpa_contiguous": sdpa_contiguous, "gather_sdpa": gather_sdpa, "flex_paged": flex_paged}
OURS = ("triton", "triton_simple", "vectorized")


# -- FlashInfer ------------------------------------------------------------------

FLASHINFER_MISSING = "flashinfer not installed: pip install flashinfer-python, or see ../shared/tools/flashinfer-carry.sh"
#: FlashInfer's rows and the ``use_tensor_cores`` of each.
FLASHINFER = {"flashinfer": False, "flashinfer_tc": True}
#: Float workspace of a FlashInfer wrapper (split-KV partial results): its documented 128 MB.
FLASHINFER_WORKSPACE_BYTES = 128 << 20


class Skipped(Exception):
    """An implementation that cannot take these inputs: a note in its row, not an error."""


def load_flashinfer():
    """``import flashinfer``, or None after printing one note (its rows are then skipped)."""
    try:
        import flashinfer
    except ModuleNotFoundError as exc:
        if exc.name == "flashinfer":
            print(FLASHINFER_MISSING, flush=True)
            return None
        print(f"flashinfer does not import (a package it needs is missing: {exc}); its rows are skipped", flush=True)
        return None
    except Exception as exc:  # installed but broken: a CUDA library, a torch it was not built for
        print(f"flashinfer does not import ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
              "its rows are skipped", flush=True)
        return None
    return flashinfer


def flashinfer_page_indices(
    block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Our block table as FlashInfer's paged-KV index arrays (CSR over the batch).

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64. Only each sequence's first
        ``ceil(context_len / block_size)`` entries are read; those past them may hold
        anything (-1, stale ids).
    context_lens : Tensor
        ``[batch_size]`` int32 or int64, each at most ``max_num_blocks * block_size``.
    block_size : int
        Tokens per block (FlashInfer's ``page_size``).

    Returns
    -------
    kv_indptr : Tensor
        ``[batch_size + 1]`` int32: sequence ``b``'s pages are
        ``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]``.
    kv_indices : Tensor
        ``[kv_indptr[-1]]`` int32: the physical block ids of every sequence's needed
        blocks, in table order, sequence after sequence.
    kv_last_page_len : Tensor
        ``[batch_size]`` int32: tokens in each sequence's last page, 1 to
        ``block_size``; 0 for an empty sequence, which gets no pages. FlashInfer
        reads a request with no pages as length 0 and writes it a zero row, as the
        reference does (0.7.4's sources: ``paged_kv_t::get_length`` and the decode
        state's normalisation); the accuracy check confirms it on the GPU.

    All three on ``block_tables``' device.
    """
    device = block_tables.device
    lens = context_lens.to(device, torch.int64)
    needed = cdiv(lens, block_size)
    used = torch.arange(block_tables.shape[1], device=device)[None, :] < needed[:, None]
    kv_indices = block_tables[used].to(torch.int32)  # row-major: sequence by sequence
    kv_indptr = torch.zeros(lens.numel() + 1, dtype=torch.int32, device=device)
    kv_indptr[1:] = needed.cumsum(0)
    kv_last_page_len = torch.where(lens > 0, (lens - 1) % block_size + 1, 0).to(torch.int32)
    return kv_indptr, kv_indices, kv_last_page_len


def flashinfer_decode(flashinfer, inputs, shape, scales, *, use_tensor_cores: bool):
    """FlashInfer's paged decode on our cache, planned here; the callable runs ``run()`` only.

    Our ``[num_blocks, block_size, num_kv_heads, head_dim]`` pools are FlashInfer's
    NHD paged layout and go in as a ``(k_cache, v_cache)`` tuple. ``plan()`` gets the
    query's dtype as ``q_data_type`` and the cache's as ``kv_data_type`` (an fp8
    dtype for an fp8 cache). ``run()`` takes an fp8 cache's per-tensor scales as
    floats: FlashInfer multiplies its softmax scale by ``k_scale`` and, in a second
    elementwise kernel inside the timed call, the output by ``v_scale``.

    Raises
    ------
    Skipped
        A float32 query, or per-head scales (FlashInfer's decode takes one float
        each for K and V).
    """
    q, k_cache, v_cache, tables, lens = inputs.args()
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise Skipped(f"FlashInfer's decode takes float16 or bfloat16 queries, not {str(q.dtype).removeprefix('torch.')}")
    run_kw = {}
    if scales:
        if any(isinstance(s, torch.Tensor) for s in scales.values()):
            raise Skipped("FlashInfer's decode takes one k_scale and one v_scale per tensor (floats), not per KV head")
        run_kw = {name: float(value) for name, value in scales.items()}
    kv_indptr, kv_indices, kv_last_page_len = flashinfer_page_indices(tables, lens, shape.block_size)
    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_tensor_cores=use_tensor_cores)
    wrapper.plan(
        kv_indptr, kv_indices, kv_last_page_len, shape.num_heads, shape.num_kv_heads, shape.head_dim,
        shape.block_size, q_data_type=q.dtype, kv_data_type=k_cache.dtype, sm_scale=shape.scale,
    )
    out = torch.empty_like(q)
    cache = (k_cache, v_cache)
    run = lambda: wrapper.run(q, cache, out=out, **run_kw)  # noqa: E731
    run.backend = getattr(wrapper, "resolved_backend", None)
    return run


# -- shared prefixes -------------------------------------------------------------

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


def cascade_page_indices(
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    block_size: int,
    shared_blocks: int,
    prefix_group_of: tuple[int, ...],
) -> dict[str, list[torch.Tensor]]:
    """Our shared-prefix block table as the index arrays of FlashInfer's
    ``MultiLevelCascadeAttentionWrapper.plan`` (CSR per level).

    Level 0 holds each prefix group's ``shared_blocks`` shared pages once (the
    group's first member's first table columns), as one request whose query rows
    are all the group's sequences; level 1 holds each sequence's own pages, the
    table columns from ``shared_blocks`` to its last needed block (the block with
    the prefix's last tokens included), one query row each. FlashInfer merges the
    two levels' partial softmax states. Without shared blocks (``shared_blocks``
    0) there is one level: every sequence's pages.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 or int64; entries past each
        sequence's needed blocks may hold anything.
    context_lens : Tensor
        ``[batch_size]``; each at least ``shared_blocks * block_size``.
    block_size : int
        Tokens per block (FlashInfer's ``page_size``).
    shared_blocks : int
        Whole prefix blocks each group shares (``DecodeConfig.shared_blocks``).
    prefix_group_of : tuple of int
        Every sequence's prefix group, non-decreasing (groups are runs of
        consecutive sequences; ``DecodeConfig.prefix_group_of``).

    Returns
    -------
    dict of lists, one tensor per level, all int32 on ``block_tables``' device
        ``qo_indptr``: ``[requests + 1]``, query rows of each request;
        ``kv_indptr``: ``[requests + 1]``; ``kv_indices``: the pages;
        ``kv_last_page_len``: ``[requests]``, tokens in each request's last page
        (``block_size`` for shared pages; 0 for a request with no pages). The
        keys follow ``plan()``'s first four arguments in order.

    Raises
    ------
    ValueError
        If the groups are not runs of consecutive sequences.
    """
    device = block_tables.device
    lens = context_lens.to(device, torch.int64)
    batch = lens.numel()
    groups = torch.tensor(prefix_group_of, dtype=torch.int64, device=device)
    if groups.numel() != batch or bool((groups[1:] < groups[:-1]).any()):
        raise ValueError("prefix_group_of must give one non-decreasing group per sequence")
    own_lens = lens - shared_blocks * block_size
    own_pages = cdiv(own_lens, block_size)
    cols = torch.arange(block_tables.shape[1], device=device)[None, :]
    own = (cols >= shared_blocks) & (cols < shared_blocks + own_pages[:, None])
    unique_level = dict(
        qo_indptr=torch.arange(batch + 1, dtype=torch.int32, device=device),
        kv_indptr=torch.cat([own_pages.new_zeros(1), own_pages.cumsum(0)]).to(torch.int32),
        kv_indices=block_tables[own].to(torch.int32),
        kv_last_page_len=torch.where(own_lens > 0, (own_lens - 1) % block_size + 1, 0).to(torch.int32),
    )
    levels = [unique_level]
    if shared_blocks > 0:
        first = torch.ones(batch, dtype=torch.bool, device=device)
        first[1:] = groups[1:] != groups[:-1]
        starts = torch.nonzero(first).flatten()
        sizes = torch.diff(torch.cat([starts, torch.tensor([batch], device=device)]))
        num_groups = starts.numel()
        levels.insert(0, dict(
            qo_indptr=torch.cat([sizes.new_zeros(1), sizes.cumsum(0)]).to(torch.int32),
            kv_indptr=(torch.arange(num_groups + 1, device=device) * shared_blocks).to(torch.int32),
            kv_indices=block_tables[starts, :shared_blocks].reshape(-1).to(torch.int32),
            kv_last_page_len=torch.full((num_groups,), block_size, dtype=torch.int32, device=device),
        ))
    return {key: [level[key] for level in levels] for key in unique_level}


def flashinfer_cascade(flashinfer, inputs, shape, scales):
    """FlashInfer's ``MultiLevelCascadeAttentionWrapper`` on our shared-prefix cache,
    planned here; the callable runs ``run()`` only.

    Two levels (:func:`cascade_page_indices`): each group's shared pages with all
    its query rows attached, then each sequence's own pages; one level when nothing
    is shared. NHD layout, the pools as a ``(k_cache, v_cache)`` tuple,
    ``q_data_type`` and ``kv_data_type`` the query's and the cache's dtypes,
    ``causal=False`` (one query row per sequence, after every cached token).

    Raises
    ------
    Skipped
        A float32 query, or an fp8 cache (the cascade's ``run()`` takes no scales).
    """
    q, k_cache, v_cache, tables, lens = inputs.args()
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise Skipped(f"FlashInfer's cascade takes float16 or bfloat16 queries, not {str(q.dtype).removeprefix('torch.')}")
    if scales:
        raise Skipped("FlashInfer's cascade run() takes no k_scale or v_scale (no fp8 cache)")
    config = inputs.config
    levels = cascade_page_indices(tables, lens, shape.block_size, config.shared_blocks, config.prefix_group_of)
    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.MultiLevelCascadeAttentionWrapper(len(levels["qo_indptr"]), workspace, "NHD")
    wrapper.plan(
        levels["qo_indptr"], levels["kv_indptr"], levels["kv_indices"], levels["kv_last_page_len"],
        shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size,
        causal=False, sm_scale=shape.scale, q_data_type=q.dtype, kv_data_type=k_cache.dtype,
    )
    cache = (k_cache, v_cache)
    return lambda: wrapper.run(q, cache)


# -- command line ----------------------------------------------------------------

IMPLS = list(OURS) + list(PEERS) + list(FLASHINFER)
#: Implementations for shared prefixes; only ``--set prefix`` runs them by default.
PREFIX_IMPLS = ["triton_prefix", "flashinfer_cascade"]
ALL_IMPLS = IMPLS + PREFIX_IMPLS
#: Rows that need flashinfer.
FLASHINFER_ROWS = (*FLASHINFER, "flashinfer_cascade")
#: Implementations that take an fp8 cache; the other peers run on 16-bit caches only.
FP8_IMPLS = (*OURS, *FLASHINFER, "triton_prefix")
FP8_KV = ("float8_e4m3fn", "float8_e5m2")
KV_CHOICES = ("same", *FP8_KV, "both")
#: Defaults by set: compute dtypes, KV-cache dtypes, implementations.
SET_DEFAULTS = {
    "classic": (["float16", "bfloat16"], ["same"], IMPLS),
    "ragged": (["float16"], ["same"], [n for n in IMPLS if n not in ("gather_sdpa", "flex_paged")]),
    "fp8": (["float16"], ["same", "float8_e4m3fn"], [n for n in IMPLS if n not in ("gather_sdpa", "flex_paged")]),
    "prefix": (["float16"], ["same"], ["triton", "triton_prefix", "sdpa_contiguous", "flashinfer_tc",
                                       "flashinfer_cascade"]),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode_peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--set", dest="config_set", choices=list(CONFIG_SETS), default="classic",
                   help="configurations: classic (docs/benchmarks.md, default), ragged (uniform 1..8192 and "
                        "1..32768 at batches 4-64, one long-tailed draw), fp8 (the large ones), prefix (shared "
                        "prompts; GB/s from unique bytes)")
    p.add_argument("--dtype", nargs="+", choices=["float16", "bfloat16", "float32"],
                   help="compute dtypes, query and output (default: float16 bfloat16 for classic, float16 otherwise)")
    p.add_argument("--kv-dtype", nargs="+", choices=KV_CHOICES,
                   help="KV-cache dtypes: same (the compute dtype), float8_e4m3fn, float8_e5m2; both = same "
                        "float8_e4m3fn (default: both for --set fp8, same otherwise)")
    p.add_argument("--kv-scale", choices=["per_tensor", "per_head"], default="per_tensor",
                   help="scales of an fp8 cache (FlashInfer takes per_tensor only)")
    kinds = sorted({c[0] for configs in CONFIG_SETS.values() for c in configs})
    p.add_argument("--only", choices=kinds, nargs="+", help="configurations of these kinds within the set")
    p.add_argument("--impl", nargs="+", choices=ALL_IMPLS,
                   help="implementations (default: all but triton_prefix and flashinfer_cascade for classic; "
                        "all but those, gather_sdpa and flex_paged for ragged and fp8; triton triton_prefix "
                        "sdpa_contiguous flashinfer_tc flashinfer_cascade for prefix)")
    p.add_argument("--head-dim", type=int, default=BASE["head_dim"],
                   help="head_dim of every configuration (the targets in docs/benchmarks.md are at 128)")
    p.add_argument("--call-iters", type=int, default=30)
    p.add_argument("--out", help="CSV file for the full table (rewritten after every configuration)")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """Parsed flags, with the set's defaults filled in: ``kv_dtype`` lists ``same``
    first (the fp8 rows' speedups need it first), without repeats."""
    p = build_parser()
    args = p.parse_args(argv)
    dtypes, kv_dtypes, impls = SET_DEFAULTS[args.config_set]
    args.dtype = args.dtype or dtypes
    args.impl = args.impl or impls
    kv = []
    for name in args.kv_dtype or kv_dtypes:
        kv += ["same", "float8_e4m3fn"] if name == "both" else [name]
    args.kv_dtype = sorted(dict.fromkeys(kv), key=lambda name: name != "same")
    args.configs = [c for c in CONFIG_SETS[args.config_set] if not args.only or c[0] in args.only]
    if not args.configs:
        p.error(f"--only {' '.join(args.only)} selects no configuration of --set {args.config_set}")
    return args


# -- the run ---------------------------------------------------------------------

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
    return PEERS[name](inputs, shape)


def measure(
    run, ref, nbytes: int, device: torch.device, flush, copy_gbps: float, call_iters: int, *, graph_fallback: bool = False
) -> dict:
    """Accuracy, GPU time (median of CUDA-graph replays) and plain-call latency of one implementation.

    With ``graph_fallback`` (a peer's code, not ours), a call that a CUDA graph cannot
    capture gets the plain call's latency as its GPU time, with a note, not an error.
    """
    acc = check_accuracy(run().clone(), ref)
    note = None
    try:
        gpu_ms = gpu_time(run, device=device, flush=flush)
    except Exception as exc:
        if not graph_fallback:
            raise
        gpu_ms, note = None, f"no CUDA graph ({first_line(exc)}): GPU time is the plain call's"
    call_ms = statistics.median(time_calls(run, device=device, warmup=3, iters=call_iters, flush=flush))
    if gpu_ms is None:
        gpu_ms = call_ms
    gbps = nbytes / gpu_ms / 1e6
    row = dict(gpu_ms=gpu_ms, call_ms=call_ms, gbps=gbps, frac_copy=gbps / copy_gbps,
               max_abs_err=acc.max_abs_err, correct=acc.passed)
    return row | ({"note": note} if note else {})


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:120] if text else ''}"


def row_text(row: dict) -> str:
    """One progress line for a row."""
    head = f"{row['kind']} {row['dtype']} kv={row['kv_dtype']} B={row['batch']} len={row['lengths']} "
    if "shared_prefix" in row:
        head += (f"(P={row['shared_prefix']} S={row['context'] - row['shared_prefix']} groups={row['prefix_groups']}; "
                 f"KV {row['kv_mb']:.4g} MB logical, {row['kv_unique_mb']:.4g} MB unique) ")
    head += f"bs={row['block_size']} {row['impl']}: "
    if "gpu_ms" not in row:
        return head + (f"skipped: {row['note']}" if row.get("note") else row.get("error", ""))
    text = head + (f"{row['gpu_ms']:.4f} ms GPU, {row['call_ms']:.4f} ms call, {row['gbps']:.0f} GB/s, "
            f"{row['frac_copy']:.0%} of copy, correct={row['correct']}")
    for key, label in (("speedup_vs_triton_16bit", "x our Triton on the 16-bit cache"),
                       ("speedup_vs_own_16bit", "x itself on the 16-bit cache")):
        if row.get(key) is not None:
            text += f", {row[key]:.2f}{label}"
    return text + (f" [{row['note']}]" if row.get("note") else "")


def main(argv=None) -> int:
    args = parse_args(argv)
    dev = torch.device(DEVICE)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks.decode_peers needs a CUDA GPU (it times GPU kernels); none is visible here")

    import pandas as pd

    from paged_attention.validation import check_decode_args

    impls = list(args.impl)
    flashinfer = None
    if any(name in FLASHINFER_ROWS for name in impls):
        flashinfer = load_flashinfer()
        if flashinfer is None:
            impls = [name for name in impls if name not in FLASHINFER_ROWS]
    if dev.type == "cuda":
        import triton

        props = torch.cuda.get_device_properties(dev)
        print(f"GPU {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}; "
              f"Triton {triton.__version__}" + (f"; FlashInfer {flashinfer.__version__}" if flashinfer else ""))
    copy_gbps = measure_copy_bandwidth(dev) if dev.type == "cuda" else float("nan")
    print(f"measured device-to-device copy bandwidth: {copy_gbps:.0f} GB/s (read + write)")
    fp8_kv = [kv for kv in args.kv_dtype if kv != "same"]
    print(f"set {args.config_set}: {len(args.configs)} configuration(s); dtypes {' '.join(args.dtype)}; KV caches "
          + " ".join("in the compute dtype" if kv == "same" else f"{kv} ({args.kv_scale} scales)" for kv in args.kv_dtype)
          + f"; implementations {' '.join(impls)}")
    if args.config_set == "prefix":
        print("GB/s and fraction of copy count UNIQUE bytes (each shared block once: unique_decode_bytes); "
              "kv_mb is every sequence's K and V, kv_unique_mb the pool's")
    no_fp8 = [name for name in impls if name not in FP8_IMPLS]
    if fp8_kv and no_fp8:
        print(f"{', '.join(no_fp8)}: no fp8 cache; "
              + ("they run on the 16-bit cache only, the reference point for the fp8 rows" if "same" in args.kv_dtype
                 else "skipped (no 16-bit cache in this run)"))
    if flashinfer:
        print("FlashInfer JIT-compiles each kernel variant (dtypes, tensor cores or not) at its first plan(): "
              "tens of seconds each, outside the measurements")
    sys.stdout.flush()

    flush = L2Flusher(dev)
    start = time.perf_counter()
    rows = []
    for dtype in args.dtype:
        for kind, batch, lens, over in args.configs:
            lengths = context_lengths(lens, batch)
            base_ms = {}  # implementation -> GPU time on this configuration's 16-bit cache
            for kv in args.kv_dtype:
                fp8 = kv != "same"
                fields = {**BASE, "head_dim": args.head_dim, **over}
                if fp8:
                    fields.update(kv_dtype=kv, kv_scale=args.kv_scale)
                label = dict(kind=kind, dtype=dtype, kv_dtype=kv if fp8 else dtype,
                             kv_scale=args.kv_scale if fp8 else "", batch=batch, context=max(lengths),
                             lengths=describe_lengths(lengths), block_size=fields["block_size"],
                             num_heads=fields["num_heads"], head_dim=fields["head_dim"])
                try:
                    cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype=dtype, device=DEVICE, seed=7, **fields)
                    inputs = build_decode_inputs(cfg)
                    scales = inputs.scales() if fp8 else {}
                    shape = check_decode_args(*inputs.args(), **scales)
                    ref = reference_decode(*inputs.args(), **scales)
                except Exception as exc:  # e.g. a library without fp8 caches: the other rows still run
                    rows.append(dict(label, impl="(inputs)", error=first_line(exc)))
                    print(f"[{time.perf_counter() - start:4.0f} s] " + row_text(rows[-1]), file=sys.stderr, flush=True)
                    traceback.print_exc(limit=2, file=sys.stderr)
                    continue
                # Unique bytes equal the logical ones unless blocks are shared (--set prefix).
                nbytes = cfg.unique_decode_bytes()
                label["kv_mb"] = cfg.needed_kv_bytes() / 1e6
                if "shared_prefix" in over:
                    label.update(shared_prefix=cfg.shared_prefix, prefix_groups=cfg.prefix_groups,
                                 kv_unique_mb=cfg.unique_kv_bytes() / 1e6)
                for name in impls:
                    if fp8 and name not in FP8_IMPLS:
                        continue
                    row = dict(label, impl=name)
                    try:
                        run = make_run(name, inputs, shape, scales, flashinfer)
                        row.update(measure(run, ref, nbytes, dev, flush, copy_gbps, args.call_iters,
                                           graph_fallback=name in FLASHINFER_ROWS))
                        if getattr(run, "backend", None):
                            row["note"] = "; ".join(filter(None, (f"backend {run.backend}", row.get("note"))))
                    except Skipped as exc:
                        row["note"] = str(exc)
                    except Exception as exc:  # a peer missing or failing on this torch must not stop the table
                        row["error"] = first_line(exc)
                        traceback.print_exc(limit=2, file=sys.stderr)
                    run = None  # free what the callable holds before the next one is built
                    if "gpu_ms" in row:
                        if not fp8:
                            base_ms[name] = row["gpu_ms"]
                        else:
                            if "triton" in base_ms:
                                row["speedup_vs_triton_16bit"] = base_ms["triton"] / row["gpu_ms"]
                            if name in base_ms:
                                row["speedup_vs_own_16bit"] = base_ms[name] / row["gpu_ms"]
                    rows.append(row)
                    print(f"[{time.perf_counter() - start:4.0f} s] " + row_text(row), file=sys.stderr, flush=True)
                del inputs, ref, shape, scales
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            if args.out:  # after every configuration: a run cut short keeps what it measured
                pd.DataFrame(rows).to_csv(args.out, index=False)
    print_summary(pd.DataFrame(rows))
    return 0


def print_summary(table) -> None:
    """The full table, then GPU time and fraction of copy by implementation, and the fp8 speedups."""
    import pandas as pd

    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    pd.set_option("display.max_columns", 40)
    cols = [c for c in ["kind", "dtype", "kv_dtype", "batch", "lengths", "shared_prefix", "prefix_groups", "kv_mb",
                        "kv_unique_mb", "block_size", "impl", "gpu_ms", "call_ms",
                        "gbps", "frac_copy", "speedup_vs_triton_16bit", "speedup_vs_own_16bit", "correct", "error",
                        "note"] if c in table]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""))
    if "gpu_ms" not in table:
        return
    ok = table.dropna(subset=["gpu_ms"]).copy()
    index = [c for c in ["kind", "dtype", "kv_dtype", "batch", "lengths", "shared_prefix", "prefix_groups",
                         "block_size"] if c in ok]
    ok["cell"] = [f"{ms:.4f} ({frac:.0%})" for ms, frac in zip(ok["gpu_ms"], ok["frac_copy"])]
    order = [name for name in ALL_IMPLS if name in set(ok["impl"])]
    wide = ok.pivot_table(index=index, columns="impl", values="cell", aggfunc="first", sort=False)[order]
    ms = ok.pivot_table(index=index, columns="impl", values="gpu_ms", sort=False)
    fi = [name for name in FLASHINFER_ROWS if name in ms]
    if "triton" in ms and fi:  # above 1: our Triton is faster than FlashInfer's better path
        wide["flashinfer_best/triton"] = (ms[fi].min(axis=1) / ms["triton"]).map(
            lambda x: "" if pd.isna(x) else f"{x:.2f}")
    print("\nGPU time in ms (fraction of the copy bandwidth) by implementation:")
    print(wide.fillna("").to_string())
    fp8 = ok[ok["kv_dtype"].isin(FP8_KV)]
    if "speedup_vs_triton_16bit" in fp8 and fp8["speedup_vs_triton_16bit"].notna().any():
        speed = fp8.pivot_table(index=index, columns="impl", values="speedup_vs_triton_16bit", sort=False)
        print("\nfp8 cache: speedup over our Triton kernel on the 16-bit cache of the same configuration:")
        print(speed[[name for name in ALL_IMPLS if name in speed]].to_string(float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    sys.exit(main())
