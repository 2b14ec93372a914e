"""The traffic a serving simulation replays: request lengths, the pool and its load.

:class:`LengthDist` draws a request's prompt or output length, :class:`ServingConfig`
is a KV-cache pool with the traffic that uses it (checked by
:meth:`ServingConfig.validate`, whose messages name each field as an app labels
it), and :class:`Request` is one request's lengths and progress in
:class:`~explorer.serving.simulator.ServingSimulator`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from explorer.formatting import format_number
from explorer.serving.block_manager import blocks_for, check_int

LENGTH_KINDS: tuple[str, ...] = ("uniform", "long-tail")


@dataclass(frozen=True)
class LengthDist:
    """Distribution of a request's prompt or output length, in tokens.

    Parameters
    ----------
    kind : str
        ``"uniform"``: every integer in ``[low, high]`` equally likely.
        ``"long-tail"``: log-normal, clipped to ``[low, high]``: most requests are
        short and a few are long, as in chat traffic.
    low, high : int
        Inclusive range, ``1 <= low <= high``.
    median : float, optional
        Long-tail only: median before clipping. Default ``sqrt(low * high)``.
    sigma : float, optional
        Long-tail only: standard deviation of ``log(length)``. Default
        ``log(high / low) / 4``, so about 95% of draws fall inside the range
        before clipping.

    Examples
    --------
    >>> LengthDist("long-tail", 16, 2048).sample(np.random.default_rng(0), 3)
    """

    kind: str = "uniform"
    low: int = 16
    high: int = 256
    median: float | None = None
    sigma: float | None = None

    def validate(self, name: str = "length", *, low: str = "low", high: str = "high") -> "LengthDist":
        """Check the rules and return ``self``.

        ``name``, ``low`` and ``high`` are what the messages call the distribution
        and its bounds (an app passes its own labels).

        Raises
        ------
        ValueError
            Naming ``name`` and the broken rule.
        """
        if self.kind not in LENGTH_KINDS:
            raise ValueError(f"{name} kind must be one of {', '.join(LENGTH_KINDS)}; got {self.kind!r}")
        check_int(f"{name} {low}", self.low, 1)
        check_int(f"{name} {high}", self.high, 1)
        if self.low > self.high:
            raise ValueError(f"{name} needs {low} <= {high}; got {low}={format_number(self.low)}, {high}={format_number(self.high)}")
        for param in ("median", "sigma"):
            value = getattr(self, param)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} {param} must be a finite positive number; got {value!r}")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` lengths.

        Returns
        -------
        ndarray
            ``[n]`` int64, each in ``[low, high]``.
        """
        if self.kind == "uniform":
            return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)
        median = self.median if self.median is not None else math.sqrt(self.low * self.high)
        sigma = self.sigma if self.sigma is not None else math.log(self.high / self.low) / 4
        draws = np.exp(rng.normal(math.log(median), sigma, size=n))
        return np.clip(np.rint(draws), self.low, self.high).astype(np.int64)


