"""The settings behind the Streamlit app's shared sidebar, kept free of Streamlit.

The sidebar's values live in one :class:`Settings` dataclass. This module holds
its choices (model presets, block sizes, ...; the bounds are in
:mod:`explorer.limits`), turns it into a
:class:`~paged_attention.config.DecodeConfig`, and into URL query parameters and
back (tolerating any garbage a URL may hold) through its fields of the URL
registry (:data:`SIDEBAR_FIELDS`, read and written by :mod:`explorer.url_fields`).
Everything here is a plain function, tested without Streamlit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Mapping, Sequence

from explorer.formatting import count, format_number, plain
from explorer.limits import (
    MAX_BATCH,
    MAX_SOFT_CAP,
    MAX_WINDOW,
    MIN_SOFT_CAP,
    MAX_BLOCK_SIZE,
    MAX_CONTEXT,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_ITERS,
    MAX_QUERY_LEN,
    MAX_SEED,
    MAX_WARMUP,
)
from explorer.presets import (
    CUSTOM,
    GLOBAL,
    LAYER_KINDS,
    MODEL_PRESETS,
    PRESET_NAMES,
    RENAMED,
    SLIDING,
    Attention,
    preset_for,
)
from explorer.url_fields import UrlField, last_value, read_fields, write_fields
from paged_attention.config import (
    BLOCK_LAYOUTS,
    DTYPES,
    KV_DTYPES,
    KV_SCALES,
    DecodeConfig,
    ragged_lengths,
)
from paged_attention.runtime import HAS_CUDA, default_device

CONTEXT_MODES: tuple[str, ...] = ("uniform", "ragged")
SPREADS: tuple[str, ...] = ("uniform", "long-tail")
BLOCK_SIZES: tuple[int, ...] = tuple(1 << i for i in range(MAX_BLOCK_SIZE.bit_length()))
#: Spare blocks in the pool as a percentage of the blocks the batch uses; 0 keeps
#: the library's default (an eighth). A roomier pool shows more fragmentation.
POOL_HEADROOMS: tuple[int, ...] = (0, 25, 50, 100, 200, 400)
DEVICES: tuple[str, ...] = ("cuda", "cpu") if HAS_CUDA else ("cpu",)
#: The KV cache's dtype: ``"same"`` (the compute dtype, as the query) or an 8-bit
#: float format, stored with dequantization scales.
SAME_AS_COMPUTE = "same"
KV_CACHE_DTYPES: tuple[str, ...] = (SAME_AS_COMPUTE, *KV_DTYPES)


@dataclass(frozen=True)
class Settings:
    """Everything the shared sidebar controls.

    ``context_len`` applies when ``context_mode == "uniform"``; otherwise the
    per-sequence lengths are ``lengths`` when set (edited by hand or read from a
    URL), else drawn by :func:`~paged_attention.config.ragged_lengths` from
    ``ragged_low``, ``ragged_high``, ``spread`` and ``seed``.
    """

    preset: str = "Llama-3.1-8B"
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
    #: ``"same"`` or a key of :data:`~paged_attention.config.KV_DTYPES`.
    kv_dtype: str = SAME_AS_COMPUTE
    #: Scales of an fp8 cache (ignored for a cache in the compute dtype).
    kv_scale: str = "per_tensor"
    device: str = field(default_factory=default_device)
    block_layout: str = "shuffled"
    pool_headroom: int = 0
    #: Tokens at the start of every sequence that its prefix group shares (0: none).
    shared_prefix: int = 0
    #: Groups of consecutive sequences that share a prefix (ignored while ``shared_prefix`` is 0).
    prefix_groups: int = 1
    #: New (query) tokens per sequence: the draft tokens of speculative decoding (or a
    #: multi-token-prediction head's), already written to the cache and counted in its
    #: context, that one step verifies, each attending causally to the context up to
    #: itself. One value for all (each sequence takes at most its context), or a tuple
    #: of one per sequence; DecodeConfig's ``query_lens``. 1: the plain decode step.
    query_lens: int | tuple[int, ...] = 1
    #: Sliding window (tokens; None: the whole context), logit soft-cap (None: none) and
    #: attention sinks (random per-head sink logits): DecodeConfig's ``window``,
    #: ``soft_cap`` and ``sinks``.
    window: int | None = None
    soft_cap: float | None = None
    sinks: bool = False
    #: The layer kind of a preset whose layers differ (:data:`~explorer.presets.LAYER_KINDS`);
    #: its attention is in the three fields above, which is what a run uses.
    layer: str = SLIDING
    seed: int = 0
    warmup: int = 1
    iters: int = 3
    #: Presentation mode: every chart's text and plot area enlarged
    #: (:func:`explorer.style.presentation`).
    present: bool = False

    def attention(self) -> Attention:
        """The attention options these settings set."""
        return Attention(self.window, self.soft_cap, self.sinks)

    def attention_options(self) -> dict[str, object]:
        """The attention options in force, as :class:`DecodeConfig` fields: ``window``,
        ``soft_cap`` and ``sinks`` (True), each only when set (``{}``: plain attention)."""
        options = {"window": self.window, "soft_cap": self.soft_cap, "sinks": self.sinks or None}
        return {name: value for name, value in options.items() if value is not None}

    def generated_lengths(self) -> tuple[int, ...]:
        """The ragged lengths the spread draws (before any hand edits).

        Raises
        ------
        ValueError
            If ``ragged_low > ragged_high`` or a value is negative.
        """
        if self.ragged_low > self.ragged_high:  # in the sidebar's words, not ragged_lengths' low/high
            raise ValueError(f"Shortest ({format_number(self.ragged_low)}) must not exceed Longest "
                             f"({format_number(self.ragged_high)}) for ragged lengths.")
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

    def check_prefix(self, lengths: int | tuple[int, ...]) -> None:
        """Check the shared prefix against ``lengths`` (:meth:`context_lens`) and the batch,
        in the sidebar's words (as :meth:`generated_lengths` does for Shortest and Longest);
        :class:`DecodeConfig` states the same rules in its field names.

        Raises
        ------
        ValueError
            If the prefix is longer than a sequence, or there are more prefix groups than sequences.
        """
        if not self.shared_prefix:  # groups mean nothing without a prefix (see config)
            return
        if isinstance(lengths, int):
            if self.shared_prefix > lengths:
                raise ValueError(f"Shared prefix ({count(self.shared_prefix, 'token')}) must not exceed "
                                 f"Tokens per sequence ({format_number(lengths)}).")
        elif len(lengths) == self.batch_size:  # otherwise DecodeConfig names the count first
            for i, n in enumerate(lengths):
                if n < self.shared_prefix:
                    raise ValueError(f"Shared prefix ({count(self.shared_prefix, 'token')}) must not "
                                     f"exceed any sequence's length; sequence {i} holds only "
                                     f"{count(n, 'token')}.")
        if not 1 <= self.prefix_groups <= self.batch_size:
            raise ValueError(f"Prefix groups ({format_number(self.prefix_groups)}) must be from 1 to "
                             f"Batch size ({format_number(self.batch_size)}).")

    def check_query_lens(self, lengths: int | tuple[int, ...]) -> None:
        """Check per-sequence new tokens against ``lengths`` (:meth:`context_lens`) and the
        batch, in the sidebar's words; one value for all needs no check (each sequence takes
        at most its context). :class:`DecodeConfig` states the same rules in its field names.

        Raises
        ------
        ValueError
            If the count differs from the batch size, or a sequence has more new tokens
            than its context holds.
        """
        if not isinstance(self.query_lens, tuple):
            return
        if len(self.query_lens) != self.batch_size:
            raise ValueError(f"New tokens per sequence holds {count(len(self.query_lens), 'value')} for "
                             f"Batch size ({format_number(self.batch_size)}): give one per sequence.")
        contexts = (lengths,) * self.batch_size if isinstance(lengths, int) else lengths
        for i, (q, n) in enumerate(zip(self.query_lens, contexts)):
            if q > max(1, n):
                raise ValueError(f"New tokens of sequence {i} ({format_number(q)}) must not exceed its context "
                                 f"({count(n, 'token')}): the new tokens are already in the cache.")

    def without_batch(self) -> Settings:
        """These settings with the batch (size, lengths, new tokens, shared prefix and its groups) put back
        to the defaults: the model, cache, device and timing kept, for a page that builds its
        own batch (Serving simulation) and so must not be broken by the sidebar's."""
        d = default_settings()
        return replace(self, batch_size=d.batch_size, context_mode=d.context_mode, context_len=d.context_len,
                       ragged_low=d.ragged_low, ragged_high=d.ragged_high, spread=d.spread, lengths=None,
                       shared_prefix=0, prefix_groups=1, query_lens=1)

    def config(self) -> DecodeConfig:
        """The validated decode configuration.

        Raises
        ------
        ValueError
            With the rule that the settings break.
        """
        lengths = self.context_lens()
        self.check_prefix(lengths)
        self.check_query_lens(lengths)
        config = DecodeConfig(
            batch_size=self.batch_size,
            context_lens=lengths,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            block_size=self.block_size,
            dtype=self.dtype,
            kv_dtype=None if self.kv_dtype == SAME_AS_COMPUTE else self.kv_dtype,
            # Scales mean nothing to a cache in the compute dtype: leave the default, so the
            # configuration (a cache key, a run's label) does not change with a hidden choice.
            kv_scale=self.kv_scale if self.kv_dtype != SAME_AS_COMPUTE else "per_tensor",
            device=self.device,
            seed=self.seed,
            block_layout=self.block_layout,
            shared_prefix=self.shared_prefix,
            # Groups mean nothing without a shared prefix: leave the default, so a hidden
            # value neither changes the configuration nor breaks it (more groups than sequences).
            prefix_groups=self.prefix_groups if self.shared_prefix else 1,
            query_lens=self.query_lens,
            **self.attention_options(),
        ).validate()
        if self.pool_headroom:
            config = config.with_(spare_blocks=max(1, math.ceil(config.num_blocks_used * self.pool_headroom / 100)))
        return config.validate()


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


