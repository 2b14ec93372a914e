"""Prepared calls (``paged_attention.launcher.PreparedCall``, behind ``prepare``): on the
CPU the launch itself, unchanged; on a GPU a CUDA-graph replay whose output equals
the eager launch bit for bit, follows tensors refilled in place, and gives way to
the eager launch inside another graph's capture (the timing harness's GPU time)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import paged_attention as pa
from paged_attention import runtime
from paged_attention.launcher import PreparedCall
from paged_attention.timing import L2Flusher, gpu_time
from paged_attention.triton_decode_simple import prepare_triton_decode_simple, triton_decode_simple
from helpers import assert_matches, replay_with_a_new_query, seed  # noqa: F401
from window_support import poison_outside_windows, random_sinks

CAPTURABLE = sorted(pa.GRAPH_CAPTURABLE)


def skip_compiled_triton(impl: str) -> None:
    """Skip a Triton case of the CPU fallback where Triton runs compiled (a GPU host):
    compiled kernels read only GPU memory, so the fallback is the interpreter's, and
    the CPU suite runs it."""
    if impl.startswith("triton") and not runtime.TRITON_INTERPRET:
        pytest.skip("compiled Triton reads only GPU memory; the CPU suite runs this case")


def small(device, seed, **changes):
    """Ragged, GQA 2, an odd head_dim, and a prefix two groups share (ending inside
    a block; one sequence holds only the prefix) for the prefix pass to find."""
    base = dict(batch_size=4, context_lens=(17, 37, 40, 53), num_heads=4, num_kv_heads=2, head_dim=24,
                block_size=8, shared_prefix=17, prefix_groups=2, dtype="float16", device=device, seed=seed)
    return pa.build_decode_inputs(pa.DecodeConfig(**{**base, **changes}), poison=True)


# -- the fallback (every CPU run) ----------------------------------------------------

@pytest.mark.parametrize("kv", [{}, {"kv_dtype": "float8_e4m3fn", "kv_scale": "per_head"}], ids=["fp16", "fp8"])
@pytest.mark.parametrize("graph", [True, False], ids=["graph", "no-graph"])
@pytest.mark.parametrize("impl", sorted(pa.LABELS))
def test_off_cuda_a_prepared_call_is_the_unprepared_function(impl, graph, kv, seed):
    skip_compiled_triton(impl)
    inputs = small("cpu", seed, **kv)
    run = pa.prepare(impl, *inputs.args(), **inputs.scales(), graph=graph)
    assert isinstance(run, PreparedCall) and run.graphed is False
    expected = pa.get_implementation(impl)(*inputs.args(), **inputs.scales())
    assert torch.equal(run(), expected)
    assert torch.equal(run(), expected)  # and again
    assert_matches(expected, inputs.query, pa.reference_decode(*inputs.args(), **inputs.scales()))


#: The Triton launchers that take the attention options, as (prepare, function, extra
#: keywords): each can be wrapped in a PreparedCall.
TRITON_LAUNCHERS = {
    "triton": (pa.prepare_triton_decode, pa.triton_decode, {}),
    "triton_prefix": (pa.prepare_triton_decode, pa.triton_decode, {"shared_prefixes": "detect"}),
    "triton_simple": (prepare_triton_decode_simple, triton_decode_simple, {}),
}


def with_options(inputs, window=None, sinks=True, soft_cap=None):
    """The args of ``inputs`` poisoned outside the window (when given), and the
    option keywords."""
    args = poison_outside_windows(inputs.args(), window) if window else inputs.args()
    options = dict(window=window, soft_cap=soft_cap,
                   sinks=random_sinks(inputs.query.shape[1], inputs.query.device) if sinks else None)
    return args, options


@pytest.mark.parametrize("kv", [{}, {"kv_dtype": "float8_e4m3fn", "kv_scale": "per_head"}], ids=["fp16", "fp8"])
@pytest.mark.parametrize("impl", sorted(TRITON_LAUNCHERS))
def test_off_cuda_a_prepared_launch_with_options_is_the_function(impl, kv, seed):
    """Window (starting inside the shared prefix), sinks and soft-cap through a
    PreparedCall: the launch, unchanged, and the reference's answer."""
    skip_compiled_triton(impl)
    inputs = small("cpu", seed, **kv)
    prepare, function, extra = TRITON_LAUNCHERS[impl]
    args, options = with_options(inputs, window=30, soft_cap=3.0)
    run = PreparedCall(prepare(*args, **inputs.scales(), **options, **extra), inputs.query.device)
    assert run.graphed is False
    expected = function(*args, **inputs.scales(), **options, **extra)
    assert torch.equal(run(), expected)
    assert_matches(expected, inputs.query, pa.reference_decode(*args, **inputs.scales(), **options))


