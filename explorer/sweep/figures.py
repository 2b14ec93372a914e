"""Figures of parameter sweeps (DataFrames of :data:`~explorer.sweep.runs.SWEEP_COLUMNS`):
latency, bandwidth, speedup and the ratio of two sources along the swept axis.

Where a sliding window meets the context, the first three mark it with a dashed
vertical line (:func:`window_limit`): at the window on the context-length axis
(past it, a step reads the same tokens), at the context on the window axis (past
it, a window reads everything).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.category_ticks import log_ticks
from explorer.formatting import (LOG_TICK_D3, axis_value_texts, MS_D3, SIG3_D3, compact, format_gbps,
                                 kv_dtype_label, line_count, wrap_at_separators)
from explorer.legend_layout import fit_legend
from explorer.sweep.dodge import axis_values, hover_texts, log_x, set_dodge_range, x_dodge
from explorer.sweep.naive_budget import checked_predictions
from explorer.style import (
    HALF_PLOT_WIDTH_PX,
    IMPL_COLORS,
    LINE_HEIGHT,
    apply_style,
    font_px,
    impl_color,
    label_log_hlines,
    line_chars,
    log_axis_range,
    no_data_figure,
    plot_area_height,
    plot_width_px,
    scaled,
    with_alpha,
)

#: Line dash and marker of each source of a sweep chart (this session, then uploads).
SOURCE_DASHES: tuple[str, ...] = ("solid", "dash", "dot", "dashdot")
SOURCE_SYMBOLS: tuple[str, ...] = ("circle", "diamond", "square", "triangle-up")
SKIPPED_SYMBOL = "circle-open"
#: A log y axis once the data spans this factor (x: :data:`explorer.sweep.dodge.LOG_X_SPAN`).
LOG_Y_SPAN = 10
#: Characters per line of a skipped point's hover note (it would run past a half-width chart).
HOVER_CHARS = 48
def _sources(frame) -> list[str]:
    return list(dict.fromkeys(frame["source"].astype(str))) if len(frame) else []


def source_series(frame) -> list[tuple[str, str, object]]:
    """``(name, source, rows)`` of each line style: a source, or where the frame
    holds more than one KV-cache dtype (a sweep comparing caches), each source's
    cache dtypes, named ``"fp8 e4m3"`` (one source) or ``"this session · fp8 e4m3"``."""
    if not len(frame):
        return []
    caches = (frame["kv_dtype"].fillna("").astype(str) if "kv_dtype" in frame
              else frame["source"].astype(str).map(lambda _: ""))
    kinds = list(dict.fromkeys(c for c in caches if c))
    sources = _sources(frame)
    out = []
    for source in sources:
        mine = frame["source"].astype(str) == source
        if len(kinds) <= 1:
            out.append((source, source, frame[mine]))
            continue
        for kind in dict.fromkeys(caches[mine]):
            label = kv_dtype_label(kind) if kind else "cache unknown"
            out.append((label if len(sources) == 1 else f"{source} · {label}", source, frame[mine & (caches == kind)]))
    return out


def impl_order(frame) -> list[str]:
    present = set(frame["implementation"].astype(str))
    known = [n for n in IMPL_COLORS if n in present]
    return known + sorted(present - set(known))


def impl_label(name: str) -> str:
    from paged_attention.implementations import LABELS

    return LABELS.get(name, name)


def axis_title(frame) -> str:
    from explorer.sweep.grid import AXES

    axes = frame["axis"].dropna().astype(str).unique().tolist() if len(frame) else []
    return AXES.get(axes[0], axes[0]) if axes else ""


def sweep_x_axis(fig: go.Figure, values: Sequence[float], title: str, **kw) -> None:
    values = axis_values(values)
    log = log_x(values)
    fig.update_xaxes(title=title, type="log" if log else "linear", zeroline=False, **kw)
    if log:  # Plotly's own ticks, past 16 values
        fig.update_xaxes(tickformat=LOG_TICK_D3, **kw)
    if values and len(values) <= 16:
        fig.update_xaxes(tickmode="array", tickvals=values, ticktext=axis_value_texts(values), **kw)


#: Colour of the dashed line where the window meets the context: an olive green, 20+
#: CIEDE2000 from every implementation's colour and the charts' greys and inks (violet
#: #7C3AED came 12 from Triton (prefix-aware)'s magenta, 15 from Triton's blue).
LIMIT_COLOR = "#4D7C0F"
#: Colours of the copy ceilings' lines and labels: the first source's the page's ink, any
#: other's a neutral grey, 20+ CIEDE2000 from every implementation's colour (slate
#: #6B7280 came 19 from Triton's blue).
CEILING_COLORS: tuple[str, str] = ("#111827", "#737373")


def window_limit(frame) -> tuple[float, str] | None:
    """Where the window meets the context on a sweep's axis, as ``(x, label)``, or None.

    On the ``context_len`` axis with one window in the first source's rows, the
    window (``"window 256"``); on the ``window`` axis, the longest context of the
    first source's rows (``"context 1,024"``, ``"longest context 1,024"`` for a
    ragged batch). None on other axes, without a window, when the rows disagree,
    or when ``x`` lies outside the values swept (nothing to see there).
    """
    if frame is None or not len(frame) or "axis" not in frame:
        return None
    first = frame[frame["source"].astype(str) == _sources(frame)[0]]
    axis = str(first["axis"].iloc[0])
    if axis == "context_len" and "window" in first:
        found = set(first["window"].dropna().astype(int))
        x, label = (found.pop(), "window") if len(found) == 1 else (None, "")
    elif axis == "window" and "context_len" in first:
        found = set(first["context_len"].dropna().astype(int))
        ragged = "context_lens" in first and first["context_lens"].astype(str).str.contains(r"\.\.").any()
        x, label = (found.pop(), "longest context" if ragged else "context") if len(found) == 1 else (None, "")
    else:
        return None
    values = first["value"].dropna().astype(float)
    if x is None or not len(values) or not values.min() <= x <= values.max():
        return None
    return float(x), f"{label} {compact(x)}"


def _mark_window_limit(fig: go.Figure, frame) -> None:
    """The dashed line of :func:`window_limit`, with its label at the top of the plot
    (call after the x axis is set: on a log axis the label's x is the log)."""
    limit = window_limit(frame)
    if limit is None:
        return
    x, label = limit
    fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                  line=dict(color=LIMIT_COLOR, dash="dash", width=1.6), name="window limit")
    fig.add_annotation(text=label, xref="x", yref="paper", x=math.log10(x) if fig.layout.xaxis.type == "log" else x,
                       y=1, xanchor="left", yanchor="top", xshift=4, showarrow=False,
                       font=dict(size=font_px("label"), color=LIMIT_COLOR), bgcolor="rgba(255,255,255,0.8)",
                       name="window limit")


