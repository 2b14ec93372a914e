"""Bad input raises one clear ValueError, naming the argument and the rule, before any
kernel runs, whichever implementation the caller picked."""

from __future__ import annotations

import importlib
import sys
import math

import pytest
import torch
import triton

import paged_attention as pa
from helpers import IMPL_NAMES, IMPLS, seed  # noqa: F401


def _prepare(name):
    return lambda *args, **kw: pa.prepare(name, *args, **kw)


#: Everything that takes decode arguments. The ``prepare`` entries must refuse bad
#: input when preparing, not later when launched.
CALLERS = {
    "reference": pa.reference_decode,
    **IMPLS,
    **{f"prepare-{name}": _prepare(name) for name in IMPL_NAMES},
    "prepare_triton_decode-splits": lambda *a, **kw: pa.prepare_triton_decode(*a, num_splits=3, block_n=16, **kw),
}


class _ComputeRan(AssertionError):
    pass


def _forbidden(*args, **kwargs):
    raise _ComputeRan("attention was computed before the arguments were rejected")


class _NoLaunch:
    def __getitem__(self, grid):
        return _forbidden


#: The torch calls attention is made of; argument checks need none of them.
_ATTENTION_MATH = {
    torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.bmm, torch.einsum,
    torch.softmax, torch.Tensor.softmax, torch.nn.functional.softmax, torch.exp, torch.Tensor.exp,
    torch.nn.functional.scaled_dot_product_attention,
}


