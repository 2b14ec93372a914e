"""Decode-step configuration: the sizes a user picks, validated, with a memory estimate."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import torch

from .tiling import cdiv
from .validation import FP8_DTYPES, check_soft_cap, check_window

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
}

#: Per-dtype ``(atol, rtol)`` for comparing an implementation with the float64
#: reference. They bound the rounding of the inputs' own dtype in the last step
#: (output cast, P cast before the P·V product), not the accumulation, which is
#: float32 everywhere.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

#: 8-bit KV-cache dtypes by name (a cache of any other dtype has the query's dtype).
KV_DTYPES: dict[str, torch.dtype] = {str(d).removeprefix("torch."): d for d in FP8_DTYPES}

#: How an fp8 cache's scales are chosen: one per K (and V) tensor, or one per KV head.
KV_SCALES: tuple[str, ...] = ("per_tensor", "per_head")

BLOCK_LAYOUTS: tuple[str, ...] = ("contiguous", "shuffled", "fragmented")

#: Fields of DecodeConfig that hold whole numbers; NumPy integers become ``int``.
_INT_FIELDS: tuple[str, ...] = (
    "batch_size", "num_heads", "num_kv_heads", "head_dim", "block_size", "seed", "spare_blocks",
    "shared_prefix", "prefix_groups", "window",
)


def is_whole(value: object) -> bool:
    """True for a whole number of any integer type (``int``, ``np.int64``, any
    :class:`numbers.Integral`), False for a bool, a float or anything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _plain_int(value: object) -> object:
    return int(value) if is_whole(value) else value


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(atol, rtol)`` for outputs of ``dtype``.

    Raises
    ------
    ValueError
        If ``dtype`` is not float16, bfloat16 or float32.
    """
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise ValueError(
            f"dtype must be one of float16, bfloat16, float32; got {dtype}"
        ) from None


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Turn ``"float16"`` (or a ``torch.dtype``) into a supported ``torch.dtype``.

    Raises
    ------
    ValueError
        If the dtype is not float16, bfloat16 or float32.
    """
    if isinstance(dtype, torch.dtype):
        if dtype in TOLERANCES:
            return dtype
    elif dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")


