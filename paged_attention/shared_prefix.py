"""Shared prefixes in a block table, and the prefix pass's share of the launch plan.

Sequences that start with the same tokens (a common system prompt, n samples of one
request, beams) point their block tables at the same physical blocks. A decode
kernel that walks each sequence on its own reads those blocks once per sequence;
``triton_decode(..., shared_prefixes=...)`` instead runs a prefix pass that
attends every query head of a group's sequences to the shared blocks together,
reading each shared byte once per group, then merges each sequence's prefix
partials with its own suffix's (the split-K merge).

:func:`find_shared_prefixes` finds the groups in a block table;
:func:`check_shared_prefixes` checks groups a caller gives; :func:`plan_prefix`
picks the pass's tile and pieces (:func:`~paged_attention.work_list.prefix_work`
cuts the groups into its programs, :mod:`paged_attention.prefix_pass` runs
them). Plain Python on host tensors: nothing here launches a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch

from . import runtime
from .launch_plan import BALANCED_MIN_TOKENS, LaunchPlan, check_plan_overrides, choose_chunk_blocks
from .tiling import cdiv, dot_pad, next_pow2, tile_shape
from .validation import DecodeShape

#: Query rows (sequences x query heads of one KV head) in one prefix-pass tile.
PREFIX_ROWS = 64


@dataclass(frozen=True)
class PrefixGroup:
    """Sequences whose block tables start with the same physical blocks.

    Attributes
    ----------
    sequences : tuple of int
        Batch indices of the members (one or more).
    num_blocks : int
        Leading logical blocks every member's table maps to the same physical
        blocks, and every member's context reaches into.
    """

    sequences: tuple[int, ...]
    num_blocks: int


def find_shared_prefixes(
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    block_size: int,
    *,
    min_tokens: int = 1,
) -> tuple[PrefixGroup, ...]:
    """The groups of sequences that share leading physical blocks, from the table.

    Sequences are grouped by their first physical block; a group's prefix is the
    run of leading columns on which all its members' tables agree, within every
    member's needed blocks. One level only: members that share more among
    themselves than with the whole group (beams, samples under a common system
    prompt) count only the part all of them share.

    Parameters
    ----------
    block_tables : Tensor
        ``[batch_size, max_num_blocks]`` integer, on the CPU (validation's copy).
    context_lens : Tensor
        ``[batch_size]`` integer, on the CPU.
    block_size : int
        Tokens per block.
    min_tokens : int
        Groups sharing fewer tokens than this (``num_blocks * block_size``) are
        left out; by default any shared block counts. Groups of one sequence
        always are.

    Returns
    -------
    tuple of PrefixGroup
        In order of each group's first member; no sequence is in two groups.
    """
    lens = context_lens.to(torch.int64)
    needed = cdiv(lens, block_size)
    tables = block_tables.to(torch.int64)
    by_first: dict[int, list[int]] = {}
    for seq in torch.nonzero(needed > 0).flatten().tolist():
        by_first.setdefault(int(tables[seq, 0]), []).append(seq)
    groups = []
    for members in by_first.values():
        if len(members) < 2:
            continue
        cols = int(needed[members].min())
        rows = tables[members, :cols]
        differs = (rows != rows[0]).any(0)
        num_blocks = int(differs.nonzero()[0]) if bool(differs.any()) else cols
        if num_blocks * block_size >= min_tokens:
            groups.append(PrefixGroup(tuple(members), num_blocks))
    return tuple(sorted(groups, key=lambda g: g.sequences[0]))


def check_shared_prefixes(
    groups: Sequence[PrefixGroup], block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int
) -> tuple[PrefixGroup, ...]:
    """ValueError unless every group's members do share its blocks.

    Parameters
    ----------
    groups : sequence of PrefixGroup
    block_tables, context_lens : Tensor
        Host copies, as for :func:`find_shared_prefixes`.
    block_size : int

    Returns
    -------
    tuple of PrefixGroup

    Raises
    ------
    ValueError
        If a group is not a :class:`PrefixGroup`, has no member, a member out of
        range or in two groups, a negative ``num_blocks``, a member whose context
        does not reach into every shared block, or members whose tables differ on
        the shared blocks.
    """
    batch = int(context_lens.shape[0])
    seen: set[int] = set()
    for i, group in enumerate(groups):
        if not isinstance(group, PrefixGroup):
            raise ValueError(f"shared_prefixes[{i}] must be a PrefixGroup; got {type(group).__name__}")
        if not group.sequences:
            raise ValueError(f"shared_prefixes[{i}] has no sequences")
        if isinstance(group.num_blocks, bool) or not isinstance(group.num_blocks, int) or group.num_blocks < 0:
            raise ValueError(f"shared_prefixes[{i}].num_blocks must be a non-negative integer; got {group.num_blocks!r}")
        for seq in group.sequences:
            if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < batch:
                raise ValueError(f"shared_prefixes[{i}] names sequence {seq!r}; the batch has {batch}")
            if seq in seen:
                raise ValueError(f"sequence {seq} is in two shared-prefix groups")
            seen.add(seq)
            needed = cdiv(int(context_lens[seq]), block_size)
            if needed < group.num_blocks:
                raise ValueError(
                    f"shared_prefixes[{i}] shares {group.num_blocks} blocks, but sequence {seq} has context "
                    f"{int(context_lens[seq])}, which needs only {needed}"
                )
        first = block_tables[group.sequences[0], : group.num_blocks].to(torch.int64)
        for seq in group.sequences[1:]:
            row = block_tables[seq, : group.num_blocks].to(torch.int64)
            if not torch.equal(row, first):
                col = int((row != first).nonzero()[0])
                raise ValueError(
                    f"shared_prefixes[{i}]: sequences {group.sequences[0]} and {seq} map logical block {col} to "
                    f"physical blocks {int(first[col])} and {int(row[col])}; a shared prefix is the same blocks"
                )
    return tuple(groups)


def resolve_shared_prefixes(
    spec: str | Sequence[PrefixGroup] | None, shape: DecodeShape, name: str = "shared_prefixes"
) -> tuple[PrefixGroup, ...]:
    """The groups a prefix pass reads, those with shared blocks: ``"detect"`` finds
    them in the block table (:func:`find_shared_prefixes`), a sequence of
    :class:`PrefixGroup` is checked (:func:`check_shared_prefixes`), None gives none.

    Raises
    ------
    ValueError
        On any other string (naming the argument ``name``), or groups that do not share.
    """
    if spec is None:
        return ()
    if isinstance(spec, str):
        if spec != "detect":
            raise ValueError(f"{name} must be 'detect', a sequence of PrefixGroup or None; got {spec!r}")
        groups = find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size)
    else:
        groups = check_shared_prefixes(tuple(spec), shape.block_tables, shape.context_lens, shape.block_size)
    return tuple(g for g in groups if g.num_blocks > 0)


#: The prefix pass aims at this many programs per SM (each reads its piece of the
#: shared blocks once for up to PREFIX_ROWS query rows).
PREFIX_PROGRAMS_PER_SM = 2


def plan_prefix(
    shape: DecodeShape,
    groups: tuple[PrefixGroup, ...],
    device: torch.device,
    dtype: torch.dtype,
    *,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    max_programs: int | None = None,
    query_rows: int | None = None,
) -> LaunchPlan:
    """The tile and pieces of the shared-prefix pass (``triton_decode(...,
    shared_prefixes=...)``).

    A program holds up to :data:`PREFIX_ROWS` query
    rows (a group's sequences x the query heads of one KV head), so its tiles are
    64 tokens (32 for float32 or ``head_dim > 128``), 4 warps, 3 stages (2 for
    float32). Each group's shared blocks are cut into pieces of at most
    ``blocks_per_split`` blocks, the smallest cap that keeps the pass within
    :data:`PREFIX_PROGRAMS_PER_SM` programs per SM and no piece under
    :data:`~paged_attention.launch_plan.BALANCED_MIN_TOKENS` tokens
    (:func:`~paged_attention.launch_plan.choose_chunk_blocks`).

    Parameters
    ----------
    shape : DecodeShape
    groups : tuple of PrefixGroup
        The groups the pass reads (each with ``num_blocks > 0``).
    device, dtype
        As for :func:`~paged_attention.launch_plan.plan_launch`.
    block_n, num_warps, num_stages, max_programs : int, optional
        Override the defaults (benchmarks sweep them).
    query_rows : int, optional
        Rows per tile, a power of two of at least 16 (default :data:`PREFIX_ROWS`).

    Returns
    -------
    LaunchPlan
        ``num_splits`` is the most pieces of any group.

    Raises
    ------
    ValueError
        On an override the kernel cannot take (as
        :func:`~paged_attention.launch_plan.plan_launch`).
    """
    check_plan_overrides(block_n=block_n, num_warps=num_warps, num_stages=num_stages, max_programs=max_programs,
                         query_rows=query_rows)
    query_rows = PREFIX_ROWS if query_rows is None else query_rows
    element_size = torch.empty((), dtype=dtype).element_size()
    if block_n is None:
        block_n = 32 if element_size == 4 or dot_pad(shape.head_dim) > 128 else 64
    if num_stages is None:
        num_stages = 2 if element_size == 4 else 3
    tile = tile_shape(block_n, shape.block_size)
    per_tile = members_per_tile(query_rows, shape.query_group_size)
    pieces = [g.num_blocks for g in groups for _ in range(0, len(g.sequences), per_tile)]
    if max_programs is None:
        max_programs = PREFIX_PROGRAMS_PER_SM * runtime.num_sms(device)
    chunk = choose_chunk_blocks(
        torch.tensor(pieces or [1]), shape.num_kv_heads, max_programs, tile.blocks_per_tile,
        cdiv(BALANCED_MIN_TOKENS, shape.block_size),
    )
    return LaunchPlan(
        block_n=block_n, **tile._asdict(),
        num_splits=max(1, max((cdiv(n, chunk) for n in pieces), default=1)), blocks_per_split=chunk,
        num_warps=4 if num_warps is None else num_warps, num_stages=num_stages, block_size=shape.block_size,
        balanced=True, query_rows=query_rows,
    )


def own_shape(shape: DecodeShape, groups: Sequence[PrefixGroup]) -> DecodeShape:
    """``shape`` with each context shortened by its group's shared blocks: what is
    left for the decode kernel once a prefix pass has read them, and what its
    launch plan is made for.

    Parameters
    ----------
    shape : DecodeShape
    groups : sequence of PrefixGroup

    Returns
    -------
    DecodeShape
        The same sizes, ``context_lens`` (CPU int64) reduced by ``num_blocks *
        block_size`` for every member of a group, never below 0.
    """
    skipped = torch.zeros(shape.batch_size, dtype=torch.int64)
    for g in groups:
        skipped[list(g.sequences)] = g.num_blocks * shape.block_size
    return replace(shape, context_lens=(shape.context_lens.to(torch.int64) - skipped).clamp(min=0))


def members_per_tile(query_rows: int, query_group_size: int) -> int:
    """Sequences whose query rows share one prefix-pass tile: ``query_rows`` (a
    prefix plan's :attr:`~paged_attention.launch_plan.LaunchPlan.query_rows`) over
    the query group rounded up to a power of two, at least one."""
    return max(1, query_rows // next_pow2(query_group_size))

