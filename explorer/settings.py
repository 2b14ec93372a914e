"""State behind the Streamlit app's shared sidebar, kept free of Streamlit.

The sidebar's values live in one :class:`Settings` dataclass. This module turns
them into a :class:`~paged_attention.config.DecodeConfig`, into URL query
parameters and back (tolerating any garbage a URL may hold), and computes the
readouts the pages show: the memory summary, the CPU caps of the benchmark and
the results table. Everything here is a plain function, tested without Streamlit.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Iterable, Mapping, Sequence

from paged_attention.config import BLOCK_LAYOUTS, DTYPES, DecodeConfig, ragged_lengths
from paged_attention.runtime import HAS_CUDA, default_device

#: Model presets: ``name -> (num_heads, num_kv_heads, head_dim)``.
MODEL_PRESETS: dict[str, tuple[int, int, int]] = {
    "Llama-3-8B": (32, 8, 128),
    "Llama-3-70B": (64, 8, 128),
    "Qwen3-0.6B": (16, 8, 128),
    "Mistral-7B": (32, 8, 128),
    "Phi-3-mini": (32, 32, 96),
    "Gemma-2-9B": (16, 8, 256),
    "GPT-2": (12, 12, 64),
}
CUSTOM = "Custom"
PRESET_NAMES: tuple[str, ...] = (*MODEL_PRESETS, CUSTOM)

CONTEXT_MODES: tuple[str, ...] = ("uniform", "ragged")
SPREADS: tuple[str, ...] = ("uniform", "long-tail")
BLOCK_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Spare blocks in the pool as a percentage of the blocks the batch uses; 0 keeps
#: the library's default (an eighth). A roomier pool shows more fragmentation.
POOL_HEADROOMS: tuple[int, ...] = (0, 25, 50, 100, 200, 400)
DEVICES: tuple[str, ...] = ("cuda", "cpu") if HAS_CUDA else ("cpu",)

# Widget bounds. The library's own rules (DecodeConfig.validate) are checked on top.
MAX_BATCH = 4096
MAX_CONTEXT = 1 << 20
MAX_HEADS = 256
MAX_HEAD_DIM = 512
MAX_SEED = 2**31 - 1
MAX_WARMUP = 1000
MAX_ITERS = 10_000

#: The block-table page refuses configurations whose table would hold more
#: entries than this (the table itself is built on the CPU, then sampled for drawing).
MAX_TABLE_ENTRIES = 16_000_000

#: On the CPU the Triton kernel runs in the interpreter, about a second per call
#: at this much work; the benchmark page refuses more and caps the iterations.
CPU_MAX_WORK = 8192  # see cpu_work
CPU_MAX_WARMUP = 1
CPU_MAX_ITERS = 3


@dataclass(frozen=True)
class Settings:
    """Everything the shared sidebar controls.

    ``context_len`` applies when ``context_mode == "uniform"``; otherwise the
    per-sequence lengths are ``lengths`` when set (edited by hand or read from a
    URL), else drawn by :func:`~paged_attention.config.ragged_lengths` from
    ``ragged_low``, ``ragged_high``, ``spread`` and ``seed``.
    """

    preset: str = "Llama-3-8B"
    batch_size: int = 4
    context_mode: str = "ragged"
    context_len: int = 128
    ragged_low: int = 16
    ragged_high: int = 256
    spread: str = "long-tail"
    lengths: tuple[int, ...] | None = None
    num_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 16
    dtype: str = "float16"
    device: str = field(default_factory=default_device)
    block_layout: str = "shuffled"
    pool_headroom: int = 0
    seed: int = 0
    warmup: int = 1
    iters: int = 3

    def generated_lengths(self) -> tuple[int, ...]:
        """The ragged lengths the spread draws (before any hand edits).

        Raises
        ------
        ValueError
            If ``ragged_low > ragged_high`` or a value is negative.
        """
        if self.ragged_low > self.ragged_high:  # in the sidebar's words, not ragged_lengths' low/high
            raise ValueError(f"Shortest ({self.ragged_low:,}) must not exceed Longest ({self.ragged_high:,}) "
                             "for ragged lengths.")
        return ragged_lengths(
            self.batch_size, self.ragged_low, self.ragged_high, seed=self.seed, spread=self.spread
        )

    def context_lens(self) -> int | tuple[int, ...]:
        """``context_lens`` for :class:`DecodeConfig`: one int, or one value per sequence."""
        if self.context_mode == "uniform":
            return self.context_len
        if self.lengths is not None:
            return self.lengths
        return self.generated_lengths()

    def config(self) -> DecodeConfig:
        """The validated decode configuration.

        Raises
        ------
        ValueError
            With the rule that the settings break.
        """
        config = self._config(None)
        if self.pool_headroom:
            config = config.with_(spare_blocks=max(1, math.ceil(config.num_blocks_used * self.pool_headroom / 100)))
        return config.validate()

    def _config(self, spare_blocks: int | None) -> DecodeConfig:
        return DecodeConfig(
            batch_size=self.batch_size,
            context_lens=self.context_lens(),
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            block_size=self.block_size,
            dtype=self.dtype,
            device=self.device,
            seed=self.seed,
            block_layout=self.block_layout,
            spare_blocks=spare_blocks,
        ).validate()


def default_settings() -> Settings:
    """Defaults sized for this machine: a GPU gets a batch big enough to be
    bandwidth-bound; the CPU one that the interpreter finishes in seconds."""
    if HAS_CUDA:
        return Settings(batch_size=32, context_len=1024, ragged_low=128, ragged_high=4096, warmup=10, iters=50)
    return Settings()


# -- heads ---------------------------------------------------------------------

def kv_head_options(num_heads: int) -> list[int]:
    """Values of ``num_kv_heads`` that divide ``num_heads``, ascending."""
    num_heads = max(1, int(num_heads))
    return [d for d in range(1, num_heads + 1) if num_heads % d == 0]


def nearest_kv_heads(num_heads: int, wanted: int) -> int:
    """The divisor of ``num_heads`` closest to ``wanted`` (the larger one on a tie)."""
    return min(kv_head_options(num_heads), key=lambda d: (abs(d - wanted), -d))


def preset_for(num_heads: int, num_kv_heads: int, head_dim: int) -> str:
    """The first preset with these head sizes, or ``"Custom"``."""
    for name, heads in MODEL_PRESETS.items():
        if heads == (num_heads, num_kv_heads, head_dim):
            return name
    return CUSTOM


# -- query parameters ----------------------------------------------------------

#: Short URL names of the fields.
QUERY_KEYS: dict[str, str] = {
    "preset": "preset",
    "batch_size": "batch",
    "context_mode": "ctx_mode",
    "context_len": "ctx",
    "ragged_low": "lo",
    "ragged_high": "hi",
    "spread": "spread",
    "lengths": "lens",
    "num_heads": "heads",
    "num_kv_heads": "kv_heads",
    "head_dim": "head_dim",
    "block_size": "block",
    "dtype": "dtype",
    "device": "device",
    "block_layout": "layout",
    "pool_headroom": "headroom",
    "seed": "seed",
    "warmup": "warmup",
    "iters": "iters",
}

_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "batch_size": (1, MAX_BATCH),
    "context_len": (0, MAX_CONTEXT),
    "ragged_low": (0, MAX_CONTEXT),
    "ragged_high": (0, MAX_CONTEXT),
    "num_heads": (1, MAX_HEADS),
    "num_kv_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "seed": (0, MAX_SEED),
    "warmup": (0, MAX_WARMUP),
    "iters": (1, MAX_ITERS),
}

DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)

_CHOICES: dict[str, tuple] = {
    "preset": PRESET_NAMES,
    "context_mode": CONTEXT_MODES,
    "spread": SPREADS,
    "dtype": DTYPE_NAMES,
    "device": DEVICES,
    "block_layout": BLOCK_LAYOUTS,
    "block_size": BLOCK_SIZES,
    "pool_headroom": POOL_HEADROOMS,
}


def _parse_int(text: str, low: int, high: int) -> int:
    value = int(str(text).strip())
    if not low <= value <= high:
        raise ValueError(f"must be between {low:,} and {high:,}")
    return value


def settings_from_query(
    params: Mapping[str, str | Sequence[str]], defaults: Settings | None = None
) -> tuple[Settings, list[str]]:
    """Read settings from URL query parameters, never raising.

    Unknown keys are ignored; a value that does not parse, lies outside the
    widget's range or is not among its choices falls back to the default, and a
    message says so.

    Returns
    -------
    settings : Settings
    warnings : list of str
        One human-readable line per ignored value.
    """
    defaults = defaults or default_settings()
    values = asdict(defaults)
    notes: list[str] = []
    for name, key in QUERY_KEYS.items():
        if key not in params:
            continue
        raw = params[key]
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        try:
            if name == "lengths":
                parts = [p for p in str(raw).split(",") if p.strip()]
                if not parts:
                    raise ValueError("expected comma-separated integers")
                values[name] = tuple(_parse_int(p, 0, MAX_CONTEXT) for p in parts)
            elif name in _INT_BOUNDS:
                values[name] = _parse_int(raw, *_INT_BOUNDS[name])
            else:
                choices = _CHOICES[name]
                value = int(raw) if name in ("block_size", "pool_headroom") else str(raw)
                if value not in choices:
                    raise ValueError(f"must be one of {', '.join(map(str, choices))}")
                values[name] = value
        except (ValueError, TypeError) as exc:
            reason = str(exc) if "must be" in str(exc) or "expected" in str(exc) else "not a valid value"
            notes.append(f"`{key}={raw}` ignored ({reason}); using {_fallback(defaults, name)}.")
    settings = Settings(**values)

    if settings.num_heads % settings.num_kv_heads:
        fixed = nearest_kv_heads(settings.num_heads, settings.num_kv_heads)
        notes.append(
            f"`kv_heads={settings.num_kv_heads}` ignored: num_heads ({settings.num_heads}) must be a "
            f"multiple of num_kv_heads; using {fixed}."
        )
        settings = replace(settings, num_kv_heads=fixed)
    if settings.lengths is not None and len(settings.lengths) != settings.batch_size:
        notes.append(
            f"`lens` ignored: it holds {count(len(settings.lengths), 'value')} for batch size "
            f"{settings.batch_size}; using the lengths drawn from the spread instead."
        )
        settings = replace(settings, lengths=None)
    if settings.context_mode == "uniform" and settings.lengths is not None:
        settings = replace(settings, lengths=None)
    heads = (settings.num_heads, settings.num_kv_heads, settings.head_dim)
    if settings.preset != CUSTOM and MODEL_PRESETS[settings.preset] != heads:
        settings = replace(settings, preset=preset_for(*heads))
    return settings, notes


def _fallback(defaults: Settings, name: str) -> str:
    """How a URL note names the value used instead of a bad one."""
    if name == "lengths" and defaults.lengths is None:
        return "the lengths drawn from the spread (`lo`, `hi`, `spread`, `seed`)"
    return repr(getattr(defaults, name))


def settings_to_query(settings: Settings) -> dict[str, str]:
    """URL query parameters that reproduce ``settings``.

    Hand-edited ragged lengths are written as ``lens=3,17,...`` only when they
    differ from what the spread draws.
    """
    out: dict[str, str] = {}
    for f in fields(Settings):
        value = getattr(settings, f.name)
        if f.name == "lengths":
            continue
        out[QUERY_KEYS[f.name]] = str(value)
    if settings.context_mode == "ragged" and settings.lengths is not None:
        try:
            generated = settings.generated_lengths()
        except ValueError:
            generated = None
        if tuple(settings.lengths) != generated:
            out[QUERY_KEYS["lengths"]] = ",".join(str(n) for n in settings.lengths)
    return out


# -- wording ---------------------------------------------------------------------

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


def clamp_value(value: float, low: float, high: float, label: str) -> tuple[float, str | None]:
    """``value`` brought into ``[low, high]``, and a note saying so (None when it was
    in range), e.g. ``"**Batch size**: 5,000 is above the maximum, 4,096; using 4,096."``"""
    used = min(max(value, low), high)
    if used == value:
        return value, None
    side, bound = ("above the maximum", high) if value > high else ("below the minimum", low)

    def fmt(v: float) -> str:
        return f"{v:,}" if isinstance(v, int) else f"{v:,g}"

    return used, f"**{label}**: {fmt(value)} is {side}, {fmt(bound)}; using {fmt(used)}."


# -- readouts ------------------------------------------------------------------

def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "sequence") -> "1 sequence"``, ``count(1200, "token") -> "1,200 tokens"``."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def format_duration(ms: float) -> str:
    """A time given in ms, in the unit that keeps it short, to three significant
    digits: ``0.001683 -> "1.68 µs"``, ``0.5162 -> "516 µs"``, ``12.34 -> "12.3 ms"``,
    ``1234 -> "1.23 s"`` (for a metric card, whose value is cut off when long)."""
    for value, unit in ((ms * 1e3, "µs"), (ms, "ms"), (ms / 1e3, "s")):
        if abs(value) < 999.5 or unit == "s":
            break
    value = float(f"{value:.3g}")  # round first: 0.99996 ms is "1.00 ms", not "1.000 ms"
    if value == 0:
        return f"0 {unit}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f} {unit}"


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


@dataclass(frozen=True)
class MemorySummary:
    """The sidebar's memory readout for one configuration."""

    kv_cache_bytes: int
    total_bytes: int
    blocks_used: int
    blocks_in_pool: int
    allocated_slots: int
    wasted_slots: int

    @property
    def wasted_fraction(self) -> float:
        """Share of allocated slots left empty in partly filled last blocks."""
        return self.wasted_slots / self.allocated_slots if self.allocated_slots else 0.0


