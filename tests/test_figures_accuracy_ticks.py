"""The error chart's two log panels label each decade once (issue 27, "the back row"):
the tick texts each y axis would draw, given its range, never repeat across panels."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from explorer import style
from explorer.bench import accuracy_figures


def rendered_ticks(axis) -> list[tuple[int, str]]:
    """``(decade, text)`` of each tick Plotly draws on the log ``axis``: its
    ``tickvals``/``ticktext`` inside the range where given; else the decades at
    every ``dtick``-th power of ten (``tick0`` 0) inside the range, in the axis'
    d3 ``tickformat`` ``"~e"`` ("1e-3"; Plotly draws the minus as "−")."""
    lo, hi = axis.range
    if axis.tickmode == "array":
        return [(round(math.log10(v)), t) for v, t in zip(axis.tickvals, axis.ticktext)
                if lo - 1e-9 <= math.log10(v) <= hi + 1e-9]
    assert axis.tickformat == "~e" and axis.dtick, axis  # the form the emulation writes
    step = int(axis.dtick)
    return [(k, f"1e{k:+d}") for k in range(math.floor(hi), math.ceil(lo) - 1, -1) if k % step == 0]


def _results(ratios, errors, atol=2e-3):
    names = (("naive", "Naive PyTorch"), ("optimized", "Optimized PyTorch"), ("triton", "Triton"))
    return [SimpleNamespace(name=n, label=label, max_abs_err=e, max_rel_err=1.0, max_tol_ratio=r, atol=atol,
                            rtol=atol, passed=r <= 1) for (n, label), r, e in zip(names, ratios, errors)]


#: A run on a bf16 cache, and one on an fp8 cache (the page's own values, 1280x720 review):
#: there the abs-error panel reaches the quantization error, 0.0367, and "1e−1", "1e−2"
#: were written on both panels.
CASES = {
    "bf16": (_results((0.08, 0.085, 0.12), (2.2e-4, 2.3e-4, 3e-4)), None),
    "fp8": (_results((0.08, 0.085, 0.12), (2.2e-4, 2.3e-4, 3e-4)), 0.0367),
    "wide": (_results((0.3, 2e-4, 5.0), (6e-4, 4e-7, 1e-2)), 0.2),
}


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("case", list(CASES))
def test_error_chart_writes_each_decade_label_once(case, scale):
    results, quantization = CASES[case]
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(results, quantization_error=quantization)
    top, bottom = rendered_ticks(fig.layout.yaxis), rendered_ticks(fig.layout.yaxis2)
    assert len(top) >= 2 and len(bottom) >= 2, (top, bottom)
    texts = [t for _, t in top + bottom]
    assert len(set(texts)) == len(texts), (top, bottom)
    # The panels keep their meaning: the top one in multiples of the tolerance, "1×" on
    # its line; the bottom one in plain errors, "1e−3".
    assert (0, "1×") in top and all(t.endswith("×") for _, t in top)
    assert all(t == f"1e{k:+d}" for k, t in bottom)
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"
