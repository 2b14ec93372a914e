"""Build the inputs of one decode step: query, paged K/V cache, block table, lengths.

Memory that no sequence reads holds loud values, or with ``poison=True`` (what the
tests use) NaN and ±Inf, and the table garbage there: :mod:`paged_attention.poison`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import DecodeConfig
from .poison import LOUD_VALUE, POISON_VALUES, context_mask, fill_uncovered, poison_table  # noqa: F401 (importable from here too)

#: ``pool_owner`` codes besides a sequence index.
FREE = -1
OTHER = -2


@dataclass
class DecodeInputs:
    """The tensors of one decode step, as every implementation takes them.

    Attributes
    ----------
    query : Tensor
        ``[num_query_tokens, num_heads, head_dim]``: ``[batch_size, ...]`` for one
        query token per sequence, sequence 0's tokens first.
    k_cache, v_cache : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``.
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32; ``-1`` marks an unallocated entry.
    context_lens : Tensor
        ``[batch_size]`` int32.
    pool_owner : Tensor
        ``[num_blocks]`` int64 on the CPU: the sequence that owns each physical
        block (for a block a prefix group shares, its lowest member's index),
        ``FREE`` (-1) for a free block, ``OTHER`` (-2) for a block held by a
        sequence outside this batch (fragmented layout).
    config : DecodeConfig
        The configuration these were built from.
    k_scale, v_scale : float or Tensor or None
        Dequantization scales of an fp8 cache (a float per tensor, or float32
        ``[num_kv_heads]`` per KV head, by ``config.kv_scale``); None otherwise.
    sinks : Tensor or None
        float32 ``[num_heads]`` attention-sink logits (``config.sinks``), else None.
    query_lens : Tensor or None
        int32 ``[batch_size]`` query tokens per sequence when
        ``config.has_query_lens``, else None.
    """

    query: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor
    pool_owner: torch.Tensor
    config: DecodeConfig
    k_scale: float | torch.Tensor | None = None
    v_scale: float | torch.Tensor | None = None
    sinks: torch.Tensor | None = None
    query_lens: torch.Tensor | None = None

    def args(self) -> tuple[torch.Tensor, ...]:
        """``(query, k_cache, v_cache, block_tables, context_lens)``."""
        return (self.query, self.k_cache, self.v_cache, self.block_tables, self.context_lens)

    def scales(self) -> dict[str, float | torch.Tensor]:
        """``{"k_scale": ..., "v_scale": ...}`` for an fp8 cache, ``{}`` otherwise:
        see :meth:`kwargs`."""
        if self.k_scale is None:
            return {}
        return {"k_scale": self.k_scale, "v_scale": self.v_scale}

    def options(self) -> dict[str, int | float | torch.Tensor]:
        """The attention options set, of ``window``, ``sinks``, ``soft_cap`` and
        ``query_lens``."""
        options = dict(window=self.config.window, sinks=self.sinks, soft_cap=self.config.soft_cap,
                       query_lens=self.query_lens)
        return {k: v for k, v in options.items() if v is not None}

    def kwargs(self) -> dict[str, float | torch.Tensor]:
        """:meth:`scales` and :meth:`options`: every implementation (and the
        reference) takes ``(*inputs.args(), **inputs.kwargs())``."""
        return self.scales() | self.options()


def assign_blocks(config: DecodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand out physical blocks to the sequences of ``config`` by its block layout.

    Group by prefix group (``config.prefix_group_of``), blocks are taken from the
    layout's order: first the group's ``config.shared_blocks`` shared blocks, whose
    ids every member's table holds in its first columns, then each member's own
    blocks in sequence order. Without a shared prefix this is sequence after
    sequence.

    Parameters
    ----------
    config : DecodeConfig
        Uses ``batch_size``, ``context_lens``, ``block_size``, ``num_blocks``,
        ``block_layout``, ``seed``, ``shared_prefix`` and ``prefix_groups``.

    Returns
    -------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` int32 on the CPU, ``-1`` past each
        sequence's last block.
    pool_owner : Tensor
        ``[num_blocks]`` int64 on the CPU (see :class:`DecodeInputs`); a shared
        block belongs to its group's lowest sequence index.

    Raises
    ------
    ValueError
        If the configuration is invalid.
    """
    config.validate()
    gen = torch.Generator().manual_seed(config.seed)
    needed = config.blocks_per_sequence
    num_blocks = config.num_blocks
    owner = torch.full((num_blocks,), FREE, dtype=torch.int64)

    if config.block_layout == "contiguous":
        order = torch.arange(num_blocks)
    elif config.block_layout == "shuffled":
        order = torch.randperm(num_blocks, generator=gen)
    else:  # fragmented
        order = _fragmented_free_list(num_blocks, config.num_blocks_used, gen, owner)

    tables = torch.full((config.batch_size, config.max_num_blocks), -1, dtype=torch.int32)
    shared = config.shared_blocks
    group_of = config.prefix_group_of
    cursor = 0
    for seq, n in enumerate(needed):
        if seq == 0 or group_of[seq] != group_of[seq - 1]:  # a group's first member: its shared blocks
            ids = order[cursor : cursor + shared]
            cursor += shared
            owner[ids] = seq
        tables[seq, :shared] = ids.to(torch.int32)
        own = order[cursor : cursor + n - shared]
        cursor += n - shared
        tables[seq, shared:n] = own.to(torch.int32)
        owner[own] = seq
    return tables, owner


def first_members(config: DecodeConfig) -> tuple[int, ...]:
    """Every sequence's prefix group's first (lowest) sequence index."""
    group_of = config.prefix_group_of
    first = {}
    for seq, group in enumerate(group_of):
        first.setdefault(group, seq)
    return tuple(first[group] for group in group_of)


def copy_prefix_tails(
    k: torch.Tensor, v: torch.Tensor, block_tables: torch.Tensor, config: DecodeConfig
) -> None:
    """Copy, in place, the shared prefix's last ``shared_prefix % block_size`` tokens
    of each group's first member into the same slots of every other member's own
    block (what copy-on-write leaves), so every member attends over the same prefix.

    Parameters
    ----------
    k, v : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]``, any dtype (an fp8
        cache's float32 draws before quantization, so its stored bytes match too).
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` from :func:`assign_blocks`, on ``k``'s device.
    config : DecodeConfig
        Uses ``shared_prefix``, ``prefix_groups`` and ``block_size``.
    """
    rest = config.shared_prefix % config.block_size
    first = torch.tensor(first_members(config), device=block_tables.device)
    copies = first != torch.arange(config.batch_size, device=block_tables.device)
    if rest == 0 or not bool(copies.any()):
        return
    column = block_tables[:, config.shared_blocks].long()
    src, dst = column[first[copies]], column[copies]
    for cache in (k, v):
        cache[dst, :rest] = cache[src, :rest]


def _fragmented_free_list(
    num_blocks: int, num_needed: int, gen: torch.Generator, owner: torch.Tensor
) -> torch.Tensor:
    """The free list a block manager has after churn.

    Sequences of mixed lengths (1 to 32 blocks) fill the pool in order; then a
    random subset of them finishes and frees its blocks until ``num_needed``
    blocks are free. The returned free list is in ascending block order, as a
    simple allocator would hand it out, so a new sequence's blocks interleave
    with blocks still held by others (marked ``OTHER`` in ``owner``).
    """
    runs: list[tuple[int, int]] = []
    start = 0
    while start < num_blocks:
        length = int(torch.randint(1, 33, (1,), generator=gen))
        runs.append((start, min(start + length, num_blocks)))
        start += length
    free = torch.zeros(num_blocks, dtype=torch.bool)
    freed = 0  # runs never overlap, so a running count replaces re-summing the mask
    for i in torch.randperm(len(runs), generator=gen).tolist():
        if freed >= num_needed:
            break
        lo, hi = runs[i]
        free[lo:hi] = True
        freed += hi - lo
    owner[~free] = OTHER
    return torch.nonzero(free).flatten()


def build_decode_inputs(config: DecodeConfig, *, poison: bool = False) -> DecodeInputs:
    """Random inputs for one decode step of ``config``.

    The query and every K/V slot that a sequence attends to (its context, or with
    ``config.window`` the last ``window`` positions of it) are standard normal; all
    other slots hold :data:`LOUD_VALUE`, or with ``poison`` the values of
    :data:`POISON_VALUES` (see :func:`fill_uncovered`). With ``config.sinks`` the
    sink logits are ``2 *`` standard normal, float32 ``[num_heads]``, drawn after
    everything else: the other tensors equal those without sinks. With a shared
    prefix (``config.shared_prefix``) the tables of a prefix group share its whole
    prefix blocks, and the prefix's last tokens in each member's own block are
    copies of the first member's (see :func:`assign_blocks` and
    :func:`copy_prefix_tails`): attention over the prefix is the same for every
    member.

    An fp8 cache (``config.kv_dtype``) is quantized as a serving engine does it:
    the same standard-normal float32 draws (:func:`unquantized_cache` returns
    them), a scale per tensor or per KV head equal to the absolute maximum over
    the pool divided by the format's largest finite value (448 for e4m3, 57344
    for e5m2), rounded to float32, then ``(value / scale)`` rounded to fp8.

    Parameters
    ----------
    config : DecodeConfig
        Sizes, dtype, device, seed and block layout.
    poison : bool
        Dirty memory, as an engine's pool can hold it: NaN, ±Inf, a huge finite
        value and denormals in every uncovered slot, and in the block table, past
        each sequence's needed blocks (with a window, also before its first), -1,
        stale block ids and ids past the pool (see :func:`poison_table`). An
        implementation's output must not change.

    Returns
    -------
    DecodeInputs
        Tensors on ``config.device`` (``pool_owner`` on the CPU).

    Raises
    ------
    ValueError
        If the configuration is invalid.

    Examples
    --------
    >>> inputs = build_decode_inputs(DecodeConfig(batch_size=2, context_lens=(5, 40)), poison=True)
    >>> out = reference_decode(*inputs.args())
    """
    config.validate()
    block_tables, owner = assign_blocks(config)
    dtype, device = config.torch_dtype, torch.device(config.device)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    shape = (config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim)

    query = torch.randn(
        config.batch_size, config.num_heads, config.head_dim, generator=gen, device=device
    ).to(dtype)
    block_tables = block_tables.to(device)
    k_scale = v_scale = None
    if config.is_fp8:
        k, v = torch.randn(shape, generator=gen, device=device), torch.randn(shape, generator=gen, device=device)
        copy_prefix_tails(k, v, block_tables, config)
        k_cache, k_scale = quantize_fp8(k, config)
        v_cache, v_scale = quantize_fp8(v, config)
        del k, v
    else:  # converted one at a time, so only one float32 pool is alive; a copy commutes with the cast
        k_cache = torch.randn(shape, generator=gen, device=device).to(dtype)
        v_cache = torch.randn(shape, generator=gen, device=device).to(dtype)
        copy_prefix_tails(k_cache, v_cache, block_tables, config)
    # Drawn last, so the other tensors do not depend on whether there are sinks.
    sinks = 2 * torch.randn(config.num_heads, generator=gen, device=device) if config.sinks else None
    query_lens = None
    if config.has_query_lens:
        query, query_lens = _draft_queries(query, config, gen)
    context_lens = torch.tensor(config.lengths, dtype=torch.int32, device=device)
    starts = torch.tensor(config.window_starts, device=device) if config.window is not None else None
    covered = context_mask(block_tables, context_lens, config.num_blocks, config.block_size, starts)
    fill_uncovered(k_cache, v_cache, covered, poison=poison)
    if poison:
        block_tables = poison_table(block_tables, context_lens, config.num_blocks, config.block_size,
                                    seed=config.seed, window_starts=starts)
    return DecodeInputs(
        query=query,
        k_cache=k_cache,
        v_cache=v_cache,
        block_tables=block_tables,
        context_lens=context_lens,
        pool_owner=owner,
        config=config,
        k_scale=k_scale,
        v_scale=v_scale,
        sinks=sinks,
        query_lens=query_lens,
    )


def _draft_queries(
    last: torch.Tensor, config: DecodeConfig, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The query rows of several query tokens per sequence: each sequence's last
    token keeps the row drawn for it (``last[b]``, as with one token), the tokens
    before it are drawn after everything else, so the other tensors equal those of
    one token per sequence. Returns ``(query [num_query_tokens, ...], query_lens
    int32 [batch_size])``."""
    q_lens = config.query_lengths
    extra = torch.randn(config.num_query_tokens - config.batch_size, *last.shape[1:], generator=gen,
                        device=last.device).to(last.dtype)
    rows, used = [], 0
    for b, q in enumerate(q_lens):
        rows += [extra[used : used + q - 1], last[b : b + 1]]
        used += q - 1
    return torch.cat(rows), torch.tensor(q_lens, dtype=torch.int32, device=last.device)


def quantize_fp8(values: torch.Tensor, config: DecodeConfig) -> tuple[torch.Tensor, float | torch.Tensor]:
    """Quantize a float32 cache pool to ``config.kv_dtype`` with amax scaling.

    Parameters
    ----------
    values : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]`` float32.
    config : DecodeConfig
        ``kv_dtype`` (an fp8 format) and ``kv_scale`` (``"per_tensor"`` or ``"per_head"``).

    Returns
    -------
    stored : Tensor
        ``values / scale`` rounded to the fp8 format, same shape.
    scale : float or Tensor
        ``amax / fp8_max`` rounded to float32: a Python float per tensor, or float32
        ``[num_kv_heads]`` on the values' device per KV head (an all-zero head gets 1).
    """
    fp8 = config.kv_torch_dtype
    fp8_max = torch.finfo(fp8).max
    dims = (0, 1, 3) if config.kv_scale == "per_head" else (0, 1, 2, 3)
    if values.numel():
        amax = values.abs().amax(dim=dims)
    else:  # an empty pool (every context 0, no spare block)
        amax = torch.zeros(values.shape[2] if config.kv_scale == "per_head" else (), device=values.device)
    scale = torch.where(amax > 0, amax / fp8_max, 1.0).to(torch.float32)
    stored = (values / (scale[:, None] if scale.dim() else scale)).to(fp8)
    return stored, (scale if config.kv_scale == "per_head" else float(scale))


def unquantized_cache(config: DecodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 K and V an fp8 cache of ``config`` was quantized from.

    The same draws :func:`build_decode_inputs` makes (same seed, same order, a
    shared prefix's tail slots copied), before quantization; slots no context
    covers hold the draws too (never read). With
    the quantized cache's query and block table, the float64 reference on these
    gives the answer an unquantized cache would: the quantization error is the fp8
    result's distance from it.

    Returns
    -------
    k, v : Tensor
        ``[num_blocks, block_size, num_kv_heads, head_dim]`` float32 on ``config.device``.
    """
    config.validate()
    device = torch.device(config.device)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    shape = (config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim)
    torch.randn(config.batch_size, config.num_heads, config.head_dim, generator=gen, device=device)  # the query
    k = torch.randn(shape, generator=gen, device=device)
    v = torch.randn(shape, generator=gen, device=device)
    copy_prefix_tails(k, v, assign_blocks(config)[0].to(device), config)
    return k, v