def memory_summary(config: DecodeConfig) -> MemorySummary:
    """KV-cache bytes, blocks and wasted slots of ``config`` (nothing is allocated)."""
    return MemorySummary(
        kv_cache_bytes=config.kv_cache_bytes(),
        total_bytes=config.memory_bytes(),
        blocks_used=config.num_blocks_used,
        blocks_in_pool=config.num_blocks,
        allocated_slots=config.num_blocks_used * config.block_size,
        wasted_slots=config.wasted_slots,
    )


def _table_advice(config: DecodeConfig, others: str) -> str:
    """``Use a larger block size or ...``: the block size only while a larger one is offered."""
    if config.block_size < BLOCK_SIZES[-1]:
        return f"Use a larger block size, {others}."
    return f"Use {others}."


def table_size_error(config: DecodeConfig) -> str | None:
    """Why the block-table page refuses ``config``, or None when it fits."""
    table = config.batch_size * config.max_num_blocks
    if table > MAX_TABLE_ENTRIES:
        return (
            f"The block table would hold {table:,} entries (batch {config.batch_size} x "
            f"{config.max_num_blocks:,} blocks); this page builds tables of at most "
            f"{MAX_TABLE_ENTRIES:,}. {_table_advice(config, 'a smaller batch or a shorter context')}"
        )
    if config.num_blocks > MAX_TABLE_ENTRIES:
        return (
            f"The physical pool would hold {config.num_blocks:,} blocks ({config.num_blocks_used:,} used plus "
            f"{config.num_spare_blocks:,} spare); this page draws pools of at most {MAX_TABLE_ENTRIES:,}. "
            f"{_table_advice(config, 'a shorter context or fewer spare blocks')}"
        )
    return None


