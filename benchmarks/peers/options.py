"""The attention options ``benchmarks.decode_peers`` runs with (``--window``,
``--soft-cap``, ``--sinks``, and the ``options`` set): a sliding window, a logit
soft cap and per-head sink logits, as our library takes them (keywords
``window``, ``soft_cap``, ``sinks`` of ``paged_attention.prepare`` and of
``reference_decode``), and how each peer is told of them or skips them.

The definitions every implementation and the float64 reference share, with
``s = scale * q . k`` the scaled logits of one query head over its context of
``n`` tokens:

* ``window`` W: the query (at position ``n - 1``) sees positions
  ``max(0, n - W) .. n - 1``, the last W tokens;
* ``soft_cap`` C: ``s <- C * tanh(s / C)`` before the softmax;
* ``sinks``: a float32 logit per query head in the softmax denominator,
  ``p_i = exp(s_i) / (exp(sink_h) + sum_j exp(s_j))``; here drawn from a standard
  normal with a fixed seed (:func:`sink_logits`), the same in every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

#: The seed of the sink logits, so every run and every implementation sees the same ones.
SINK_SEED = 1234


@dataclass(frozen=True)
class AttentionOptions:
    """The options of one pass over the configurations: ``window`` (tokens, None
    for the whole context), ``soft_cap`` (None for none), ``sinks`` (whether to
    draw sink logits)."""

    window: int | None = None
    soft_cap: float | None = None
    sinks: bool = False

    def __post_init__(self):
        if self.window is not None and (isinstance(self.window, bool) or int(self.window) != self.window
                                        or self.window < 1):
            raise ValueError(f"window must be a whole number of tokens, at least 1; got {self.window!r}")
        if self.soft_cap is not None and not self.soft_cap > 0:
            raise ValueError(f"soft_cap must be positive; got {self.soft_cap!r}")

    @property
    def any(self) -> bool:
        """True when any option is set (a plain decode otherwise)."""
        return self.window is not None or self.soft_cap is not None or self.sinks

    def text(self) -> str:
        """How progress lines and summaries name them: ``"window 1024, soft cap 50,
        sinks"``, or ``""`` for none."""
        parts = []
        if self.window is not None:
            parts.append(f"window {self.window}")
        if self.soft_cap is not None:
            parts.append(f"soft cap {self.soft_cap:g}")
        if self.sinks:
            parts.append("sinks")
        return ", ".join(parts)

    def row_fields(self) -> dict:
        """The ``window``, ``soft_cap`` and ``sinks`` columns of a result row."""
        return {"window": self.window, "soft_cap": self.soft_cap, "sinks": self.sinks}

    def kwargs(self, num_heads: int, device) -> dict:
        """The keywords of ``prepare`` and ``reference_decode``: only those set
        (none for a plain decode, so a library without them still runs it);
        ``sinks`` a float32 ``[num_heads]`` tensor on ``device``
        (:func:`sink_logits`)."""
        out = {}
        if self.window is not None:
            out["window"] = int(self.window)
        if self.soft_cap is not None:
            out["soft_cap"] = float(self.soft_cap)
        if self.sinks:
            out["sinks"] = sink_logits(num_heads, device)
        return out


def sink_logits(num_heads: int, device) -> torch.Tensor:
    """Sink logits, float32 ``[num_heads]`` on ``device``: standard normal draws
    from :data:`SINK_SEED` (on the CPU, so every device gets the same values)."""
    generator = torch.Generator().manual_seed(SINK_SEED)
    return torch.randn(num_heads, generator=generator, dtype=torch.float32).to(device)


#: The passes of ``--set options``: the classic configurations plainly, then with
#: each option alone, so one run holds the cost of each.
OPTION_PASSES: tuple[AttentionOptions, ...] = (
    AttentionOptions(),
    AttentionOptions(window=4096),
    AttentionOptions(window=1024),
    AttentionOptions(window=128),
    AttentionOptions(soft_cap=50.0),
    AttentionOptions(sinks=True),
)


def unsupported(attn: Mapping, who: str, *, window: bool, soft_cap: bool, sinks: bool) -> str | None:
    """Why ``who`` cannot run with the attention keywords ``attn``
    (:meth:`AttentionOptions.kwargs`) as a row's skip note, or None when it takes
    each one given; ``window``, ``soft_cap`` and ``sinks`` say which it takes."""
    missing = [what for key, what, takes in (("window", "sliding window", window),
                                             ("soft_cap", "logit soft cap", soft_cap),
                                             ("sinks", "attention sinks", sinks))
               if key in attn and not takes]
    if not missing:
        return None
    return f"{who} takes no {' and no '.join(missing)}"
