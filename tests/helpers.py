"""Shared pieces of the correctness tests: the implementations under test, a seed per
test, hand-built paged inputs, and the one comparison with the float64 reference."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Sequence

import pytest
import torch

import paged_attention as pa
from explorer.sweep import grid as sweep_grid
from explorer.sweep import runs as sweep_runs
from paged_attention.poison import context_mask, fill_uncovered, poison_table

#: Every decode function under test: the three the app races plus the variants.
#: "triton_prefix" is "triton" on these tests' tables, which share no blocks; its
#: prefix pass is tested on tables that do, in test_shared_prefix.py.
IMPLS = {**pa.IMPLEMENTATIONS, **{k: v for k, v in pa.VARIANTS.items() if k != "triton_prefix"}}
IMPL_NAMES = tuple(IMPLS)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.fixture
def seed(request) -> int:
    """A seed of its own for every test and parameter set, stable from run to run."""
    return zlib.crc32(request.node.nodeid.encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class Attention:
    """One case of the attention-options axis every correctness test runs over
    (the ``attention`` fixture of conftest.py)."""

    name: str
    window: int | None = None
    soft_cap: float | None = None
    sinks: bool = False
    #: Query tokens per sequence (draft tokens), cycled over the batch and capped
    #: at each context; None: one each.
    drafts: tuple[int, ...] | None = None

    def config(self) -> dict:
        """The DecodeConfig fields of this case; the query tokens as one number
        (the most of :attr:`drafts`, which DecodeConfig caps at each context: see
        :meth:`query_lens` for the ragged pattern)."""
        return dict(window=self.window, soft_cap=self.soft_cap, sinks=self.sinks,
                    query_lens=max(self.drafts) if self.drafts else 1)

    def query_lens(self, context_lens: Sequence[int]) -> tuple[int, ...] | int:
        """DecodeConfig's ``query_lens`` for these contexts: :attr:`drafts` cycled
        and capped at each context (at least 1), or 1."""
        if self.drafts is None:
            return 1
        return tuple(max(1, min(n, self.drafts[b % len(self.drafts)])) for b, n in enumerate(context_lens))

    def options(self, num_heads: int, device: str | torch.device, seed: int = 0) -> dict:
        """The decode keywords of this case for hand-built inputs (``sinks`` drawn
        by :func:`sink_logits`): only those set. Hand-built inputs have one query
        token per sequence: :attr:`drafts` is not applied to them."""
        sinks = sink_logits(num_heads, device, seed) if self.sinks else None
        options = dict(window=self.window, sinks=sinks, soft_cap=self.soft_cap)
        return {k: v for k, v in options.items() if v is not None}


#: Head 0's sink, large beside the logits of N(0, 1) queries and keys, so it takes
#: most of the weight: a kernel that drops or misplaces it is far off.
LARGE_SINK = 4.0


def sink_logits(num_heads: int, device: str | torch.device, seed: int = 0) -> torch.Tensor:
    """float32 ``[num_heads]`` sink logits: ``2 *`` standard normal, head 0 :data:`LARGE_SINK`."""
    sinks = 2 * torch.randn(num_heads, generator=torch.Generator().manual_seed(seed))
    sinks[0] = LARGE_SINK
    return sinks.to(device)


PLAIN = Attention("plain")
#: A window of 13 starts mid-block in most contexts of the tests (block sizes 3 to
#: 256, contexts from 1 to 300) and covers the whole of the shortest; a soft-cap of
#: 1.25 squeezes most logits of unit-variance queries and keys; 1 to 5 query tokens
#: per sequence (draft tokens, ragged: each sees its own window, causal among them).
WITH_OPTIONS = Attention("window+sinks+soft_cap+drafts", window=13, soft_cap=1.25, sinks=True,
                         drafts=(3, 4, 1, 2, 5))
ATTENTION = (PLAIN, WITH_OPTIONS)


def at_serving_sizes(attention: Attention) -> Attention:
    """``attention`` for the GPU tests' contexts of up to 4096 tokens: a window of
    1500, so it starts mid-block, spans many tiles and splits, and ends the same."""
    return replace(attention, window=1500) if attention.window is not None else attention


def dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def awkward_lengths(block_size: int) -> tuple[int, ...]:
    """A ragged batch: one token, exactly one block, one block and a token, an exact
    multiple of the block, and a longer context that ends mid-block."""
    return (1, block_size, block_size + 1, 2 * block_size, max(3 * block_size - 1, 70))


def build(device: str, seed: int, poison: bool = True, attention: Attention = PLAIN, **changes) -> pa.DecodeInputs:
    """Inputs of the base case (GQA 8/2, head_dim 64, block 16, float16, shuffled
    pool, a ragged batch) with the ``attention`` options and some fields changed;
    memory no query reads (past each context, before each window) holds NaN and
    ±Inf unless ``poison`` is False (then the finite LOUD_VALUE). With sinks, head
    0's is :data:`LARGE_SINK`; ``inputs.options()`` gives the decode keywords."""
    block_size = changes.get("block_size", 16)
    fields = dict(
        context_lens=awkward_lengths(block_size),
        num_heads=8,
        num_kv_heads=2,
        head_dim=64,
        block_size=block_size,
        dtype="float16",
        block_layout="shuffled",
        device=device,
        seed=seed,
        **attention.config(),
    )
    fields.update(changes)
    fields["batch_size"] = len(fields["context_lens"])
    fields["query_lens"] = changes.get("query_lens", attention.query_lens(fields["context_lens"]))
    inputs = pa.build_decode_inputs(pa.DecodeConfig(**fields), poison=poison)
    if inputs.sinks is not None:
        inputs.sinks[0] = LARGE_SINK
    return inputs


