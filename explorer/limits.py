"""What the explorer refuses or caps, and why: the one home of its limits.

Every ``MAX_*``: the bounds of the sidebar's and the pages' controls (the URL
reader checks the same ones), what the figures draw before they sample or
aggregate, the block-table page's size limit, the Inside-the-kernel page's
(:func:`layout_size_error`), and the CPU budget: on the CPU the Triton kernel
runs in the interpreter, about a second per call at :data:`CPU_MAX_WORK`, so the
benchmark, the sweep and the serving page refuse more work than that
(:func:`cpu_refusal`, worded with the levers that lower it) and cap the warm-up
and timed iterations (:func:`cap_iterations`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from explorer.formatting import format_number, join_or
from paged_attention.config import DecodeConfig

# -- the sidebar's bounds (the library's own rules, DecodeConfig.validate, come on top) --
MAX_BATCH = 4096
MAX_CONTEXT = 1 << 20
MAX_HEADS = 256
MAX_HEAD_DIM = 512
#: The largest block size offered (the sizes are the powers of two up to it).
MAX_BLOCK_SIZE = 256
MAX_SEED = 2**31 - 1
MAX_WARMUP = 1000
MAX_ITERS = 10_000
#: The attention options: a sliding window of 1 token up to the longest context, and
#: a logit soft-cap (``cap * tanh(s / cap)``) from 0.1 (near-uniform weights) to 1000
#: (no effect on any logit a softmax keeps).
MAX_WINDOW = MAX_CONTEXT
MIN_SOFT_CAP = 0.1
MAX_SOFT_CAP = 1000.0
#: New (query) tokens per sequence, the draft tokens one step verifies: speculative
#: decoding drafts a handful (EAGLE, Medusa and MTP heads 1 to about 8); 16 leaves room.
MAX_QUERY_LEN = 16
#: What the sidebar's window and soft-cap boxes start from when turned on by hand.
DEFAULT_WINDOW = 128
DEFAULT_SOFT_CAP = 50.0

# -- the pages' bounds ---------------------------------------------------------
#: Most samples per request (n) of the sharing scenarios (Block table, Serving
#: simulation); a request's samples also need that many batch slots.
MAX_SAMPLES = 64
#: Decode benchmark: runs kept in the session's history.
MAX_HISTORY = 20
#: Sweep: points along the axis, and the naive loop's time budget per point (s).
MAX_POINTS = 12
MAX_BUDGET_S = 600.0
#: Sweep: an uploaded CSV larger than this is refused before parsing, and one of more rows.
MAX_CSV_BYTES = 2_000_000
MAX_CSV_ROWS = 5000
#: Serving simulation: the pool, the steps, the batch, the arrival rate (requests
#: a step) and a prompt's or an output's length.
MAX_POOL_BLOCKS = 16_384
MAX_STEPS = 1000
MAX_SIM_BATCH = 256
MAX_RATE = 8.0
MAX_LENGTH = 16_384
#: Serving simulation: most ``steps x num_blocks`` a simulation may record (bounds its memory).
MAX_STEP_BLOCKS = 20_000_000
#: Serving simulation: most frames the pool's animation shows, and most frames x
#: blocks cells it sends to the browser.
MAX_ANIMATION_FRAMES = 80
MAX_ANIMATION_VALUES = 200_000
#: Inside the kernel: most splits a hand-set plan may have; the contexts it traces
#: (tokens) and the plans (tiles of the row) it draws.
MAX_SPLITS = 256
MAX_TRACE_TOKENS = 32_768
MAX_TRACE_TILES = 1024

# -- what the figures draw -----------------------------------------------------
#: Cells the cache figures draw before they sample or aggregate (a browser draws a
#: few tens of thousands of heatmap cells comfortably).
MAX_TABLE_CELLS = 20_000
MAX_POOL_CELLS = 12_000
#: Most rows a pool grid takes to give its block ids room
#: (:func:`explorer.cache.pool_figures.pool_shape`): past this the figure (24 px a
#: row) would outgrow the table beside it.
MAX_ID_ROWS = 12
MAX_WALK_CELLS = 8_192
MAX_WALK_POINTS = 4_000
#: Cells up to which numbers are printed inside heatmap cells.
MAX_TEXT_CELLS = 400
#: Up to this many sequences in a pool view, each gets a legend entry.
MAX_SEQUENCE_LEGEND = 12
#: Up to this many picked cells get a ring (past that the rings would cover the chart).
MAX_RINGS = 64
#: Past this many holders the reference-count colour bar is a gradient rather than one step per count.
MAX_STEPPED_REFS = 12
#: A kernel walk with more block segments than this is drawn one bar per tile.
MAX_WALK_SEGMENTS = 2000
#: Most block segments of a kernel walk that get their block id written in them
#: (Plotly hides each one too short for it at the cell text size).
MAX_WALK_TEXT = 160
#: Up to this many splits, each has a colour and a legend entry; past it, a colour bar.
MAX_SPLIT_LEGEND = 8
#: Most sequences a work-list figure draws; a larger batch shows every k-th one (and the traced one).
MAX_WORK_ROWS = 40
#: The draft tokens' tile mask draws each of its rows (query token x query head) up to this
#: many; past it, one row per token (a token's heads share its mask).
MAX_MASK_ROWS = 48
#: Characters of a recorded peer's label.
MAX_LABEL_CHARS = 20

#: The block-table page refuses configurations whose table would hold more
#: entries than this (the table itself is built on the CPU, then sampled for drawing).
MAX_TABLE_ENTRIES = 16_000_000

#: On the CPU the Triton kernel runs in the interpreter, about a second per call
#: at this much work; the benchmark page refuses more and caps the iterations.
CPU_MAX_WORK = 8192  # see cpu_work
CPU_MAX_WARMUP = 1
CPU_MAX_ITERS = 3


def clamp_value(value: float, low: float, high: float, label: str) -> tuple[float, str | None]:
    """``value`` brought into ``[low, high]``, and a note saying so (None when it was
    in range), e.g. ``"**Batch size**: 5,000 is above the maximum, 4,096; using 4,096."``"""
    used = min(max(value, low), high)
    if used == value:
        return value, None
    side, bound = ("above the maximum", high) if value > high else ("below the minimum", low)
    return used, (f"**{label}**: {format_number(value)} is {side}, {format_number(bound)}; "
                  f"using {format_number(used)}.")


def _table_advice(config: DecodeConfig, others: str) -> str:
    """``Use a larger block size or ...``: the block size only while a larger one is offered."""
    if config.block_size < MAX_BLOCK_SIZE:
        return f"Use a larger block size, {others}."
    return f"Use {others}."


def table_size_error(config: DecodeConfig) -> str | None:
    """Why the block-table page refuses ``config``, or None when it fits."""
    table = config.batch_size * config.max_num_blocks
    if table > MAX_TABLE_ENTRIES:
        return (
            f"The block table would hold {format_number(table)} entries (batch {format_number(config.batch_size)} x "
            f"{format_number(config.max_num_blocks)} blocks); this page builds tables of at most "
            f"{format_number(MAX_TABLE_ENTRIES)}. {_table_advice(config, 'a smaller batch or a shorter context')}"
        )
    if config.num_blocks > MAX_TABLE_ENTRIES:
        return (
            f"The physical pool would hold {format_number(config.num_blocks)} blocks "
            f"({format_number(config.num_blocks_used)} used plus {format_number(config.num_spare_blocks)} spare); "
            f"this page draws pools of at most {format_number(MAX_TABLE_ENTRIES)}. "
            f"{_table_advice(config, 'a shorter context or fewer spare blocks')}"
        )
    return None


#: The block-table page's sharing scenario writes every token of the batch through
#: the block manager in Python (prefill hashes, one call per decoded token), about
#: 10 us a token: it refuses batches of more tokens than this.
MAX_SHARING_TOKENS = 250_000


def sharing_size_error(config: DecodeConfig) -> str | None:
    """Why the block-table page's sharing scenario refuses ``config``, or None."""
    tokens = sum(config.lengths)
    if tokens > MAX_SHARING_TOKENS:
        return (f"The sharing scenario writes each of the batch's {format_number(tokens)} tokens through the block "
                f"manager; it builds batches of at most {format_number(MAX_SHARING_TOKENS)} tokens. Use a smaller "
                f"batch or a shorter context, or turn Sharing off.")
    return None