# -- query parameters ----------------------------------------------------------

DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)

#: The sidebar's fields in the URL registry (:data:`explorer.page_urls.URL_FIELDS`):
#: each :class:`Settings` field's URL name, kind and bounds or choices.
SIDEBAR_FIELDS: tuple[UrlField, ...] = (
    UrlField("preset", "preset", "choice", choices=PRESET_NAMES),
    UrlField("batch", "batch_size", bounds=(1, MAX_BATCH)),
    UrlField("ctx_mode", "context_mode", "choice", choices=CONTEXT_MODES),
    UrlField("ctx", "context_len", bounds=(0, MAX_CONTEXT)),
    UrlField("lo", "ragged_low", bounds=(0, MAX_CONTEXT)),
    UrlField("hi", "ragged_high", bounds=(0, MAX_CONTEXT)),
    UrlField("spread", "spread", "choice", choices=SPREADS),
    UrlField("lens", "lengths", "ints", bounds=(0, MAX_CONTEXT)),
    UrlField("heads", "num_heads", bounds=(1, MAX_HEADS)),
    UrlField("kv_heads", "num_kv_heads", bounds=(1, MAX_HEADS)),
    UrlField("head_dim", "head_dim", bounds=(1, MAX_HEAD_DIM)),
    UrlField("block", "block_size", "choice", choices=BLOCK_SIZES),
    UrlField("dtype", "dtype", "choice", choices=DTYPE_NAMES),
    UrlField("kv_dtype", "kv_dtype", "choice", choices=KV_CACHE_DTYPES),
    UrlField("kv_scale", "kv_scale", "choice", choices=KV_SCALES),
    UrlField("device", "device", "choice", choices=DEVICES),
    UrlField("layout", "block_layout", "choice", choices=BLOCK_LAYOUTS),
    UrlField("headroom", "pool_headroom", "choice", choices=POOL_HEADROOMS),
    UrlField("prefix", "shared_prefix", bounds=(0, MAX_CONTEXT)),
    UrlField("prefix_groups", "prefix_groups", bounds=(1, MAX_BATCH)),
    UrlField("new_tokens", "query_lens", "int_or_ints", bounds=(1, MAX_QUERY_LEN)),
    UrlField("seed", "seed", bounds=(0, MAX_SEED)),
    UrlField("warmup", "warmup", bounds=(0, MAX_WARMUP)),
    UrlField("iters", "iters", bounds=(1, MAX_ITERS)),
    UrlField("window", "window", bounds=(1, MAX_WINDOW)),
    UrlField("soft_cap", "soft_cap", "float", bounds=(MIN_SOFT_CAP, MAX_SOFT_CAP)),
    UrlField("sinks", "sinks", "flag"),
    UrlField("layer", "layer", "choice", choices=LAYER_KINDS),
    UrlField("present", "present", "flag"),
)
#: How a URL note names an attention option that is off, the value used instead of an ignored one.
_OFF = {"window": "no window (the whole context)", "soft_cap": "no soft-cap"}
#: Written only when a prefix is shared.
_PREFIX_FIELDS = ("shared_prefix", "prefix_groups")