def plot_px(fig: go.Figure) -> float:
    """Pixels between the top and bottom margins of ``fig`` (its plot area's height)."""
    return fig.layout.height - fig.layout.margin.t - fig.layout.margin.b


def y_log(fig: go.Figure, values: Sequence[float], span: float = LOG_Y_SPAN, **kw) -> bool:
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    log = len(finite) > 1 and max(finite) / min(finite) >= span
    fig.update_yaxes(type="log" if log else "linear", **kw)
    if log:
        fig.update_yaxes(tickformat=LOG_TICK_D3)
    return log


def _label_positions(xs, values) -> list[str]:
    """Where the label over each point at ``xs`` goes: over it, or beside it at either
    end of the axis (``values``), so that the plot's edge does not cut it."""
    lo, hi = float(values.min()), float(values.max())
    return ["top right" if x == lo and x < hi else "top left" if x == hi and x > lo else "top center"
            for x in (float(v) for v in xs)]


def trace_name(label: str, source: str, sources: Sequence[str]) -> str:
    return label if len(sources) <= 1 else f"{label} · {source}"


def sweep_latency_figure(frame, note: str | None = None) -> go.Figure:
    """Median call latency of each implementation across a sweep's axis.

    Log-log when the axis spans a factor of :data:`~explorer.sweep.dodge.LOG_X_SPAN` and the times a
    factor of :data:`LOG_Y_SPAN`. Error bars span p20 to p80; each implementation
    (and line style) is dodged a few pixels along x (:func:`x_dodge`), so that bars
    at one value stand apart; the hover names the true value. Points the naive
    implementation skipped (over its time budget) are open circles at the
    predicted time, so they read as skipped, not missing (a prediction that
    contradicts a measured point re-derived from it:
    :func:`~explorer.sweep.naive_budget.checked_predictions`).

    Parameters
    ----------
    frame : DataFrame
        Rows with the columns of :data:`~explorer.sweep.runs.SWEEP_COLUMNS`
        (one or more ``source`` values: this session, uploads).
    note : str, optional
        Words appended to the subtitle (e.g. which GPU a recorded source ran on,
        named once there rather than in every legend entry).

    Returns
    -------
    go.Figure
        Per source and implementation one ``"lines+markers"`` trace of timed points
        (``x`` = axis value dodged, ``y`` = median ms, ``customdata`` rows ``[p20,
        p80, axis value]``, ``meta`` = ``{"implementation", "source", "kind":
        "timed"}``), and, where points were skipped, one marker trace with
        ``meta["kind"] == "skipped"`` (``y`` = predicted ms, ``customdata`` rows
        ``[note, axis value]``).
    """
    fig = go.Figure()
    title = "Latency across the sweep"
    if frame is None or not len(frame):
        return no_data_figure(fig, "No points yet.", title)
    frame, _ = checked_predictions(frame)
    series = source_series(frame)
    sources = [name for name, _, _ in series]
    slots = [(si, name) for si, (_, _, part) in enumerate(series) for name in impl_order(part)]
    shift = x_dodge(frame["value"].tolist(), len(slots))
    _texts = hover_texts(frame["value"].tolist())
    ys: list[float] = []
    for si, (source, _, part) in enumerate(series):
        for name in impl_order(part):
            rows = part[part["implementation"] == name].sort_values("value")
            color, label = impl_color(name), impl_label(name)
            slot = slots.index((si, name))
            ok = rows[rows["status"] == "ok"]
            if len(ok):
                med = ok["median_ms"].to_numpy(float)
                hi = np.nan_to_num(ok["p80_ms"].to_numpy(float) - med, nan=0.0).clip(min=0)
                lo = np.nan_to_num(med - ok["p20_ms"].to_numpy(float), nan=0.0).clip(min=0)
                ys += [*med, *(med + hi), *(med - lo)]
                fig.add_trace(go.Scatter(
                    x=shift(slot, ok["value"]), y=med, mode="lines+markers", name=trace_name(label, source, sources),
                    legendgroup=f"{name}", line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                    marker=dict(color=color, size=8, symbol=SOURCE_SYMBOLS[si % 4]),
                    error_y=dict(type="data", array=hi, arrayminus=lo, color=with_alpha(color, 0.5), thickness=1.2, width=3),
                    customdata=np.stack([ok["p20_ms"].to_numpy(float), ok["p80_ms"].to_numpy(float),
                                         ok["value"].to_numpy(float)], axis=-1), hovertext=_texts(ok["value"]),
                    hovertemplate=f"{label} ({source})<br>%{{hovertext}}: median %{{y:{MS_D3}}} ms"
                    f"<br>p20–p80 %{{customdata[0]:{MS_D3}}}–%{{customdata[1]:{MS_D3}}} ms<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": "timed"},
                ))
            skipped = rows[rows["status"] == "skipped"]
            if len(skipped):
                pred = skipped["predicted_ms"].to_numpy(float)
                ys += list(pred[np.isfinite(pred)])
                fig.add_trace(go.Scatter(
                    x=shift(slot, skipped["value"]), y=pred, mode="markers+text",
                    name=trace_name(f"{label}: skipped", source, sources), legendgroup=f"{name}",
                    marker=dict(color=color, size=12, symbol=SKIPPED_SYMBOL, line=dict(width=2, color=color)),
                    text=["skipped"] * len(skipped), textposition=_label_positions(skipped["value"], frame["value"]),
                    textfont=dict(size=font_px("label"), color=color), cliponaxis=False,
                    customdata=np.stack([np.array([wrap_at_separators(n, HOVER_CHARS)
                                                   for n in skipped["note"].astype(str)], dtype=object),
                                         skipped["value"].to_numpy(float).astype(object)], axis=-1),
                    hovertext=_texts(skipped["value"]),
                    hovertemplate=f"{label} ({source})<br>%{{hovertext}}: %{{customdata[0]}}<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": "skipped"},
                ))
    skipped_any = bool((frame["status"] == "skipped").any())
    subtitle = "median call latency; bars span p20–p80"
    if skipped_any:
        subtitle += "; ○ = skipped, drawn at its predicted time"
    if len(sources) > 1:
        origins = len(_sources(frame))
        subtitle += "; line style = " + ("source" if len(sources) == origins else "KV cache" if origins == 1
                                         else "source and KV cache")
    if note:
        subtitle += f"; {note}"
    apply_style(fig, title, subtitle, height=440)
    sweep_x_axis(fig, frame["value"].tolist(), axis_title(frame))
    set_dodge_range(fig, frame["value"].tolist(), len(slots))
    _mark_window_limit(fig, frame)
    if y_log(fig, ys, title="latency (ms)"):
        log_axis_range(fig, ys, 0.2, 0.55 if skipped_any else 0.35)  # room for the "skipped" labels
    fit_legend(fig)
    return fig


