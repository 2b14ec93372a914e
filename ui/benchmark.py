"""Running the decode benchmark from the app: one run at a time, inputs cached,
failures turned into messages.

* One process-wide lock (``st.cache_resource``) serialises runs across sessions:
  two benchmarks on one GPU would time each other.
* The inputs of the last configuration stay in one process-wide slot, keyed by
  the configuration (a frozen dataclass of plain values); a new configuration
  frees the old tensors before allocating, so memory never grows across reruns.
* A CUDA configuration is checked against ``torch.cuda.mem_get_info`` before
  anything is allocated; a CUDA out-of-memory error during a run is caught, the
  cache emptied, and reported.
"""

from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

import streamlit as st
import torch

from paged_attention import DecodeConfig, DecodeInputs, build_decode_inputs, reference_decode
from paged_attention.app_state import format_bytes
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


@st.cache_resource
def run_lock() -> threading.Lock:
    """The process-wide lock that serialises benchmark runs."""
    return threading.Lock()


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


def acquire(lock: threading.Lock, on_wait: Callable[[], None]) -> None:
    """Take ``lock``; if another session holds it, call ``on_wait`` then block."""
    if not lock.acquire(blocking=False):
        on_wait()
        lock.acquire()


def run_benchmark_locked(
    config: DecodeConfig,
    names: list[str],
    *,
    warmup: int,
    iters: int,
    on_progress: Callable[[str, int, int], None],
    on_result: Callable[[BenchResult], None],
    on_wait: Callable[[], None],
) -> tuple[list[BenchResult], float | None]:
    """Run ``names`` on one set of inputs for ``config``, holding the process lock.

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
    acquire(lock, on_wait)
    try:
        inputs, reference = slot.get(config)
        flush = L2Flusher(inputs.query.device)
        results = []
        for i, name in enumerate(names):
            on_progress(name, i, len(names))
            result = benchmark_implementation(
                name, inputs, warmup=warmup, iters=iters, reference=reference, flush=flush
            )
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
) -> list[BenchResult]:
    """Time ``names`` on inputs made by ``build`` (a serving snapshot's, say),
    holding the process lock, with the memory check and out-of-memory handling of
    :func:`run_benchmark_locked`. The shared slot is emptied first on a GPU, so
    these inputs get its memory; they are freed afterwards.

    Raises
    ------
    BenchmarkRefused, BenchmarkOOM, ValueError
        As :func:`run_benchmark_locked`.
    """
    lock = run_lock()
    acquire(lock, on_wait)
    try:
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
