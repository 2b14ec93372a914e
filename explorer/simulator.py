"""A serving engine's KV-cache block manager, and a simulator of decode traffic.

This is the memory side of paged attention, the part the decode kernel never sees:
who owns which physical block, and what the block table and ``context_lens`` of a
decode step look like after many requests have come and gone.

:class:`BlockManager` is the allocator of vLLM and nano-vllm reduced to its core: a
free list (a deque of physical block ids), a block table per live sequence, and
two operations. Prefill takes ``ceil(prompt_len / block_size)`` blocks at once;
decode appends one token and takes one more block only when the token lands at
position ``t`` with ``t % block_size == 0`` (the last block is full). A finished
sequence returns all its blocks.

:class:`ServingSimulator` drives it with Poisson arrivals of requests whose prompt
and output lengths follow a :class:`LengthDist` and records a :class:`Snapshot`
after every step. :func:`block_size_tradeoff` replays the same request stream at
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
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch

from paged_attention.inputs import FREE, LOUD_VALUE, DecodeInputs, context_mask
from paged_attention.config import DecodeConfig

LENGTH_KINDS: tuple[str, ...] = ("uniform", "long-tail")

#: Block sizes :func:`block_size_tradeoff` compares by default.
DEFAULT_BLOCK_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)

#: Columns of :func:`metrics_frame`, one row per step.
METRIC_COLUMNS: tuple[str, ...] = (
    "step", "running", "waiting", "arrived", "admitted", "decoded", "stalled", "finished",
    "blocks_in_use", "free_blocks", "tokens_stored", "wasted_slots", "wasted_fraction",
)

#: Columns of the table :func:`block_size_tradeoff` returns, one row per block size.
TRADEOFF_COLUMNS: tuple[str, ...] = (
    "block_size", "num_blocks", "mean_blocks_in_use", "peak_blocks_in_use",
    "mean_tokens_stored", "mean_wasted_slots", "wasted_fraction", "mean_running",
    "mean_waiting", "stalled", "finished", "busiest_step",
)


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {rule}; got {value!r}")


def blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks that hold ``num_tokens`` tokens: ``ceil(num_tokens / block_size)``."""
    return -(-num_tokens // block_size)


# -- traffic ---------------------------------------------------------------------

@dataclass(frozen=True)
class LengthDist:
    """Distribution of a request's prompt or output length, in tokens.

    Parameters
    ----------
    kind : str
        ``"uniform"``: every integer in ``[low, high]`` equally likely.
        ``"long-tail"``: log-normal, clipped to ``[low, high]``: most requests are
        short and a few are long, as in chat traffic.
    low, high : int
        Inclusive range, ``1 <= low <= high``.
    median : float, optional
        Long-tail only: median before clipping. Default ``sqrt(low * high)``.
    sigma : float, optional
        Long-tail only: standard deviation of ``log(length)``. Default
        ``log(high / low) / 4``, so about 95% of draws fall inside the range
        before clipping.

    Examples
    --------
    >>> LengthDist("long-tail", 16, 2048).sample(np.random.default_rng(0), 3)
    """

    kind: str = "uniform"
    low: int = 16
    high: int = 256
    median: float | None = None
    sigma: float | None = None

    def validate(self, name: str = "length", *, low: str = "low", high: str = "high") -> "LengthDist":
        """Check the rules and return ``self``.

        ``name``, ``low`` and ``high`` are what the messages call the distribution
        and its bounds (an app passes its own labels).

        Raises
        ------
        ValueError
            Naming ``name`` and the broken rule.
        """
        if self.kind not in LENGTH_KINDS:
            raise ValueError(f"{name} kind must be one of {', '.join(LENGTH_KINDS)}; got {self.kind!r}")
        _check_int(f"{name} {low}", self.low, 1)
        _check_int(f"{name} {high}", self.high, 1)
        if self.low > self.high:
            raise ValueError(f"{name} needs {low} <= {high}; got {low}={self.low}, {high}={self.high}")
        for param in ("median", "sigma"):
            value = getattr(self, param)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} {param} must be a finite positive number; got {value!r}")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` lengths.

        Returns
        -------
        ndarray
            ``[n]`` int64, each in ``[low, high]``.
        """
        if self.kind == "uniform":
            return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)
        median = self.median if self.median is not None else math.sqrt(self.low * self.high)
        sigma = self.sigma if self.sigma is not None else math.log(self.high / self.low) / 4
        draws = np.exp(rng.normal(math.log(median), sigma, size=n))
        return np.clip(np.rint(draws), self.low, self.high).astype(np.int64)


@dataclass(frozen=True)
class ServingConfig:
    """A KV-cache pool and the traffic that uses it.

    Parameters
    ----------
    num_blocks : int
        Physical blocks in the pool.
    block_size : int
        Tokens per block.
    max_batch_size : int
        Most sequences running (decoding) at once.
    arrival_rate : float
        Mean new requests per step (Poisson), ``>= 0``.
    prompt_len, output_len : LengthDist
        Tokens a request brings, and tokens it generates before it finishes.
    seed : int
        Seeds the request stream: arrivals and lengths depend on it alone, never on
        the pool, so two configs that differ only in ``num_blocks``,
        ``block_size`` or ``max_batch_size`` see the same requests.
    """

    num_blocks: int = 1024
    block_size: int = 16
    max_batch_size: int = 32
    arrival_rate: float = 0.2
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist("long-tail", 16, 2048))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("long-tail", 8, 1024))
    seed: int = 0

    @property
    def max_request_blocks(self) -> int:
        """Blocks the longest possible request holds when it finishes."""
        return blocks_for(self.prompt_len.high + self.output_len.high, self.block_size)

    def validate(self, labels: Mapping[str, str] | None = None) -> "ServingConfig":
        """Check every rule and return ``self``.

        Parameters
        ----------
        labels : mapping, optional
            What the messages call each field (``"num_blocks"``, ``"block_size"``,
            ``"max_batch_size"``, ``"arrival_rate"``, ``"seed"``, ``"prompt_len"``,
            ``"output_len"``) and the bounds of a length (``"low"``, ``"high"``);
            by default their names here. An app passes the labels of its controls.

        Raises
        ------
        ValueError
            Naming the field and the rule it breaks; in particular the pool must
            hold the longest possible request on its own, else that request could
            never be admitted and would block the FIFO queue forever.
        """
        labels = labels or {}

        def name(key: str) -> str:
            return labels.get(key, key)

        _check_int(name("num_blocks"), self.num_blocks, 1)
        _check_int(name("block_size"), self.block_size, 1)
        _check_int(name("max_batch_size"), self.max_batch_size, 1)
        _check_int(name("seed"), self.seed, 0)
        rate = self.arrival_rate
        is_number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        if not (is_number and math.isfinite(rate) and rate >= 0):
            raise ValueError(f"{name('arrival_rate')} must be a finite number >= 0; got {rate!r}")
        bounds = dict(low=name("low"), high=name("high"))
        self.prompt_len.validate(name("prompt_len"), **bounds)
        self.output_len.validate(name("output_len"), **bounds)
        if self.max_request_blocks > self.num_blocks:
            raise ValueError(
                f"the pool must hold the longest request: {name('prompt_len')} {name('high')} + "
                f"{name('output_len')} {name('high')} = {self.prompt_len.high + self.output_len.high} tokens "
                f"need {self.max_request_blocks} blocks ({name('block_size')} = {self.block_size}), but "
                f"{name('num_blocks')} = {self.num_blocks}"
            )
        return self


@dataclass
class Request:
    """One request's lengths and progress.

    ``context_len = prompt_len + generated`` tokens are in the KV cache while it
    runs; it finishes when ``generated == output_len``.
    """

    seq_id: int
    arrival_step: int
    prompt_len: int
    output_len: int
    generated: int = 0
    admitted_step: int | None = None
    finished_step: int | None = None

    @property
    def context_len(self) -> int:
        return self.prompt_len + self.generated

    @property
    def final_len(self) -> int:
        return self.prompt_len + self.output_len


# -- the block manager ---------------------------------------------------------

class BlockManager:
    """Free list and block tables of a paged KV cache.

    Parameters
    ----------
    num_blocks : int
        Physical blocks in the pool, ids ``0 .. num_blocks - 1``.
    block_size : int
        Tokens per block.

    Attributes
    ----------
    free_blocks : deque of int
        The free list. Blocks are taken from the left and returned on the right,
        so a freed block is reused last; after some churn a new sequence's blocks
        are scattered over the pool, which is exactly what the block table is for.
    block_tables : dict
        ``seq_id -> list`` of physical block ids, in logical order.
    context_lens : dict
        ``seq_id ->`` tokens stored.

    Raises
    ------
    ValueError
        If ``num_blocks`` or ``block_size`` is not a positive integer.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        _check_int("num_blocks", num_blocks, 1)
        _check_int("block_size", block_size, 1)
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.free_blocks: deque[int] = deque(range(self.num_blocks))
        self.block_tables: dict[int, list[int]] = {}
        self.context_lens: dict[int, int] = {}
        # Reverse map of the block tables, kept so a snapshot is one array copy.
        self._owner = np.full(self.num_blocks, FREE, dtype=np.int64)

    @property
    def num_free(self) -> int:
        return len(self.free_blocks)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_blocks)

    def _take(self, seq_id: int) -> int:
        block = self.free_blocks.popleft()
        self._owner[block] = seq_id
        self.block_tables[seq_id].append(block)
        return block

    def allocate(self, seq_id: int, num_tokens: int) -> list[int]:
        """Prefill: store ``num_tokens`` tokens of a new sequence.

        Returns
        -------
        list of int
            The ``ceil(num_tokens / block_size)`` physical blocks taken, in order.

        Raises
        ------
        ValueError
            If ``seq_id`` is already live or ``num_tokens < 1``.
        RuntimeError
            If the free list holds too few blocks (check :meth:`can_allocate` first).
        """
        if seq_id in self.block_tables:
            raise ValueError(f"sequence {seq_id} already holds blocks")
        _check_int("num_tokens", num_tokens, 1)
        needed = blocks_for(num_tokens, self.block_size)
        if needed > self.num_free:
            raise RuntimeError(f"sequence {seq_id} needs {needed} blocks but {self.num_free} are free")
        self.block_tables[seq_id] = []
        self.context_lens[seq_id] = int(num_tokens)
        return [self._take(seq_id) for _ in range(needed)]

    def can_allocate(self, num_blocks: int) -> bool:
        return num_blocks <= self.num_free

    def needs_block(self, seq_id: int) -> bool:
        """Whether the next token of ``seq_id`` starts a new block.

        The token goes to position ``t = context_len``; its block is new when
        ``t % block_size == 0``, i.e. when the last block is full.
        """
        return self.context_lens[seq_id] % self.block_size == 0

    def append_token(self, seq_id: int) -> int | None:
        """Decode: store one more token of ``seq_id``.

        Returns
        -------
        int or None
            The physical block taken, or ``None`` if the token fit in the last block.

        Raises
        ------
        RuntimeError
            If a new block is needed and the free list is empty.
        """
        block = None
        if self.needs_block(seq_id):
            if not self.free_blocks:
                raise RuntimeError(f"sequence {seq_id} needs a block but the free list is empty")
            block = self._take(seq_id)
        self.context_lens[seq_id] += 1
        return block

    def free(self, seq_id: int) -> None:
        """Return every block of ``seq_id`` to the free list and forget it."""
        for block in self.block_tables.pop(seq_id):
            self._owner[block] = FREE
            self.free_blocks.append(block)
        del self.context_lens[seq_id]

    # -- views ---------------------------------------------------------------
    def pool_owner(self) -> torch.Tensor:
        """``[num_blocks]`` int64: the ``seq_id`` owning each block, ``-1`` if free."""
        return torch.from_numpy(self._owner.copy())

    def block_table(self, seq_ids: Sequence[int]) -> torch.Tensor:
        """Dense block table of ``seq_ids``.

        Returns
        -------
        Tensor
            ``[len(seq_ids), max_blocks]`` int32, ``max_blocks`` the most blocks any
            of them holds (at least 1), ``-1`` past each sequence's last block.
        """
        rows = [self.block_tables[s] for s in seq_ids]
        width = max([1, *map(len, rows)])
        # Built in NumPy: small torch ops cost more in dispatch than in work.
        table = np.full((len(rows), width), -1, dtype=np.int32)
        for i, row in enumerate(rows):
            table[i, : len(row)] = row
        return torch.from_numpy(table)

    def check_invariants(self) -> None:
        """Check the allocator's bookkeeping.

        Raises
        ------
        AssertionError
            Naming the first broken invariant: every block is free or owned by
            exactly one live sequence (``free + owned == num_blocks``, no duplicates,
            ids in range); the owner map agrees with the free list and the block
            tables; each sequence holds exactly ``ceil(context_len / block_size)``
            blocks.
        """
        free = list(self.free_blocks)
        owned = [b for table in self.block_tables.values() for b in table]
        assert len(free) + len(owned) == self.num_blocks, (
            f"conservation: {len(free)} free + {len(owned)} owned != num_blocks {self.num_blocks}"
        )
        everything = free + owned
        assert all(0 <= b < self.num_blocks for b in everything), "a block id lies outside the pool"
        assert len(set(everything)) == self.num_blocks, (
            "a block is listed twice (free and owned, or owned twice)"
        )
        # With no duplicates, the owner map must be exactly the inverse of the tables.
        expected = np.full(self.num_blocks, FREE, dtype=np.int64)
        for seq_id, table in self.block_tables.items():
            expected[table] = seq_id
        wrong = np.flatnonzero(expected != self._owner)
        assert wrong.size == 0, (
            f"pool owner of block {wrong[0]} is {self._owner[wrong[0]]}, but the free list and "
            f"block tables say {expected[wrong[0]]}" if wrong.size else ""
        )
        assert self.block_tables.keys() == self.context_lens.keys(), (
            "block tables and context_lens name different sequences"
        )
        for seq_id, table in self.block_tables.items():
            n = self.context_lens[seq_id]
            assert n >= 1, f"live sequence {seq_id} stores {n} tokens"
            assert len(table) == blocks_for(n, self.block_size), (
                f"sequence {seq_id} stores {n} tokens in {len(table)} blocks; "
                f"expected ceil({n}/{self.block_size}) = {blocks_for(n, self.block_size)}"
            )


