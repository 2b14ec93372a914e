"""What the Inside the kernel page says beside its charts (Markdown), filled in with
the traced plan's numbers: the page reads as a description of its UI, the words
live here.
"""

from __future__ import annotations

from explorer.formatting import count, format_number, format_percent, sig3
from explorer.kernel.view import row_walk, window_block

INTRO = (
    "What `_paged_decode_kernel` does for one query head of one sequence of the sidebar's batch, replayed step by "
    "step: the **tiles** of `BLOCK_N` tokens it walks through the block table, the **online softmax** state after "
    "each tile, and, when a long context is split across programs (**split-K**, flash-decoding), how the splits "
    "are merged; when sequences share a prefix, the **prefix pass** that reads the shared blocks once per group; "
    "with **draft tokens** (new tokens per sequence in the sidebar), the tile's rows, one per (new token, query "
    "head), and the **causal mask** among them. "
    "The replay runs on the CPU in float64 on random float32 inputs: it explains the algorithm, it "
    "does not time it."
)


def showcase_note(plan, config, seq: int) -> str:
    """Why the page opened on an overridden plan: the kernel's own ``plan`` walks
    sequence ``seq`` of ``config`` as so many splits and tiles
    (:func:`~explorer.kernel.view.row_walk`: from its window's first block on, the
    count the trace shows; the plan's ``num_splits`` is the longest sequence's)."""
    splits, tiles = row_walk(config, plan, seq)
    first = window_block(config, seq)
    where = f" from block {first:,} (its window's first)" if first else ""
    return (f"The kernel's own plan for this batch (BLOCK_N = {plan.block_n}) walks sequence {seq}{where} as "
            f"{count(splits, 'split')} of {count(tiles, 'tile')} in all"
            + (": nothing to merge" if splits < 2 else "") + ". To show the tiles and the split-K merge, this "
            "page opened with **Override plan** on; turn it off to see the kernel's own plan (the output is the "
            "same to float64 rounding).")


def prefix_note(seq: int, sequences: tuple[int, ...], num_blocks: int, block_size: int, rows: int,
                query_group: int) -> str:
    """The prefix pass of ``seq``'s group (``sequences``), which shares its first
    ``num_blocks`` blocks, each program holding up to ``rows`` query rows."""
    members = ", ".join(map(str, sequences[:12])) + (", …" if len(sequences) > 12 else "")
    return (f"Sequence {seq} shares its first {count(num_blocks, 'block')} ({count(num_blocks * block_size, 'token')}) "
            f"with its group of {count(len(sequences), 'sequence')} ({members}). The **prefix pass** reads them once "
            f"for the group: each of its programs holds up to {rows} query rows (sequences x the "
            f"{count(query_group, 'query head')} of one KV head) as one tile. Its partials come first below "
            "(**prefix** tiles); the sequence's own programs walk the rest, and the merge takes them all.")


def window_note(window: int | None, window_start: int, first_block: int) -> str:
    """The sliding window of ``window`` positions, from ``window_start`` (in block
    ``first_block``): what the kernel skips and masks; empty without a window."""
    if window is None:
        return ""
    if window_start == 0:
        return (f"**Sliding window** of {count(window, 'position')}: this context is no longer, so the kernel "
                "reads all of it.")
    return (f"**Sliding window** of {count(window, 'position')}: the query attends to positions {window_start:,} on. "
            f"The programs start at block {first_block:,}, so the grey blocks before it are **not read** (not even "
            "their table entries); the lanes of the first tile before the window's start are masked.")


def soft_cap_note(soft_cap: float, over: int) -> str:
    """Beside the logits: what soft-capping at ``soft_cap`` does (``over`` raw
    logits lie past it)."""
    return (f"**Logit soft-capping** (as in Gemma 2): each scaled logit s becomes cap·tanh(s / cap) with "
            f"cap = {format_number(soft_cap)}, so none exceeds ±cap while small ones pass almost unchanged; {over:,} of these "
            "lay past the cap. The kernel caps the scores in registers, right after the dot product and before the "
            "online softmax's max.")


