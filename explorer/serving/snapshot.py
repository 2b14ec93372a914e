"""What a serving simulator step leaves behind: the pool and the running batch.

:class:`Snapshot` is the state after one step of
:class:`~explorer.serving.simulator.ServingSimulator`: the block table and ``context_lens``
a decode kernel would take next, the pool's owners, and the step's counts.
:meth:`Snapshot.decode_inputs` turns it into the inputs of a real decode call, and
:func:`metrics_frame` turns a run of them into one row per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import pandas as pd
import torch

from paged_attention.config import DecodeConfig
from paged_attention.inputs import FREE, DecodeInputs
from paged_attention.poison import context_mask, fill_uncovered

#: Columns of :func:`metrics_frame`, one row per step.
METRIC_COLUMNS: tuple[str, ...] = (
    "step", "running", "waiting", "arrived", "admitted", "decoded", "stalled", "finished",
    "blocks_in_use", "free_blocks", "tokens_stored", "wasted_slots", "wasted_fraction",
    "blocks_unshared", "cow_copies", "prefix_hits", "prefix_queries",
)


@dataclass(frozen=True)
class PoolChanges:
    """What one step did to the pool: physical block ids, one entry per event.

    A block enters the pool's use when it leaves the free list and leaves it when
    its last reference goes: those are the events here. A block that only gains a
    reference (a prefix-cache hit on a block in use, a fork) or loses one while
    others still hold it (a sample finishing, a copy-on-write) is not listed: its
    reference count says so. A block freed and taken again within one step is in
    both ``freed`` and ``taken``.

    Attributes
    ----------
    taken : tuple of int
        Left the free list to hold new tokens: prompt blocks, new last blocks and
        copy-on-write copies.
    recycled : tuple of int
        Those of ``taken`` that an earlier sequence had held (their old contents
        are overwritten).
    copied : tuple of int
        Those of ``taken`` that are copy-on-write copies of a shared partly filled
        block.
    revived : tuple of int
        Cached full blocks taken back from the free list by a prefix-cache hit,
        their contents kept (nothing is written).
    freed : tuple of int
        Lost their last reference and went back to the free list.
    """

    taken: tuple[int, ...] = ()
    recycled: tuple[int, ...] = ()
    copied: tuple[int, ...] = ()
    revived: tuple[int, ...] = ()
    freed: tuple[int, ...] = ()

    def marks(self) -> dict[str, list[int]]:
        """The step's blocks by the one mark a picture of the pool gives each, and
        the counts a page states beside it: ``"taken"`` (fresh blocks: neither
        recycled nor copied), ``"recycled"`` (not copied), ``"copied"``,
        ``"revived"``, ``"freed"``, each sorted. A copy-on-write copy that reuses a
        released block is marked as a copy; a block freed and taken within the
        step is in ``"freed"`` and in one of the others."""
        copied = {int(b) for b in self.copied}
        recycled = {int(b) for b in self.recycled} - copied
        return {
            "taken": sorted({int(b) for b in self.taken} - recycled - copied),
            "recycled": sorted(recycled), "copied": sorted(copied),
            "revived": sorted({int(b) for b in self.revived}), "freed": sorted({int(b) for b in self.freed}),
        }


@dataclass(frozen=True)
class Snapshot:
    """The pool and the running batch after one simulator step.

    ``block_tables`` and ``context_lens`` are the arguments of the next decode
    step's kernel, row ``i`` being sequence ``seq_ids[i]``.

    Attributes
    ----------
    step : int
        Index of the step just completed (0-based).
    block_size, num_blocks : int
        Of the pool.
    seq_ids : Tensor
        ``[num_running]`` int64, in admission order.
    block_tables : Tensor
        ``[num_running, max_blocks]`` int32, ``-1`` padding, and ``-1`` before a
        sliding window where its blocks were freed.
    context_lens : Tensor
        ``[num_running]`` int32, tokens stored per running sequence.
    pool_owner : Tensor
        ``[num_blocks]`` int64, the ``seq_id`` owning each block or ``-1`` if free.
    arrived, admitted, decoded, stalled : int
        Requests that arrived and were admitted this step; running sequences that
        decoded a token, and that waited for a block.
    waiting : int
        Length of the waiting queue after the step.
    finished : int
        Requests finished so far (cumulative).
    blocks_unshared : int or None
        Blocks the running sequences would hold without sharing
        (``sum(ceil(context_len / block_size))``); ``None`` when nothing can be
        shared, where it equals :attr:`blocks_in_use`.
    filled_slots : int or None
        Slots holding a token, each counted once however many sequences read it
        (``None``: :attr:`tokens_stored`, nothing being shared).
    cow_copies, prefix_hits, prefix_queries : int
        So far (cumulative): copy-on-write copies, and full prompt blocks found in
        the prefix cache and looked up.
    changes : PoolChanges
        The blocks this step took from the free list and returned to it.
    window : int or None
        Sliding window of the decode step (None: the whole context); the kernel
        reads no entry before each window's first block.
    """

    step: int
    block_size: int
    num_blocks: int
    seq_ids: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor
    pool_owner: torch.Tensor
    arrived: int
    admitted: int
    decoded: int
    stalled: int
    waiting: int
    finished: int
    blocks_unshared: int | None = None
    filled_slots: int | None = None
    cow_copies: int = 0
    prefix_hits: int = 0
    prefix_queries: int = 0
    changes: PoolChanges = field(default_factory=PoolChanges)
    window: int | None = None

    @property
    def num_running(self) -> int:
        return int(self.seq_ids.numel())

    @cached_property
    def blocks_in_use(self) -> int:
        return int((self.pool_owner != FREE).sum())

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.blocks_in_use

    @cached_property
    def tokens_stored(self) -> int:
        return int(self.context_lens.sum())

    @property
    def wasted_slots(self) -> int:
        """Allocated but unfilled slots (internal fragmentation):
        ``blocks_in_use * block_size - tokens_stored``."""
        filled = self.tokens_stored if self.filled_slots is None else self.filled_slots
        return self.blocks_in_use * self.block_size - filled

    @property
    def wasted_fraction(self) -> float:
        """``wasted_slots`` over allocated slots (0 when nothing is allocated)."""
        allocated = self.blocks_in_use * self.block_size
        return self.wasted_slots / allocated if allocated else 0.0

    def metrics(self) -> dict[str, int | float]:
        """The step's numbers, keyed by :data:`METRIC_COLUMNS`."""
        return {
            "step": self.step, "running": self.num_running, "waiting": self.waiting,
            "arrived": self.arrived, "admitted": self.admitted, "decoded": self.decoded,
            "stalled": self.stalled, "finished": self.finished,
            "blocks_in_use": self.blocks_in_use, "free_blocks": self.free_blocks,
            "tokens_stored": self.tokens_stored, "wasted_slots": self.wasted_slots,
            "wasted_fraction": self.wasted_fraction,
            "blocks_unshared": self.blocks_in_use if self.blocks_unshared is None else self.blocks_unshared,
            "cow_copies": self.cow_copies, "prefix_hits": self.prefix_hits, "prefix_queries": self.prefix_queries,
        }

    def decode_config(
        self, *, num_heads: int = 32, num_kv_heads: int = 8, head_dim: int = 128,
        dtype: str = "float16", device: str = "cpu", seed: int = 0,
    ) -> DecodeConfig:
        """A :class:`DecodeConfig` with this step's sizes (for memory and byte counts).

        Its ``num_blocks`` equals the pool's. Its ``block_layout`` is only a label:
        the real block table is :attr:`block_tables`, not what
        :func:`~paged_attention.inputs.assign_blocks` would build.

        Raises
        ------
        ValueError
            If no sequence is running, or a head size is invalid.
        """
        if self.num_running == 0:
            raise ValueError(f"step {self.step} has no running sequence to decode")
        return DecodeConfig(
            batch_size=self.num_running,
            context_lens=tuple(self.context_lens.tolist()),
            num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
            block_size=self.block_size, dtype=dtype, device=device, seed=seed,
            block_layout="fragmented",
            spare_blocks=self.num_blocks - self.blocks_in_use, window=self.window,
        ).validate()

    def decode_inputs(
        self, *, num_heads: int = 32, num_kv_heads: int = 8, head_dim: int = 128,
        dtype: str = "float16", device: str = "cpu", seed: int = 0,
    ) -> DecodeInputs:
        """Random query and K/V cache for a decode step over this snapshot's batch.

        Like :func:`~paged_attention.inputs.build_decode_inputs`, but with this
        step's block table: covered slots are standard normal, every other slot
        (free blocks, unfilled tails, slots before a window) holds
        :data:`~paged_attention.poison.LOUD_VALUE`. With :attr:`window` the inputs'
        config has it, so every implementation attends to the window only.
        The K and V pools take ``decode_config(...).kv_cache_bytes()`` bytes.

        Returns
        -------
        DecodeInputs
            ``pool_owner`` gives batch rows (not ``seq_id``), ``-1`` for free blocks.

        Raises
        ------
        ValueError
            As :meth:`decode_config`.
        """
        config = self.decode_config(
            num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
            dtype=dtype, device=device, seed=seed,
        )
        torch_device = torch.device(device)
        gen = torch.Generator(device=torch_device).manual_seed(seed)
        shape = (self.num_blocks, self.block_size, num_kv_heads, head_dim)
        query = torch.randn(self.num_running, num_heads, head_dim, generator=gen, device=torch_device)
        k_cache = torch.randn(shape, generator=gen, device=torch_device)
        v_cache = torch.randn(shape, generator=gen, device=torch_device)
        starts = torch.tensor(config.window_starts) if self.window is not None else None
        covered = context_mask(self.block_tables, self.context_lens, self.num_blocks, self.block_size, starts)
        fill_uncovered(k_cache, v_cache, covered)
        # DecodeInputs.pool_owner names batch rows, not seq_ids.
        row_of = {s: i for i, s in enumerate(self.seq_ids.tolist())}
        owner_rows = torch.tensor([row_of.get(s, FREE) for s in self.pool_owner.tolist()], dtype=torch.int64)
        dt = config.torch_dtype
        return DecodeInputs(
            query=query.to(dt), k_cache=k_cache.to(dt), v_cache=v_cache.to(dt),
            block_tables=self.block_tables.to(torch_device),
            context_lens=self.context_lens.to(torch_device),
            pool_owner=owner_rows, config=config,
        )


def metrics_frame(snapshots: Sequence[Snapshot]) -> pd.DataFrame:
    """One row of :meth:`Snapshot.metrics` per snapshot, columns :data:`METRIC_COLUMNS`."""
    return pd.DataFrame([s.metrics() for s in snapshots], columns=list(METRIC_COLUMNS))
