"""How ``triton_decode`` tiles and splits one call: the launch plan.

:func:`plan_launch` picks the tile (``BLOCK_N`` tokens, aligned with the paging),
the split count for flash-decoding (:func:`choose_num_splits`: enough programs to
keep every SM streaming) and the launch options, and returns them as a
:class:`LaunchPlan` that :func:`~paged_attention.triton_decode.prepare_triton_decode`
launches (or that a caller fixes and passes back, as the benchmarks and the
explorer's kernel trace do). Plain Python: nothing here launches a kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import runtime
from .tiling import cdiv, dot_pad, even_cut, next_pow2, tile_shape
from .validation import DecodeShape


@dataclass(frozen=True)
class LaunchPlan:
    """How ``triton_decode`` tiles and splits one call.

    Attributes
    ----------
    block_n : int
        Tokens per tile (power of two).
    blocks_per_tile, slots_per_tile, subtiles : int
        The tile as ``blocks_per_tile`` physical blocks of ``slots_per_tile`` slots;
        when a block is larger than a tile, ``subtiles`` tiles walk one block
        (:func:`~paged_attention.tiling.tile_shape`).
    num_splits : int
        Programs along the context of the longest sequence (1: no split-K).
    blocks_per_split : int
        Logical blocks each split covers.
    num_warps, num_stages : int
        Triton launch options.
    block_size : int
        Tokens per physical block (to convert splits to tokens).
    balanced : bool
        How a sequence's blocks become programs (work items), see
        :meth:`sequence_items`: False cuts every sequence at the same split
        boundaries (``blocks_per_split`` each); True (a ragged batch) cuts each
        sequence into as few pieces of at most ``blocks_per_split`` blocks as it
        needs, of about equal length, and launches the longest pieces first.
    query_rows : int
        The shared-prefix pass's rows per tile (sequences x query heads of one KV
        head; :func:`~paged_attention.shared_prefix.plan_prefix`); 0 for the decode kernel's plan.
    """

    block_n: int
    blocks_per_tile: int
    slots_per_tile: int
    subtiles: int
    num_splits: int
    blocks_per_split: int
    num_warps: int
    num_stages: int
    block_size: int
    balanced: bool = False
    query_rows: int = 0

    @property
    def tokens_per_split(self) -> int:
        """Context tokens each split covers (at most, for a balanced plan)."""
        return self.blocks_per_split * self.block_size

    def sequence_items(self, context_len: int, first_block: int = 0) -> list[tuple[int, int]]:
        """The logical block ranges ``[first, last)`` of the programs that read one
        sequence, from ``first_block`` (0, its window's first block, or where a
        shared-prefix pass stops) to its last needed block.

        Every sequence gets at least one (maybe empty) range: the program that
        writes its output. The kernel lets a sequence's last program run on to the
        context's end at launch time, so a context that grew after planning is
        still read in full.
        """
        needed = cdiv(int(context_len), self.block_size)
        if needed <= first_block:
            return [(first_block, first_block)]
        if self.balanced:
            return even_cut(first_block, needed, self.blocks_per_split, self.blocks_per_tile)
        per = self.blocks_per_split
        return [(start, min(start + per, needed)) for start in range(first_block, needed, per)]


#: Partial-result values the fused merge loads per round: one round for 32 splits
#: of a 4-head group at head_dim 128, since each round waits on the one before.
#: Measured in docs/performance.md, "The launch plan and the measurements behind it".
FUSED_MERGE_VALUES = 16384

#: A split-K merge that reads more than this many bytes of partials per (sequence,
#: KV head) runs as a second launch of its own (:func:`spread_merge`).
SPREAD_MERGE_BYTES = 128 * 1024


def spread_merge(max_slots: int, merge_rows: int, head_dim_pad: int) -> bool:
    """Whether the split-K merge runs as a launch of its own, one program per
    (sequence, query token, KV head), rather than in the last program of each
    (sequence, KV head) to finish.

    The fused merge reads ``max_slots`` partials of ``merge_rows`` float32 rows of
    ``head_dim_pad`` values, :data:`FUSED_MERGE_VALUES` at a time in rounds that
    wait on each other, on one program: past :data:`SPREAD_MERGE_BYTES` (draft
    tokens over many splits: 8 tokens x 4 heads x 32 splits read 512 KB) that tail
    costs more than a second launch, whose programs each read one token's rows.
    Measured in docs/performance.md, "Draft tokens".
    """
    return max_slots > 1 and max_slots * merge_rows * head_dim_pad * 4 > SPREAD_MERGE_BYTES


#: A soft-capped step whose tiles each lie inside one block (blocks of at least
#: a tile's tokens) runs this many warps: the cap's tanh on every score of the
#: tile spreads over twice the threads. Measured in docs/performance.md, "Soft-cap on
#: big blocks".
SOFT_CAP_BIG_BLOCK_WARPS = 8


#: Bytes of shared memory the K/V pipeline stages of one program may take.
SHARED_MEMORY_BUDGET = 160 * 1024

#: An fp8 cache with at least this many (sequence, KV head) rows runs one warp per
#: program, with enough splits for FP8_ONE_WARP_PROGRAMS programs (8 per SM on an
#: H200). Half the bytes per token leave a 4-warp program's per-tile work, not
#: memory, setting the pace; many one-warp programs keep more loads in flight.
#: Measurements: docs/performance.md, "v13" and "fp8 plans of small batches (v21)".
FP8_ONE_WARP_MIN_ROWS = 64
FP8_ONE_WARP_PROGRAMS = 1024
#: ... with no split shorter than this many tokens of the longest context; a
#: uniform batch that cannot reach FP8_ONE_WARP_PROGRAMS programs with splits this
#: short keeps the 4-warp plan (one-warp programs were 1.2 to 2.1x slower than it
#: at 128 to 512 programs, v21).
FP8_ONE_WARP_SPLIT_TOKENS = 128
#: The shortest split of the one-warp plan of a ragged batch (the balanced plan):
#: pieces of 512 tokens were fast at (8, 8192) and (16, 4096) (v13).
FP8_ONE_WARP_PIECE_TOKENS = 512

#: A batch whose longest context is over this many times the mean is ragged: it
#: gets the balanced plan (:func:`choose_chunk_blocks`) rather than one split count.
RAGGED_RATIO = 1.25
#: The balanced plan's program budget. A batch with fewer than BALANCED_MANY_ROWS
#: effective (sequence, KV head) rows keeps 128-token tiles (one program per SM
#: fits) and gets one program per BALANCED_PIECE_TOKENS tokens of its work (rows x
#: tokens), rounded up to a whole number of programs per SM; a batch with more
#: takes 64-token tiles (several programs per SM) and BALANCED_PROGRAMS_PER_ROW
#: programs per row. Either way the budget stays within BALANCED_MIN_PROGRAMS_PER_SM
#: to BALANCED_MAX_PROGRAMS_PER_SM programs per SM. Effective rows weigh rows by
#: their work, ``num_kv_heads * sum(L)**2 / sum(L**2)``: a long-tailed batch of 32
#: sequences, a few long among many short, counts as a handful.
#: Measured on the ragged set: docs/performance.md, "v14".
BALANCED_MANY_ROWS = 64
BALANCED_PIECE_TOKENS = 2048
BALANCED_PROGRAMS_PER_ROW = 4
BALANCED_MIN_PROGRAMS_PER_SM = 2
BALANCED_MAX_PROGRAMS_PER_SM = 8
#: No piece of the balanced plan is shorter than this many tokens.
BALANCED_MIN_TOKENS = 256


def balanced_budget(context_lens: torch.Tensor, num_kv_heads: int, num_sms: int) -> tuple[int, bool]:
    """The balanced plan's program budget for a batch, and whether it takes the
    smaller (64-token) tiles; see :data:`BALANCED_MANY_ROWS`.

    Parameters
    ----------
    context_lens : Tensor
        ``[batch_size]`` integer lengths, on the CPU.
    num_kv_heads, num_sms : int

    Returns
    -------
    (int, bool)
        The most programs the balanced plan may launch, and whether the batch has
        many effective rows.
    """
    lens = context_lens.to(torch.float64)
    rows = int(lens.numel()) * num_kv_heads
    square_sum = float((lens * lens).sum())
    effective_rows = num_kv_heads * float(lens.sum()) ** 2 / square_sum if square_sum else 0.0
    many_rows = effective_rows >= BALANCED_MANY_ROWS
    if many_rows:
        budget = BALANCED_PROGRAMS_PER_ROW * rows
    else:
        # Whole waves: a 128-token tile's program fills an SM (shared memory), and
        # the pieces are about equal, so 3.3 waves take as long as 4.
        work = num_kv_heads * int(context_lens.to(torch.int64).sum())
        budget = cdiv(work, BALANCED_PIECE_TOKENS * num_sms) * num_sms
    budget = max(BALANCED_MIN_PROGRAMS_PER_SM * num_sms, min(BALANCED_MAX_PROGRAMS_PER_SM * num_sms, budget))
    return budget, many_rows


def choose_num_splits(context_lens: torch.Tensor, num_kv_heads: int, num_sms: int, block_size: int) -> int:
    """Split count for flash-decoding: enough programs to keep every SM streaming.

    A decode program streams its share of one sequence's K/V for one KV head, and
    one program per SM cannot keep enough loads in flight to pull that SM's share of
    HBM bandwidth, so the grid needs about two programs per SM, and close to a whole
    number of them per SM (at 1.5 per SM half the SMs do twice the work of the
    others). The sweeps behind this are in docs/performance.md, section "The launch
    plan and the measurements behind it".

    Returns the smallest split count whose grid reaches 1.9 programs per SM at 90%
    wave efficiency; when the contexts are too short for that, the largest count
    that keeps splits at least 64 tokens long (256 once the grid already has more
    programs than SMs, where short splits only add merge work).
    """
    lens = context_lens.to(torch.int64)
    max_len = int(lens.max()) if lens.numel() else 0
    if max_len == 0:
        return 1
    max_splits = max(1, min(max_len // 64, 256, cdiv(max_len, block_size)))
    chosen = 1
    for splits in range(1, max_splits + 1):
        partition = cdiv(max_len, splits)
        programs = num_kv_heads * int(cdiv(lens, partition).sum())
        if splits > 1 and programs > num_sms and partition < 256:
            continue  # the SMs are busy already: short splits only add merge work
        chosen = splits
        waves = programs / num_sms
        if waves >= 1.9 and waves / math.ceil(waves) >= 0.9:
            break
    return chosen


def is_ragged(context_lens: torch.Tensor) -> bool:
    """Whether a batch's longest context is over :data:`RAGGED_RATIO` times the mean."""
    lens = context_lens.to(torch.int64)
    return lens.numel() > 0 and int(lens.max()) * lens.numel() > RAGGED_RATIO * int(lens.sum())


