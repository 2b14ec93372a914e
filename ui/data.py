"""Cached, tensor-free data for the pages.

``st.cache_data`` here takes plain parameters and returns NumPy arrays, never
tensors; ``max_entries`` bounds what a long session can accumulate.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from paged_attention import DecodeConfig
from paged_attention import assign_blocks


@st.cache_data(max_entries=8, show_spinner="Assigning blocks…")
def block_arrays(
    lengths: tuple[int, ...], block_size: int, block_layout: str, seed: int, spare_blocks: int | None = None
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
    )
    tables, owner = assign_blocks(config)
    return tables.numpy(), owner.numpy()


def block_arrays_for(config: DecodeConfig) -> tuple[np.ndarray, np.ndarray]:
    """:func:`block_arrays` keyed on the parts of ``config`` that decide the layout."""
    return block_arrays(
        tuple(config.lengths), config.block_size, config.block_layout, config.seed, config.spare_blocks
    )
