"""Model presets: the head sizes and each layer's attention of real models.

A preset (:class:`ModelPreset`) gives a model's query heads, KV heads and head
dim, its number of layers, and the attention its layers use: the whole context,
a **sliding window** of the last ``window`` positions (on every layer, or on all
but every ``global_every``-th), a logit **soft-cap** and **attention sinks**. A
model whose layers differ (Gemma 2 and 3, gpt-oss: sliding-window layers
between global ones) has two layer kinds, :data:`SLIDING` and :data:`GLOBAL`;
the sidebar's layer picker chooses which one a decode step is of.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.formatting import count, format_number

#: The two kinds of layer of a model whose layers differ.
SLIDING, GLOBAL = "sliding", "global"
LAYER_KINDS: tuple[str, ...] = (SLIDING, GLOBAL)


@dataclass(frozen=True)
class Attention:
    """One layer's attention options, as :class:`~paged_attention.config.DecodeConfig`
    takes them: ``window`` (tokens, None: the whole context), ``soft_cap`` (None:
    none) and ``sinks`` (one sink logit per query head)."""

    window: int | None = None
    soft_cap: float | None = None
    sinks: bool = False


@dataclass(frozen=True)
class ModelPreset:
    """One model's attention geometry.

    ``window`` is the sliding window of its sliding layers (None: every layer
    attends to its whole context); with a window, layer ``i`` (from 0) is global
    when ``(i + 1) % global_every == 0``, and every layer slides when
    ``global_every`` is None. ``soft_cap`` and ``sinks`` apply to every layer.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_layers: int
    window: int | None = None
    global_every: int | None = None
    soft_cap: float | None = None
    sinks: bool = False

    @property
    def heads(self) -> tuple[int, int, int]:
        """``(num_heads, num_kv_heads, head_dim)``."""
        return (self.num_heads, self.num_kv_heads, self.head_dim)

    def layer_kind(self, layer: int) -> str:
        """:data:`SLIDING` or :data:`GLOBAL`: the kind of layer ``layer`` (from 0)."""
        if self.window is None or (self.global_every is not None and (layer + 1) % self.global_every == 0):
            return GLOBAL
        return SLIDING

    def layer_counts(self) -> dict[str, int]:
        """Layers of each kind the model has (kinds it has none of left out), sliding first."""
        kinds = [self.layer_kind(i) for i in range(self.num_layers)]
        return {kind: kinds.count(kind) for kind in LAYER_KINDS if kind in kinds}

    @property
    def mixed(self) -> bool:
        """True when its layers differ (sliding-window layers between global ones)."""
        return len(self.layer_counts()) > 1

    def attention(self, kind: str = SLIDING) -> Attention:
        """The attention of its layers of ``kind`` (a model with one kind has it on every layer)."""
        window = self.window if kind == SLIDING else None
        return Attention(window, self.soft_cap, self.sinks)

    def kind_of(self, attention: Attention) -> str | None:
        """The kind of its layers whose attention is ``attention``, or None."""
        return next((kind for kind in self.layer_counts() if self.attention(kind) == attention), None)

    def describe(self) -> str:
        """Its layers in words: ``"42 layers: 21 sliding (window 4,096), 21 global; soft-cap 50 on every
        layer"``, ``"32 layers, all attending to the whole context"``."""
        counts = self.layer_counts()
        if self.mixed:
            text = f"{count(self.num_layers, 'layer')}: " + ", ".join(
                f"{n} {layer_label(kind, self.window)}" for kind, n in counts.items())
        elif SLIDING in counts:
            text = f"{count(self.num_layers, 'layer')}, all {layer_label(SLIDING, self.window)}"
        else:
            text = f"{count(self.num_layers, 'layer')}, all attending to the whole context"
        extras = ([f"soft-cap {format_number(self.soft_cap)}"] if self.soft_cap is not None else []) + (
            ["attention sinks"] if self.sinks else [])
        return text + (f"; {' and '.join(extras)} on every layer" if extras else "")


def layer_label(kind: str, window: int | None) -> str:
    """How the layer picker names a kind: ``"sliding (window 4,096)"``, ``"global"``."""
    return f"sliding (window {format_number(window)})" if kind == SLIDING else "global"


#: The presets, by name, with the numbers of each model's published configuration.
MODEL_PRESETS: dict[str, ModelPreset] = {
    "Llama-3.1-8B": ModelPreset(32, 8, 128, 32),
    "Llama-3-70B": ModelPreset(64, 8, 128, 80),
    "Mistral-7B-v0.1": ModelPreset(32, 8, 128, 32, window=4096),
    "Gemma-2-9B": ModelPreset(16, 8, 256, 42, window=4096, global_every=2, soft_cap=50.0),
    "Gemma-3-12B": ModelPreset(16, 8, 256, 48, window=1024, global_every=6),
    "gpt-oss-20b": ModelPreset(64, 8, 64, 24, window=128, global_every=2, sinks=True),
    "Qwen2.5-7B": ModelPreset(28, 4, 128, 28),
    "Qwen3-8B": ModelPreset(32, 8, 128, 36),
    "Qwen3-0.6B": ModelPreset(16, 8, 128, 28),
    "Phi-3-mini": ModelPreset(32, 32, 96, 32),
    "GPT-2": ModelPreset(12, 12, 64, 12),
}
#: Names older URLs used, and the preset each now means.
RENAMED: dict[str, str] = {"Llama-3-8B": "Llama-3.1-8B", "Mistral-7B": "Mistral-7B-v0.1"}
CUSTOM = "Custom"
PRESET_NAMES: tuple[str, ...] = (*MODEL_PRESETS, CUSTOM)


def preset_for(num_heads: int, num_kv_heads: int, head_dim: int, attention: Attention = Attention(),
               prefer: str | None = None) -> str:
    """The preset with these head sizes one of whose layer kinds has ``attention``:
    ``prefer`` when it matches, else the first that does, else :data:`CUSTOM`."""
    def matches(name: str | None) -> bool:
        preset = MODEL_PRESETS.get(name)
        return preset is not None and preset.heads == (num_heads, num_kv_heads, head_dim) and (
            preset.kind_of(attention) is not None)

    if matches(prefer):
        return prefer
    return next((name for name in MODEL_PRESETS if matches(name)), CUSTOM)
