"""Record benchmark runs on this GPU as sets the app can show on any machine.

Three kinds of set, each a CSV of the one result schema and a JSON sidecar beside
it (:mod:`paged_attention.result_files`), read back with the app's loader
(:func:`explorer.bench.recorded.load_recorded_set`):

* the classic table (the default, below);
* a peer comparison (``--peers``): convert a ``python -m benchmarks.decode_peers``
  run from before the one schema, its CSV and its log, into a ``peers`` set (a run
  of today writes its sidecar itself: copy the pair as it is);
* sweeps (``--sweeps``): time the implementations along context length and batch
  size in the Sweep page's own CSV format, ``sweep`` sets.

The classic table
-----------------

Runs ``python -m paged_attention.bench`` (the classic configurations: (2, 60),
(1, 512), (16, 256), (4, 2048) at 32 heads, 8 KV heads, head_dim 128, block_size 16,
float16) once per block layout, measures the device-to-device copy bandwidth in the
same process, and writes

* ``--out`` (a CSV): the CLI's result rows of every layout;
* the JSON of the same name beside it: GPU, SM count, memory, driver, CUDA, torch,
  Triton, date, copy bandwidth and this command.

The pair is then read back with :func:`explorer.bench.recorded.load_recorded_set`, the
loader of the app's "Recorded on a GPU" section, so a set that the app would refuse
is never left without an error. Put it in ``explorer/bench/recorded_runs/`` to ship it.

    python -m benchmarks.record --out explorer/bench/recorded_runs/h200_2026-12-01.csv

Exit status 1 when an implementation is incorrect (the set is still written).

Peer comparisons
----------------
The CSV's rows are mapped onto the one result schema; the GPU, torch, Triton and
FlashInfer versions and the copy bandwidth come from the log's first lines
(``decode_peers`` prints them); the driver, CUDA version and date, which the log
does not hold, are given::

    python -m benchmarks.record --peers docs/data/v14_peers_ragged.csv --log docs/data/v14_peers_ragged.txt \
        --driver 580.159.04 --cuda 13.0 --date 2026-12-01 --out explorer/bench/recorded_runs/peers/h200_ragged_2026-12-01.csv

Sweeps
------
:data:`SWEEPS` (context length at batch 8, batch size at context 2048; float16,
32 heads, 8 KV heads, head_dim 128, block size 16; Naive PyTorch, Optimized PyTorch
and Triton, the naive loop skipped where its calls would pass ``--naive-budget``
seconds), one CSV per axis named ``<gpu>_<date>_<axis>.csv`` in the ``--out``
folder::

    python -m benchmarks.record --sweeps --out explorer/bench/recorded_runs/sweeps
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd
import torch

from benchmarks.peers.report import sidecar_notes
from paged_attention import bench
from paged_attention.result_files import read_results, sidecar, write_results
from paged_attention.results import utc_stamp
from paged_attention.timing import measure_copy_bandwidth


def write_recorded(rows: Iterable[Mapping] | pd.DataFrame, meta: dict, out: str | Path, **written) -> Path:
    """Write a recorded set (``out`` and its ``.json``,
    :func:`paged_attention.result_files.write_results`) and read it back to check it.

    Parameters
    ----------
    rows : iterable of dict, or pd.DataFrame
        Result rows (:data:`paged_attention.results.RESULT_COLUMNS`, and any more).
    meta : dict
        The sidecar (:func:`paged_attention.result_files.sidecar`; its ``kind``
        says which the set is).
    out : str or Path
        The CSV to write; the JSON gets the same stem.
    **written
        Passed on to :func:`~paged_attention.result_files.write_results` (``leading``).

    Returns
    -------
    Path
        The CSV written.

    Raises
    ------
    ValueError
        If the pair breaks a rule of :func:`explorer.bench.recorded.load_recorded_set`
        (both files are left in place, to look at).
    """
    from explorer.bench.recorded import load_recorded_set

    if isinstance(rows, pd.DataFrame):
        rows = rows.to_dict("records")
    out = write_results(rows, out, meta, **written)
    load_recorded_set(out, meta.get("kind"))
    return out


def _title(title: str, meta: dict) -> str:
    return title.replace("{gpu}", meta["gpu"]).replace("{date}", meta["date"])


# -- peer comparisons ------------------------------------------------------------------

_LOG_GPU = re.compile(r"^GPU (?P<gpu>.+?), (?P<sms>\d+) SMs; torch (?P<torch>\S+); Triton (?P<triton>[^;\s]+)"
                      r"(?:; FlashInfer (?P<flashinfer>\S+))?\s*$")
_LOG_COPY = re.compile(r"^measured device-to-device copy bandwidth: (?P<gbps>[\d.]+|nan|inf) GB/s")
_LOG_SET = re.compile(r"^set (?P<set>\w[\w-]*):")


def parse_peers_log(text: str) -> dict:
    """The GPU, SM count, torch, Triton and FlashInfer versions, copy bandwidth and
    set of a ``decode_peers`` log, from the lines it prints before its first row.

    Returns
    -------
    dict
        ``gpu``, ``sm_count``, ``torch``, ``triton``, ``flashinfer`` (None when it
        did not run), ``copy_gbps`` (GB/s), ``set``.

    Raises
    ------
    ValueError
        If a line is missing, or the copy bandwidth is not a positive number (a
        CPU run logs ``nan``).
    """
    found: dict = {}
    for line in text.splitlines()[:20]:
        if (m := _LOG_GPU.match(line)) and "gpu" not in found:
            found.update(gpu=m["gpu"], sm_count=int(m["sms"]), torch=m["torch"], triton=m["triton"],
                         flashinfer=m["flashinfer"])
        elif (m := _LOG_COPY.match(line)) and "copy_gbps" not in found:
            found["copy_gbps"] = float(m["gbps"])
        elif (m := _LOG_SET.match(line)) and "set" not in found:
            found["set"] = m["set"]
    for key, what in (("gpu", "'GPU <name>, <n> SMs; torch ...; Triton ...'"),
                      ("copy_gbps", "'measured device-to-device copy bandwidth: <n> GB/s'"),
                      ("set", "'set <name>: ...'")):
        if key not in found:
            raise ValueError(f"the log has no line {what} in its first 20 lines: is it a decode_peers log?")
    if not found["copy_gbps"] > 0:
        raise ValueError(f"the log's copy bandwidth is {found['copy_gbps']}: not a GPU run")
    return found


def convert_peers(csv_path: str | Path, log_path: str | Path, out: str | Path, *, driver: str, cuda: str,
                  date: str, command: str, title: str | None = None) -> Path:
    """Write a ``decode_peers`` run (its CSV and log) as a recorded peer set.

    The CSV's rows are read (:func:`paged_attention.result_files.read_results`,
    which maps an earlier schema's) and written to ``out`` in the one schema; the
    JSON beside it holds :func:`parse_peers_log`'s fields, ``driver``, ``cuda`` and
    ``date`` (which the log does not hold), the source files and ``command``. The
    pair is read back (:func:`write_recorded`).

    Raises
    ------
    ValueError
        If the log lacks a line :func:`parse_peers_log` needs, the CSV a cell of the
        wrong type, or the pair breaks a rule of
        :func:`explorer.bench.recorded.load_recorded_set` (left in place).
    """
    found = parse_peers_log(Path(log_path).read_text())
    rows, _ = read_results(csv_path)
    meta = {
        "format": 2, "kind": "peers", "set": found["set"],
        "gpu": found["gpu"], "sm_count": found["sm_count"], "driver": driver, "cuda": cuda,
        "torch": found["torch"], "triton": found["triton"],
        "peers": {"flashinfer": found["flashinfer"]} if found["flashinfer"] else {}, "date": date,
        "copy_gbps": found["copy_gbps"],
        **sidecar_notes(found["set"], gpu=found["gpu"], date=date, flashinfer=bool(found["flashinfer"])),
        "source": f"{Path(csv_path).as_posix()} and {Path(log_path).as_posix()}, rows mapped onto the one result "
                  "schema",
        "command": command,
    }
    if title:
        meta["title"] = title
    return write_recorded(rows, meta, out, leading=("kind",))


# -- sweeps ----------------------------------------------------------------------------

#: The sweeps ``--sweeps`` records: ``axis -> (the other size, the points)``.
SWEEPS: dict[str, tuple[dict, tuple[int, ...]]] = {
    "context_len": ({"batch_size": 8}, (512, 2048, 8192, 16384, 32768)),
    "batch_size": ({"context_lens": 2048}, (1, 4, 16, 64, 128)),
}
#: What every sweep point shares (the classic table's heads, head_dim and block size).
SWEEP_BASE = dict(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype="float16")


def sweep_rows(
    base, axis: str, values, names, *, warmup: int, iters: int, naive_budget_s: float, device_name: str,
    copy_gbps: float | None,
) -> list[dict]:
    """Time ``names`` at each point of one sweep: the Sweep page's rows
    (:func:`explorer.sweep.runs.result_row`, :func:`explorer.sweep.runs.status_row`).

    Parameters
    ----------
    base : DecodeConfig
        The configuration every point starts from (its device is where they run).
    axis : str
        A key of :data:`explorer.sweep.grid.AXES`.
    values : sequence of int
        The points, ascending.
    names : sequence of str
        Implementations; ``"naive"`` is skipped where its calls are predicted to pass
        ``naive_budget_s`` seconds (:func:`explorer.sweep.naive_budget.naive_plan`, probing
        it at the first point with the faster of two calls,
        :func:`~explorer.sweep.naive_budget.probe_ms`), with a ``"skipped"`` row.
    warmup, iters : int
        Untimed and timed interleaved rounds per point.
    device_name, copy_gbps
        Written into every row (``copy_gbps`` None where not measured: the CPU).

    Returns
    -------
    list of dict
        One row per (point, implementation), in order; an implementation that
        raises gets a ``"failed"`` row and the sweep goes on.
    """
    from explorer.sweep.grid import point_config
    from explorer.sweep.naive_budget import (
        after_probe,
        naive_cost,
        naive_plan,
        probe_ms,
    )
    from explorer.sweep.runs import result_row, status_row
    from paged_attention import build_decode_inputs, prepare, reference_decode
    from paged_attention.timing import time_calls

    rows: list[dict] = []
    last = None
    calls = warmup + iters + 1
    common = dict(device_name=device_name, warmup=warmup, iters=iters)
    for value in values:
        config = point_config(base, axis, value)
        inputs = build_decode_inputs(config)
        reference = reference_decode(*inputs.args(), **inputs.kwargs())
        timed, decision = list(names), None
        if "naive" in timed:
            free = None
            if config.device.startswith("cuda"):
                free = torch.cuda.mem_get_info(torch.device(config.device))[0]
            decision = naive_plan(config, budget_s=naive_budget_s, calls=calls, last=last, free_bytes=free)
            if decision.action == "probe":
                run = prepare("naive", *inputs.args(), **inputs.kwargs())
                device = inputs.query.device
                probe = probe_ms(lambda run=run, device=device: time_calls(run, device=device, warmup=0, iters=1)[0],
                                 budget_s=naive_budget_s)
                decision = after_probe(probe, budget_s=naive_budget_s, calls=calls)
            if decision.action == "skip":
                timed.remove("naive")
        measured: dict = {}
        try:
            measured = {r.name: r for r in bench.benchmark_implementations(
                timed, inputs, warmup=warmup, iters=iters, reference=reference)}
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception:  # time each alone, so the one that raises gets its own row
            for name in timed:
                try:
                    (measured[name],) = bench.benchmark_implementations(
                        [name], inputs, warmup=warmup, iters=iters, reference=reference)
                except torch.cuda.OutOfMemoryError:
                    raise
                except Exception as exc:
                    measured[name] = exc
        stamp = utc_stamp()
        for name in names:
            if name not in measured:
                rows.append(status_row("naive", "skipped", config, axis, value, note=decision.reason,
                                       predicted_ms=decision.predicted_ms, copy_gbps=copy_gbps, **common))
            elif isinstance(measured[name], Exception):
                exc = measured[name]
                rows.append(status_row(name, "failed", config, axis, value, note=f"{type(exc).__name__}: {exc}",
                                       copy_gbps=copy_gbps, **common))
            else:
                result = measured[name]
                rows.append(result_row(result, config, axis, value, copy_gbps=copy_gbps, measured_at=stamp,
                                       **common))
                if name == "naive":
                    last = (naive_cost(config), result.median_ms)
        del inputs, reference
    return rows


def record_sweeps(folder: str | Path, *, axes, warmup: int, iters: int, naive_budget_s: float,
                  command: str) -> list[Path]:
    """Run :data:`SWEEPS` of ``axes`` on the GPU and write each as a recorded sweep
    (``<gpu>_<date>_<axis>.csv`` and its ``.json``) in ``folder``, read back with
    :func:`explorer.bench.recorded.load_recorded_set`."""
    from explorer.bench.recorded import RECORDED_SOURCE
    from explorer.sweep.runs import SWEEP_COLUMNS, rows_frame
    from paged_attention import IMPLEMENTATIONS, DecodeConfig

    copy = measure_copy_bandwidth("cuda")
    written = []
    for axis in axes:
        fixed, values = SWEEPS[axis]
        base = DecodeConfig(**{"batch_size": 8, "context_lens": 2048, **SWEEP_BASE, **fixed, "device": "cuda"})
        meta = sidecar(kind="sweep", command=command, device="cuda", copy_gbps=round(copy, 1))
        start = time.perf_counter()
        rows = sweep_rows(base, axis, values, list(IMPLEMENTATIONS), warmup=warmup, iters=iters,
                          naive_budget_s=naive_budget_s, device_name=meta["gpu"], copy_gbps=copy)
        elapsed = time.perf_counter() - start
        slug = re.sub(r"[^a-z0-9]+", "_", meta["gpu"].lower().removeprefix("nvidia ")).strip("_")
        meta.update(
            title=_title("{gpu}, sweep of " + axis.replace("_len", " length").replace("_size", " size") + ", {date}",
                         meta),
            axis=axis, values=list(values), copy_note="measured in the same process, before the sweeps",
            config={**SWEEP_BASE, **fixed, "block_layout": base.block_layout},
            naive_budget_s=naive_budget_s, warmup=warmup, iters=iters, elapsed_s=round(elapsed, 1),
            harness="Timed like the Sweep page: interleaved rounds, call latency and CUDA-graph GPU time, "
                    "L2 flushed before each call.",
        )
        out = write_recorded(rows_frame(rows, RECORDED_SOURCE), meta, Path(folder) / f"{slug}_{meta['date']}_{axis}.csv",
                             leading=SWEEP_COLUMNS[:3])
        print(f"recorded the {axis} sweep ({len(values)} points) in {elapsed:.0f} s: {out}")
        written.append(out)
    return written


# -- command line ------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m benchmarks.record", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True,
                   help="CSV to write, its .json beside it (--sweeps: the folder to write into)")
    p.add_argument("--layouts", nargs="+", choices=["contiguous", "shuffled"], default=["contiguous", "shuffled"])
    p.add_argument("--title", help="how the app names the set (default: GPU, what, date)")
    p.add_argument("--peers", metavar="CSV", help="convert this decode_peers CSV (with --log, --driver, --cuda, "
                                                  "--date) instead of timing the classic table")
    p.add_argument("--log", help="decode_peers' log of the --peers run (its stdout)")
    p.add_argument("--driver", help="--peers: the NVIDIA driver of the run")
    p.add_argument("--cuda", help="--peers: the CUDA version of the run")
    p.add_argument("--date", help="--peers: the day of the run, YYYY-MM-DD")
    p.add_argument("--sweeps", nargs="*", choices=list(SWEEPS), metavar="AXIS",
                   help=f"record the sweeps along these axes (default: all of {', '.join(SWEEPS)})")
    p.add_argument("--naive-budget", type=float, default=2.0, help="--sweeps: seconds naive may take per point")
    p.add_argument("--warmup", type=int, default=10, help="--sweeps: untimed rounds per point")
    p.add_argument("--iters", type=int, default=50, help="--sweeps: timed rounds per point")
    args = p.parse_args(argv)
    command = " ".join(["python -m benchmarks.record", *argv])

    if args.sweeps is not None:
        if not os.path.isdir(args.out):
            p.error(f"--sweeps --out {args.out}: not a folder")
    else:
        if not args.out.endswith(".csv"):
            p.error(f"--out must name a .csv file; got {args.out}")
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder):
            p.error(f"--out {args.out}: folder {folder} does not exist")
    if args.peers is not None:
        missing = [f"--{k}" for k in ("log", "driver", "cuda", "date") if getattr(args, k) is None]
        if missing:
            p.error(f"--peers needs {', '.join(missing)}")
        try:
            datetime.date.fromisoformat(args.date)
            out = convert_peers(args.peers, args.log, args.out, driver=args.driver, cuda=args.cuda,
                                date=args.date, command=command, title=args.title)
        except (OSError, ValueError) as exc:
            sys.exit(f"benchmarks.record --peers: {exc}")
        print(f"recorded peer set: {out} and {out.with_suffix('.json')}")
        return 0
    if not torch.cuda.is_available():
        sys.exit("benchmarks.record needs a CUDA GPU (it records GPU timings); none is visible here. "
                 "The sets recorded on an H200 ship in explorer/bench/recorded_runs/.")
    if args.sweeps is not None:
        start = time.perf_counter()
        record_sweeps(args.out, axes=args.sweeps or list(SWEEPS), warmup=args.warmup, iters=args.iters,
                      naive_budget_s=args.naive_budget, command=command)
        print(f"all sweeps in {time.perf_counter() - start:.0f} s")
        return 0

    rows, meta, status = [], None, 0
    with tempfile.TemporaryDirectory() as tmp:
        for layout in args.layouts:
            path = os.path.join(tmp, f"{layout}.csv")
            status = max(status, bench.main(["--layout", layout, "--device", "cuda", "--csv", path]))
            if not os.path.exists(path):
                sys.exit(f"python -m paged_attention.bench --layout {layout} wrote no table (status {status})")
            layout_rows, meta = read_results(path)
            rows += layout_rows
    meta.update(
        title=_title(args.title or "{gpu}, classic table, {date}", meta),
        copy_note="measured in the same process, after each layout's table (this is the last one)",
        harness="Timed with paged_attention.timing's interleaved rounds (call latency with the GPU idle "
                "at the start, GPU time from CUDA-graph replays, L2 flushed before each call).",
        command=command,
    )
    out = write_recorded(rows, meta, args.out)
    print(f"recorded {len(rows)} rows on {meta['gpu']} (copy {meta['copy_gbps']:,.0f} GB/s): {out} and "
          f"{out.with_suffix('.json')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
