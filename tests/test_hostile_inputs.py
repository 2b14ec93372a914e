"""Every decode implementation against the float64 reference on inputs that break
naive kernels: caches, queries, tables and lengths in non-contiguous layouts, a
wrong table entry (the test design's own check), logits beyond float16's range or
far below any finite sentinel, element offsets past 2**31, empty sequences and
table entries past a context. Inputs are fresh per test (``seed`` fixture); the
base case and the axes one at a time: ``test_correctness.py``.
"""

from __future__ import annotations

import pytest
import torch

import paged_attention as pa
from helpers import DTYPES, IMPL_NAMES, IMPLS, assert_matches, build, dtype_id, loud_block, paged_inputs, query_rows, run_and_compare, seed  # noqa: F401


# -- how the caches are laid out in memory -----------------------------------------

def _restride(cache: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as ``cache`` in a non-contiguous layout. Padding holds NaN, so
    a read outside the view poisons the output."""
    nb, bs, kvh, hd = cache.shape
    if layout == "sliced":  # a slice of a wider last dim
        wide = torch.full((nb, bs, kvh, hd + 24), float("nan"), dtype=cache.dtype, device=cache.device)
        wide[..., :hd] = cache
        return wide[..., :hd]
    if layout == "every_other_block":
        pool = torch.full((2 * nb, bs, kvh, hd), float("nan"), dtype=cache.dtype, device=cache.device)
        pool[::2] = cache
        return pool[::2]
    if layout == "heads_major":  # stored [blocks, kv_heads, slots, dim]
        return cache.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    if layout == "dim_major":  # stored [dim, blocks, slots, kv_heads]: head_dim stride is not 1
        return cache.permute(3, 0, 1, 2).contiguous().permute(1, 2, 3, 0)
    raise AssertionError(layout)


@pytest.mark.parametrize("layout", ["interleaved", "sliced", "every_other_block", "heads_major", "dim_major"])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_non_contiguous_caches(impl, layout, attention, device, seed):
    inputs = build(device, seed, attention=attention, context_lens=(1, 16, 17, 50))
    q, k, v, tables, lens = inputs.args()
    expected = pa.reference_decode(q, k, v, tables, lens, **inputs.options())
    if layout == "interleaved":  # K and V of a slot side by side in one tensor
        kv = torch.stack([k, v], dim=2)  # [blocks, slots, 2, kv_heads, dim]
        k2, v2 = kv[:, :, 0], kv[:, :, 1]
    else:
        k2, v2 = _restride(k, layout), _restride(v, layout)
    assert not k2.is_contiguous() and not v2.is_contiguous()
    for new, old in ((k2, k), (v2, v)):  # same values, poison included (NaN != NaN for torch.equal)
        torch.testing.assert_close(new, old, rtol=0, atol=0, equal_nan=True)
    run_and_compare(impl, (q, k2, v2, tables, lens), expected=expected, options=inputs.options())


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_non_contiguous_query(impl, attention, device, seed):
    inputs = build(device, seed, attention=attention, context_lens=(1, 16, 17, 50))
    q, k, v, tables, lens = inputs.args()
    q2 = q.transpose(0, 1).contiguous().transpose(0, 1)  # stored [heads, batch, dim]
    assert not q2.is_contiguous()
    run_and_compare(impl, (q2, k, v, tables, lens), expected=pa.reference_decode(*inputs.args(), **inputs.options()),
                    options=inputs.options())


def _strided_index_params():
    cases = []
    for impl in IMPL_NAMES:
        for layout in ("table_every_other_column", "table_transposed", "lens_strided"):
            cases.append(pytest.param(impl, layout, id=f"{impl}-{layout}"))
    return cases


@pytest.mark.parametrize("impl, layout", _strided_index_params())
def test_non_contiguous_tables_and_lengths(impl, layout, attention, device, seed):
    """A strided block table or length vector is honoured or refused with a ValueError,
    never read as if it were contiguous."""
    inputs = build(device, seed, attention=attention, context_lens=(20, 70, 33, 5), spare_blocks=4)
    q, k, v, tables, lens = inputs.args()
    expected = pa.reference_decode(*inputs.args(), **inputs.options())
    # Unneeded entries name a loud (unused, in-range) block, so a misread gives a wrong
    # answer rather than an out-of-bounds access.
    tables = torch.where(tables < 0, loud_block(inputs.pool_owner), tables)
    if layout == "table_every_other_column":
        wide = torch.full((tables.shape[0], 2 * tables.shape[1]), loud_block(inputs.pool_owner),
                          dtype=tables.dtype, device=tables.device)
        wide[:, ::2] = tables
        tables = wide[:, ::2]
    elif layout == "table_transposed":
        tables = tables.t().contiguous().t()
    else:
        lens = torch.stack([lens, torch.zeros_like(lens)], dim=1)[:, 0]
    assert not (tables.is_contiguous() and lens.is_contiguous())
    try:
        out = IMPLS[impl](q, k, v, tables, lens, **inputs.options())
    except ValueError as err:
        assert "block_tables" in str(err) or "context_lens" in str(err)
        return
    assert_matches(out, q, expected)


# -- loud values catch wrong reads -------------------------------------------------

@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_wrong_table_entry_changes_the_output(impl, attention, device, seed):
    """Sanity check of the test design: point one needed entry at an unused (loud,
    finite) block and every implementation's output moves far past tolerance."""
    inputs = build(device, seed, attention=attention, context_lens=(20, 70, 33), spare_blocks=3, dtype="float32",
                   poison=False)
    q, k, v, tables, lens = inputs.args()
    right = pa.reference_decode(q, k, v, tables, lens, **inputs.options())
    wrong_tables = tables.clone()
    wrong_tables[1, 4] = loud_block(inputs.pool_owner)  # the last of sequence 1's 5 blocks: in every window
    out = run_and_compare(impl, (q, k, v, wrong_tables, lens), options=inputs.options())
    assert (out.double() - right).abs().max() > 1.0


# -- numerically hostile logits ----------------------------------------------------

def _token_positions(tables: torch.Tensor, lens: torch.Tensor, block_size: int, window: int | None = None):
    """For each sequence, the (physical block, slot) of each token it attends to
    (all of its context, or the last ``window``)."""
    out = []
    for b, n in enumerate(lens.tolist()):
        tokens = torch.arange(0 if window is None else max(0, n - window), n)
        out.append((tables[b].cpu().long()[tokens // block_size], tokens % block_size))
    return out


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_float16_logits_beyond_float16_range(impl, attention, device, seed):
    """q·k of about 1e7 with scale 1: a float16 dot product would overflow to inf.
    Integer-valued q and k make every logit exact in float32, and two tied keys per
    (sequence, KV head), in different blocks where the window spans two, take all
    the weight (a soft-cap squeezes them all to the cap)."""
    gen = torch.Generator().manual_seed(seed)
    lengths, block_size, head_dim = (64, 40), 16, 128
    q, k, v, tables, lens = paged_inputs(
        lengths, ([3, 0, 5, 1], [2, 6, 4]), num_blocks=8, block_size=block_size,
        num_heads=4, num_kv_heads=2, head_dim=head_dim, seed=seed, window=attention.window,
    )
    q = torch.randint(100, 301, q.shape, generator=gen).float()
    attended = _token_positions(tables, lens, block_size, attention.window)
    for blocks, slots in attended:
        n = len(blocks)
        k[blocks, slots] = torch.randint(100, 300, (n, 2, head_dim), generator=gen).float()
        for kv_head in range(2):
            spans = max(n // block_size, 1)
            tied = (torch.randperm(spans, generator=gen)[:2] * block_size
                    + torch.randint(0, min(block_size, n), (min(spans, 2),), generator=gen))
            k[blocks[tied], slots[tied], kv_head] = 300.0
    args = tuple(t.to(device=device, dtype=torch.float16) if t.is_floating_point() else t.to(device)
                 for t in (q, k, v, tables, lens))
    blocks, slots = attended[0]
    logits = args[1][blocks.to(device), slots.to(device), 0].double() @ args[0][0, 0].double()
    assert float(logits.min()) > 10 * 65504  # every q·k is far past float16's largest value
    run_and_compare(impl, args, scale=1.0, options=attention.options(4, device, seed))


@pytest.mark.parametrize(
    "lengths, block_ids",
    [((70, 33, 5), ([9, 2, 11, 0, 5, 7, 13, 1, 4], [3, 12, 6, 10, 14], [8])),
     ((21, 21), ([9, 2, 11], [3, 12, 6]))],  # equal lengths ending mid-block: no mask needed
    ids=["ragged", "equal-lengths"],
)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_very_negative_logits(impl, dtype, lengths, block_ids, attention, device, seed):
    """Every logit near -1e5, far below any finite sentinel (-1e4, float16's -65504):
    q = 1 and integer keys give exact logits -102400 for a random set of tied tokens
    and -102464 for the rest, so the output is the mean of the tied tokens' values."""
    gen = torch.Generator().manual_seed(seed)
    block_size, head_dim = 8, 64
    q, k, v, tables, lens = paged_inputs(
        lengths, block_ids, num_blocks=16,
        block_size=block_size, num_heads=4, num_kv_heads=2, head_dim=head_dim, seed=seed, window=attention.window,
    )
    q = torch.ones_like(q)
    attended = _token_positions(tables, lens, block_size, attention.window)
    for blocks, slots in attended:
        n = len(blocks)
        keys = torch.full((n, 2, head_dim), -25.0)
        below = torch.rand(n, 2, generator=gen) < 0.7
        below[torch.randint(0, n, (1,), generator=gen)] = False  # at least one tied token
        dim = torch.randint(0, head_dim, (n, 2), generator=gen)
        keys.scatter_(2, dim[..., None], torch.where(below, -26.0, -25.0)[..., None])
        k[blocks, slots] = keys
    args = tuple(t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
                 for t in (q, k, v, tables, lens))
    blocks, slots = attended[0]
    logits = 64.0 * (args[1][blocks.to(device), slots.to(device), 0].double() @ args[0][0, 0].double())
    assert float(logits.max()) == -102400.0 and float(logits.min()) == -102464.0
    run_and_compare(impl, args, scale=64.0, options=attention.options(4, device, seed))


# -- element offsets past 2**31 ----------------------------------------------------

@pytest.fixture(scope="module")
def large_pool():
    """A float16 pool of 2**21 + 64 blocks of 1024 elements: more than 2**31 elements,
    most never touched (torch.empty commits no pages). The batch reads blocks near the
    end, whose element offsets do not fit in int32."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    block_size, num_kv_heads, head_dim = 16, 1, 64
    num_blocks = 2**21 + 64
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k = torch.empty(shape, dtype=torch.float16, device=device)
    v = torch.empty(shape, dtype=torch.float16, device=device)
    gen = torch.Generator().manual_seed(2**31)
    ids = [[num_blocks - 1, num_blocks - 7, num_blocks - 30], [num_blocks - 2, num_blocks - 64, num_blocks - 10, num_blocks - 33]]
    loud = [num_blocks - 3, num_blocks - 4, num_blocks - 5, 0, 2**20]
    for b in ids:
        idx = torch.tensor(b, device=device)
        k[idx] = torch.randn(len(b), *shape[1:], generator=gen).half().to(device)
        v[idx] = torch.randn(len(b), *shape[1:], generator=gen).half().to(device)
    k[torch.tensor(loud, device=device)] = torch.tensor([float("nan"), float("inf"), -float("inf"), 6e4, 0.0],
                                                        dtype=k.dtype, device=device).view(-1, 1, 1, 1)
    v[torch.tensor(loud, device=device)] = torch.tensor([float("inf"), float("nan"), 6e4, -float("inf"), 0.0],
                                                        dtype=v.dtype, device=device).view(-1, 1, 1, 1)
    tables = torch.tensor([ids[0] + [-1], ids[1]], dtype=torch.int32, device=device)
    lens = torch.tensor([40, 61], dtype=torch.int32, device=device)
    query = torch.randn(2, 4, head_dim, generator=gen).half().to(device)
    assert k.numel() > 2**31 and (num_blocks - 1) * k.stride(0) > 2**31
    args = (query, k, v, tables, lens)
    yield args


#: Every implementation, plus the Triton kernel's two other table paths: tiles of
#: one block (a scalar table load) and split-K with its merge.
LARGE_POOL_RUNS = {
    **IMPLS,
    "triton-one-block-tiles": lambda *args, **kw: pa.prepare_triton_decode(*args, block_n=16, **kw)(),
    "triton-split": lambda *args, **kw: pa.prepare_triton_decode(*args, block_n=16, num_splits=4, **kw)(),
}


@pytest.mark.slow
@pytest.mark.parametrize("run", LARGE_POOL_RUNS)
def test_element_offsets_past_int32(run, attention, large_pool):
    args = large_pool
    options = attention.options(4, args[0].device)
    expected = pa.reference_decode(*args, **options)
    if run.startswith("triton-"):
        plan = pa.plan_launch(pa.check_decode_args(*args), args[0].device, args[0].dtype, block_n=16,
                              num_splits=4 if run == "triton-split" else 1)
        assert plan.blocks_per_tile == 1 and plan.num_splits == (4 if run == "triton-split" else 1)
    out = LARGE_POOL_RUNS[run](*args, **options)
    assert torch.isfinite(out).all()
    assert_matches(out, args[0], expected)


# -- empty sequences and ignored table entries --------------------------------------

@pytest.mark.parametrize("position", [0, 1, 3])
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_empty_sequence(impl, position, attention, device, seed):
    lengths = [23, 70, 9]
    lengths.insert(position, 0)
    inputs = build(device, seed, attention=attention, context_lens=tuple(lengths))
    q, k, v, tables, lens = inputs.args()
    out = run_and_compare(impl, inputs.args(), options=inputs.options())
    rows = query_rows(inputs.config)  # each sequence's query rows (one, or its draft tokens)
    assert torch.equal(out[rows[position]], torch.zeros_like(out[rows[position]]))  # with a sink too
    keep = [b for b in range(len(lengths)) if b != position]
    kept_rows = [r for b in keep for r in rows[b]]
    options = inputs.options()
    if "query_lens" in options:
        options["query_lens"] = options["query_lens"][keep]
    alone = IMPLS[impl](q[kept_rows], k, v, tables[keep], lens[keep], **options)
    atol, rtol = pa.tolerance(q.dtype)
    torch.testing.assert_close(out[kept_rows], alone, atol=atol, rtol=rtol)




def _empty_batch_params():
    cases = []
    for impl in IMPL_NAMES:
        for case in ("one-column", "no-columns", "empty-pool"):
            cases.append(pytest.param(impl, case, id=f"{impl}-{case}"))
    return cases


@pytest.mark.parametrize("impl, case", _empty_batch_params())
def test_all_sequences_empty(impl, case, attention, device, seed):
    """Every context empty: all-zero output, also with a table of no columns or a pool
    of no blocks (which validation accepts, since no entry is needed)."""
    inputs = build(device, seed, attention=attention, context_lens=(0, 0, 0),
                   spare_blocks=0 if case == "empty-pool" else 1)
    q, k, v, tables, lens = inputs.args()
    assert k.shape[0] == (0 if case == "empty-pool" else 1)
    if case == "no-columns":
        tables = tables[:, :0]
    out = run_and_compare(impl, (q, k, v, tables, lens), options=inputs.options())
    assert torch.equal(out, torch.zeros_like(out))




def _past_end_params():
    cases = []
    for impl in IMPL_NAMES:
        for filler in ("minus_one", "loud_block", "out_of_range"):
            cases.append(pytest.param(impl, filler, id=f"{impl}-{filler}"))
    return cases


@pytest.mark.parametrize("impl, filler", _past_end_params())
def test_entries_past_the_context_are_ignored(impl, filler, attention, device, seed):
    """Table entries past a sequence's last needed block may hold anything."""
    inputs = build(device, seed, attention=attention, context_lens=(5, 70, 17, 0), spare_blocks=2, dtype="float32")
    q, k, v, tables, lens = inputs.args()
    expected = pa.reference_decode(*inputs.args(), **inputs.options())
    needed = -(-lens.long() // inputs.config.block_size)
    past = torch.arange(tables.shape[1], device=tables.device)[None, :] >= needed[:, None]
    assert int(past.sum()) >= 6
    fill = {
        "minus_one": -1,
        "loud_block": loud_block(inputs.pool_owner),
        "out_of_range": inputs.config.num_blocks + 7,
    }[filler]
    changed = torch.where(past, torch.full_like(tables, fill), tables)
    if filler == "out_of_range":
        changed[0, -1] = -5
    run_and_compare(impl, (q, k, v, changed, lens), expected=expected, options=inputs.options())