class _NoAttentionMath(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _ATTENTION_MATH:
            _forbidden()
        return func(*args, **(kwargs or {}))


#: The modules whose Triton kernels the implementations launch.
KERNEL_MODULES = ("paged_attention.triton_decode", "paged_attention.prefix_pass", "paged_attention.triton_decode_simple")


@pytest.fixture(autouse=True)
def no_compute(monkeypatch):
    """Any attention math (PyTorch) or kernel launch (Triton) in these tests fails them."""
    # Kernels are JITFunctions when compiled, InterpretedFunctions in the interpreter
    # (whose module is only loaded in interpreter mode).
    interpreter = sys.modules.get("triton.runtime.interpreter")
    jitted = (triton.runtime.jit.JITFunction,) + ((interpreter.InterpretedFunction,) if interpreter else ())
    for module in KERNEL_MODULES:
        kernels = importlib.import_module(module)
        patched = [name for name, value in vars(kernels).items() if isinstance(value, jitted)]
        assert patched, f"{module} holds no Triton kernel"
        for name in patched:
            monkeypatch.setattr(kernels, name, _NoLaunch())
    with _NoAttentionMath():
        yield


def valid_args(device: str, seed: int) -> dict:
    """Two sequences of 10 and 6 tokens in blocks of 4 (3 and 2 blocks), a pool of 6."""
    gen = torch.Generator().manual_seed(seed)
    args = dict(
        query=torch.randn(2, 4, 16, generator=gen),
        k_cache=torch.randn(6, 4, 2, 16, generator=gen),
        v_cache=torch.randn(6, 4, 2, 16, generator=gen),
        block_tables=torch.tensor([[0, 1, 2], [3, 4, -1]], dtype=torch.int32),
        context_lens=torch.tensor([10, 6], dtype=torch.int32),
    )
    return {k: t.to(device) for k, t in args.items()}


def call(caller: str, args: dict, scale=None):
    return CALLERS[caller](*args.values(), scale=scale)


@pytest.mark.parametrize("caller", CALLERS)
def test_the_guard_catches_compute(caller, device, seed):
    """The no_compute fixture really sees each implementation compute (else the tests
    below would prove nothing about 'before any kernel runs')."""
    with pytest.raises(_ComputeRan):
        out = call(caller, valid_args(device, seed))
        if callable(out):
            out()


def _set(name, make):
    def change(args):
        args[name] = make(args)
        return args
    return change


def _entry(row, col, value):
    def change(args):
        args["block_tables"] = args["block_tables"].clone()
        args["block_tables"][row, col] = value
        return args
    return change


def _length(seq, value):
    def change(args):
        args["context_lens"] = args["context_lens"].clone()
        args["context_lens"][seq] = value
        return args
    return change


BAD_ARGS = {
    "heads-not-multiple-of-kv-heads": (
        _set("query", lambda a: torch.randn(2, 3, 16, device=a["query"].device)),
        r"num_heads \(3\) must be a multiple of num_kv_heads \(2\)",
    ),
    "v-block-size-differs": (
        _set("v_cache", lambda a: torch.randn(6, 5, 2, 16, device=a["query"].device)),
        r"v_cache shape \(6, 5, 2, 16\) must equal k_cache shape \(6, 4, 2, 16\)",
    ),
    "v-kv-heads-differ": (
        _set("v_cache", lambda a: a["v_cache"][:, :, :1]),
        r"v_cache shape .* must equal k_cache shape",
    ),
    "v-pool-differs": (
        _set("v_cache", lambda a: a["v_cache"][:5]),
        r"v_cache shape .* must equal k_cache shape",
    ),
    "cache-head-dim-differs": (
        _set("query", lambda a: a["query"][..., :8]),
        r"k_cache head_dim \(16\) must equal query head_dim \(8\)",
    ),
    "batch-query-vs-tables": (
        _set("block_tables", lambda a: torch.cat([a["block_tables"], a["block_tables"][:1]])),
        r"block_tables has 3 rows but query has batch_size 2",
    ),
    "batch-query-vs-lens": (
        _set("context_lens", lambda a: a["context_lens"][:1]),
        r"context_lens has 1 entries but query has batch_size 2",
    ),
    "query-rank": (_set("query", lambda a: a["query"][0]), r"query must have shape \[batch_size, num_heads, head_dim\]"),
    "k-rank": (_set("k_cache", lambda a: a["k_cache"][0]), r"k_cache must have shape"),
    "tables-rank": (_set("block_tables", lambda a: a["block_tables"][0]), r"block_tables must have shape"),
    "lens-rank": (_set("context_lens", lambda a: a["context_lens"][None]), r"context_lens must have shape"),
    "not-a-tensor": (_set("block_tables", lambda a: a["block_tables"].tolist()), r"block_tables must be a torch.Tensor"),
    "k-dtype": (
        _set("k_cache", lambda a: a["k_cache"].half()),
        r"k_cache dtype \(torch.float16\) must match query dtype \(torch.float32\)",
    ),
    "v-dtype": (
        _set("v_cache", lambda a: a["v_cache"].bfloat16()),
        r"v_cache dtype \(torch.bfloat16\) must match query dtype \(torch.float32\)",
    ),
    "query-integer": (_set("query", lambda a: a["query"].int()), r"query dtype must be one of"),
    "tables-float": (_set("block_tables", lambda a: a["block_tables"].float()), r"block_tables must be int32 or int64"),
    "tables-int16": (_set("block_tables", lambda a: a["block_tables"].short()), r"block_tables must be int32 or int64"),
    "lens-int16": (_set("context_lens", lambda a: a["context_lens"].short()), r"context_lens must be int32 or int64"),
    "k-on-another-device": (
        _set("k_cache", lambda a: a["k_cache"].to("meta")),
        r"k_cache is on meta but query is on .*all inputs must share one device",
    ),
    "lens-on-another-device": (
        _set("context_lens", lambda a: a["context_lens"].to("meta")),
        r"context_lens is on meta but query is on",
    ),
    "query-on-another-device": (
        _set("query", lambda a: a["query"].to("meta")),
        r"k_cache is on .* but query is on meta",
    ),
    "needed-entry-minus-one": (
        _entry(1, 1, -1),
        r"block_tables\[1, 1\] = -1 is needed by context_lens\[1\] = 6 but must lie in \[0, num_blocks=6\)",
    ),
    "needed-entry-other-negative": (_entry(0, 0, -3), r"block_tables\[0, 0\] = -3 is needed"),
    "needed-entry-num-blocks": (_entry(0, 2, 6), r"block_tables\[0, 2\] = 6 is needed by context_lens\[0\] = 10"),
    "needed-entry-far-out": (_entry(1, 0, 10**6), r"block_tables\[1, 0\] = 1000000 is needed"),
    "context-longer-than-table": (
        _length(0, 13),
        r"context_lens\[0\] = 13 needs 4 blocks of block_size 4, but block_tables holds only 3",
    ),
    "negative-length": (_length(1, -1), r"context_lens must be non-negative; sequence 1 has -1"),
}


@pytest.mark.parametrize("case", BAD_ARGS)
@pytest.mark.parametrize("caller", CALLERS)
def test_bad_arguments_raise(caller, case, device, seed):
    change, message = BAD_ARGS[case]
    args = change(valid_args(device, seed))
    with pytest.raises(ValueError, match=message):
        call(caller, args)


@pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 0.0, -0.0, -0.5, "big", [1.0]],
                         ids=["nan", "inf", "-inf", "zero", "-zero", "negative", "string", "list"])
