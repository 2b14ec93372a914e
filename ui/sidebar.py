"""The sidebar every page shares: decode configuration, mirrored into the URL.

``app.py`` calls :func:`render_sidebar` once per run, before the page; pages read
the result with :func:`current`. Every widget has a key (prefix ``sb_``) and
``persist_state="session"``, so a value survives while its widget is hidden (the
ragged fields in uniform mode) or another page is open. Their values are written
to ``st.query_params`` after each run, so a copied URL reproduces the view. The
URL is read once per session, on its first run; values that do not parse are
replaced by defaults and listed in a warning. The logic (parsing, presets,
validation) is in :mod:`explorer.settings`.

The open page's own controls go into the URL beside the sidebar's, under keys
prefixed per page (the registry, :data:`explorer.page_urls.URL_FIELDS`); other
pages' keys are dropped. A page reads its keys when its widgets are first
created in a session (:func:`ui.page_state.seed_page`, through
:func:`take_page_query`) and calls :func:`sync_url` once its controls are drawn.

Why not ``bind="query-params"``: in Streamlit 1.67 a bound widget's URL
parameter does not follow a value the script sets (a preset filling the head
fields, a number clamped to its range, KV heads snapped to a divisor): the
browser keeps the old parameter, so a copied URL would not reproduce the view;
and a bound widget with ``format_func`` writes the label, not the value, into
the URL (docs/streamlit.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from explorer import formatting, limits, page_urls
from explorer import settings as state
from explorer.bench import readouts
from explorer.presets import layer_label
from explorer.settings import Settings
from explorer.url_fields import notes_box
from paged_attention import (
    BLOCK_LAYOUTS,
    KV_SCALES,
    DecodeConfig,
    device_description,
    execution_mode,
)
from ui.inputs import bounded_number_input, choice, sequence_editor

#: Session-state key of the widget that holds each Settings field.
WIDGET_KEYS: dict[str, str] = {name: f"sb_{name}" for name in (
    "preset", "batch_size", "context_mode", "context_len", "ragged_low", "ragged_high", "spread", "num_heads",
    "num_kv_heads", "head_dim", "block_size", "dtype", "kv_dtype", "kv_scale", "device", "block_layout",
    "pool_headroom", "shared_prefix", "prefix_groups", "sinks", "layer", "seed", "warmup", "iters", "present",
)}
#: The attention options that are off or a number: ``field -> (toggle's key, number box's key)``;
#: the box keeps its number while the toggle is off.
OPTION_KEYS: dict[str, tuple[str, str]] = {"window": ("sb_window_on", "sb_window"),
                                           "soft_cap": ("sb_soft_cap_on", "sb_soft_cap")}
_OPTION_STARTS = {"window": limits.DEFAULT_WINDOW, "soft_cap": limits.DEFAULT_SOFT_CAP}
_LENGTHS = "sb_lengths"  # the lengths editor's keys (ui.inputs.sequence_editor)
_LENGTHS_BASE = "sb_lengths_base"  # the ragged lengths the editor starts from
_LENGTHS_SOURCE = "sb_lengths_source"  # the generator parameters they came from
#: The new tokens: one number for all or per sequence (the mode), the number, and the
#: per-sequence editor's keys (its ``_base``: the values it starts from).
QUERY_MODE, QUERY_LEN, _QUERIES = "sb_query_mode", "sb_query_len", "sb_queries"
QUERY_HELP = ("draft tokens (speculative decoding, a multi-token-prediction head) that one step verifies: "
              "already written to the cache, the last ones of each sequence's context, each attending "
              "causally to the context up to itself (the earlier new tokens, not the later); a sequence takes "
              "at most its context. 1: the plain decode step")
_LOADED = "sb_loaded_from_url"
_NOTES = "sb_url_notes"
_RESULT = "sb_result"
_PAGE = "sb_url_page"  # the URL path of the page this run draws
#: Pages that build their own batch and pool: the sidebar's Memory box says it is not theirs.
OWN_BATCH_PAGES = ("serving_simulation",)
#: The open page's own URL values, as the session's first URL held them, until the page reads them:
#: ``(page path, {url name: text})``.
_PAGE_QUERY = "sb_url_page_query"
#: Every sidebar widget keeps its value for the session while it is not drawn (the
#: ragged fields in uniform mode and vice versa).
KEEP = {"persist_state": "session"}


@dataclass(frozen=True)
class SidebarResult:
    """What the pages get: the settings, and either a valid config or the error."""

    settings: Settings
    config: DecodeConfig | None
    error: str | None
    url_notes: tuple[str, ...] = ()


def current() -> SidebarResult:
    """The sidebar's result of this run (``render_sidebar`` must have run)."""
    return st.session_state[_RESULT]


