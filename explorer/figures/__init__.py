"""Plotly figures of the explorer: data in, ``go.Figure`` out.

Five families, one module each (this package re-exports their public names, so
``figures.block_table_figure`` works), on a shared :mod:`.style` and :mod:`.sampling`:

* the paged cache, drawn from the block table alone (no KV tensors):
  :func:`block_table_figure`, :func:`pool_figure`, :func:`token_walk_figure`,
  :func:`block_walk_figure`; with shared blocks, :func:`pool_ref_count_figure`
  (and ``block_table_figure(..., ref_counts=...)``); each of the table and pool
  figures takes ``highlight`` (physical blocks to outline) and carries click
  targets (:mod:`.picking`), which link the two on the Block table page;
* benchmark results (lists of :class:`~paged_attention.bench.BenchResult`):
  :func:`latency_figure`, :func:`speedup_figure`, :func:`bandwidth_figure`,
  :func:`accuracy_figure`, :func:`history_figure`; a set recorded on a GPU
  (:mod:`explorer.recorded`): :func:`recorded_latency_figure`;
* sweeps (DataFrames of :data:`~explorer.sweep.SWEEP_COLUMNS`):
  :func:`sweep_latency_figure`, :func:`sweep_bandwidth_figure`,
  :func:`sweep_speedup_figure`, :func:`sweep_ratio_figure`;
* the serving simulation: :func:`serving_pool_figure`,
  :func:`serving_timeline_figure`, :func:`tradeoff_figure`,
  :func:`pool_animation_figure` (on the steps of :func:`animation_steps`);
* inside the kernel (a :class:`~explorer.kernel_trace.KernelTrace`):
  :func:`kernel_walk_figure`, :func:`online_softmax_figure`,
  :func:`split_merge_figure`; and the launch's work list (which program reads
  which blocks of which sequence): :func:`work_list_figure`.

Any of them can be enlarged for a room with :func:`for_presentation` (the app's
presentation mode).

A browser draws a few tens of thousands of heatmap cells comfortably. Past that
the cache figures sample (every k-th row and column, exact values in the cells
shown) or aggregate (the block table's columns when it is wider than the plot
has pixels for, and the pool: k consecutive blocks per cell), and
:func:`block_table_grid` and :func:`sample_grid` tell the page what was done so
it can say so.

Every implementation keeps one colour in every chart (:data:`IMPL_COLORS`).
"""

from __future__ import annotations

from .style import (  # noqa: F401
    BLOCK_COLORSCALE,
    ERROR_FLOOR,
    FAIL_COLOR,
    FALLBACK_COLOR,
    FREE_COLOR,
    IMPL_COLORS,
    MAX_POOL_CELLS,
    MAX_SEQUENCE_LEGEND,
    MAX_TABLE_CELLS,
    MAX_TEXT_CELLS,
    MAX_WALK_CELLS,
    MAX_WALK_POINTS,
    MIN_COLUMN_PX,
    MIN_GAP_CELL_PX,
    MIN_TICK_PX,
    OTHER_COLOR,
    PASS_COLOR,
    PLOT_WIDTH_PX,
    PRESENTATION_SCALE,
    SEQUENCE_COLORS,
    SUBTITLE_LINE,
    SUBTITLE_LINE_HEIGHT,
    UNALLOCATED_COLOR,
    for_presentation,
    impl_color,
)
from .sampling import (  # noqa: F401
    GridSample,
    pool_grid_shape,
    sample_grid,
)
from .paged_cache import (  # noqa: F401
    block_fill,
    block_table_figure,
    block_table_grid,
    pool_figure,
)
from .token_walk import (  # noqa: F401
    block_walk_figure,
    token_walk_figure,
)
from .sharing import (  # noqa: F401
    REF_LEVELS,
    pool_ref_count_figure,
    ref_level_names,
    sharing_timeline_figure,
)
from .benchmark import (  # noqa: F401
    accuracy_figure,
    bandwidth_figure,
    history_figure,
    latency_figure,
    speedup_figure,
)
from .recorded import (  # noqa: F401
    HIGHLIGHT_COLOR,
    recorded_latency_figure,
)
from .sweep import (  # noqa: F401
    LOG_X_SPAN,
    LOG_Y_SPAN,
    SKIPPED_SYMBOL,
    SOURCE_DASHES,
    SOURCE_SYMBOLS,
    sweep_bandwidth_figure,
    sweep_latency_figure,
    sweep_ratio_figure,
    sweep_speedup_figure,
)
from .serving import (  # noqa: F401
    FREED_COLOR,
    MAX_ANIMATION_FRAMES,
    POOL_CHANGE_MARKS,
    POOL_COLOR,
    POOL_COLOR_MODES,
    RUNNING_COLOR,
    TAKEN_COLOR,
    WAITING_COLOR,
    WASTE_COLOR,
    animation_steps,
    pool_animation_figure,
    serving_pool_figure,
    serving_timeline_figure,
    tradeoff_figure,
)
from .kernel import (  # noqa: F401
    MAX_SPLIT_LEGEND,
    MAX_WALK_SEGMENTS,
    OUTPUT_STAR_ROOM,
    SPLIT_COLORS,
    SPLIT_COLORSCALE,
    kernel_walk_figure,
    online_softmax_figure,
    split_merge_figure,
)
from .work_list import (  # noqa: F401
    MAX_WORK_ROWS,
    work_list_figure,
    work_rows,
)