def choose_chunk_blocks(
    needed_blocks: torch.Tensor, num_kv_heads: int, max_programs: int, unit: int, min_blocks: int
) -> int:
    """The balanced plan's cap on a piece of a sequence, in blocks.

    The smallest multiple of ``unit`` blocks (one tile), and at least
    ``min_blocks``, for which cutting every sequence into ``ceil(needed /
    chunk)`` pieces gives at most ``max_programs`` programs over all KV heads: the
    most even cut of the batch's work that still fits that many programs. A
    binary search, as FlashInfer's decode planner searches its KV chunk size
    (``flashinfer/include/flashinfer/attention/scheduler.cuh``).
    """
    needed = needed_blocks.to(torch.int64)
    longest = int(needed.max()) if needed.numel() else 0
    top = max(1, cdiv(longest, unit))
    low = min(top, max(1, cdiv(min_blocks, unit)))

    def programs(units: int) -> int:
        return num_kv_heads * int(cdiv(needed, units * unit).clamp(min=1).sum())

    while low < top:
        mid = (low + top) // 2
        if programs(mid) <= max_programs:
            top = mid
        else:
            low = mid + 1
    return top * unit


def plan_launch(
    shape: DecodeShape,
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    balanced: bool | None = None,
    max_programs: int | None = None,
) -> LaunchPlan:
    """Pick the tile, split count and launch options for one decode call.

    The split count comes from :func:`choose_num_splits`; any count is then rounded
    so that every split but the last covers the same whole number of blocks (7
    splits of 12 blocks become 6 of 2). Tiles are 128 tokens for ``head_dim <= 128``
    (64 for larger heads and for draft tokens whose tiles hold more than 32 query
    rows, query tokens times the GQA group; half that for float32, and, for
    ``head_dim <= 128``, half again when the grid has three or more programs per SM
    of about equal length, except for draft tiles of more than 16 rows),
    no longer than a split
    rounded up to a power of two, and halved until the pipeline's K/V buffers fit
    :data:`SHARED_MEMORY_BUDGET`; 4 warps (:data:`SOFT_CAP_BIG_BLOCK_WARPS` for a
    soft-capped one-token step on a 16-bit cache whose tiles lie inside one block); 3 pipeline stages for 16-bit caches, 2
    for float32 and for draft tiles of 2 to 32 rows. An fp8 cache whose batch has at least :data:`FP8_ONE_WARP_MIN_ROWS`
    (sequence, KV head) rows (and no such draft tiles) instead runs one warp per
    program, splits until there
    are :data:`FP8_ONE_WARP_PROGRAMS` programs (no split shorter than
    :data:`FP8_ONE_WARP_SPLIT_TOKENS` tokens; a uniform batch that cannot reach
    that many keeps the 4-warp plan), and takes tiles of 32 tokens (64 for
    blocks of 64 or more) and 2 stages.

    A ragged batch (:func:`is_ragged`) gets the balanced plan instead of one split
    count: each sequence is cut into as few pieces of about equal length as a cap
    of ``blocks_per_split`` blocks allows, the cap being the smallest that keeps the
    grid within a budget of programs (:func:`balanced_budget`, which also picks
    64-token tiles for batches of many rows; :data:`FP8_ONE_WARP_PROGRAMS` for the
    one-warp fp8 plan) and no piece under
    :data:`BALANCED_MIN_TOKENS` tokens (:data:`FP8_ONE_WARP_PIECE_TOKENS` for it) (:func:`choose_chunk_blocks`); the longest
    pieces launch first. Long sequences get many programs, short ones one, and no
    program is launched only to find itself past its context.

    The sweeps that chose these defaults are in docs/performance.md, sections "The
    launch plan and the measurements behind it", "v13" and "v14".

    Parameters
    ----------
    shape : DecodeShape
        Validated sizes.
    device : torch.device
        Where the kernel runs (the SM count comes from it).
    dtype : torch.dtype
        Element type of the query (the compute dtype); the cache's own element
        size (``shape.kv_dtype``, 1 byte for fp8) sizes the pipeline buffers.
    num_splits, block_n, num_warps, num_stages : int, optional
        Override the heuristic (benchmarks use this to sweep). With ``balanced``,
        ``num_splits`` sets the cap as ``ceil(longest / num_splits)`` blocks.
    balanced : bool, optional
        Force the balanced plan on (True) or off (False); by default it is on for a
        ragged batch unless ``num_splits`` is given.
    max_programs : int, optional
        The balanced plan's program budget (default above).

    Returns
    -------
    LaunchPlan

    Raises
    ------
    ValueError
        If an override is not a positive whole number (``num_splits``,
        ``num_stages``, ``max_programs``), ``balanced`` is not a bool, or a tile
        option is not a power of two (``block_n`` at least 16,
        ``num_warps`` 1 to 16).
    """
    block_n_override = block_n
    check_plan_overrides(num_splits=num_splits, block_n=block_n, num_warps=num_warps, num_stages=num_stages,
                         max_programs=max_programs, balanced=balanced)
    max_blocks = max(1, cdiv(shape.max_context_len, shape.block_size))
    rows = shape.batch_size * shape.num_kv_heads
    # Draft tokens: a tile holds its KV head's query heads x query tokens as rows.
    # Past 16 rows the softmax and the accumulator grow with the rows.
    draft_rows = shape.max_query_len * shape.query_group_size if shape.max_query_len > 1 else 0
    many_draft_rows = draft_rows > 32
    one_warp = shape.is_fp8 and num_warps is None and rows >= FP8_ONE_WARP_MIN_ROWS and not many_draft_rows
    lens = shape.context_lens.to(torch.int64)
    ragged = is_ragged(lens)
    if balanced is None:
        balanced = ragged and num_splits is None
    if one_warp and not balanced and num_splits is None:
        one_warp = rows * cdiv(shape.max_context_len, FP8_ONE_WARP_SPLIT_TOKENS) >= FP8_ONE_WARP_PROGRAMS
    num_sms = runtime.num_sms(device)
    head_dim_pad = dot_pad(shape.head_dim)
    element_size = torch.empty((), dtype=dtype).element_size()
    kv_bytes = torch.empty((), dtype=shape.kv_dtype).element_size()  # 1 for an fp8 cache
    if num_stages is None:
        num_stages = 2 if one_warp or (draft_rows and not many_draft_rows) else 3 if element_size < 4 else 2

    if block_n is None:
        if one_warp:
            block_n = 64 if shape.block_size >= 64 else 32
        else:
            block_n = (128 if head_dim_pad <= 128 and not many_draft_rows else 64) // (2 if element_size == 4 else 1)
    if balanced:
        # Pieces are whole tiles, so no piece but a sequence's last ends mid-tile.
        unit = tile_shape(block_n, shape.block_size).blocks_per_tile
        if num_splits is not None:
            blocks_per_split = cdiv(max_blocks, max(1, min(int(num_splits), max_blocks)))
            blocks_per_split = cdiv(blocks_per_split, unit) * unit
        else:
            if max_programs is None and one_warp:
                max_programs = FP8_ONE_WARP_PROGRAMS
            elif max_programs is None:
                max_programs, many_rows = balanced_budget(lens, shape.num_kv_heads, num_sms)
                if many_rows and block_n_override is None and block_n == 128:
                    block_n = 64
                    unit = tile_shape(block_n, shape.block_size).blocks_per_tile
            min_tokens = FP8_ONE_WARP_PIECE_TOKENS if one_warp else BALANCED_MIN_TOKENS
            blocks_per_split = choose_chunk_blocks(
                cdiv(lens, shape.block_size), shape.num_kv_heads, max_programs, unit, cdiv(min_tokens, shape.block_size)
            )
        num_splits = cdiv(max_blocks, blocks_per_split)
    else:
        if num_splits is None:
            num_splits = choose_num_splits(lens, shape.num_kv_heads, num_sms, shape.block_size)
            if one_warp:
                wanted = min(cdiv(FP8_ONE_WARP_PROGRAMS, rows), cdiv(shape.max_context_len, FP8_ONE_WARP_SPLIT_TOKENS))
                num_splits = max(num_splits, wanted)
        num_splits = max(1, min(int(num_splits), max_blocks))
        blocks_per_split = cdiv(max_blocks, num_splits)
        num_splits = cdiv(max_blocks, blocks_per_split)

    partition = blocks_per_split * shape.block_size
    if not one_warp and block_n_override is None:
        programs = shape.num_kv_heads * int(cdiv(lens, partition).sum())
        if programs >= 3 * num_sms and not ragged and head_dim_pad <= 128 and draft_rows <= 16:
            # Many programs of equal length: smaller tiles leave shared memory for
            # three of them per SM. Not in a ragged batch, whose longest programs set
            # the time and want the larger tile, nor above head_dim 128, whose tiles
            # are that small already. Measurements: docs/performance.md, section
            # "The launch plan and the measurements behind it".
            block_n //= 2
        # The pipeliner buffers num_stages - 1 K and V tiles in shared memory (228 KB
        # per SM on Hopper); stay well inside it.
        while block_n > 16 and (num_stages - 1) * 2 * block_n * head_dim_pad * kv_bytes > SHARED_MEMORY_BUDGET:
            block_n //= 2
    if block_n_override is None:
        block_n = min(block_n, next_pow2(partition))
    block_n = dot_pad(block_n)
    soft_cap_big_block = (shape.soft_cap is not None and shape.block_size >= block_n and not draft_rows
                          and not shape.is_fp8)

    return LaunchPlan(
        block_n=block_n,
        **tile_shape(block_n, shape.block_size)._asdict(),
        num_splits=num_splits,
        blocks_per_split=blocks_per_split,
        num_warps=num_warps or (1 if one_warp else SOFT_CAP_BIG_BLOCK_WARPS if soft_cap_big_block else 4),
        num_stages=num_stages,
        block_size=shape.block_size,
        balanced=bool(balanced),
    )


