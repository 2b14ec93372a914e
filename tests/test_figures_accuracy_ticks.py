"""The error chart's two log panels label each decade once (issue 27, "the back row"):
the tick texts each y axis would draw, given its range, never repeat across panels."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

from explorer import formatting, style
from explorer.bench import accuracy_figures


def rendered_ticks(axis) -> list[tuple[int, str]]:
    """``(decade, text)`` of each tick Plotly draws on the log ``axis``: its
    ``tickvals``/``ticktext`` inside the range where given; else the decades at
    every ``dtick``-th power of ten (``tick0`` 0) inside the range, in the axis'
    d3 ``tickformat`` ``"~e"`` (Plotly draws "1e−3", a Unicode minus: written here as "1e-3")."""
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
#: there the abs-error panel reaches the quantization error, 0.0367, and "1e-1", "1e-2"
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
    # its line; the bottom one in plain errors, "1e-3".
    assert (0, "1×") in top and all(t.endswith("×") for _, t in top)
    assert all(t == f"1e{k:+d}" for k, t in bottom)
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"


#: A number in the explorer's scientific notation: mantissa, "e", the exponent's ASCII sign, unpadded digits.
SCIENTIFIC = re.compile(r"-?\d(\.\d+)?e[+-](0|[1-9]\d*)")


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("case", list(CASES))
def test_error_ticks_write_the_cards_scientific_notation(case, scale):
    """Issue 27 (#8): the abs-error panel's ticks read "1e−1" (Plotly's d3 "~e", a Unicode minus) beside
    the cards' and tables' "1.94e-16". The ticks are the decades of the axis' range, written by
    formatting's one scientific notation, the one the cards (``sig3``) write small errors in."""
    results, quantization = CASES[case]
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(results, quantization_error=quantization)
    axis = fig.layout.yaxis2
    assert axis.tickmode == "array"
    assert {"tickvals": list(axis.tickvals), "ticktext": list(axis.ticktext)} == {
        k: v for k, v in formatting.decade_ticks(*axis.range, axis.dtick).items() if k != "tickmode"}
    assert list(axis.ticktext) == [formatting.scientific(v, trim=True) for v in axis.tickvals]
    lo, hi = axis.range
    # Every dtick-th decade inside the range, where Plotly's own ticks were (tick0 = 1 = 10^0).
    step = int(axis.dtick or 1)
    assert [round(math.log10(v)) for v in axis.tickvals] == [
        k for k in range(math.ceil(lo), math.floor(hi) + 1) if k % step == 0]
    for value, tick in zip(axis.tickvals, axis.ticktext):
        # A card's text of an error at this decade (three significant figures) reads as the tick: one
        # mantissa, one "e", one exponent ("1.00e-3" beside "1e-3").
        card = formatting.scientific(value)
        assert SCIENTIFIC.fullmatch(tick) and SCIENTIFIC.fullmatch(card), (tick, card)
        assert card.split("e")[1] == tick.split("e")[1] and float(card.split("e")[0]) == float(tick.split("e")[0])


@pytest.mark.parametrize("value, card, tick", [(1.94e-16, "1.94e-16", "1.94e-16"), (1.234e-7, "1.23e-7", "1.234e-7"),
                                                (1e-7, "1.00e-7", "1e-7"), (1e-3, "1.00e-3", "1e-3"),
                                                (1.0, "1.00e+0", "1e+0"), (2.5e7, "2.50e+7", "2.5e+7"),
                                                (-3.2e-9, "-3.20e-9", "-3.2e-9")])
def test_one_scientific_notation_for_cards_and_ticks(value, card, tick):
    """The card's form (three significant figures) and the tick's (trailing zeros trimmed) share the
    mantissa's and exponent's signs and digits: an ASCII "-", an unpadded exponent."""
    assert formatting.scientific(value) == card
    assert formatting.scientific(value, digits=4, trim=True) == tick
    assert "−" not in card + tick
    if abs(value) < formatting.SCIENTIFIC_BELOW:
        assert formatting.sig3(value) == card  # the cards' rule writes small errors this way
