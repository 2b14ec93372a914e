"""Prepared calls: a decode launch bound to its tensors, replayed from a CUDA graph.

A *capturable launch* is a zero-argument callable that runs kernels on tensors
fixed when it was made and returns its output: no host synchronisation, no
Python-side planning that depends on the tensors' values, the same work every
call. Launching it through Python costs tens of microseconds of host time a
call (argument binding, Triton's JIT dispatcher, PyTorch's dispatcher), often
more than the kernels take on the GPU. :class:`PreparedCall` pays that once:
on a CUDA device it runs the launch once (compiling, autotuning and lazy
initialisation happen there) and captures it into a ``torch.cuda.CUDAGraph``;
every call then replays the graph, whatever the launch holds (the Triton
launcher's prefix pass and decode kernel, Optimized PyTorch's gather and
attention), and returns the graph's output tensor.

The graph reads and writes the tensors the launch was made with, at their
addresses: refill them in place between calls (new query, new K/V values, new
scales) and the next call computes on the new values. Work planned on the host
when the launch was made (a split plan from the context lengths, a mask from
their host copy) is frozen into the graph as it is into the launch.
"""

from __future__ import annotations

from typing import Callable

import torch


class PreparedCall:
    """A zero-argument callable that runs ``launch``, from a CUDA graph where it can.

    Parameters
    ----------
    launch : callable
        ``launch() -> Tensor``: a capturable launch (see the module's docstring).
    device : torch.device
        Where its tensors live; only a CUDA device is graphed.
    graph : bool
        Capture ``launch`` into a CUDA graph (default). False: every call runs
        ``launch`` itself.

    Attributes
    ----------
    graphed : bool
        True when calls replay a CUDA graph. False off CUDA (the CPU and Triton's
        interpreter call ``launch`` directly), with ``graph=False``, for an empty
        output (nothing to launch), or when capture raised (for instance a
        launch that synchronises with the host): then every call runs ``launch``,
        with no warning, and the results are the same.
    launch : callable
        The launch itself (what a call runs when not graphed).

    Notes
    -----
    A graphed call returns the same tensor on every call (the graph's output,
    which the next call overwrites): clone it to keep a result. A call made
    while the current stream is being captured into another graph (the timing
    harness's GPU-time measurement, a serving loop's own graph) runs ``launch``
    so that the outer capture records its kernels, not a replay. The graph is
    captured and replayed on the current stream of ``device``; calls must not
    overlap (they share the launch's buffers), which calls in one stream never do.
    """

    def __init__(self, launch: Callable[[], torch.Tensor], device: torch.device, *, graph: bool = True):
        self.launch = launch
        self._graph: torch.cuda.CUDAGraph | None = None
        self._out: torch.Tensor | None = None
        if graph and device.type == "cuda":
            self._graph, self._out = _capture(launch, device)

    @property
    def graphed(self) -> bool:
        return self._graph is not None

    def __call__(self) -> torch.Tensor:
        graph = self._graph
        if graph is None or torch.cuda.is_current_stream_capturing():
            return self.launch()
        graph.replay()
        return self._out


def _capture(
    launch: Callable[[], torch.Tensor], device: torch.device
) -> tuple[torch.cuda.CUDAGraph | None, torch.Tensor | None]:
    """A CUDA graph of one ``launch`` and its output, or ``(None, None)`` when the
    output is empty or capture raised. An error of the warm-up launch itself is
    the launch's own and propagates."""
    with torch.cuda.device(device):
        # Warm up on a side stream, as capture requires: the first launch compiles
        # the kernels and initialises libraries, work a graph cannot hold.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = launch()
        torch.cuda.current_stream().wait_stream(stream)
        if out.numel() == 0:
            return None, None
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: another thread's CUDA calls (a second app session) do not
            # break this capture, nor does it forbid theirs.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = launch()
        except Exception:  # not capturable: calls run the launch itself
            return None, None
    return graph, out
