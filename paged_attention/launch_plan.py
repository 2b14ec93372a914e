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
from .validation import DecodeShape


def _fp32_dot(dtype: torch.dtype) -> bool:
    """Whether the kernel's dot products take float32 operands (IEEE precision).

    Always for float32 inputs, so TF32 never rounds them. Also for bfloat16 under
    the interpreter, whose ``tl.dot`` mis-reads bfloat16 operands (Triton 3.9); on
    a GPU bfloat16 goes through the tensor cores like float16.
    """
    return dtype == torch.float32 or (runtime.TRITON_INTERPRET and dtype == torch.bfloat16)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: a few splits, so tests exercise the merge


@dataclass(frozen=True)
class LaunchPlan:
    """How ``triton_decode`` tiles and splits one call.

    Attributes
    ----------
    block_n : int
        Tokens per tile (power of two).
    blocks_per_tile, slots_per_tile, subtiles : int
        The tile as ``blocks_per_tile`` physical blocks of ``slots_per_tile`` slots;
        when a block is larger than a tile, ``subtiles`` tiles walk one block.
    num_splits : int
        Programs along the context of the longest sequence (1: no split-K).
    blocks_per_split : int
        Logical blocks each split covers.
    num_warps, num_stages : int
        Triton launch options.
    block_size : int
        Tokens per physical block (to convert splits to tokens).
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

    @property
    def tokens_per_split(self) -> int:
        """Context tokens each split covers."""
        return self.blocks_per_split * self.block_size


#: Partial-result values the fused merge loads per round: one round for 32 splits
#: of a 4-head group at head_dim 128, since each round waits on the one before.
#: Measured in docs/performance.md, "The launch plan and the measurements behind it".
FUSED_MERGE_VALUES = 16384

#: Bytes of shared memory the K/V pipeline stages of one program may take.
SHARED_MEMORY_BUDGET = 160 * 1024

#: An fp8 cache with at least this many (sequence, KV head) rows runs one warp per
#: program, with enough splits for FP8_ONE_WARP_PROGRAMS programs (8 per SM on an
#: H200). Half the bytes per token leave a 4-warp program's per-tile work, not
#: memory, setting the pace; many one-warp programs keep more loads in flight.
#: Measurements: docs/performance.md, "v13".
FP8_ONE_WARP_MIN_ROWS = 64
FP8_ONE_WARP_PROGRAMS = 1024
#: ... but no split shorter than this many tokens of the longest context: splits
#: of 512 tokens were fast at (8, 8192) and (16, 4096), of 256 slow at (1, 32768).
FP8_ONE_WARP_SPLIT_TOKENS = 512


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

    A ragged batch (longest context over 1.25 times the mean) is split further, so
    that no program holds more than a quarter of the work of one of the ``2 *
    num_sms`` program slots (and no less than 1024 tokens): its longest sequences
    would otherwise run alone after the short ones finish.
    """
    lens = context_lens.to(torch.int64)
    max_len = int(lens.max()) if lens.numel() else 0
    if max_len == 0:
        return 1
    max_splits = max(1, min(max_len // 64, 256, -(-max_len // block_size)))
    chosen = 1
    for splits in range(1, max_splits + 1):
        partition = -(-max_len // splits)
        programs = num_kv_heads * int(((lens + partition - 1) // partition).sum())
        if splits > 1 and programs > num_sms and partition < 256:
            continue  # the SMs are busy already: short splits only add merge work
        chosen = splits
        waves = programs / num_sms
        if waves >= 1.9 and waves / math.ceil(waves) >= 0.9:
            break
    total = int(lens.sum())
    if max_len * lens.numel() > 1.25 * total:  # ragged
        per_slot = num_kv_heads * total / (2 * num_sms)
        partition = max(1024.0, per_slot / 4)
        chosen = max(chosen, min(max_splits, math.ceil(max_len / partition)))
    return chosen


def plan_launch(
    shape: DecodeShape,
    device: torch.device,
    dtype: torch.dtype,
    *,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> LaunchPlan:
    """Pick the tile, split count and launch options for one decode call.

    The split count comes from :func:`choose_num_splits`; any count is then rounded
    so that every split but the last covers the same whole number of blocks (7
    splits of 12 blocks become 6 of 2). Tiles are 128 tokens for ``head_dim <= 128``
    (64 for larger heads, half that for float32, and, for ``head_dim <= 128``, half
    again when the grid has three or more programs per SM of about equal length),
    no longer than a split
    rounded up to a power of two, and halved until the pipeline's K/V buffers fit
    :data:`SHARED_MEMORY_BUDGET`; 4 warps; 3 pipeline stages for 16-bit caches, 2
    for float32. An fp8 cache whose batch has at least :data:`FP8_ONE_WARP_MIN_ROWS`
    (sequence, KV head) rows instead runs one warp per program, splits until there
    are :data:`FP8_ONE_WARP_PROGRAMS` programs (no split shorter than
    :data:`FP8_ONE_WARP_SPLIT_TOKENS` tokens), and takes tiles of 32 tokens (64 for
    blocks of 64 or more) and 2 stages. The sweeps that chose these defaults are in
    docs/performance.md, sections "The launch plan and the measurements behind it"
    and "v13".

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
        Override the heuristic (benchmarks use this to sweep).

    Returns
    -------
    LaunchPlan

    Raises
    ------
    ValueError
        If an override is not a positive whole number (``num_splits``,
        ``num_stages``) or not a power of two (``block_n`` at least 16,
        ``num_warps`` 1 to 16).
    """
    _check_plan_overrides(num_splits=num_splits, block_n=block_n, num_warps=num_warps, num_stages=num_stages)
    max_blocks = max(1, -(-shape.max_context_len // shape.block_size))
    rows = shape.batch_size * shape.num_kv_heads
    one_warp = shape.is_fp8 and num_warps is None and rows >= FP8_ONE_WARP_MIN_ROWS
    if num_splits is None:
        num_splits = choose_num_splits(shape.context_lens, shape.num_kv_heads, _num_sms(device), shape.block_size)
        if one_warp:
            wanted = min(-(-FP8_ONE_WARP_PROGRAMS // rows), -(-shape.max_context_len // FP8_ONE_WARP_SPLIT_TOKENS))
            num_splits = max(num_splits, wanted)
    num_splits = max(1, min(int(num_splits), max_blocks))
    blocks_per_split = -(-max_blocks // num_splits)
    num_splits = -(-max_blocks // blocks_per_split)

    head_dim_pad = max(16, _next_pow2(shape.head_dim))
    element_size = torch.empty((), dtype=dtype).element_size()
    if num_stages is None:
        num_stages = 2 if one_warp else 3 if element_size < 4 else 2
    if block_n is None and one_warp:
        block_n = min(64 if shape.block_size >= 64 else 32, _next_pow2(blocks_per_split * shape.block_size))
    if block_n is None:
        block_n = (128 if head_dim_pad <= 128 else 64) // (2 if element_size == 4 else 1)
        partition = blocks_per_split * shape.block_size
        programs = shape.num_kv_heads * int(((shape.context_lens + partition - 1) // partition).sum())
        lens = shape.context_lens
        uniform = shape.max_context_len * lens.numel() <= 1.25 * int(lens.sum())
        if programs >= 3 * _num_sms(device) and uniform and head_dim_pad <= 128:
            # Many programs of equal length: smaller tiles leave shared memory for
            # three of them per SM. Not in a ragged batch, whose longest programs set
            # the time and want the larger tile, nor above head_dim 128, whose tiles
            # are that small already. Measurements: docs/performance.md, section
            # "The launch plan and the measurements behind it".
            block_n //= 2
        block_n = min(block_n, _next_pow2(partition))
        # The pipeliner buffers num_stages - 1 K and V tiles in shared memory (228 KB
        # per SM on Hopper); stay well inside it.
        kv_bytes = torch.empty((), dtype=shape.kv_dtype).element_size()  # 1 for an fp8 cache
        while block_n > 16 and (num_stages - 1) * 2 * block_n * head_dim_pad * kv_bytes > SHARED_MEMORY_BUDGET:
            block_n //= 2
    block_n = max(16, _next_pow2(block_n))
    block_size_pad = _next_pow2(shape.block_size)
    if block_size_pad <= block_n:
        blocks_per_tile, slots_per_tile, subtiles = block_n // block_size_pad, block_size_pad, 1
    else:
        blocks_per_tile, slots_per_tile, subtiles = 1, block_n, block_size_pad // block_n

    return LaunchPlan(
        block_n=block_n,
        blocks_per_tile=blocks_per_tile,
        slots_per_tile=slots_per_tile,
        subtiles=subtiles,
        num_splits=num_splits,
        blocks_per_split=blocks_per_split,
        num_warps=(1 if one_warp else 4) if num_warps is None else num_warps,
        num_stages=num_stages,
        block_size=shape.block_size,
    )


def _check_plan_overrides(**overrides) -> None:
    """ValueError for a launch-plan override that the kernel cannot take."""
    for name, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number; got {value!r}")
        if name == "block_n" and (value < 16 or value & (value - 1)):
            raise ValueError(f"block_n must be a power of two of at least 16; got {value}")
        if name == "num_warps" and (value > 16 or value & (value - 1)):
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16; got {value}")


def _check_plan_fits(plan: LaunchPlan, shape: DecodeShape) -> None:
    """ValueError when a caller's plan does not match the inputs it is launched on."""
    if plan.block_size != shape.block_size:
        raise ValueError(f"the launch plan is for block_size {plan.block_size}, the cache has {shape.block_size}")
    needed = -(-shape.max_context_len // shape.block_size)
    if plan.num_splits * plan.blocks_per_split < needed:
        raise ValueError(
            f"the launch plan covers {plan.num_splits * plan.blocks_per_split} blocks per sequence "
            f"({plan.num_splits} splits of {plan.blocks_per_split}); the longest context needs {needed}"
        )