def settings_from_query(
    params: Mapping[str, str | Sequence[str]], defaults: Settings | None = None
) -> tuple[Settings, list[str]]:
    """Read settings from URL query parameters, never raising.

    Unknown keys are ignored; a value that does not parse, lies outside the
    widget's range or is not among its choices falls back to the default, and a
    note says so (:func:`explorer.url_fields.read_fields`). Then the rules
    between fields: KV heads that do not divide the query heads become the
    nearest divisor, lengths (and new tokens per sequence) of another count than
    the batch are dropped, a
    preset that no longer matches the heads and attention becomes the matching one
    (or Custom: :func:`with_matching_preset`). A preset's old name (``Llama-3-8B``:
    :data:`~explorer.presets.RENAMED`) reads as its new one; the heads and attention
    options the URL leaves out are the named preset's (of its ``layer`` kind).
    A global layer attends to the whole context, so ``layer=global`` beside a
    window is resolved one way, with a note: a preset with a layer picker
    (Gemma 2, gpt-oss) gets its global layer and the window is ignored; one
    without (its layers all alike, or Custom) keeps the window and the layer is
    ignored.

    Returns
    -------
    settings : Settings
    warnings : list of str
        One human-readable line per ignored value.
    """
    defaults = defaults or default_settings()
    params = dict(params)
    if "preset" in params and last_value(params["preset"]) in RENAMED:
        params["preset"] = RENAMED[last_value(params["preset"])]
    defaults = _preset_defaults(params, defaults)
    fallbacks = {} if defaults.lengths is not None else {
        "lengths": "the lengths drawn from the spread (`lo`, `hi`, `spread`, `seed`)"}
    fallbacks.update({name: text for name, text in _OFF.items() if getattr(defaults, name) is None})
    found, notes = read_fields(SIDEBAR_FIELDS, params, asdict(defaults), fallbacks=fallbacks)
    settings = replace(defaults, **found)
    asks_global = found.get("layer") == GLOBAL
    if asks_global and settings.window is not None and _has_layer_picker(settings.preset):
        notes.append(f"{plain(f'window={settings.window}')} ignored: `layer=global` picks a global layer of "
                     f"{settings.preset}, which attends to the whole context; using {_OFF['window']}.")
        settings = replace(settings, window=None)

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
    if isinstance(settings.query_lens, tuple) and len(settings.query_lens) != settings.batch_size:
        notes.append(
            f"`new_tokens` ignored: it holds {count(len(settings.query_lens), 'value')} for batch size "
            f"{settings.batch_size}; using {defaults.query_lens!r} (give one value for all, or one per sequence)."
        )
        settings = replace(settings, query_lens=defaults.query_lens)
    if settings.context_mode == "uniform" and settings.lengths is not None:
        settings = replace(settings, lengths=None)
    settings = with_matching_preset(settings)
    if asks_global and settings.window is not None:  # a preset without a picker, or matched by the window
        why = (f"these heads and window are {settings.preset}'s sliding layer" if _has_layer_picker(settings.preset)
               else f"{settings.preset} has no layer picker (its layers are all alike)")
        notes.append(f"`layer=global` ignored: {why}; keeping the sliding window of "
                     f"{count(settings.window, 'token')}.")
        settings = replace(settings, layer=SLIDING)
    return settings, notes