@dataclass(frozen=True)
class DecodeConfig:
    """Sizes of one paged-attention decode step.

    Parameters
    ----------
    batch_size : int
        Number of sequences, each with one new query token.
    context_lens : int or sequence of int
        Cached tokens per sequence: one value for all, or ``batch_size`` values
        (a ragged batch, also a 1-D NumPy array). Zero is allowed and gives an
        all-zero output row. Integer fields take any integer type (``np.int64``
        too; stored as ``int``), never a bool or a float.
    num_heads : int
        Query heads.
    num_kv_heads : int
        Key/value heads; must divide ``num_heads`` (GQA; MQA when 1, MHA when equal).
    head_dim : int
        Size of each head, any value from 1 to 512 (powers of two are not required).
    block_size : int
        Tokens per physical KV-cache block.
    dtype : str
        ``"float16"``, ``"bfloat16"`` or ``"float32"``.
    device : str
        ``"cpu"`` or ``"cuda"`` (or ``"cuda:N"``).
    seed : int
        Seed for the random query, caches and block layout.
    block_layout : str
        How physical blocks are handed out: ``"contiguous"`` (in order),
        ``"shuffled"`` (a random permutation of the pool) or ``"fragmented"``
        (the free list left after sequences of mixed lengths were allocated and
        some of them freed).
    spare_blocks : int or None
        Physical blocks in the pool beyond those the batch needs. They hold loud
        values so that a read of a wrong block shows. ``None`` picks an eighth of
        the needed blocks (at least 1).
    kv_dtype : str or None
        How the KV cache is stored: ``None`` (or ``dtype`` itself) for the query's
        dtype, ``"float8_e4m3fn"`` or ``"float8_e5m2"`` for an 8-bit cache with
        dequantization scales (stored value * scale = value).
    kv_scale : str
        For an fp8 cache: ``"per_tensor"`` (one scale for K, one for V) or
        ``"per_head"`` (one per KV head), each the absolute maximum over the
        values it covers divided by the format's largest finite value.
    shared_prefix : int
        Tokens at the start of every sequence that its prefix group shares (a
        common system prompt, or parallel samples of one prompt), from 0 (nothing
        shared, the default) to the shortest context. The prefix's
        ``shared_prefix // block_size`` whole blocks are physically shared: every
        member's table holds the same block ids in those columns. The block that
        holds the prefix's last ``shared_prefix % block_size`` tokens, if any, is
        each sequence's own, as copy-on-write leaves it once the sequence appended
        a token; its first slots hold copies of the group's first member's K and V.
    prefix_groups : int
        How many groups of consecutive sequences share a prefix, 1 to
        ``batch_size``: sequence ``i`` is in group ``i * prefix_groups // batch_size``.
        Groups share nothing with each other.
    window : int or None
        Sliding-window attention: each query attends to the last ``window``
        positions of its context (an integer >= 1); ``None`` (default) to all.
    soft_cap : float or None
        Logit soft-capping of the scaled logits, ``soft_cap * tanh(s / soft_cap)``
        (a finite number > 0); ``None`` (default) for none.
    sinks : bool
        Attention sinks: one random logit per query head joins the softmax's
        denominator (see :func:`~paged_attention.inputs.build_decode_inputs`).
    query_lens : int or sequence of int
        New (query) tokens per sequence, already in the cache and counted in its
        context (draft tokens of speculative decoding): one value for all (each
        sequence takes at most its context, at least 1), or ``batch_size`` values
        with ``1 <= query_lens[b] <= max(1, context_lens[b])``. 1 (default) is
        the plain decode step; token ``i`` of sequence ``b`` attends causally to
        positions ``0 ... context_lens[b] - query_lens[b] + i``.
    """

    batch_size: int = 4
    context_lens: int | tuple[int, ...] = 512
    num_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 16
    dtype: str = "float16"
    device: str = "cpu"
    seed: int = 0
    block_layout: str = "shuffled"
    spare_blocks: int | None = field(default=None)
    kv_dtype: str | None = None
    kv_scale: str = "per_tensor"
    shared_prefix: int = 0
    prefix_groups: int = 1
    window: int | None = None
    soft_cap: float | None = None
    sinks: bool = False
    query_lens: int | tuple[int, ...] = 1

    def __post_init__(self) -> None:
        # Lists are unhashable; keep the config usable as a cache key. Whole numbers
        # of any integer type (np.int64 from NumPy code) become plain ints; anything
        # else is kept as given (not int()-truncated) so validate() can reject 1.5.
        for name in ("context_lens", "query_lens"):
            lens = getattr(self, name)
            if isinstance(lens, np.ndarray) and lens.ndim == 1:
                lens = lens.tolist()
            if isinstance(lens, (list, tuple)):
                lens = tuple(_plain_int(n) for n in lens)
            object.__setattr__(self, name, _plain_int(lens))
        for name in _INT_FIELDS:
            object.__setattr__(self, name, _plain_int(getattr(self, name)))
        if self.kv_dtype == self.dtype:  # a cache in the query's own dtype is the default
            object.__setattr__(self, "kv_dtype", None)

    # -- derived sizes ---------------------------------------------------------
    @property
    def lengths(self) -> tuple[int, ...]:
        """Context length of every sequence, ``batch_size`` values."""
        if isinstance(self.context_lens, tuple):
            return self.context_lens
        return (self.context_lens,) * self.batch_size

    @property
    def query_lengths(self) -> tuple[int, ...]:
        """Query tokens of every sequence, ``batch_size`` values (one value for all
        is capped at each context, and is at least 1)."""
        if isinstance(self.query_lens, tuple):
            return self.query_lens
        return tuple(max(1, min(self.query_lens, n)) for n in self.lengths)

    @property
    def num_query_tokens(self) -> int:
        """Rows of the query and the output: the sum of :attr:`query_lengths`."""
        return sum(self.query_lengths)

    @property
    def has_query_lens(self) -> bool:
        """True when a sequence brings more than one query token (or the lengths
        are given per sequence): the decode functions then take ``query_lens``."""
        return self.query_lens != 1

    @property
    def torch_dtype(self) -> torch.dtype:
        return resolve_dtype(self.dtype)

    @property
    def element_size(self) -> int:
        """Bytes per element of ``dtype`` (the query and output)."""
        return torch.empty((), dtype=self.torch_dtype).element_size()

    @property
    def is_fp8(self) -> bool:
        """True for an 8-bit KV cache."""
        return self.kv_dtype is not None

    @property
    def kv_torch_dtype(self) -> torch.dtype:
        """The KV cache's dtype: ``KV_DTYPES[kv_dtype]``, or the query's."""
        return KV_DTYPES[self.kv_dtype] if self.is_fp8 else self.torch_dtype

    @property
    def kv_element_size(self) -> int:
        """Bytes per stored K or V element (1 for fp8)."""
        return torch.empty((), dtype=self.kv_torch_dtype).element_size()

    @property
    def blocks_per_sequence(self) -> tuple[int, ...]:
        """Blocks each sequence's table lists: ``ceil(context_len / block_size)``
        (logical: a block shared by a prefix group counts in every member)."""
        return tuple(cdiv(n, self.block_size) for n in self.lengths)

    @property
    def max_num_blocks(self) -> int:
        """Columns of the block table (at least 1)."""
        return max(1, max(self.blocks_per_sequence, default=1))

    @property
    def prefix_group_of(self) -> tuple[int, ...]:
        """Prefix group of every sequence: ``i * prefix_groups // batch_size``."""
        return tuple(i * self.prefix_groups // self.batch_size for i in range(self.batch_size))

    @property
    def shared_blocks(self) -> int:
        """Whole blocks of the shared prefix, held once per prefix group:
        ``shared_prefix // block_size``."""
        return self.shared_prefix // self.block_size

    @property
    def num_blocks_used(self) -> int:
        """Physical blocks the batch holds: every sequence's blocks, a prefix
        group's shared blocks once."""
        return sum(self.blocks_per_sequence) - (self.batch_size - self.prefix_groups) * self.shared_blocks

    @property
    def num_spare_blocks(self) -> int:
        if self.spare_blocks is not None:
            return self.spare_blocks
        return max(1, self.num_blocks_used // 8)

    @property
    def num_blocks(self) -> int:
        """Physical blocks in the KV-cache pool (used plus spare)."""
        return self.num_blocks_used + self.num_spare_blocks

    @property
    def unique_tokens(self) -> int:
        """Token slots the batch fills in the pool: every sequence's tokens, those of
        a prefix group's shared blocks once (the copied slots of each member's own
        tail block count in every member, as they are stored there)."""
        return sum(self.lengths) - (self.batch_size - self.prefix_groups) * self.shared_blocks * self.block_size

    @property
    def window_starts(self) -> tuple[int, ...]:
        """Every sequence's first attended position, that of its first query
        token's window, ``max(0, context_len - query_len + 1 - window)`` (0 without
        a window)."""
        if self.window is None:
            return (0,) * self.batch_size
        return tuple(max(0, n - q + 1 - self.window) for n, q in zip(self.lengths, self.query_lengths))

    @property
    def attended_lengths(self) -> tuple[int, ...]:
        """Positions each sequence's query tokens attend to together (each read
        once), ``context_len - window_start``: ``min(context_len, window)`` for one
        query token."""
        return tuple(n - start for n, start in zip(self.lengths, self.window_starts))

    @property
    def unique_read_tokens(self) -> int:
        """Token slots one decode step reads at least: every sequence's attended
        positions, those in a prefix group's shared blocks once (from the group's
        earliest window start). Equals :attr:`unique_tokens` without a window."""
        shared = self.shared_blocks * self.block_size  # positions in shared blocks
        own = sum(n - max(start, shared) for n, start in zip(self.lengths, self.window_starts))
        earliest: dict[int, int] = {}
        for group, start in zip(self.prefix_group_of, self.window_starts):
            earliest[group] = min(start, earliest.get(group, start))
        return own + sum(max(0, shared - start) for start in earliest.values())

    @property
    def wasted_slots(self) -> int:
        """Token slots allocated but unfilled in each sequence's last block."""
        return self.num_blocks_used * self.block_size - self.unique_tokens

    def kv_cache_bytes(self) -> int:
        """Bytes of the K and V cache pools together."""
        return 2 * self.num_blocks * self.block_size * self.num_kv_heads * self.head_dim * self.kv_element_size

    def _kv_bytes(self, tokens: int) -> int:
        return 2 * tokens * self.num_kv_heads * self.head_dim * self.kv_element_size

    def _qo_bytes(self) -> int:
        return 2 * self.num_query_tokens * self.num_heads * self.head_dim * self.element_size

    def needed_kv_bytes(self) -> int:
        """Bytes of K and V that one decode step reads, logically: every attended
        token of every sequence once (all its tokens, or the last ``window``), in
        the cache's own dtype (the scales of an fp8 cache are not counted). A shared
        prefix counts in every member of its group; see :meth:`unique_kv_bytes`."""
        return self._kv_bytes(sum(self.attended_lengths))

    def unique_kv_bytes(self) -> int:
        """Bytes of K and V one decode step must read at least, in bytes: every token
        slot the batch attends to (:attr:`unique_read_tokens`), a prefix group's
        shared blocks once. Equals :meth:`needed_kv_bytes` when nothing is shared."""
        return self._kv_bytes(self.unique_read_tokens)

    def decode_bytes(self) -> int:
        """Bytes one decode step must move, logically: :meth:`needed_kv_bytes`, the
        query and the output."""
        return self.needed_kv_bytes() + self._qo_bytes()

    def unique_decode_bytes(self) -> int:
        """Bytes one decode step must move at least, in bytes: :meth:`unique_kv_bytes`,
        the query and the output; the floor a kernel that reads each shared block
        once can reach."""
        return self.unique_kv_bytes() + self._qo_bytes()

    def memory_bytes(self) -> int:
        """Estimate of the device memory the inputs and one output occupy, in bytes."""
        tables = 4 * self.batch_size * (self.max_num_blocks + 1)
        return self.kv_cache_bytes() + self._qo_bytes() + tables

    # -- validation ------------------------------------------------------------
    def validate(self) -> "DecodeConfig":
        """Check every rule and return ``self``.

        Raises
        ------
        ValueError
            Naming the field and the rule it breaks.
        """
        def positive(name: str, value: object, upper: int | None = None) -> None:
            if not is_whole(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
            if upper is not None and value > upper:
                raise ValueError(f"{name} must be at most {upper}; got {value}")

        positive("batch_size", self.batch_size)
        positive("num_heads", self.num_heads)
        positive("num_kv_heads", self.num_kv_heads)
        positive("head_dim", self.head_dim, 512)
        positive("block_size", self.block_size, 4096)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        if isinstance(self.context_lens, tuple):
            if len(self.context_lens) != self.batch_size:
                raise ValueError(
                    f"context_lens must hold one value per sequence: got "
                    f"{len(self.context_lens)} for batch_size {self.batch_size}"
                )
        for n in self.lengths:
            if not is_whole(n) or n < 0:
                raise ValueError(f"context_lens must be non-negative integers; got {n!r}")
        if not is_whole(self.shared_prefix) or self.shared_prefix < 0:
            raise ValueError(f"shared_prefix must be a non-negative integer; got {self.shared_prefix!r}")
        for i, n in enumerate(self.lengths):
            if n < self.shared_prefix:
                raise ValueError(
                    f"shared_prefix ({self.shared_prefix}) must be at most every context length; "
                    f"sequence {i} holds only {n} tokens"
                )
        if not is_whole(self.prefix_groups) or not 1 <= self.prefix_groups <= self.batch_size:
            raise ValueError(
                f"prefix_groups must be an integer from 1 to batch_size ({self.batch_size}); "
                f"got {self.prefix_groups!r}"
            )
        resolve_dtype(self.dtype)
        if self.kv_dtype is not None and self.kv_dtype not in KV_DTYPES:
            raise ValueError(
                f"kv_dtype must be the query's dtype ({self.dtype}) or one of {', '.join(KV_DTYPES)}; "
                f"got {self.kv_dtype!r}"
            )
        if self.kv_scale not in KV_SCALES:
            raise ValueError(f"kv_scale must be one of {', '.join(KV_SCALES)}; got {self.kv_scale!r}")
        if self.block_layout not in BLOCK_LAYOUTS:
            raise ValueError(
                f"block_layout must be one of {', '.join(BLOCK_LAYOUTS)}; got {self.block_layout!r}"
            )
        if self.spare_blocks is not None and (
            not is_whole(self.spare_blocks) or self.spare_blocks < 0
        ):
            raise ValueError(f"spare_blocks must be a non-negative integer; got {self.spare_blocks!r}")
        if isinstance(self.query_lens, tuple):
            if len(self.query_lens) != self.batch_size:
                raise ValueError(f"query_lens must hold one value per sequence: got {len(self.query_lens)} "
                                 f"for batch_size {self.batch_size}")
            for i, (q, n) in enumerate(zip(self.query_lens, self.lengths)):
                if not is_whole(q) or not 1 <= q <= max(1, n):
                    raise ValueError(f"query_lens[{i}] = {q!r} must be an integer in [1, max(1, context_lens[{i}]) "
                                     f"= {max(1, n)}]: the new tokens are counted in the context")
        elif not is_whole(self.query_lens) or self.query_lens < 1:
            raise ValueError(f"query_lens must be a positive integer or one per sequence; got {self.query_lens!r}")
        check_window(self.window)  # the rules the decode functions apply, and their messages
        check_soft_cap(self.soft_cap)
        if not isinstance(self.sinks, bool):
            raise ValueError(f"sinks must be True or False; got {self.sinks!r}")
        if not (self.device == "cpu" or self.device == "cuda" or self.device.startswith("cuda:")):
            raise ValueError(f"device must be 'cpu' or 'cuda'; got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was requested but no CUDA GPU is available")
        return self

    def with_(self, **changes: object) -> "DecodeConfig":
        """A copy with some fields changed (``dataclasses.replace``)."""
        from dataclasses import replace

        return replace(self, **changes)


def ragged_lengths(
    batch_size: int, low: int, high: int, *, seed: int = 0, spread: str = "uniform"
) -> tuple[int, ...]:
    """Per-sequence context lengths for a ragged batch.

    Parameters
    ----------
    batch_size : int
        How many lengths.
    low, high : int
        Inclusive range of lengths, ``0 <= low <= high``.
    seed : int
        Random seed.
    spread : str
        ``"uniform"`` draws uniformly in ``[low, high]``; ``"long-tail"`` draws
        log-uniformly, so most sequences are short and a few are long, as in chat
        traffic.

    Returns
    -------
    tuple of int
        ``batch_size`` lengths.

    Raises
    ------
    ValueError
        If the range is empty or negative, or ``spread`` is unknown.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size}")
    if not 0 <= low <= high:
        raise ValueError(f"need 0 <= low <= high for ragged lengths; got low={low}, high={high}")
    gen = torch.Generator().manual_seed(seed)
    if spread == "uniform":
        values = torch.randint(low, high + 1, (batch_size,), generator=gen)
    elif spread == "long-tail":
        lo = math.log(max(low, 1))
        hi = math.log(max(high, 1))
        u = torch.rand(batch_size, generator=gen, dtype=torch.float64)
        values = torch.exp(lo + (hi - lo) * u).round().clamp(low, high).long()
    else:
        raise ValueError(f"spread must be 'uniform' or 'long-tail'; got {spread!r}")
    return tuple(int(v) for v in values)
