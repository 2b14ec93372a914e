"""v10 probe: layout (NHD vs HND), merge cost, and read floors, in one run, interleaved."""
import statistics, sys, torch
sys.path.insert(0, ".")
import importlib; td = importlib.import_module("paged_attention.triton_decode")
from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.bench import L2Flusher, check_accuracy, gpu_time, measure_copy_bandwidth
sys.path.insert(0, "benchmarks")
from stream_floor import triton_read

dev = torch.device("cuda"); flush = L2Flusher(dev)
copy = measure_copy_bandwidth(dev)
print(f"copy {copy:.0f} GB/s", flush=True)

def hnd(t):
    # same logical [blocks, block_size, kv_heads, head_dim] values, stored head-major per block
    s = torch.empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3], dtype=t.dtype, device=t.device)
    s.copy_(t.permute(0, 2, 1, 3))
    return s.permute(0, 2, 1, 3)

class _NoMerge:
    def __getitem__(self, grid):
        return lambda *a, **k: None

def runs_for(batch, ctx, full):
    cfg = DecodeConfig(batch_size=batch, context_lens=ctx, num_heads=32, num_kv_heads=8, head_dim=128, block_size=16,
                       dtype="float16", device="cuda", block_layout="shuffled", seed=3)
    inp = build_decode_inputs(cfg); args = list(inp.args()); ref = reference_decode(*args)
    h = list(args); h[1] = hnd(args[1]); h[2] = hnd(args[2])
    runs = {"nhd": td.prepare_triton_decode(*args), "hnd": td.prepare_triton_decode(*h)}
    for n, r in runs.items():
        acc = check_accuracy(r().clone(), ref)
        assert acc.passed, (n, acc)
    if full:
        real = td._merge_splits_kernel
        td._merge_splits_kernel = _NoMerge()
        try:
            runs["nhd_nomerge"] = td.prepare_triton_decode(*args, fused_merge=False)
            runs["hnd_nomerge"] = td.prepare_triton_decode(*h, fused_merge=False)
            runs["nhd_nomerge"](); runs["hnd_nomerge"]()
        finally:
            pass  # keep patched while timing
        for sp in (16, 24, 48, 64):
            runs[f"hnd_s{sp}"] = td.prepare_triton_decode(*h, num_splits=sp)
            runs[f"nhd_s{sp}"] = td.prepare_triton_decode(*args, num_splits=sp)
        for w in (8,):
            runs[f"hnd_w{w}"] = td.prepare_triton_decode(*h, num_warps=w)
        x = torch.randn(cfg.decode_bytes() // 2, device=dev).half()
        runs["x.sum"] = lambda: x.sum()
        for pps, blk, w in [(2, 4096, 4), (4, 8192, 8), (4, 4096, 8), (8, 4096, 4)]:
            runs[f"read_p{pps}_b{blk}_w{w}"] = triton_read(x, pps * 132, blk, w)
    return cfg.decode_bytes(), runs

for batch, ctx, full in [(1, 32768, True), (2, 16384, False), (8, 8192, False), (32, 2048, False), (64, 4096, False), (128, 1024, False)]:
    nbytes, runs = runs_for(batch, ctx, full)
    times = {n: [] for n in runs}
    for r in range(7 if full else 5):
        for n, run in runs.items():
            times[n].append(gpu_time(run, device=dev, flush=flush) * 1e3)
    for n, t in times.items():
        m = statistics.median(t)
        print(f"B={batch} ctx={ctx} {n:20s} {m:7.2f} us  {nbytes / m / 1e3 / copy:6.1%} of copy  "
              f"(rounds {min(t):.2f}..{max(t):.2f})", flush=True)
    if full:
        td._merge_splits_kernel = real
