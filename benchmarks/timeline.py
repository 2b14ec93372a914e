"""Inside one launch of the Triton decode kernel: when each program starts and ends.

Every program records the GPU's global timer at its start, at the end of its tile
loop and at its end, and the SM it ran on (``prepare_triton_decode(timeline=...)``).
The launch is replayed in a CUDA graph after the same L2-flushing read that
``paged_attention.bench.gpu_time`` uses, and the graph's median time is printed next
to the kernel's own span (first start to last end), which shows how much of a
call is spent outside the programs (launch, and the gap after the previous kernel)
and how much inside them (start-up spread, the slowest program, the merge).

Usage::

    python -m benchmarks.timeline --batch 1 --context 32768 --out docs/data/timeline.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from paged_attention import DecodeConfig, build_decode_inputs
from paged_attention.timing import L2Flusher, gpu_time
from paged_attention.triton_decode import plan_launch, prepare_triton_decode
from paged_attention.validation import check_decode_args


def main(argv=None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m benchmarks.timeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    p.add_argument("--context", type=int, nargs="+", default=[32768, 2048])
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--out")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit(f"benchmarks.timeline needs a CUDA GPU; none is visible here")
    dev = torch.device("cuda")
    flush = L2Flusher(dev)
    rows = []
    for batch, context in zip(args.batch, args.context):
        cfg = DecodeConfig(batch_size=batch, context_lens=context, num_heads=32, num_kv_heads=8, head_dim=128,
                           block_size=16, dtype="float16", device="cuda", block_layout="shuffled")
        inputs = build_decode_inputs(cfg)
        plan = plan_launch(check_decode_args(*inputs.args()), dev, torch.float16)
        programs = cfg.num_kv_heads * plan.num_splits * batch
        timeline = torch.zeros(programs, 4, dtype=torch.int64, device=dev)
        traced = prepare_triton_decode(*inputs.args(), timeline=timeline)
        plain_ms = gpu_time(prepare_triton_decode(*inputs.args()), device=dev, flush=flush)
        traced_ms = gpu_time(traced, device=dev, flush=flush)
        records = torch.zeros(args.replays, programs, 4, dtype=torch.int64, device=dev)
        stream = torch.cuda.Stream(dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(stream):
            traced()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                for i in range(args.replays):
                    flush()
                    traced()
                    records[i].copy_(timeline)
        torch.cuda.current_stream(dev).wait_stream(stream)
        graph.replay()
        torch.cuda.synchronize()
        spans, spreads, slowest, merges, loops, last_loops = [], [], [], [], [], []
        for i in range(args.replays):
            r = records[i].double().cpu()
            start, loop_end, end = r[:, 0], r[:, 1], r[:, 2]
            t0 = start.min()
            spans.append(float(end.max() - t0) / 1e3)
            spreads.append(float(start.max() - t0) / 1e3)
            slowest.append(float((end - start).max()) / 1e3)
            loops.append(float((loop_end - t0).median()) / 1e3)
            last_loops.append(float((loop_end - t0).max()) / 1e3)
            merges.append(float(end.max() - loop_end.max()) / 1e3)
            if i == args.replays - 1:
                for pid in range(programs):
                    rows.append(dict(batch=batch, context=context, program=pid, sm=int(r[pid, 3]),
                                     start_us=float(start[pid] - t0) / 1e3, loop_end_us=float(loop_end[pid] - t0) / 1e3,
                                     end_us=float(end[pid] - t0) / 1e3))
        per_sm = pd.Series([int(x) for x in records[-1][:, 3].cpu()]).value_counts()
        med = statistics.median
        nbytes = cfg.decode_bytes()
        print(f"B={batch} ctx={context}: {programs} programs (splits {plan.num_splits}, block_n {plan.block_n}) "
              f"on {len(per_sm)} SMs, {per_sm.min()}..{per_sm.max()} per SM; {nbytes / 1e6:.1f} MB")
        print(f"  graph time per call: {plain_ms * 1e3:.1f} us plain, {traced_ms * 1e3:.1f} us traced")
        print(f"  inside the kernel (median of {args.replays}): span {med(spans):.1f} us "
              f"(= {nbytes / med(spans) / 1e3:.0f} GB/s), starts spread over {med(spreads):.1f} us, "
              f"slowest program {med(slowest):.1f} us, tile loops end at {med(loops):.1f} us (median) "
              f"and {med(last_loops):.1f} us (last), then {med(merges):.2f} us to the end")
        print(f"  outside the programs: {traced_ms * 1e3 - med(spans):.1f} us of the call", flush=True)
        del inputs, traced, graph, records
        torch.cuda.empty_cache()
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