def check_plan_overrides(**overrides: int | bool | None) -> None:
    """Refuse a launch-plan override the kernels cannot take (None: not given).

    Raises
    ------
    ValueError
        If ``balanced`` is not a bool, another override is not a positive whole
        number, ``block_n`` or ``query_rows`` is not a power of two of at least 16,
        or ``num_warps`` is not 1, 2, 4, 8 or 16.
    """
    balanced = overrides.pop("balanced", None)
    if balanced is not None and not isinstance(balanced, bool):
        raise ValueError(f"balanced must be True, False or None; got {balanced!r}")
    for name, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number; got {value!r}")
        if name in ("block_n", "query_rows") and (value < 16 or value & (value - 1)):
            raise ValueError(f"{name} must be a power of two of at least 16; got {value}")
        if name == "num_warps" and (value > 16 or value & (value - 1)):
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16; got {value}")


def check_plan_fits(plan: LaunchPlan, shape: DecodeShape) -> None:
    """Refuse a caller's decode plan that was not made for ``shape``.

    Parameters
    ----------
    plan : LaunchPlan
    shape : DecodeShape
        What the plan is launched on (with shared prefixes or a window: the
        contexts past the prefixes and from each window's first block,
        :func:`~paged_attention.shared_prefix.own_shape`).

    Raises
    ------
    ValueError
        If the plan's block size is not the cache's, or its splits do not cover
        the longest context.
    """
    if plan.block_size != shape.block_size:
        raise ValueError(f"the launch plan is for block_size {plan.block_size}, the cache has {shape.block_size}")
    needed = cdiv(shape.max_context_len, shape.block_size)
    if plan.num_splits * plan.blocks_per_split < needed:
        raise ValueError(
            f"the launch plan covers {plan.num_splits * plan.blocks_per_split} blocks per sequence "
            f"({plan.num_splits} splits of {plan.blocks_per_split}); the longest context needs {needed}"
        )
