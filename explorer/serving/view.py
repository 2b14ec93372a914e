"""The Serving simulation page as plain data: its controls and their defaults,
the step it shows, its cards and captions, the animation's frames and the block
sizes it times. No Streamlit and no Plotly: the page draws what this returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from explorer import formatting, limits
from explorer.cards import Card
from explorer.bench import readouts
from explorer.cache.sampling import pool_grid_shape
from explorer.limits import MAX_ANIMATION_VALUES
from explorer.marks import PARTLY_FILLED_MARK, POOL_CHANGE_MARKS, SHARED_MARK
from explorer.serving.history import ServingHistory, StepRecord
from explorer.serving.snapshot import PoolChanges, Snapshot
from explorer.serving.traffic import LengthDist, ServingConfig
from paged_attention import DecodeConfig

#: Steps the block-size trade-off replays the request stream for.
TRADEOFF_STEPS = 200
#: Block sizes whose kernel latency is measured on the CPU (the interpreter is slow).
CPU_TRADEOFF_SIZES = (4, 16, 64)

#: The page's control labels; its error messages name the fields by them.
LABELS: dict[str, str] = {
    "num_blocks": "Pool (blocks)", "block_size": "Block size", "max_batch_size": "Max batch",
    "arrival_rate": "Arrivals per step", "seed": "Seed", "steps": "Steps", "prompt_len": "Prompt length",
    "output_len": "Output length", "low": "shortest", "high": "longest",
    "system_prompt": "Common system prompt (tokens)", "samples": "Samples per request",
    "window": "the sidebar's window",
}
#: What this page calls each of :func:`explorer.limits.cpu_work_levers`.
LEVERS: dict[str, str] = {
    "batch": f"**{LABELS['max_batch_size']}**", "query heads": "the sidebar's query heads",
    "KV heads": "the sidebar's KV heads", "context": "the longest prompt or output",
}


def page_defaults(config: DecodeConfig) -> dict[str, Any]:
    """Widget key -> default value of each of the page's controls, for the
    sidebar's ``config``.

    A GPU gets a pool under pressure (a queue forms at times); the CPU one small
    enough that the interpreted kernel times any step in seconds: the max batch is
    cut until a full batch of the longest requests, with the sidebar's heads, fits
    the CPU cap, and the arrival rate with it, so that the queue stays as short as
    at the nominal batch (at 0.2 requests a step, 4 slots left 9 waiting at the
    end and 1 slot 38). No sharing: the plain block manager.
    """
    cpu = config.device == "cpu"
    defaults: dict[str, Any] = {
        "sv_num_blocks": 64 if cpu else 1024, "sv_block_size": 8 if cpu else 16, "sv_max_batch": 6 if cpu else 32,
        "sv_rate": 0.2 if cpu else 0.28, "sv_prompt_kind": "long-tail", "sv_prompt_lo": 4 if cpu else 16,
        "sv_prompt_hi": 96 if cpu else 2048, "sv_output_kind": "long-tail", "sv_output_lo": 4 if cpu else 16,
        "sv_output_hi": 48 if cpu else 512, "sv_seed": 0, "sv_steps": 150 if cpu else 400,
        "sv_system_prompt": 0, "sv_samples": 1, "sv_pool_colour": "sequence", "sv_free_window": True,
    }
    if cpu:
        nominal = defaults["sv_max_batch"]
        defaults["sv_max_batch"] = limits.largest_cpu_batch(
            config, defaults["sv_prompt_hi"] + defaults["sv_output_hi"], nominal)
        defaults["sv_rate"] = max(0.01, round(defaults["sv_rate"] * defaults["sv_max_batch"] / nominal, 2))
    return defaults


@dataclass(frozen=True)
class Controls:
    """The page's simulation controls, read from its widgets' values.

    ``prompt`` and ``output`` are ``(kind, shortest, longest)``.
    """

    num_blocks: int
    block_size: int
    max_batch: int
    rate: float
    prompt: tuple[str, int, int]
    output: tuple[str, int, int]
    seed: int
    steps: int
    system_prompt: int
    samples: int
    window: int | None = None
    free_window: bool = True

    @classmethod
    def from_state(cls, state: Mapping[str, Any], window: int | None = None) -> Controls:
        """From the widget values (``sv_*`` keys of ``state``) and the sidebar's ``window``."""
        return cls(window=window, free_window=bool(state.get("sv_free_window", True)),
            num_blocks=int(state["sv_num_blocks"]), block_size=int(state["sv_block_size"]),
            max_batch=int(state["sv_max_batch"]), rate=float(state["sv_rate"]),
            prompt=(state["sv_prompt_kind"], int(state["sv_prompt_lo"]), int(state["sv_prompt_hi"])),
            output=(state["sv_output_kind"], int(state["sv_output_lo"]), int(state["sv_output_hi"])),
            seed=int(state["sv_seed"]), steps=int(state["sv_steps"]),
            system_prompt=int(state["sv_system_prompt"]), samples=int(state["sv_samples"]),
        )

    @property
    def traffic(self) -> tuple:
        """``(max_batch, rate, prompt, output, seed)``: the request stream and its batch."""
        return self.max_batch, self.rate, self.prompt, self.output, self.seed

    @property
    def sharing(self) -> bool:
        """Whether the block manager shares (a system prompt, or several samples)."""
        return self.system_prompt > 0 or self.samples > 1

    @property
    def simulation(self) -> tuple:
        """The arguments of :func:`ui.data.serving_history` (window freeing as set)."""
        return (self.num_blocks, self.block_size, *self.traffic, self.steps, self.system_prompt, self.samples,
                self.window, self.free_window)

    @property
    def pool_tokens(self) -> int:
        return self.num_blocks * self.block_size


