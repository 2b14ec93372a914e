"""Which decode paths stay correct when every logit is near -1e5 (on a GPU).

The correctness suite's ``test_very_negative_logits`` case, at the sizes of a ragged
batch: query all ones, keys -25 with a random third of tokens -26 in one dimension,
scale 64, so every real logit is -102400 or -102464, far below any finite mask
sentinel (-1e4, or float16's -65504), while the pool's unused slots hold the loud
value 64. A path whose masked padding is not truly ``-inf`` lets the padding win.
Each implementation (ours and the PyTorch peers of ``decode_peers.py``) is
compared with the float64 reference.

Usage::

    python -m benchmarks.extreme_logits
"""

from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

import torch

from paged_attention import DecodeConfig, build_decode_inputs, cdiv, prepare, reference_decode
from paged_attention.results import check_accuracy
from paged_attention.validation import check_decode_args

from benchmarks.peers.torch_peers import gather_sdpa, sdpa_contiguous

SCALE = 64.0


def extreme_inputs(dtype: str, device: str, seed: int = 0):
    """Ragged batch whose logits all sit at -102400 or -102464 (see the module doc)."""
    cfg = DecodeConfig(batch_size=3, context_lens=[70, 33, 5], num_heads=4, num_kv_heads=2, head_dim=64,
                       block_size=8, dtype=dtype, device=device, seed=seed, block_layout="shuffled")
    inputs = build_decode_inputs(cfg)
    gen = torch.Generator().manual_seed(seed)
    inputs.query.fill_(1.0)
    tables, lens = inputs.block_tables.cpu(), inputs.context_lens.cpu()
    for b in range(len(lens)):
        for t in range(int(lens[b])):
            block, slot = int(tables[b, t // cfg.block_size]), t % cfg.block_size
            keys = torch.full((cfg.num_kv_heads, cfg.head_dim), -25.0)
            below = torch.rand(cfg.num_kv_heads, generator=gen) < 0.3
            dims = torch.randint(0, cfg.head_dim, (cfg.num_kv_heads,), generator=gen)
            keys[torch.arange(cfg.num_kv_heads), dims] = torch.where(below, -26.0, -25.0)
            inputs.k_cache[block, slot] = keys.to(inputs.k_cache)
    return inputs


def main(argv=None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.extreme_logits", description=__doc__.split("\n\n")[0]).parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.extreme_logits needs a CUDA GPU; none is visible here")
    for dtype in ("float16", "bfloat16"):
        inputs = extreme_inputs(dtype, "cuda")
        args = inputs.args()
        shape = check_decode_args(*args, SCALE)
        ref = reference_decode(*args, scale=SCALE)
        namespace = SimpleNamespace(args=inputs.args)
        runs = {name: prepare(name, *args, scale=SCALE) for name in ("naive", "vectorized", "triton")}
        runs.update(gather_sdpa=gather_sdpa(namespace, shape), sdpa_contiguous=sdpa_contiguous(namespace, shape))
        runs.update(sdpa_backends(inputs, shape))
        for name, run in runs.items():
            try:
                acc = check_accuracy(run(), ref)
            except RuntimeError as exc:  # a backend that refuses these inputs
                print(f"{dtype:9s} {name:40s} not run: {str(exc).splitlines()[0][:90]}", flush=True)
                continue
            print(f"{dtype:9s} {name:40s} correct={acc.passed!s:5s} max_abs_err={acc.max_abs_err:.3g}", flush=True)
    return 0


def sdpa_backends(inputs, shape):
    """gather+SDPA pinned to each SDPA backend, with a boolean or an additive -inf mask."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k_cache, v_cache, tables, lens = inputs.args()
    b, h, d = q.shape
    cols = cdiv(shape.max_context_len, shape.block_size)
    n = cols * shape.block_size
    idx = tables[:, :cols].long().clamp_min(0)
    k = k_cache[idx].reshape(b, n, shape.num_kv_heads, d).transpose(1, 2)
    v = v_cache[idx].reshape(b, n, shape.num_kv_heads, d).transpose(1, 2)
    valid = (torch.arange(n, device=q.device)[None, :] < lens[:, None])[:, None, None, :]
    masks = {"bool mask": valid,
             "-inf float mask": torch.zeros(valid.shape, dtype=q.dtype, device=q.device).masked_fill(~valid, float("-inf"))}
    runs = {}
    for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH):
        for mask_name, mask in masks.items():
            def run(backend=backend, mask=mask):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=mask, scale=shape.scale,
                                                          enable_gqa=True).reshape(b, h, d)
            runs[f"gather+SDPA {backend.name} {mask_name}"] = run
    return runs


if __name__ == "__main__":
    sys.exit(main())
