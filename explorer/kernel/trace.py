"""A step-by-step trace of the Triton decode kernel for one (sequence, query head), and with
draft tokens one of the sequence's new tokens.

:func:`trace_decode` replays, in plain float64 PyTorch, what
``_paged_decode_kernel`` in :mod:`paged_attention.triton_decode` does for one
query head of one sequence under a :class:`~paged_attention.launch_plan.LaunchPlan`:

1. The context is cut into splits (:meth:`LaunchPlan.sequence_items`): pieces of
   ``blocks_per_split`` logical blocks, or, under the balanced plan of a ragged
   batch, as few pieces of at most that many blocks as the row needs, of about
   equal length; each split is one program (split-K, flash-decoding).
2. A program walks its split one tile at a time: ``blocks_per_tile`` blocks of
   ``slots_per_tile`` slots (``block_n`` lanes), or, when a block is larger than a
   tile, ``subtiles`` tiles per block. It loads each block-table entry once per
   block and masks the lanes past the block or past the context.
3. After every tile the online softmax state is updated: running max ``m``,
   normalizer ``l`` and unnormalised output ``acc``, in the kernel's base-2 form
   (scores are scaled by ``scale * log2(e)`` and exponentiated with ``exp2``).
4. With more than one split, the per-split ``(m, l, acc)`` are merged with weights
   ``exp2(m_split - max m)``, as the kernel's fused merge (``merge_partials``, run by
   the last split to finish) does.
5. With shared-prefix groups (``shared_prefixes``), a row's shared blocks are read first by
   the prefix pass (``_prefix_decode_kernel``): each of its programs holds every
   group member's query heads of one KV head as the rows of one tile, so a
   shared block is read once per group. Its partials take the row's first slots;
   step 1 cuts only the blocks past the prefix, and step 4 merges them all.
6. The attention options, as the kernels apply them: with a sliding ``window``
   the programs start at the window's first block (no table entry before it is
   read) and the positions before its start are masked; with ``soft_cap`` each
   scaled logit ``s`` becomes ``soft_cap * tanh(s / soft_cap)`` before the online
   softmax (both are recorded, :attr:`KernelTrace.logits`); with ``sinks`` the
   head's sink logit joins the denominator once, where the row is finished
   (``normalize_output``: ``m' = max(m, sink)``, ``l' = l 2^(m - m') + 2^(sink - m')``).
7. Draft tokens (``query_lens``): a program's tile holds the sequence's ``q_len``
   new tokens x the query heads of its KV head, token ``t`` scoring the positions
   up to its own (and its own window): every tile is masked per row
   (:func:`~explorer.kernel.tile_rows.kernel_ranges`). The trace follows one
   token's row and records the tile's rows and, cell by cell, the mask of every
   tile where the rows' masks differ (:func:`~explorer.kernel.tile_rows.rows_differ`).
   No prefix pass runs with draft tokens (the launcher finds no group).

The plan and the programs are the launcher's own
(:func:`~paged_attention.triton_launch.plan_triton_decode`, which also checks the
arguments as the launcher does), so the trace never draws a plan the kernel would
refuse. Each step is recorded, with the distance of the partial answer ``acc / l`` to the
exact answer of its split and of the whole row, so a reader can watch the online
softmax converge. The arithmetic is float64 throughout: the trace shows the
algorithm, not the rounding of a float16 kernel, and its output equals
:func:`~paged_attention.reference.reference_decode` to float64 precision.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
import torch

from explorer.kernel.tile_rows import ROW_COLUMNS, kernel_ranges, mask_cells, row_span, rows_differ, rows_of_tile
from explorer.kernel.trace_record import LOGIT_COLUMNS, MASK_COLUMNS, SPLIT_COLUMNS, TILE_COLUMNS, KernelTrace
from paged_attention.config import is_whole
from paged_attention.inputs import DecodeInputs
from paged_attention.launch_plan import LaunchPlan
from paged_attention.reference import reference_decode
from paged_attention.shared_prefix import PrefixGroup
from paged_attention.tile_walk import LOG2E
from paged_attention.tiling import cdiv
from paged_attention.triton_launch import plan_triton_decode
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
    PrefixWork,
    WorkList,
)

def _attend(keys: torch.Tensor, values: torch.Tensor, q: torch.Tensor, scale: float,
            soft_cap: float | None) -> torch.Tensor:
    """Exact softmax attention of one query over ``[n, head_dim]`` keys and values
    (the logits soft-capped with ``soft_cap``; no sink)."""
    return torch.softmax(_cap(keys @ q * scale, soft_cap), dim=0) @ values


def _cap(logits: torch.Tensor, soft_cap: float | None) -> torch.Tensor:
    """``soft_cap * tanh(logits / soft_cap)``, or ``logits`` without a cap."""
    return logits if soft_cap is None else soft_cap * torch.tanh(logits / soft_cap)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def prefix_programs(work: PrefixWork, seq: int) -> list[tuple[tuple[int, ...], int, int, int]]:
    """The prefix pass's programs (per KV head) that hold sequence ``seq``'s rows,
    from its work list (:func:`~paged_attention.work_list.prefix_work`):
    ``(members, first_block, last_block, slot)`` in slot order; ``members`` are the
    sequences whose query rows share the program's tile. Empty when ``seq`` is in
    no group."""
    members = work.members.tolist()
    found = []
    for row in work.items.tolist():
        first = row[PREFIX_FIRST_MEMBER]
        program = tuple(members[first : first + row[PREFIX_NUM_MEMBERS]])
        if seq in program:
            found.append((program, row[PREFIX_FIRST_BLOCK], row[PREFIX_LAST_BLOCK], row[PREFIX_SLOT]))
    return sorted(found, key=lambda p: p[3])


def own_programs(work: WorkList, seq: int, needed_blocks: int) -> list[tuple[int, int, int]]:
    """The decode kernel's programs for sequence ``seq``, from the launch's work
    list: ``(slot, first_block, last_block)`` in slot order, the slot counted from
    the sequence's first (the prefix pass's come before), and ``last_block`` cut at
    the row's ``needed_blocks`` as the kernel cuts it."""
    first_slot = work.sequences.tolist()[seq][SEQUENCE_FIRST_SLOT]
    return sorted((row[ITEM_SLOT] - first_slot, row[ITEM_FIRST_BLOCK], min(row[ITEM_LAST_BLOCK], needed_blocks))
                  for row in work.items.tolist() if row[ITEM_SEQ] == seq)