@dataclass(frozen=True)
class RunPlan:
    """What the benchmark page will run: ``refusal`` set means it will not run."""

    warmup: int
    iters: int
    notes: tuple[str, ...] = ()
    refusal: str | None = None


#: Tokens' worth of interpreter time one program costs before it reads any token.
CPU_PROGRAM_COST = 64


def _cpu_work_terms(config: DecodeConfig) -> tuple[int, int]:
    """The two terms of :func:`cpu_work` (the rule text below spells them out)."""
    longest = max(config.lengths, default=0)
    return config.num_kv_heads * longest, config.num_heads * CPU_PROGRAM_COST


def cpu_work(config: DecodeConfig) -> int:
    """What the interpreter's time scales with: ``batch_size * max(num_kv_heads *
    longest context, num_heads * 64)``. The first term is the tokens the grouped
    kernel walks; the second counts the simple kernel's (batch, head) programs, each
    worth about 64 tokens of fixed cost, so many heads over short (or empty)
    contexts are not free."""
    return config.batch_size * max(_cpu_work_terms(config))


#: The CPU cap as every page quotes it: the formula of :func:`cpu_work` and its limit.
CPU_WORK_RULE = (
    f"batch_size x max(num_kv_heads x longest context, num_heads x {CPU_PROGRAM_COST}) <= {CPU_MAX_WORK:,}"
)


