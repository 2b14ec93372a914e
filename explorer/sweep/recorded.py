"""A recorded GPU sweep (a ``sweep`` kind of :mod:`explorer.bench.recorded`) beside
this session's: the subtitle naming its GPU, the settings in which the two differ,
the points both timed."""

from __future__ import annotations

import pandas as pd

from explorer.formatting import format_number


def recorded_note(gpu: str, beside: bool) -> str:
    """The chart subtitle's words naming the GPU once: ``"dashed: recorded on NVIDIA H200"``
    beside this session's sweep, else ``"recorded on NVIDIA H200"``."""
    return f"{'dashed: ' if beside else ''}recorded on {gpu}"


#: What the caption compares between a recorded sweep and this session's: the
#: frame's column, the JSON config's key, and how a difference reads.
SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("batch_size", "batch_size", "batch {} vs {}"),
    ("context_len", "context_lens", "context {} vs {}"),
    ("num_heads", "num_heads", "{} vs {} heads"),
    ("num_kv_heads", "num_kv_heads", "{} vs {} KV heads"),
    ("head_dim", "head_dim", "head_dim {} vs {}"),
    ("block_size", "block_size", "block size {} vs {}"),
    ("dtype", "dtype", "{} vs {}"),
    ("kv_dtype", "kv_dtype", "{} vs {} cache"),
    ("block_layout", "block_layout", "{} vs {} block table"),
)


def _one(frame: pd.DataFrame, column: str):
    """The one value ``column`` holds in ``frame`` (as text), or None."""
    if frame is None or column not in frame.columns:
        return None
    values = {str(v) for v in frame[column].dropna() if str(v) != ""}
    return values.pop() if len(values) == 1 else None


def _text(value) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return format_number(int(number) if number.is_integer() else number)


def setting_differences(rec, mine: pd.DataFrame) -> list[str]:
    """The settings (other than the swept axis) in which ``rec`` (a recorded sweep,
    :class:`explorer.bench.recorded.RecordedSet`) and this session's
    sweep ``mine`` differ, recorded first: ``["batch 8 vs 4", "32 vs 4 heads"]``.
    The recorded value comes from the JSON's ``config``, else from its rows; this
    session's from its rows (the sweep's config). Settings either lacks are left out."""
    config = rec.meta.get("config") or {}
    out = []
    for column, key, text in SETTINGS:
        if column == rec.axis:
            continue
        ours = config.get(key, config.get(column))
        ours = str(ours) if ours is not None else _one(rec.table, column)
        theirs = _one(mine, column)
        if ours is None or theirs is None or _text(ours) == _text(theirs):
            continue
        out.append(text.format(_text(ours), _text(theirs)))
    return out


def shared_points(a: pd.DataFrame, b: pd.DataFrame) -> list[float]:
    """Axis values at which some implementation was timed (status ok) in both frames."""
    def timed(frame):
        ok = frame[frame["status"] == "ok"]
        return {(str(i), float(v)) for i, v in zip(ok["implementation"], ok["value"])}
    return sorted({v for _, v in timed(a) & timed(b)})