def test_off_cuda_each_call_runs_the_launch_once_and_nothing_runs_at_prepare():
    calls = []
    out = torch.zeros(2)
    run = PreparedCall(lambda: calls.append(1) or out, torch.device("cpu"))
    assert calls == [] and not run.graphed
    assert run() is out and run() is out and calls == [1, 1]


def test_graph_false_never_graphs_and_naive_is_never_graphed(device):
    inputs = small(device, 0)
    assert not pa.prepare("triton", *inputs.args(), graph=False).graphed
    assert "naive" not in pa.GRAPH_CAPTURABLE
    assert not pa.prepare("naive", *inputs.args()).graphed


# -- on the GPU -------------------------------------------------------------------------

BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype="float16", device="cuda")
FP8_TENSOR = dict(kv_dtype="float8_e4m3fn", kv_scale="per_tensor")
FP8_HEAD = dict(kv_dtype="float8_e4m3fn", kv_scale="per_head")
RAGGED = dict(batch_size=16, context_lens=pa.ragged_lengths(15, 1, 8192, seed=1) + (0,))

#: (implementation, configuration): every mode a prepared call can launch.
MODES = {
    "split-k": ("triton", dict(batch_size=2, context_lens=(16384, 3000))),
    "ragged-balanced-plan": ("triton", RAGGED),
    "many-short": ("triton", dict(batch_size=64, context_lens=300)),
    "fp8-per-tensor": ("triton", dict(batch_size=3, context_lens=(9000, 1, 700), **FP8_TENSOR)),
    "fp8-per-head": ("triton", dict(batch_size=3, context_lens=(9000, 0, 700), **FP8_HEAD)),
    "prefix-pass": ("triton_prefix", dict(batch_size=8, context_lens=2100, shared_prefix=2000, prefix_groups=2)),
    "prefix-pass-fp8": ("triton_prefix", dict(batch_size=6, context_lens=(1200, 1100, 1300, 1250, 1101, 1150),
                                              shared_prefix=1050, prefix_groups=2, **FP8_HEAD)),
    "no-shared-prefix": ("triton_prefix", dict(batch_size=4, context_lens=500)),
    "simple-grid": ("triton_simple", RAGGED),
    "simple-grid-fp8": ("triton_simple", dict(batch_size=3, context_lens=(900, 0, 70), **FP8_HEAD)),
    "vectorized-uniform": ("vectorized", dict(batch_size=4, context_lens=2048)),
    "vectorized-ragged": ("vectorized", RAGGED),
    "vectorized-fp8": ("vectorized", dict(batch_size=3, context_lens=(900, 0, 70), **FP8_TENSOR)),
    "empty-contexts": ("triton", dict(batch_size=3, context_lens=0)),
    "vectorized-empty-contexts": ("vectorized", dict(batch_size=3, context_lens=0)),
}


def deterministic(impl):
    """Optimized PyTorch without cuDNN's attention, whose output is not the same bit
    for bit from one call to the next (eager calls alone differ on an H200): the
    comparison of a replay with an eager launch needs a kernel that is."""
    if impl != "vectorized":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def gpu_inputs(changes, seed):
    return pa.build_decode_inputs(pa.DecodeConfig(**{**BASE, **changes, "seed": seed}), poison=True)


def refill(inputs) -> None:
    """New values in place: a new query, K and V negated (the poison in unread slots
    stays NaN or infinite), per-head scales rescaled."""
    inputs.query.copy_(torch.randn_like(inputs.query))
    for cache in (inputs.k_cache, inputs.v_cache):
        if cache.element_size() == 1:  # fp8 has no neg: flip the sign bit
            cache.view(torch.uint8).bitwise_xor_(0x80)
        else:
            cache.neg_()
    for scale in (inputs.k_scale, inputs.v_scale):
        if isinstance(scale, torch.Tensor):
            scale.mul_(torch.linspace(0.5, 2.0, scale.numel(), device=scale.device))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", list(MODES))
def test_gpu_graphed_call_equals_the_eager_launch_bit_for_bit(mode, seed):
    impl, changes = MODES[mode]
    with deterministic(impl):
        check_graphed_against_eager(impl, gpu_inputs(changes, seed))


