"""v10 sweep at (1, 32768): which launch shape streams fastest, with and without the merge."""
import importlib, statistics, sys, torch
sys.path.insert(0, ".")
td = importlib.import_module("paged_attention.triton_decode")
from paged_attention import DecodeConfig, build_decode_inputs, reference_decode
from paged_attention.bench import L2Flusher, check_accuracy, gpu_time, measure_copy_bandwidth
sys.path.insert(0, "benchmarks")
from stream_floor import triton_read

dev = torch.device("cuda"); flush = L2Flusher(dev)
copy = measure_copy_bandwidth(dev)
print(f"copy {copy:.0f} GB/s", flush=True)
REAL_KERNEL, REAL_MERGE = td._paged_decode_kernel, td._merge_splits_kernel
EXTRA = {}

class Patched:
    def __getitem__(self, grid):
        f = REAL_KERNEL[grid]
        return lambda *a, **k: f(*a, **{**k, **EXTRA})

class NoMerge:
    def __getitem__(self, grid):
        return lambda *a, **k: None

cfg = DecodeConfig(batch_size=1, context_lens=32768, num_heads=32, num_kv_heads=8, head_dim=128, block_size=16,
                   dtype="float16", device="cuda", block_layout="shuffled", seed=3)
inp = build_decode_inputs(cfg); args = list(inp.args()); ref = reference_decode(*args); nbytes = cfg.decode_bytes()
td._paged_decode_kernel = Patched()
VARIANTS = [  # (name, plan overrides, launch extras)
    ("base", {}, {}),
    ("s4", dict(num_stages=4), {}),
    ("s2", dict(num_stages=2), {}),
    ("bn64", dict(block_n=64), {}),
    ("bn64_s4", dict(block_n=64, num_stages=4), {}),
    ("sp33", dict(num_splits=33), {}),
    ("sp64_bn64", dict(num_splits=64, block_n=64), {}),
    ("sp66_bn64", dict(num_splits=66, block_n=64), {}),
    ("sp66_bn64_s2", dict(num_splits=66, block_n=64, num_stages=2), {}),
    ("sp66_bn64_r128", dict(num_splits=66, block_n=64), dict(maxnreg=128)),
    ("sp64_bn32_s4", dict(num_splits=64, block_n=32, num_stages=4), {}),
    ("w8_r96", dict(num_warps=8), dict(maxnreg=96)),
    ("w8_r128", dict(num_warps=8), dict(maxnreg=128)),
    ("r128", {}, dict(maxnreg=128)),
    ("sp48_bn64", dict(num_splits=48, block_n=64), {}),
]
runs = {}
for name, over, extra in VARIANTS:
    for merge in (True, False):
        key = f"{name}{'' if merge else '_nomerge'}"
        try:
            EXTRA.clear(); EXTRA.update(extra)
            td._merge_splits_kernel = REAL_MERGE
            launch = td.prepare_triton_decode(*args, **over, **({} if merge else dict(fused_merge=False)))
            if merge:
                acc = check_accuracy(launch().clone(), ref)
                assert acc.passed, (key, acc)
            def run(launch=launch, extra=dict(extra), merge=merge):
                EXTRA.clear(); EXTRA.update(extra)
                td._merge_splits_kernel = REAL_MERGE if merge else NoMerge()
                return launch()
            run()
            runs[key] = run
        except Exception as e:  # a shape that does not compile or fit: report and go on
            print(key, "failed:", type(e).__name__, str(e)[:200], flush=True)
x = torch.randn(nbytes // 2, device=dev).half()
runs["read_p4_b4096_w8"] = triton_read(x, 4 * 132, 4096, 8)
runs["x.sum"] = lambda: x.sum()
times = {n: [] for n in runs}
for r in range(5):
    for n, run in runs.items():
        times[n].append(gpu_time(run, device=dev, flush=flush) * 1e3)
for n, t in times.items():
    m = statistics.median(t)
    print(f"{n:26s} {m:7.2f} us  {nbytes / m / 1e3 / copy:6.1%} of copy  (rounds {min(t):.2f}..{max(t):.2f})", flush=True)
