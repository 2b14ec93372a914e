"""The error chart's two log panels label each decade once (issue 27, "the back row"):
the tick texts each y axis would draw, given its range, never repeat across panels."""

from __future__ import annotations

import math
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
    # its line; the bottom one in plain errors, "0.001".
    assert (0, "1×") in top and all(t.endswith("×") for _, t in top)
    assert not any(t.endswith("×") for _, t in bottom)
    assert all(float(t.replace(",", "")) == pytest.approx(10.0 ** k) for k, t in bottom)
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"


def card_decade(value: float) -> str:
    """The Decode benchmark's card and check-table text of an error or a ratio of ``value``
    (``significant``: three significant figures, ``"0.0100"``, ``"1.00e-7"``), its
    mantissa's trailing zeros dropped, as a round value is written on an axis."""
    from explorer.bench.view import significant

    mantissa, e, exponent = significant(value).partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}{e}{exponent}"


def _panel_texts(fig) -> tuple[dict[int, str], dict[int, str]]:
    """``{decade: tick text}`` of the ratio panel (its "×" dropped) and of the abs-error panel."""
    top, bottom = rendered_ticks(fig.layout.yaxis), rendered_ticks(fig.layout.yaxis2)
    assert all(t.endswith("×") for _, t in top), top
    return {k: t.removesuffix("×") for k, t in top}, dict(bottom)


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("case", list(CASES))
def test_a_decade_reads_alike_on_both_panels_and_on_the_cards(case, scale):
    """Issue 27 (third review): the ratio panel read "1×, 0.1×, 0.01×" over the abs-error panel's "1e-2,
    1e-3, 1e-4": one decade, 0.01, in two notations on one chart, and a card wrote 0.0100. Every decade
    either panel draws is written as the card writes that value (trailing zeros dropped), the ratio's with
    its "×"; where both panels draw a decade, the two texts less the "×" are one."""
    results, quantization = CASES[case]
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(results, quantization_error=quantization)
    top, bottom = _panel_texts(fig)
    for k, text in [*top.items(), *bottom.items()]:
        assert text == card_decade(10.0 ** k), (k, text)
    shared = set(top) & set(bottom)
    assert all(top[k] == bottom[k] for k in shared), (top, bottom)
    if case != "bf16":  # the bf16 run's panels meet at no decade
        assert shared, (top, bottom)


def test_every_decade_reads_alike_on_both_panels_from_1e_minus_12_to_1e_8():
    """Both panels' tick writers over the whole span an error or a ratio can take (errors floor at
    ERROR_FLOOR, 1e-12), across the card's change of notation at SCIENTIFIC_BELOW: "0.000001" and
    "1e-7" on either panel as on the cards, never "1e-2" beside "0.01"."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1)
    lo, hi = round(math.log10(style.ERROR_FLOOR)), 8
    fig.update_yaxes(type="log", range=[lo, hi], dtick=1)
    accuracy_figures.ratio_ticks(fig, row=1, col=1)
    accuracy_figures.error_ticks(fig, row=2, col=1)
    top, bottom = _panel_texts(fig)
    assert sorted(top) == sorted(bottom) == list(range(lo, hi + 1))
    for k in top:
        assert top[k] == bottom[k] == card_decade(10.0 ** k), (k, top[k], bottom[k], card_decade(10.0 ** k))
    # Either side of the cards' threshold: fixed from it up, a power of ten under it.
    threshold = round(math.log10(formatting.SCIENTIFIC_BELOW))
    assert bottom[threshold] == "0.000001" and bottom[threshold - 1] == "1e-7"
    assert (bottom[-2], bottom[0], bottom[3]) == ("0.01", "1", "1,000")


@pytest.mark.parametrize("scale", [1, style.PRESENTATION_SCALE])
@pytest.mark.parametrize("case", list(CASES))
def test_error_ticks_are_the_decades_of_the_axis_range(case, scale):
    """The abs-error panel's ticks are formatting's decade ticks of its range (where Plotly's own ticks
    were, every dtick-th decade), written by :func:`accuracy_figures.decade_text`."""
    results, quantization = CASES[case]
    with style.presentation(scale):
        fig = accuracy_figures.accuracy_figure(results, quantization_error=quantization)
    axis = fig.layout.yaxis2
    assert axis.tickmode == "array"
    assert {"tickvals": list(axis.tickvals), "ticktext": list(axis.ticktext)} == {
        k: v for k, v in formatting.decade_ticks(*axis.range, axis.dtick).items() if k != "tickmode"}
    assert list(axis.ticktext) == [accuracy_figures.decade_text(v) for v in axis.tickvals]
    lo, hi = axis.range
    # Every dtick-th decade inside the range, where Plotly's own ticks were (tick0 = 1 = 10^0).
    step = int(axis.dtick or 1)
    assert [round(math.log10(v)) for v in axis.tickvals] == [
        k for k in range(math.ceil(lo), math.floor(hi) + 1) if k % step == 0]


@pytest.mark.parametrize("value, card, tick", [(1.94e-16, "1.94e-16", "1.94e-16"), (1.234e-7, "1.23e-7", "1.234e-7"),
                                                (1e-7, "1.00e-7", "1e-7"), (1e-3, "1.00e-3", "1e-3"),
                                                (1.0, "1.00e+0", "1e+0"), (2.5e7, "2.50e+7", "2.5e+7"),
                                                (-3.2e-9, "-3.20e-9", "-3.2e-9")])
def test_one_scientific_notation_for_cards_and_ticks(value, card, tick):
    """The explorer's one scientific notation (a card's small error, a huge ratio): three significant
    figures, or trimmed; the mantissa's and exponent's signs and digits alike, an ASCII "-", an unpadded
    exponent."""
    assert formatting.scientific(value) == card
    assert formatting.scientific(value, digits=4, trim=True) == tick