def _load_from_url(page: str | None = None) -> None:
    """Until a run of the session has drawn the whole sidebar, seed the widgets from
    the URL (or defaults).

    ``_LOADED`` is set at the end of :func:`render_sidebar`, not here, so a first
    run cut short (a click on a page link while it was still going) does not count:
    the next run seeds every widget again. (What the browser shows is kept in step
    by :func:`_pin_widgets`.)
    """
    if st.session_state.get(_LOADED):
        return
    settings, notes = state.settings_from_query(st.query_params.to_dict())
    for name, key in WIDGET_KEYS.items():
        st.session_state[key] = getattr(settings, name)
    _set_attention(settings.attention())
    ragged = isinstance(settings.query_lens, tuple)
    st.session_state[QUERY_MODE] = "ragged" if ragged else "uniform"
    st.session_state[QUERY_LEN] = max(settings.query_lens, default=1) if ragged else settings.query_lens
    if ragged:
        st.session_state[f"{_QUERIES}_base"] = settings.query_lens
    if settings.lengths is not None:
        st.session_state[_LENGTHS_BASE] = settings.lengths
        st.session_state[_LENGTHS_SOURCE] = _generator_params(settings)
    st.session_state[_NOTES] = tuple(notes)
    st.session_state[_PAGE_QUERY] = (page, page_urls.page_params(page, st.query_params.to_dict()))


def _pin_widgets() -> None:
    """Re-assign every sidebar widget's value, so this run sends it to the browser.

    Streamlit sends a widget's value only when the script set it; otherwise the
    browser's copy is trusted. A browser that rebuilt the sidebar during a first run
    cut short (a click on a page link mid-run) holds widgets at their first option
    (block size 1, one KV head, the contiguous layout) and would send those back
    with the next edit as if chosen (``tests/test_browser_app.py``,
    ``test_page_link_clicked_during_the_first_run_keeps_the_sidebar``).
    """
    ss = st.session_state
    for key in [*WIDGET_KEYS.values(), *(k for pair in OPTION_KEYS.values() for k in pair), QUERY_MODE, QUERY_LEN]:
        if key in ss:
            ss[key] = ss[key]


def _generator_params(s: Settings) -> tuple:
    return (s.batch_size, s.ragged_low, s.ragged_high, s.spread, s.seed)


def _set_attention(attention: state.Attention) -> None:
    """Set the attention widgets to ``attention`` (a number box keeps its number when its option is off)."""
    ss = st.session_state
    for name, (on, box) in OPTION_KEYS.items():
        value = getattr(attention, name)
        ss[on] = value is not None
        ss[box] = value if value is not None else ss.get(box, _OPTION_STARTS[name])
    ss[WIDGET_KEYS["sinks"]] = attention.sinks


def _on_preset() -> None:
    ss = st.session_state
    preset = state.MODEL_PRESETS.get(ss[WIDGET_KEYS["preset"]])
    if preset is not None:
        ss[WIDGET_KEYS["num_heads"]], ss[WIDGET_KEYS["num_kv_heads"]], ss[WIDGET_KEYS["head_dim"]] = preset.heads
        ss[WIDGET_KEYS["layer"]] = state.SLIDING
        _set_attention(preset.attention(next(iter(preset.layer_counts()))))


def _on_layer() -> None:
    ss = st.session_state
    preset = state.MODEL_PRESETS.get(ss[WIDGET_KEYS["preset"]])
    if preset is not None:
        _set_attention(preset.attention(ss[WIDGET_KEYS["layer"]]))


#: Session key of the note saying that the app changed the KV heads: ``(value set, note)``.
KV_HEADS_NOTE = "_kv_heads_note"


