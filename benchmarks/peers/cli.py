"""The flags of ``python -m benchmarks.decode_peers`` and each set's defaults."""

from __future__ import annotations

import argparse

from benchmarks.peers.configs import BASE, CONFIG_SETS
from benchmarks.peers.implementations import ALL_IMPLS, FP8_KV, IMPLS, XQA
from benchmarks.peers.options import OPTION_PASSES, AttentionOptions

KV_CHOICES = ("same", *FP8_KV, "both")
#: Defaults by set: compute dtypes, KV-cache dtypes, implementations.
SET_DEFAULTS = {
    "classic": (["float16", "bfloat16"], ["same"], IMPLS),
    "ragged": (["float16"], ["same"], [n for n in IMPLS if n not in ("gather_sdpa", "flex_paged")]),
    "fp8": (["float16"], ["same", "float8_e4m3fn"], [n for n in IMPLS if n not in ("gather_sdpa", "flex_paged")]),
    "prefix": (["float16"], ["same"], ["triton", "triton_prefix", "sdpa_contiguous", "flashinfer_tc",
                                       "flashinfer_cascade"]),
    "options": (["float16"], ["same"], ["triton", "triton_simple", "vectorized", "sdpa_contiguous", "flashinfer",
                                        "flashinfer_tc", XQA]),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode_peers", description="Our decode implementations against the kernels people would otherwise reach for.")
    p.add_argument("--set", dest="config_set", choices=list(CONFIG_SETS), default="classic",
                   help="configurations: classic (docs/benchmarks.md, default), ragged (uniform 1..8192 and "
                        "1..32768 at batches 4-64, one long-tailed draw), fp8 (the large ones), prefix (shared "
                        "prompts; GB/s from unique bytes)")
    p.add_argument("--dtype", nargs="+", choices=["float16", "bfloat16", "float32"],
                   help="compute dtypes, query and output (default: float16 bfloat16 for classic, float16 otherwise)")
    p.add_argument("--kv-dtype", nargs="+", choices=KV_CHOICES,
                   help="KV-cache dtypes: same (the compute dtype), float8_e4m3fn, float8_e5m2; both = same "
                        "float8_e4m3fn (default: both for --set fp8, same otherwise)")
    p.add_argument("--kv-scale", choices=["per_tensor", "per_head"], default="per_tensor",
                   help="scales of an fp8 cache (FlashInfer takes per_tensor only)")
    kinds = sorted({c[0] for configs in CONFIG_SETS.values() for c in configs})
    p.add_argument("--only", choices=kinds, nargs="+", help="configurations of these kinds within the set")
    p.add_argument("--impl", nargs="+", choices=ALL_IMPLS,
                   help="implementations (default: all but triton_prefix and flashinfer_cascade for classic; "
                        "all but those, gather_sdpa and flex_paged for ragged and fp8; triton triton_prefix "
                        "sdpa_contiguous flashinfer_tc flashinfer_cascade for prefix; ours, sdpa_contiguous and "
                        "FlashInfer's decode and XQA for options)")
    p.add_argument("--window", type=int, metavar="W",
                   help="sliding window: each query sees the last W tokens of its context (FlashInfer: "
                        "window_left=W-1)")
    p.add_argument("--soft-cap", type=float, metavar="C",
                   help="logit soft cap: s <- C tanh(s / C) on the scaled logits, before the softmax")
    p.add_argument("--sinks", action="store_true",
                   help="a sink logit per query head in the softmax denominator (standard normal, fixed seed)")
    p.add_argument("--head-dim", type=int, default=BASE["head_dim"],
                   help="head_dim of every configuration (the targets in docs/benchmarks.md are at 128)")
    p.add_argument("--call-iters", type=int, default=30)
    p.add_argument("--out", help="CSV file for the full table (rewritten after every configuration)")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """Parsed flags, with the set's defaults filled in: ``kv_dtype`` lists ``same``
    first (the fp8 rows' speedups need it first), without repeats; ``passes`` the
    attention options of each pass over the configurations
    (:class:`~benchmarks.peers.options.AttentionOptions`): those of ``--window``,
    ``--soft-cap`` and ``--sinks``, or for ``--set options`` its own
    (:data:`~benchmarks.peers.options.OPTION_PASSES`)."""
    p = build_parser()
    args = p.parse_args(argv)
    dtypes, kv_dtypes, impls = SET_DEFAULTS[args.config_set]
    args.dtype = args.dtype or dtypes
    args.impl = args.impl or impls
    kv = []
    for name in args.kv_dtype or kv_dtypes:
        kv += ["same", "float8_e4m3fn"] if name == "both" else [name]
    args.kv_dtype = sorted(dict.fromkeys(kv), key=lambda name: name != "same")
    args.configs = [c for c in CONFIG_SETS[args.config_set] if not args.only or c[0] in args.only]
    if not args.configs:
        p.error(f"--only {' '.join(args.only)} selects no configuration of --set {args.config_set}")
    flags = [flag for flag, value in (("--window", args.window), ("--soft-cap", args.soft_cap),
                                      ("--sinks", args.sinks or None)) if value is not None]
    if args.config_set == "options":
        if flags:
            p.error(f"--set options runs its own windows, soft cap and sinks; drop {' '.join(flags)}")
        args.passes = OPTION_PASSES
    else:
        try:
            args.passes = (AttentionOptions(window=args.window, soft_cap=args.soft_cap, sinks=args.sinks),)
        except ValueError as exc:
            p.error(str(exc))
    return args