def serving_config(
    num_blocks: int, block_size: int, max_batch_size: int, arrival_rate: float,
    prompt: tuple[str, int, int], output: tuple[str, int, int], seed: int,
    system_prompt: int = 0, samples: int = 1, window: int | None = None, free_window: bool = True,
) -> ServingConfig:
    """The validated :class:`~explorer.serving.traffic.ServingConfig` of the page's controls.

    Raises
    ------
    ValueError
        Naming the rule the controls break, and the controls by their :data:`LABELS`.
    """
    return ServingConfig(
        num_blocks=num_blocks, block_size=block_size, max_batch_size=max_batch_size,
        arrival_rate=float(arrival_rate), prompt_len=LengthDist(*prompt), output_len=LengthDist(*output), seed=seed,
        system_prompt=system_prompt, samples=samples, window=window, free_window=free_window,
    ).validate(LABELS)


# -- the step ---------------------------------------------------------------------

def held_step(slider: int | None, held: tuple[int, int] | None, steps: int, busiest: int
              ) -> tuple[int, tuple[int, int] | None]:
    """The step the slider shows, and what the page keeps to bring a choice back.

    Fewer steps than the chosen one show the last; the chosen step is kept as
    ``held = (chosen, shown)`` and comes back when Steps grows again, unless the
    slider was moved meanwhile (it no longer shows ``shown``): then that is the
    choice.

    Parameters
    ----------
    slider : int or None
        The slider's value; None on the page's first run (it then starts at
        ``busiest``, the pool under the most pressure).
    held : tuple or None
        What the previous run returned.
    steps : int
        Steps simulated (the slider's range is ``0 .. steps - 1``).

    Returns
    -------
    (shown, held) : (int, tuple or None)
    """
    current = busiest if slider is None else slider
    chosen = held[0] if held and current == held[1] else current
    shown = min(chosen, steps - 1)
    return shown, ((chosen, shown) if shown != chosen else None)


def change_counts(changes: PoolChanges, sharing: bool) -> str:
    """The step's pool changes in the words of the pool's marks, counted as it
    marks them (:meth:`~explorer.serving.snapshot.PoolChanges.marks`): freed,
    recycled, and with sharing the copies and the blocks revived from the cache
    (those only when some were)."""
    marks = changes.marks()
    parts = [f"{formatting.format_number(len(marks['freed']))} freed",
             f"{formatting.format_number(len(marks['recycled']))} recycled"]
    if sharing:
        parts.append(f"{formatting.format_number(len(marks['copied']))} copied")
        if marks["revived"]:
            parts.append(f"{formatting.format_number(len(marks['revived']))} revived")
    return " · ".join(parts)


