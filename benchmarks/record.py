"""Record the classic table on this GPU as a set the app can show on any machine.

Runs ``python -m paged_attention.bench`` (the classic configurations: (2, 60),
(1, 512), (16, 256), (4, 2048) at 32 heads, 8 KV heads, head_dim 128, block_size 16,
float16) once per block layout, measures the device-to-device copy bandwidth in the
same process, and writes

* ``--out`` (a CSV): the CLI's rows with a ``layout`` column in front;
* the JSON of the same name beside it: GPU, SM count, memory, driver, CUDA, torch,
  Triton, date, copy bandwidth, the shared configuration and this command.

The pair is then read back with :func:`explorer.recorded.load_recorded_set`, the
loader of the app's "Recorded on a GPU" section, so a set that the app would refuse
is never left without an error. Put it in ``explorer/recorded_runs/`` to ship it.

    python -m benchmarks.record --out explorer/recorded_runs/h200_2026-12-01.csv

Exit status 1 when an implementation is incorrect (the set is still written).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

from paged_attention import bench
from paged_attention.timing import measure_copy_bandwidth


def driver_version() -> str:
    """The NVIDIA driver version from ``nvidia-smi``, or ``"unknown"`` without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def write_recorded(table: pd.DataFrame, meta: dict, out: str | Path) -> Path:
    """Write a recorded set (``out`` and its ``.json``) and read it back to check it.

    Parameters
    ----------
    table : pd.DataFrame
        Rows of :data:`explorer.recorded.REQUIRED_COLUMNS` (and any more).
    meta : dict
        The sidecar's content (:data:`explorer.recorded.REQUIRED_META`).
    out : str or Path
        The CSV to write; the JSON gets the same stem.

    Returns
    -------
    Path
        The CSV written.

    Raises
    ------
    ValueError
        If the pair breaks a rule of :func:`explorer.recorded.load_recorded_set`
        (both files are left in place, to look at).
    """
    from explorer.recorded import load_recorded_set

    out = Path(out)
    table.to_csv(out, index=False)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    load_recorded_set(out)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m benchmarks.record", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="CSV to write (its .json goes beside it)")
    p.add_argument("--layouts", nargs="+", choices=["contiguous", "shuffled"], default=["contiguous", "shuffled"])
    p.add_argument("--title", help="how the app names the set (default: GPU, classic table, date)")
    args = p.parse_args(argv)
    if not args.out.endswith(".csv"):
        p.error(f"--out must name a .csv file; got {args.out}")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        p.error(f"--out {args.out}: folder {folder} does not exist")
    if not torch.cuda.is_available():
        sys.exit("benchmarks.record needs a CUDA GPU (it records GPU timings); none is visible here. "
                 "The sets recorded on an H200 ship in explorer/recorded_runs/.")

    import triton

    frames, status = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for layout in args.layouts:
            path = os.path.join(tmp, f"{layout}.csv")
            status = max(status, bench.main(["--layout", layout, "--device", "cuda", "--csv", path]))
            if not os.path.exists(path):
                sys.exit(f"python -m paged_attention.bench --layout {layout} wrote no table (status {status})")
            frames.append(pd.read_csv(path).assign(layout=layout))
    table = pd.concat(frames, ignore_index=True)
    table = table[["layout", *[c for c in table.columns if c != "layout"]]]
    copy_gbps = measure_copy_bandwidth("cuda")

    defaults = bench.build_parser().parse_args([])
    props = torch.cuda.get_device_properties(0)
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    meta = {
        "format": 1,
        "title": args.title or f"{props.name}, classic table, {date}",
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "memory_mib": props.total_memory // 2**20,
        "driver": driver_version(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": date,
        "copy_gbps": round(copy_gbps, 1),
        "copy_note": "measured in the same process, after the tables",
        "harness": "Timed with paged_attention.timing's interleaved rounds (call latency with the GPU idle "
                   "at the start, GPU time from CUDA-graph replays, L2 flushed before each call).",
        "config": {k: getattr(defaults, k) for k in ("num_heads", "num_kv_heads", "head_dim", "block_size",
                                                     "dtype", "warmup")},
        "command": " ".join(["python -m benchmarks.record", *argv]),
    }
    out = write_recorded(table, meta, args.out)
    print(f"recorded {len(table)} rows on {props.name} (copy {copy_gbps:,.0f} GB/s): {out} and "
          f"{out.with_suffix('.json')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