def trace_decode(
    inputs: DecodeInputs | Sequence[torch.Tensor],
    seq: int = 0,
    head: int = 0,
    *,
    token: int | None = None,
    plan: LaunchPlan | None = None,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
    prefix_plan: LaunchPlan | None = None,
    query_tokens: int | None = None,
    **plan_overrides: int,
) -> KernelTrace:
    """Trace ``_paged_decode_kernel`` (and the split merge) for one query head of
    one query token.

    With ``shared_prefixes`` it traces ``triton_decode(...,
    shared_prefixes=shared_prefixes)``: when ``seq`` is in a group, the prefix pass's
    programs (``_prefix_decode_kernel``: the group's sequences x the query heads of
    one KV head as one tile, against one piece of the shared blocks) write the
    row's first partials, the decode kernel's programs walk the rest of its blocks,
    and the merge takes them all. With ``query_lens`` (draft tokens) the kernel's
    tile holds every new token x query head of the KV head, each row scoring the
    positions up to its token (:mod:`explorer.kernel.tile_rows`); the trace follows
    the traced token's row and records the tile's rows and per-row masks.

    Parameters
    ----------
    inputs : DecodeInputs or sequence of Tensor
        A :class:`DecodeInputs` (an fp8 cache with its scales, draft tokens with
        their ``query_lens``), or ``(query, k_cache, v_cache, block_tables,
        context_lens)`` as :func:`~paged_attention.triton_decode.triton_decode`
        takes them (float64 is accepted too).
    seq : int
        Sequence (batch row), ``0 <= seq < batch_size``.
    head : int
        Query head, ``0 <= head < num_heads``.
    token : int, optional
        The sequence's query token, ``0 <= token < query_lens[seq]``; by default
        its last (the one a plain decode step would bring).
    plan, scale, k_scale, v_scale, window, sinks, soft_cap, query_lens, shared_prefixes, prefix_plan, **plan_overrides
        As for :func:`~paged_attention.triton_decode.prepare_triton_decode`: by
        default the plans ``triton_decode`` would use (``k_scale`` and ``v_scale``
        default to a :class:`DecodeInputs`'s own, ``query_lens`` too, and
        ``window``, ``sinks`` and ``soft_cap``, when none is given, to its
        options); ``num_splits`` or ``block_n`` (etc.) trace another plan.
    query_tokens : int, optional
        The kernel's ``QUERY_TOKENS`` (the most query tokens of one sequence of the
        batch it launched for), when ``inputs`` hold a part of that batch (the
        explorer packs one sequence): at least the inputs' own most, which is the
        default. Above 1 the kernel masks every row at its own length, a sequence
        of one token too (:func:`~explorer.kernel.tile_rows.kernel_ranges`).

    Returns
    -------
    KernelTrace
        Empty ``tiles`` and ``splits`` and a zero output when the context is empty.

    Raises
    ------
    ValueError
        On any argument the launcher refuses (with its message:
        :func:`~paged_attention.triton_launch.plan_triton_decode`), or ``seq``,
        ``head``, ``token`` or ``query_tokens`` out of range.

    Examples
    --------
    >>> inputs = build_decode_inputs(DecodeConfig(batch_size=1, context_lens=300, block_size=16, query_lens=4))
    >>> trace = trace_decode(inputs, seq=0, head=3, token=1, num_splits=2)
    >>> trace.tiles[["split", "token_start", "token_end", "m", "l", "err_vs_row"]]
    """
    args = inputs.args() if isinstance(inputs, DecodeInputs) else tuple(inputs)
    if len(args) != 5:
        raise ValueError(
            "inputs must be a DecodeInputs or (query, k_cache, v_cache, block_tables, context_lens); "
            f"got {len(args)} items"
        )
    if isinstance(inputs, DecodeInputs) and k_scale is None and v_scale is None:
        k_scale, v_scale = inputs.k_scale, inputs.v_scale
    if isinstance(inputs, DecodeInputs) and window is None and sinks is None and soft_cap is None:
        window, sinks, soft_cap = inputs.config.window, inputs.sinks, inputs.config.soft_cap
    if isinstance(inputs, DecodeInputs) and query_lens is None:
        query_lens = inputs.query_lens
    query, k_cache, v_cache, block_tables, context_lens = args
    options = dict(window=window, sinks=sinks, soft_cap=soft_cap)
    launch = plan_triton_decode(
        *args, scale=scale, k_scale=k_scale, v_scale=v_scale, **options, query_lens=query_lens, plan=plan,
        shared_prefixes=shared_prefixes, prefix_plan=prefix_plan, allow_float64=True, **plan_overrides,
    )
    shape, plan = launch.shape, launch.plan
    if not 0 <= seq < shape.batch_size:
        raise ValueError(f"seq must lie in [0, batch_size={shape.batch_size}); got {seq}")
    if not 0 <= head < shape.num_heads:
        raise ValueError(f"head must lie in [0, num_heads={shape.num_heads}); got {head}")
    q_len = int(shape.query_lens_or_ones[seq])
    token = q_len - 1 if token is None else token
    if not is_whole(token) or not 0 <= token < q_len:
        raise ValueError(f"token must lie in [0, query_lens[{seq}]={q_len}); got {token!r}")
    kernel_tokens = max(1, shape.max_query_len) if query_tokens is None else query_tokens
    if not is_whole(kernel_tokens) or kernel_tokens < max(1, shape.max_query_len):
        raise ValueError(f"query_tokens must be an integer of at least the inputs' most query tokens of one "
                         f"sequence ({max(1, shape.max_query_len)}); got {query_tokens!r}")
    group = next((g for g in launch.groups if seq in g.sequences), None)

    bs = shape.block_size
    kv_head = head // shape.query_group_size
    n = int(shape.context_lens[seq])
    start = int(shape.window_starts[seq])  # the first token's window: where the tiles start loading
    row_start, row_len = row_span(n, q_len, token, shape.window)  # the positions this row scores
    first_read = start // bs  # the kernel reads no table entry before the window's block
    table = shape.block_tables[seq]  # CPU int64
    needed_blocks = cdiv(n, bs)
    first_row, end_row = int(shape.query_starts[seq]), int(shape.query_starts[seq + 1])
    q = query[first_row + token, head].detach().cpu().double()
    # Only the blocks this row reads, in logical order: [needed_blocks - first_read, block_size, head_dim].
    # (A copy of the whole pool could be gigabytes on a GPU; entries before a window may be freed.)
    row_table = table[first_read:needed_blocks].to(k_cache.device)
    keys = k_cache[row_table][:, :, kv_head].detach().cpu().double()
    values = v_cache[row_table][:, :, kv_head].detach().cpu().double()
    if shape.is_fp8:  # the kernel folds the scales into the logits and the output: the same in exact arithmetic
        keys, values = keys * float(shape.k_scale[kv_head]), values * float(shape.v_scale[kv_head])
    cap = shape.soft_cap
    sink = None if shape.sinks is None else float(shape.sinks[head])

    # The row's attended tokens [row_start, row_len), for the exact answers the partials are compared
    # to (over the positions only: the sink joins the denominator at the end).
    row_keys = keys.reshape(-1, shape.head_dim)[row_start - first_read * bs : row_len - first_read * bs]
    row_values = values.reshape(-1, shape.head_dim)[row_start - first_read * bs : row_len - first_read * bs]
    row_answer = _attend(row_keys, row_values, q, shape.scale, cap)
    reference = reference_decode(
        query[first_row:end_row], k_cache, v_cache, block_tables[seq : seq + 1], context_lens[seq : seq + 1],
        scale=shape.scale, k_scale=k_scale, v_scale=v_scale, window=window, soft_cap=soft_cap, sinks=sinks,
        query_lens=None if query_lens is None else query_lens[seq : seq + 1],
    )[token, head].cpu()

    tile_rows: list[dict] = []
    split_rows: list[dict] = []
    logit_rows: list[tuple] = []
    mask_rows: list[tuple] = []
    partials: list[tuple[float, float, torch.Tensor]] = []

    def walk(split: int, first_block: int, last_block: int, ranges: list[tuple[int, int, bool, bool]],
             tiling: LaunchPlan, pass_: str, sequences: int, rows: int, load_start: int) -> None:
        """One program's walk over logical blocks ``[first_block, last_block)``, range by
        range (``(first, last, per_row, window)``, each tiled afresh) in ``tiling``'s
        tiles for ``sequences`` sequences' ``rows`` query rows, loading from token
        ``load_start`` (the earliest window start of the program's rows), appending its
        tile rows, mask cells, split row and partial."""
        lanes = tiling.blocks_per_tile * tiling.slots_per_tile
        split_start, split_end = max(first_block * bs, row_start), min(last_block * bs, row_len)
        split_tokens = slice(split_start - row_start, max(split_end - row_start, 0))
        split_answer = _attend(row_keys[split_tokens], row_values[split_tokens], q, shape.scale, cap)
        program = {"split": split, "pass": pass_, "sequences": sequences, "query_rows": rows}

        m = -math.inf
        l = 0.0
        acc = torch.zeros(shape.head_dim, dtype=torch.float64)
        tile = 0
        for range_first, range_last, per_row, has_window in ranges:
            # As attend_blocks: with blocks of several tiles and a window, the subtiles that
            # end before the window's start are skipped (the walk starts at flat subtile t_first).
            t_first = range_first * tiling.subtiles
            if has_window:
                t_first = max(t_first, (load_start // bs) * tiling.subtiles + (load_start % bs) // tiling.slots_per_tile)
            for block in range(range_first, range_last, tiling.blocks_per_tile):
                # Lanes are laid out as the kernel lays them out: [blocks_per_tile, slots_per_tile].
                logical = block + torch.arange(tiling.blocks_per_tile)
                block_ok = logical < range_last
                # One table load per block of the tile; masked entries read as block 0.
                physical = torch.where(block_ok, table[logical.clamp(max=needed_blocks - 1)], 0)
                subs = [sub for sub in range(tiling.subtiles)
                        if tiling.blocks_per_tile > 1 or block * tiling.subtiles + sub >= t_first]
                for sub in subs:
                    slot = sub * tiling.slots_per_tile + torch.arange(tiling.slots_per_tile)
                    position = (logical[:, None] * bs + slot[None, :]).flatten()
                    # Padded slots (block_size not a power of two), blocks past the range and
                    # tokens past the context (and before the window) load nothing; a per-row
                    # tile masks each row's scores at its own length and window start too (the
                    # prefix kernel's rows are whole sequences', the decode kernel's tokens').
                    real = (block_ok[:, None] & (slot[None, :] < bs)).flatten()
                    loaded = real & (position < n) & ((position >= load_start) if has_window else True)
                    valid = loaded & ((position < row_len) & (position >= row_start) if per_row else True)
                    lane_logical = logical.repeat_interleave(tiling.slots_per_tile)
                    lane_physical = physical.repeat_interleave(tiling.slots_per_tile)
                    lane_slot = slot.repeat(tiling.blocks_per_tile)

                    # The kernel reads k_cache[physical, slot]; `keys` holds the row's read
                    # blocks in logical order, so index it by logical block. Masked lanes
                    # load 0, like the kernel's ``other=0.0``.
                    k = torch.zeros(lanes, shape.head_dim, dtype=torch.float64)
                    v = torch.zeros(lanes, shape.head_dim, dtype=torch.float64)
                    k[valid] = keys[lane_logical[valid] - first_read, lane_slot[valid]]
                    v[valid] = values[lane_logical[valid] - first_read, lane_slot[valid]]

                    # The kernel's online softmax in base 2, on the capped logits.
                    raw = k @ q * shape.scale
                    capped = _cap(raw, cap)
                    scores = torch.where(valid, capped * LOG2E, -math.inf)
                    logit_rows.extend((t, split, tile, r, c) for t, r, c in zip(
                        position[valid].tolist(), raw[valid].tolist(), capped[valid].tolist()))
                    held = position[loaded]
                    if (per_row and pass_ == "own" and q_len > 1 and held.numel()
                            and rows_differ(int(held.min()), int(held.max()), n, q_len, shape.window)):
                        mask_rows.extend((split, tile, *cell) for cell in mask_cells(
                            position[real].tolist(), loaded[real].tolist(), n, q_len, shape.window))
                    tile_max = float(scores.max())
                    m_new = max(m, tile_max)
                    # A state that has seen no valid token keeps max -inf; shifting by 0
                    # gives exp2(-inf) = 0 rather than exp2(nan).
                    m_safe = 0.0 if m_new == -math.inf else m_new
                    alpha = 2.0 ** (m - m_safe)
                    p = torch.exp2(scores - m_safe)
                    l = l * alpha + float(p.sum())
                    acc = acc * alpha + p @ v
                    m = m_new

                    valid_tokens = position[valid]
                    # An all-masked tile gets an empty range where its block's tokens end.
                    end_block = min(block + tiling.blocks_per_tile, range_last)
                    empty_at = max(min(end_block * bs, row_len), row_start)
                    partial = acc / l if l > 0 else torch.full_like(acc, math.nan)
                    touched = tuple(dict.fromkeys(lane_physical[valid].tolist()))
                    tile_rows.append({
                        **program,
                        "tile": tile,
                        "subtile": sub,
                        "first_block": block,
                        "end_block": end_block,
                        "per_row": per_row,
                        "token_start": int(valid_tokens[0]) if valid_tokens.numel() else empty_at,
                        "token_end": int(valid_tokens[-1]) + 1 if valid_tokens.numel() else empty_at,
                        "valid_tokens": int(valid.sum()),
                        "masked_lanes": lanes - int(valid.sum()),
                        "loaded_tokens": int(loaded.sum()),
                        "causal_masked": int((loaded & (position >= row_len)).sum()),
                        "physical_blocks": touched,
                        "num_physical_blocks": len(touched),
                        # One load per block, on its first subtile walked; later subtiles reuse it.
                        "table_lookups": int(block_ok.sum()) if sub == subs[0] else 0,
                        "raw_max": float(torch.where(valid, raw, -math.inf).max()),
                        "tile_max": tile_max,
                        "m": m,
                        "alpha": alpha,
                        "l": l,
                        "err_vs_split": _max_diff(partial, split_answer),
                        "err_vs_row": _max_diff(partial, row_answer),
                    })
                    tile += 1

        partials.append((m, l, acc))
        split_rows.append({
            "split": split,
            "pass": pass_,
            "sequences": sequences,
            "first_block": first_block,
            "end_block": last_block,
            "token_start": split_start,
            "token_end": max(split_end, split_start),
            "num_tiles": tile,
            "table_lookups": last_block - first_block,
            "m": m,
            "l": l,
            "err_vs_row": _max_diff(acc / l, row_answer) if l > 0 else math.nan,
        })

    # The prefix pass's programs come first: their partials fill the row's first slots. Their
    # tiles load from the earliest window start of the rows they hold, and mask every row.
    starts, q_lens = shape.window_starts.tolist(), shape.query_lens_or_ones.tolist()
    pieces = prefix_programs(launch.prefix, seq) if group else []
    for members, first_block, last_block, slot in pieces:
        walk(slot, first_block, last_block, [(first_block, last_block, True, shape.window is not None)],
             launch.prefix_plan, "prefix", len(members), sum(q_lens[s] for s in members) * shape.query_group_size,
             min(starts[s] for s in members))
    for slot, first_block, last_block in own_programs(launch.work, seq, needed_blocks):
        if shape.window is not None:  # as the kernel: from the live window's first block
            first_block = max(first_block, start // bs)
        if first_block < last_block:  # else an empty row: its one program writes zeros, or merges the prefix's
            walk(slot, first_block, last_block,
                 kernel_ranges(first_block, last_block, shape.window, kernel_tokens), plan, "own", 1,
                 q_len * shape.query_group_size, start)

    output = torch.zeros(shape.head_dim, dtype=torch.float64)
    m_max, total, sink_term = -math.inf, 0.0, 0.0
    if partials:
        # The merge, as merge_partials does it (its chunked rescaling gives the same sums). Each split's (m, l, acc) is
        # relative to its own max; rescaling by exp2(m - m_max) puts them on the
        # common max before summing. With one split the weight is exactly 1.
        m_max = max(m for m, _, _ in partials)
        weights = [2.0 ** (m - m_max) for m, _, _ in partials]
        total = sum(w * l for w, (_, l, _) in zip(weights, partials))
        acc = sum(w * acc for w, (_, _, acc) in zip(weights, partials))
        # normalize_output: the sink's term joins the denominator once, on the common max
        # m' = max(m, sink) so nothing overflows; reported on the scale of 2^m_max.
        m_top = m_max if sink is None else max(m_max, sink * LOG2E)
        a = 2.0 ** (m_max - m_top)
        sink_part = 0.0 if sink is None else 2.0 ** (sink * LOG2E - m_top)
        output = acc * a / (total * a + sink_part)
        sink_term = sink_part / a
        for row, w, (_, l, _) in zip(split_rows, weights, partials):
            row["weight"] = w
            row["share"] = w * l / (total + sink_term)
    elif sink is not None:
        sink_term = 1.0  # no position: the sink holds all the mass, and the output is zero

    return KernelTrace(
        seq=seq,
        head=head,
        kv_head=kv_head,
        context_len=n,
        block_size=bs,
        scale=shape.scale,
        plan=plan,
        tiles=pd.DataFrame(tile_rows, columns=list(TILE_COLUMNS)),
        splits=pd.DataFrame(split_rows, columns=list(SPLIT_COLUMNS)),
        output=output,
        reference=reference,
        prefix_group=group,
        prefix_plan=launch.prefix_plan if group else None,
        window_start=start,
        soft_cap=cap,
        logits=pd.DataFrame(logit_rows, columns=list(LOGIT_COLUMNS)).sort_values("token", ignore_index=True),
        sink=sink,
        m_final=m_max,
        l_final=total,
        sink_term=sink_term,
        query_len=q_len,
        token=token,
        tile_rows=(pd.DataFrame(rows_of_tile(n, q_len, shape.query_group_size, kv_head, shape.window),
                                columns=list(ROW_COLUMNS)) if q_len > 1 else None),
        mask=pd.DataFrame(mask_rows, columns=list(MASK_COLUMNS)) if q_len > 1 else None,
    )