def _best_gbps(rows) -> np.ndarray:
    gpu = rows["gpu_gbps"].to_numpy(float)
    call = rows["gbps"].to_numpy(float)
    return np.where(np.isfinite(gpu), gpu, call)


def sweep_bandwidth_figure(frame, note: str | None = None) -> go.Figure:
    """Achieved bandwidth across a sweep against the device's ceiling (roofline style).

    Each point is the bytes a decode step must move over its time: GPU time
    (CUDA graph, no launch overhead) where measured, else call latency. Each
    source's measured copy bandwidth (the ``copy_gbps`` column) is drawn as its
    ceiling; without one (the CPU) a note says there is none. ``note`` is appended
    to the subtitle (as in :func:`sweep_latency_figure`).

    Returns
    -------
    go.Figure
        One ``"lines+markers"`` trace per source and implementation (``meta`` as in
        :func:`sweep_latency_figure`); one dashed line shape per ceiling, whose
        ``y0`` is the copy bandwidth in GB/s.
    """
    fig = go.Figure()
    title = "Achieved bandwidth and the copy ceiling"
    if frame is None or not len(frame):
        return no_data_figure(fig, "No points yet.", title)
    _texts = hover_texts(frame["value"].tolist())
    series = source_series(frame)
    sources = [name for name, _, _ in series]
    ys: list[float] = []
    ceilings: list[tuple[str, float, str]] = []
    label_lines = 0
    for si, (source, origin, part) in enumerate(series):
        copy = part["copy_gbps"].to_numpy(float)
        copy = copy[np.isfinite(copy) & (copy > 0)]
        if len(copy) and origin not in [c[0] for c in ceilings]:  # one ceiling per source (its device)
            whole = frame[frame["source"].astype(str) == origin]["copy_gbps"].to_numpy(float)
            device = part["device_name"].astype(str).iloc[0] if "device_name" in part else ""
            ceilings.append((origin, float(np.median(whole[np.isfinite(whole) & (whole > 0)])), device))
        for name in impl_order(part):
            rows = part[(part["implementation"] == name) & (part["status"] == "ok")].sort_values("value")
            if not len(rows):
                continue
            color, label = impl_color(name), impl_label(name)
            gbps = _best_gbps(rows)
            ys += list(gbps)
            ceiling = next((c[1] for c in ceilings if c[0] == origin), None)
            pct = 100 * gbps / ceiling if ceiling else np.full(len(gbps), np.nan)
            fig.add_trace(go.Scatter(
                x=rows["value"].to_numpy(float), y=gbps, mode="lines+markers", name=trace_name(label, source, sources),
                legendgroup=name, line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                marker=dict(color=color, size=8, symbol=SOURCE_SYMBOLS[si % 4]),
                customdata=pct, hovertext=_texts(rows["value"]),
                hovertemplate=f"{label} ({source})<br>%{{hovertext}}: %{{y:{SIG3_D3}}} GB/s"
                + ("<br>%{customdata:.0f}% of the ceiling" if np.isfinite(pct).any() else "") + "<extra></extra>",
                meta={"implementation": name, "source": source, "kind": "timed"},
            ))
    for i, (source, gbps, device) in enumerate(ceilings):
        ys.append(gbps)
        where = f" ({device})" if device else ""
        # Beside another source the label names its source, not its device (the
        # source's name or the subtitle says which device), so that it fits.
        text = (f"copy ceiling {format_gbps(gbps)} GB/s · {source}" if len(_sources(frame)) > 1
                else f"ceiling: copy bandwidth {format_gbps(gbps)} GB/s{where}")
        # Broken into lines across the plot: at presentation size it ran past the chart's edge.
        text = wrap_at_separators(text, line_chars("body", plot_width_px(HALF_PLOT_WIDTH_PX)))
        label_lines = max(label_lines, line_count(text))
        fig.add_hline(
            y=gbps, line=dict(color=CEILING_COLORS[min(i, 1)], dash="dash" if i == 0 else "dot", width=1.4),
            annotation_text=text,
            # Alternate sides so that two close ceilings keep their labels apart.
            annotation_position="top left" if i % 2 == 0 else "bottom right", annotation_font=dict(size=font_px("body"), color=CEILING_COLORS[min(i, 1)]),
            annotation_align="left" if i % 2 == 0 else "right",
        )
    if not ceilings:
        fig.add_annotation(
            text="No ceiling on the CPU",  # a GPU measure; longer, it ran off a half-page chart in presentation mode
            x=0, xref="paper", xanchor="left", y=1, yref="paper", yanchor="bottom", showarrow=False,
            font=dict(size=font_px("body"), color="#92400E"), bgcolor="rgba(254,243,199,0.9)",
        )
    subtitle = "bytes a decode step must move ÷ time; GPU time where measured, else call latency"
    if note:
        subtitle += f"; {note}"
    above = 0 if ceilings else 26  # room for the note above the plot
    apply_style(fig, title, subtitle, height=440, above_plot=above)
    sweep_x_axis(fig, frame["value"].tolist(), axis_title(frame))
    _mark_window_limit(fig, frame)
    # The share of the plot's height over the data that the ceiling's label takes.
    room = min(0.4, (label_lines * LINE_HEIGHT * font_px("body") + scaled(4)) / plot_area_height(440, subtitle, above))
    if y_log(fig, ys, span=20, title="GB/s"):
        finite = [v for v in ys if v is not None and math.isfinite(v) and v > 0]
        decades = math.log10(max(finite) / min(finite)) + 0.2
        log_axis_range(fig, ys, 0.2, max(0.3, room * decades / (1 - room)))
        label_log_hlines(fig)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max(ys, default=1) * max(1.15, 1 / (1 - room))])
    fit_legend(fig)
    return fig