def sink_note(sink: float | None, share: float) -> str:
    """Beside the online softmax: the attention sink's logit ``sink`` (natural
    units) and its ``share`` of the softmax mass; empty without a sink."""
    if sink is None:
        return ""
    return (f"**Attention sink** (as in gpt-oss): one more logit per head, here {sig3(sink)}, joins the softmax's "
            f"denominator but carries no value: out = acc / (l + 2^(sink·log₂e − m)). The kernel adds it once, "
            f"where the row is finished (after the merge), and it takes {format_percent(share)} of the mass here.")


def walk_note(block_n: int, tile: str, split: bool, prefix: bool, window: str = "") -> str:
    """Beside the walk: what a tile (``block_n`` lanes laid out as ``tile``), its
    colours and its masked lanes are; the splits' lines when ``split``; the
    prefix band when ``prefix``; a sliding ``window``'s note (:func:`window_note`)
    when given."""
    return f"""
Each bar is one **tile**: the `BLOCK_N = {block_n}` lanes a program processes at once, laid out as
{tile}. Its colours are the **physical blocks** it reads, found through the **block table**; a tile looks up
each of its blocks' entries once, so the number of **table lookups** is the number of blocks, not tokens.

Hatched lanes are **masked**: past the end of the context (the last, partly filled block), past the end of the
split, or padding when the block size is not a power of two. They load nothing and score −∞.

{"Dotted lines separate the **splits**: each is a separate program walking its own stretch of the context." if split
 else "One program walks the whole context (no split)."}
{"The grey band holds the **prefix pass**'s tiles: the same blocks, read once for every sequence of the group."
 if prefix else ""}

{window}
"""


def mask_note(query_len: int, query_group: int, token: int, head: int, position: int, window: int | None,
              causal: int) -> str:
    """Beside the tile's mask: a sequence's ``query_len`` new tokens x the
    ``query_group`` query heads of one KV head as the rows of one tile, and the
    causal rule; the traced row is token ``token``, head ``head`` at ``position``,
    and ``causal`` of its tiles' loaded lanes are masked as later tokens."""
    rows = query_len * query_group
    traced = (f"its tiles load {count(causal, 'position')} it masks as later tokens'" if causal
              else "the last new token, it masks no later one: its row sees what a one-token step sees")
    windowed = (f" With the sliding window each row also masks the positions before its own window (its last "
                f"{count(window, 'position')}), so earlier tokens keep a few positions later ones drop."
                if window is not None else "")
    return f"""
This sequence brings **{count(query_len, 'new token')}** (draft tokens, already in the cache: its last
{query_len} positions). The kernel still reads its K and V **once**: one tile holds
{query_len} tokens x {count(query_group, 'query head')} = **{count(rows, 'row')}**, row r = token r // {query_group},
head r % {query_group}.

Token t may only attend to the positions up to its own (**causal**): the later new tokens' scores are
masked to −∞ in its row, so the kept cells form a staircase.{windowed} The kernel masks every tile row by row,
each row at its own length; the chart shows the tiles where the rows differ.

The traced row (outlined) is token {token}, head {head}, at position {position:,}: {traced}.
"""


def softmax_note(merged: bool, sink: str = "") -> str:
    """Beside the online softmax: the state the kernel keeps and its rescaling;
    the attention sink's note (:func:`sink_note`) when given."""
    return f"""
The kernel never holds all scores at once. After each tile it keeps three things: the **running max m** of the
scores seen, the **normalizer l** = Σ 2^(s − m) over them, and the unnormalised output **acc** = Σ 2^(s − m)·v.

When a tile brings a new maximum, the old l and acc are **rescaled** by α = 2^(m_old − m_new) (hover a point);
otherwise α = 1. Scores are in base-2 units (scale·log₂e), so the kernel can use `exp2`.

The bottom panel is the distance of the partial answer **acc / l** to the final output: it falls as the tiles
cover more of the context, and reaches float64 rounding (~1e-16) at the end of the row's last split (the dotted
line: each split against its own exact answer). The black crosshair is the output the kernel returns{" after the merge" if
merged else ""}.

{sink}
"""


