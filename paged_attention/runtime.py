"""Execution mode: compiled Triton on a CUDA GPU, or Triton's interpreter on the CPU.

Triton reads ``TRITON_INTERPRET`` once, when it is first imported, so this module
must run before anything imports ``triton``. ``paged_attention/__init__.py``
imports it first.
"""

from __future__ import annotations

import os

import torch

HAS_CUDA: bool = torch.cuda.is_available()

if not HAS_CUDA:
    # Without a GPU the Triton kernel can only run through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")

TRITON_INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def execution_mode() -> str:
    """Describe how the Triton kernel runs in this process.

    Returns
    -------
    str
        ``"compiled"`` when Triton compiles the kernel for a CUDA GPU, or
        ``"interpreter"`` when ``TRITON_INTERPRET=1`` runs it on the CPU with NumPy
        (correct, but orders of magnitude slower than a GPU).
    """
    return "interpreter" if TRITON_INTERPRET else "compiled"


def check_triton_device(device: torch.device) -> None:
    """Refuse inputs the Triton kernels cannot run on in this process.

    Parameters
    ----------
    device : torch.device
        Where the decode inputs live.

    Raises
    ------
    ValueError
        When Triton runs compiled (``TRITON_INTERPRET`` unset) and ``device`` is not
        a CUDA device: compiled kernels read only GPU memory.
    """
    if device.type != "cuda" and not TRITON_INTERPRET:
        raise ValueError(
            f"the Triton kernel runs compiled here, so its inputs must be CUDA tensors; got "
            f"{device} (set TRITON_INTERPRET=1 before importing to run it on the CPU)"
        )


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors the launch plans fill on ``device``.

    Returns
    -------
    int
        The CUDA device's SM count; 4 anywhere else (the interpreter), so a few
        splits and the merge get exercised by the CPU tests.
    """
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def default_device() -> str:
    """``"cuda"`` when a CUDA GPU is visible, else ``"cpu"``."""
    return "cuda" if HAS_CUDA else "cpu"


def device_description() -> str:
    """A one-line, human-readable description of the default device and mode."""
    if HAS_CUDA:
        props = torch.cuda.get_device_properties(0)
        return (
            f"{props.name} ({props.multi_processor_count} SMs, "
            f"{props.total_memory / 1e9:.0f} GB), Triton {execution_mode()}"
        )
    return "CPU only: Triton kernel runs in the interpreter (TRITON_INTERPRET=1)"
