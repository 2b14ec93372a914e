"""Recorded peer sets (the ``peers`` kind of explorer/bench/recorded.py, their tables
in explorer/bench/recorded_peers.py): the shipped H200 sets load, the converter of
benchmarks/record.py writes a set the loader accepts, and broken sets are refused
with the rule they break; the Decode benchmark page shows them."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import BENCH, TINY, assert_clean, open_app  # noqa: E402

from benchmarks.record import convert_peers, parse_peers_log  # noqa: E402
from explorer.bench.recorded import FOLDERS, SETS, load_recorded, load_recorded_set  # noqa: E402
from explorer.bench.recorded_peers import configuration, fastest_correct, peer_rows, table_choices  # noqa: E402
from explorer.limits import MAX_LABEL_CHARS  # noqa: E402
from paged_attention.results import RESULT_COLUMNS  # noqa: E402

PEERS_DIR = FOLDERS["peers"]


def load_peer_sets(folder=None):
    return load_recorded(["peers"], {"peers": folder} if folder else None)


def load_peer_set(path):
    return load_recorded_set(path, "peers")

DATA = ROOT / "docs" / "data"


def test_shipped_sets_load_one_per_kind_with_versions():
    sets = load_peer_sets()
    assert [s.meta["set"] for s in sets] == list(SETS)
    for s in sets:
        m = s.meta
        assert (m["gpu"], m["driver"], m["cuda"], m["torch"], m["date"]) == (
            "NVIDIA H200", "580.159.04", "13.0", "2.11.0+cu130", "2026-12-02" if m["set"] == "fp8" else "2026-12-01")
        timed = s.table[s.table["status"] == "ok"]
        assert len(timed) >= len(s.table) - 2  # XQA skips block_size 256
        # XQA on an fp8 cache rounds the query and the probabilities to e4m3: outside
        # float16's tolerance (the trade-off the fp8 set exists to show)
        xqa_fp8 = (timed["implementation"] == "flashinfer_xqa") & (timed["kv_dtype"] != timed["dtype"])
        assert timed.loc[~xqa_fp8, "correct"].all()
    ragged = next(s for s in sets if s.meta["set"] == "ragged")
    assert ragged.meta["peers"] == {"flashinfer": "0.7.4"} and ragged.meta["copy_gbps"] == 4240
    assert "FlashInfer 0.7.4" in ragged.versions()
    # copied unchanged from the run's data file, and read into the one schema
    assert (PEERS_DIR / f"{ragged.name}.csv").read_bytes() == (DATA / "v14_peers_ragged.csv").read_bytes()
    assert list(ragged.table.columns[:len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    # the copy bandwidth of the run itself (the log rounds it), so the fraction of it is the run's
    assert ragged.table["copy_gbps"].round().eq(4240).all()


def test_peer_rows_name_configurations_and_implementations():
    prefix = next(s for s in load_peer_sets() if s.meta["set"] == "prefix")
    rows = peer_rows(prefix)
    assert rows["configuration"].iloc[0] == "64 × 8,448, prefix 8,192 ×1"
    assert "64 × 4,352, prefix 4,096 ×4" in set(rows["configuration"])
    assert rows["configuration"].iloc[-1].endswith("no prefix")
    assert set(rows["implementation"]) >= {"Triton prefix (ours)", "FlashInfer cascade"}
    classic = next(s for s in load_peer_sets() if s.meta["set"] == "classic")
    assert len(peer_rows(classic, "bfloat16")) == len(peer_rows(classic, "float16")) == 22
    assert "32 × 2,048, block 256, 16 heads" in set(peer_rows(classic)["configuration"])
    # a row of --set options names its attention options; one before them, none
    row = {"batch_size": 8, "context_len": 8192, "context_lens": "8192", "block_size": 16, "num_heads": 32,
           "dtype": "float16", "kv_dtype": "float16"}
    assert configuration({**row, "window": 1024, "soft_cap": None, "sinks": False}) == "8 × 8,192, window 1,024"
    assert configuration({**row, "window": None, "soft_cap": 50.0, "sinks": True}) == "8 × 8,192, soft cap 50, sinks"
    assert configuration(row) == "8 × 8,192"


#: Pixels a character of the peer table's 13-14 px text takes at most (digits, "×", ","
#: and "." narrower): 31 characters filled the 215 px the configuration column had.
PX_PER_CHAR = 7


def test_peer_table_text_fits_its_columns_at_1280_px():
    from ui.recorded import CONFIGURATION_PX

    # the widths ui/recorded.py gives the columns (CONFIGURATION_PX and 140 px) hold these at 13-14 px text
    assert CONFIGURATION_PX == 232
    longest = max(peer_rows(s, *choice)["configuration"].str.len().max()
                  for s in load_peer_sets() for choice in table_choices(s))  # one table each, as the page shows them
    assert longest == len("32 × 2..32,666 (mean 3,566), tail")
    assert longest * PX_PER_CHAR <= CONFIGURATION_PX
    for s in load_peer_sets():
        for choice in table_choices(s):
            assert peer_rows(s, *choice)["implementation"].str.len().max() <= MAX_LABEL_CHARS


def test_peer_tables_fit_a_1280_px_page_with_their_notes_under_them():
    """Issue 27 review at 1280x720: the fp8 peer table's Note column ("XQA takes pages of 16, 32, 64 or 128
    tokens, not 256") began at the grid's right edge and was cut. Every peer table the page shows (each set,
    each dtype) gives every column a width, the widths add up to no more than the page's table width at
    1280 px (ui.recorded.PAGE_TABLE_PX), each column holds its longest text at PX_PER_CHAR, and the notes
    are under the table, every one with its implementation."""
    from explorer.bench.recorded_peers import peer_notes
    from ui.recorded import PAGE_TABLE_PX, recorded_sets

    at = open_app(TINY, page=BENCH)
    checked = 0
    for s in recorded_sets(("peers",)):
        at.button_group(key="recorded_kind").set_value(f"peers:{s.meta['set']}").run()
        for choice in table_choices(s):
            if len(table_choices(s)) > 1:
                at.radio(key="recorded_peers_dtype").set_value(choice).run()
            assert_clean(at)
            (section,) = [e for e in at.expander if e.label.startswith("Recorded on a GPU")]
            (table,) = section.dataframe
            config = json.loads(table.proto.columns)
            shown = list(table.value.columns)
            assert "note" not in shown
            widths = {c: config.get(c, {}).get("width") for c in shown}
            assert all(isinstance(w, int) and w > 0 for w in widths.values()), widths
            assert sum(widths.values()) <= PAGE_TABLE_PX, (s.meta["set"], choice, widths)
            for c in shown:
                longest = max(len(str(v)) for v in [*table.value[c], config[c].get("label", c)])
                assert longest * PX_PER_CHAR <= widths[c], (s.meta["set"], c, longest, widths[c])
            notes = peer_notes(peer_rows(s, *choice))
            captions = " ".join(c.value for c in section.caption)
            for who, note in notes:
                assert f"**{who}**: " in captions and note.split(",")[0] in captions, (who, note)
            checked += bool(notes)
    assert checked >= 4  # the ragged, prefix and both fp8 tables have notes


def test_recorded_configurations_write_their_numbers_by_format_number():
    """Issue 27 review: the recorded tables wrote "8 × 8192", "236..5193 (mean 3642)", "prefix 8192",
    where every other number of the page has its thousands separators (formatting.format_number)."""
    from explorer.bench.recorded import config_label, recorded_rows
    from explorer.formatting import format_number

    ragged = next(s for s in load_peer_sets() if s.meta["set"] == "ragged")
    texts = set(peer_rows(ragged)["configuration"])
    assert "4 × 236..5,193 (mean 3,642)" in texts and "32 × 2..32,666 (mean 3,566), tail" in texts
    for s in load_peer_sets():
        for choice in table_choices(s):
            for text in peer_rows(s, *choice)["configuration"]:
                numbers = re.findall(r"\d+(?:,\d{3})*", text)
                assert numbers and all(n == format_number(int(n.replace(",", ""))) for n in numbers), text
    assert config_label(8, 8192) == f"batch {format_number(8)} × {format_number(8192)} tokens" == "batch 8 × 8,192 tokens"
    (classic,) = load_recorded(["classic"])
    rows = recorded_rows(classic, "shuffled")
    assert list(rows["configuration"]) == [config_label(b, n) for b, n in zip(rows["batch_size"], rows["context_len"])]
    assert any("," in text for text in rows["configuration"])


def test_log_parser_reads_versions_and_copy_bandwidth():
    found = parse_peers_log((DATA / "v14_peers_prefix.txt").read_text())
    assert found == {"gpu": "NVIDIA H200", "sm_count": 132, "torch": "2.11.0+cu130", "triton": "3.6.0",
                     "flashinfer": "0.7.4", "copy_gbps": 4257.0, "set": "prefix"}
    assert parse_peers_log((DATA / "v14_peers_classic.txt").read_text())["flashinfer"] is None
    with pytest.raises(ValueError, match="is it a decode_peers log"):
        parse_peers_log("hello\n")
    cpu = "measured device-to-device copy bandwidth: nan GB/s (read + write)\nset classic: 1\nGPU x, 1 SMs; torch 2; Triton 3\n"
    with pytest.raises(ValueError, match="not a GPU run"):
        parse_peers_log(cpu)


def test_converter_writes_a_set_the_loader_accepts(tmp_path):
    out = convert_peers(DATA / "v14_peers_prefix.csv", DATA / "v14_peers_prefix.txt", tmp_path / "p.csv",
                        driver="580.159.04", cuda="13.0", date="2026-12-01", command="python -m benchmarks.record")
    s = load_peer_set(out)
    assert s.meta["set"] == "prefix" and "unique bytes" in s.meta["gbps_note"]
    assert len(s.table) == 30 and s.meta["peers"] == {"flashinfer": "0.7.4"}
    # written in the one schema, with the numbers of the shipped set of the same run
    assert out.read_text().startswith("kind,implementation,label,batch_size")
    shipped = load_peer_set(PEERS_DIR / "h200_prefix_2026-12-01.csv")
    assert peer_rows(s).equals(peer_rows(shipped))


def _copy(tmp_path: Path) -> Path:
    src = PEERS_DIR / "h200_ragged_2026-12-01"
    for ext in (".csv", ".json"):
        shutil.copy(src.with_suffix(ext), tmp_path / f"s{ext}")
    return tmp_path / "s.csv"


@pytest.mark.parametrize("change, rule", [
    (lambda m, t: m.pop("driver"), "missing metadata driver"),
    (lambda m, t: m.update(set="fp9"), "set must be one of"),
    (lambda m, t: m.update(copy_gbps=0), "copy_gbps must be a positive"),
    (lambda m, t: t.pop("gpu_ms"), "gpu_time_ms must be a positive number in every timed row"),
    (lambda m, t: t.loc.__setitem__((0, "impl"), "mystery"), "unknown implementation mystery"),
    (lambda m, t: t.loc.__setitem__((0, "gpu_ms"), -1), "gpu_time_ms must be a positive"),
    (lambda m, t: m.update(kind="sweep"), "says kind sweep, but the set was read as peers"),
    (lambda m, t: t.loc.__setitem__((0, "correct"), "maybe"), "correct must be True or False"),
    (lambda m, t: t.loc.__setitem__(1, t.loc[0]), "repeats a"),
])
def test_broken_sets_are_refused(tmp_path, change, rule):
    import pandas as pd

    path = _copy(tmp_path)
    meta = json.loads(path.with_suffix(".json").read_text())
    table = pd.read_csv(path, keep_default_na=False)
    table["correct"] = table["correct"].astype(object)
    change(meta, table)
    path.with_suffix(".json").write_text(json.dumps(meta))
    table.to_csv(path, index=False)
    with pytest.raises(ValueError, match=rule):
        load_peer_set(path)


def test_fp8_set_shows_each_kernel_time_and_error_side_by_side():
    """Issue 26: for an fp8 cache the recorded table puts each kernel's GPU time
    beside its error against the float64 reference of the dequantized cache, one
    table per cache dtype: XQA, which rounds the query and the probabilities to
    e4m3, errs by more than our kernel, which widens the cache exactly."""
    (fp8,) = [s for s in load_peer_sets() if s.meta["set"] == "fp8"]
    assert table_choices(fp8) == [("float16", "float16"), ("float16", "float8_e4m3fn")]
    rows = peer_rows(fp8, "float16", "float8_e4m3fn")
    assert not rows["configuration"].str.contains("cache").any()  # said once, by the table's choice
    timed = rows.dropna(subset=["gpu_time_ms"])
    err = timed.pivot(index="configuration", columns="impl", values="max_abs_err")
    xqa = err["flashinfer_xqa"].dropna()
    assert len(xqa) == 5 and (xqa > 5 * err.loc[xqa.index, "triton"]).all()
    assert (err["triton"] < 5e-4).all()
    assert peer_rows(fp8, "float16", "float16")["max_abs_err"].notna().any()
    # the bold "fastest" of each configuration is a correct kernel, not XQA's faster wrong answer
    best = rows[fastest_correct(rows)]
    assert best["correct"].eq("yes").all() and set(best["configuration"]) == set(rows["configuration"])
    wrong = rows[(rows["impl"] == "flashinfer_xqa") & (rows["correct"] == "NO")]
    assert len(wrong) == 4 and not fastest_correct(rows)[wrong.index].any()  # fastest of those four, yet not bold
    assert (wrong["gpu_time_ms"].values < best.set_index("configuration").loc[wrong["configuration"], "gpu_time_ms"].values).all()


def test_missing_sidecar_and_empty_folder(tmp_path):
    assert load_peer_sets(tmp_path / "none") == []
    path = _copy(tmp_path)
    path.with_suffix(".json").unlink()
    with pytest.raises(ValueError, match="no metadata file s.json"):
        load_peer_set(path)


def test_decode_benchmark_page_shows_each_peer_set_as_recorded():
    at = open_app(TINY, page=BENCH)
    assert_clean(at)
    kinds = at.segmented_control(key="recorded_kind")
    assert kinds.options == ["classic", "peers", "ragged", "shared prefix", "fp8 cache"] and kinds.value == "classic"
    live = at.dataframe
    kinds.set_value("peers:ragged").run()
    assert_clean(at)
    (section,) = [e for e in at.expander if e.label.startswith("Recorded on a GPU")]
    text = " ".join(e.value for e in [*section.markdown, *section.caption])
    assert "Recorded on NVIDIA H200" in text and "FlashInfer 0.7.4" in text and "recorded 2026-12-01" in text
    assert "4,240 GB/s" in text
    (table,) = section.dataframe
    assert len(table.value) == 66 and "FlashInfer, TC" in set(table.value["implementation"])
    assert len(at.dataframe) == len(live)  # the peer table replaces the classic one, nothing more
    at.segmented_control(key="recorded_kind").set_value("peers:classic").run()
    assert at.radio(key="recorded_peers_dtype").options == ["float16", "bfloat16"]
    assert len(section_table(at).value) == 22


def section_table(at):
    (section,) = [e for e in at.expander if e.label.startswith("Recorded on a GPU")]
    (table,) = section.dataframe
    return table
