"""Shared fixtures. Importing paged_attention first sets TRITON_INTERPRET on CPU."""

import pytest
import torch

import paged_attention  # noqa: F401  (must precede any triton import)
from helpers import ATTENTION  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def device():
    """Where the tests run: the GPU when there is one (Triton compiled), else the CPU
    (Triton interpreted)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(params=ATTENTION, ids=lambda case: case.name)
def attention(request):
    """The attention-options axis of the correctness tests: plain attention, and a
    sliding window, attention sinks and logit soft-capping together
    (:class:`helpers.Attention`). Pass it to ``build(..., attention=attention)`` and
    ``inputs.options()`` (or ``attention.options(...)`` for hand-built inputs) to
    ``run_and_compare``."""
    return request.param


@pytest.fixture(params=["fused", "spread"])
def merge(request, monkeypatch):
    """The split-K merge's two forms: by the last program of each (sequence, KV
    head) to finish (fused), or a second launch of one program per (sequence,
    query token, KV head) (spread; :func:`paged_attention.launch_plan.spread_merge`),
    forced for every split launch."""
    monkeypatch.setattr("paged_attention.launch_plan.SPREAD_MERGE_BYTES",
                        0 if request.param == "spread" else 2**62)
    return request.param


# The live Streamlit server and the browser of the real-browser tests (one each per
# test process, shared by every page's browser test).
from browser_support import browser, page, server  # noqa: E402,F401
