"""Text and number formatting for the explorer: the one home of every formatter.

Counts with their nouns, durations, byte sizes, bandwidths, speedups,
percentages, axis values and the wording helpers (code spans, sentences, "a, b
or c") that the pages, the figures and the readouts share, so one quantity reads
the same everywhere. Measured and derived numbers get three significant figures
(:func:`sig3`), in one unit per quantity on a page (:func:`duration_unit`), in a
card, a chart and a table alike (:func:`sig3_column`); counts are exact.
"""

from __future__ import annotations

import math
import re
from typing import Sequence


#: Characters of a value from outside the app (a URL's) that a note quotes; a longer one is cut.
QUOTE_CHARS = 40


def shorten(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis, when longer:
    a value from outside the app (a 400-digit URL parameter) quoted whole would
    fill the sidebar."""
    text = str(text)
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def plain(text: str) -> str:
    """``text`` as a Markdown code span, so Streamlit shows it as typed: no
    headings, lists, bold, links, icons (``:material/...:``), colour directives
    (``:red[...]``), maths (``$...$``) or HTML entities. For text from outside the
    app, such as an uploaded file's name or contents. Backticks become ``'``, and
    line breaks spaces, so the span cannot be closed early."""
    return "`" + re.sub(r"\s+", " ", str(text)).replace("`", "'") + "`"


def sentence(text: str) -> str:
    """``text`` as a sentence to follow a bold heading: its first letter capitalised
    (left as is when it starts with a code name, ``num_heads ...``, or a symbol),
    and a full stop at its end when it has none."""
    text = text.strip()
    word = text.split(" ", 1)[0]
    if word.isalpha() and word.islower():
        text = text[:1].upper() + text[1:]
    if text and text[-1] not in ".!?":
        text += "."
    return text


# -- lines of text ---------------------------------------------------------------

def wrap_words(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (a
    longer word stays whole); its own ``<br>`` breaks are kept. Text with tags
    that have attributes (a break could fall inside one) stays as it is."""
    if not text or re.search(r"<(?!/?(br|b|i|sup|sub)>)", text):
        return text or ""
    lines: list[str] = []
    for line in text.split("<br>"):
        lines.append("")
        for word in line.split(" "):
            if lines[-1] and len(re.sub(r"<[^>]*>", "", lines[-1])) + 1 + len(word) > width:
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return "<br>".join(lines)


def wrap_at_separators(subtitle: str | None, width: int) -> str:
    """``subtitle`` (a chart's) broken into lines of at most ``width`` characters, at its
    `` · `` and ``; `` separators where a part fits a line of its own, else at
    its spaces (a word longer than a line stays whole)."""
    if not subtitle or len(subtitle) <= width:
        return subtitle or ""
    pieces = re.split(r"( · |; )", subtitle)  # text, separator, text, ...
    parts = [pieces[0] + (pieces[1].rstrip() if len(pieces) > 1 else "")]
    parts += [part + (sep.rstrip() if sep else "") for part, sep in zip(pieces[2::2], [*pieces[3::2], ""])]
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + 1 + len(part) > width and len(part) <= width:
            lines[-1] = lines[-1].removesuffix(" ·")  # a line ends with its ";", not with a "·"
            lines.append("")
        for word in part.split(" "):
            if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
                lines[-1] = lines[-1].removesuffix(" ·")
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return "<br>".join(lines)


def line_count(text: str | None) -> int:
    """Lines of a Plotly text (0 for none)."""
    return text.count("<br>") + 1 if text else 0


def join_or(words: Sequence[str]) -> str:
    """``["a", "b", "c"] -> "a, b or c"``."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "sequence") -> "1 sequence"``, ``count(1200, "token") -> "1,200 tokens"``."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def ordinal(n: int) -> str:
    """``1 -> "1st"``, ``12 -> "12th"``, ``23 -> "23rd"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_number(v: float) -> str:
    """``5000 -> "5,000"``, ``2.5 -> "2.5"``, ``99999999.0 -> "99,999,999"``: a
    number as typed, with thousands separators (as a widget value is quoted back
    to the user); up to 15 significant digits, so a typed number is not rounded
    to an exponent (``:,g`` quoted 99,999,999 as "1e+08")."""
    return f"{v:,}" if isinstance(v, int) else f"{v:,.15g}"


def compact(n: int) -> str:
    """``524288 -> "524k"``, ``12345 -> "12,345"``, ``8388608 -> "8.39M"``: short
    counts for tight labels (exact below 100,000, else three significant figures)."""
    n = int(n)
    if abs(n) < 100_000:
        return f"{n:,}"
    if abs(n) < 999_500:
        return f"{sig3(n / 1e3)}k"
    return f"{sig3(n / 1e6)}M"


def span_text(values: Sequence[int], between: str = " to ") -> str:
    """Whole numbers as their span: ``"4"`` when all are equal, ``"1 to 4"`` (with
    ``between``) when they differ, ``""`` for none."""
    if not len(values):
        return ""
    low, high = min(values), max(values)
    return format_number(low) if low == high else f"{format_number(low)}{between}{format_number(high)}"


def format_axis_value(v: float) -> str:
    """A sweep's axis value: ``4096 -> "4k"`` for multiples of 1024, else :func:`compact`."""
    v = int(v)
    if v >= 1024 and v % 1024 == 0:
        return f"{format_number(v // 1024)}k"
    return compact(v)


def axis_value_texts(values: Sequence[float]) -> list[str]:
    """A sweep's axis values written one way for the whole axis: :func:`format_axis_value`
    (``"2k"``) when every value from 1,024 up is a multiple of 1,024, else :func:`compact`
    for all (``[1000, 1166, 2048] -> ["1,000", "1,166", "2,048"]``): one axis read
    "1,166" beside "2k" (issue 27, round 4)."""
    kilo = all(int(v) < 1024 or int(v) % 1024 == 0 for v in values)
    return [format_axis_value(v) if kilo else compact(v) for v in values]


def format_axis_values(values: Sequence[float]) -> str:
    """A sweep's axis values as its charts' ticks name them (:func:`axis_value_texts`),
    for the captions: ``[512, 2048, 8192] -> "512, 2k, 8k"``."""
    return ", ".join(axis_value_texts(values))


#: The duration units, each with how many of it make a millisecond.
DURATION_UNITS: dict[str, float] = {"µs": 1e3, "ms": 1.0, "s": 1e-3}


def duration_unit(values_ms: Sequence[float | None]) -> str:
    """The one unit a page writes its durations in, chosen once from its data:
    the unit in which the geometric middle of the smallest and largest positive
    value lies under 1,000 (``[0.02, 1.5] -> "µs"``: 20.0 µs and 1,500 µs;
    ``[0.3, 3000] -> "ms"``: 0.300 ms and 3,000 ms). ``"ms"`` when there is no
    positive finite value. Cards, charts and tables then read the same unit."""
    positive = [v for v in values_ms if v is not None and math.isfinite(v) and v > 0]
    if not positive:
        return "ms"
    middle = math.sqrt(min(positive) * max(positive))
    return next(u for u, scale in DURATION_UNITS.items() if middle * scale < 999.5 or u == "s")


def in_unit(ms: float, unit: str) -> float:
    """``ms`` milliseconds expressed in ``unit`` (a key of :data:`DURATION_UNITS`)."""
    return ms * DURATION_UNITS[unit]


#: Below this magnitude :func:`sig3` writes a power of ten (``1.23e-7``): fixed
#: notation would be mostly zeros. Above it, fixed (a CPU run's 0.0000435 GB/s).
SCIENTIFIC_BELOW = 1e-6


def scientific(value: float, digits: int = 3, trim: bool = False) -> str:
    """``value`` in the explorer's one scientific notation, for a card, a table, a
    hover and a log axis' tick alike: ``digits`` significant figures, ``"e"``, the
    exponent's sign (the ASCII ``-`` every other number of the app writes, ``+`` for
    a positive one) and its digits unpadded: ``1.234e-07 -> "1.23e-7"``,
    ``1.94e-16 -> "1.94e-16"``, ``2.5e7 -> "2.50e+7"``; ``trim`` drops the
    mantissa's trailing zeros (a tick's decade: ``1e-3``, ``1e+0``; ``2.5e+7``).

    Examples
    --------
    >>> scientific(1.234e-7), scientific(0.001, trim=True), scientific(1.0, trim=True)
    ('1.23e-7', '1e-3', '1e+0')
    """
    mantissa, exponent = f"{float(value):.{max(digits - 1, 0)}e}".split("e")
    if trim and "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:])}"


def decade_ticks(lo: float, hi: float, step: int = 1, text=None) -> dict:
    """A log axis' ticks at every ``step``-th power of ten from ``10**lo`` to
    ``10**hi`` (the axis' range, in decades), written by ``text`` (default: the
    cards' :func:`sig3`, trimmed: :func:`sig3_trim`, ``"0.001"``, ``"1e-7"``), as
    Plotly ``update_yaxes`` arguments: ``tickmode="array"``, ``tickvals``,
    ``ticktext``. Plotly's own ``tickformat="~e"`` wrote ``"1e−3"`` (a Unicode minus)
    beside a card's ``0.00100``."""
    text = text or sig3_trim
    step = max(int(step or 1), 1)
    decades = range(math.ceil(lo / step - 1e-9) * step, math.floor(hi + 1e-9) + 1, step)
    values = [10.0 ** k for k in decades]
    return {"tickmode": "array", "tickvals": values, "ticktext": [text(v) for v in values]}


def sig3(value: float | None) -> str:
    """``value`` to three significant figures, the explorer's one rule for a
    measured or derived number: fixed notation with thousands separators
    (``0.000612 -> "0.000612"``, ``69.84 -> "69.8"``, ``382.5 -> "382"``, ``1234 ->
    "1,230"``, ``2 -> "2.00"``), a power of ten below :data:`SCIENTIFIC_BELOW`
    (:func:`scientific`: ``1.234e-07 -> "1.23e-7"``); ``"0"`` for zero, ``"n/a"`` for None or NaN.

    Examples
    --------
    >>> [sig3(v) for v in (382.5, 0.99996, 12345.6, 0.0)]
    ['382', '1.00', '12,300', '0']
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    value = float(value)
    if not math.isfinite(value):
        return f"{value:g}"
    value = float(f"{value:.3g}")  # round first: 0.99996 is "1.00", not "1.000"
    if value == 0:
        return "0"
    if abs(value) < SCIENTIFIC_BELOW:
        return scientific(value)
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def sig3_trim(value: float | None) -> str:
    """:func:`sig3`'s text with its mantissa's trailing zeros dropped, for a round
    value a card would write with them (a log axis' decade, a ratio): the same
    notation as the card, fixed from :data:`SCIENTIFIC_BELOW` up and a power of ten
    below it, so that one value reads alike on a card and on every axis:
    ``0.01 -> "0.01"`` (a card's ``"0.0100"``), ``1e-7 -> "1e-7"`` (``"1.00e-7"``),
    ``2 -> "2"``, ``1000 -> "1,000"``.

    Examples
    --------
    >>> [sig3_trim(v) for v in (0.01, 1e-6, 1e-7, 2.0, 1000.0, 0.125)]
    ['0.01', '0.000001', '1e-7', '2', '1,000', '0.125']
    """
    mantissa, e, exponent = sig3(value).partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}{e}{exponent}"


def sig3_column(values, missing: str = "n/a") -> list[str]:
    """:func:`sig3` of each of ``values`` (a pandas column, a list), for a table
    cell that must read as the card or chart label beside it (``382``, not
    ``382.5``); a missing value (None, NaN) is ``missing``. Show it right-aligned
    (``ui.tables.number_column``)."""
    return [missing if v is None or v != v else sig3(v) for v in values]


def format_percent(share: float | None) -> str:
    """``share`` (a fraction) as a percentage to three significant figures:
    ``0.4375 -> "43.8%"``, ``1 -> "100%"``, ``0.00123 -> "0.123%"``."""
    return "n/a" if share is None or share != share else f"{sig3(100 * share)}%"


def duration_number(ms: float, unit: str) -> str:
    """``ms`` in ``unit`` to three significant digits, without the unit, for a
    table column whose header names it: ``duration_number(0.8137, "µs") -> "814"``."""
    return sig3(in_unit(ms, unit))


def format_duration(ms: float, unit: str | None = None) -> str:
    """A time given in ms, to three significant digits, the app's one rule for
    durations: in the unit that keeps it short (``0.001683 -> "1.68 µs"``,
    ``0.5162 -> "516 µs"``, ``12.34 -> "12.3 ms"``, ``1234 -> "1.23 s"``), or
    always in ``unit`` (``"µs"``, ``"ms"`` or ``"s"``; a page that shows several
    durations takes one from :func:`duration_unit`; see also :func:`format_ms`)."""
    if unit is None:
        for unit in DURATION_UNITS:
            if abs(in_unit(ms, unit)) < 999.5 or unit == "s":
                break
    return f"{duration_number(ms, unit)} {unit}"


def format_gbps(gbps: float | None) -> str:
    """A bandwidth in GB/s, without the unit (a table column's header names it):
    :func:`sig3` (``0.000612 -> "0.000612"``, ``48.31 -> "48.3"``, ``4243.2 ->
    "4,240"``); ``"n/a"`` for None."""
    return sig3(gbps)


#: :func:`format_ms`'s rule in d3-format, for Plotly hover templates that format
#: on the browser's side (``"%{y:,.3r} ms"``): three significant digits in fixed
#: notation with thousands separators, ``518.6 -> "519"``, ``2 -> "2.00"``.
MS_D3 = ",.3r"
#: :func:`sig3`'s rule in d3-format for a hover's measured number (GB/s, a speedup):
#: three significant digits, fixed notation, thousands separators.
SIG3_D3 = ",.3r"
#: Tick labels of a log axis: :func:`sig3`'s fixed notation with thousands
#: separators, trailing zeros trimmed (``0.0001``, ``0.2``, ``1``, ``10,000``), one
#: style up the whole axis. Plotly's own wrote SI prefixes past a thousand and under
#: a thousandth beside plain decimals ("100μ" under "0.001", "10k" over "100").
LOG_TICK_D3 = ",.3~r"
#: :func:`sig3`'s rule as a Streamlit number box's ``format`` (sprintf-js, in the browser):
#: ``%.3g`` is JavaScript's ``toPrecision(3)``, trailing zeros kept: ``10 -> "10.0"``,
#: ``600 -> "600"``, ``0.02 -> "0.0200"`` (``"%.2f"`` wrote "10.00", issue 27).
SIG3_PRINTF = "%.3g"
#: A kernel trace's running values in its hovers (a max m, a sum l, a logit): four
#: significant digits, so a tile's rescale shows between neighbouring tiles.
TRACE_D3 = ".4g"
#: Ratios and errors that span powers of ten in the trace's hovers (a rescale α, a
#: merge weight, an error against the answer): three significant digits, exponent
#: notation when small.
RATIO_D3 = ".3g"


def format_ms(ms: float) -> str:
    """``184.9 -> "185 ms"``, ``2 -> "2.00 ms"``, ``0.1849 -> "0.185 ms"``,
    ``1234 -> "1,230 ms"``: :func:`format_duration` always in milliseconds, the
    unit of the charts' axes, for their labels and hovers."""
    return format_duration(ms, "ms")


def format_times(v: float) -> str:
    """A ratio to three significant digits, in fixed notation below a million:
    ``419.7 -> "420×"``, ``1.5 -> "1.5×"``, ``12345 -> "12,300×"``, ``2.5e7 -> "2.5e+7×"``
    (:func:`scientific`)."""
    if not math.isfinite(v):
        return f"{v:g}×"
    if abs(v) >= 1e6:
        return f"{scientific(v, trim=True)}×"
    return f"{sig3_trim(v)}×"


def format_speedup(s: float) -> str:
    """A speedup to three significant figures (:func:`sig3`): ``0.5 -> "0.500×"``,
    ``44 -> "44.0×"``, ``1234 -> "1,230×"``; empty when not finite."""
    return f"{sig3(s)}×" if math.isfinite(s) else ""


def format_bytes(n: float, significant: int | None = 3) -> str:
    """``1536 -> "1.54 kB"``, ``813_600_000 -> "814 MB"``: decimal units, like the
    MB moved per step and the GB/s of the benchmark, so one quantity reads the
    same on every page; ``significant`` figures (three, as :func:`sig3`, when
    None), whole bytes below a kilobyte."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 999.5 or unit == "TB":
            break
        n /= 1000
    if unit == "B":
        return f"{format_number(round(n))} B"
    if significant in (None, 3):
        return f"{sig3(n)} {unit}"
    decimals = max(0, significant - 1 - math.floor(math.log10(abs(n)))) if n else 0
    return f"{n:.{decimals}f} {unit}"


#: How the app names an 8-bit KV-cache dtype (``DecodeConfig.kv_dtype``).
KV_DTYPE_LABELS: dict[str, str] = {"float8_e4m3fn": "fp8 e4m3", "float8_e5m2": "fp8 e5m2"}
#: How the app names an fp8 cache's scales (``DecodeConfig.kv_scale``).
KV_SCALE_LABELS: dict[str, str] = {"per_tensor": "per tensor", "per_head": "per KV head"}


def kv_dtype_label(kv_dtype: str | None, dtype: str | None = None) -> str:
    """A KV-cache dtype as the app writes it: ``"fp8 e4m3"``, ``"fp8 e5m2"``; a
    cache in the compute dtype (``None``) is named by ``dtype`` (``"float16"``),
    or ``"same as compute dtype"`` (the sidebar's "Compute dtype") without one.
    Any other name is returned as is."""
    if kv_dtype is None or kv_dtype == dtype:
        return dtype or "same as compute dtype"
    return KV_DTYPE_LABELS.get(kv_dtype, kv_dtype)


def attention_text(window: int | None, soft_cap: float | None, sinks: bool) -> str:
    """The attention options in force, in words: ``"sliding window 4,096 · soft-cap 50 ·
    sinks"``; ``"full attention"`` when none is."""
    parts = ([f"sliding window {format_number(window)}"] if window is not None else []) + (
        [f"soft-cap {format_number(soft_cap)}"] if soft_cap is not None else []) + (["sinks"] if sinks else [])
    return " · ".join(parts) or "full attention"


#: A bandwidth in a recorded set's prose ("4127 to 4255 GB/s"): a whole number, or
#: two joined by "to", before "GB/s".
_PROSE_GBPS = re.compile(r"\b(\d{4,})(?=(?: to \d+)? GB/s)|(?<= to )(\d{4,})(?= GB/s)")


def group_prose_bandwidths(text: str) -> str:
    """``text`` (a recorded set's note) with its whole numbers of GB/s written with
    thousands separators and three significant figures, as the page's headline writes them:
    ``"4127 to 4255 GB/s" -> "4,130 to 4,260 GB/s"``; every other number (a date, a file
    name) untouched."""
    return _PROSE_GBPS.sub(lambda m: f"{int(float(f'{int(m.group(0)):.3g}')):,}", text)