#: The cards that count physical blocks and their slots: every count on the page says
#: whether it is of physical blocks or of logical block-table entries (the Block table
#: page's "Blocks used (physical)"), in a label short enough not to be cut at 1280 px
#: ("Blocks in use (physi…" was).
BLOCKS_IN_USE, WASTED_SLOTS = "Physical blocks", "Wasted slots"


def step_cards(history: ServingHistory, step: int, max_batch: int, sharing: bool) -> list[Card]:
    """The five cards over the pool at ``step``: running, waiting (and finished),
    blocks in use, wasted slots, blocks taken. Values stay short (a number) and
    deltas a few words, so that five fit side by side at 1280 px (six cut the
    last delta to "0 freed · 2 recycl…"); the detail is in the help. With
    sharing, blocks taken counts physical blocks against the logical ones the
    tables gained (:meth:`~explorer.serving.history.ServingHistory.logical_blocks_added`)."""
    record, row, changes = history.records[step], history.metrics.iloc[step], history.changes(step)
    num = formatting.format_number
    num_blocks, in_use = history.config.num_blocks, int(row["blocks_in_use"])
    taken_help = (f"physical blocks taken from the free list during step {step} for new tokens (copy-on-write "
                  f"copies included), counted as the pool marks them: {change_counts(changes, sharing)}. "
                  "Recycled = taken again after an earlier sequence released it; freed = returned to the free "
                  "list (its last reference gone)")
    if sharing:
        logical = history.logical_blocks_added(step)
        taken = Card("Blocks taken", num(len(changes.taken)), f"physical ({num(logical)} logical)",
                     taken_help + f". The block tables gained {num(logical)} logical blocks: a prefix-cache hit "
                     "or a fork points new entries to blocks in use, and a copy-on-write copy takes a physical "
                     "block for an entry the table had; copied = a copy-on-write copy (a recycled copy counts "
                     "as copied); revived = a cached block a prefix-cache hit took back from the free list.")
    else:
        taken = Card("Blocks taken", num(len(changes.taken)), change_counts(changes, sharing), taken_help + ".")
    return [
        Card("Running", num(record.num_running), f"of {num(max_batch)} at most",
             f"sequences decoding at this step; at most {num(max_batch)} ({LABELS['max_batch_size']})"),
        Card("Waiting", num(int(row["waiting"])), f"{num(int(row['finished']))} finished so far",
             "requests queued for a batch slot or for blocks; finished: sequences done by this step"),
        Card(BLOCKS_IN_USE, num(in_use), f"of {num(num_blocks)} · {formatting.format_percent(in_use / num_blocks)}",
             f"physical blocks in use, holding some sequence's tokens (a shared block once), of the "
             f"{num(num_blocks)} in the pool"),
        Card(WASTED_SLOTS, num(int(row["wasted_slots"])),
             f"{formatting.format_percent(float(row['wasted_fraction']))} of physical",
             "allocated but unfilled slots in the physical blocks in use (the share: of all their slots): each sequence's last block, a shared "
             "block once (internal fragmentation)"),
        taken,
    ]


#: The reference-count levels the Serving page's pool and tables colour by: the first
#: count of each (:data:`explorer.cache.sharing_figures.REF_LEVELS`, which tests check
#: it equals; this module draws nothing).
REF_LEVELS = (1, 2, 3, 5)


def ref_levels(max_holders: int | None = None) -> tuple[tuple[int, ...], list[str]]:
    """The reference-count levels that can occur when at most ``max_holders``
    sequences run (the max batch), and their legend names, the last one closed at
    ``max_holders``: a max batch of 4 gives ``(1, 2, 3)``, ``["1 sequence",
    "2 sequences", "3–4 sequences"]``; 32 gives ``[..., "5–32 sequences"]``; None
    (no bound) ``[..., "5+ sequences"]``. The pool's legend, the tables' legend and
    both captions list these, so that they agree and name no count that cannot occur."""
    levels = tuple(lo for lo in REF_LEVELS if max_holders is None or lo <= max_holders)
    names = []
    for i, lo in enumerate(levels):
        hi = levels[i + 1] - 1 if i + 1 < len(levels) else max_holders
        span = f"{lo}+" if hi is None else str(lo) if hi == lo else f"{lo}–{hi}"
        names.append(f"{span} sequence" + ("" if span == "1" else "s"))
    return levels, names


