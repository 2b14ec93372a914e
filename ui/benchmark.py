"""Running the decode benchmark from the app: one run at a time, inputs cached,
failures turned into messages (the Decode benchmark page draws its runs with
:mod:`ui.benchmark_view`).

* One process-wide lock (``st.cache_resource``) serialises runs across sessions:
  two benchmarks on one GPU would time each other. It remembers the session that
  holds it: a second click on Run while the first run is timing starts a new
  script run at once (Streamlit stops the old one at its next UI update), and that
  session is told its own previous run is finishing, not that another session is
  busy. A run keeps its results as soon as its interleaved rounds end, so the
  run that replaces a stopped one reuses them (see ``done`` of
  :func:`run_benchmark_locked`).
* The inputs of the last configuration stay in one process-wide slot, keyed by
  the configuration (a frozen dataclass of plain values); a new configuration
  frees the old tensors before allocating, so memory never grows across reruns.
* A configuration is checked against free memory before anything is allocated
  (:func:`paged_attention.timing.check_memory`); a CUDA out-of-memory error
  during a run is caught, the cache emptied, and reported (:func:`exclusive_run`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer.bench.quantization import (
    QuantizationError,
    quantization_error,
    unquantized_config,
)
from explorer.formatting import format_bytes, kv_dtype_label
from paged_attention import (
    DecodeConfig,
    DecodeInputs,
    build_decode_inputs,
    reference_decode,
)
from paged_attention.bench import benchmark_implementations
from paged_attention.results import BenchResult
from paged_attention.timing import (
    GPU_HEADROOM_BYTES,
    check_memory,
    measure_copy_bandwidth,
)


class BenchmarkRefused(Exception):
    """A run that must not start (too large for free memory); the message says why."""


class BenchmarkOOM(Exception):
    """The GPU ran out of memory during a run; memory has been released."""


@dataclass
class InputsSlot:
    """The inputs and float64 reference of one configuration, kept between runs,
    and for an fp8 cache its quantization error once asked for."""

    key: DecodeConfig | None = None
    inputs: DecodeInputs | None = None
    reference: torch.Tensor | None = None
    quantization: QuantizationError | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        self.key = self.inputs = self.reference = self.quantization = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def get(self, config: DecodeConfig) -> tuple[DecodeInputs, torch.Tensor]:
        """Inputs and reference for ``config``, building them if the key changed."""
        if self.key != config:
            self.release()
            check_fits(config)
            inputs = build_decode_inputs(config)
            reference = reference_decode(*inputs.args(), **inputs.kwargs())
            self.key, self.inputs, self.reference = config, inputs, reference
        return self.inputs, self.reference

    def quantization_error(self, config: DecodeConfig) -> QuantizationError:
        """The quantization error of the fp8 ``config`` (:mod:`explorer.bench.quantization`),
        measured once per configuration; not measured, with a note, when the
        unquantized float32 cache it needs does not fit beside the inputs (the rule
        of :func:`paged_attention.timing.check_memory`)."""
        inputs, reference = self.get(config)
        if self.quantization is None:
            memory = check_memory(unquantized_config(config))
            if memory.fits:
                self.quantization = quantization_error(inputs, reference)
            else:
                where = "GPU" if config.device.startswith("cuda") else "host"
                self.quantization = QuantizationError(
                    kv_dtype_label(config.kv_dtype), None, None,
                    note=f"not measured: the unquantized float32 cache it is measured against needs about "
                         f"{format_bytes(memory.need)} of {where} memory, but only {format_bytes(memory.free)} "
                         "is free",
                )
        return self.quantization

    def held_bytes(self) -> int:
        if self.inputs is None:
            return 0
        return sum(t.numel() * t.element_size() for t in self.inputs.args()) + (
            self.reference.numel() * self.reference.element_size() if self.reference is not None else 0
        )


class RunLock:
    """A lock that remembers which session holds it (``owner``; None when free or
    unknown). ``acquire``, ``release`` and ``locked`` behave as ``threading.Lock``'s."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: str | None = None

    def acquire(self, blocking: bool = True, owner: str | None = None) -> bool:
        got = self._lock.acquire(blocking)
        if got:
            self.owner = owner
        return got

    def release(self) -> None:
        self.owner = None
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