def sweep_speedup_figure(frame, target: str = "triton") -> go.Figure:
    """Speedup of ``target`` over every other implementation across a sweep:
    the other's median ÷ the target's at each point (above 1: target faster).

    Points where the other implementation was skipped use its predicted time
    (:func:`~explorer.sweep.naive_budget.checked_predictions`) and are drawn as open circles.

    Returns
    -------
    go.Figure
        Per source and other implementation a timed trace and, where skipped, a
        skipped trace (``meta`` as in :func:`sweep_latency_figure`).
    """
    fig = go.Figure()
    label_t = impl_label(target)
    title = f"Speedup of {label_t} over the others"
    if frame is None or not len(frame) or not ((frame["implementation"] == target) & (frame["status"] == "ok")).any():
        return no_data_figure(fig, f"No {label_t} result to compare against.", title, height=400)
    frame, _ = checked_predictions(frame)
    series = source_series(frame)
    sources = [name for name, _, _ in series]
    _texts = hover_texts(frame["value"].tolist())
    ys: list[float] = []
    for si, (source, _, part) in enumerate(series):
        base = part[(part["implementation"] == target) & (part["status"] == "ok")].set_index("value")["median_ms"]
        base = base[~base.index.duplicated()]
        for name in impl_order(part):
            if name == target:
                continue
            rows = part[part["implementation"] == name].sort_values("value")
            rows = rows[rows["value"].isin(base.index)]
            color, label = impl_color(name), impl_label(name)
            for kind, status, column in (("timed", "ok", "median_ms"), ("skipped", "skipped", "predicted_ms")):
                sel = rows[rows["status"] == status]
                if not len(sel):
                    continue
                ratio = sel[column].to_numpy(float) / base.loc[sel["value"]].to_numpy(float)
                ys += list(ratio[np.isfinite(ratio)])
                timed = kind == "timed"
                fig.add_trace(go.Scatter(
                    x=sel["value"].to_numpy(float), y=ratio, mode="lines+markers" if timed else "markers",
                    name=trace_name(f"vs {label}" if timed else f"vs {label}: skipped", source, sources),
                    legendgroup=name, line=dict(color=color, width=2.2, dash=SOURCE_DASHES[si % 4]),
                    marker=dict(color=color, size=8 if timed else 12, symbol=SOURCE_SYMBOLS[si % 4] if timed
                                else SKIPPED_SYMBOL, line=dict(width=2, color=color)),
                    customdata=_texts(sel["value"]),
                    hovertemplate=f"{label_t} vs {label} ({source})<br>%{{customdata}}: %{{y:{SIG3_D3}}}× "
                    + ("faster" if timed else "(predicted; naive skipped)") + "<extra></extra>",
                    meta={"implementation": name, "source": source, "kind": kind},
                ))
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1),
                  annotation_text="same speed", annotation_position="bottom right")
    subtitle = f"median of each implementation ÷ median of {label_t}; above 1: {label_t} is faster"
    if any(t.meta["kind"] == "skipped" for t in fig.data if t.meta):
        subtitle += "; ○ = skipped, at its predicted time"
    apply_style(fig, title, subtitle, height=440)
    sweep_x_axis(fig, frame["value"].tolist(), axis_title(frame))
    _mark_window_limit(fig, frame)
    if y_log(fig, [*ys, 1.0], span=30, title="speedup (×)"):
        log_axis_range(fig, [*ys, 1.0], 0.25, 0.35)
        label_log_hlines(fig)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max([*ys, 1.0]) * 1.15])
    fit_legend(fig)
    return fig


