"""A serving simulation's history in compact NumPy form, for pictures of it.

:class:`~explorer.serving.simulator.ServingSimulator` returns one
:class:`~explorer.serving.snapshot.Snapshot` (torch tensors, a whole pool-owner map)
per step. A page that scrubs through hundreds of steps wants them small,
picklable and free of tensors: :class:`StepRecord` keeps one step as the running
sequences' ids, lengths and block ids (the pool map is derived from them) and
the step's :class:`~explorer.serving.snapshot.PoolChanges`, and :class:`ServingHistory`
keeps every step plus per-step counts of those changes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from explorer import formatting
from explorer.cards import Card
from explorer.formatting import format_number
from explorer.limits import MAX_STEP_BLOCKS
from explorer.serving.block_manager import blocks_for
from explorer.serving.simulator import ServingSimulator
from explorer.serving.snapshot import PoolChanges, Snapshot, metrics_frame
from explorer.serving.traffic import ServingConfig
from explorer.serving.window import window_bound
from paged_attention.inputs import FREE
from paged_attention.tiling import cdiv

#: Columns :func:`simulate` adds to :func:`~explorer.serving.snapshot.metrics_frame`: the
#: number of blocks in each of the step's :class:`~explorer.serving.snapshot.PoolChanges`.
POOL_CHANGE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(PoolChanges))


@dataclass(frozen=True)
class StepRecord:
    """One step's batch and pool, without tensors.

    Attributes
    ----------
    step, block_size, num_blocks : int
    seq_ids : ndarray
        ``[running]`` int64, in admission order.
    context_lens : ndarray
        ``[running]`` int32.
    blocks : ndarray
        int32, every running sequence's physical blocks in logical order, one
        sequence after the other (``ceil(context_len / block_size)`` each, less
        those freed before its window).
    arrived, admitted, decoded, stalled, waiting, finished : int
    blocks_unshared, filled_slots, cow_copies, prefix_hits, prefix_queries
    changes, window
        As in :class:`~explorer.serving.snapshot.Snapshot`.
    freed : ndarray or None
        ``[running]`` int64: leading table entries freed out of the window (``-1``)
        per sequence; None: none.
    """

    step: int
    block_size: int
    num_blocks: int
    seq_ids: np.ndarray
    context_lens: np.ndarray
    blocks: np.ndarray
    arrived: int = 0
    admitted: int = 0
    decoded: int = 0
    stalled: int = 0
    waiting: int = 0
    finished: int = 0
    blocks_unshared: int | None = None
    filled_slots: int | None = None
    cow_copies: int = 0
    prefix_hits: int = 0
    prefix_queries: int = 0
    changes: PoolChanges = PoolChanges()
    window: int | None = None
    freed: np.ndarray | None = None

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> "StepRecord":
        tables = snap.block_tables.numpy()
        lens = snap.context_lens.numpy().astype(np.int64)
        freed = cdiv(lens, snap.block_size) - (tables >= 0).sum(axis=1)
        return cls(
            step=snap.step, block_size=snap.block_size, num_blocks=snap.num_blocks,
            seq_ids=snap.seq_ids.numpy().astype(np.int64),
            context_lens=snap.context_lens.numpy().astype(np.int32),
            blocks=tables[tables >= 0].astype(np.int32),
            arrived=snap.arrived, admitted=snap.admitted, decoded=snap.decoded, stalled=snap.stalled,
            waiting=snap.waiting, finished=snap.finished, blocks_unshared=snap.blocks_unshared,
            filled_slots=snap.filled_slots, cow_copies=snap.cow_copies, prefix_hits=snap.prefix_hits,
            prefix_queries=snap.prefix_queries, changes=snap.changes, window=snap.window,
            freed=freed.astype(np.int64) if freed.any() else None,
        )

    @property
    def num_running(self) -> int:
        return len(self.seq_ids)

    @property
    def blocks_per_sequence(self) -> np.ndarray:
        """``[running]`` int64: blocks each sequence holds (freed ones not counted)."""
        return cdiv(self.context_lens.astype(np.int64), self.block_size) - self.freed_entries

    @property
    def freed_entries(self) -> np.ndarray:
        """``[running]`` int64: leading table entries freed out of the window."""
        return np.zeros(self.num_running, dtype=np.int64) if self.freed is None else self.freed

    def block_tables(self) -> np.ndarray:
        """``[running, max_blocks]`` int32, ``-1`` padded and where a block before the
        window was freed (at least one column)."""
        counts, skip = self.blocks_per_sequence, self.freed_entries
        width = max(1, int((counts + skip).max(initial=0)))
        table = np.full((self.num_running, width), -1, dtype=np.int32)
        starts = np.concatenate([[0], np.cumsum(counts)])
        for i, n in enumerate(counts):
            table[i, skip[i] : skip[i] + n] = self.blocks[starts[i] : starts[i] + n]
        return table

    def pool_owner(self) -> np.ndarray:
        """``[num_blocks]`` int64: the ``seq_id`` owning each block (the lowest of a
        shared block's holders, as :meth:`BlockManager.pool_owner`), ``-1`` if free."""
        owner = np.full(self.num_blocks, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(owner, self.blocks, np.repeat(self.seq_ids, self.blocks_per_sequence))
        owner[owner == np.iinfo(np.int64).max] = FREE
        return owner

    def snapshot(self) -> Snapshot:
        """The :class:`~explorer.serving.snapshot.Snapshot` this record came from
        (for :meth:`~explorer.serving.snapshot.Snapshot.decode_inputs`)."""
        return Snapshot(
            step=self.step, block_size=self.block_size, num_blocks=self.num_blocks,
            seq_ids=torch.from_numpy(self.seq_ids.copy()),
            block_tables=torch.from_numpy(self.block_tables()),
            context_lens=torch.from_numpy(self.context_lens.copy()),
            pool_owner=torch.from_numpy(self.pool_owner()),
            arrived=self.arrived, admitted=self.admitted, decoded=self.decoded, stalled=self.stalled,
            waiting=self.waiting, finished=self.finished, blocks_unshared=self.blocks_unshared,
            filled_slots=self.filled_slots, cow_copies=self.cow_copies, prefix_hits=self.prefix_hits,
            prefix_queries=self.prefix_queries, changes=self.changes, window=self.window,
        )


@dataclass(frozen=True)
class ServingHistory:
    """Every step of one simulation.

    Attributes
    ----------
    config : ServingConfig
    records : tuple of StepRecord
        One per step, ``records[s].step == s``.
    metrics : DataFrame
        :func:`~explorer.serving.snapshot.metrics_frame` plus
        :data:`POOL_CHANGE_COLUMNS`: how many blocks the step took, recycled,
        copied on write, revived from the prefix cache and freed (see
        :class:`~explorer.serving.snapshot.PoolChanges`).
    """

    config: ServingConfig
    records: tuple[StepRecord, ...]
    metrics: pd.DataFrame

    @property
    def steps(self) -> int:
        return len(self.records)

    def changes(self, step: int) -> PoolChanges:
        """The blocks ``step`` took from the free list and returned to it."""
        return self.records[step].changes

    def logical_blocks_added(self, step: int) -> int:
        """Entries the running sequences' block tables gained during ``step``: each
        sequence's logical blocks after it less those it had after the step before
        (none for a sequence admitted in it). With sharing, more than the physical
        blocks the step took (:meth:`changes`): a prefix-cache hit or a fork adds
        entries that point to blocks already in use."""
        now = self.records[step]
        before = self.records[step - 1] if step > 0 else None
        had = {} if before is None else dict(zip(before.seq_ids.tolist(), before.blocks_per_sequence.tolist()))
        return int(sum(max(n - had.get(s, 0), 0) for s, n in zip(now.seq_ids.tolist(), now.blocks_per_sequence.tolist())))


def simulate(config: ServingConfig, steps: int) -> ServingHistory:
    """Run :class:`~explorer.serving.simulator.ServingSimulator` for ``steps`` steps
    and keep every step.

    Raises
    ------
    ValueError
        If ``config`` is invalid (see :meth:`ServingConfig.validate`), ``steps < 1``
        or ``steps x num_blocks`` exceeds :data:`MAX_STEP_BLOCKS`.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer; got {steps!r}")
    config.validate()
    if steps * config.num_blocks > MAX_STEP_BLOCKS:
        raise ValueError(
            f"{format_number(steps)} steps x {format_number(config.num_blocks)} blocks is more than this page "
            f"records ({format_number(MAX_STEP_BLOCKS)}); use fewer steps or a smaller pool"
        )
    snapshots = ServingSimulator(config).run(steps)
    records = tuple(StepRecord.from_snapshot(s) for s in snapshots)
    frame = metrics_frame(snapshots)
    for column in POOL_CHANGE_COLUMNS:
        frame[column] = [len(getattr(s.changes, column)) for s in snapshots]
    return ServingHistory(config, records, frame)


def max_request_tokens(config: ServingConfig) -> int:
    """Tokens of the longest possible request (prompt and output at their highs)."""
    return config.prompt_len.high + config.output_len.high


def valid_block_sizes(config: ServingConfig, block_sizes: Sequence[int], pool_tokens: int) -> tuple[list[int], list[int]]:
    """Split ``block_sizes`` into those whose pool of ``pool_tokens // b`` blocks
    holds the longest request, and those that do not."""
    need = max_request_tokens(config)
    ok = [b for b in block_sizes if blocks_for(need, b) <= pool_tokens // b]
    return ok, [b for b in block_sizes if b not in ok]


def comparison_metrics(freed: ServingHistory, kept: ServingHistory) -> pd.DataFrame:
    """``freed``'s metrics with ``blocks_unshared`` set to ``kept``'s blocks in use:
    the two lines of :func:`~explorer.cache.sharing_figures.sharing_timeline_figure`
    (``kind="freeing"``)."""
    return freed.metrics.assign(blocks_unshared=kept.metrics["blocks_in_use"].to_numpy())


def window_cards(freed: ServingHistory, kept: ServingHistory) -> list[Card]:
    """Four cards: peak blocks in use and blocks at the end, with freeing (the value)
    against without (the delta); the most blocks one sequence holds, and how many
    sequences at that size the pool holds."""
    config, num = freed.config, formatting.format_number
    window, bs, pool = config.window, config.block_size, config.num_blocks
    bound = window_bound(window, bs)
    longest = blocks_for(max_request_tokens(config), bs)
    most = min(bound, longest)
    f, k = freed.metrics["blocks_in_use"], kept.metrics["blocks_in_use"]
    return [
        Card("Peak blocks in use", num(int(f.max())), f"{num(int(k.max()))} without freeing",
             "the most blocks in use at any step of the run, freeing the blocks before each window against keeping "
             "them (the same request stream; without freeing the schedule is the plain one)"),
        Card("Blocks at the end", num(int(f.iloc[-1])), f"{num(int(k.iloc[-1]))} without freeing",
             f"blocks in use after the last step ({freed.steps - 1})"),
        Card("Blocks per sequence at most", num(most), f"{num(longest)} without freeing",
             f"ceil(window / block_size) + 1 = ceil({num(window)} / {bs}) + 1 = {num(bound)} with freeing (a window "
             f"that starts inside a block ends inside another), capped by the longest request's {num(longest)}"),
        Card("Longest that fit", num(pool // most), f"{num(pool // longest)} without freeing",
             f"{num(pool)} blocks over the most one sequence holds: how many of the longest requests fit at once"),
    ]


def window_caption(window: int, free: bool, longest: int | None = None) -> str:
    """Under the comparison: what was simulated, and which run the page shows; when
    no request of ``longest`` tokens at most outgrows the window, that nothing is freed."""
    shown = ("The pool, the block tables and the cards above show the run with freeing: a freed entry is "
             "– in the block table (the kernel reads -1 there) and its block is marked ✕ in the pool on the step "
             "it left." if free else
             "Freeing is off: the pool above keeps every block, and the block table hatches the entries the window "
             "no longer reads (held, not read).")
    return (f"Both lines replay the same request stream with a window of {formatting.count(window, 'token')}: "
            "one frees every running sequence's blocks before its window each step, the other keeps them. "
            + shown + ("" if longest is None or longest > window else
                       f" No request outgrows the window (the longest holds {formatting.count(longest, 'token')}), so "
                       "the two runs are the same: lengthen the requests or shorten the window to see blocks freed."))
