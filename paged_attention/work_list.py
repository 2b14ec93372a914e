"""Which program of ``triton_decode`` reads which blocks: the work list.

:func:`build_work_list` turns a :class:`~paged_attention.launch_plan.LaunchPlan`
and the context lengths into the rows the kernel reads, one per program (per KV
head): a sequence, a range of its logical blocks, and the slot its partial result
goes to. Plain Python on host tensors: nothing here launches a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .launch_plan import LaunchPlan


#: A program's last block when it is its sequence's last: read to the context's
#: end at launch time (a context that grew after planning is still read in full).
TO_CONTEXT_END = 2**31 - 1


@dataclass(frozen=True)
class WorkList:
    """The programs of one launch, as the kernel reads them.

    Attributes
    ----------
    items : Tensor
        ``[num_items, 4]`` int32 on the CPU, one row per program (per KV head):
        ``(seq, first_block, last_block, slot)``, logical blocks
        ``[first_block, last_block)`` of sequence ``seq`` (``last_block`` is
        :data:`TO_CONTEXT_END` for a sequence's last program), and the partial-result
        slot the program writes when the sequence has more than one.
    sequences : Tensor
        ``[batch_size, 3]`` int32 on the CPU: ``(first_slot, num_slots,
        num_items)``. A sequence's slots are consecutive; the first
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
        are read by a shared-prefix pass); 0 by default.
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
    items: list[tuple[int, int, int, int]] = []
    sizes: list[int] = []
    sequences: list[tuple[int, int, int]] = []
    slot = 0
    for seq, length in enumerate(lens):
        first = first_blocks[seq] if first_blocks else 0
        extra = prefix_slots[seq] if prefix_slots else 0
        ranges = plan.sequence_items(length, first)
        for j, (start, stop) in enumerate(ranges):
            items.append((seq, start, TO_CONTEXT_END if j == len(ranges) - 1 else stop, slot + extra + j))
            sizes.append(stop - start)
        sequences.append((slot, extra + len(ranges), len(ranges)))
        slot += extra + len(ranges)
    if plan.balanced:
        order = sorted(range(len(items)), key=lambda i: -sizes[i])
        items = [items[i] for i in order]
    return WorkList(
        items=torch.tensor(items, dtype=torch.int32).reshape(-1, 4),
        sequences=torch.tensor(sequences, dtype=torch.int32).reshape(-1, 3),
        num_slots=slot,
    )