@pytest.mark.parametrize("caller", CALLERS)
def test_bad_scale_raises(caller, scale, device, seed):
    with pytest.raises(ValueError, match="scale must be a finite positive number"):
        call(caller, valid_args(device, seed), scale=scale)


@pytest.mark.parametrize("caller", CALLERS)
def test_needed_minus_one_is_not_the_last_block(caller, device, seed):
    """Python indexing would read -1 as block num_blocks - 1. Put exactly the data the
    sequence expects in that last block: a silent wrap would give a plausible answer,
    so only a raise passes."""
    args = valid_args(device, seed)
    for name in ("k_cache", "v_cache"):
        args[name] = args[name].clone()
        args[name][-1] = args[name][4]
    args = _entry(1, 1, -1)(args)
    with pytest.raises(ValueError, match=r"block_tables\[1, 1\] = -1"):
        call(caller, args)


@pytest.mark.parametrize("caller", [c for c in CALLERS if c != "reference"])
def test_float64_is_for_the_reference_only(caller, device, seed):
    args = {k: t.double() if t.is_floating_point() else t for k, t in valid_args(device, seed).items()}
    with pytest.raises(ValueError, match=r"query dtype must be one of .*; got torch.float64"):
        call(caller, args)


# -- fp8 caches and their scales -------------------------------------------------

def _fp8(dtype=torch.float8_e4m3fn, v_dtype=None):
    def change(args):
        args["k_cache"] = args["k_cache"].to(dtype)
        args["v_cache"] = args["v_cache"].to(v_dtype or dtype)
        return args
    return change


def _same(args):
    return args


