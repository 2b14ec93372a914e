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
them). With a sliding window the groups, the pass's pieces and what it leaves
to the decode kernel (:func:`own_first_blocks`, :func:`own_shape`) start at
each window's first block: table entries before it may be freed. Plain Python
on host tensors: nothing here launches a kernel.
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
        blocks, and every member's context reaches into. With a window, only the
        columns a member's window needs count for it (entries before may be
        freed); the prefix pass reads the shared blocks from the earliest member
        window's first block on.
    """

    sequences: tuple[int, ...]
    num_blocks: int


def find_shared_prefixes(
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    block_size: int,
    *,
    min_tokens: int = 1,
    first_blocks: torch.Tensor | None = None,
) -> tuple[PrefixGroup, ...]:
    """The groups of sequences that share leading physical blocks, from the table.

    Sequences are grouped by their first needed physical block (with a window, the
    block at their window's first column, looked up in the rows of sequences whose
    windows start earlier); a group's prefix is the run of columns, from its
    earliest window's first block, on which every member that needs a column maps
    it alike, within every member's needed blocks. Members whose window starts
    past that run leave the group. One level only: members that share more among
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
        Groups sharing fewer tokens than this (their blocks from the earliest
        window's times ``block_size``) are left out; by default any shared block
        counts. Groups of one sequence always are.
    first_blocks : Tensor, optional
        ``[batch_size]`` integer on the CPU: each sequence's first needed block
        (:attr:`~paged_attention.validation.DecodeShape.first_blocks`); entries
        before it are never read. ``None``: 0 for every sequence.

    Returns
    -------
    tuple of PrefixGroup
        In order of each group's first member; no sequence is in two groups.
    """
    lens = context_lens.to(torch.int64)
    needs = cdiv(lens, block_size).tolist()
    firsts = [0] * len(needs) if first_blocks is None else first_blocks.to(torch.int64).tolist()
    tables = block_tables.to(torch.int64)
    live = [seq for seq in range(len(needs)) if needs[seq] > firsts[seq]]
    top = max((firsts[seq] for seq in live), default=0)  # no sequence looks up a later column
    # A sequence joins the group of an earlier-starting root whose row holds its
    # first needed block at the same column; a root's columns are registered once.
    owner: dict[tuple[int, int], int] = {}
    candidates: list[list[int]] = []
    for seq in sorted(live, key=lambda s: (firsts[s], s)):
        f = firsts[seq]
        gid = owner.get((f, int(tables[seq, f])))
        if gid is None:
            gid = len(candidates)
            candidates.append([seq])
            for col, block in enumerate(tables[seq, f : min(needs[seq], top + 1)].tolist(), start=f):
                owner.setdefault((col, block), gid)
        else:
            candidates[gid].append(seq)
    groups = []
    for members in candidates:
        while len(members) > 1:
            root, lo = members[0], firsts[members[0]]  # the earliest window: it needs every column from lo
            num_blocks = min(needs[m] for m in members)
            for m in members[1:]:
                a = firsts[m]
                differs = tables[m, a:num_blocks] != tables[root, a:num_blocks]
                if bool(differs.any()):
                    num_blocks = a + int(differs.nonzero()[0])
            kept = [m for m in members if firsts[m] < num_blocks]
            if len(kept) == len(members):
                break
            members = kept
        if len(members) > 1 and (num_blocks - lo) * block_size >= min_tokens:
            groups.append(PrefixGroup(tuple(sorted(members)), num_blocks))
    return tuple(sorted(groups, key=lambda g: g.sequences[0]))


def check_shared_prefixes(
    groups: Sequence[PrefixGroup], block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int,
    first_blocks: torch.Tensor | None = None,
) -> tuple[PrefixGroup, ...]:
    """ValueError unless every group's members do share its blocks.

    Parameters
    ----------
    groups : sequence of PrefixGroup
    block_tables, context_lens : Tensor
        Host copies, as for :func:`find_shared_prefixes`.
    block_size : int
    first_blocks : Tensor, optional
        Each sequence's first needed block, as for :func:`find_shared_prefixes`:
        a member's entries before it are not compared (the member whose window
        starts first is the reference).

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
        firsts = [0 if first_blocks is None else int(first_blocks[seq]) for seq in group.sequences]
        ref = group.sequences[firsts.index(min(firsts))]
        first = block_tables[ref, : group.num_blocks].to(torch.int64)
        for seq, start in zip(group.sequences, firsts):
            row = block_tables[seq, : group.num_blocks].to(torch.int64)
            differs = row[start:] != first[start:]
            if bool(differs.any()):
                col = start + int(differs.nonzero()[0])
                raise ValueError(
                    f"shared_prefixes[{i}]: sequences {ref} and {seq} map logical block {col} to "
                    f"physical blocks {int(first[col])} and {int(row[col])}; a shared prefix is the same blocks"
                )
    return tuple(groups)


