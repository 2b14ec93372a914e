"""A simulator of decode traffic over a paged KV cache.

What the block table and ``context_lens`` of a decode step look like after many
requests have come and gone. :class:`ServingSimulator` drives a
:class:`~explorer.serving.block_manager.BlockManager` with Poisson arrivals of requests whose
prompt and output lengths follow a :class:`~explorer.serving.traffic.LengthDist` and records a
:class:`~explorer.serving.snapshot.Snapshot` after every step.
:func:`~explorer.serving.tradeoff.block_size_tradeoff` replays the same request stream at
several block sizes to show the price of large blocks: slots allocated but not yet
filled in each sequence's last block (internal fragmentation).

Scheduling policy
-----------------
Each step admits waiting requests first-come first-served, then decodes one token
for every running sequence, then frees the blocks of sequences that are done.

* A request is admitted only if a batch slot is free (``max_batch_size``), its
  prompt blocks are free, and the pool stays *safe* (below). The queue is strict
  FIFO: if the oldest waiting request does not fit, no later one jumps it.
* A running sequence that needs a new block gets one only if the pool stays
  safe; otherwise it waits this step (it is *stalled*) and tries again next step.
* There is no preemption. Instead the pool is kept safe in the sense of the
  banker's algorithm: there is an order in which every running sequence can
  grow to its full length (``prompt_len + output_len``) and finish, each using
  the free blocks plus those its predecessors in the order have released. In a
  safe state the first sequence of that order can always take a block, so at
  least one sequence decodes every step and the simulator never deadlocks.

The safety test needs each request's output length, which a real engine does not
know in advance. vLLM instead admits optimistically and, when the pool runs dry,
preempts a sequence (frees its blocks and recomputes it later). The simulator
avoids preemption so that a sequence's block table only ever grows, which keeps
the pictures readable.

Sharing
-------
With a common system prompt (``ServingConfig.system_prompt`` tokens that every
request's prompt starts with) or n samples per request (``samples``), the block
manager shares: the first sample is prefilled with its prompt's token ids, so the
system prompt's full blocks are found in the prefix cache after the first request;
the other samples are forked from it; a sample's first token written into a shared
partly filled block copies it (copy-on-write). A request's n samples are admitted
together and take n batch slots. The safety test then counts as released by a
sequence only the blocks it holds alone, and one copy-on-write block more for a
sequence whose last block is shared: both err on the safe side. Snapshots also
carry ``blocks_unshared``, the blocks the same running sequences would hold
without sharing. Without either option (``system_prompt=0, samples=1``) nothing is
shared and the simulator is exactly the plain one.

Sliding window
--------------
With ``ServingConfig.window`` and ``free_window`` on, every step ends by freeing
each running sequence's blocks before its window
(:meth:`~explorer.serving.block_manager.BlockManager.free_out_of_window`): its
table keeps ``-1`` there, and it holds at most ``ceil(window / block_size) + 1``
blocks whatever its length. The safety test then counts as a sequence's need the
most blocks it will hold at once (:func:`~explorer.serving.window.peak_held`)
less those it holds, and releases only at its end: both err on the safe side.
"""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import torch

from explorer.serving.block_manager import BlockManager, blocks_for, check_int
from explorer.serving.snapshot import (
    METRIC_COLUMNS,
    PoolChanges,
    Snapshot,
    metrics_frame,
)
from explorer.serving.traffic import LENGTH_KINDS, LengthDist, Request, ServingConfig
from explorer.serving.window import freed_entries, peak_held

# The traffic (explorer.serving.traffic) and the snapshot (explorer.serving.snapshot)
# are re-exported: a simulation is written with these names from this module.
__all__ = [
    "LENGTH_KINDS", "METRIC_COLUMNS", "LengthDist", "Request", "ServingConfig", "ServingSimulator", "Snapshot",
    "metrics_frame",
]

# -- the simulator ---------------------------------------------------------------

