"""What ``benchmarks.decode_peers`` prints: a progress line per result row, then
the full table, GPU time and fraction of the copy bandwidth by implementation, and
the fp8 speedups; each configuration named with its attention options where a run
has any."""

from __future__ import annotations

from benchmarks.peers.implementations import ALL_IMPLS, FLASHINFER_ROWS, FP8_KV
from paged_attention.results import achieved_gbps, correct_text, parse_bool, present


def sidecar_notes(config_set: str, *, gpu: str, date: str, flashinfer: bool) -> dict:
    """What a peer run's sidecar says of itself: its title, how it timed, where the
    copy bandwidth comes from, and (``--set prefix``) which bytes its GB/s count."""
    notes = {
        "title": f"{gpu}, {config_set} set against SDPA" + (" and FlashInfer" if flashinfer else "") + f", {date}",
        "copy_note": "measured in the same run",
        "harness": "Timed with benchmarks.decode_peers: GPU time from CUDA-graph replays with the L2 flushed "
                   "before every call, and the plain-call latency; GB/s from GPU time.",
    }
    if config_set == "prefix":
        notes["gbps_note"] = ("GB/s and % of copy count the unique bytes: each shared block once "
                              "(DecodeConfig.unique_decode_bytes)")
    return notes


def options_text(row) -> str:
    """A row's attention options as one cell: ``"window 1024"``, ``"soft cap 50"``,
    ``"sinks"`` (joined by ", "), or ``""`` for none."""
    parts = []
    if present(row.get("window")):
        parts.append(f"window {int(row['window'])}")
    if present(row.get("soft_cap")):
        parts.append(f"soft cap {float(row['soft_cap']):g}")
    if present(row.get("sinks")) and row.get("sinks") != "" and parse_bool(row["sinks"]):
        parts.append("sinks")
    return ", ".join(parts)


#: The columns of the full table, and their headings.
PRINTED = {"kind": "kind", "dtype": "dtype", "kv_dtype": "kv_dtype", "batch_size": "batch", "context_lens": "lengths",
           "shared_prefix": "prefix", "prefix_groups": "groups", "block_size": "bs", "options": "options",
           "implementation": "impl",
           "gpu_time_ms": "gpu_ms", "median_ms": "call_ms", "achieved_gbps": "GB/s", "pct_of_copy_bw": "% of copy",
           "speedup_vs_triton_16bit": "vs triton 16-bit", "speedup_vs_own_16bit": "vs own 16-bit",
           "max_abs_err": "max_abs_err", "correct": "correct", "status": "status", "note": "note"}
#: What identifies a configuration in the summary tables.
CONFIGURATION = ["kind", "dtype", "kv_dtype", "batch_size", "context_lens", "shared_prefix", "prefix_groups",
                 "block_size", "options"]


def row_text(row: dict) -> str:
    """One progress line for a result row (GB/s on unique bytes, over GPU time)."""
    head = f"{row['kind']} {row['dtype']} kv={row['kv_dtype']} B={row['batch_size']} len={row['context_lens']} "
    if row["kind"] == "prefix" and present(row["unique_bytes"]):
        head += (f"(P={row['shared_prefix']} S={row['context_len'] - row['shared_prefix']} "
                 f"groups={row['prefix_groups']}; {row['bytes_moved'] / 1e6:.4g} MB logical, "
                 f"{row['unique_bytes'] / 1e6:.4g} MB unique) ")
    options = options_text(row)
    head += f"bs={row['block_size']} " + (f"[{options}] " if options else "") + f"{row['implementation']}: "
    if row["status"] != "ok":
        return head + f"{row['status']}: {row['note']}"
    pct = row["pct_of_copy_bw"]
    text = head + (f"{row['gpu_time_ms']:.4f} ms GPU, {row['median_ms']:.4f} ms call, "
                   f"{achieved_gbps(row, unique=True):.0f} GB/s, "
                   f"{'n/a' if pct is None else f'{pct:.0f}%'} of copy, correct={row['correct']}")
    for key, label in (("speedup_vs_triton_16bit", "x our Triton on the 16-bit cache"),
                       ("speedup_vs_own_16bit", "x itself on the 16-bit cache")):
        if row.get(key) is not None:
            text += f", {row[key]:.2f}{label}"
    return text + (f" [{row['note']}]" if row.get("note") else "")


def print_summary(rows: list[dict]) -> None:
    """The full table, then GPU time and fraction of copy by implementation, and the fp8 speedups."""
    import pandas as pd

    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    pd.set_option("display.max_columns", 40)
    table = pd.DataFrame([{**row, "achieved_gbps": achieved_gbps(row, unique=True), "options": options_text(row),
                           "correct": correct_text(row["correct"])} for row in rows]).fillna(float("nan"))
    prefix = (table["kind"] == "prefix").any()
    hidden = ([] if prefix else ["shared_prefix", "prefix_groups"]) + ([] if table["options"].ne("").any()
                                                                       else ["options"])
    cols = [c for c in PRINTED if c in table and c not in hidden]
    print(table[cols].rename(columns=PRINTED).to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""))
    ok = table[table["status"] == "ok"].copy()
    if ok.empty:
        return
    index = [c for c in CONFIGURATION if c not in hidden]
    ok["cell"] = [f"{ms:.4f} ({pct:.0f}%)" for ms, pct in zip(ok["gpu_time_ms"], ok["pct_of_copy_bw"])]
    order = [name for name in ALL_IMPLS if name in set(ok["implementation"])]
    wide = ok.pivot_table(index=index, columns="implementation", values="cell", aggfunc="first", sort=False)[order]
    ms = ok.pivot_table(index=index, columns="implementation", values="gpu_time_ms", sort=False)
    fi = [name for name in FLASHINFER_ROWS if name in ms]
    if "triton" in ms and fi:  # above 1: our Triton is faster than FlashInfer's better path
        wide["flashinfer_best/triton"] = (ms[fi].min(axis=1) / ms["triton"]).map(
            lambda x: "" if pd.isna(x) else f"{x:.2f}")
    print("\nGPU time in ms (fraction of the copy bandwidth) by implementation:")
    print(wide.fillna("").to_string())
    fp8 = ok[ok["kv_dtype"].isin(FP8_KV)]
    if "speedup_vs_triton_16bit" in fp8 and fp8["speedup_vs_triton_16bit"].notna().any():
        speed = fp8.pivot_table(index=index, columns="implementation", values="speedup_vs_triton_16bit", sort=False)
        print("\nfp8 cache: speedup over our Triton kernel on the 16-bit cache of the same configuration:")
        print(speed[[name for name in ALL_IMPLS if name in speed]].to_string(float_format=lambda x: f"{x:.2f}"))