def merge_note(prefix: bool) -> str:
    """Beside the split merge: the rescaling to the common max, and the prefix
    partials when ``prefix``."""
    return """
With **split-K** (flash-decoding) several programs share one sequence's context, so a short batch still fills
the GPU. Each split ends with its own (m, l, acc), relative to its **own** max.

The last program of the row to finish (an atomic counter tells it, so no second kernel is launched; with many
draft tokens over many splits a second launch spreads this merge over one program per token) rescales
each split to the common max with the **weight** w = 2^(m − max m) and sums:
out = Σ w·acc / Σ w·l. A split's **share** w·l / Σ w·l is the part of the softmax mass its tokens carry: one
with a low max contributes little.
""" + ("""
The **prefix** partials were written by the prefix pass before this launch, into the row's first slots; the
merge treats them like any split's.
""" if prefix else "")


def no_merge_note(num_splits: int, override: bool) -> str:
    """Why a row that runs as one split shows no merge (the plan has
    ``num_splits``), and which control changes that."""
    if num_splits > 1:
        reason = f" (the plan has {num_splits}, but the others start past its last block)"
        fix = ("Pick a longer sequence, or raise **Splits** so that each covers fewer blocks," if override
               else "Pick a longer sequence, or turn on **Override plan** and raise **Splits**,")
    else:
        reason = ""
        fix = "Raise **Splits**" if override else "Turn on **Override plan** and raise **Splits**"
    return (f"This row runs as one split{reason}: there is nothing to merge. {fix} to see the merge; the result "
            "stays the same to float64 rounding.")


def plan_caption(plan, config, summary: str, seq: int, head: int, token: int | None, override: bool) -> str:
    """The caption under the page's controls: which plan (``override``: the user's),
    its tile and splits for the batch ``summary``, what sequence ``seq`` holds (its
    new tokens and the ``token`` traced, with draft tokens) and which KV head query
    head ``head`` reads."""
    n, q_len = config.lengths[seq], config.query_lengths[seq]
    group = config.num_heads // config.num_kv_heads
    splits = (f"{count(plan.num_splits, 'split')} of {count(plan.blocks_per_split, 'block')} "
              f"({count(plan.tokens_per_split, 'token')}) for the longest sequence"
              if max(config.lengths, default=0) else "no split: every context is empty")
    return (f"{'Overridden' if override else 'Default'} plan for {summary}: BLOCK_N = {plan.block_n} tokens per tile "
            f"({tile_words(plan, config.block_size)}); {splits} · sequence {seq} holds {count(n, 'token')}"
            + (f", its last {q_len} new (positions {n - q_len:,}–{n - 1:,}): token {token} traced" if q_len > 1 else "")
            + f" · query head {head} reads KV head {head // group} (GQA group of {group})")


def tile_words(plan, block_size: int) -> str:
    """A tile in blocks: ``"4 blocks of 64 slots"``, or ``"1/2 of a block of 32"``
    when a block holds several tiles."""
    return (f"{count(plan.blocks_per_tile, 'block')} of {count(plan.slots_per_tile, 'slot')}" if plan.subtiles == 1
            else f"1/{plan.subtiles} of a block of {block_size}")


def empty_note(seq: int, any_tokens: bool) -> str:
    """Why nothing is traced: sequence ``seq`` holds no tokens (``any_tokens``: another does)."""
    if any_tokens:
        return (f"Sequence {seq} has no cached tokens: every program of this row returns at once and the output is "
                "zero. Pick another sequence.")
    return ("Every sequence is empty (no cached tokens): every program returns at once and the output is zero. Give "
            "the sequences tokens in the sidebar to see the walk.")