class ServingSimulator:
    """Decode traffic over a paged KV cache, one step at a time.

    See the module docstring for the scheduling policy.

    Parameters
    ----------
    config : ServingConfig
        Pool, batch limit and traffic.

    Raises
    ------
    ValueError
        If ``config`` breaks a rule of :meth:`ServingConfig.validate`.

    Examples
    --------
    >>> sim = ServingSimulator(ServingConfig(num_blocks=256, block_size=16))
    >>> frame = metrics_frame(sim.run(100))
    """

    def __init__(self, config: ServingConfig) -> None:
        self.config = config.validate()
        self.blocks = BlockManager(config.num_blocks, config.block_size)
        # Only arrivals draw from this generator, a fixed number of draws per step,
        # so the request stream is independent of the pool and of the block size.
        self._rng = np.random.default_rng(config.seed)
        self.step_index = 0
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished: list[Request] = []
        self._next_id = 0
        # Blocks the running sequences will still take before they finish: the sum
        # of the needs in _claims(), kept up to date for the safety fast path (plain
        # pools only: with sharing a sibling's copy-on-write changes another's need).
        self._outstanding = 0
        # Sharing: the samples' own output lengths come from a second generator, so
        # the arrivals and first lengths are those of the same seed without samples;
        # token ids past the system prompt's are fresh, never matched by the cache.
        self._sample_rng = np.random.default_rng([config.seed, 1])
        self._fresh_tokens = itertools.count(config.system_prompt)
        self._prompts: dict[int, list[int]] = {}  # seq_id of a waiting request -> its prompt's token ids
        # The step's pool changes (see PoolChanges), and the blocks any sequence has held so far.
        self._changes: dict[str, list[int]] = {}
        self._ever_held = np.zeros(config.num_blocks, dtype=bool)

    # -- traffic -------------------------------------------------------------
    def submit(self, prompt_len: int, output_len: int) -> Request:
        """Queue a request by hand (on top of the random arrivals).

        Raises
        ------
        ValueError
            If a length is not a positive integer, or the request could never fit
            the pool.
        """
        check_int("prompt_len", prompt_len, 1)
        check_int("output_len", output_len, 1)
        need = blocks_for(prompt_len + output_len, self.config.block_size)
        if need > self.config.num_blocks:
            raise ValueError(
                f"a request of {prompt_len + output_len} tokens needs {need} blocks; the pool has "
                f"{self.config.num_blocks}"
            )
        if self.config.shares:
            return self._submit_shared(int(prompt_len), int(output_len))
        request = Request(self._next_id, self.step_index, int(prompt_len), int(output_len))
        self._next_id += 1
        self.waiting.append(request)
        return request

    def _submit_shared(self, prompt_len: int, output_len: int) -> Request:
        """A request of ``samples`` sequences whose prompt is the system prompt and
        ``prompt_len`` tokens of its own."""
        full = self.config.system_prompt + prompt_len
        outputs = [output_len, *self.config.output_len.sample(self._sample_rng, self.config.samples - 1).tolist()]
        first, *rest = [Request(self._next_id + i, self.step_index, full, int(o)) for i, o in enumerate(outputs)]
        self._next_id += len(outputs)
        first.siblings = rest
        self.waiting.append(first)
        return first

    def _arrivals(self) -> int:
        count = int(self._rng.poisson(self.config.arrival_rate))
        prompts = self.config.prompt_len.sample(self._rng, count)
        outputs = self.config.output_len.sample(self._rng, count)
        for p, o in zip(prompts.tolist(), outputs.tolist()):
            self.submit(p, o)
        return count

    # -- safety (banker's algorithm, one resource: blocks) -------------------
    def _claims(self) -> list[tuple[int, int]]:
        """``(held, still_needed)`` blocks of every running sequence.

        ``held`` counts the blocks the sequence alone holds (what finishing releases
        for sure); ``still_needed`` adds a copy-on-write block when its last block is
        shared and partly filled. Without sharing: its blocks, and the blocks it
        will still append.
        """
        bs = self.config.block_size
        refs = self.blocks.ref_counts
        claims = []
        for r in self.running:
            table = self.blocks.block_tables[r.seq_id]
            held = table[freed_entries(table):]
            cow = int(r.context_len % bs != 0 and refs[table[-1]] > 1)
            claims.append((int((refs[held] == 1).sum()), self._growth(r.context_len, r.final_len, len(held)) + cow))
        return claims

    def _growth(self, context_len: int, final_len: int, held: int) -> int:
        """Blocks a sequence holding ``held`` blocks at ``context_len`` tokens may
        still take before it reaches ``final_len``: all its blocks, or with window
        freeing the most it holds at once (never below 0)."""
        bs = self.config.block_size
        if not self.config.frees_window:
            return blocks_for(final_len, bs) - held
        return max(0, peak_held(context_len, final_len, self.config.window, bs) - held)

    @property
    def _counts_outstanding(self) -> bool:
        """Whether :attr:`_outstanding` is kept (no sharing, no window freeing)."""
        return not (self.config.shares or self.config.frees_window)

    @staticmethod
    def _is_safe(free: int, claims: list[tuple[int, int]]) -> bool:
        """Whether every claim can be met in some order.

        A sequence that gets all it still needs finishes and releases everything
        it holds, so serving the smallest need first is never worse than any other
        order.
        """
        for held, need in sorted(claims, key=lambda c: c[1]):
            if need > free:
                return False
            free += held
        return True

    def _prompt_tokens(self, request: Request) -> list[int]:
        """The token ids of ``request``'s prompt: the system prompt's, then fresh ones
        (drawn once, on the first call)."""
        if request.seq_id not in self._prompts:
            own = request.prompt_len - self.config.system_prompt
            self._prompts[request.seq_id] = [*range(self.config.system_prompt),
                                             *itertools.islice(self._fresh_tokens, own)]
        return self._prompts[request.seq_id]

    def _can_admit_shared(self, request: Request) -> bool:
        """Whether ``request`` and its samples may start now (sharing)."""
        if len(self.running) + 1 + len(request.siblings) > self.config.max_batch_size:
            return False
        bs = self.config.block_size
        taken = self.blocks.blocks_needed(tokens=self._prompt_tokens(request))
        if not self.blocks.can_allocate(taken):
            return False
        prompt_blocks = blocks_for(request.prompt_len, bs)
        cow = int(request.prompt_len % bs != 0 and request.siblings != [])
        # The new samples hold nothing alone yet: counting no release is safe.
        new = [(0, self._growth(r.prompt_len, r.final_len, prompt_blocks) + cow) for r in (request, *request.siblings)]
        return self._is_safe(self.blocks.num_free - taken, self._claims() + new)

    def _can_admit(self, request: Request) -> bool:
        if self.config.shares:
            return self._can_admit_shared(request)
        bs = self.config.block_size
        prompt_blocks = blocks_for(request.prompt_len, bs)
        if not self.blocks.can_allocate(prompt_blocks):
            return False
        need = self._growth(request.prompt_len, request.final_len, prompt_blocks)
        free_after = self.blocks.num_free - prompt_blocks
        # Fast path: the free blocks cover every claim at once, so any order works.
        if not self.config.frees_window and free_after >= self._outstanding + need:
            return True
        return self._is_safe(free_after, self._claims() + [(prompt_blocks, need)])

    def _can_grant(self, index: int) -> bool:
        """Whether running sequence ``index`` may take one block now."""
        free = self.blocks.num_free
        if free == 0:
            return False
        if self._counts_outstanding and free >= self._outstanding:  # the fast path of _can_admit, after the grant
            return True
        claims = self._claims()
        held, need = claims[index]
        claims[index] = (held + 1, need - 1)
        return self._is_safe(free - 1, claims)

    # -- pool changes ----------------------------------------------------------
    def _took(self, blocks, *, copied: bool = False) -> None:
        """Note ``blocks``, just taken from the free list for new tokens."""
        for block in blocks:
            self._changes["taken"].append(block)
            if self._ever_held[block]:
                self._changes["recycled"].append(block)
            if copied:
                self._changes["copied"].append(block)
            self._ever_held[block] = True

    def _free(self, seq_id: int) -> None:
        """Free ``seq_id`` and note the blocks whose last reference it held."""
        table = self.blocks.block_tables[seq_id]
        self.blocks.free(seq_id)
        refs = self.blocks.ref_counts
        self._changes["freed"].extend(b for b in table if refs[b] == 0)

    def _admit(self, request: Request) -> None:
        """Prefill ``request`` (and fork its samples), noting the blocks it took."""
        bm = self.blocks
        if not self.config.shares:
            table = bm.allocate(request.seq_id, request.prompt_len)
            self._took(table)
            self._outstanding += blocks_for(request.final_len, self.config.block_size) - len(table)
            return
        hits = bm.prefix_hits
        table = bm.allocate(request.seq_id, tokens=self._prompt_tokens(request))
        del self._prompts[request.seq_id]
        hits = bm.prefix_hits - hits  # the table's first `hits` blocks were found in the cache
        # A hit whose count is now 1 was a cached block on the free list; the others were in use already.
        self._changes["revived"].extend(b for b in table[:hits] if bm.ref_counts[b] == 1)
        self._took(table[hits:])
        for sibling in request.siblings:
            bm.fork(request.seq_id, sibling.seq_id)

    # -- one step ------------------------------------------------------------
    def step(self) -> Snapshot:
        """Advance one step: arrivals, admission, one decode token per running
        sequence, frees. Returns the snapshot after it."""
        self._changes = {name: [] for name in ("taken", "recycled", "copied", "revived", "freed")}
        arrived = self._arrivals()

        admitted = 0
        while self.waiting and len(self.running) < self.config.max_batch_size:
            if not self._can_admit(self.waiting[0]):
                break  # strict FIFO: nobody overtakes the oldest waiting request
            request = self.waiting.popleft()
            self._admit(request)
            for sample in (request, *request.siblings):
                sample.admitted_step = self.step_index
                self.running.append(sample)
            admitted += 1

        decoded = stalled = 0
        index = 0
        while index < len(self.running):
            request = self.running[index]
            if self.blocks.needs_block(request.seq_id) and not self._can_grant(index):
                stalled += 1
                index += 1
                continue
            token = next(self._fresh_tokens) if self.config.shares else None
            copy = self.blocks.context_lens[request.seq_id] % self.config.block_size != 0  # a block now is a copy
            block = self.blocks.append_token(request.seq_id, token)
            if block is not None:
                self._outstanding -= 1
                self._took([block], copied=copy)
            request.generated += 1
            decoded += 1
            if request.generated == request.output_len:
                # Free at once, so sequences later in this step can use the blocks.
                self._free(request.seq_id)
                request.finished_step = self.step_index
                self.finished.append(self.running.pop(index))
            else:
                index += 1
        if self.config.frees_window:
            for request in self.running:
                self._changes["freed"].extend(self.blocks.free_out_of_window(request.seq_id, self.config.window))

        changes = PoolChanges(**{name: tuple(map(int, blocks)) for name, blocks in self._changes.items()})
        snapshot = self.snapshot(arrived=arrived, admitted=admitted, decoded=decoded, stalled=stalled,
                                 changes=changes)
        self.step_index += 1
        return snapshot

    def run(self, num_steps: int) -> list[Snapshot]:
        """Run ``num_steps`` steps.

        Returns
        -------
        list of Snapshot
            One per step; :func:`~explorer.serving.snapshot.metrics_frame` turns them into a
            DataFrame.

        Raises
        ------
        ValueError
            If ``num_steps`` is negative.
        """
        check_int("num_steps", num_steps, 0)
        return [self.step() for _ in range(num_steps)]

    def snapshot(
        self, *, arrived: int = 0, admitted: int = 0, decoded: int = 0, stalled: int = 0,
        changes: PoolChanges | None = None,
    ) -> Snapshot:
        """The current state as a :class:`Snapshot` (``changes``: the step's pool
        changes, none by default).

        :meth:`step` calls this before counting the step, so its snapshot's ``step``
        is the step just run; called between steps, ``step`` is the number of steps
        run so far (0 for the empty pool before the first step).
        """
        ids = [r.seq_id for r in self.running]
        bm, bs = self.blocks, self.config.block_size
        lens = [bm.context_lens[s] for s in ids]
        sharing = {}
        if self.config.shares or self.config.frees_window:
            # Slots holding a token, each counted once however many sequences read it (freed entries: none).
            fill = np.zeros(self.config.num_blocks, dtype=np.int64)
            for s, n in zip(ids, lens):
                table = np.asarray(bm.block_tables[s])
                held = table >= 0
                np.maximum.at(fill, table[held], np.clip(n - bs * np.flatnonzero(held), 0, bs))
            sharing = dict(filled_slots=int(fill.sum()))
        if self.config.shares:
            unshared = sum(len(t) - freed_entries(t) for t in map(bm.block_tables.get, ids))
            sharing.update(blocks_unshared=unshared, cow_copies=bm.cow_copies, prefix_hits=bm.prefix_hits,
                           prefix_queries=bm.prefix_queries)
        return Snapshot(
            step=self.step_index,
            block_size=self.config.block_size,
            num_blocks=self.config.num_blocks,
            seq_ids=torch.tensor(ids, dtype=torch.int64),
            block_tables=self.blocks.block_table(ids),
            context_lens=torch.tensor(lens, dtype=torch.int32),
            pool_owner=self.blocks.pool_owner(),
            arrived=arrived, admitted=admitted, decoded=decoded, stalled=stalled,
            waiting=len(self.waiting), finished=len(self.finished), changes=changes or PoolChanges(),
            window=self.config.window, **sharing,
        )

    def check_invariants(self) -> None:
        """Check the block manager and the scheduler's view of it.

        Raises
        ------
        AssertionError
            Naming the broken invariant: those of
            :meth:`BlockManager.check_invariants`, plus: the live sequences are
            exactly the running ones (no waiting or finished sequence holds a
            block, so no live table points at a freed block); each running
            sequence's ``context_lens`` is ``prompt_len + generated`` and it has not
            yet generated ``output_len`` tokens; at most ``max_batch_size`` run; the
            pool is in a safe state, and the outstanding-need counter is right.
        """
        self.blocks.check_invariants()
        running = [r.seq_id for r in self.running]
        assert len(running) <= self.config.max_batch_size, (
            f"{len(running)} running sequences exceed max_batch_size {self.config.max_batch_size}"
        )
        assert set(running) == set(self.blocks.block_tables), (
            f"live sequences {sorted(self.blocks.block_tables)} are not the running ones {sorted(running)}"
        )
        for r in self.running:
            stored = self.blocks.context_lens[r.seq_id]
            assert stored == r.context_len, (
                f"sequence {r.seq_id}: context_lens says {stored}, prompt + generated is {r.context_len}"
            )
            assert r.generated < r.output_len, f"sequence {r.seq_id} is done but still running"
        claims = self._claims()
        assert not self._counts_outstanding or self._outstanding == sum(need for _, need in claims), (
            f"outstanding need {self._outstanding} != sum of claims {sum(need for _, need in claims)}"
        )
        assert self._is_safe(self.blocks.num_free, claims), "the pool is not in a safe state"