def resolve_shared_prefixes(
    spec: str | Sequence[PrefixGroup] | None, shape: DecodeShape, name: str = "shared_prefixes"
) -> tuple[PrefixGroup, ...]:
    """The groups a prefix pass reads, those with shared blocks: ``"detect"`` finds
    them in the block table (:func:`find_shared_prefixes`), a sequence of
    :class:`PrefixGroup` is checked (:func:`check_shared_prefixes`), None gives none.
    With a window (``shape.window``), a group keeps only the members whose window
    starts inside its shared blocks, and a group with none is left out. With draft
    tokens (``shape.max_query_len > 1``) the pass is not run: ``"detect"`` gives no
    group, and each sequence's programs read its shared blocks too (exact, each
    shared byte read once per sequence; the pass's tile of members x tokens x heads
    is exact under the interpreter but Triton 3.6 did not compile it on the H200).

    Raises
    ------
    ValueError
        On any other string (naming the argument ``name``), groups that do not
        share, or groups given with draft tokens.
    """
    if spec is None:
        return ()
    if shape.max_query_len > 1:
        if isinstance(spec, str) and spec == "detect":
            return ()
        if not isinstance(spec, str):
            raise ValueError(f"{name}: the prefix pass takes one query token per sequence; with query_lens "
                             "pass None or 'detect' (which then finds no group)")
    first_blocks = None if shape.window is None else shape.first_blocks
    if isinstance(spec, str):
        if spec != "detect":
            raise ValueError(f"{name} must be 'detect', a sequence of PrefixGroup or None; got {spec!r}")
        groups = find_shared_prefixes(shape.block_tables, shape.context_lens, shape.block_size,
                                      first_blocks=first_blocks)
    else:
        groups = check_shared_prefixes(tuple(spec), shape.block_tables, shape.context_lens, shape.block_size,
                                       first_blocks)
    if first_blocks is not None:
        groups = tuple(PrefixGroup(tuple(s for s in g.sequences if int(first_blocks[s]) < g.num_blocks), g.num_blocks)
                       for g in groups)
    return tuple(g for g in groups if g.num_blocks > 0 and g.sequences)


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
    float32). Each group's shared blocks (from the earliest member window's first
    block, :func:`group_first_block`) are cut into pieces of at most
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
    pieces = [g.num_blocks - group_first_block(shape, g) for g in groups for _ in range(0, len(g.sequences), per_tile)]
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


def group_first_block(shape: DecodeShape, group: PrefixGroup) -> int:
    """The first shared block the prefix pass reads for ``group``: its earliest
    member window's first block (0 without a window)."""
    if shape.window is None:
        return 0
    return min(int(shape.first_blocks[s]) for s in group.sequences)


def own_first_blocks(shape: DecodeShape, groups: Sequence[PrefixGroup]) -> torch.Tensor:
    """Per sequence, the first block the decode kernel's own programs read: its
    window's first block, or past its group's shared blocks if later.

    Returns
    -------
    Tensor
        ``[batch_size]`` int64 on the CPU (zeros without a window and groups).
    """
    first = shape.first_blocks.clone()
    for g in groups:
        members = list(g.sequences)
        first[members] = first[members].clamp(min=g.num_blocks)
    return first


def own_shape(shape: DecodeShape, groups: Sequence[PrefixGroup]) -> DecodeShape:
    """What is left for the decode kernel once a prefix pass has read the shared
    blocks and before a window nothing is read, as plain contexts: what its launch
    plan is made for.

    Parameters
    ----------
    shape : DecodeShape
    groups : sequence of PrefixGroup

    Returns
    -------
    DecodeShape
        The same sizes, ``context_lens`` (CPU int64) reduced by
        ``own_first_blocks * block_size`` (:func:`own_first_blocks`), never below
        0, and no window (the lengths are the attended ones, rounded out to the
        window's first block).
    """
    skipped = own_first_blocks(shape, groups) * shape.block_size
    return replace(shape, context_lens=(shape.context_lens.to(torch.int64) - skipped).clamp(min=0), window=None)


def members_per_tile(query_rows: int, query_group_size: int) -> int:
    """Sequences whose query rows share one prefix-pass tile: ``query_rows`` (a
    prefix plan's :attr:`~paged_attention.launch_plan.LaunchPlan.query_rows`) over
    the query group rounded up to a power of two, at least one."""
    return max(1, query_rows // next_pow2(query_group_size))