#: The Inside-the-kernel page refuses configurations whose block table and pool
#: together hold more entries than this: it lays out the whole batch on the CPU
#: (:func:`paged_attention.assign_blocks`) to find the traced sequence's physical
#: blocks and the launch plan, and draws neither the table nor the pool.
MAX_LAYOUT_ENTRIES = 40_000_000


def layout_size_error(config: DecodeConfig) -> str | None:
    """Why the Inside-the-kernel page refuses ``config``, or None when it fits.

    The page traces one sequence, but looks its blocks up in the block table of the
    whole batch, laid out over the whole pool: ``batch_size x max_num_blocks`` table
    entries plus ``num_blocks`` pool blocks, at most :data:`MAX_LAYOUT_ENTRIES`.
    """
    table = config.batch_size * config.max_num_blocks
    total = table + config.num_blocks
    if total <= MAX_LAYOUT_ENTRIES:
        return None
    return (
        f"To find the traced sequence's physical blocks, this page lays out the whole batch on the CPU: a block "
        f"table of {format_number(table)} entries (batch {format_number(config.batch_size)} x {format_number(config.max_num_blocks)} "
        f"blocks) over a pool of {format_number(config.num_blocks)} blocks, {format_number(total)} in all; it lays out "
        f"at most {format_number(MAX_LAYOUT_ENTRIES)}. "
        f"{_table_advice(config, 'a smaller batch, a shorter context or fewer spare blocks')}"
    )