@st.cache_resource(show_spinner=False)
def run_lock() -> RunLock:
    """The process-wide lock that serialises benchmark runs."""
    return RunLock()


def session_id() -> str | None:
    """The id of the browser session running this script (None outside Streamlit)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


@st.cache_resource(show_spinner=False)
def inputs_slot() -> InputsSlot:
    """The process-wide slot holding the last configuration's tensors (one at most)."""
    return InputsSlot()


@st.cache_resource(show_spinner="Measuring this GPU's copy bandwidth (once per process)…")
def copy_bandwidth(device: str) -> float | None:
    """Device-to-device copy bandwidth in GB/s, measured once per process; None on the CPU."""
    if not device.startswith("cuda"):
        return None
    return measure_copy_bandwidth(device, nbytes=1 << 30)


def check_fits(config: DecodeConfig) -> None:
    """Refuse a configuration whose inputs would not fit in free GPU (or host) memory
    (the rule is :func:`paged_attention.timing.check_memory`'s).

    Raises
    ------
    BenchmarkRefused
        With the bytes needed and the bytes free.
    """
    memory = check_memory(config)
    if memory.fits:
        return
    if config.device.startswith("cuda"):
        what = (f"{format_bytes(memory.need)} of GPU memory ({format_bytes(memory.inputs)} of inputs plus "
                f"{format_bytes(GPU_HEADROOM_BYTES)} headroom), but only {format_bytes(memory.free)} of "
                f"{format_bytes(memory.total)} is free")
    else:
        what = (f"{format_bytes(memory.need)} of host memory (inputs and the implementations' temporaries), "
                f"but only {format_bytes(memory.free)} is free")
    raise BenchmarkRefused(
        f"This configuration needs about {what}. Shrink the batch, the context or the number of KV heads."
    )


#: Seconds of timed rounds a run of the Decode benchmark may take past its fewest
#: (the sidebar's timed calls) while a median still moves
#: (:func:`paged_attention.timing.time_interleaved`'s ``budget_s``), by device
#: kind; on the CPU the implementations share it. Three calls on a busy laptop
#: ranked two implementations one way, then the other (issue 23).
TIMING_BUDGET_S = {"cpu": 4.0, "cuda": 2.0}


def timing_budget(device: str) -> float:
    """:data:`TIMING_BUDGET_S` of ``device`` (``"cpu"``, ``"cuda:0"``, ...)."""
    return TIMING_BUDGET_S["cuda" if device.startswith("cuda") else "cpu"]


#: torch's intra-op threads while the app times on the CPU. The browser shares the
#: cores, and torch's threads waiting for each other at every op made small points
#: many times slower (measured in docs/performance.md, "CPU timing threads").
CPU_TIMING_THREADS = 1


