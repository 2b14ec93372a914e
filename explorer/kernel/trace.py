"""A step-by-step trace of the Triton decode kernel for one (sequence, query head).

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
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

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

#: Columns of :attr:`KernelTrace.tiles`, one row per tile (online-softmax update).
TILE_COLUMNS: tuple[str, ...] = (
    "split", "pass", "sequences", "query_rows", "tile", "subtile", "first_block", "end_block", "token_start", "token_end",
    "valid_tokens", "masked_lanes", "physical_blocks", "num_physical_blocks", "table_lookups",
    "tile_max", "m", "alpha", "l", "err_vs_split", "err_vs_row",
)

#: Columns of :attr:`KernelTrace.splits`, one row per split that runs.
SPLIT_COLUMNS: tuple[str, ...] = (
    "split", "pass", "sequences", "first_block", "end_block", "token_start", "token_end", "num_tiles",
    "table_lookups", "m", "l", "weight", "share", "err_vs_row",
)


@dataclass(frozen=True)
class KernelTrace:
    """What the kernel does for one (sequence, query head).

    Attributes
    ----------
    seq, head, kv_head : int
        The traced row; ``kv_head = head // (num_heads // num_kv_heads)``.
    context_len, block_size : int
        Tokens in the sequence's context; tokens per block.
    scale : float
        Softmax scale (natural units); the kernel multiplies scores by
        ``scale * log2(e)``.
    plan : LaunchPlan
        The tiling and split-K plan traced.
    tiles : DataFrame
        One row per tile, columns :data:`TILE_COLUMNS`:

        - ``split`` (the program's partial-result slot in the row: the prefix
          pass's pieces first), ``pass`` (``"prefix"``: a program of the
          shared-prefix pass, ``"own"``: one of the decode kernel's), ``sequences``
          (sequences whose rows the program holds in one tile: 1 for ``"own"``)
          and ``query_rows`` (``sequences`` x the query heads of the KV head);
        - ``tile`` (index within the split), ``subtile`` (index within
          the block when a block spans several tiles, else 0);
        - ``first_block``, ``end_block``: logical blocks the tile covers,
          ``[first_block, end_block)``;
        - ``token_start``, ``token_end``: the valid logical tokens,
          ``[token_start, token_end)`` (empty when every lane is masked);
        - ``valid_tokens``; ``masked_lanes`` = ``block_n - valid_tokens``;
        - ``physical_blocks`` (tuple of distinct physical block ids read),
          ``num_physical_blocks``;
        - ``table_lookups``: block-table entries loaded; one per block, on the
          block's first subtile (later subtiles reuse it);
        - ``tile_max``: the tile's largest score, ``m``: running max after the
          tile, ``alpha = exp2(m_before - m)``: factor that rescaled the earlier
          ``l`` and ``acc``, ``l``: normalizer (all in log2 units,
          i.e. scores times ``scale * log2(e)``);
        - ``err_vs_split``, ``err_vs_row``: max abs difference of the partial
          output ``acc / l`` from the exact answer of the split and of the row.
    splits : DataFrame
        One row per split that runs, columns :data:`SPLIT_COLUMNS`: its pass and
        sequences (as in ``tiles``), its blocks and
        tokens, ``num_tiles``, ``table_lookups``, final ``m`` and ``l``, the merge
        ``weight = exp2(m - max m)`` and ``share = weight * l / sum(weight * l)``
        (its part of the softmax mass), and ``err_vs_row`` of its own ``acc / l``.
    output : Tensor
        ``[head_dim]`` float64, the traced result (merged when :attr:`merged`).
    reference : Tensor
        ``[head_dim]`` float64, ``reference_decode`` for this row.
    prefix_group : PrefixGroup or None
        The row's shared-prefix group, when a prefix pass reads its first
        ``prefix_group.num_blocks`` blocks; ``plan`` then covers only the rest.
    prefix_plan : LaunchPlan or None
        The prefix pass's tile and pieces (with ``prefix_group``).
    """

    seq: int
    head: int
    kv_head: int
    context_len: int
    block_size: int
    scale: float
    plan: LaunchPlan
    tiles: pd.DataFrame
    splits: pd.DataFrame
    output: torch.Tensor
    reference: torch.Tensor
    prefix_group: PrefixGroup | None = None
    prefix_plan: LaunchPlan | None = None

    @property
    def merged(self) -> bool:
        """Whether partials are merged (the plan has more than one split, or a
        prefix pass wrote some of the row's partials)."""
        return self.plan.num_splits > 1 or self.prefix_group is not None

    @property
    def num_tiles(self) -> int:
        return len(self.tiles)

    @property
    def table_lookups(self) -> int:
        """Block-table entries loaded in all: ``ceil(context_len / block_size)``."""
        return int(self.tiles["table_lookups"].sum()) if len(self.tiles) else 0

    @property
    def max_abs_error(self) -> float:
        """Max abs difference of :attr:`output` from :attr:`reference`."""
        return float((self.output - self.reference).abs().max()) if self.output.numel() else 0.0


def _attend(keys: torch.Tensor, values: torch.Tensor, q: torch.Tensor, scale: float) -> torch.Tensor:
    """Exact softmax attention of one query over ``[n, head_dim]`` keys and values."""
    return torch.softmax(keys @ q * scale, dim=0) @ values


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
    plan: LaunchPlan | None = None,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
    prefix_plan: LaunchPlan | None = None,
    **plan_overrides: int,
) -> KernelTrace:
    """Trace ``_paged_decode_kernel`` (and the split merge) for one query head.

    With ``shared_prefixes`` it traces ``triton_decode(...,
    shared_prefixes=shared_prefixes)``: when ``seq`` is in a group, the prefix pass's
    programs (``_prefix_decode_kernel``: the group's sequences x the query heads of
    one KV head as one tile, against one piece of the shared blocks) write the
    row's first partials, the decode kernel's programs walk the rest of its blocks,
    and the merge takes them all.

    Parameters
    ----------
    inputs : DecodeInputs or sequence of Tensor
        A :class:`DecodeInputs` (an fp8 cache with its scales), or ``(query,
        k_cache, v_cache, block_tables, context_lens)`` as
        :func:`~paged_attention.triton_decode.triton_decode` takes them (float64 is
        accepted too).
    seq : int
        Sequence (batch row), ``0 <= seq < batch_size``.
    head : int
        Query head, ``0 <= head < num_heads``.
    plan, scale, k_scale, v_scale, shared_prefixes, prefix_plan, **plan_overrides
        As for :func:`~paged_attention.triton_decode.prepare_triton_decode`: by
        default the plans ``triton_decode`` would use (``k_scale`` and ``v_scale``
        default to a :class:`DecodeInputs`'s own); ``num_splits`` or ``block_n``
        (etc.) trace another plan.

    Returns
    -------
    KernelTrace
        Empty ``tiles`` and ``splits`` and a zero output when the context is empty.

    Raises
    ------
    ValueError
        On any argument the launcher refuses (with its message:
        :func:`~paged_attention.triton_launch.plan_triton_decode`), or ``seq`` or
        ``head`` out of range.

    Examples
    --------
    >>> inputs = build_decode_inputs(DecodeConfig(batch_size=1, context_lens=300, block_size=16))
    >>> trace = trace_decode(inputs, seq=0, head=3, num_splits=2)
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
    query, k_cache, v_cache, block_tables, context_lens = args
    launch = plan_triton_decode(
        *args, scale=scale, k_scale=k_scale, v_scale=v_scale, plan=plan, shared_prefixes=shared_prefixes,
        prefix_plan=prefix_plan, allow_float64=True, **plan_overrides,
    )
    shape, plan = launch.shape, launch.plan
    if not 0 <= seq < shape.batch_size:
        raise ValueError(f"seq must lie in [0, batch_size={shape.batch_size}); got {seq}")
    if not 0 <= head < shape.num_heads:
        raise ValueError(f"head must lie in [0, num_heads={shape.num_heads}); got {head}")
    group = next((g for g in launch.groups if seq in g.sequences), None)

    bs = shape.block_size
    kv_head = head // shape.query_group_size
    n = int(shape.context_lens[seq])
    table = shape.block_tables[seq]  # CPU int64
    needed_blocks = cdiv(n, bs)
    q = query[seq, head].detach().cpu().double()
    # Only this row's blocks, in logical order: [needed_blocks, block_size, head_dim].
    # (A copy of the whole pool could be gigabytes on a GPU.)
    row_table = table[:needed_blocks].to(k_cache.device)
    keys = k_cache[row_table][:, :, kv_head].detach().cpu().double()
    values = v_cache[row_table][:, :, kv_head].detach().cpu().double()
    if shape.is_fp8:  # the kernel folds the scales into the logits and the output: the same in exact arithmetic
        keys, values = keys * float(shape.k_scale[kv_head]), values * float(shape.v_scale[kv_head])
    scale_log2e = shape.scale * LOG2E

    # The row's tokens in logical order, for the exact answers the partials are compared to.
    row_keys = keys.reshape(-1, shape.head_dim)[:n]
    row_values = values.reshape(-1, shape.head_dim)[:n]
    reference = reference_decode(
        query[seq : seq + 1], k_cache, v_cache, block_tables[seq : seq + 1], context_lens[seq : seq + 1],
        scale=shape.scale, k_scale=k_scale, v_scale=v_scale,
    )[0, head].cpu()

    tile_rows: list[dict] = []
    split_rows: list[dict] = []
    partials: list[tuple[float, float, torch.Tensor]] = []

    def walk(split: int, first_block: int, last_block: int, tiling: LaunchPlan, pass_: str, sequences: int) -> None:
        """One program's walk over logical blocks ``[first_block, last_block)`` in
        ``tiling``'s tiles, appending its tile rows, split row and partial."""
        lanes = tiling.blocks_per_tile * tiling.slots_per_tile
        split_start, split_end = first_block * bs, min(last_block * bs, n)
        split_tokens = slice(split_start, split_end)
        split_answer = _attend(row_keys[split_tokens], row_values[split_tokens], q, shape.scale)
        program = {"split": split, "pass": pass_, "sequences": sequences,
                   "query_rows": sequences * shape.query_group_size}

        m = -math.inf
        l = 0.0
        acc = torch.zeros(shape.head_dim, dtype=torch.float64)
        tile = 0
        for block in range(first_block, last_block, tiling.blocks_per_tile):
            # Lanes are laid out as the kernel lays them out: [blocks_per_tile, slots_per_tile].
            logical = block + torch.arange(tiling.blocks_per_tile)
            block_ok = logical < last_block
            # One table load per block of the tile; masked entries read as block 0.
            physical = torch.where(block_ok, table[logical.clamp(max=needed_blocks - 1)], 0)
            for sub in range(tiling.subtiles):
                slot = sub * tiling.slots_per_tile + torch.arange(tiling.slots_per_tile)
                token = (logical[:, None] * bs + slot[None, :]).flatten()
                # Padded slots (block_size not a power of two), blocks past the split
                # and tokens past the context are masked, as in the kernel (the prefix
                # kernel masks each row at its own length: the same for this row).
                valid = (block_ok[:, None] & (slot[None, :] < bs)).flatten() & (token < n)
                lane_logical = logical.repeat_interleave(tiling.slots_per_tile)
                lane_physical = physical.repeat_interleave(tiling.slots_per_tile)
                lane_slot = slot.repeat(tiling.blocks_per_tile)

                # The kernel reads k_cache[physical, slot]; `keys` holds the row's
                # blocks in logical order, so index it by logical block. Masked lanes
                # load 0, like the kernel's ``other=0.0``.
                k = torch.zeros(lanes, shape.head_dim, dtype=torch.float64)
                v = torch.zeros(lanes, shape.head_dim, dtype=torch.float64)
                k[valid] = keys[lane_logical[valid], lane_slot[valid]]
                v[valid] = values[lane_logical[valid], lane_slot[valid]]

                # The kernel's online softmax in base 2.
                scores = torch.where(valid, k @ q * scale_log2e, -math.inf)
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

                valid_tokens = token[valid]
                # An all-masked tile gets an empty range where its block's tokens end.
                empty_at = min(min(block + tiling.blocks_per_tile, last_block) * bs, n)
                partial = acc / l if l > 0 else torch.full_like(acc, math.nan)
                touched = tuple(dict.fromkeys(lane_physical[valid].tolist()))
                tile_rows.append({
                    **program,
                    "tile": tile,
                    "subtile": sub,
                    "first_block": block,
                    "end_block": min(block + tiling.blocks_per_tile, last_block),
                    "token_start": int(valid_tokens[0]) if valid_tokens.numel() else empty_at,
                    "token_end": int(valid_tokens[-1]) + 1 if valid_tokens.numel() else empty_at,
                    "valid_tokens": int(valid.sum()),
                    "masked_lanes": lanes - int(valid.sum()),
                    "physical_blocks": touched,
                    "num_physical_blocks": len(touched),
                    # One load per block per outer iteration; subtiles reuse it.
                    "table_lookups": int(block_ok.sum()) if sub == 0 else 0,
                    "tile_max": tile_max,
                    "m": m,
                    "alpha": alpha,
                    "l": l,
                    "err_vs_split": _max_diff(partial, split_answer),
                    "err_vs_row": _max_diff(partial, reference),
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
            "token_end": split_end,
            "num_tiles": tile,
            "table_lookups": last_block - first_block,
            "m": m,
            "l": l,
            "err_vs_row": _max_diff(acc / l, reference),
        })

    # The prefix pass's programs come first: their partials fill the row's first slots.
    pieces = prefix_programs(launch.prefix, seq) if group else []
    for members, first_block, last_block, slot in pieces:
        walk(slot, first_block, last_block, launch.prefix_plan, "prefix", len(members))
    for slot, first_block, last_block in own_programs(launch.work, seq, needed_blocks):
        if first_block < last_block:  # else an empty row: its one program writes zeros, or merges the prefix's
            walk(slot, first_block, last_block, plan, "own", 1)

    output = torch.zeros(shape.head_dim, dtype=torch.float64)
    if partials:
        # The merge, as merge_partials does it (its chunked rescaling gives the same sums). Each split's (m, l, acc) is
        # relative to its own max; rescaling by exp2(m - m_max) puts them on the
        # common max before summing. With one split the weight is exactly 1.
        m_max = max(m for m, _, _ in partials)
        weights = [2.0 ** (m - m_max) for m, _, _ in partials]
        total = sum(w * l for w, (_, l, _) in zip(weights, partials))
        output = sum(w * acc for w, (_, _, acc) in zip(weights, partials)) / total
        for row, w, (_, l, _) in zip(split_rows, weights, partials):
            row["weight"] = w
            row["share"] = w * l / total

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
    )
