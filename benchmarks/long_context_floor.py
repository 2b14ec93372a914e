"""Where a long-context decode's time goes, next to reads of the same bytes.

For each (batch, context), in one process, in interleaved rounds (each the median of
``paged_attention.bench.gpu_time``: CUDA graphs, L2 flushed by a read before each
call), this times:

* ``read``            a plain Triton read of the step's byte count from one
                      contiguous buffer (``stream_floor.triton_read``: 4 programs per
                      SM, 4096 elements a step, 8 warps, the fastest shape of that
                      script's sweep at 134 MB);
* ``paged_read``      a kernel that reads exactly the K and V bytes the step needs,
                      through the block table, and only sums them: no scores, no
                      softmax, no merge (grid ``(KV heads, splits)``, 128-token tiles;
                      the faster of two shapes, checked against ``torch.sum``);
* ``decode``          our Triton decode kernel (the default plan);
* ``merge_chain``     a kernel with the decode's grid that does only what follows
                      the tile loops: each program stores a partial result, counts
                      itself in with the same release/acquire atomic, and the last of
                      each KV head merges (the decode's ``merge_partials``); next to it,
                      ``empty_grid``, a kernel of the same grid that stores one value
                      per program. Their difference is the merge chain's own length;

each with the block table shuffled (the layout of docs/benchmarks.md) and contiguous (block ``i`` of
a sequence is the next physical block), so the cost of paging itself shows apart
from the cost of splitting the context. Every decode output is checked against the
float64 reference. The copy bandwidth (2 GiB device-to-device) is measured in the
same run, and each time is printed as GPU time and as a fraction of it.

Usage::

    python -m benchmarks.long_context_floor --out docs/data/long_context_floor.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs, cdiv, reference_decode
from paged_attention import runtime  # noqa: F401  (before triton)
from paged_attention.results import check_accuracy, gbps, pct_of_copy
from paged_attention.launch_plan import FUSED_MERGE_VALUES, plan_launch
from paged_attention.tile_walk import merge_partials
from paged_attention.timing import L2Flusher, gpu_time, measure_copy_bandwidth
from paged_attention.triton_decode import prepare_triton_decode
from paged_attention.validation import check_decode_args
from benchmarks.stream_floor import triton_read
import triton
import triton.language as tl


@triton.jit
def _paged_read_kernel(
    out_ptr, k_ptr, v_ptr, table_ptr, blocks_per_split, needed_blocks,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    BLOCKS_PER_TILE: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    """Sum the K and V values of one KV head over one split of one block-table row."""
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    first = split * blocks_per_split
    last = tl.minimum(first + blocks_per_split, needed_blocks)
    n = tl.arange(0, BLOCKS_PER_TILE * BLOCK_SIZE)
    tile_block = n // BLOCK_SIZE
    tile_slot = n % BLOCK_SIZE
    dims = tl.arange(0, HEAD_DIM)
    k_head = k_ptr + kv_head.to(tl.int64) * stride_kh
    v_head = v_ptr + kv_head.to(tl.int64) * stride_vh
    acc = tl.zeros([HEAD_DIM], tl.float32)
    for block in range(first, last, BLOCKS_PER_TILE):
        logical = block + tile_block
        ok = logical < last
        physical = tl.load(table_ptr + logical, mask=ok, other=0).to(tl.int64)
        k = tl.load(k_head + (physical * stride_kb + tile_slot * stride_ks)[:, None] + dims[None, :],
                    mask=ok[:, None], other=0.0)
        v = tl.load(v_head + (physical * stride_vb + tile_slot * stride_vs)[:, None] + dims[None, :],
                    mask=ok[:, None], other=0.0)
        acc += tl.sum(k.to(tl.float32) + v.to(tl.float32), 0)
    tl.store(out_ptr + (kv_head * tl.num_programs(1) + split) * HEAD_DIM + dims, acc)


@triton.jit
def _merge_chain_kernel(out_ptr, part_ml_ptr, part_acc_ptr, counter_ptr, stride_oh,
                        num_splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, MERGE_CHUNK: tl.constexpr):
    """The decode's epilogue alone: store a partial, arrive, and the last program merges."""
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    g = tl.arange(0, GROUP)
    dims = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + g
    base = heads * num_splits + split
    m = (split % 7).to(tl.float32) + g.to(tl.float32)
    tl.store(part_ml_ptr + base * 2, m)
    tl.store(part_ml_ptr + base * 2 + 1, tl.full([GROUP], 1.0, tl.float32))
    tl.store(part_acc_ptr + base[:, None] * HEAD_DIM + dims[None, :],
             tl.full([GROUP, HEAD_DIM], 1.0, tl.float32) + split.to(tl.float32))
    tl.debug_barrier()
    counter = counter_ptr + kv_head
    finished = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if finished == num_splits - 1:
        tl.debug_barrier()
        merge_partials(out_ptr + (kv_head * GROUP) * stride_oh, stride_oh, 1, part_ml_ptr, part_acc_ptr,
                             (kv_head * GROUP) * num_splits, num_splits, num_splits,
                             GROUP, GROUP, HEAD_DIM, HEAD_DIM, MERGE_CHUNK)
        tl.atomic_xchg(counter, 0)


