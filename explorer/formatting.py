"""Text and number formatting for the explorer: the one home of every formatter.

Counts with their nouns, durations, byte sizes, speedups, axis values and the
wording helpers (code spans, sentences, "a, b or c") that the pages, the
figures and the readouts share, so one quantity reads the same everywhere.
"""

from __future__ import annotations

import math
import re
from typing import Sequence


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
    """``524288 -> "524k"``, ``12345 -> "12,345"``: short counts for tight labels."""
    n = int(n)
    if abs(n) < 100_000:
        return f"{n:,}"
    if abs(n) < 1_000_000:
        return f"{n / 1e3:,.0f}k"
    return f"{n / 1e6:,.1f}M"


def format_axis_value(v: float) -> str:
    """A sweep's axis value: ``4096 -> "4k"`` for multiples of 1024, else :func:`compact`."""
    v = int(v)
    if v >= 1024 and v % 1024 == 0:
        return f"{v // 1024}k"
    return compact(v)


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


def _three_digits(value: float) -> str:
    """``value`` to three significant digits in fixed notation with thousands
    separators: ``0.000612 -> "0.000612"``, ``69.84 -> "69.8"``, ``1234 -> "1,230"``."""
    if not math.isfinite(value):
        return f"{value:g}"
    value = float(f"{value:.3g}")  # round first: 0.99996 is "1.00", not "1.000"
    if value == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


#: Below this magnitude :func:`sig3` writes a power of ten (``1.23e-05``): fixed
#: notation would be all zeros.
SCIENTIFIC_BELOW = 1e-4


def sig3(value: float | None) -> str:
    """``value`` to three significant figures, the explorer's one rule for a
    measured or derived number: fixed notation with thousands separators
    (``0.000612 -> "0.000612"``, ``69.84 -> "69.8"``, ``382.5 -> "382"``, ``1234 ->
    "1,230"``, ``2 -> "2.00"``), a power of ten below :data:`SCIENTIFIC_BELOW`
    (``1.234e-07 -> "1.23e-07"``); ``"0"`` for zero, ``"n/a"`` for None or NaN.

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
        return f"{value:.2e}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def format_percent(share: float | None) -> str:
    """``share`` (a fraction) as a percentage to three significant figures:
    ``0.4375 -> "43.8%"``, ``1 -> "100%"``, ``0.00123 -> "0.123%"``."""
    return "n/a" if share is None or share != share else f"{sig3(100 * share)}%"


def duration_number(ms: float, unit: str) -> str:
    """``ms`` in ``unit`` to three significant digits, without the unit, for a
    table column whose header names it: ``duration_number(0.8137, "µs") -> "814"``."""
    return _three_digits(in_unit(ms, unit))


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
    """A bandwidth in GB/s, without the unit, short enough for a narrow table
    column: three significant digits under 100 (``0.000612 -> "0.000612"``,
    ``48.31 -> "48.3"``), whole numbers above (``4243.2 -> "4,243"``); ``"n/a"``
    for None."""
    if gbps is None or (isinstance(gbps, float) and math.isnan(gbps)):
        return "n/a"
    return _three_digits(gbps) if abs(gbps) < 100 else f"{gbps:,.0f}"


#: :func:`format_ms`'s rule in d3-format, for Plotly hover templates that format
#: on the browser's side (``"%{y:,.3r} ms"``): three significant digits in fixed
#: notation with thousands separators, ``518.6 -> "519"``, ``2 -> "2.00"``.
MS_D3 = ",.3r"


def format_ms(ms: float) -> str:
    """``184.9 -> "185 ms"``, ``2 -> "2.00 ms"``, ``0.1849 -> "0.185 ms"``,
    ``1234 -> "1,230 ms"``: :func:`format_duration` always in milliseconds, the
    unit of the charts' axes, for their labels and hovers."""
    return format_duration(ms, "ms")


def format_times(v: float) -> str:
    """A ratio to three significant digits, in fixed notation below a million:
    ``419.7 -> "420×"``, ``1.5 -> "1.5×"``, ``12345 -> "12,300×"``, ``2.5e7 -> "2.5e+07×"``."""
    if not math.isfinite(v) or abs(v) >= 1e6:
        return f"{v:.3g}×"
    text = _three_digits(v)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}×"


def format_speedup(s: float) -> str:
    """``0.5 -> "0.5×"``, ``12.34 -> "12.3×"``, ``1234 -> "1,234×"``; empty when not finite."""
    if not math.isfinite(s):
        return ""
    if s < 1:
        return f"{s:.2g}×"
    return f"{s:.1f}×" if s < 100 else f"{s:,.0f}×"


def format_bytes(n: float, significant: int | None = None) -> str:
    """``1536 -> "1.54 kB"`` (decimal units, two decimals); with ``significant``,
    that many significant digits (``format_bytes(813_600_000, 3) -> "814 MB"``).

    Decimal, like the MB moved per step and the GB/s of the benchmark, so one
    quantity reads the same on every page.
    """
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            break
        n /= 1000
    if unit == "B":
        return f"{n:.0f} B"
    if significant is None:
        return f"{n:.2f} {unit}"
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