def _on_model() -> None:
    ss = st.session_state
    heads = ss[WIDGET_KEYS["num_heads"]]
    kv = ss[WIDGET_KEYS["num_kv_heads"]]
    ss.pop(KV_HEADS_NOTE, None)
    if heads % kv:
        before, kv = kv, state.nearest_kv_heads(heads, kv)
        ss[WIDGET_KEYS["num_kv_heads"]] = kv
        # Said, as a clamped number box says it: KV heads changed silently before.
        ss[KV_HEADS_NOTE] = (kv, f"**KV heads**: {before} does not divide {formatting.count(heads, 'query head')}; "
                                 f"using {kv}, the nearest divisor.")
    # Heads or attention edited by hand: the preset that matches them (its layer kind too), or Custom.
    matched = state.with_matching_preset(_read_settings(), keep_custom=False)
    ss[WIDGET_KEYS["preset"]], ss[WIDGET_KEYS["layer"]] = matched.preset, matched.layer


def _read_settings() -> Settings:
    ss = st.session_state
    options = {name: ss[box] if ss.get(on) else None for name, (on, box) in OPTION_KEYS.items()}
    return Settings(**{name: ss[key] for name, key in WIDGET_KEYS.items()}, **options)


def _mode_badge() -> None:
    if execution_mode() == "compiled":
        st.badge("GPU · Triton compiled", icon=":material/bolt:", color="green")
    else:
        st.badge("CPU · Triton interpreter", icon=":material/memory:", color="orange")
    st.caption(device_description())


def _ragged_editor(settings: Settings) -> tuple[tuple[int, ...] | None, str | None]:
    """The per-sequence lengths editor (:func:`~ui.inputs.sequence_editor`, each length
    kept in ``0 .. MAX_CONTEXT``); returns the lengths (None: as drawn) or an error."""
    ss = st.session_state
    try:
        generated = settings.generated_lengths()
    except ValueError as exc:
        return None, str(exc)
    source = _generator_params(settings)
    if ss.get(_LENGTHS_SOURCE) != source or len(ss.get(_LENGTHS_BASE, ())) != settings.batch_size:
        ss[_LENGTHS_BASE] = generated
        ss[_LENGTHS_SOURCE] = source
    lengths, error = sequence_editor(_LENGTHS, "Per-sequence lengths", "context_len",
                                     [(0, limits.MAX_CONTEXT)] * settings.batch_size,
                                     reset=("Redraw from spread", generated))
    return (None if lengths == generated else lengths), error


def _new_tokens(settings: Settings | None) -> tuple[int | tuple[int, ...], str | None]:
    """The new tokens: one number for all (1 to MAX_QUERY_LEN), or per sequence
    (:func:`~ui.inputs.sequence_editor`, each from 1 to its context, at most
    MAX_QUERY_LEN), starting from the number; ``settings`` (None when the lengths are
    in error) gives the contexts. Returns ``query_lens`` and an error (or None)."""
    ss = st.session_state
    choice(st, "New tokens", state.CONTEXT_MODES, key=QUERY_MODE, **KEEP, help=QUERY_HELP,
           format_func={"uniform": "Same for all", "ragged": "Ragged"}.get)
    if ss[QUERY_MODE] == "uniform" or settings is None:
        number = bounded_number_input(st, "New tokens per sequence", 1, limits.MAX_QUERY_LEN, step=1, key=QUERY_LEN,
                                      value=1, **KEEP, help=QUERY_HELP)
        return int(number), None
    lens = settings.context_lens()
    contexts = (lens,) * settings.batch_size if isinstance(lens, int) else tuple(lens)
    base = f"{_QUERIES}_base"
    if len(ss.get(base, ())) != len(contexts):  # first shown, or the batch changed: the number, for all
        ss[base] = tuple(max(1, min(int(ss.get(QUERY_LEN) or 1), n)) for n in contexts)
    values, error = sequence_editor(_QUERIES, "Per-sequence new tokens", "new_tokens",
                                    [(1, min(limits.MAX_QUERY_LEN, max(1, n))) for n in contexts],
                                    shown={"ctx": contexts}, short="new")
    return (tuple(ss[base]) if values is None else values), error


