"""What a kernel trace records for one (sequence, query token, query head): :class:`KernelTrace`
and the columns of its tables (:func:`~explorer.kernel.trace.trace_decode` fills it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from paged_attention.launch_plan import LaunchPlan
from paged_attention.shared_prefix import PrefixGroup
from paged_attention.tile_walk import LOG2E

#: Columns of :attr:`KernelTrace.tiles`, one row per tile (online-softmax update).
TILE_COLUMNS: tuple[str, ...] = (
    "split", "pass", "sequences", "query_rows", "tile", "subtile", "first_block", "end_block", "per_row", "token_start",
    "token_end", "valid_tokens", "masked_lanes", "loaded_tokens", "causal_masked", "physical_blocks",
    "num_physical_blocks", "table_lookups",
    "raw_max", "tile_max", "m", "alpha", "l", "err_vs_split", "err_vs_row",
)

#: Columns of :attr:`KernelTrace.logits`, one row per position the row attends to.
LOGIT_COLUMNS: tuple[str, ...] = ("token", "split", "tile", "raw", "capped")

#: Columns of :attr:`KernelTrace.mask`, one row per (query token, position) of a tile
#: where the rows' masks differ (:func:`~explorer.kernel.tile_rows.mask_cells`).
MASK_COLUMNS: tuple[str, ...] = ("split", "tile", "token", "position", "state")

#: Columns of :attr:`KernelTrace.splits`, one row per split that runs.
SPLIT_COLUMNS: tuple[str, ...] = (
    "split", "pass", "sequences", "first_block", "end_block", "token_start", "token_end", "num_tiles",
    "table_lookups", "m", "l", "weight", "share", "err_vs_row",
)


@dataclass(frozen=True)
class KernelTrace:
    """What the kernel does for one (sequence, query token, query head).

    Attributes
    ----------
    seq, head, kv_head : int
        The traced row; ``kv_head = head // (num_heads // num_kv_heads)``.
    query_len, token : int
        The sequence's new (query) tokens and the one traced, ``0 <= token <
        query_len``: it sits at :attr:`position` and scores the positions up to
        itself (1 and 0 for the plain decode step).
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
          ``[first_block, end_block)``; ``per_row``: whether the kernel masks its
          scores row by row (every tile of the prefix pass, and of the decode
          kernel with draft tokens in the batch), or with one mask for every row;
        - ``token_start``, ``token_end``: the valid logical tokens,
          ``[token_start, token_end)`` (empty when every lane is masked);
        - ``valid_tokens`` (the positions this row scores); ``masked_lanes`` =
          ``block_n - valid_tokens``; ``loaded_tokens``: the positions the tile
          loads for all its rows, of which ``causal_masked`` lie past this row's
          token (later new tokens: masked by the causal rule);
        - ``physical_blocks`` (tuple of distinct physical block ids read for this
          row's scores), ``num_physical_blocks``;
        - ``table_lookups``: block-table entries loaded; one per block, on the
          block's first subtile (later subtiles reuse it);
        - ``raw_max``: the tile's largest scaled logit before the soft-cap, and
          ``tile_max``: its largest score (capped), ``m``: running max after the
          tile, ``alpha = exp2(m_before - m)``: factor that rescaled the earlier
          ``l`` and ``acc``, ``l``: normalizer (all in log2 units,
          i.e. scores times ``scale * log2(e)``);
        - ``err_vs_split``, ``err_vs_row``: max abs difference of the partial
          output ``acc / l`` from the exact answer of the split and of the row
          (over the positions only: the sink joins at the end).
    splits : DataFrame
        One row per split that runs, columns :data:`SPLIT_COLUMNS`: its pass and
        sequences (as in ``tiles``), its blocks and
        tokens, ``num_tiles``, ``table_lookups``, final ``m`` and ``l``, the merge
        ``weight = exp2(m - max m)`` and ``share = weight * l / sum(weight * l)``
        (its part of the softmax mass, the sink's term counted in the sum), and
        ``err_vs_row`` of its own ``acc / l``.
    output : Tensor
        ``[head_dim]`` float64, the traced result (merged when :attr:`merged`).
    reference : Tensor
        ``[head_dim]`` float64, ``reference_decode`` for this row (its token's
        output row, with the sequence's ``query_lens``).
    prefix_group : PrefixGroup or None
        The row's shared-prefix group, when a prefix pass reads its first
        ``prefix_group.num_blocks`` blocks; ``plan`` then covers only the rest.
    prefix_plan : LaunchPlan or None
        The prefix pass's tile and pieces (with ``prefix_group``).
    window_start : int
        The sequence's first attended position, that of its first query token's
        window, ``max(0, context_len - query_len + 1 - window)`` (0 without a
        window; ``max(0, context_len - window)`` for one token); the programs start
        at its block, ``window_start // block_size``, and the blocks before it are
        not read.
    soft_cap : float or None
        The logit cap (natural units), or None.
    logits : DataFrame
        One row per attended position, columns :data:`LOGIT_COLUMNS`: the
        ``token``, the ``split`` and ``tile`` that scored it, its scaled logit
        ``raw = scale * q.k`` and ``capped`` (``soft_cap * tanh(raw / soft_cap)``,
        ``raw`` without a cap), natural units.
    sink : float or None
        The head's attention-sink logit (natural units), or None without sinks.
    m_final, l_final : float
        The finished row's max and denominator before the sink (log2 units; ``l``
        relative to ``2^m_final``).
    sink_term : float
        ``2^(sink log2(e) - m_final)``: the sink's term in the denominator, on
        the same scale as ``l_final`` (0 without sinks). The output is
        ``acc / (l_final + sink_term)``, as ``normalize_output`` computes it.
    tile_rows : DataFrame or None
        With draft tokens (``query_len > 1``), the rows of the decode kernel's tile
        for this sequence and KV head, columns
        :data:`~explorer.kernel.tile_rows.ROW_COLUMNS`: ``row``, the query
        ``token`` and ``head`` it holds, the token's ``position`` and the
        positions ``[row_start, row_len)`` it scores. None for one token.
    mask : DataFrame or None
        With draft tokens, the mask of every tile of the decode kernel where the
        rows' masks differ (:func:`~explorer.kernel.tile_rows.rows_differ`: the
        tiles holding the new tokens, and with a window those before the last
        token's window start), columns :data:`MASK_COLUMNS`: for each ``split``
        and ``tile`` (as in
        ``tiles``), each query ``token`` and each ``position`` of the tile, its
        ``state`` (:data:`~explorer.kernel.tile_rows.MASK_STATES`: ``"scored"``,
        ``"causal"``: a later position, ``"window"``: before the token's window,
        ``"unloaded"``); a token's query heads share it. None for one token.
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
    window_start: int = 0
    soft_cap: float | None = None
    logits: pd.DataFrame | None = None
    sink: float | None = None
    m_final: float = -math.inf
    l_final: float = 0.0
    sink_term: float = 0.0
    query_len: int = 1
    token: int = 0
    tile_rows: pd.DataFrame | None = None
    mask: pd.DataFrame | None = None

    @property
    def position(self) -> int:
        """The traced token's position in the context, ``context_len - query_len + token``."""
        return self.context_len - self.query_len + self.token

    @property
    def row_len(self) -> int:
        """Positions the traced token scores up to (itself included): ``position + 1``."""
        return self.position + 1

    @property
    def first_block(self) -> int:
        """The window's first block: blocks ``[0, first_block)`` are not read."""
        return self.window_start // self.block_size

    @property
    def sink_m(self) -> float | None:
        """The sink's logit in the kernel's log2 units (``sink * log2(e)``), or None."""
        return None if self.sink is None else self.sink * LOG2E

    @property
    def sink_share(self) -> float:
        """The sink's part of the softmax mass, ``sink_term / (l_final + sink_term)``."""
        total = self.l_final + self.sink_term
        return self.sink_term / total if total > 0 else 0.0

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