@dataclass(frozen=True)
class ServingConfig:
    """A KV-cache pool and the traffic that uses it.

    Parameters
    ----------
    num_blocks : int
        Physical blocks in the pool.
    block_size : int
        Tokens per block.
    max_batch_size : int
        Most sequences running (decoding) at once.
    arrival_rate : float
        Mean new requests per step (Poisson), ``>= 0``.
    prompt_len, output_len : LengthDist
        Tokens a request brings, and tokens it generates before it finishes.
    seed : int
        Seeds the request stream: arrivals and lengths depend on it alone, never on
        the pool, so two configs that differ only in ``num_blocks``,
        ``block_size`` or ``max_batch_size`` see the same requests.
    system_prompt : int
        Tokens every request's prompt starts with, before its own ``prompt_len``
        tokens (0: none). Shared through the prefix cache.
    samples : int
        Sequences per request (n), forked from the first. Each sample draws its own
        output length; the first sample's is the request's, so the stream of
        arrivals and first lengths does not depend on ``samples``.
    window : int or None
        Sliding-window attention: each decode query reads the last ``window``
        positions of its sequence (None: the whole context).
    free_window : bool
        With a window: free each sequence's blocks before its window every step
        (:meth:`~explorer.serving.block_manager.BlockManager.free_out_of_window`).
        Without a window it has no effect.
    """

    num_blocks: int = 1024
    block_size: int = 16
    max_batch_size: int = 32
    arrival_rate: float = 0.2
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist("long-tail", 16, 2048))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("long-tail", 8, 1024))
    seed: int = 0
    system_prompt: int = 0
    samples: int = 1
    window: int | None = None
    free_window: bool = True

    @property
    def frees_window(self) -> bool:
        """Whether the simulator frees blocks that fall out of the window."""
        return self.window is not None and self.free_window

    @property
    def shares(self) -> bool:
        """Whether requests share blocks (a system prompt, or more than one sample)."""
        return self.system_prompt > 0 or self.samples > 1

    @property
    def max_request_blocks(self) -> int:
        """Blocks the longest possible request holds when it finishes.

        With sharing, the bound the admission test uses for a request alone in the
        pool: its prompt's blocks, plus for each sample its output's blocks and one
        copy-on-write block when there are several samples.
        """
        bs = self.block_size
        if not self.shares:
            return blocks_for(self.prompt_len.high + self.output_len.high, bs)
        growth = blocks_for(self.output_len.high, bs) + (1 if self.samples > 1 else 0)
        return blocks_for(self.system_prompt + self.prompt_len.high, bs) + self.samples * growth

    def validate(self, labels: Mapping[str, str] | None = None) -> "ServingConfig":
        """Check every rule and return ``self``.

        Parameters
        ----------
        labels : mapping, optional
            What the messages call each field (``"num_blocks"``, ``"block_size"``,
            ``"max_batch_size"``, ``"arrival_rate"``, ``"seed"``, ``"prompt_len"``,
            ``"output_len"``, ``"system_prompt"``, ``"samples"``, ``"window"``) and the bounds of a length (``"low"``, ``"high"``);
            by default their names here. An app passes the labels of its controls.

        Raises
        ------
        ValueError
            Naming the field and the rule it breaks; in particular the pool must
            hold the longest possible request on its own, else that request could
            never be admitted and would block the FIFO queue forever.
        """
        labels = labels or {}

        def name(key: str) -> str:
            return labels.get(key, key)

        check_int(name("num_blocks"), self.num_blocks, 1)
        check_int(name("block_size"), self.block_size, 1)
        check_int(name("max_batch_size"), self.max_batch_size, 1)
        check_int(name("seed"), self.seed, 0)
        check_int(name("system_prompt"), self.system_prompt, 0)
        check_int(name("samples"), self.samples, 1)
        if self.window is not None:
            check_int(name("window"), self.window, 1)
        if self.samples > self.max_batch_size:
            raise ValueError(
                f"{name('samples')} must be at most {name('max_batch_size')}: a request's samples run together; "
                f"got {name('samples')} = {format_number(self.samples)}, {name('max_batch_size')} = {format_number(self.max_batch_size)}"
            )
        rate = self.arrival_rate
        is_number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        if not (is_number and math.isfinite(rate) and rate >= 0):
            raise ValueError(f"{name('arrival_rate')} must be a finite number >= 0; got {rate!r}")
        bounds = dict(low=name("low"), high=name("high"))
        self.prompt_len.validate(name("prompt_len"), **bounds)
        self.output_len.validate(name("output_len"), **bounds)
        if self.max_request_blocks > self.num_blocks and self.shares:
            raise ValueError(
                f"the pool must hold the longest request: {name('system_prompt')} + {name('prompt_len')} "
                f"{name('high')} = {format_number(self.system_prompt + self.prompt_len.high)} tokens, then "
                f"{format_number(self.samples)} x ({name('output_len')} {name('high')} = {format_number(self.output_len.high)} tokens"
                + (" + a copy-on-write block" if self.samples > 1 else "") + f") need up to "
                f"{format_number(self.max_request_blocks)} blocks ({name('block_size')} = {format_number(self.block_size)}), but "
                f"{name('num_blocks')} = {format_number(self.num_blocks)}"
            )
        if self.max_request_blocks > self.num_blocks:
            raise ValueError(
                f"the pool must hold the longest request: {name('prompt_len')} {name('high')} + "
                f"{name('output_len')} {name('high')} = {format_number(self.prompt_len.high + self.output_len.high)} tokens "
                f"need {format_number(self.max_request_blocks)} blocks ({name('block_size')} = {format_number(self.block_size)}), but "
                f"{name('num_blocks')} = {format_number(self.num_blocks)}"
            )
        return self


@dataclass
class Request:
    """One request's lengths and progress.

    ``context_len = prompt_len + generated`` tokens are in the KV cache while it
    runs; it finishes when ``generated == output_len``.
    """

    seq_id: int
    arrival_step: int
    prompt_len: int
    output_len: int
    generated: int = 0
    admitted_step: int | None = None
    finished_step: int | None = None
    #: With samples: the request's other samples, admitted with it (forked from it).
    siblings: list["Request"] = field(default_factory=list)

    @property
    def context_len(self) -> int:
        return self.prompt_len + self.generated

    @property
    def final_len(self) -> int:
        return self.prompt_len + self.output_len