def _has_layer_picker(preset: str) -> bool:
    """Whether the sidebar offers a layer picker for ``preset`` (its layers differ)."""
    return preset in MODEL_PRESETS and MODEL_PRESETS[preset].mixed


def _preset_defaults(params: Mapping[str, str | Sequence[str]], defaults: Settings) -> Settings:
    """``defaults`` with the heads and attention of the preset (and layer kind) that
    ``params`` names, for the fields the URL leaves out: ``preset=Gemma-2-9B`` alone
    is Gemma 2's heads and sliding-window layer, soft-cap and all. Unchanged when it
    names no preset (or Custom, or one that does not parse: its note comes later)."""
    fields = [f for f in SIDEBAR_FIELDS if f.key in ("preset", "layer")]
    found, _ = read_fields(fields, params, asdict(defaults))
    preset = MODEL_PRESETS.get(found.get("preset"))
    if preset is None:
        return defaults
    layer = found.get("layer", SLIDING) if preset.mixed else defaults.layer
    attention = preset.attention(layer if preset.mixed else next(iter(preset.layer_counts())))
    return replace(defaults, num_heads=preset.num_heads, num_kv_heads=preset.num_kv_heads,
                   head_dim=preset.head_dim, window=attention.window, soft_cap=attention.soft_cap,
                   sinks=attention.sinks, layer=layer)


