"""Cached, tensor-free data for the pages.

``st.cache_data`` here takes plain parameters and returns NumPy arrays, pandas
frames or small dataclasses of them, never tensors; ``max_entries`` bounds what a
long session can accumulate.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd
import streamlit as st

from explorer.cache.sharing import SharedBatch, shared_prefix_batch
from explorer.kernel.view import trace_row
from explorer.serving.history import ServingHistory, StepRecord, simulate
from explorer.serving.traffic import LengthDist, ServingConfig
from explorer.serving.view import serving_config
from explorer.serving.tradeoff import block_size_tradeoff
from paged_attention import DecodeConfig, assign_blocks
from paged_attention.launch_plan import LaunchPlan


@st.cache_data(max_entries=8, show_spinner="Assigning blocks…")
def block_arrays(
    lengths: tuple[int, ...], block_size: int, block_layout: str, seed: int, spare_blocks: int | None = None,
    shared_prefix: int = 0, prefix_groups: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Block table ``[batch, max_num_blocks]`` and pool owners ``[num_blocks]`` of a
    configuration, from :func:`paged_attention.assign_blocks` (CPU only, no KV cache).

    Raises
    ------
    ValueError
        If the parameters are invalid.
    """
    config = DecodeConfig(
        batch_size=len(lengths), context_lens=lengths, block_size=block_size,
        block_layout=block_layout, seed=seed, num_heads=1, num_kv_heads=1, head_dim=1, spare_blocks=spare_blocks,
        shared_prefix=shared_prefix, prefix_groups=prefix_groups,
    )
    tables, owner = assign_blocks(config)
    return tables.numpy(), owner.numpy()


def block_arrays_for(config: DecodeConfig) -> tuple[np.ndarray, np.ndarray]:
    """:func:`block_arrays` keyed on the parts of ``config`` that decide the layout."""
    return block_arrays(
        tuple(config.lengths), config.block_size, config.block_layout, config.seed, config.spare_blocks,
        config.shared_prefix, config.prefix_groups,
    )


@st.cache_data(max_entries=8, show_spinner="Sharing blocks…")
def shared_batch(
    lengths: tuple[int, ...], block_size: int, num_blocks: int, common_prompt: int, samples: int
) -> SharedBatch:
    """:func:`explorer.cache.sharing.shared_prefix_batch`, cached."""
    return shared_prefix_batch(lengths, block_size, num_blocks, common_prompt, samples)


def shared_batch_for(config: DecodeConfig, common_prompt: int, samples: int) -> SharedBatch:
    """:func:`shared_batch` of ``config``'s lengths, block size and pool. The pool is
    the one the batch needs without the sidebar's shared prefix: the scenario lays
    out its own sharing (its common prompt and samples) from unshared tables."""
    unshared = config.with_(shared_prefix=0, prefix_groups=1)
    return shared_batch(tuple(config.lengths), config.block_size, unshared.num_blocks, int(common_prompt), int(samples))


def config_key(config: DecodeConfig) -> tuple:
    """``config`` as a tuple of ``(field, value)`` pairs: a plain cache key."""
    return tuple(asdict(config).items())


# -- serving simulation ----------------------------------------------------------

@st.cache_resource(max_entries=4, show_spinner="Simulating the traffic…")
def serving_history(
    num_blocks: int, block_size: int, max_batch_size: int, arrival_rate: float,
    prompt: tuple[str, int, int], output: tuple[str, int, int], seed: int, steps: int,
    system_prompt: int = 0, samples: int = 1, window: int | None = None, free_window: bool = True,
) -> ServingHistory:
    """Every step of a simulation (NumPy and pandas only, no tensors).

    A resource, not data: up to ``steps x num_blocks`` block ids that every rerun
    (each move of the step slider) reads, so it is shared rather than copied.
    Treat it as read-only.

    Raises
    ------
    ValueError
        If the parameters are invalid.
    """
    config = serving_config(num_blocks, block_size, max_batch_size, arrival_rate, prompt, output, seed,
                            system_prompt, samples, window, free_window)
    return simulate(config, steps)


@st.cache_data(max_entries=6, show_spinner="Replaying the traffic at every block size…")
def block_size_table(
    pool_tokens: int, max_batch_size: int, arrival_rate: float,
    prompt: tuple[str, int, int], output: tuple[str, int, int], seed: int, steps: int,
    block_sizes: tuple[int, ...],
) -> tuple[pd.DataFrame, dict[int, StepRecord]]:
    """:func:`~explorer.serving.tradeoff.block_size_tradeoff` on the same traffic:
    its table, and each block size's busiest step as a :class:`StepRecord`."""
    base = ServingConfig(
        num_blocks=pool_tokens, block_size=1, max_batch_size=max_batch_size, arrival_rate=float(arrival_rate),
        prompt_len=LengthDist(*prompt), output_len=LengthDist(*output), seed=seed,
    )
    result = block_size_tradeoff(base, block_sizes, steps, pool_tokens=pool_tokens)
    return result.table, {b: StepRecord.from_snapshot(s) for b, s in result.snapshots.items()}


# -- inside the kernel -----------------------------------------------------------

@st.cache_data(max_entries=16, show_spinner="Tracing the kernel…")
def kernel_trace(key: tuple, seq: int, head: int, plan: LaunchPlan, groups: tuple = (),
                 prefix: LaunchPlan | None = None, token: int | None = None) -> dict:
    """:func:`~explorer.kernel.view.trace_row` for the configuration ``key``
    (``(field, value)`` pairs of a :class:`DecodeConfig`), after the prefix pass of
    shared-prefix ``groups`` under ``prefix`` (for new token ``token`` with draft
    tokens: by default the sequence's last), without tensors: ``tiles``,
    ``splits`` and ``logits`` DataFrames, ``max_abs_error`` against the float64
    reference, ``kv_head``, and the attention options' ``window_start``,
    ``first_block``, ``soft_cap``, ``sink``, ``m_final``, ``l_final``,
    ``sink_term``, ``sink_share``, and the draft tokens' ``query_len``, ``token``,
    ``position``, ``tile_rows`` and ``mask`` (:class:`~explorer.kernel.trace.KernelTrace`)."""
    config = DecodeConfig(**dict(key))
    tables, _ = block_arrays_for(config)
    trace = trace_row(config, tables, seq, head, plan=plan, groups=groups, prefix=prefix, token=token)
    return {
        "tiles": trace.tiles, "splits": trace.splits, "max_abs_error": trace.max_abs_error,
        "kv_head": trace.kv_head, "output": trace.output.numpy(), "reference": trace.reference.numpy(),
        "window_start": trace.window_start, "first_block": trace.first_block, "soft_cap": trace.soft_cap,
        "logits": trace.logits, "sink": trace.sink, "sink_m": trace.sink_m, "m_final": trace.m_final, "l_final": trace.l_final,
        "sink_term": trace.sink_term, "sink_share": trace.sink_share, "query_lens": trace.query_len,
        "token": trace.token, "position": trace.position, "tile_rows": trace.tile_rows, "mask": trace.mask,
    }