def render_sidebar(page: str | None = None) -> SidebarResult:
    """Draw the shared sidebar and return its settings and config (or error).

    ``page`` is the URL path of the page this run draws: its own controls' URL keys
    (:data:`explorer.page_urls.URL_FIELDS`) are kept in the URL, other pages' dropped."""
    st.session_state[_PAGE] = page
    _load_from_url(page)
    _pin_widgets()
    ss = st.session_state
    error = None
    with st.sidebar:
        _mode_badge()
        # Over the URL notes, which a hostile URL makes long: a speaker finds it in view.
        st.toggle("Presentation mode", key=WIDGET_KEYS["present"], **KEEP,
                  help="larger text and charts, readable from the back of a room")
        notes = ss.get(_NOTES, ())
        if notes:
            st.warning(notes_box(notes), icon=":material/link_off:")
        if notes and st.button("Dismiss the URL notes", key="sb_dismiss_url_notes", width="stretch"):
            ss[_NOTES] = ()
            st.rerun()

        st.subheader("Batch")
        bounded_number_input(st, "Batch size (sequences)", 1, limits.MAX_BATCH, step=1, key=WIDGET_KEYS["batch_size"],
                             **KEEP)
        choice(
            st, "Context length", state.CONTEXT_MODES, key=WIDGET_KEYS["context_mode"], **KEEP,
            format_func={"uniform": "Same for all", "ragged": "Ragged"}.get,
        )
        lengths = None
        if ss[WIDGET_KEYS["context_mode"]] == "uniform":
            bounded_number_input(st, "Tokens per sequence", 0, limits.MAX_CONTEXT, step=16,
                                 key=WIDGET_KEYS["context_len"], **KEEP)
        else:
            st.selectbox("Spread", state.SPREADS, key=WIDGET_KEYS["spread"], **KEEP,
                         help="long-tail draws log-uniformly: most sequences short, a few long, as in chat traffic")
            lo, hi = st.columns(2)
            bounded_number_input(lo, "Shortest", 0, limits.MAX_CONTEXT, step=16, key=WIDGET_KEYS["ragged_low"], **KEEP,
                                 note_parent=st)
            bounded_number_input(hi, "Longest", 0, limits.MAX_CONTEXT, step=16, key=WIDGET_KEYS["ragged_high"], **KEEP,
                                 note_parent=st)
            lengths, error = _ragged_editor(_read_settings())
        query_lens, query_error = _new_tokens(None if error else replace(_read_settings(), lengths=lengths))
        error = error or query_error
        bounded_number_input(
            st, "Shared prefix (tokens)", 0, limits.MAX_CONTEXT, step=16, key=WIDGET_KEYS["shared_prefix"], **KEEP,
            help="tokens at the start of every sequence that its group shares (one system prompt): the prefix's "
                 "whole blocks are physically shared, the same block ids in every member's block table; the "
                 "block holding its last partial tokens is each sequence's own, as copy-on-write leaves it",
        )
        if ss[WIDGET_KEYS["shared_prefix"]]:  # kept while hidden (persist_state)
            bounded_number_input(
                # At most one group per sequence; a batch cut below the groups afterwards (or a URL's
                # groups) is not clamped but refused in these words (Settings.check_prefix).
                st, "Prefix groups", 1, int(ss[WIDGET_KEYS["batch_size"]]), step=1, key=WIDGET_KEYS["prefix_groups"],
                **KEEP,
                help="groups of consecutive sequences, each sharing a prefix of its own (1: the whole batch "
                     "shares one); groups share no blocks with each other",
            )

        st.subheader("Model")
        st.selectbox("Preset", state.PRESET_NAMES, key=WIDGET_KEYS["preset"], **KEEP, on_change=_on_preset,
                     help="fills the head fields and the attention options; editing them switches to Custom")
        _layer_picker()
        bounded_number_input(st, "Query heads", 1, limits.MAX_HEADS, step=1, key=WIDGET_KEYS["num_heads"], **KEEP,
                             on_change=_on_model)
        options = state.kv_head_options(ss[WIDGET_KEYS["num_heads"]])
        if ss[WIDGET_KEYS["num_kv_heads"]] not in options:
            ss[WIDGET_KEYS["num_kv_heads"]] = state.nearest_kv_heads(
                ss[WIDGET_KEYS["num_heads"]], ss[WIDGET_KEYS["num_kv_heads"]]
            )
        kv, dim = st.columns(2)
        kv.selectbox("KV heads", options, key=WIDGET_KEYS["num_kv_heads"], **KEEP, on_change=_on_model,
                     help="only divisors of the query heads: each KV head serves a group of query heads (GQA)")
        kv_note = ss.get(KV_HEADS_NOTE)
        if kv_note is not None:
            if ss[WIDGET_KEYS["num_kv_heads"]] == kv_note[0]:
                st.warning(kv_note[1], icon=":material/vertical_align_center:")
            else:  # changed since
                ss.pop(KV_HEADS_NOTE, None)
        bounded_number_input(dim, "Head dim", 1, limits.MAX_HEAD_DIM, step=1, key=WIDGET_KEYS["head_dim"], **KEEP,
                             on_change=_on_model, note_parent=st)
        _attention_controls()

        st.subheader("Cache")
        # One a row: at presentation mode's 18 px text, "Compute dtype" beside the block
        # size wrapped and pushed its box below its neighbour's.
        st.selectbox("Block size", state.BLOCK_SIZES, key=WIDGET_KEYS["block_size"],
                     **KEEP, help="tokens per physical block")
        st.selectbox("Compute dtype", state.DTYPE_NAMES, key=WIDGET_KEYS["dtype"], **KEEP,
                     help="of the query and the output, and of the arithmetic around them")
        st.selectbox("KV-cache dtype", state.KV_CACHE_DTYPES, key=WIDGET_KEYS["kv_dtype"], **KEEP,
                     format_func=lambda d: formatting.kv_dtype_label(None if d == state.SAME_AS_COMPUTE else d),
                     help="how K and V are stored: in the compute dtype, or as 8-bit floats (1 byte per value) "
                          "that the kernels multiply by a scale as they read them")
        if ss[WIDGET_KEYS["kv_dtype"]] != state.SAME_AS_COMPUTE:  # kept while hidden (persist_state)
            choice(st, "Scales", KV_SCALES, key=WIDGET_KEYS["kv_scale"], **KEEP,
                   format_func=formatting.KV_SCALE_LABELS.get,
                   help="one scale for all of K (and one for V), or one per KV head; each scale maps "
                        "the largest value it covers to fp8's largest number")
        st.selectbox("Block layout", BLOCK_LAYOUTS, key=WIDGET_KEYS["block_layout"], **KEEP,
                     help="contiguous: blocks in order; shuffled: a random permutation of the pool; "
                          "fragmented: the free list left after other sequences came and went")
        st.selectbox("Spare blocks in the pool", state.POOL_HEADROOMS, key=WIDGET_KEYS["pool_headroom"], **KEEP,
                     format_func=lambda p: "an eighth (default)" if p == 0 else f"{p}% of the blocks used",
                     help="free blocks beyond those the batch needs; with more room the fragmented layout "
                          "interleaves the batch with other sequences' blocks")
        dev, seed = st.columns(2)
        dev.selectbox("Device", state.DEVICES, key=WIDGET_KEYS["device"], **KEEP)
        bounded_number_input(seed, "Seed", 0, limits.MAX_SEED, step=1, key=WIDGET_KEYS["seed"], **KEEP,
                             note_parent=st)

        st.subheader("Timing")
        wu, it = st.columns(2)
        # "Iterations", the detail in its help: "Timed iterations" wrapped at 18 px.
        bounded_number_input(wu, "Warm-up", 0, limits.MAX_WARMUP, step=1, key=WIDGET_KEYS["warmup"],
                             **KEEP, note_parent=st, help="untimed calls of each implementation first")
        bounded_number_input(it, "Iterations", 1, limits.MAX_ITERS, step=1, key=WIDGET_KEYS["iters"], **KEEP,
                             note_parent=st, help="timed calls of each implementation, after the warm-up")

        settings = replace(_read_settings(), lengths=lengths, query_lens=query_lens)
        config = None
        if error is None:
            try:
                config = settings.config()
            except ValueError as exc:
                error = str(exc)
        _memory_readout(config, page)

    ss[_LOADED] = True
    _write_url(settings)
    result = SidebarResult(settings, config, error, tuple(ss.get(_NOTES, ())))
    ss[_RESULT] = result
    return result


