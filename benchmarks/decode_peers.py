"""Our decode implementations against the kernels people would otherwise reach for.

On the same inputs, in one process, for each configuration:

* ``triton``           our Triton kernel (grouped GQA, split-K) on the paged cache;
* ``triton_simple``    the textbook (batch, head)-grid Triton kernel;
* ``vectorized``       Optimized PyTorch (one gather, two batched products);
* ``gather_sdpa``      the usual PyTorch path: gather the pages into a padded
                       contiguous cache, then ``scaled_dot_product_attention``;
* ``flex_paged``       FlexAttention's paged decode
                       (``torch.nn.attention.experimental._paged_attention``, compiled);
* ``sdpa_contiguous``  SDPA on a cache that was already contiguous (no paging at all):
                       the speed paging would have to match to be free.

Each output is checked against the float64 reference. Times are GPU times from
CUDA-graph replays with the L2 flushed (by a read) before every call, and the
plain-call latency; bandwidth counts the bytes a decode step must move. The copy
bandwidth of the device is measured in the same run.

Usage (on a GPU host)::

    python -m benchmarks.decode_peers --out peers.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import traceback

import torch
import torch.nn.functional as F

from paged_attention import DecodeConfig, build_decode_inputs, prepare, reference_decode
from paged_attention.bench import check_accuracy
from paged_attention.timing import L2Flusher, gpu_time, measure_copy_bandwidth, time_calls
from paged_attention.config import ragged_lengths

BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, block_layout="shuffled")

#: (name, batch_size, context_lens, overrides): the configurations of docs/benchmarks.md.
CONFIGS = [
    ("large", 32, 2048, {}),
    ("large", 64, 4096, {}),
    ("large", 8, 8192, {}),
    ("large", 128, 1024, {}),
    ("large", 1, 32768, {}),
    ("large", 32, 2048, {"block_size": 256, "num_heads": 16}),
    ("small", 2, 60, {}),
    ("small", 1, 512, {}),
    ("small", 16, 256, {}),
    ("small", 4, 2048, {}),
    ("ragged", 64, ragged_lengths(64, 1, 8192, seed=1), {}),
]


def sdpa_contiguous(inputs, shape):
    """SDPA over a cache that is already contiguous per sequence (built outside the timing)."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh, group = shape.num_kv_heads, shape.query_group_size
    n = shape.max_context_len
    cols = -(-n // shape.block_size)
    k = k_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    v = v_cache[tables[:, :cols].long().clamp_min(0)].reshape(b, -1, kvh, d)[:, :n].transpose(1, 2).contiguous()
    q4 = q.reshape(b, kvh, group, d)
    mask = None
    if int(shape.context_lens.min()) != n:  # ragged: a length mask, as any padded layout needs
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :]
    return lambda: F.scaled_dot_product_attention(q4, k, v, attn_mask=mask, scale=shape.scale).reshape(b, h, d)


def gather_sdpa(inputs, shape):
    """Gather every sequence's pages into a padded contiguous cache, then SDPA (both timed)."""
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    kvh = shape.num_kv_heads
    cols = -(-shape.max_context_len // shape.block_size)
    n = cols * shape.block_size
    # Slots past a context (a ragged batch, or a partly filled last block) need a mask.
    ragged = bool((shape.context_lens != n).any())

    def run():
        idx = tables[:, :cols].long().clamp_min(0)
        k = k_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        v = v_cache[idx].reshape(b, n, kvh, d).transpose(1, 2)
        mask = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :] if ragged else None
        return F.scaled_dot_product_attention(
            q[:, :, None, :], k, v, attn_mask=mask, scale=shape.scale, enable_gqa=True
        ).reshape(b, h, d)

    return run


_flex_compiled = None


