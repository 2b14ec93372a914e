"""How fast can this GPU read N bytes at all? The fixed cost of one memory-bound call.

For each size, on a GPU, with the timing of ``paged_attention.bench.gpu_time`` (CUDA
graphs, L2 flushed by a read before each call):

* ``read``    ``x.sum()`` over a float16 tensor of that many bytes (PyTorch's
              reduction: a read-only stream, the simplest memory-bound kernel);
* ``read_mv``  ``torch.mv`` of the same tensor seen as ``[rows, 128]`` with a vector
              (cuBLAS GEMV: a second, independently tuned read-everything kernel;
              its output, 1/128 of the input, is counted in the bytes);
* ``read_triton`` the fastest of a small sweep of plain Triton read kernels (each of
              ``programs`` programs sums a contiguous slice, ``BLOCK`` elements a
              step; no atomics, one partial per program);
* ``copy``    ``dst.copy_(src)`` moving that many bytes (half read, half written);
* ``triton``  our decode kernel at batch 1 and the context whose K+V is that size
              (num_heads 32, num_kv_heads 8, head_dim 128, block_size 16, shuffled);
* ``triton_b`` our decode kernel at context 2048 and the batch whose K+V is that size.

A least-squares line ``time = bytes / R + t0`` over the sizes separates the streaming
rate ``R`` from the fixed cost ``t0`` (start-up, ramp, tail) that every call pays, and
so shows the largest fraction of the copy bandwidth a call of a given size can reach.

Usage::

    python -m benchmarks.stream_floor --out docs/data/stream_floor.csv
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from paged_attention import DecodeConfig, build_decode_inputs, cdiv, prepare
from paged_attention import runtime  # noqa: F401  (before triton)
from paged_attention.timing import L2Flusher, gpu_time, measure_copy_bandwidth
from paged_attention.results import gbps, pct_of_copy
import triton
import triton.language as tl


@triton.jit
def _read_kernel(x_ptr, partial_ptr, n, per_program, BLOCK: tl.constexpr):
    """Sum a contiguous slice of ``per_program`` elements (a multiple of BLOCK)."""
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per_program
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, per_program, BLOCK):
        idx = start + i + offs
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(acc, 0))


def triton_read(x: torch.Tensor, programs: int, block: int, warps: int):
    """A launcher for :func:`_read_kernel` over ``x`` with ``programs`` programs."""
    n = x.numel()
    per_program = cdiv(n, programs * block) * block
    partial = torch.empty(programs, dtype=torch.float32, device=x.device)
    return lambda: _read_kernel[(programs,)](x, partial, n, per_program, BLOCK=block, num_warps=warps)


TOKEN_BYTES = 2 * 8 * 128 * 2  # K and V of one token: 8 KV heads x 128 dims x float16


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m benchmarks.stream_floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, nargs="+", default=[16.8, 33.6, 67.1, 134.2, 268.4, 536.9, 1073.7])
    p.add_argument("--out")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.stream_floor needs a CUDA GPU; none is visible here")
    dev = torch.device("cuda")
    copy_gbps = measure_copy_bandwidth(dev)
    flush = L2Flusher(dev)
    rows = []
    for mb in args.mb:
        nbytes = int(mb * 1e6)
        x = torch.randn(nbytes // 256 * 128, dtype=torch.float16, device=dev)  # whole rows of 128 for read_mv
        src, dst = x[: x.numel() // 2], torch.empty(x.numel() // 2, dtype=torch.float16, device=dev)
        rows_view = x.view(-1, 128)
        vec = torch.randn(128, dtype=torch.float16, device=dev)
        mv_out = torch.empty(rows_view.shape[0], dtype=torch.float16, device=dev)
        times = {"read": gpu_time(lambda: x.sum(), device=dev, flush=flush),
                 "read_mv": gpu_time(lambda: torch.mv(rows_view, vec, out=mv_out), device=dev, flush=flush),
                 "read_mv_mb": mb * (1 + 1 / 128),
                 "copy": gpu_time(lambda: dst.copy_(src), device=dev, flush=flush)}
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        sweep = {(k, block, warps): gpu_time(triton_read(x, k * sms, block, warps), device=dev, flush=flush)
                 for k in (1, 2, 4, 8) for block, warps in ((2048, 4), (4096, 8), (8192, 8))}
        best = min(sweep, key=sweep.get)
        times["read_triton"] = sweep[best]
        print(f"  fastest Triton read at {mb} MB: {best[0]} programs per SM, BLOCK {best[1]}, {best[2]} warps",
              flush=True)
        del x, src, dst, rows_view, mv_out
        tokens = nbytes // TOKEN_BYTES
        for name, batch, context in (("triton", 1, tokens), ("triton_b", max(1, round(tokens / 2048)), 2048)):
            cfg = DecodeConfig(batch_size=batch, context_lens=context, num_heads=32, num_kv_heads=8, head_dim=128,
                               block_size=16, dtype="float16", device="cuda", block_layout="shuffled")
            run = prepare("triton", *build_decode_inputs(cfg).args())
            times[name] = gpu_time(run, device=dev, flush=flush)
            times[name + "_mb"] = cfg.decode_bytes() / 1e6
            del run
            torch.cuda.empty_cache()
        for name in ("read", "read_mv", "read_triton", "copy", "triton", "triton_b"):
            moved = times.get(name + "_mb", mb)
            rows.append(dict(kind=name, mb=moved, gpu_us=times[name] * 1e3,
                             frac_copy=pct_of_copy(gbps(moved * 1e6, times[name]), copy_gbps) / 100))
            print(f"{name:9s} {moved:8.1f} MB {times[name] * 1e3:8.1f} us {rows[-1]['frac_copy']:6.1%} of copy",
                  flush=True)
    table = pd.DataFrame(rows)
    print(f"\ncopy bandwidth (2 GiB, read + write): {copy_gbps:.0f} GB/s")
    for kind, group in table.groupby("kind", sort=False):
        slope, t0 = np.polyfit(group["mb"], group["gpu_us"], 1)
        # The fraction of copy bandwidth a call of 134.2 MB could reach with this t0.
        best = 134.2 / (134.2 * slope + t0) / (copy_gbps / 1e3) if slope > 0 else float("nan")
        print(f"{kind:9s} fit: {1e3 / slope:6.0f} GB/s streaming + {t0:5.1f} us fixed; "
              f"at 134.2 MB that is {best:.1%} of copy")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