def cpu_work_detail(config: DecodeConfig) -> str:
    """:func:`cpu_work` of ``config`` written out in the order of :data:`CPU_WORK_RULE`,
    e.g. ``"5 x max(8 x 16, 32 x 64) = 10,240"``."""
    longest = max(config.lengths, default=0)
    return (f"{config.batch_size:,} x max({config.num_kv_heads} x {longest:,}, {config.num_heads} x "
            f"{CPU_PROGRAM_COST}) = {cpu_work(config):,}")


def cpu_work_levers(config: DecodeConfig) -> tuple[str, ...]:
    """The settings that lower :func:`cpu_work` of ``config``: the batch and the
    factors of the larger term (``"batch"``, ``"query heads"``, ``"KV heads"``,
    ``"context"``), less those already at their minimum (a batch of 1, one
    head, an empty context). Lowering the other term's factors changes nothing."""
    tokens, programs = _cpu_work_terms(config)
    longest = max(config.lengths, default=0)
    if programs >= tokens:
        levers = {"batch": config.batch_size > 1, "query heads": config.num_heads > 1}
    else:
        levers = {"batch": config.batch_size > 1, "KV heads": config.num_kv_heads > 1, "context": longest > 0}
    return tuple(lever for lever, can_fall in levers.items() if can_fall)