# -- snapshots -------------------------------------------------------------------

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
        ``[num_running, max_blocks]`` int32, ``-1`` padding.
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
        return self.blocks_in_use * self.block_size - self.tokens_stored

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
            spare_blocks=self.num_blocks - self.blocks_in_use,
        ).validate()

    def decode_inputs(
        self, *, num_heads: int = 32, num_kv_heads: int = 8, head_dim: int = 128,
        dtype: str = "float16", device: str = "cpu", seed: int = 0,
    ) -> DecodeInputs:
        """Random query and K/V cache for a decode step over this snapshot's batch.

        Like :func:`~paged_attention.inputs.build_decode_inputs`, but with this
        step's block table: covered slots are standard normal, every other slot
        (free blocks, unfilled tails) holds :data:`~paged_attention.inputs.LOUD_VALUE`.
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
        filled = context_mask(self.block_tables, self.context_lens, self.num_blocks, self.block_size)
        filled = filled.to(torch_device)
        k_cache[~filled] = LOUD_VALUE
        v_cache[~filled] = LOUD_VALUE
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
        # of the needs in _claims(), kept up to date for the safety fast path.
        self._outstanding = 0

    # -- traffic -------------------------------------------------------------
    def submit(self, prompt_len: int, output_len: int) -> Request:
        """Queue a request by hand (on top of the random arrivals).

        Raises
        ------
        ValueError
            If a length is not a positive integer, or the request could never fit
            the pool.
        """
        _check_int("prompt_len", prompt_len, 1)
        _check_int("output_len", output_len, 1)
        need = blocks_for(prompt_len + output_len, self.config.block_size)
        if need > self.config.num_blocks:
            raise ValueError(
                f"a request of {prompt_len + output_len} tokens needs {need} blocks; the pool has "
                f"{self.config.num_blocks}"
            )
        request = Request(self._next_id, self.step_index, int(prompt_len), int(output_len))
        self._next_id += 1
        self.waiting.append(request)
        return request

    def _arrivals(self) -> int:
        count = int(self._rng.poisson(self.config.arrival_rate))
        prompts = self.config.prompt_len.sample(self._rng, count)
        outputs = self.config.output_len.sample(self._rng, count)
        for p, o in zip(prompts.tolist(), outputs.tolist()):
            self.submit(p, o)
        return count

    # -- safety (banker's algorithm, one resource: blocks) -------------------
    def _claims(self) -> list[tuple[int, int]]:
        """``(held, still_needed)`` blocks of every running sequence."""
        bs = self.config.block_size
        return [
            (len(self.blocks.block_tables[r.seq_id]),
             blocks_for(r.final_len, bs) - len(self.blocks.block_tables[r.seq_id]))
            for r in self.running
        ]

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

    def _can_admit(self, request: Request) -> bool:
        bs = self.config.block_size
        prompt_blocks = blocks_for(request.prompt_len, bs)
        if not self.blocks.can_allocate(prompt_blocks):
            return False
        need = blocks_for(request.final_len, bs) - prompt_blocks
        free_after = self.blocks.num_free - prompt_blocks
        # Fast path: the free blocks cover every claim at once, so any order works.
        if free_after >= self._outstanding + need:
            return True
        return self._is_safe(free_after, self._claims() + [(prompt_blocks, need)])

    def _can_grant(self, index: int) -> bool:
        """Whether running sequence ``index`` may take one block now."""
        free = self.blocks.num_free
        if free == 0:
            return False
        if free >= self._outstanding:  # the fast path of _can_admit, after the grant
            return True
        claims = self._claims()
        held, need = claims[index]
        claims[index] = (held + 1, need - 1)
        return self._is_safe(free - 1, claims)

    # -- one step ------------------------------------------------------------
    def step(self) -> Snapshot:
        """Advance one step: arrivals, admission, one decode token per running
        sequence, frees. Returns the snapshot after it."""
        arrived = self._arrivals()

        admitted = 0
        while self.waiting and len(self.running) < self.config.max_batch_size:
            if not self._can_admit(self.waiting[0]):
                break  # strict FIFO: nobody overtakes the oldest waiting request
            request = self.waiting.popleft()
            prompt_blocks = len(self.blocks.allocate(request.seq_id, request.prompt_len))
            self._outstanding += blocks_for(request.final_len, self.config.block_size) - prompt_blocks
            request.admitted_step = self.step_index
            self.running.append(request)
            admitted += 1

        decoded = stalled = 0
        index = 0
        while index < len(self.running):
            request = self.running[index]
            if self.blocks.needs_block(request.seq_id) and not self._can_grant(index):
                stalled += 1
                index += 1
                continue
            if self.blocks.append_token(request.seq_id) is not None:
                self._outstanding -= 1
            request.generated += 1
            decoded += 1
            if request.generated == request.output_len:
                # Free at once, so sequences later in this step can use the blocks.
                self.blocks.free(request.seq_id)
                request.finished_step = self.step_index
                self.finished.append(self.running.pop(index))
            else:
                index += 1

        snapshot = self.snapshot(arrived=arrived, admitted=admitted, decoded=decoded, stalled=stalled)
        self.step_index += 1
        return snapshot

    def run(self, num_steps: int) -> list[Snapshot]:
        """Run ``num_steps`` steps.

        Returns
        -------
        list of Snapshot
            One per step; :func:`metrics_frame` turns them into a DataFrame.

        Raises
        ------
        ValueError
            If ``num_steps`` is negative.
        """
        _check_int("num_steps", num_steps, 0)
        return [self.step() for _ in range(num_steps)]

    def snapshot(
        self, *, arrived: int = 0, admitted: int = 0, decoded: int = 0, stalled: int = 0
    ) -> Snapshot:
        """The current state as a :class:`Snapshot`.

        :meth:`step` calls this before counting the step, so its snapshot's ``step``
        is the step just run; called between steps, ``step`` is the number of steps
        run so far (0 for the empty pool before the first step).
        """
        ids = [r.seq_id for r in self.running]
        return Snapshot(
            step=self.step_index,
            block_size=self.config.block_size,
            num_blocks=self.config.num_blocks,
            seq_ids=torch.tensor(ids, dtype=torch.int64),
            block_tables=self.blocks.block_table(ids),
            context_lens=torch.tensor([self.blocks.context_lens[s] for s in ids], dtype=torch.int32),
            pool_owner=self.blocks.pool_owner(),
            arrived=arrived, admitted=admitted, decoded=decoded, stalled=stalled,
            waiting=len(self.waiting), finished=len(self.finished),
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
        assert self._outstanding == sum(need for _, need in claims), (
            f"outstanding need {self._outstanding} != sum of claims {sum(need for _, need in claims)}"
        )
        assert self._is_safe(self.blocks.num_free, claims), "the pool is not in a safe state"


# -- block size trade-off ------------------------------------------------------

class TradeoffResult(NamedTuple):
    """What :func:`block_size_tradeoff` returns.

    Attributes
    ----------
    table : DataFrame
        One row per block size, columns :data:`TRADEOFF_COLUMNS`.
    snapshots : dict
        ``block_size ->`` the :class:`Snapshot` of the busiest step (most tokens
        stored; earliest on ties), ready for
        :meth:`Snapshot.decode_inputs` and a decode kernel.
    """

    table: pd.DataFrame
    snapshots: dict[int, Snapshot]


def block_size_tradeoff(
    config: ServingConfig,
    block_sizes: Sequence[int] = DEFAULT_BLOCK_SIZES,
    steps: int = 200,
    *,
    pool_tokens: int | None = None,
) -> TradeoffResult:
    """Replay the same request stream at several block sizes.

    The pool keeps the same capacity in tokens (the same GPU memory), so block size
    ``b`` gets ``pool_tokens // b`` blocks. Larger blocks mean fewer block-table
    entries per sequence (fewer lookups in the kernel) but more slots wasted in
    each sequence's partly filled last block, up to ``block_size - 1`` each; under
    memory pressure that waste delays admissions.

    Parameters
    ----------
    config : ServingConfig
        Traffic (``arrival_rate``, lengths, ``seed``) and ``max_batch_size``; its
        ``num_blocks`` and ``block_size`` only set the default ``pool_tokens``.
    block_sizes : sequence of int
        Distinct positive block sizes.
    steps : int
        Steps to simulate per block size.
    pool_tokens : int, optional
        Pool capacity in tokens; ``config.num_blocks * config.block_size`` by default.

    Returns
    -------
    TradeoffResult
        ``table``: per block size, ``num_blocks``; ``mean_blocks_in_use`` and
        ``peak_blocks_in_use``; ``mean_tokens_stored``; ``mean_wasted_slots``;
        ``wasted_fraction`` (wasted over allocated slots, summed over steps);
        ``mean_running``, ``mean_waiting``; ``stalled`` (sequence-steps spent
        waiting for a block); ``finished`` (requests done); ``busiest_step``.
        ``snapshots``: the busiest step's snapshot per block size.

    Raises
    ------
    ValueError
        If ``block_sizes`` is empty or holds a repeated or non-positive value,
        ``steps < 1``, or a block size leaves a pool too small for the longest
        request (see :meth:`ServingConfig.validate`).
    """
    _check_int("steps", steps, 1)
    sizes = list(block_sizes)
    if not sizes:
        raise ValueError("block_sizes must not be empty")
    for b in sizes:
        _check_int("each block size", b, 1)
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"block_sizes must be distinct; got {sizes}")
    if pool_tokens is None:
        pool_tokens = config.num_blocks * config.block_size
    _check_int("pool_tokens", pool_tokens, 1)

    configs = []
    for b in sizes:
        candidate = replace(config, block_size=int(b), num_blocks=pool_tokens // b)
        try:
            configs.append(candidate.validate())
        except ValueError as err:
            raise ValueError(f"block_size {b} with pool_tokens {pool_tokens}: {err}") from None

    rows, busiest = [], {}
    for cfg in configs:
        sim = ServingSimulator(cfg)
        best: Snapshot | None = None
        metrics = []
        for _ in range(steps):
            snap = sim.step()
            metrics.append(snap.metrics())
            # Keep only the busiest snapshot: a pool of pool_tokens blocks (block
            # size 1) makes every snapshot as large as the pool.
            if best is None or snap.tokens_stored > best.tokens_stored:
                best = snap
        frame = pd.DataFrame(metrics)
        allocated = (frame["blocks_in_use"] * cfg.block_size).sum()
        rows.append({
            "block_size": cfg.block_size,
            "num_blocks": cfg.num_blocks,
            "mean_blocks_in_use": frame["blocks_in_use"].mean(),
            "peak_blocks_in_use": int(frame["blocks_in_use"].max()),
            "mean_tokens_stored": frame["tokens_stored"].mean(),
            "mean_wasted_slots": frame["wasted_slots"].mean(),
            "wasted_fraction": frame["wasted_slots"].sum() / allocated if allocated else 0.0,
            "mean_running": frame["running"].mean(),
            "mean_waiting": frame["waiting"].mean(),
            "stalled": int(frame["stalled"].sum()),
            "finished": int(frame["finished"].iloc[-1]),
            "busiest_step": best.step,
        })
        busiest[cfg.block_size] = best
    return TradeoffResult(pd.DataFrame(rows, columns=list(TRADEOFF_COLUMNS)), busiest)