def sweep_ratio_figure(
    frame, numerator: str, denominator: str, title: str = "Time ratio between the two sweeps"
) -> go.Figure:
    """Two sources side by side: each implementation's median at ``numerator``
    ÷ its median at ``denominator``, at the axis values both measured.

    Returns
    -------
    go.Figure
        One trace per implementation both sources timed (``meta["implementation"]``).
    """
    fig = go.Figure()
    _texts = hover_texts(frame["value"].tolist())
    ys: list[float] = []
    for name in impl_order(frame):
        def medians(source: str):
            rows = frame[(frame["source"] == source) & (frame["implementation"] == name) & (frame["status"] == "ok")]
            series = rows.set_index("value")["median_ms"]
            return series[~series.index.duplicated()]

        a, b = medians(numerator), medians(denominator)
        common = sorted(set(a.index) & set(b.index))
        if not common:
            continue
        ratio = a.loc[common].to_numpy(float) / b.loc[common].to_numpy(float)
        ys += list(ratio)
        color, label = impl_color(name), impl_label(name)
        fig.add_trace(go.Scatter(
            x=np.array(common, dtype=float), y=ratio, mode="lines+markers", name=label,
            line=dict(color=color, width=2.2), marker=dict(color=color, size=8),
            customdata=_texts(common),
            hovertemplate=f"{label}<br>%{{customdata}}: %{{y:{SIG3_D3}}}× the time<extra></extra>",
            meta={"implementation": name},
        ))
    if not ys:
        return no_data_figure(fig, "The two sweeps share no measured point.", title)
    fig.add_hline(y=1, line=dict(color="#9CA3AF", dash="dash", width=1))
    apply_style(fig, title, f"median time in “{numerator}” ÷ in “{denominator}”; below 1: the first is faster",
           height=400)
    sweep_x_axis(fig, frame["value"].tolist(), axis_title(frame))
    log = y_log(fig, [*ys, 1.0], span=10, title="time ratio (×)")
    if log:
        log_axis_range(fig, [*ys, 1.0], 0.2, 0.3)
    else:
        fig.update_yaxes(rangemode="tozero", range=[0, max([*ys, 1.0]) * 1.15])
    fit_legend(fig)
    if log:  # a decade or two: a few ratios, apart on the plot's height
        fig.update_yaxes(**log_ticks(*fig.layout.yaxis.range, plot_px(fig)))
    return fig