def join_or(words: Sequence[str]) -> str:
    """``["a", "b", "c"] -> "a, b or c"``."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def cpu_refusal(config: DecodeConfig, lever_names: Mapping[str, str] | None = None) -> str | None:
    """Why the CPU cap refuses ``config`` (naming the rule, this configuration's
    value and what to lower), or None when it fits or runs on a GPU.

    ``lever_names`` maps each of :func:`cpu_work_levers` to what the page calls
    the control that sets it (e.g. ``"batch"`` -> ``"**Max batch**"``); by default
    the levers are named as they are."""
    if config.device != "cpu" or cpu_work(config) <= CPU_MAX_WORK:
        return None
    levers = cpu_work_levers(config)
    lower = (f"the {join_or(levers)}" if lever_names is None
             else join_or([lever_names.get(lever, lever) for lever in levers]))
    return (
        f"On the CPU the benchmark runs only when {CPU_WORK_RULE}; this configuration is "
        f"{cpu_work_detail(config)}. The Triton kernel runs in the interpreter here, a few seconds per call "
        f"at the limit. Lower {lower}, or run on a GPU."
    )


def largest_cpu_batch(config: DecodeConfig, longest: int, upto: int) -> int:
    """The largest batch size up to ``upto`` whose sequences of ``longest`` tokens,
    with the heads of ``config``, fit the CPU cap (:func:`cpu_work`); at least 1."""
    for batch in range(upto, 1, -1):
        if cpu_work(config.with_(batch_size=batch, context_lens=longest)) <= CPU_MAX_WORK:
            return batch
    return 1


def plan_run(config: DecodeConfig, warmup: int, iters: int,
             lever_names: Mapping[str, str] | None = None) -> RunPlan:
    """Apply the CPU caps: refuse sizes the Triton interpreter cannot finish in
    seconds (:func:`cpu_refusal`, its advice worded with ``lever_names``), and cap
    the iterations. On a GPU everything runs as asked."""
    if config.device != "cpu":
        return RunPlan(warmup, iters)
    refusal = cpu_refusal(config, lever_names)
    if refusal:
        return RunPlan(warmup, iters, refusal=refusal)
    notes = []
    if warmup > CPU_MAX_WARMUP:
        notes.append(f"warm-up iterations capped from {warmup} to {CPU_MAX_WARMUP} on the CPU")
        warmup = CPU_MAX_WARMUP
    if iters > CPU_MAX_ITERS:
        notes.append(f"timed iterations capped from {iters} to {CPU_MAX_ITERS} on the CPU")
        iters = CPU_MAX_ITERS
    return RunPlan(warmup, iters, tuple(notes))


def config_summary(config: DecodeConfig) -> str:
    """A short label for one configuration, e.g. ``"B=4 ctx=128 H=32/8 d=128 bs=16 float16 shuffled"``."""
    lens = config.lengths
    if len(set(lens)) <= 1:
        ctx = f"ctx={lens[0] if lens else 0}"
    else:
        ctx = f"ctx={min(lens)}-{max(lens)} (mean {sum(lens) / len(lens):.0f})"
    return (
        f"B={config.batch_size} {ctx} H={config.num_heads}/{config.num_kv_heads} "
        f"d={config.head_dim} bs={config.block_size} {config.dtype} {config.block_layout} {config.device}"
    )


def reads_no_kv(config: DecodeConfig) -> bool:
    """True when every context of ``config`` is empty: a decode step has nothing
    to attend to and reads no K or V (each implementation only writes zeros), so
    its bandwidth is undefined and speedups between implementations mean nothing."""
    return config.needed_kv_bytes() == 0


def results_rows(
    results: Iterable, copy_gbps: float | None = None, baseline: str = "naive", *, reads_kv: bool = True
) -> list[dict]:
    """Flat rows for the results table and its CSV, one per implementation.

    Parameters
    ----------
    results : iterable of BenchResult
    copy_gbps : float, optional
        This device's measured copy bandwidth (GB/s), to add the fraction reached.
    baseline : str
        Implementation whose median the speedup is taken against.
    reads_kv : bool
        False when the step reads no K or V (:func:`reads_no_kv`): bandwidth, its
        fraction of the copy bandwidth and the speedup are then None (n/a).
    """
    results = list(results)
    base = next((r for r in results if r.name == baseline), None) if reads_kv else None
    rows = []
    for r in results:
        best_gbps = r.gpu_gbps if r.gpu_gbps is not None else r.gbps
        if not reads_kv:
            best_gbps = None
        rows.append(
            {
                "implementation": r.label,
                "device": r.device,
                "median_ms": r.median_ms,
                "p10_ms": r.p10_ms,
                "p90_ms": r.p90_ms,
                "gpu_time_ms": r.gpu_time_ms,
                "speedup_vs_naive": (base.median_ms / r.median_ms) if base and r.median_ms > 0 else None,
                "gbps": r.gbps if reads_kv else None,
                "gpu_gbps": r.gpu_gbps if reads_kv else None,
                "pct_of_copy_bw": (100 * best_gbps / copy_gbps) if copy_gbps and best_gbps is not None else None,
                "max_abs_err": r.max_abs_err,
                "max_rel_err": r.max_rel_err,
                "max_tol_ratio": r.max_tol_ratio,
                "atol": r.atol,
                "correct": "yes" if r.passed else "NO",
                "samples": len(r.samples_ms),
            }
        )
    return rows