#: (change to the valid float32 arguments, scales, message)
BAD_FP8 = {
    "fp8-without-scales": (_fp8(), {}, r"the cache is torch.float8_e4m3fn: pass k_scale and v_scale"),
    "fp8-without-v-scale": (_fp8(torch.float8_e5m2), {"k_scale": 0.5},
                            r"the cache is torch.float8_e5m2: pass k_scale and v_scale"),
    "scales-for-a-float32-cache": (_same, {"k_scale": 0.5, "v_scale": 0.5},
                                   r"k_scale is only for an fp8 cache .*; this cache is torch.float32"),
    "v-scale-for-a-float32-cache": (_same, {"v_scale": 0.5}, r"v_scale is only for an fp8 cache"),
    "scale-zero": (_fp8(), {"k_scale": 0.0, "v_scale": 1.0}, r"k_scale must be positive and finite; KV head 0 has 0.0"),
    "scale-negative": (_fp8(), {"k_scale": 1.0, "v_scale": -2.0}, r"v_scale must be positive and finite; KV head 0 has -2.0"),
    "scale-nan": (_fp8(), {"k_scale": math.nan, "v_scale": 1.0}, r"k_scale must be positive and finite; KV head 0 has nan"),
    "scale-inf": (_fp8(), {"k_scale": 1.0, "v_scale": math.inf}, r"v_scale must be positive and finite; KV head 0 has inf"),
    "scale-tensor-nan-head": (_fp8(), {"k_scale": torch.tensor([1.0, math.nan]), "v_scale": 1.0},
                              r"k_scale must be positive and finite; KV head 1 has nan"),
    "scale-tensor-zero-head": (_fp8(), {"k_scale": 1.0, "v_scale": torch.tensor([0.0, 1.0])},
                               r"v_scale must be positive and finite; KV head 0 has 0.0"),
    "scale-tensor-shape": (_fp8(), {"k_scale": torch.ones(3), "v_scale": 1.0},
                           r"k_scale as a tensor must be float32 of shape \[num_kv_heads\] = \[2\]; "
                           r"got torch.float32 of shape \[3\]"),
    "scale-tensor-scalar": (_fp8(), {"k_scale": torch.tensor(1.0), "v_scale": 1.0},
                            r"k_scale as a tensor must be float32 of shape \[num_kv_heads\]"),
    "scale-tensor-dtype": (_fp8(), {"k_scale": 1.0, "v_scale": torch.ones(2, dtype=torch.float64)},
                           r"v_scale as a tensor must be float32 .*got torch.float64"),
    "scale-tensor-device": (_fp8(), {"k_scale": torch.ones(2, device="meta"), "v_scale": 1.0},
                            r"k_scale is on meta but query is on .*all inputs must share one device"),
    "scale-bool": (_fp8(), {"k_scale": True, "v_scale": 1.0}, r"k_scale must be a positive finite number or a float32 tensor; got bool"),
    "scale-string": (_fp8(), {"k_scale": 1.0, "v_scale": "1"}, r"v_scale must be a positive finite number .*; got str"),
    "fp8-query": (_set("query", lambda a: a["query"].to(torch.float8_e4m3fn)), {"k_scale": 1.0, "v_scale": 1.0},
                  r"query dtype must be one of .*; got torch.float8_e4m3fn"),
    "k-fp8-v-float32": (_set("k_cache", lambda a: a["k_cache"].to(torch.float8_e4m3fn)), {"k_scale": 1.0, "v_scale": 1.0},
                        r"k_cache and v_cache must share one dtype; got torch.float8_e4m3fn and torch.float32"),
    "k-e4m3-v-e5m2": (_fp8(torch.float8_e4m3fn, torch.float8_e5m2), {"k_scale": 1.0, "v_scale": 1.0},
                      r"k_cache and v_cache must share one dtype"),
    "k-float16": (_set("k_cache", lambda a: a["k_cache"].half()), {},
                  r"k_cache dtype \(torch.float16\) must match query dtype \(torch.float32\), or be float8"),
}


@pytest.mark.parametrize("case", BAD_FP8)
@pytest.mark.parametrize("caller", CALLERS)
def test_bad_fp8_arguments_raise(caller, case, device, seed):
    change, scales, message = BAD_FP8[case]
    args = change(valid_args(device, seed))
    scales = {k: v.to(device) if isinstance(v, torch.Tensor) and v.device.type != "meta" else v
              for k, v in scales.items()}
    with pytest.raises(ValueError, match=message):
        CALLERS[caller](*args.values(), **scales)


@pytest.mark.parametrize("caller", CALLERS)
def test_the_guard_catches_fp8_compute(caller, device, seed):
    """Valid fp8 arguments reach the compute (so the cases above were refused by a rule)."""
    args = _fp8()(valid_args(device, seed))
    with pytest.raises(_ComputeRan):
        out = CALLERS[caller](*args.values(), k_scale=0.5, v_scale=torch.tensor([0.25, 2.0], device=device))
        if callable(out):
            out()