def flex_paged(inputs, shape):
    """FlexAttention paged decode, using its own physical layout ``[1, kv_heads, pages * page_size, dim]``."""
    global _flex_compiled
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _flex_compiled is None:
        _flex_compiled = torch.compile(flex_attention, fullgraph=True)
    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    num_blocks, bs, kvh, _ = k_cache.shape
    dev = q.device
    k_flex = k_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()
    v_flex = v_cache.reshape(num_blocks * bs, kvh, d).permute(1, 0, 2).unsqueeze(0).contiguous()

    paged = PagedAttention(num_blocks, bs, b, device=str(dev))
    cols = -(-shape.max_context_len // bs)
    table = tables[:, :cols].long()
    needed = (lens.long() + bs - 1) // bs
    used = torch.arange(cols, device=dev)[None, :] < needed[:, None]
    paged.page_table[:, :cols] = torch.where(used, table, -1)
    rows, logical = torch.nonzero(used, as_tuple=True)
    paged.physical_to_logical[rows, table[rows, logical]] = logical
    paged.capacity[:] = needed * bs

    def causal_free(bi, hi, qi, ki):
        return ki < lens[bi]

    # The block mask's KV block must equal the page size; its query block is padded.
    logical_mask = create_block_mask(causal_free, b, None, 1, cols * bs, device=dev, BLOCK_SIZE=bs)
    block_mask = paged.convert_logical_block_mask(logical_mask, torch.arange(b, device=dev), kv_len=lens.long())
    q4 = q[:, :, None, :]
    errors = []
    for options in FLEX_KERNEL_OPTIONS:
        run = lambda options=options: _flex_compiled(  # noqa: E731
            q4, k_flex, v_flex, block_mask=block_mask, scale=shape.scale, enable_gqa=True,
            kernel_options=options or None,
        ).reshape(b, h, d)
        try:
            run()
        except Exception as exc:  # this torch's flex decoding rejects these tile options
            errors.append(f"{options}: {str(exc).splitlines()[0][:100]}")
            continue
        return run
    raise RuntimeError("FlexAttention paged decode failed with every kernel option tried: " + " | ".join(errors))


#: Tile options tried in order until FlexAttention compiles for page size 16 (its
#: default tiles do not divide a 16-token page for some shapes).
FLEX_KERNEL_OPTIONS = ({}, {"BLOCK_M": 16, "BLOCK_N": 16})


PEERS = {"sdpa_contiguous": sdpa_contiguous, "gather_sdpa": gather_sdpa, "flex_paged": flex_paged}
OURS = ("triton", "triton_simple", "vectorized")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode_peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", nargs="+", default=["float16", "bfloat16"])
    p.add_argument("--only", choices=["large", "small", "ragged"], nargs="+")
    p.add_argument("--impl", nargs="+", default=list(OURS) + list(PEERS), choices=list(OURS) + list(PEERS))
    p.add_argument("--head-dim", type=int, default=BASE["head_dim"],
                   help="head_dim of every configuration (the targets in docs/benchmarks.md are at 128)")
    p.add_argument("--call-iters", type=int, default=30)
    p.add_argument("--out", help="CSV file for the full table")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.decode_peers needs a CUDA GPU (it times GPU kernels); none is visible here")

    import pandas as pd
    import triton

    from paged_attention.validation import check_decode_args

    dev = torch.device("cuda")
    copy_gbps = measure_copy_bandwidth(dev)
    props = torch.cuda.get_device_properties(dev)
    print(f"GPU {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}; Triton {triton.__version__}")
    print(f"measured device-to-device copy bandwidth: {copy_gbps:.0f} GB/s (read + write)")
    flush = L2Flusher(dev)
    rows = []
    for dtype in args.dtype:
        for kind, batch, lens, over in CONFIGS:
            if args.only and kind not in args.only:
                continue
            cfg = DecodeConfig(batch_size=batch, context_lens=lens, dtype=dtype, device="cuda", seed=7,
                               **{**BASE, "head_dim": args.head_dim, **over})
            inputs = build_decode_inputs(cfg)
            shape = check_decode_args(*inputs.args())
            ref = reference_decode(*inputs.args())
            nbytes = cfg.decode_bytes()
            for name in args.impl:
                row = dict(kind=kind, dtype=dtype, batch=batch, context=max(cfg.lengths), block_size=cfg.block_size,
                           num_heads=cfg.num_heads, head_dim=cfg.head_dim, kv_mb=cfg.needed_kv_bytes() / 1e6, impl=name)
                try:
                    run = prepare(name, *inputs.args()) if name in OURS else PEERS[name](inputs, shape)
                    acc = check_accuracy(run().clone(), ref)
                    gpu_ms = gpu_time(run, device=dev, flush=flush)
                    call_ms = statistics.median(time_calls(run, device=dev, warmup=3, iters=args.call_iters, flush=flush))
                    row.update(gpu_ms=gpu_ms, call_ms=call_ms, gbps=nbytes / gpu_ms / 1e6,
                               frac_copy=nbytes / gpu_ms / 1e6 / copy_gbps, max_abs_err=acc.max_abs_err, correct=acc.passed)
                except Exception as exc:  # a peer missing on this torch must not stop the table
                    row.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                    traceback.print_exc(limit=2, file=sys.stderr)
                rows.append(row)
                print(f"{kind} {dtype} B={batch} ctx={row['context']} bs={cfg.block_size} {name}: "
                      + (f"{row['gpu_ms']:.4f} ms GPU, {row['call_ms']:.4f} ms call, {row['gbps']:.0f} GB/s, "
                         f"{row['frac_copy']:.0%} of copy, correct={row['correct']}" if "gpu_ms" in row else row["error"]),
                      file=sys.stderr, flush=True)
            del inputs, ref
            torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    table.attrs["copy_gbps"] = copy_gbps
    if args.out:
        table.to_csv(args.out, index=False)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 500)
    cols = [c for c in ["kind", "dtype", "batch", "context", "block_size", "impl", "gpu_ms", "call_ms", "gbps", "frac_copy", "correct", "error"] if c in table]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if "gpu_ms" in table:
        ok = table.dropna(subset=["gpu_ms"])
        wide = ok.pivot_table(index=["kind", "dtype", "batch", "context", "block_size"], columns="impl", values="gpu_ms")
        print("\nGPU time (ms) by implementation:")
        print(wide.to_string(float_format=lambda x: f"{x:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
