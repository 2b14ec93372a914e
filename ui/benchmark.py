"""Running the decode benchmark from the app: one run at a time, inputs cached,
failures turned into messages.

* One process-wide lock (``st.cache_resource``) serialises runs across sessions:
  two benchmarks on one GPU would time each other. It remembers the session that
  holds it: a second click on Run while the first run is timing starts a new
  script run at once (Streamlit stops the old one at its next UI update), and that
  session is told its own previous run is finishing, not that another session is
  busy. A run keeps each result as it is measured, so the run that replaces a
  stopped one reuses them (see ``done`` of :func:`run_benchmark_locked`).
* The inputs of the last configuration stay in one process-wide slot, keyed by
  the configuration (a frozen dataclass of plain values); a new configuration
  frees the old tensors before allocating, so memory never grows across reruns.
* A CUDA configuration is checked against ``torch.cuda.mem_get_info`` before
  anything is allocated; a CUDA out-of-memory error during a run is caught, the
  cache emptied, and reported.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from paged_attention import DecodeConfig, DecodeInputs, build_decode_inputs, reference_decode
from explorer.formatting import format_bytes
from paged_attention.bench import BenchResult, L2Flusher, benchmark_implementation, measure_copy_bandwidth

#: Headroom kept free on the GPU beyond the inputs: the L2-flush buffer, the
#: outputs, split-K buffers and the allocator's slack.
GPU_HEADROOM_BYTES = 1 << 30


class BenchmarkRefused(Exception):
    """A run that must not start (too large for free memory); the message says why."""


class BenchmarkOOM(Exception):
    """The GPU ran out of memory during a run; memory has been released."""


@dataclass
class InputsSlot:
    """The inputs and float64 reference of one configuration, kept between runs."""

    key: DecodeConfig | None = None
    inputs: DecodeInputs | None = None
    reference: torch.Tensor | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        self.key = self.inputs = self.reference = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def get(self, config: DecodeConfig) -> tuple[DecodeInputs, torch.Tensor]:
        """Inputs and reference for ``config``, building them if the key changed."""
        if self.key != config:
            self.release()
            check_fits(config)
            inputs = build_decode_inputs(config)
            reference = reference_decode(*inputs.args())
            self.key, self.inputs, self.reference = config, inputs, reference
        return self.inputs, self.reference

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


@st.cache_resource
def run_lock() -> RunLock:
    """The process-wide lock that serialises benchmark runs."""
    return RunLock()


def session_id() -> str | None:
    """The id of the browser session running this script (None outside Streamlit)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


@st.cache_resource
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
    """Refuse a configuration whose inputs would not fit in free GPU (or host) memory.

    Raises
    ------
    BenchmarkRefused
        With the bytes needed and the bytes free.
    """
    if not config.device.startswith("cuda"):
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        need = 3 * config.memory_bytes()  # the inputs, plus naive's padded float32 copies
        if need > free:
            raise BenchmarkRefused(
                f"This configuration needs about {format_bytes(need)} of host memory (inputs and the "
                f"implementations' temporaries), but only {format_bytes(free)} is free. "
                f"Shrink the batch, the context or the number of KV heads."
            )
        return
    free, total = torch.cuda.mem_get_info(torch.device(config.device))
    need = config.memory_bytes() + GPU_HEADROOM_BYTES
    if need > free:
        raise BenchmarkRefused(
            f"This configuration needs about {format_bytes(need)} of GPU memory "
            f"({format_bytes(config.memory_bytes())} of inputs plus {format_bytes(GPU_HEADROOM_BYTES)} headroom), "
            f"but only {format_bytes(free)} of {format_bytes(total)} is free. "
            f"Shrink the batch, the context or the number of KV heads."
        )


#: torch's intra-op threads while the app times on the CPU. The browser shares the
#: cores, and torch's threads wait for each other at every op: on 2 cores, with
#: Chromium showing the page, the sweep's second point (32 tokens) of Optimized
#: PyTorch took 16 ms on 2 threads and 0.8 ms on 1 (0.27 ms with no browser).
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


def run_benchmark_locked(
    config: DecodeConfig,
    names: list[str],
    *,
    warmup: int,
    iters: int,
    on_progress: Callable[[str, int, int], None],
    on_result: Callable[[BenchResult], None],
    on_wait: Callable[[], None],
    on_own_wait: Callable[[], None] | None = None,
    done: list[BenchResult] | None = None,
) -> tuple[list[BenchResult], float | None]:
    """Run ``names`` on one set of inputs for ``config``, holding the process lock.

    ``on_wait`` and ``on_own_wait`` are :func:`acquire`'s. ``done`` holds results
    already measured on these inputs by a run that was stopped (same ``config``,
    warm-up and iterations: the caller checks): an implementation found there is
    not timed again, and each new result is appended to it as soon as it is
    measured, before ``on_result`` (which may stop a script run) is called.

    Returns
    -------
    results : list of BenchResult
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
    lock = run_lock()
    slot = inputs_slot()
    done = [] if done is None else done
    acquire(lock, on_wait, on_own_wait)
    try:
        with cpu_timing_threads(config.device):
            inputs, reference = slot.get(config)
            flush = L2Flusher(inputs.query.device)
            results = []
            for i, name in enumerate(names):
                on_progress(name, i, len(names))
                result = next((r for r in done if r.name == name), None)
                if result is None:
                    result = benchmark_implementation(
                        name, inputs, warmup=warmup, iters=iters, reference=reference, flush=flush
                    )
                    done.append(result)
                results.append(result)
                on_result(result)
            del flush
            return results, copy_bandwidth(config.device)
    except torch.cuda.OutOfMemoryError as exc:
        slot.release()
        raise BenchmarkOOM(
            f"The GPU ran out of memory during the run; its memory has been released. ({str(exc).splitlines()[0]})"
        ) from None
    finally:
        lock.release()


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
    holding the process lock, with the memory check and out-of-memory handling of
    :func:`run_benchmark_locked`. The shared slot is emptied first on a GPU, so
    these inputs get its memory; they are freed afterwards. ``on_wait`` and
    ``on_own_wait`` are :func:`acquire`'s.

    Raises
    ------
    BenchmarkRefused, BenchmarkOOM, ValueError
        As :func:`run_benchmark_locked`.
    """
    lock = run_lock()
    acquire(lock, on_wait, on_own_wait)
    try:
        with cpu_timing_threads(config.device):
            if config.device.startswith("cuda"):
                inputs_slot().release()
            check_fits(config)
            inputs = build()
            reference = reference_decode(*inputs.args())
            flush = L2Flusher(inputs.query.device)
            results = [
                benchmark_implementation(name, inputs, warmup=warmup, iters=iters, reference=reference, flush=flush)
                for name in names
            ]
            del inputs, reference, flush
            return results
    except torch.cuda.OutOfMemoryError as exc:
        gc.collect()
        torch.cuda.empty_cache()
        raise BenchmarkOOM(
            f"The GPU ran out of memory during the run; its memory has been released. ({str(exc).splitlines()[0]})"
        ) from None
    finally:
        lock.release()