# -- attention options: window, sinks, soft_cap ------------------------------------

def _sinks(make):
    return lambda device: dict(sinks=make(device))


_WINDOW = r"window must be an integer >= 1 \(the positions each query attends to\) or None; got "
_CAP = r"soft_cap must be a finite number > 0 or None; got "
#: (the options as a function of the device, message)
BAD_OPTIONS = {
    "window-zero": (lambda d: dict(window=0), _WINDOW + "0"),
    "window-negative": (lambda d: dict(window=-3), _WINDOW + "-3"),
    "window-float": (lambda d: dict(window=2.0), _WINDOW + "2.0"),
    "window-bool": (lambda d: dict(window=True), _WINDOW + "True"),
    "window-tensor": (lambda d: dict(window=torch.tensor([4])), _WINDOW + "tensor"),
    "soft-cap-zero": (lambda d: dict(soft_cap=0.0), _CAP + "0.0"),
    "soft-cap-negative": (lambda d: dict(soft_cap=-30.0), _CAP + "-30.0"),
    "soft-cap-nan": (lambda d: dict(soft_cap=math.nan), _CAP + "nan"),
    "soft-cap-inf": (lambda d: dict(soft_cap=math.inf), _CAP + "inf"),
    "soft-cap-string": (lambda d: dict(soft_cap="30"), _CAP + "'30'"),
    "soft-cap-bool": (lambda d: dict(soft_cap=True), _CAP + "True"),
    "sinks-list": (lambda d: dict(sinks=[0.0] * 4), r"sinks must be a float32 tensor of shape \[num_heads\] or None; got list"),
    "sinks-shape": (_sinks(lambda d: torch.zeros(3, device=d)),
                    r"sinks must be float32 of shape \[num_heads\] = \[4\]; got torch.float32 of shape \[3\]"),
    "sinks-per-kv-head": (_sinks(lambda d: torch.zeros(2, device=d)), r"sinks must be float32 of shape \[num_heads\] = \[4\]"),
    "sinks-float64": (_sinks(lambda d: torch.zeros(4, dtype=torch.float64, device=d)),
                      r"sinks must be float32 .*; got torch.float64 of shape \[4\]"),
    "sinks-device": (_sinks(lambda d: torch.zeros(4, device="meta")), r"sinks is on meta but query is on .*share one device"),
    "sinks-nan": (_sinks(lambda d: torch.tensor([0.0, math.nan, 1.0, 2.0], device=d)),
                  r"sinks must be finite; query head 1 has nan"),
    "sinks-inf": (_sinks(lambda d: torch.tensor([0.0, 1.0, 2.0, -math.inf], device=d)),
                  r"sinks must be finite; query head 3 has -inf"),
}


@pytest.mark.parametrize("case", BAD_OPTIONS)
@pytest.mark.parametrize("caller", CALLERS)
def test_bad_attention_options_raise(caller, case, device, seed):
    options, message = BAD_OPTIONS[case]
    with pytest.raises(ValueError, match=message):
        CALLERS[caller](*valid_args(device, seed).values(), **options(device))


@pytest.mark.parametrize("caller", CALLERS)
def test_entries_before_a_window_are_not_checked(caller, device, seed):
    """A window of 3 over sequence 0's 10 tokens (blocks of 4) reads blocks 1 and 2:
    entry 0 may be freed (-1, past the pool) and the arguments still reach the
    compute; a freed entry 1 is refused, naming the window."""
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device=device)
    options = dict(window=3, sinks=sinks, soft_cap=20.0)
    for freed in (-1, 6, 2**31 - 1):
        with pytest.raises(_ComputeRan):
            out = CALLERS[caller](*_entry(0, 0, freed)(valid_args(device, seed)).values(), **options)
            if callable(out):
                out()
    with pytest.raises(ValueError, match=r"block_tables\[0, 1\] = -1 is needed by context_lens\[0\] = 10 "
                                         r"with window 3 but must lie in \[0, num_blocks=6\)"):
        CALLERS[caller](*_entry(0, 1, -1)(valid_args(device, seed)).values(), **options)


