"""Timeline of the plain Triton read (start/end per program) next to the decode's, same run."""
import importlib, statistics, subprocess, sys, torch
sys.path.insert(0, ".")
td = importlib.import_module("paged_attention.triton_decode")
from paged_attention.bench import L2Flusher, gpu_time
import triton, triton.language as tl
_globaltimer = td._globaltimer
_smid = td._smid


@triton.jit
def read_tl(x_ptr, partial_ptr, tl_ptr, n, per_program, BLOCK: tl.constexpr):
    t0 = _globaltimer()
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per_program
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, per_program, BLOCK):
        idx = start + i + offs
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0).to(tl.float32)
    s = tl.sum(acc, 0)
    tl.store(partial_ptr + pid, s)
    rec = tl_ptr + pid.to(tl.int64) * 4
    tl.store(rec, t0)
    tl.store(rec + 1, _globaltimer())
    tl.store(rec + 2, _smid().to(tl.int64))


dev = torch.device("cuda"); flush = L2Flusher(dev)
nbytes = 134217728
x = torch.randn(nbytes // 2, device=dev).half()
progs = 4 * 132; block = 4096
per = -(-x.numel() // (progs * block)) * block
partial = torch.empty(progs, dtype=torch.float32, device=dev)
tlb = torch.zeros(progs, 4, dtype=torch.int64, device=dev)
run = lambda: read_tl[(progs,)](x, partial, tlb, x.numel(), per, BLOCK=block, num_warps=8)
print(f"read traced graph time {gpu_time(run, device=dev, flush=flush) * 1e3:.1f} us")
R = 20
records = torch.zeros(R, progs, 4, dtype=torch.int64, device=dev)
stream = torch.cuda.Stream(dev); stream.wait_stream(torch.cuda.current_stream(dev))
with torch.cuda.stream(stream):
    run()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for i in range(R):
            flush(); run(); records[i].copy_(tlb)
torch.cuda.current_stream(dev).wait_stream(stream)
g.replay(); torch.cuda.synchronize()
med = statistics.median
spans, spreads, meds, p90s, lasts = [], [], [], [], []
for i in range(R):
    r = records[i].double().cpu(); s, e = r[:, 0], r[:, 1]; t0 = s.min()
    spans.append(float(e.max() - t0) / 1e3); spreads.append(float(s.max() - t0) / 1e3)
    ends = (e - t0) / 1e3
    meds.append(float(ends.median())); p90s.append(float(ends.quantile(0.9))); lasts.append(float(ends.max()))
print(f"read: span {med(spans):.2f} us, starts spread {med(spreads):.2f} us, ends median {med(meds):.2f}, "
      f"p90 {med(p90s):.2f}, last {med(lasts):.2f} us")
sys.argv = ["timeline.py", "--batch", "1", "--context", "32768"]
sys.path.insert(0, "benchmarks")
import timeline
timeline.main(["--batch", "1", "--context", "32768"])
