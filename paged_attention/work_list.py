"""Which program of ``triton_decode`` reads which blocks: the work lists.

:func:`build_work_list` turns a :class:`~paged_attention.launch_plan.LaunchPlan`
and the context lengths into the rows the decode kernel reads, one per program
(per KV head): a sequence, a range of its logical blocks, and the slot its partial
result goes to. :func:`prefix_work` does the same for the shared-prefix pass: a
tile of a group's sequences and a piece of their shared blocks. Plain Python on
host tensors: nothing here launches a kernel.

The columns of every table have names (:data:`ITEM_SEQ`, ...) that the host
builds them by and the kernels read them by: ``tl.constexpr`` values, the only
globals a ``@triton.jit`` function may read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import torch

from . import runtime  # noqa: F401  (first: sets TRITON_INTERPRET before triton loads)
import triton.language as tl

from .tiling import even_cut

if TYPE_CHECKING:
    from .launch_plan import LaunchPlan
    from .shared_prefix import PrefixGroup


#: A program's last block when it is its sequence's last: read to the context's
#: end at launch time (a context that grew after planning is still read in full).
TO_CONTEXT_END = 2**31 - 1

#: Columns of :attr:`WorkList.items`, one row per program: its sequence, its
#: logical blocks ``[first_block, last_block)`` and its partial-result slot.
ITEM_SEQ = tl.constexpr(0)
ITEM_FIRST_BLOCK = tl.constexpr(1)
ITEM_LAST_BLOCK = tl.constexpr(2)
ITEM_SLOT = tl.constexpr(3)
ITEM_WIDTH = tl.constexpr(4)

#: Columns of :attr:`WorkList.sequences`, one row per sequence.
SEQUENCE_FIRST_SLOT = tl.constexpr(0)
SEQUENCE_NUM_SLOTS = tl.constexpr(1)
SEQUENCE_NUM_ITEMS = tl.constexpr(2)
SEQUENCE_WIDTH = tl.constexpr(3)

#: Columns of :attr:`PrefixWork.items`, one row per prefix-pass program.
PREFIX_FIRST_MEMBER = tl.constexpr(0)
PREFIX_NUM_MEMBERS = tl.constexpr(1)
PREFIX_FIRST_BLOCK = tl.constexpr(2)
PREFIX_LAST_BLOCK = tl.constexpr(3)
PREFIX_SLOT = tl.constexpr(4)
PREFIX_WIDTH = tl.constexpr(5)


def _column_table(width: tl.constexpr, columns: Mapping[tl.constexpr, Sequence[int]]) -> torch.Tensor:
    """A host table for a kernel, built by column names.

    Parameters
    ----------
    width : tl.constexpr
        Columns per row.
    columns : mapping of tl.constexpr to sequence of int
        Every column index ``0 .. width - 1``, each to its values (one per row).

    Returns
    -------
    Tensor
        ``[rows, width]`` int32 on the CPU, contiguous.

    Raises
    ------
    ValueError
        If the columns are not exactly ``0 .. width - 1`` or differ in length.
    """
    indices = sorted(int(c) for c in columns)
    if indices != list(range(int(width))):
        raise ValueError(f"a table of width {int(width)} needs columns 0 to {int(width) - 1}; got {indices}")
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"the columns differ in length: {sorted(lengths)}")
    table = torch.empty(lengths.pop(), int(width), dtype=torch.int32)
    for column, values in columns.items():
        table[:, int(column)] = torch.tensor(list(values), dtype=torch.int32)
    return table


@dataclass(frozen=True)
class WorkList:
    """The programs of one launch, as the kernel reads them.

    Attributes
    ----------
    items : Tensor
        ``[num_items, ITEM_WIDTH]`` int32 on the CPU, one row per program (per KV
        head), columns :data:`ITEM_SEQ`, :data:`ITEM_FIRST_BLOCK`,
        :data:`ITEM_LAST_BLOCK`, :data:`ITEM_SLOT`: logical blocks
        ``[first_block, last_block)`` of sequence ``seq`` (``last_block`` is
        :data:`TO_CONTEXT_END` for a sequence's last program), and the partial-result
        slot the program writes when the sequence has more than one.
    sequences : Tensor
        ``[batch_size, SEQUENCE_WIDTH]`` int32 on the CPU, columns
        :data:`SEQUENCE_FIRST_SLOT`, :data:`SEQUENCE_NUM_SLOTS`,
        :data:`SEQUENCE_NUM_ITEMS`. A sequence's slots are consecutive; the first
        ``num_slots - num_items`` hold shared-prefix partials written before the
        launch, the rest its own programs'. The program that finishes last merges
        all ``num_slots``.
    num_slots : int
        Partial-result slots over the batch.
    """

    items: torch.Tensor
    sequences: torch.Tensor
    num_slots: int

    @property
    def num_items(self) -> int:
        return int(self.items.shape[0])

    @property
    def needs_merge(self) -> bool:
        """Whether any sequence has more than one partial result."""
        return self.num_slots > int(self.sequences.shape[0])


def build_work_list(
    plan: LaunchPlan,
    context_lens: torch.Tensor,
    *,
    first_blocks: list[int] | None = None,
    prefix_slots: list[int] | None = None,
) -> WorkList:
    """Cut each sequence into programs as ``plan`` says (:meth:`LaunchPlan.sequence_items`).

    Parameters
    ----------
    plan : LaunchPlan
    context_lens : Tensor
        ``[batch_size]`` integer lengths on the CPU (validation's host copy).
    first_blocks : list of int, optional
        Per sequence, the first block its own programs read (the blocks before it
        are read by a shared-prefix pass, or lie before its window); 0 by default.
    prefix_slots : list of int, optional
        Per sequence, how many partial results the shared-prefix pass writes for it.

    Returns
    -------
    WorkList
        Items in sequence order, or longest first for a balanced plan (the GPU
        starts programs about in launch order, so the short ones fill the gaps at
        the end, as longest-processing-time-first scheduling does).
    """
    lens = [int(n) for n in context_lens.tolist()]
    items: dict[tl.constexpr, list[int]] = {ITEM_SEQ: [], ITEM_FIRST_BLOCK: [], ITEM_LAST_BLOCK: [], ITEM_SLOT: []}
    sequences: dict[tl.constexpr, list[int]] = {SEQUENCE_FIRST_SLOT: [], SEQUENCE_NUM_SLOTS: [], SEQUENCE_NUM_ITEMS: []}
    sizes: list[int] = []
    slot = 0
    for seq, length in enumerate(lens):
        first = first_blocks[seq] if first_blocks else 0
        extra = prefix_slots[seq] if prefix_slots else 0
        ranges = plan.sequence_items(length, first)
        for j, (start, stop) in enumerate(ranges):
            items[ITEM_SEQ].append(seq)
            items[ITEM_FIRST_BLOCK].append(start)
            items[ITEM_LAST_BLOCK].append(TO_CONTEXT_END if j == len(ranges) - 1 else stop)
            items[ITEM_SLOT].append(slot + extra + j)
            sizes.append(stop - start)
        sequences[SEQUENCE_FIRST_SLOT].append(slot)
        sequences[SEQUENCE_NUM_SLOTS].append(extra + len(ranges))
        sequences[SEQUENCE_NUM_ITEMS].append(len(ranges))
        slot += extra + len(ranges)
    table = _column_table(ITEM_WIDTH, items)
    if plan.balanced:
        table = table[sorted(range(len(sizes)), key=lambda i: -sizes[i])]
    return WorkList(
        items=table,
        sequences=_column_table(SEQUENCE_WIDTH, sequences),
        num_slots=slot,
    )


@dataclass(frozen=True)
class PrefixWork:
    """The prefix pass's programs (per KV head) and what they leave to the rest.

    Attributes
    ----------
    items : Tensor
        ``[num_items, PREFIX_WIDTH]`` int32 on the CPU, columns
        :data:`PREFIX_FIRST_MEMBER`, :data:`PREFIX_NUM_MEMBERS`,
        :data:`PREFIX_FIRST_BLOCK`, :data:`PREFIX_LAST_BLOCK`, :data:`PREFIX_SLOT`:
        members ``members[first_member : first_member + num_members]`` attend to
        logical blocks ``[first_block, last_block)`` of the group's shared prefix
        and each writes its partial result to its own slot number ``slot``
        (counted from the sequence's first).
    members : Tensor
        ``[num_members_total]`` int32 on the CPU: the groups' sequences, in order.
    first_blocks : list of int
        Per sequence, the first block its own programs read.
    prefix_slots : list of int
        Per sequence, how many prefix partials it receives.
    """

    items: torch.Tensor
    members: torch.Tensor
    first_blocks: list[int]
    prefix_slots: list[int]

    @property
    def num_items(self) -> int:
        return int(self.items.shape[0])


def prefix_work(
    groups: Sequence[PrefixGroup], batch_size: int, members_per_tile: int, chunk_blocks: int, unit: int = 1,
    window_blocks: Sequence[int] | None = None,
) -> PrefixWork:
    """Cut each group into programs: ``members_per_tile`` members by at most
    ``chunk_blocks`` shared blocks each, the pieces of one group about equal and
    whole multiples of ``unit`` blocks (one tile) but the last
    (:func:`~paged_attention.tiling.even_cut`).

    ``window_blocks`` (per sequence, the first block its window needs; 0 by
    default) starts each group's pieces at its earliest member's, and each
    sequence's own programs (:attr:`PrefixWork.first_blocks`) at its own or past
    its group's shared blocks, whichever is later."""
    items: dict[tl.constexpr, list[int]] = {PREFIX_FIRST_MEMBER: [], PREFIX_NUM_MEMBERS: [], PREFIX_FIRST_BLOCK: [],
                                            PREFIX_LAST_BLOCK: [], PREFIX_SLOT: []}
    members: list[int] = []
    first_blocks = [0] * batch_size if window_blocks is None else [int(b) for b in window_blocks]
    prefix_slots = [0] * batch_size
    for group in groups:
        start = min(first_blocks[seq] for seq in group.sequences) if window_blocks is not None else 0
        pieces = even_cut(start, group.num_blocks, chunk_blocks, unit)
        if not pieces:
            continue
        offset = len(members)
        members.extend(group.sequences)
        for seq in group.sequences:
            first_blocks[seq] = max(first_blocks[seq], group.num_blocks)
            prefix_slots[seq] = len(pieces)
        # The member tiles of one piece launch next to each other: they read the
        # same blocks at about the same time, so all but the first hit in L2.
        for slot, (start, stop) in enumerate(pieces):
            for m in range(0, len(group.sequences), members_per_tile):
                items[PREFIX_FIRST_MEMBER].append(offset + m)
                items[PREFIX_NUM_MEMBERS].append(min(members_per_tile, len(group.sequences) - m))
                items[PREFIX_FIRST_BLOCK].append(start)
                items[PREFIX_LAST_BLOCK].append(stop)
                items[PREFIX_SLOT].append(slot)
    return PrefixWork(
        items=_column_table(PREFIX_WIDTH, items),
        members=torch.tensor(members or [0], dtype=torch.int32),
        first_blocks=first_blocks,
        prefix_slots=prefix_slots,
    )