def check_graphed_against_eager(impl, inputs):
    args, scales = inputs.args(), inputs.scales()
    graphed = pa.prepare(impl, *args, **scales)
    eager = pa.prepare(impl, *args, **scales, graph=False)
    assert graphed.graphed and not eager.graphed
    first = graphed().clone()
    assert torch.equal(first, eager())
    assert_matches(first, inputs.query, pa.reference_decode(*args, **scales))
    graphed().fill_(float("nan"))
    assert torch.equal(graphed(), first)  # every replay writes the whole output again

    refill(inputs)
    fresh = pa.prepare(impl, *args, **scales, graph=False)()
    again = graphed()
    assert torch.equal(again, fresh)
    assert_matches(again, inputs.query, pa.reference_decode(*args, **scales))
    if int(inputs.context_lens.max()) > 0:
        assert not torch.equal(again, first)  # the refill changed the answer


#: (launcher, configuration, options) of the graphed launches with attention options.
OPTION_MODES = {
    "split-k-window": ("triton", dict(batch_size=2, context_lens=(16384, 3000)), dict(window=4001, sinks=False)),
    "ragged-balanced-sinks-cap": ("triton", RAGGED, dict(sinks=True, soft_cap=30.0)),
    "fp8-per-head-all": ("triton", dict(batch_size=3, context_lens=(9000, 0, 700), **FP8_HEAD),
                         dict(window=1000, sinks=True, soft_cap=30.0)),
    "prefix-pass-window-in-the-prefix": ("triton_prefix", dict(batch_size=8, context_lens=2100, shared_prefix=2000,
                                                               prefix_groups=2), dict(window=500, soft_cap=30.0)),
    "simple-grid-all": ("triton_simple", RAGGED, dict(window=1000, sinks=True, soft_cap=30.0)),
}


@pytest.mark.gpu
@pytest.mark.parametrize("mode", list(OPTION_MODES))
def test_gpu_graphed_launch_with_options_follows_a_refill(mode, seed):
    """A graphed launch with options equals the eager one bit for bit, and a replay
    after a refill in place (query, K/V, scales and the sinks) equals a fresh eager
    launch and the reference."""
    impl, changes, opts = OPTION_MODES[mode]
    inputs = gpu_inputs(changes, seed)
    prepare, _, extra = TRITON_LAUNCHERS[impl]
    args, options = with_options(inputs, **opts)
    scales = inputs.scales()
    graphed = PreparedCall(prepare(*args, **scales, **options, **extra), inputs.query.device)
    assert graphed.graphed
    first = graphed().clone()
    assert torch.equal(first, prepare(*args, **scales, **options, **extra)())
    assert_matches(first, inputs.query, pa.reference_decode(*args, **scales, **options))
    refill(inputs)
    if options["sinks"] is not None:
        options["sinks"].copy_(options["sinks"].flip(0) + 1.0)
    again = graphed()
    assert torch.equal(again, prepare(*args, **scales, **options, **extra)())
    assert_matches(again, inputs.query, pa.reference_decode(*args, **scales, **options))
    assert not torch.equal(again, first)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", CAPTURABLE)
def test_gpu_a_graphed_call_inside_another_capture_launches_eagerly(impl, seed):
    """The timing harness captures prepared calls into its own graphs: the call then
    runs its launch, so the outer graph holds the kernels and follows a refill."""
    inputs = gpu_inputs(dict(batch_size=5, context_lens=(700, 1, 300, 0, 64), shared_prefix=0), seed)
    run = pa.prepare(impl, *inputs.args())
    assert run.graphed
    launches = []
    launch = run.launch
    run.launch = lambda: launches.append(1) or launch()
    out = replay_with_a_new_query(run, inputs.query)  # one warm-up call (a replay), one captured call
    assert launches == [1]
    assert_matches(out, inputs.query, pa.reference_decode(*inputs.args()))
    ms = gpu_time(run, device=inputs.query.device, flush=L2Flusher(inputs.query.device), replays=3)
    assert 0 < ms < 100


@pytest.mark.gpu
def test_gpu_a_launch_that_cannot_be_captured_runs_eagerly():
    """A launch that synchronises with the host makes capture raise: the call falls
    back to the launch, silently, and keeps working."""
    x = torch.arange(6.0, device="cuda")

    def launch():
        return x * float(x.sum())  # .sum() to a Python float waits for the GPU

    run = PreparedCall(launch, x.device)
    assert not run.graphed
    assert torch.equal(run(), x * 15.0)
    x.add_(1.0)
    assert torch.equal(run(), x * 21.0)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [mode for mode, (impl, _) in MODES.items() if impl == "vectorized"])
def test_gpu_graphed_vectorized_with_its_default_attention_follows_a_refill(mode, seed):
    inputs = gpu_inputs(MODES[mode][1], seed)
    run = pa.prepare("vectorized", *inputs.args(), **inputs.scales())
    assert run.graphed
    for _ in range(2):
        assert_matches(run(), inputs.query, pa.reference_decode(*inputs.args(), **inputs.scales()))
        refill(inputs)
