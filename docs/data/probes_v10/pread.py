"""v10: the paged read floor. Read exactly the K/V bytes a (1, 32768) decode step needs, through
the shuffled block table, with no attention at all; compare with a contiguous read and our kernel."""
import importlib, statistics, sys, torch
sys.path.insert(0, ".")
td = importlib.import_module("paged_attention.triton_decode")
from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.bench import L2Flusher, check_accuracy, gpu_time, measure_copy_bandwidth
sys.path.insert(0, "benchmarks")
from stream_floor import triton_read
import triton, triton.language as tl


@triton.jit
def paged_read(out_ptr, k_ptr, v_ptr, table_ptr, blocks_per_split, needed_blocks,
               stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
               BLOCKS_PER_TILE: tl.constexpr, BLOCK_SIZE: tl.constexpr, D: tl.constexpr):
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    first = split * blocks_per_split
    last = tl.minimum(first + blocks_per_split, needed_blocks)
    n = tl.arange(0, BLOCKS_PER_TILE * BLOCK_SIZE)
    tb = n // BLOCK_SIZE
    ts = n % BLOCK_SIZE
    dims = tl.arange(0, D)
    k_head = k_ptr + kv_head.to(tl.int64) * stride_kh
    v_head = v_ptr + kv_head.to(tl.int64) * stride_vh
    acc = tl.zeros([D], tl.float32)
    for b in range(first, last, BLOCKS_PER_TILE):
        logical = b + tb
        ok = logical < last
        phys = tl.load(table_ptr + logical, mask=ok, other=0).to(tl.int64)
        k = tl.load(k_head + (phys * stride_kb + ts * stride_ks)[:, None] + dims[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(v_head + (phys * stride_vb + ts * stride_vs)[:, None] + dims[None, :], mask=ok[:, None], other=0.0)
        acc += tl.sum(k.to(tl.float32) + v.to(tl.float32), 0)
    tl.store(out_ptr + (kv_head * tl.num_programs(1) + split) * D + dims, acc)


def paged_reader(k, v, table, needed, splits, tile_blocks, warps, stages):
    bps = -(-needed // splits)
    out = torch.empty(8 * splits * 128, dtype=torch.float32, device=k.device)
    grid = (8, splits)
    launch = lambda: paged_read[grid](out, k, v, table, bps, needed, k.stride(0), k.stride(1), k.stride(2),
                                    v.stride(0), v.stride(1), v.stride(2), BLOCKS_PER_TILE=tile_blocks,
                                    BLOCK_SIZE=16, D=128, num_warps=warps, num_stages=stages)
    launch.out = out
    return launch


def hnd(t):
    s = torch.empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3], dtype=t.dtype, device=t.device)
    s.copy_(t.permute(0, 2, 1, 3))
    return s.permute(0, 2, 1, 3)