@dataclass(frozen=True)
class RunPlan:
    """What the benchmark page will run: ``refusal`` set means it will not run."""

    warmup: int
    iters: int
    notes: tuple[str, ...] = ()
    refusal: str | None = None


#: Tokens' worth of interpreter time one program costs before it reads any token.
CPU_PROGRAM_COST = 64


def _most_new(config: DecodeConfig) -> int:
    """The most new (query) tokens of one sequence of ``config`` (1 for a plain step)."""
    return max(config.query_lengths, default=1)


def _cpu_work_terms(config: DecodeConfig) -> tuple[int, int]:
    """The two terms of :func:`cpu_work` (the rule text below spells them out)."""
    longest = max(config.lengths, default=0)
    return config.num_kv_heads * longest, config.num_heads * CPU_PROGRAM_COST * _most_new(config)


def cpu_work(config: DecodeConfig) -> int:
    """What the interpreter's time scales with: ``batch_size * max(num_kv_heads *
    longest context, num_heads * 64 * new tokens per sequence)``. The first term is
    the tokens the grouped kernel walks; the second counts the simple kernel's
    (query token, head) programs, each worth about 64 tokens of fixed cost, so many
    heads (or many new tokens) over short or empty contexts are not free. New tokens
    count at the most any sequence has (1 for the plain decode step)."""
    return config.batch_size * max(_cpu_work_terms(config))


#: The CPU cap as every page quotes it: the formula of :func:`cpu_work` and its limit.
CPU_WORK_RULE = (
    f"batch_size x max(num_kv_heads x longest context, num_heads x {CPU_PROGRAM_COST} x new tokens per sequence) "
    f"<= {format_number(CPU_MAX_WORK)}"
)


def cpu_work_detail(config: DecodeConfig) -> str:
    """:func:`cpu_work` of ``config`` written out in the order of :data:`CPU_WORK_RULE`,
    e.g. ``"5 x max(8 x 16, 32 x 64) = 10,240"`` (the new tokens' factor only when more
    than one: ``"2 x max(2 x 37, 4 x 64 x 4) = 2,048"``)."""
    longest = max(config.lengths, default=0)
    new = f" x {_most_new(config)}" if _most_new(config) > 1 else ""
    return (f"{format_number(config.batch_size)} x max({config.num_kv_heads} x {format_number(longest)}, "
            f"{config.num_heads} x {CPU_PROGRAM_COST}{new}) = {format_number(cpu_work(config))}")


