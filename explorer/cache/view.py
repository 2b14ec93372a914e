"""The Block table page's view model: its five cards and the words under its two
charts, from the batch's layout (the sidebar's, or the sharing scenario's)."""

from __future__ import annotations

from explorer import formatting
from explorer.bench.readouts import MemorySummary
from explorer.cache.sampling import GridSample, pool_grid_shape
from explorer.cache.sharing import SharedBatch
from explorer.cards import Card
from explorer.marks import POOL_CHANGE_MARKS
from explorer.marks import SHARED_MARK as DRAWN_SHARED_MARK
from paged_attention import DecodeConfig

#: The block table's mark on a shared block as the caption names it: in the words
#: of the mark the figure draws (:data:`explorer.marks.SHARED_MARK`).
SHARED_MARK = f"{DRAWN_SHARED_MARK.words} (◇)"
#: The copy-on-write mark as the captions name it, in the words of the mark the
#: Serving simulation's pool and the Block table's charts draw.
COPIED_MARK = POOL_CHANGE_MARKS["copied"].words
#: Requests a caption lists by their sequences before it says "…".
LISTED_REQUESTS = 4


#: The KV cache card's label: its bytes are one layer's K and V pools, not the model's.
KV_CARD = "KV cache, one layer"
#: Its label with Sharing on, where it counts the K and V of the blocks the batch holds, as
#: the saving line above it does (issue 27: the whole pool's bytes beside that line's
#: batch's bytes read as two answers to one question); the pool's bytes are its note's.
KV_BATCH_CARD = "Batch KV, one layer"
#: Between two counts in one card's note: a Markdown line break, a line each.
NOTE_BREAK = "  \n"


def table_cards(config: DecodeConfig, mem: MemorySummary, shared: SharedBatch | None, shares: bool, *,
                pool_blocks: int, num_layers: int | None = None) -> list[Card]:
    """Sequences, tokens, blocks used, wasted slots and the KV cache's bytes, each
    count saying whether it counts logical tokens (every sequence its own) or physical
    blocks and slots (a shared block once). ``shared``: the sharing scenario's layout
    (None: the sidebar's); ``shares``: some block is held by more than one sequence;
    ``pool_blocks``: the physical blocks of the pool the page draws (its chart's
    count, so card and chart say one number); ``num_layers``: the model preset's
    layers (None: Custom), whose K and V the last card's note adds up. That card
    counts the pool's bytes, or with ``shared`` the bytes of the blocks the batch
    holds, as the saving line above the cards does, and the pool's in its note.

    Short values with the detail under them: five cards share a row at 1280 px, and
    the Tokens card's two counts (stored, new) take a line each (:data:`NOTE_BREAK`);
    a note longer than its card wraps (``ui.charts``), never cut.
    Counts (sequences, tokens, blocks, slots) are exact, with thousands separators,
    so that they add up by hand (issue 27: "30,100 tokens" for 30,112); bytes and
    shares to three significant figures."""
    num, count = formatting.format_number, formatting.count
    used = shared.blocks_used if shared else mem.blocks_used
    wasted, allocated = ((shared.wasted_slots, used * config.block_size) if shared
                         else (mem.wasted_slots, mem.allocated_slots))
    stored, tokens = int(allocated - wasted), int(sum(config.lengths))
    used, wasted, allocated = int(used), int(wasted), int(allocated)
    queries = config.num_query_tokens if config.has_query_lens else 0
    # One line each (a Markdown line break): both on one line ran past the card at 1280 px.
    new = NOTE_BREAK.join(([f"{num(stored)} stored (physical)"] if shares else [])
                          + ([f"{num(queries)} new (queries)"] if queries else []))
    return [
        Card("Sequences", num(config.batch_size), help=f"{count(config.batch_size, 'sequence')} in the batch"),
        Card("Tokens (logical)", num(tokens), new or None,
             f"{count(tokens, 'token')} in the sequences, each counting its own"
             + (f"; the pool stores {stored:,}, a shared block's once" if shares else "")
             + (f"; {queries:,} of them are this step's new tokens, each a query row" if queries else "")),
        Card("Blocks used (physical)", num(used), f"of {num(pool_blocks)} in the pool",
             f"{count(used, 'physical block')} hold this batch's tokens, a shared one once; the tables list "
             f"{count(sum(config.blocks_per_sequence), 'logical block')}; the pool has {pool_blocks:,}"
             + (f"; without sharing {mem.blocks_used:,}" if shared else "")),
        Card("Wasted slots (physical)", num(wasted), f"{formatting.format_percent(wasted / max(1, allocated))} "
             "of allocated", f"{wasted:,} allocated but unfilled slots in the physical blocks in use, as a share of "
             f"all {allocated:,} allocated slots"),
        _kv_card(config, mem, pool_blocks, used if shared else None, num_layers),
    ]


