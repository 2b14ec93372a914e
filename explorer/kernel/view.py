"""Inputs and launch plan for explaining one (sequence, head) of a decode config.

The "Inside the kernel" page traces what ``_paged_decode_kernel`` does for one
query head of one sequence (and one of its new tokens, with draft tokens) of the
sidebar's configuration
(:func:`~explorer.kernel.trace.trace_decode`). The plan it traces is the one
``triton_decode`` would pick for the *whole* batch on the configured device and
dtype (:func:`launch_plan`): the split count depends on every sequence.

The trace itself needs K and V only for the traced row and its KV head, so
:func:`trace_row` builds exactly that on the CPU in float32 (the trace computes in
float64), with the row's blocks packed into a small pool, and maps the packed
block ids back to the physical ids of the configuration's block table. A
configuration with gigabytes of cache costs a few megabytes here.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from explorer.cards import Card
from explorer.formatting import count, format_number, sig3
from explorer.kernel.trace import KernelTrace, prefix_programs, trace_decode
from explorer.limits import MAX_TRACE_TILES, MAX_TRACE_TOKENS
from paged_attention.config import DecodeConfig
from paged_attention.poison import context_mask, fill_uncovered
from paged_attention.launch_plan import LaunchPlan
from paged_attention.shared_prefix import PrefixGroup, resolve_shared_prefixes
from paged_attention.tiling import cdiv
from paged_attention.triton_launch import TritonLaunch, plan_decode, plan_work
from paged_attention.validation import DecodeShape
from paged_attention.work_list import (
    ITEM_FIRST_BLOCK,
    ITEM_LAST_BLOCK,
    ITEM_SEQ,
    ITEM_SLOT,
    PREFIX_FIRST_BLOCK,
    PREFIX_FIRST_MEMBER,
    PREFIX_LAST_BLOCK,
    PREFIX_NUM_MEMBERS,
    PREFIX_SLOT,
    SEQUENCE_FIRST_SLOT,
)

#: Tile sizes (``BLOCK_N``) the page offers as overrides.
BLOCK_N_CHOICES: tuple[int, ...] = (16, 32, 64, 128, 256)


def decode_shape(config: DecodeConfig, block_tables: np.ndarray) -> DecodeShape:
    """The :class:`~paged_attention.validation.DecodeShape` the kernel would see for
    ``config`` with ``block_tables`` (``[batch_size, max_num_blocks]``), built
    without allocating the cache (its window, soft-cap and new tokens per sequence
    too; the sinks' values, which no plan reads, are zeros)."""
    tables = torch.as_tensor(np.asarray(block_tables), dtype=torch.int64)
    return DecodeShape(
        batch_size=config.batch_size, num_heads=config.num_heads, num_kv_heads=config.num_kv_heads,
        head_dim=config.head_dim, num_blocks=config.num_blocks, block_size=config.block_size,
        max_num_blocks=tables.shape[1], scale=1.0 / math.sqrt(config.head_dim),
        context_lens=torch.tensor(config.lengths, dtype=torch.int64), block_tables=tables,
        kv_dtype=config.kv_torch_dtype, window=config.window, soft_cap=config.soft_cap,
        sinks=torch.zeros(config.num_heads, dtype=torch.float64) if config.sinks else None,
        query_lens=torch.tensor(config.query_lengths, dtype=torch.int64) if config.has_query_lens else None,
    )


def prefix_groups(config: DecodeConfig, block_tables: np.ndarray) -> tuple[PrefixGroup, ...]:
    """The shared-prefix groups ``triton_decode(..., shared_prefixes="detect")``
    finds in ``block_tables`` (those with shared blocks; with a window, the members
    whose window reaches into them): the launcher's own
    :func:`~paged_attention.shared_prefix.resolve_shared_prefixes`."""
    return resolve_shared_prefixes("detect", decode_shape(config, block_tables))


def launch(
    config: DecodeConfig, block_tables: np.ndarray, *, groups: tuple[PrefixGroup, ...] = (), **plan_overrides: int
) -> TritonLaunch:
    """What ``triton_decode`` launches for ``config`` on its device and dtype, with
    shared-prefix ``groups`` and launch-plan overrides: the launcher's own planning
    (:func:`~paged_attention.triton_launch.plan_decode`), without the cache."""
    return plan_decode(decode_shape(config, block_tables), torch.device(config.device), config.torch_dtype,
                       groups=groups, **plan_overrides)


def launch_plan(
    config: DecodeConfig, block_tables: np.ndarray, *, num_splits: int | None = None, block_n: int | None = None,
    groups: tuple[PrefixGroup, ...] = (),
) -> LaunchPlan:
    """The plan ``triton_decode`` picks for ``config`` on its device and dtype, or
    with ``num_splits`` / ``block_n`` overridden (as
    :func:`~paged_attention.launch_plan.plan_launch` takes them). With shared-prefix
    ``groups``, the decode kernel's plan: for the blocks past each group's prefix
    (:func:`~paged_attention.shared_prefix.own_shape`)."""
    return launch(config, block_tables, groups=groups, num_splits=num_splits, block_n=block_n).plan


def prefix_plan(config: DecodeConfig, block_tables: np.ndarray, groups: tuple[PrefixGroup, ...]) -> LaunchPlan | None:
    """The prefix pass's plan (:func:`~paged_attention.shared_prefix.plan_prefix`)
    for ``groups``, or None without groups."""
    return launch(config, block_tables, groups=groups).prefix_plan


#: Columns of :func:`work_list`, one row per (program, sequence it reads for).
WORK_COLUMNS: tuple[str, ...] = ("seq", "pass", "order", "slot", "first_block", "end_block", "sequences")


def work_list(
    plan: LaunchPlan, context_lens, *, groups: tuple[PrefixGroup, ...] = (), prefix: LaunchPlan | None = None,
    query_group_size: int = 1, window_starts=None, block_size: int | None = None,
) -> pd.DataFrame:
    """Which program reads which blocks of which sequence, as the kernels launch them.

    Both passes' programs come from the launch's own work lists
    (:func:`~paged_attention.triton_launch.plan_work`): the prefix pass's with
    ``groups`` and their ``prefix`` plan, then the decode kernel's.

    Parameters
    ----------
    plan : LaunchPlan
        The decode kernel's plan (for the blocks past the prefixes, with groups).
    context_lens : sequence of int
        ``[batch_size]``.
    groups, prefix, query_group_size
        The shared-prefix groups, the prefix pass's plan and the query heads per KV
        head (which set how many sequences share a prefix-pass tile).
    window_starts : sequence of int, optional
        ``[batch_size]``: with a window, each sequence's first attended position
        (:attr:`~paged_attention.config.DecodeConfig.window_starts`, its first new
        token's): its programs start at that block. None: no window.

    Returns
    -------
    DataFrame
        Columns :data:`WORK_COLUMNS`, one row per program per sequence it reads for
        (a prefix program holds several): ``pass`` (``"prefix"`` or ``"own"``),
        ``order`` (launch order within its pass, per KV head), ``slot`` (the
        partial's slot, counted from the sequence's first), logical blocks
        ``[first_block, end_block)`` (a sequence's last program ends at its last
        needed block; it may be empty), ``sequences`` (sharing the program).
    """
    lens = torch.as_tensor([int(n) for n in context_lens], dtype=torch.int64)
    window_blocks = None if window_starts is None else [int(s) // plan.block_size for s in window_starts]
    pre, work = plan_work(plan, lens, groups=groups, prefix_plan=prefix, query_group_size=query_group_size,
                          window_blocks=window_blocks)
    rows = []
    if pre is not None:
        members = pre.members.tolist()
        for order, item in enumerate(pre.items.tolist()):
            first, n = item[PREFIX_FIRST_MEMBER], item[PREFIX_NUM_MEMBERS]
            for seq in members[first : first + n]:
                rows.append((seq, "prefix", order, item[PREFIX_SLOT], item[PREFIX_FIRST_BLOCK],
                             item[PREFIX_LAST_BLOCK], n))
    first_slot = [row[SEQUENCE_FIRST_SLOT] for row in work.sequences.tolist()]
    needed = cdiv(lens, plan.block_size).tolist()
    for order, item in enumerate(work.items.tolist()):
        seq, first_block = item[ITEM_SEQ], item[ITEM_FIRST_BLOCK]
        end = min(item[ITEM_LAST_BLOCK], needed[seq])  # a sequence's last program runs to its context's end
        rows.append((seq, "own", order, item[ITEM_SLOT] - first_slot[seq], first_block, max(first_block, end), 1))
    return pd.DataFrame(rows, columns=list(WORK_COLUMNS))


def work_list_summary(plan: LaunchPlan, work: pd.DataFrame, num_kv_heads: int, prefix: LaunchPlan | None = None) -> str:
    """The plan of :func:`work_list`'s ``work`` in a sentence (Markdown)."""
    own = work[work["pass"] == "own"]
    programs = int(own["order"].nunique())
    tokens = count(plan.tokens_per_split, "token")
    cap = f"{count(plan.blocks_per_split, 'block')} ({tokens})"
    if plan.balanced:
        text = (f"**Balanced plan** (a ragged batch): each sequence is cut into as few pieces of at most {cap} as "
                "it needs, of about equal length, and the longest pieces launch first")
    else:
        text = (f"**Equal splits**: every sequence is cut at the same boundaries, every {cap}, "
                f"in {count(plan.num_splits, 'split')} at most")
    text += (f"; **{count(programs, 'program')} per KV head** "
             f"({programs * num_kv_heads:,} in all over {count(num_kv_heads, 'KV head')})")
    pre = work[work["pass"] == "prefix"]
    if len(pre) and prefix is not None:
        text += (f". Before them, the **prefix pass** runs {count(int(pre['order'].nunique()), 'program')} per KV "
                 f"head over the shared blocks, pieces of at most {count(prefix.blocks_per_split, 'block')}; each "
                 "reads its piece once for all the sequences in its tile")
    return text + "."


def split_note(config: DecodeConfig, requested: int, plan: LaunchPlan) -> str | None:
    """Why ``plan`` runs fewer splits than the ``requested`` override, or None.

    :func:`~paged_attention.launch_plan.plan_launch` gives a split at least one
    block of the longest sequence, and every split but the last the same whole
    number of blocks, so 256 splits of 313 blocks become 157 of 2.
    """
    if plan.num_splits >= requested:
        return None
    longest = max(config.lengths, default=0)
    head = f"Splits capped from {requested:,} to {plan.num_splits:,}"
    if longest == 0:
        return f"{head}: every context is empty, so there is nothing to split."
    blocks = cdiv(longest, config.block_size)
    has = f"the longest sequence has {count(blocks, 'block')} of {count(config.block_size, 'token')}"
    if requested >= blocks:
        return f"{head}: {has}, and a split covers at least one block."
    per = plan.blocks_per_split
    return (
        f"{head}: {has}; every split but the last covers the same whole number of blocks, so {requested:,} "
        f"splits need {per:,} blocks each, and {plan.num_splits:,} splits of {per:,} already cover all {blocks:,}."
    )


def row_tiles(plan: LaunchPlan, context_len: int, first_block: int = 0) -> int:
    """Tiles the kernel walks for a row of ``context_len`` tokens under ``plan``,
    from ``first_block`` (past a shared prefix) on."""
    return sum(cdiv(last - first, plan.blocks_per_tile) * plan.subtiles
               for first, last in plan.sequence_items(context_len, first_block))


def row_splits(plan: LaunchPlan, context_len: int, first_block: int = 0) -> int:
    """Programs (splits) of ``plan`` that walk any of a row of ``context_len`` tokens
    from ``first_block`` on."""
    return sum(1 for first, last in plan.sequence_items(context_len, first_block) if last > first)


def window_block(config: DecodeConfig, seq: int) -> int:
    """The first block sequence ``seq``'s window needs (0 without a window): the
    kernel reads no table entry before it."""
    return config.window_starts[seq] // config.block_size


def row_walk(config: DecodeConfig, plan: LaunchPlan, seq: int) -> tuple[int, int]:
    """``(splits, tiles)``: the programs of ``plan`` that walk sequence ``seq`` of
    ``config`` and their tiles, from its window's first block (:func:`window_block`)
    on, as :func:`trace_row` walks it (outside a shared-prefix group)."""
    n, first = config.lengths[seq], window_block(config, seq)
    return row_splits(plan, n, first), row_tiles(plan, n, first)


#: The page's first view wants the traced row walked as this many splits ...
SHOWCASE_SPLITS = 4
#: ... of at least this many tiles each, where the row is long enough.
SHOWCASE_TILES_PER_SPLIT = 2


def showcase_plan(
    config: DecodeConfig, block_tables: np.ndarray, seq: int, groups: tuple[PrefixGroup, ...] = ()
) -> tuple[int, int] | None:
    """``(num_splits, block_n)`` to override the launch plan with so that sequence
    ``seq`` shows what the page explains (several tiles per split and a split-K
    merge), or None when the kernel's own plan (:func:`launch_plan`) already does,
    or the row is too short to split (fewer than two blocks).

    The override asks for :data:`SHOWCASE_SPLITS` splits (fewer for a row of
    fewer blocks) and the largest ``BLOCK_N`` of :data:`BLOCK_N_CHOICES` that gives
    each at least :data:`SHOWCASE_TILES_PER_SPLIT` tiles, or the smallest
    ``BLOCK_N`` when none does; a plan :func:`trace_size_error` would refuse is
    never proposed. None too when ``seq`` is in a shared-prefix group of
    ``groups``: the prefix pass's partials already make a merge.
    """
    if any(seq in g.sequences for g in groups):
        return None
    n, first = config.lengths[seq], window_block(config, seq)
    own_splits, own_tiles = row_walk(config, launch_plan(config, block_tables, groups=groups), seq)
    if own_splits >= 2 and own_tiles >= 2 * SHOWCASE_TILES_PER_SPLIT:
        return None
    splits = min(SHOWCASE_SPLITS, cdiv(n, config.block_size) - first)
    if splits < 2:
        return None
    candidates = []  # (enough tiles per split, block_n) of the plans that split this row
    for block_n in BLOCK_N_CHOICES:
        plan = launch_plan(config, block_tables, num_splits=splits, block_n=block_n, groups=groups)
        if row_splits(plan, n, first) >= 2 and trace_size_error(n, plan, first) is None:
            candidates.append((row_tiles(plan, n, first) >= SHOWCASE_TILES_PER_SPLIT * row_splits(plan, n, first),
                               block_n))
    if not candidates:
        return None
    enough = [block_n for ok, block_n in candidates if ok]
    return splits, (max(enough) if enough else min(block_n for _, block_n in candidates))


def trace_size_error(context_len: int, plan: LaunchPlan, first_block: int = 0) -> str | None:
    """Why the page will not trace this row (walked from ``first_block``, a
    window's), or None."""
    if context_len > MAX_TRACE_TOKENS:
        return (
            f"This sequence holds {context_len:,} tokens; the walkthrough traces at most "
            f"{MAX_TRACE_TOKENS:,}. Pick a shorter sequence or shorten the context in the sidebar."
        )
    tiles = row_tiles(plan, context_len, first_block)
    if tiles > MAX_TRACE_TILES:
        return (
            f"This plan walks {tiles:,} tiles for the sequence; the walkthrough draws at most "
            f"{MAX_TRACE_TILES:,}. Use a larger BLOCK_N or a shorter sequence."
        )
    return None


def row_inputs(
    config: DecodeConfig, context_len: int, head: int, *, query_len: int = 1, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, ...]:
    """CPU inputs holding one row: its KV head only, its blocks packed as ``0 .. n-1``.

    Returns ``(query, k_cache, v_cache, block_tables, context_lens)`` with
    ``query`` ``[query_len, group, head_dim]`` (the GQA group of ``head``, for each of
    the sequence's ``query_len`` new tokens; :func:`row_options` gives their
    ``query_lens``), caches
    ``[needed_blocks + 1, block_size, 1, head_dim]`` (one spare block of
    :data:`~paged_attention.poison.LOUD_VALUE`, like the unfilled tail slots) and the
    table ``[[0, 1, ..., needed_blocks - 1]]``. Values are standard normal, seeded
    by the configuration's seed and the row; with a window, the slots before its
    first new token's window start hold ``LOUD_VALUE`` too (the kernel must not read them).
    """
    group = config.num_heads // config.num_kv_heads
    bs, d = config.block_size, config.head_dim
    needed = cdiv(int(context_len), bs)
    kv_head = head // group
    gen = torch.Generator().manual_seed(zlib.crc32(f"{config.seed}/{context_len}/{kv_head}".encode()))
    query = torch.randn(query_len, group, d, generator=gen)
    shape = (needed + 1, bs, 1, d)
    k = torch.randn(shape, generator=gen)
    v = torch.randn(shape, generator=gen)
    table = torch.arange(max(needed, 1), dtype=torch.int32)[None, :]
    lens = torch.tensor([int(context_len)], dtype=torch.int32)
    starts = (None if config.window is None
              else torch.tensor([max(0, int(context_len) - query_len + 1 - config.window)]))
    fill_uncovered(k, v, context_mask(table, lens, needed + 1, bs, starts))
    return query.to(dtype), k.to(dtype), v.to(dtype), table, lens


def row_options(config: DecodeConfig, context_len: int, head: int, query_len: int = 1) -> dict:
    """The attention options for :func:`row_inputs`' row: ``window`` and ``soft_cap``
    of ``config``, with ``config.sinks`` float32 ``[group]`` sink logits (``2 *``
    standard normal, as :func:`~paged_attention.inputs.build_decode_inputs` draws
    them), seeded by the configuration's seed and the row, and with ``query_len``
    new tokens above 1 their ``query_lens`` (int32 ``[1]``; else None)."""
    group = config.num_heads // config.num_kv_heads
    sinks = None
    if config.sinks:
        gen = torch.Generator().manual_seed(zlib.crc32(f"{config.seed}/{context_len}/{head // group}/sinks".encode()))
        sinks = 2 * torch.randn(group, generator=gen)
    query_lens = torch.tensor([query_len], dtype=torch.int32) if query_len > 1 else None
    return dict(window=config.window, sinks=sinks, soft_cap=config.soft_cap, query_lens=query_lens)


def trace_row(
    config: DecodeConfig, block_tables: np.ndarray, seq: int, head: int, *, plan: LaunchPlan,
    groups: tuple[PrefixGroup, ...] = (), prefix: LaunchPlan | None = None, token: int | None = None,
) -> KernelTrace:
    """Trace ``_paged_decode_kernel`` for sequence ``seq``, query head ``head`` of
    ``config`` under ``plan`` (from :func:`launch_plan`), after the prefix pass of
    ``groups`` under ``prefix`` (:func:`prefix_plan`) when ``seq`` is in one; with
    draft tokens, for the sequence's new token ``token`` (by default its last), the
    tile holding all of them (the batch's most new tokens of one sequence set how
    the kernel masks, :func:`~explorer.kernel.tile_rows.kernel_ranges`; no prefix
    pass runs with draft tokens: ``groups`` then come empty from :func:`prefix_groups`).

    The trace's ``physical_blocks`` are the ids of ``block_tables[seq]``; ``head``
    and ``kv_head`` are those of the configuration, and so are the prefix pass's
    ``sequences`` (the row's group-mates in each prefix program), ``query_rows``
    and ``prefix_group``.

    Raises
    ------
    ValueError
        If ``seq``, ``head`` or ``token`` is out of range or the plan's block size differs.
    """
    if not 0 <= seq < config.batch_size:
        raise ValueError(f"seq must lie in [0, batch_size={config.batch_size}); got {seq}")
    if not 0 <= head < config.num_heads:
        raise ValueError(f"head must lie in [0, num_heads={config.num_heads}); got {head}")
    n, q_len = config.lengths[seq], config.query_lengths[seq]
    group = config.num_heads // config.num_kv_heads
    mine = next((g for g in groups if seq in g.sequences), None)
    if mine is not None and prefix is None:
        raise ValueError("a sequence in a shared-prefix group needs the prefix pass's plan (prefix=)")
    # The packed row stands alone: a group of one with the same shared blocks walks the
    # same pieces; the programs' real group-mates are filled in below.
    packed = (PrefixGroup((0,), mine.num_blocks),) if mine else None
    trace = trace_decode(row_inputs(config, n, head, query_len=q_len), 0, head % group, token=token, plan=plan,
                         shared_prefixes=packed, prefix_plan=prefix if mine else None,
                         query_tokens=max(config.query_lengths), **row_options(config, n, head, q_len))
    physical = np.asarray(block_tables)[seq]
    tiles, splits = trace.tiles.copy(), trace.splits.copy()
    tiles["physical_blocks"] = [tuple(int(physical[b]) for b in ids) for ids in tiles["physical_blocks"]]
    if mine is not None:
        lens = torch.tensor(config.lengths, dtype=torch.int64)
        batch_prefix, _ = plan_work(plan, lens, groups=groups, prefix_plan=prefix, query_group_size=group)
        programs = {slot: members for members, _, _, slot in prefix_programs(batch_prefix, seq)}
        for frame in (tiles, splits):
            pre = frame["pass"] == "prefix"
            frame.loc[pre, "sequences"] = frame.loc[pre, "split"].map(lambda s: len(programs[s]))
        pre = tiles["pass"] == "prefix"
        tiles.loc[pre, "query_rows"] = tiles.loc[pre, "split"].map(
            lambda s: sum(config.query_lengths[m] for m in programs[s]) * group)
    tile_rows = trace.tile_rows
    if tile_rows is not None:  # the packed row's heads are the group's: the configuration's
        tile_rows = tile_rows.assign(head=tile_rows["head"] + (head // group) * group)
    return replace(trace, seq=seq, head=head, kv_head=head // group, tiles=tiles, splits=splits, prefix_group=mine,
                   tile_rows=tile_rows)


#: Below this the replay's merged output "matches" the float64 reference.
MATCH_TOLERANCE = 1e-10


def trace_cards(tiles: pd.DataFrame, splits: pd.DataFrame, num_splits: int, context_len: int, block_size: int,
                error: float) -> list[Card]:
    """The page's five cards for a traced row: its tokens, the ``tiles`` walked, the
    block-table lookups, the partials merged (``splits``' rows: with a prefix pass,
    its pieces too; else of the plan's ``num_splits``) and the replay's ``error``
    against the float64 reference (a "MISMATCH" from :data:`MATCH_TOLERANCE`)."""
    num_prefix = int((splits["pass"] == "prefix").sum())
    merged = (Card("Partials merged", format_number(len(splits)), f"{num_prefix} prefix",
                   "the prefix pass's pieces of the shared blocks, then the row's own programs") if num_prefix else
              Card("Splits that run", format_number(len(splits)), f"of {num_splits}",
                   "splits past this sequence's last block return at once"))
    ok = error < MATCH_TOLERANCE
    return [
        Card("Tokens", format_number(context_len), help=f"{count(cdiv(context_len, block_size), 'block')} of {block_size}"),
        Card("Tiles walked", format_number(len(tiles)), help="online-softmax updates, all splits together"),
        Card("Table lookups", format_number(int(tiles["table_lookups"].sum())),
             help="one per block: a tile loads each of its blocks' table entries once; later subtiles reuse it"),
        merged,
        Card("Error vs reference", sig3(error), "matches" if ok else "MISMATCH",
             "max |trace − full softmax|: the merged output of the replay against reference_decode (float64, one "
             "full softmax)", color="normal" if ok else "inverse"),
    ]