def cpu_work_levers(config: DecodeConfig) -> tuple[str, ...]:
    """The settings that lower :func:`cpu_work` of ``config``: the batch and the
    factors of the larger term (``"batch"``, ``"query heads"``, ``"new tokens"``,
    ``"KV heads"``, ``"context"``), less those already at their minimum (a batch of
    1, one head, one new token, an empty context). Lowering the other term's factors
    changes nothing."""
    tokens, programs = _cpu_work_terms(config)
    longest = max(config.lengths, default=0)
    if programs >= tokens:
        levers = {"batch": config.batch_size > 1, "query heads": config.num_heads > 1,
                  "new tokens": _most_new(config) > 1}
    else:
        levers = {"batch": config.batch_size > 1, "KV heads": config.num_kv_heads > 1, "context": longest > 0}
    return tuple(lever for lever, can_fall in levers.items() if can_fall)


def cpu_refusal(config: DecodeConfig, lever_names: Mapping[str, str] | None = None) -> str | None:
    """Why the CPU cap refuses ``config`` (naming the rule, this configuration's
    value and what to lower), or None when it fits or runs on a GPU.

    ``lever_names`` maps each of :func:`cpu_work_levers` to what the page calls
    the control that sets it (e.g. ``"batch"`` -> ``"**Max batch**"``); by default
    the levers are named as they are."""
    if config.device != "cpu" or cpu_work(config) <= CPU_MAX_WORK:
        return None
    levers = cpu_work_levers(config)
    lower = (f"the {join_or(levers)}" if lever_names is None
             else join_or([lever_names.get(lever, lever) for lever in levers]))
    return (
        f"On the CPU the benchmark runs only when {CPU_WORK_RULE}; this configuration is "
        f"{cpu_work_detail(config)}. The Triton kernel runs in the interpreter here, a few seconds per call "
        f"at the limit. Lower {lower}, or run on a GPU."
    )


def largest_cpu_batch(config: DecodeConfig, longest: int, upto: int) -> int:
    """The largest batch size up to ``upto`` whose sequences of ``longest`` tokens,
    with the heads of ``config``, fit the CPU cap (:func:`cpu_work`); at least 1."""
    for batch in range(upto, 1, -1):
        if cpu_work(config.with_(batch_size=batch, context_lens=longest)) <= CPU_MAX_WORK:
            return batch
    return 1


def cap_iterations(device: str, warmup: int, iters: int) -> tuple[int, int, tuple[str, ...]]:
    """The warm-up and timed iterations to run on ``device``, and a note for each
    one capped: on the CPU at most :data:`CPU_MAX_WARMUP` and :data:`CPU_MAX_ITERS`;
    on a GPU as asked."""
    if device != "cpu":
        return warmup, iters, ()
    notes = []
    if warmup > CPU_MAX_WARMUP:
        notes.append(f"warm-up iterations capped from {warmup} to {CPU_MAX_WARMUP} on the CPU")
        warmup = CPU_MAX_WARMUP
    if iters > CPU_MAX_ITERS:
        notes.append(f"timed iterations capped from {iters} to {CPU_MAX_ITERS} on the CPU")
        iters = CPU_MAX_ITERS
    return warmup, iters, tuple(notes)


def plan_run(config: DecodeConfig, warmup: int, iters: int,
             lever_names: Mapping[str, str] | None = None) -> RunPlan:
    """Apply the CPU caps: refuse sizes the Triton interpreter cannot finish in
    seconds (:func:`cpu_refusal`, its advice worded with ``lever_names``), and cap
    the iterations (:func:`cap_iterations`). On a GPU everything runs as asked."""
    if config.device != "cpu":
        return RunPlan(warmup, iters)
    refusal = cpu_refusal(config, lever_names)
    if refusal:
        return RunPlan(warmup, iters, refusal=refusal)
    return RunPlan(*cap_iterations(config.device, warmup, iters))