def _kv_card(config: DecodeConfig, mem: MemorySummary, pool_blocks: int, held: int | None,
             num_layers: int | None) -> Card:
    """The KV cache card: one layer's whole pool of ``pool_blocks`` (:data:`KV_CARD`), or with
    ``held`` (the sharing scenario's physical blocks in use) the batch's K and V in them
    (:data:`KV_BATCH_CARD`), the pool's bytes in its note, named the pool's."""
    size = formatting.format_bytes
    pool_bytes = pool_blocks * mem.block_bytes  # the drawn pool's (the sharing scenario's may be larger)
    counted = pool_bytes if held is None else held * mem.block_bytes
    model = counted * (num_layers or 1)
    layers = f"{size(model)} for {num_layers} layers" if num_layers else f"{size(mem.block_bytes)} per block"
    what = (f"one layer's whole pool of {formatting.count(pool_blocks, 'physical block')}, free ones included"
            if held is None else
            f"the batch's {formatting.count(held, 'physical block')} in use, a shared one once (as the line above "
            f"counts them), in one layer; the pool of {pool_blocks:,} physical blocks, free ones included, has "
            f"{pool_bytes:,} bytes")
    return Card(
        KV_CARD if held is None else KV_BATCH_CARD, size(counted),
        layers if held is None else f"of {size(pool_bytes)} in the pool" + NOTE_BREAK + layers,
        f"{what}: K and V in {mem.kv_dtype} ({formatting.count(mem.kv_element_bytes, 'byte')} per value): "
        f"{counted:,} bytes; one block of {config.block_size} tokens holds {mem.block_bytes:,} bytes of K and V"
        + (f". Each of the model's {num_layers} layers has {'a pool' if held is None else 'blocks'} of its own: "
           f"{model:,} bytes in all" if num_layers else ""))


def prefix_set_aside_note(config: DecodeConfig, common_prompt: int, samples: int) -> str | None:
    """Why the sidebar's shared prefix (``config.shared_prefix``, in
    ``config.prefix_groups`` groups) is not in the Sharing scenario's layout, which
    draws its own (a ``common_prompt`` and ``samples`` per request); None without a
    prefix."""
    if not config.shared_prefix:
        return None
    groups = f" in {config.prefix_groups:,} groups" if config.prefix_groups > 1 else ""
    return (f"**The sidebar's shared prefix of {formatting.count(config.shared_prefix, 'token')}{groups} is set "
            "aside** while the Sharing scenario draws its own: a common prompt of "
            f"{formatting.count(int(common_prompt), 'token')}, {formatting.count(int(samples), 'sample')} per request, "
            "prefix caching and copy-on-write. Turn Sharing off to see the sidebar's prefix.")


def request_ranges(batch_size: int, samples: int, listed: int = LISTED_REQUESTS) -> str:
    """The sequences of each request of ``samples`` consecutive ones in a batch of
    ``batch_size``: "0–1, 2–3" (a request of one sequence: "4"), the first ``listed``
    requests and "…" after them."""
    spans = []
    for first in range(0, batch_size, samples):
        last = min(first + samples, batch_size) - 1
        spans.append(str(first) if last == first else f"{first}–{last}")
    return ", ".join(spans[:listed]) + (", …" if len(spans) > listed else "")


def sharing_caption(shared: SharedBatch, samples: int, common_prompt: int, block_size: int) -> str:
    """The sharing scenario's words under the block table: which sequences are one
    request's samples, what their prompts hold of the common prompt of ``common_prompt``
    tokens (a request whose prompt is shorter holds only that many of its tokens, and
    shares only their blocks, named with their counts), and the copy-on-write mark."""
    batch = len(shared.context_lens)
    who = (f"Each request's {samples} samples are adjacent sequences: {request_ranges(batch, samples)}. "
           if samples > 1 else "Each request is one sequence (1 sample). ")
    prompt = "Each request's prompt is one token shorter than its shortest sample"
    if common_prompt <= 0:
        text = who + prompt + "; there is no common prompt, so only a request's samples share its prompt's blocks. "
    else:
        short = []
        for first in range(0, batch, samples):
            rows = [s for s in range(first, min(first + samples, batch)) if shared.context_lens[s] > 0]
            if rows and shared.prompt_lens[rows[0]] < common_prompt:
                n = shared.prompt_lens[rows[0]]
                seqs = str(rows[0]) if len(rows) == 1 else f"{rows[0]}–{rows[-1]}"
                short.append(f"sequence{'s' if len(rows) > 1 else ''} {seqs}: a prompt of "
                             f"{formatting.count(n, 'token')}, {formatting.count(-(-n // block_size), 'block')}")
        text = who + prompt + f" and starts with the common prompt of {formatting.count(common_prompt, 'token')}"
        if short:
            listed = "; ".join(short[:LISTED_REQUESTS]) + ("; …" if len(short) > LISTED_REQUESTS else "")
            text += ("; a request shorter than the common prompt holds only as much of it as its own tokens, and "
                     f"shares only their blocks ({listed}). ")
        else:
            text += ". "
    if shared.cow_copies:
        text += (f"A {COPIED_MARK} marks a copy-on-write copy ({shared.cow_copies:,} here): a sample's own copy of "
                 "the shared partly filled last prompt block, made at its first write. ")
    return text