def query_rows(config: pa.DecodeConfig) -> list[list[int]]:
    """Each sequence's rows of the query and the output: one each, or its
    ``config.query_lengths[b]`` draft tokens, sequence 0's first."""
    rows, first = [], 0
    for q in config.query_lengths:
        rows.append(list(range(first, first + q)))
        first += q
    return rows


def assert_matches(out: torch.Tensor, query: torch.Tensor, expected: torch.Tensor) -> None:
    """``out`` has the query's shape, dtype and device, and equals the float64
    ``expected`` within the per-dtype tolerance."""
    assert out.shape == query.shape
    assert out.dtype == query.dtype
    assert out.device == query.device
    atol, rtol = pa.tolerance(query.dtype)
    torch.testing.assert_close(out.double(), expected, atol=atol, rtol=rtol)


def run_and_compare(
    name: str,
    args: Sequence[torch.Tensor],
    *,
    scale: float | None = None,
    expected: torch.Tensor | None = None,
    scales: dict | None = None,
    options: dict | None = None,
) -> torch.Tensor:
    """Run implementation ``name`` on ``args`` (with an fp8 cache's ``scales``,
    ``{"k_scale": ..., "v_scale": ...}``, and the attention ``options``, of
    ``window``, ``sinks``, ``soft_cap``, ``query_lens``) and compare it with the reference (of
    ``args`` and the same keywords unless ``expected`` is given). Returns the output."""
    kwargs = {**(scales or {}), **(options or {})}
    if expected is None:
        expected = pa.reference_decode(*args, scale=scale, **kwargs)
    out = IMPLS[name](*args, scale=scale, **kwargs)
    assert torch.isfinite(out).all()
    assert_matches(out, args[0], expected)
    return out


