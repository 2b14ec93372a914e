"""v10: what the shuffled block table costs at 134 MB: contiguous vs shuffled tables, decode and paged read."""
import importlib, statistics, sys, torch
sys.path.insert(0, "."); sys.path.insert(0, ".scratch"); sys.path.insert(0, "benchmarks")
td = importlib.import_module("paged_attention.triton_decode")
from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.bench import L2Flusher, check_accuracy, gpu_time, measure_copy_bandwidth
from stream_floor import triton_read
from pread import paged_reader, hnd

class NoMerge:
    def __getitem__(self, grid):
        return lambda *a, **k: None
REAL_MERGE = td._merge_splits_kernel

dev = torch.device("cuda"); flush = L2Flusher(dev)
copy = measure_copy_bandwidth(dev)
print(f"copy {copy:.0f} GB/s", flush=True)
runs = {}
for batch, ctx in [(1, 32768), (8, 8192)]:
    for layout in ("contiguous", "shuffled"):
        cfg = DecodeConfig(batch_size=batch, context_lens=ctx, num_heads=32, num_kv_heads=8, head_dim=128,
                           block_size=16, dtype="float16", device="cuda", block_layout=layout, seed=3)
        inp = build_decode_inputs(cfg); args = list(inp.args()); ref = reference_decode(*args)
        tag = f"B={batch} ctx={ctx} {layout}"
        runs[f"{tag} decode"] = (cfg.decode_bytes(), td.prepare_triton_decode(*args))
        assert check_accuracy(runs[f"{tag} decode"][1]().clone(), ref).passed
        if batch == 1:
            nm = td.prepare_triton_decode(*args, fused_merge=False)
            def run_nm(nm=nm):
                td._merge_splits_kernel = NoMerge()
                try:
                    return nm()
                finally:
                    td._merge_splits_kernel = REAL_MERGE
            runs[f"{tag} decode_nomerge"] = (cfg.decode_bytes(), run_nm)
            q, k, v, table = args[:4]
            t0 = table[0].contiguous()
            runs[f"{tag} paged_read_nhd_sp32_s3"] = (cfg.decode_bytes(), paged_reader(k, v, t0, 2048, 32, 8, 4, 3))
            kh, vh = hnd(k), hnd(v)
            runs[f"{tag} paged_read_hnd_sp128_s1"] = (cfg.decode_bytes(), paged_reader(kh, vh, t0, 2048, 128, 8, 4, 1))
x = torch.randn(134217728 // 2, device=dev).half()
runs["134 MB contiguous read_p4_b4096_w8"] = (x.numel() * 2, triton_read(x, 4 * 132, 4096, 8))
times = {n: [] for n in runs}
for r in range(7):
    for n, (b, run) in runs.items():
        times[n].append(gpu_time(run, device=dev, flush=flush) * 1e3)
for n, t in times.items():
    m = statistics.median(t); b = runs[n][0]
    print(f"{n:48s} {m:7.2f} us  {b / m / 1e3 / copy:6.1%} of copy  (rounds {min(t):.2f}..{max(t):.2f})", flush=True)