def with_matching_preset(settings: Settings, keep_custom: bool = True) -> Settings:
    """``settings`` with a preset that matches its heads and attention: its own when it
    still does (:func:`~explorer.presets.preset_for`), else the first that does, else
    Custom; and for a preset whose layers differ, the layer kind of its attention.
    Custom stays Custom unless ``keep_custom`` is False (heads edited by hand to a
    preset's pick it back)."""
    if settings.preset == CUSTOM and keep_custom:
        return settings
    heads = (settings.num_heads, settings.num_kv_heads, settings.head_dim)
    name = preset_for(*heads, settings.attention(), prefer=settings.preset)
    preset = MODEL_PRESETS.get(name)
    layer = preset.kind_of(settings.attention()) if preset is not None and preset.mixed else settings.layer
    return replace(settings, preset=name, layer=layer)


def settings_to_query(settings: Settings) -> dict[str, str]:
    """URL query parameters that reproduce ``settings``
    (:func:`explorer.url_fields.write_fields`).

    Hand-edited ragged lengths are written as ``lens=3,17,...`` only when they
    differ from what the spread draws; on/off fields (``present=1``) only when on;
    the shared prefix and its groups (``prefix=128&prefix_groups=2``) only when a
    prefix is shared; attention options (``window=4096&soft_cap=50``) only when in
    force, the layer kind only for a preset whose layers differ, and the new tokens
    (``new_tokens=4``, per sequence ``new_tokens=1,4,2``) only when not 1.
    """
    values = asdict(settings)
    if settings.query_lens == 1:
        values.pop("query_lens")
    if settings.preset not in MODEL_PRESETS or not MODEL_PRESETS[settings.preset].mixed:
        values.pop("layer")
    if not settings.shared_prefix:
        for name in _PREFIX_FIELDS:
            values.pop(name)
    if settings.context_mode != "ragged" or settings.lengths is None:
        values.pop("lengths")
    else:
        try:
            generated = settings.generated_lengths()
        except ValueError:
            generated = None
        if tuple(settings.lengths) == generated:
            values.pop("lengths")
    return write_fields(SIDEBAR_FIELDS, values)