def pool_caption(colour_by: str, sharing: bool, num_blocks: int, max_holders: int | None = None) -> str:
    """What the pool's colours and marks mean, under the pool (the reference-count
    levels of :func:`ref_levels` of ``max_holders``)."""
    level_words = ", ".join(ref_levels(max_holders)[1])
    per_cell = pool_grid_shape(num_blocks)[2]
    if per_cell > 1:  # too many blocks for one cell each: the figure shades cells and draws no marks
        return (f"{formatting.count(num_blocks, 'block')} are too many to draw one by one: each cell stands for "
                f"{formatting.count(per_cell, 'block')}, "
                + ("shaded by the share of them in use" if colour_by == "sequence" else
                   "coloured by the most sequences holding one of them")
                + ", and the per-block marks (taken, recycled, freed) are left out. A smaller pool shows every block.")
    mark = {key: m.words for key, m in POOL_CHANGE_MARKS.items()}  # as the pool draws them
    colours = ("Colour = the sequence owning the block (by seq_id; a shared block: its lowest), grey = free, "
               f"a {PARTLY_FILLED_MARK.words} = a partly filled last block. " if colour_by == "sequence" else
               f"Colour = how many running sequences hold the block (its reference count: {level_words}), "
               "grey = free. ")
    return (
        colours + f"Marks: what left the free list or went back to it during this step: a {mark['taken']} = "
        f"taken for new tokens, a {mark['recycled']} = taken again after an earlier sequence released it (recycled), "
        + (f"a {mark['copied']} = a copy-on-write copy (a new block: a sample's first write into a shared partly "
           f"filled block), a {mark['revived']} = revived: a cached block that a prefix-cache hit took back from "
           "the free list, " if sharing else "")
        + f"a {mark['freed']} = freed (its last reference gone). "
        + ("A block that only gains or loses a reference (a prefix-cache hit on a block in use, a fork, a "
           "sample finishing while others still hold it) is not marked: colour by reference count to see it. "
           if sharing else "")
        + "Freed blocks go to the back of the free list, so new sequences scatter over the pool: the block "
        "table absorbs it."
    )


def table_caption(sharing: bool, colour_by: str = "sequence", max_holders: int | None = None) -> str:
    """What the running sequences' block tables show, under them, in the pool's
    colouring ``colour_by`` (the tables take it too; the levels of :func:`ref_levels`)."""
    by_sequence = colour_by == "sequence"
    level_words = ", ".join(ref_levels(max_holders)[1])
    return ("One row per running sequence (its seq_id): the physical block behind each logical block, "
            + ("in the sequence's colour in the pool. " if by_sequence else
               f"coloured as in the pool by how many running sequences hold it ({level_words}). ")
            + (f"A {SHARED_MARK.words} marks a block more than one running sequence holds"
               + ("; the pool colours a shared block by the lowest seq_id holding it. " if by_sequence else ". ")
               if sharing else "")
            + "This table and the lengths are what the decode kernel receives at this step.")


def sharing_summary(history: ServingHistory, step: int) -> str:
    """Markdown: what sharing saved at ``step``, and the copies and prefix-cache
    hits up to it."""
    config, row = history.config, history.metrics.iloc[step]
    num = formatting.format_number
    in_use, unshared = int(row["blocks_in_use"]), int(row["blocks_unshared"])
    saved = unshared - in_use
    queries, hits = int(row["prefix_queries"]), int(row["prefix_hits"])
    rate = formatting.format_percent(hits / queries) if queries else "no full prompt block looked up yet"
    share = f", {formatting.format_percent(saved / unshared)}" if unshared else ""
    found = f" ({num(hits)} of {formatting.count(queries, 'full prompt block')} found cached)." if queries else "."
    copies = formatting.count(int(row["cow_copies"]), "copy-on-write copy", "copy-on-write copies")
    return (
        f"Requests of **{formatting.count(config.samples, 'sample')}** whose prompts start with the same "
        f"**{formatting.count(config.system_prompt, 'token')}**. At step {step} the running sequences' block "
        f"tables list **{formatting.count(unshared, 'logical block')}**, held in "
        f"**{formatting.count(in_use, 'physical block')}** with sharing; without, they would take "
        f"{formatting.count(unshared, 'physical block')} (**{num(saved)} physical saved**{share}). Up to this "
        f"step: **{copies}** (a sample's first write into a shared partly filled block), and a **prefix-cache "
        f"hit rate of {rate}**{found}"
    )


