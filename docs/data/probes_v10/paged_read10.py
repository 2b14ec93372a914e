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


dev = torch.device("cuda"); flush = L2Flusher(dev)
copy = measure_copy_bandwidth(dev)
print(f"copy {copy:.0f} GB/s", flush=True)
cfg = DecodeConfig(batch_size=1, context_lens=32768, num_heads=32, num_kv_heads=8, head_dim=128, block_size=16,
                   dtype="float16", device="cuda", block_layout="shuffled", seed=3)
inp = build_decode_inputs(cfg); args = list(inp.args()); ref = reference_decode(*args); nbytes = cfg.decode_bytes()
q, k, v, table, lens = args[:5]
table = table[0].contiguous(); needed = 32768 // 16
# correctness of the reader: the sum of every needed K and V value per KV head
want = (k[table.long()].float().sum((0, 1)) + v[table.long()].float().sum((0, 1)))  # [8, 128]
runs = {"decode": td.prepare_triton_decode(*args)}
assert check_accuracy(runs["decode"]().clone(), ref).passed
kh, vh = hnd(k), hnd(v)
for layout, (kk, vv) in {"nhd": (k, v), "hnd": (kh, vh)}.items():
    for splits in (32, 64, 66, 128, 132):
        for tile_blocks in (4, 8):
            for warps in (4, 8):
                for stages in (1, 3):
                    name = f"paged_{layout}_sp{splits}_t{tile_blocks * 16}_w{warps}_s{stages}"
                    try:
                        r = paged_reader(kk, vv, table, needed, splits, tile_blocks, warps, stages)
                        r()
                        got = r.out.view(8, splits, 128).sum(1)
                        assert torch.allclose(got, want, rtol=1e-3, atol=1e-1), (name, (got - want).abs().max())
                        runs[name] = r
                    except Exception as e:
                        print(name, "failed:", type(e).__name__, str(e)[:150], flush=True)
x = torch.randn(nbytes // 2, device=dev).half()
runs["read_p4_b4096_w8"] = triton_read(x, 4 * 132, 4096, 8)
runs["x.sum"] = lambda: x.sum()
# first pass: one timing each, to pick the best readers
first = {n: gpu_time(r, device=dev, flush=flush) * 1e3 for n, r in runs.items()}
keep = sorted((n for n in first if n.startswith("paged")), key=first.get)[:8] + ["decode", "read_p4_b4096_w8", "x.sum"]
for n in sorted(first, key=first.get):
    print(f"  pass1 {n:36s} {first[n]:7.2f} us  {nbytes / first[n] / 1e3 / copy:6.1%}", flush=True)
times = {n: [] for n in keep}
for r in range(7):
    for n in keep:
        times[n].append(gpu_time(runs[n], device=dev, flush=flush) * 1e3)
for n, t in times.items():
    m = statistics.median(t)
    print(f"{n:36s} {m:7.2f} us  {nbytes / m / 1e3 / copy:6.1%} of copy  (rounds {min(t):.2f}..{max(t):.2f})", flush=True)
