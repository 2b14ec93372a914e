"""The rows of the decode kernel's tile with draft tokens, and the mask each row scores under.

With several query tokens per sequence (``query_lens``), ``_paged_decode_kernel``
(:mod:`paged_attention.triton_decode`) puts the ``q_len x group`` rows of one KV
head in one tile: row ``r`` holds query token ``r // group`` and query head
``kv_head * group + r % group``. Token ``t`` sits at position ``context_len - q_len
+ t`` and scores the positions ``[row_start, row_len)``: ``row_len = context_len -
q_len + 1 + t`` (itself and everything before it), ``row_start = max(0, row_len -
window)`` with a sliding window, else 0 (:func:`row_span`).

With draft tokens the kernel masks every tile of its walk row by row (one loop,
:func:`kernel_ranges`), but only in some tiles do the rows' masks differ: those
holding the new tokens, and with a window those before the last token's window
start (:func:`rows_differ`). This module states those rules once for the trace
(:mod:`explorer.kernel.trace`), which replays them: :func:`rows_of_tile` lists a
tile's rows, :func:`mask_cells` says, for each new token and each position of a
tile, whether its score is kept or masked and why.
"""

from __future__ import annotations

from typing import Sequence

#: What happens to the score of one (query token, position) of a tile: kept; masked as
#: a later position (the causal rule); masked as before the token's own window; or
#: never loaded (past the context, or before the first token's window, where the
#: tile loads nothing).
MASK_STATES: tuple[str, ...] = ("scored", "causal", "window", "unloaded")


def row_span(context_len: int, query_len: int, token: int, window: int | None) -> tuple[int, int]:
    """``(row_start, row_len)``: the positions ``[row_start, row_len)`` that query
    token ``token`` (``0 <= token < query_len``) of a sequence of ``context_len``
    tokens scores, as the kernel computes them (``row_lens``, ``row_starts``)."""
    row_len = context_len - query_len + 1 + token
    return (max(0, row_len - window) if window is not None else 0), row_len


def kernel_ranges(
    first_block: int, last_block: int, window: int | None, query_tokens: int,
) -> list[tuple[int, int, bool, bool]]:
    """How one program of the decode kernel walks its logical blocks ``[first_block,
    last_block)``: ``(first, last, per_row, window)`` per range, in walk order, each
    tiled from its first block; empty ranges are left out.

    One range: with ``query_tokens`` (the kernel's ``QUERY_TOKENS``, the batch's most
    query tokens of one sequence) above 1, masked per row (each row at its own length
    and window start, a sequence of one token too); else with the plain mask. The
    window's start bounds the loads either way.
    """
    if last_block <= first_block:
        return []
    return [(first_block, last_block, query_tokens > 1, window is not None)]


def rows_differ(first: int, last: int, context_len: int, query_len: int, window: int | None) -> bool:
    """Whether the new tokens' masks differ anywhere in a tile that loads positions
    ``first .. last``: it holds a position past the first new token's own
    (``context_len - query_len``), or, with a window, one before the last token's
    window start (``context_len - window``)."""
    return last > context_len - query_len or (window is not None and first < context_len - window)


#: Columns of :func:`rows_of_tile`, one per row of the tile.
ROW_COLUMNS: tuple[str, ...] = ("row", "token", "head", "position", "row_start", "row_len")


def rows_of_tile(
    context_len: int, query_len: int, query_group_size: int, kv_head: int, window: int | None
) -> list[tuple[int, ...]]:
    """The rows of one program's tile for a sequence of ``query_len`` new tokens:
    ``(row, token, head, position, row_start, row_len)`` (:data:`ROW_COLUMNS`) for
    ``row = token * group + g``, ``head = kv_head * group + g``; the padding rows up
    to a power of two, which load no query, are left out."""
    rows = []
    for token in range(query_len):
        start, length = row_span(context_len, query_len, token, window)
        for g in range(query_group_size):
            rows.append((token * query_group_size + g, token, kv_head * query_group_size + g, length - 1,
                         start, length))
    return rows


def mask_cells(
    positions: Sequence[int], loaded: Sequence[bool], context_len: int, query_len: int, window: int | None
) -> list[tuple[int, int, str]]:
    """The mask of a per-row tile at token granularity (a token's query heads share it):
    ``(token, position, state)`` for every new token and each of ``positions`` (the
    tile's lanes that hold a position: its blocks' slots, padding lanes left out),
    ``loaded`` saying which of them the tile loads; ``state`` one of :data:`MASK_STATES`."""
    cells = []
    for token in range(query_len):
        start, length = row_span(context_len, query_len, token, window)
        for position, is_loaded in zip(positions, loaded):
            state = ("unloaded" if not is_loaded else "causal" if position >= length
                     else "window" if position < start else "scored")
            cells.append((token, int(position), state))
    return cells


def new_token_tiles(mask, context_len: int, query_len: int) -> list[tuple[int, int]]:
    """``(split, tile)`` of the per-row tiles in ``mask`` (:data:`~explorer.kernel.trace_record.MASK_COLUMNS`)
    that hold a new token's position (``context_len - query_len ... context_len - 1``),
    in walk order: the tiles where the causal rule masks scores."""
    if mask is None or not len(mask):
        return []
    new = mask[(mask["position"] >= context_len - query_len) & (mask["position"] < context_len)]
    return sorted({(int(s), int(t)) for s, t in zip(new["split"], new["tile"])})
