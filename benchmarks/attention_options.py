"""What a sliding window, attention sinks and logit soft-capping cost our Triton kernel.

For each classic large configuration (32 query heads, 8 KV heads, head_dim 128,
block_size 16, float16, shuffled pool), in one process, this times (GPU time of
CUDA-graph replays with L2 flushed before each call, ``paged_attention.timing.gpu_time``):

* ``plain``           the configuration as it is;
* ``window W``        the same context with a window of W tokens, next to
                      ``plain at W`` (the same batch at context W): with the window's
                      blocks read only, the two should take the same time;
* ``sinks``, ``soft_cap 50``, ``all``  each option alone, and window + sinks + soft-cap.

Every output is checked against the float64 reference (``reference_decode`` with the
same options) within the float16 tolerance. Achieved GB/s counts the bytes the step
must read (``DecodeConfig.decode_bytes()``: the window's tokens only) over the GPU time,
next to the device's copy bandwidth measured in the same run.

Usage::

    python -m benchmarks.attention_options [--out docs/data/attention_options.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys

import torch

import paged_attention as pa
from paged_attention.timing import L2Flusher, gpu_time, measure_copy_bandwidth

#: (batch, context, windows): the classic large configurations of docs/benchmarks.md.
CONFIGS = (
    (32, 2048, (512,)),
    (64, 4096, (1024, 128)),
    (8, 8192, (4096, 1024)),
    (128, 1024, (128,)),
    (1, 32768, (4096,)),
    (8, 32768, (4096,)),
)
SOFT_CAP = 50.0
BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype="float16", device="cuda")


def measure(config: pa.DecodeConfig, flush: L2Flusher) -> tuple[float, float, bool]:
    """GPU ms, achieved GB/s and whether Triton matched the reference, for one config."""
    inputs = pa.build_decode_inputs(config, poison=True)
    kwargs = inputs.kwargs()
    run = pa.prepare("triton", *inputs.args(), **kwargs)
    out = run().clone()
    expected = pa.reference_decode(*inputs.args(), **kwargs)
    atol, rtol = pa.tolerance(inputs.query.dtype)
    ok = bool(torch.isfinite(out).all()) and torch.allclose(out.double(), expected, atol=atol, rtol=rtol)
    ms = gpu_time(run, device=inputs.query.device, flush=flush)
    return ms, config.decode_bytes() / ms / 1e6, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="CSV file for the table")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    copy = measure_copy_bandwidth(device)
    flush = L2Flusher(device)
    print(f"# {torch.cuda.get_device_name(device)}, torch {torch.__version__}, copy {copy:.0f} GB/s")
    rows = []
    header = ("batch", "context", "case", "window", "gpu_ms", "gbps", "pct_of_copy", "mb", "vs_plain", "correct")
    print(" ".join(f"{h:>10}" for h in header))
    for batch, context, windows in CONFIGS:
        base = pa.DecodeConfig(batch_size=batch, context_lens=context, **BASE)
        cases = [("plain", base)]
        for w in windows:
            cases += [(f"window {w}", base.with_(window=w)), (f"plain at {w}", base.with_(context_lens=w))]
        cases += [("sinks", base.with_(sinks=True)), ("soft_cap 50", base.with_(soft_cap=SOFT_CAP)),
                  ("all", base.with_(window=windows[0], sinks=True, soft_cap=SOFT_CAP))]
        plain_ms = None
        for name, config in cases:
            ms, gbps, ok = measure(config, flush)
            plain_ms = plain_ms or ms
            row = (batch, context, name, config.window or "", f"{ms:.4f}", f"{gbps:.0f}", f"{100 * gbps / copy:.0f}",
                   f"{config.decode_bytes() / 1e6:.1f}", f"{ms / plain_ms:.3f}", "yes" if ok else "NO")
            rows.append(row)
            print(" ".join(f"{str(v):>10}" for v in row), flush=True)
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
    return 0 if all(r[-1] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