@contextlib.contextmanager
def cpu_timing_threads(device: str) -> Iterator[None]:
    """Run the body with :data:`CPU_TIMING_THREADS` torch threads when ``device`` is
    the CPU (restored after); a GPU run is left as it is."""
    if not device.startswith("cpu"):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(CPU_TIMING_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def acquire(
    lock: RunLock | threading.Lock, on_wait: Callable[[], None], on_own_wait: Callable[[], None] | None = None
) -> None:
    """Take ``lock``; if it is busy, say so, then block until it is free.

    ``on_own_wait`` is called when this session's own earlier run holds the lock
    (a second click while the first run is still timing: Streamlit has stopped
    that run, which lets go at its next UI update); ``on_wait`` otherwise (another
    session is running), or when ``on_own_wait`` is not given.
    """
    me = session_id()

    def take(blocking: bool) -> bool:
        return lock.acquire(blocking, owner=me) if isinstance(lock, RunLock) else lock.acquire(blocking)

    if take(False):
        return
    if on_own_wait is not None and me is not None and getattr(lock, "owner", None) == me:
        on_own_wait()
    else:
        on_wait()
    take(True)


@contextlib.contextmanager
def exclusive_run(
    device: str, on_wait: Callable[[], None], on_own_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold the process-wide run lock for the body (see :func:`acquire` for
    ``on_wait`` and ``on_own_wait``), with :data:`CPU_TIMING_THREADS` on a CPU run,
    and turn a CUDA out-of-memory error into :class:`BenchmarkOOM` after releasing
    the shared inputs: the one home of that rule for every page that times."""
    lock = run_lock()
    acquire(lock, on_wait, on_own_wait)
    try:
        with cpu_timing_threads(device):
            yield
    except torch.cuda.OutOfMemoryError as exc:
        inputs_slot().release()
        raise BenchmarkOOM(
            f"The GPU ran out of memory during the run; its memory has been released. ({str(exc).splitlines()[0]})"
        ) from None
    finally:
        lock.release()


def run_benchmark_locked(
    config: DecodeConfig,
    names: list[str],
    *,
    warmup: int,
    iters: int,
    on_progress: Callable[[int, int], None],
    on_result: Callable[[BenchResult, bool], None],
    on_wait: Callable[[], None],
    on_own_wait: Callable[[], None] | None = None,
    done: list[BenchResult] | None = None,
    on_quantization: Callable[[QuantizationError], None] | None = None,
    budget_s: float | None = None,
) -> tuple[list[BenchResult], float | None]:
    """Time ``names`` against each other on one set of inputs for ``config``
    (interleaved rounds on a GPU: :func:`paged_attention.bench.benchmark_implementations`),
    holding the process lock (:func:`exclusive_run`).

    ``done`` holds results already measured on these inputs by a run that was
    stopped after measuring (same ``config``, warm-up and rounds: the caller
    checks): an implementation found there is not timed again; the others are
    timed together and appended to it as soon as they are measured, before
    ``on_result`` (which may stop a script run) is called for each result, with
    whether it was reused. ``on_progress(done, total)`` follows the timed calls.
    For an fp8 cache, ``on_quantization`` gets the quantization error of the
    inputs (:meth:`InputsSlot.quantization_error`) after the timing. With
    ``budget_s``, ``iters`` is the fewest timed rounds and more run, for up to
    that many seconds, until every median holds still.

    Returns
    -------
    results : list of BenchResult
        In the order of ``names``.
    copy_gbps : float or None
        This GPU's measured copy bandwidth (once per process); None on the CPU.

    Raises
    ------
    BenchmarkRefused
        Before allocating, when the GPU has too little free memory.
    BenchmarkOOM
        When a CUDA out-of-memory error happened; memory has been released.
    ValueError
        On an invalid configuration.
    """
    done = [] if done is None else done
    with exclusive_run(config.device, on_wait, on_own_wait):
        inputs, reference = inputs_slot().get(config)
        reused = {r.name for r in done if r.name in names}
        todo = [n for n in names if n not in reused]
        if todo:
            done.extend(benchmark_implementations(
                todo, inputs, warmup=warmup, iters=iters, reference=reference, on_progress=on_progress,
                budget_s=budget_s,
            ))
        results = [next(r for r in done if r.name == name) for name in names]
        for r in results:
            on_result(r, r.name in reused)
        if config.is_fp8 and on_quantization is not None:
            on_quantization(inputs_slot().quantization_error(config))
        return results, copy_bandwidth(config.device)


def time_inputs_locked(
    config: DecodeConfig,
    build: Callable[[], DecodeInputs],
    names: list[str],
    *,
    warmup: int,
    iters: int,
    on_wait: Callable[[], None],
    on_own_wait: Callable[[], None] | None = None,
) -> list[BenchResult]:
    """Time ``names`` on inputs made by ``build`` (a serving snapshot's, say),
    holding the process lock (:func:`exclusive_run`), after the memory check. The
    shared slot is emptied first on a GPU, so these inputs get its memory; they
    are freed afterwards.

    Raises
    ------
    BenchmarkRefused, BenchmarkOOM, ValueError
        As :func:`run_benchmark_locked`.
    """
    with exclusive_run(config.device, on_wait, on_own_wait):
        if config.device.startswith("cuda"):
            inputs_slot().release()
        check_fits(config)
        inputs = build()
        results = benchmark_implementations(names, inputs, warmup=warmup, iters=iters)
        del inputs
        return results