def replay_with_a_new_query(run, query: torch.Tensor) -> torch.Tensor:
    """Capture one call of the prepared launcher ``run`` in a CUDA graph (after a
    warm-up on a side stream), refill ``query`` in place with new values, replay,
    and return the graph's output: what a CUDA-graph decode loop does."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    query.copy_(torch.randn_like(query))
    graph.replay()
    torch.cuda.synchronize()
    return out


def paged_inputs(
    lengths: Sequence[int],
    block_ids: Sequence[Sequence[int]],
    *,
    num_blocks: int,
    block_size: int,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 64,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    seed: int = 0,
    table_cols: int | None = None,
    window: int | None = None,
) -> tuple[torch.Tensor, ...]:
    """Inputs with a block table written by hand.

    Sequence ``b`` keeps its tokens in physical blocks ``block_ids[b]`` (logical
    order); each needs at least ``ceil(lengths[b] / block_size)`` ids. Slots a query
    reads are standard normal; every other slot of the pool (with a ``window``, the
    slots before it too) is poisoned (NaN, ±Inf, huge, denormal:
    :func:`paged_attention.poison.fill_uncovered`); table entries past the given ids
    (and before each window's first block, as an engine that freed them leaves
    them) hold -1, stale ids and ids past the pool
    (:func:`paged_attention.poison.poison_table`).

    Returns ``(query, k_cache, v_cache, block_tables, context_lens)``.
    """
    gen = torch.Generator().manual_seed(seed)
    cols = table_cols or max(1, max(len(ids) for ids in block_ids))
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k = torch.zeros(shape)
    v = torch.zeros(shape)
    table = torch.full((len(lengths), cols), -1, dtype=torch.int32)
    for b, (n, ids) in enumerate(zip(lengths, block_ids)):
        assert len(ids) * block_size >= n
        table[b, : len(ids)] = torch.tensor(list(ids), dtype=torch.int32)
        tokens = torch.arange(n)
        blocks, slots = table[b, tokens // block_size].long(), tokens % block_size
        k[blocks, slots] = torch.randn(n, num_kv_heads, head_dim, generator=gen)
        v[blocks, slots] = torch.randn(n, num_kv_heads, head_dim, generator=gen)
    query = torch.randn(len(lengths), num_heads, head_dim, generator=gen)
    lens = torch.tensor(list(lengths), dtype=torch.int32)
    k, v = k.to(dtype), v.to(dtype)
    starts = None if window is None else (lens.long() - window).clamp_min(0)
    covered = context_mask(table, lens, num_blocks, block_size, starts)
    fill_uncovered(k, v, covered, poison=True)
    given = torch.tensor([len(ids) for ids in block_ids]) * block_size
    poisoned = poison_table(table, given, num_blocks, block_size, seed=seed)  # past the given ids only
    if window is not None:  # and before each window's first block
        before = torch.arange(cols)[None, :] < (starts // block_size)[:, None]
        freed = poison_table(table, lens, num_blocks, block_size, seed=seed + 1, window_starts=starts)
        poisoned = torch.where(before, freed, poisoned)
    table = poisoned
    return tuple(t.to(device) for t in (query.to(dtype), k, v, table, lens))


def loud_block(pool_owner: torch.Tensor) -> int:
    """A physical block that no sequence of the batch owns (so it holds LOUD_VALUE,
    or poison)."""
    unowned = torch.nonzero(pool_owner < 0).flatten()
    assert len(unowned), "the pool needs a spare block"
    return int(unowned[0])


#: The configuration the sweep tests vary (tiny: the interpreter runs it fast).
SWEEP_BASE = pa.DecodeConfig(batch_size=2, context_lens=37, num_heads=4, num_kv_heads=2, head_dim=32, device="cpu")


def fake_result(name: str, ms: float, gpu: float | None = None) -> SimpleNamespace:
    """A stand-in for a BenchResult: median ``ms``, p20/p80 at +-10%, 1 MB moved."""
    return SimpleNamespace(
        name=name, label={"naive": "Naive PyTorch", "vectorized": "Optimized PyTorch", "triton": "Triton",
                          "triton_simple": "Triton (simple grid)"}[name],
        median_ms=ms, p20_ms=0.9 * ms, p80_ms=1.1 * ms, gpu_time_ms=gpu, bytes_moved=1_000_000,
        gbps=1e-3 / ms, gpu_gbps=None if gpu is None else 1e-3 / gpu, max_abs_err=1e-4, passed=True,
    )


def job_rows(values=(16, 32, 64), copy: float | None = None, skip_from: int = 64, axis: str = "context_len",
             base=SWEEP_BASE) -> list[dict]:
    """Sweep rows over ``axis`` (``context_len``) of ``base``: naive takes ``value / 100`` ms and is skipped
    from ``skip_from`` on, vectorized 0.5 ms, Triton 0.1 ms (GPU time half of it when
    ``copy``, the ceiling in GB/s, is given)."""
    rows = []
    for v in values:
        config = sweep_grid.point_config(base, axis, v)
        common = dict(device_name="test", warmup=0, iters=2)
        for name, ms in (("naive", 0.01 * v), ("vectorized", 0.5), ("triton", 0.1)):
            if name == "naive" and v >= skip_from:
                rows.append(sweep_runs.status_row(name, "skipped", config, axis, v, note="skipped: over budget",
                                             predicted_ms=0.01 * v, copy_gbps=copy, **common))
            else:
                rows.append(sweep_runs.result_row(fake_result(name, ms, gpu=ms / 2 if copy else None), config,
                                             axis, v, copy_gbps=copy, **common))
    return rows
