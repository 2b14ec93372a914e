"""The price of large blocks: one request stream replayed at several block sizes.

:func:`block_size_tradeoff` runs :class:`~explorer.serving.simulator.ServingSimulator` on
the same traffic with the same pool capacity in tokens at each block size, and
tabulates blocks in use, tokens stored and the slots allocated but not yet filled
in each sequence's last block (internal fragmentation).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Sequence

import pandas as pd

from explorer.serving.block_manager import check_int
from explorer.serving.simulator import ServingSimulator
from explorer.serving.snapshot import Snapshot
from explorer.serving.traffic import ServingConfig

#: Block sizes :func:`block_size_tradeoff` compares by default.
DEFAULT_BLOCK_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)

#: Columns of the table :func:`block_size_tradeoff` returns, one row per block size.
TRADEOFF_COLUMNS: tuple[str, ...] = (
    "block_size", "num_blocks", "mean_blocks_in_use", "peak_blocks_in_use",
    "mean_tokens_stored", "mean_wasted_slots", "wasted_fraction", "mean_running",
    "mean_waiting", "stalled", "finished", "busiest_step",
)


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
    check_int("steps", steps, 1)
    sizes = list(block_sizes)
    if not sizes:
        raise ValueError("block_sizes must not be empty")
    for b in sizes:
        check_int("each block size", b, 1)
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"block_sizes must be distinct; got {sizes}")
    if pool_tokens is None:
        pool_tokens = config.num_blocks * config.block_size
    check_int("pool_tokens", pool_tokens, 1)

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