def animation_frames(steps: int, num_blocks: int, max_frames: int) -> int:
    """Most frames the pool's animation may send: at most ``max_frames``, the
    run's steps, and :data:`MAX_ANIMATION_VALUES` cells in all (at least 2)."""
    return max(2, min(steps, max_frames, MAX_ANIMATION_VALUES // num_blocks))


def animation_caption(frames: list[int]) -> str:
    """How many frames the animation has, and how far apart."""
    spacing = f" (every {frames[1] - frames[0]} steps, and the last)" if len(frames) > 2 else ""
    return f"{formatting.count(len(frames), 'frame')}{spacing}; press Play (the animation runs in the browser)."


# -- the kernel on a step ------------------------------------------------------------

def latency_row(record: StepRecord, median_ms: float, gbps: float, passed: bool) -> dict[str, Any]:
    """One timed step, as the page keeps it (numbers, for the table and the card)."""
    return {"step": record.step, "running": record.num_running, "tokens": int(record.context_lens.sum()),
            "median_ms": median_ms, "gbps": gbps, "correct": "yes" if passed else "NO"}


def page_duration_unit(measured: Mapping[int, Mapping[str, Any]], tradeoff_ms: Mapping[int, float] | None = None) -> str:
    """The one unit the page writes Triton's latencies in (its step card, its table
    and the block-size chart alike), from every latency it shows
    (:func:`~explorer.formatting.duration_unit`): the timed steps' and the block sizes'."""
    return formatting.duration_unit([r["median_ms"] for r in measured.values()] + list((tradeoff_ms or {}).values()))


def latency_card(row: Mapping[str, Any], unit: str | None = None) -> Card:
    """The card of one timed step, its duration in ``unit`` (:func:`page_duration_unit`;
    by default the one that keeps it short)."""
    return Card(f"Triton decode at step {row['step']}", formatting.format_duration(row["median_ms"], unit),
                f"{formatting.format_gbps(row['gbps'])} GB/s · {formatting.count(row['running'], 'sequence')}, "
                f"{formatting.count(row['tokens'], 'token')}")


def latency_table(rows: Mapping[int, Mapping[str, Any]], unit: str | None = None) -> pd.DataFrame:
    """The timed steps by step, their numbers written as the cards write them
    (one duration unit for the column, ``unit`` or the rows' own, three
    significant figures; the bandwidth's column headed "GB/s" as the card writes it)."""
    frame = pd.DataFrame(sorted(rows.values(), key=lambda r: r["step"]))
    unit = unit or formatting.duration_unit(frame["median_ms"].tolist())
    return frame.assign(
        median_ms=[formatting.duration_number(ms, unit) for ms in frame["median_ms"]],
        gbps=[formatting.format_gbps(g) for g in frame["gbps"]],
    ).rename(columns={"median_ms": f"median ({unit})", "gbps": "GB/s"})


def step_timing_caption(config: DecodeConfig, warmup: int, iters: int) -> str:
    """Beside the button that times a step: what is timed."""
    return (f"{readouts.config_summary(config)} · warm-up {warmup}, {formatting.count(iters, 'timed call')} · heads, "
            "head dim, dtype and device from the sidebar; random K/V in this step's blocks")


# -- block size trade-off ---------------------------------------------------------------

@dataclass(frozen=True)
class TradeoffTiming:
    """What the block-size trade-off times: one batch (the running sequences of
    one busiest step) laid out in blocks of each candidate size, so that block
    size is all that differs.

    Attributes
    ----------
    candidates : tuple of int
        Block sizes that may be timed (on the CPU only :data:`CPU_TRADEOFF_SIZES`).
    source : int or None
        The block size whose busiest step gives the batch: the page's own if it was
        simulated, else the first candidate.
    batch : Snapshot or None
        That step (None when nothing runs at it).
    plans : dict
        ``block_size ->`` :class:`~explorer.limits.RunPlan` of each size to time.
    refused : dict
        ``block_size ->`` decode configuration over the CPU cap.
    configs : dict
        ``block_size ->`` decode configuration, for every planned or refused size.
    """

    candidates: tuple[int, ...]
    source: int | None
    batch: Snapshot | None
    plans: dict[int, limits.RunPlan]
    refused: dict[int, DecodeConfig]
    configs: dict[int, DecodeConfig]

    def caption(self, cpu: bool) -> str:
        """Beside the button: which batch is timed, and on the CPU which sizes."""
        b = self.batch
        same = (f"the {formatting.count(b.num_running, 'running sequence')} "
                f"({formatting.count(b.tokens_stored, 'token')}) of block size {self.source}'s busiest step"
                if b is not None else "one busiest step")
        return (f"Times the Triton kernel on one batch for every block size: {same}, laid out in blocks of each "
                "size (same tokens per sequence, so block size is all that differs), with the sidebar's heads, "
                "head dim, dtype and device."
                + (f" On the CPU only block sizes {', '.join(map(str, self.candidates))} are candidates (the "
                   "interpreter is slow)." if cpu else ""))

    def refusal(self) -> str | None:
        """The warning on the sizes over the CPU cap, naming what to lower; None if none."""
        if not self.refused:
            return None
        (size, first), n = next(iter(self.refused.items())), len(self.refused)
        return (
            f"{'Not timed' if self.plans else 'Nothing to time'}: the batch at block size{'s' if n > 1 else ''} "
            f"{', '.join(map(str, self.refused))} is over the CPU cap ({limits.CPU_WORK_RULE}; block size "
            f"{size}: {limits.cpu_work_detail(first)}). Lower "
            f"{formatting.join_or([LEVERS[lever] for lever in limits.cpu_work_levers(first)])}."
        )


def plan_tradeoff(busiest: Mapping[int, StepRecord], sizes: list[int], block_size: int, cpu: bool,
                  heads: Mapping[str, Any], warmup: int, iters: int) -> TradeoffTiming:
    """Plan the timing of every candidate block size before the button is drawn,
    so that it times what it says (:func:`explorer.limits.plan_run` on each).

    Parameters
    ----------
    busiest : mapping
        ``block_size ->`` its busiest step, for every simulated size ``sizes``.
    block_size : int
        The page's block size.
    heads : mapping
        ``num_heads``, ``num_kv_heads``, ``head_dim``, ``dtype``, ``device``,
        ``seed`` of the decode configuration (the sidebar's).
    """
    candidates = tuple(b for b in sizes if b in CPU_TRADEOFF_SIZES) if cpu else tuple(sizes)
    source = block_size if block_size in busiest else next(iter(candidates), None)
    batch = busiest[source].snapshot() if source is not None and busiest[source].num_running else None
    plans, refused, configs = {}, {}, {}
    for size in candidates if batch is not None else ():
        config = batch.decode_config(**heads).with_(block_size=size, spare_blocks=None)
        plan = limits.plan_run(config, warmup, iters)
        configs[size] = config
        if plan.refusal:
            refused[size] = config
        else:
            plans[size] = plan
    return TradeoffTiming(candidates, source, batch, plans, refused, configs)


def tradeoff_intro(pool_tokens: int, sharing: bool, dropped: list[int]) -> list[str]:
    """Markdown, then captions, over the trade-off chart: what it replays, and
    what it leaves out."""
    slots = formatting.format_number(pool_tokens)
    notes = [f"The same request stream replayed for {TRADEOFF_STEPS} steps with every block size, the pool "
             f"keeping the same memory ({slots} token slots). Larger blocks mean fewer block-table entries and "
             "lookups per sequence, but more slots wasted in each sequence's partly filled last block."]
    if sharing:
        notes.append("Replayed without sharing (no system prompt, one sample per request): the trade-off is the "
                     "plain block manager's.")
    if dropped:
        notes.append(f"Block sizes {', '.join(map(str, dropped))} left out: a pool of {slots} slots in blocks "
                     "that large cannot hold the longest request.")
    return notes


# -- sliding window: freed against kept ---------------------------------------------