@triton.jit
def _empty_grid_kernel(out_ptr):
    """One store per program: the launch and start-up of a grid, with no work."""
    tl.store(out_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), 1.0)


def merge_chain(num_kv_heads, splits, group, head_dim, device):
    """Launchers for the merge chain alone and for an empty grid of the same shape."""
    out = torch.empty(num_kv_heads * group, head_dim, dtype=torch.float16, device=device)
    part_ml = torch.empty(num_kv_heads * group * splits * 2, dtype=torch.float32, device=device)
    part_acc = torch.empty(num_kv_heads * group * splits * head_dim, dtype=torch.float32, device=device)
    counters = torch.zeros(num_kv_heads, dtype=torch.int32, device=device)
    flags = torch.empty(num_kv_heads * splits, dtype=torch.float32, device=device)
    chunk = max(1, min(splits, FUSED_MERGE_VALUES // (group * head_dim)))

    def chain():
        _merge_chain_kernel[(num_kv_heads, splits)](out, part_ml, part_acc, counters, out.stride(0), splits,
                                                    GROUP=group, HEAD_DIM=head_dim, MERGE_CHUNK=chunk, num_warps=4)
        return out

    def empty():
        _empty_grid_kernel[(num_kv_heads, splits)](flags, num_warps=4)

    return chain, empty


def paged_read(k_cache, v_cache, table_row, needed_blocks, splits, num_stages):
    """A launcher that reads one sequence's K/V through ``table_row``; ``.sums()``
    gives the ``[num_kv_heads, head_dim]`` float32 sums it computed."""
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    out = torch.empty(num_kv_heads * splits * head_dim, dtype=torch.float32, device=k_cache.device)
    per_split = cdiv(needed_blocks, splits)
    block_size = k_cache.shape[1]

    def launch():
        _paged_read_kernel[(num_kv_heads, splits)](
            out, k_cache, v_cache, table_row, per_split, needed_blocks,
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            BLOCKS_PER_TILE=128 // block_size, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
            num_warps=4, num_stages=num_stages,
        )

    launch.sums = lambda: out.view(num_kv_heads, splits, head_dim).sum(1)
    return launch


def runs_for(batch: int, context: int, layout: str, device: torch.device) -> dict:
    """Name -> launcher for one configuration (outputs checked here)."""
    cfg = DecodeConfig(batch_size=batch, context_lens=context, num_heads=32, num_kv_heads=8, head_dim=128,
                       block_size=16, dtype="float16", device="cuda", block_layout=layout, seed=3)
    inputs = build_decode_inputs(cfg)
    args = inputs.args()
    ref = reference_decode(*args)
    decode = prepare_triton_decode(*args)
    accuracy = check_accuracy(decode().clone(), ref)
    if not accuracy.passed:
        raise AssertionError(f"decode is wrong at {batch} x {context} ({layout}): {accuracy}")
    runs = {"decode": decode}
    if batch == 1:
        _, k_cache, v_cache, tables, _ = args
        row = tables[0].contiguous()
        needed = cdiv(context, cfg.block_size)
        want = (k_cache[row[:needed].long()].float().sum((0, 1)) + v_cache[row[:needed].long()].float().sum((0, 1)))
        readers = {}
        for splits, stages in ((32, 3), (128, 1)):
            reader = paged_read(k_cache, v_cache, row, needed, splits, stages)
            reader()
            if not torch.allclose(reader.sums(), want, rtol=1e-3, atol=1e-1):
                raise AssertionError(f"paged read ({splits} splits) summed the wrong values")
            readers[f"paged_read (splits {splits}, {stages} stage{'s' if stages > 1 else ''})"] = reader
        runs.update(readers)
        if layout == "shuffled":
            splits = plan_launch(check_decode_args(*args), device, cfg.torch_dtype).num_splits
            chain, empty = merge_chain(cfg.num_kv_heads, splits, cfg.num_heads // cfg.num_kv_heads, cfg.head_dim, device)
            # Partial s holds max (s % 7) + g, sum 1 and acc 1 + s for head g of a group,
            # so the merge is a weighted mean of 1 + s with weights 2 ** (s % 7).
            s_ids = torch.arange(splits, dtype=torch.float64)
            w = 2.0 ** (s_ids % 7)
            want_value = float((w * (1 + s_ids)).sum() / w.sum())
            merged = chain().float()
            if not torch.allclose(merged, torch.full_like(merged, want_value), rtol=2e-3):
                raise AssertionError(f"merge chain wrote {merged.flatten()[:4].tolist()}, want {want_value:.4f}")
            runs[f"merge_chain ({splits} splits)"] = chain
            runs[f"empty_grid ({splits} splits)"] = empty
    return cfg.decode_bytes(), runs


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m benchmarks.long_context_floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 2, 8])
    p.add_argument("--context", type=int, nargs="+", default=[32768, 16384, 8192])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out")
    args = p.parse_args(argv)
    if len(args.batch) != len(args.context):
        p.error("give one --context per --batch")
    if not torch.cuda.is_available():
        sys.exit("benchmarks.long_context_floor needs a CUDA GPU; none is visible here")
    dev = torch.device("cuda")
    copy_gbps = measure_copy_bandwidth(dev)
    flush = L2Flusher(dev)
    print(f"copy bandwidth (2 GiB, read + write): {copy_gbps:.0f} GB/s", flush=True)
    rows = []
    for batch, context in zip(args.batch, args.context):
        runs = {}
        nbytes = 0
        for layout in ("shuffled", "contiguous"):
            nbytes, found = runs_for(batch, context, layout, dev)
            runs.update({(layout, name): run for name, run in found.items()})
        x = torch.randn(nbytes // 2, device=dev).half()
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        runs[("contiguous buffer", "read")] = triton_read(x, 4 * sms, 4096, 8)
        times = {key: [] for key in runs}
        for _ in range(args.rounds):
            for key, run in runs.items():
                times[key].append(gpu_time(run, device=dev, flush=flush) * 1e3)
        for (layout, name), t in times.items():
            us = statistics.median(t)
            moves_kv = not name.startswith(("merge_chain", "empty_grid"))  # those two read no K/V
            frac = pct_of_copy(gbps(nbytes, us / 1e3), copy_gbps) / 100 if moves_kv else float("nan")
            rows.append(dict(batch=batch, context=context, table=layout, kind=name, mb=nbytes / 1e6, gpu_us=us,
                             frac_copy=frac, min_us=min(t), max_us=max(t)))
            share = f"{frac:6.1%} of copy" if moves_kv else " " * 14
            print(f"B={batch:<3d} ctx={context:<6d} {layout:17s} {name:36s} {us:7.2f} us {share} "
                  f"(rounds {min(t):.2f} to {max(t):.2f})", flush=True)
        del x, runs
        torch.cuda.empty_cache()
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