# -- launch plans, prepared launchers ------------------------------------------------

@pytest.mark.parametrize(
    "override, message",
    [
        ({"num_splits": 0}, "num_splits must be a positive whole number"),
        ({"num_splits": -3}, "num_splits must be a positive whole number"),
        ({"num_splits": 2.5}, "num_splits must be a positive whole number"),
        ({"num_splits": True}, "num_splits must be a positive whole number"),
        ({"num_stages": 0}, "num_stages must be a positive whole number"),
        ({"block_n": 24}, "block_n must be a power of two of at least 16"),
        ({"block_n": 8}, "block_n must be a power of two of at least 16"),
        ({"num_warps": 3}, "num_warps must be 1, 2, 4, 8 or 16"),
        ({"num_warps": 32}, "num_warps must be 1, 2, 4, 8 or 16"),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_bad_plan_overrides_raise(override, message, device, seed):
    args = valid_args(device, seed)
    shape = pa.check_decode_args(*args.values())
    with pytest.raises(ValueError, match=message):
        pa.plan_launch(shape, args["query"].device, args["query"].dtype, **override)
    with pytest.raises(ValueError, match=message):
        pa.prepare_triton_decode(*args.values(), **override)


def test_plan_must_fit_the_inputs(device, seed):
    args = valid_args(device, seed)
    shape = pa.check_decode_args(*args.values())
    plan = pa.plan_launch(shape, args["query"].device, args["query"].dtype, num_splits=3)
    pa.prepare_triton_decode(*args.values(), plan=plan)  # fits
    with pytest.raises(ValueError, match="either plan or overrides"):
        pa.prepare_triton_decode(*args.values(), plan=plan, num_splits=2)
    longer = dict(args, context_lens=torch.tensor([12, 6], dtype=torch.int32, device=device),
                  block_tables=torch.tensor([[0, 1, 2], [3, 4, -1]], dtype=torch.int32, device=device))
    short = pa.plan_launch(pa.check_decode_args(*dict(args, context_lens=args["context_lens"] - 4).values()),
                           args["query"].device, args["query"].dtype, num_splits=1)
    with pytest.raises(ValueError, match="covers 2 blocks per sequence .* needs 3"):
        pa.prepare_triton_decode(*longer.values(), plan=short)
    wrong_block = pa.plan_launch(shape, args["query"].device, args["query"].dtype)
    wrong_block = type(wrong_block)(**{**wrong_block.__dict__, "block_size": 8})
    with pytest.raises(ValueError, match="block_size 8, the cache has 4"):
        pa.prepare_triton_decode(*args.values(), plan=wrong_block)


@pytest.mark.parametrize("name", ["triton", "triton_simple"])
def test_compiled_triton_refuses_cpu_tensors(name, monkeypatch, seed):
    """With Triton compiled (no interpreter), CPU inputs are refused before any launch."""
    monkeypatch.setattr(pa.runtime, "TRITON_INTERPRET", False)
    with pytest.raises(ValueError, match="must be CUDA tensors; got cpu"):
        pa.prepare(name, *valid_args("cpu", seed).values())


@pytest.mark.parametrize("count", [4, 6])
def test_prepare_takes_five_tensors(count, device, seed):
    tensors = list(valid_args(device, seed).values())
    tensors = tensors[:count] if count < 5 else tensors + [tensors[-1]]
    for name in IMPL_NAMES:
        with pytest.raises(ValueError, match=f"five decode tensors .* got {count}"):
            pa.prepare(name, *tensors)
