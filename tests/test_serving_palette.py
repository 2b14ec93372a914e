"""Issue 27 (#7): on the Serving simulation page sequences 5 and 9 were drawn in two crimsons (#A51E4B and
#FF1E5A, of one hue, 19.5 apart in CIEDE2000) that a projector showed as one. The sequence palette (the pool's,
the running tables', the replayed pool's, and the Block table page's: one palette) now keeps every pair of its
colours plainly apart, read from the colours the page's figures draw for a batch of as many sequences as it has."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_colour_language import NEUTRAL, ciede2000, drawn_colours, hue_clashes, rgb

from explorer import limits, style
from explorer.serving import figures as serving_figures
from explorer.serving import table_figures
from explorer.serving.history import simulate
from explorer.serving.traffic import LengthDist, ServingConfig

#: Every two sequence colours stay this far apart in CIEDE2000 (about 1: the least a viewer notices; the
#: old palette's closest pairs came 19.1 to 19.5 apart, sequences 5 and 9 among them).
ALL_PAIRS_APART_DE00 = 21

#: A run that keeps more sequences running than the palette has colours: every colour is drawn at once.
BUSY = ServingConfig(num_blocks=256, block_size=8, max_batch_size=16, arrival_rate=0.8,
                     prompt_len=LengthDist("uniform", 8, 48), output_len=LengthDist("uniform", 16, 64), seed=1,
                     system_prompt=16, samples=2)


def _hex(colour: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{v:02X}" for v in colour)


@pytest.fixture(scope="module")
def drawn():
    """The sequence colours the Serving page's pool and running tables draw at the step with the most
    sequences running, and its replayed pool over its frames."""
    history = simulate(BUSY, 80)
    step = int(history.metrics["running"].to_numpy().argmax())
    record = history.records[step]
    assert len(set(np.asarray(record.seq_ids) % len(style.SEQUENCE_COLORS))) == len(style.SEQUENCE_COLORS)
    tables = record.block_tables()
    pool = serving_figures.serving_pool_figure(record.pool_owner(), tables, record.context_lens, BUSY.block_size,
                                               step=step, sharing=True, seq_ids=record.seq_ids)
    table = table_figures.running_tables_figure(tables, record.context_lens, BUSY.block_size, BUSY.num_blocks,
                                                seq_ids=record.seq_ids,
                                                ref_counts=np.bincount(record.blocks, minlength=BUSY.num_blocks))
    frames = serving_figures.animation_steps(80)
    owners = np.stack([history.records[s].pool_owner() for s in frames])
    replay = serving_figures.pool_animation_figure(owners, frames, BUSY.block_size)
    neutral = {rgb(c) for c in NEUTRAL}
    return {"pool": drawn_colours(pool.data[0]) - neutral, "tables": drawn_colours(table.data[0]) - neutral,
            "replay": set().union(*(drawn_colours(f.data[0]) for f in replay.frames)) - neutral}


def test_the_page_draws_the_whole_palette_for_a_large_batch(drawn):
    palette = {rgb(c) for c in style.SEQUENCE_COLORS}
    assert limits.MAX_SIM_BATCH > len(palette)  # the page can show more sequences than colours: all are used
    for name, colours in drawn.items():
        assert colours == palette, name


def test_every_two_sequence_colours_the_page_draws_are_plainly_apart(drawn):
    used = sorted(set().union(*drawn.values()))
    assert len(used) == len(style.SEQUENCE_COLORS)
    pairs = sorted((ciede2000(_hex(a), _hex(b)), _hex(a), _hex(b)) for a, b in itertools.combinations(used, 2))
    assert pairs[0][0] >= ALL_PAIRS_APART_DE00, pairs[:3]
    # Nor two of one hue and about one lightness (CIELAB hue within 25 degrees, lightness within 25): the two
    # crimsons, 18 apart in lightness, were far enough in CIEDE2000 and still read alike.
    clashes = {tuple(sorted(p)) for a, b in itertools.combinations(used, 2) for p in hue_clashes({a}, {b})}
    assert not clashes, sorted(clashes)


def test_sequences_5_and_9_are_no_longer_two_crimsons():
    palette = style.SEQUENCE_COLORS
    five, nine = palette[5 % len(palette)], palette[9 % len(palette)]
    assert ciede2000(five, nine) >= ALL_PAIRS_APART_DE00
    assert not hue_clashes({rgb(five)}, {rgb(nine)})