def _layer_picker() -> None:
    """Which kind of layer a decode step is of, for a preset whose layers differ; it sets the window."""
    preset = state.MODEL_PRESETS.get(st.session_state[WIDGET_KEYS["preset"]])
    if preset is None or not preset.mixed:
        return
    choice(st, "Layer", tuple(preset.layer_counts()), key=WIDGET_KEYS["layer"], **KEEP, required=True,
           format_func=lambda kind: layer_label(kind, preset.window), on_change=_on_layer,
           help=f"{preset.describe()}; a decode step runs one layer's attention")


def _attention_controls() -> None:
    """The Attention expander: sliding window, logit soft-cap, attention sinks (a preset fills them)."""
    ss = st.session_state
    attention = _read_settings().attention()
    label = f"Attention: {formatting.attention_text(attention.window, attention.soft_cap, attention.sinks)}"
    with st.expander(label, key="sb_attention", expanded=attention != state.Attention()):
        on, box = OPTION_KEYS["window"]
        st.toggle("Sliding window", key=on, **KEEP, on_change=_on_model,
                  help="each query attends to its sequence's last W positions only; the table's blocks before "
                       "the window are not read (Mistral, Gemma's local layers, gpt-oss)")
        if ss[on]:
            bounded_number_input(st, "Window (tokens)", 1, limits.MAX_WINDOW, step=1, key=box, **KEEP,
                                 on_change=_on_model)
        on, box = OPTION_KEYS["soft_cap"]
        st.toggle("Logit soft-cap", key=on, **KEEP, on_change=_on_model,
                  help="each scaled logit s becomes cap x tanh(s / cap): bounded to (-cap, cap) (Gemma 2)")
        if ss[on]:
            bounded_number_input(st, "Cap", limits.MIN_SOFT_CAP, limits.MAX_SOFT_CAP, step=1.0, key=box,
                                 format="%.1f", **KEEP, on_change=_on_model)
        st.toggle("Attention sinks", key=WIDGET_KEYS["sinks"], **KEEP, on_change=_on_model,
                  help="one learned logit per query head joins the softmax's denominator and attends to nothing, "
                       "so a head can give little weight to every token (gpt-oss); here drawn at random")