def table_caption(config: DecodeConfig, grid: GridSample, samples: int | None, shares: bool,
                  shared: SharedBatch | None = None, common_prompt: int = 0) -> str:
    """The words under the block table: the sharing scenario's (``samples`` per
    request, its layout ``shared`` of a ``common_prompt``: :func:`sharing_caption`), the
    sidebar's shared prefix (``shares``), or how to read the cells; with the grid's sampling note."""
    note = grid.note("sequence", "logical block") or ""
    marks = (f"A {SHARED_MARK} marks a block more than one sequence holds (same physical id). "
             if grid.col_stride == 1 else "Shared blocks are not marked at this scale. ")
    if samples is not None:
        scenario = (sharing_caption(shared, samples, common_prompt, config.block_size) if shared is not None else
                    f"Each request's {samples} samples are adjacent sequences: "
                    f"{request_ranges(config.batch_size, samples)}. ")
        return (scenario + marks
                + "Blocks come from the block manager's free list in arrival order, not the sidebar's layout. " + note)
    if shares:
        tail = config.shared_prefix % config.block_size
        groups, member = (("", "sequence") if config.prefix_groups == 1 else
                          (f"in each of {config.prefix_groups:,} groups of consecutive sequences, ", "member"))
        return (f"The sidebar's shared prefix: {groups}the first "
                f"{formatting.count(config.shared_blocks, 'logical block')} of every {member} point to the same "
                "physical blocks. " + marks
                + (f"The prefix's last {formatting.count(tail, 'token')} sit in each {member}'s own block, copied. "
                   if tail else "") + note)
    return note or "Hover a cell for its token range and fill. Pale cells are unallocated (-1)."


def new_tokens_caption(config: DecodeConfig, star_color: str) -> str:
    """The words under the block table when sequences have new tokens (draft tokens
    verified in one step, ``config.query_lengths``): what the table's star marks,
    the star written filled and in the table's ``star_color`` (a CSS colour)."""
    return (f':color[★]{{foreground="{star_color}"}} A yellow star marks a block that holds new tokens: '
            "this step's "
            f"{formatting.count(config.num_query_tokens, 'query token')}, the last "
            f"{formatting.span_text(config.query_lengths)} positions of each sequence, already in the cache and "
            "verified in one step; each attends to its context up to itself.")


def pool_caption(num_blocks: int, sharing: bool, shares: bool, prefix_groups: int = 1,
                 repeat_every: int | None = None) -> str:
    """The words under the pool of ``num_blocks``: what its colour counts with shared
    blocks (the sharing scenario's, ``sharing``, or a shared prefix's in
    ``prefix_groups`` groups), how cells aggregate blocks, or how to read it; with
    ``repeat_every`` (the palette's size, :data:`~explorer.style.SEQUENCE_COLORS`,
    when the batch has more sequences), that the colours repeat."""
    rows, cols, per_cell = pool_grid_shape(num_blocks)
    if shares:
        return ("Colour = how many sequences hold each block: "
                + ("the common prompt's blocks by the samples of every request whose prompt holds them (a request "
                   "shorter than the common prompt holds only its own tokens' blocks), a request's own prompt "
                   f"blocks by its samples, generated tokens and copy-on-write copies (a {COPIED_MARK}) by one."
                   if sharing else
                   ("a shared prefix's blocks by every sequence" if prefix_groups == 1 else
                    "a shared prefix's blocks by every member of its group") + ", the rest by one sequence.")
                + (f" {per_cell} consecutive blocks per cell, coloured by the most holders among them."
                   if per_cell > 1 else ""))
    if per_cell > 1:
        return (f"Aggregated for the browser: {num_blocks:,} blocks drawn as {rows * cols:,} cells of {per_cell} "
                "consecutive blocks each; partly filled blocks are not marked at this scale.")
    repeat = (f" Colours repeat every {repeat_every} sequences: hover a block for its owner."
              if repeat_every else "")
    return "Grey blocks are free; a dark dot marks a sequence's partly filled last block." + repeat
