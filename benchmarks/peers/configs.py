"""The configurations ``benchmarks.decode_peers`` times, by set (``--set``):
``classic`` those of docs/benchmarks.md, ``ragged`` lengths drawn at random,
``fp8`` the large ones, ``prefix`` batches whose sequences share a prompt,
``options`` the classic ones again, once per pass of attention options
(:data:`benchmarks.peers.options.OPTION_PASSES`)."""

from __future__ import annotations

from paged_attention.config import ragged_lengths

BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, block_layout="shuffled")

#: (name, batch_size, context_lens, overrides): the configurations of docs/benchmarks.md.
CONFIGS = [
    ("large", 32, 2048, {}),
    ("large", 64, 4096, {}),
    ("large", 8, 8192, {}),
    ("large", 128, 1024, {}),
    ("large", 1, 32768, {}),
    ("large", 32, 2048, {"block_size": 256, "num_heads": 16}),
    ("small", 2, 60, {}),
    ("small", 1, 512, {}),
    ("small", 16, 256, {}),
    ("small", 4, 2048, {}),
    ("ragged", 64, ragged_lengths(64, 1, 8192, seed=1), {}),
]

#: Ragged batches: lengths uniform in 1..8192 and in 1..32768 at batches 4 to 64, and
#: one long-tailed (log-uniform) draw: a few long conversations among many short ones.
RAGGED_CONFIGS = [
    ("ragged", batch, ragged_lengths(batch, 1, longest, seed=1), {})
    for longest in (8192, 32768)
    for batch in (4, 8, 16, 32, 64)
] + [("long-tail", 32, ragged_lengths(32, 1, 32768, seed=1, spread="long-tail"), {})]

#: Shared prompts (issue 15): (batch, shared prefix P, own suffix S, prefix groups);
#: every sequence holds P + S tokens. The last shares nothing: the control.
PREFIX_SHAPES = [
    (64, 8192, 256, 1),
    (32, 32768, 512, 1),
    (128, 2048, 128, 1),
    (16, 4096, 1024, 1),
    (64, 4096, 256, 4),
    (32, 0, 2048, 1),
]
PREFIX_CONFIGS = [
    ("prefix", batch, prefix + suffix, {"shared_prefix": prefix, "prefix_groups": groups})
    for batch, prefix, suffix, groups in PREFIX_SHAPES
]

CONFIG_SETS = {
    "classic": CONFIGS,
    "ragged": RAGGED_CONFIGS,
    "fp8": [c for c in CONFIGS if c[0] == "large"],
    "prefix": PREFIX_CONFIGS,
    "options": CONFIGS,
}


def context_lengths(lens: int | tuple[int, ...], batch: int) -> tuple[int, ...]:
    """Every sequence's length, whether the configuration gives one or a tuple."""
    return tuple(lens) if isinstance(lens, tuple) else (lens,) * batch