def _memory_readout(config: DecodeConfig | None, page: str | None = None) -> None:
    st.subheader("Memory")
    if page in OWN_BATCH_PAGES:  # its own pool, block size and batch beside these numbers (review 3)
        st.caption(":material/info: Of the sidebar's batch and block size, which the other pages use: "
                   "this page simulates a pool, block size and batch of its own, set on the page.")
    if config is None:
        st.caption("No valid configuration.")
        return
    m = readouts.memory_summary(config)
    number = formatting.format_number
    st.markdown(
        f"- KV cache: **{formatting.format_bytes(m.kv_cache_bytes)}** (K + V pool, {m.kv_dtype}: "
        f"{formatting.count(m.kv_element_bytes, 'byte')} per value)\n"
        f"- With query, output and block table: {formatting.format_bytes(m.total_bytes)}\n"
        f"- Blocks: **{number(m.blocks_used)}** used of {number(m.blocks_in_pool)} in the pool\n"
        f"- Slots wasted in partly filled last blocks: **{number(m.wasted_slots)}** "
        f"({formatting.format_percent(m.wasted_fraction)})"
    )
    if config.has_query_lens:
        st.markdown(f"- Query and output rows: **{number(config.num_query_tokens)}**, the new tokens of "
                    f"{formatting.count(config.batch_size, 'sequence')}")
    if config.window is not None:
        st.markdown(f"- K and V read per step: **{formatting.format_bytes(config.needed_kv_bytes())}**, the "
                    f"sliding window's tokens only")
    if config.shared_prefix:
        st.markdown(f"- Shared prefix: **{formatting.count(config.shared_blocks, 'block')}** held once for "
                    f"each of {formatting.count(config.prefix_groups, 'group')}")


def take_page_query(page: str) -> dict[str, str]:
    """The URL values of ``page``'s own controls that the session's first URL held,
    once: a second call gets ``{}`` (a page reads its URL when its widgets are first
    created in a session)."""
    ss = st.session_state
    held = ss.get(_PAGE_QUERY)
    if not held or held[0] != page:
        return {}
    ss[_PAGE_QUERY] = (None, {})
    return dict(held[1])


def sync_url() -> None:
    """Write the URL again, with the values the open page's controls hold now
    (a page calls it once its controls are drawn)."""
    result = st.session_state.get(_RESULT)
    if result is not None:
        _write_url(result.settings)


def _write_url(settings: Settings) -> None:
    """The sidebar's settings, then the open page's own controls: from their widgets,
    or (until the page has read them) as the URL held them."""
    ss = st.session_state
    page = ss.get(_PAGE)
    wanted = state.settings_to_query(settings)
    held = ss.get(_PAGE_QUERY)
    if held and held[0] == page:
        wanted.update(held[1])
    wanted.update(page_urls.page_query(page, ss))
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def show_config_error(result: SidebarResult) -> bool:
    """Show the configuration error on the page; True when there was one."""
    if result.error is not None:
        st.error(f"**Invalid configuration.** {formatting.sentence(result.error)}", icon=":material/error:")
        return True
    return False
