"""The parts of ``python -m benchmarks.decode_peers`` (our decode implementations
against the kernels people would otherwise reach for), by concern:

* :mod:`~benchmarks.peers.configs`: the configuration sets (``--set``);
* :mod:`~benchmarks.peers.torch_peers`: SDPA on a contiguous cache, gather + SDPA,
  FlexAttention's paged decode;
* :mod:`~benchmarks.peers.flashinfer`: FlashInfer's decode and its cascade, on our pools;
* :mod:`~benchmarks.peers.xqa`: FlashInfer's XQA decode kernel, on our pools;
* :mod:`~benchmarks.peers.options`: the attention options (sliding window, soft
  cap, sinks) and which peer takes which;
* :mod:`~benchmarks.peers.implementations`: which implementations run, their names,
  the call each times;
* :mod:`~benchmarks.peers.cli`: the flags and each set's defaults;
* :mod:`~benchmarks.peers.report`: the progress lines and the summary tables.

The timing loop and the CSV it writes (the one result schema,
:mod:`paged_attention.result_files`) are :mod:`benchmarks.decode_peers`, the entry point.
"""


class Skipped(Exception):
    """An implementation that cannot take these inputs: a note in its row, not an error."""


def first_line(exc: BaseException) -> str:
    """An exception as a row's note: its type and the first line of its message
    (at most 120 characters)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:120] if text else ''}"
