"""AppTest of the Decode benchmark page's "Recorded on a GPU" section: on a CPU host
the shipped H200 runs are shown, labelled as recorded, apart from the live run, with
the sidebar's configuration highlighted when it was recorded."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from test_app import BENCH, TINY, assert_clean, chart, open_app  # noqa: E402

from explorer import formatting
from ui.recorded import recorded_durations

CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="what a CPU host shows")
#: A recorded classic configuration (batch 4 x 2048 tokens, 32/8 heads, head_dim 128, float16).
RECORDED = {"batch": "4", "ctx_mode": "uniform", "ctx": "2048", "heads": "32", "kv_heads": "8", "head_dim": "128",
            "preset": "Custom", "block": "16", "dtype": "float16"}


def _section(at):
    (expander,) = [e for e in at.expander if e.label.startswith("Recorded on a GPU")]
    return expander


@CPU_ONLY
def test_cpu_host_shows_the_recorded_h200_runs_before_any_run():
    at = open_app(TINY, page=BENCH)
    assert_clean(at)
    assert any("recorded on an **NVIDIA H200**" in c.value for c in at.caption)  # beside the CPU warning
    section = _section(at)
    assert section.label == "Recorded on a GPU: NVIDIA H200 (recorded, not this machine)"
    assert section.proto.expanded  # open on a CPU host
    text = " ".join(e.value for e in [*section.markdown, *section.caption])
    assert "driver 580.159.04" in text and "torch 2.11.0+cu130" in text and "4,240 GB/s" in text
    assert "recorded 2026-11-29" in text
    spec = chart(at, "recorded_chart")
    assert spec["layout"]["title"]["text"] == "Recorded on NVIDIA H200: latency per decode step"
    assert spec["layout"]["yaxis"]["type"] == "log"
    assert not spec["layout"].get("shapes")  # TINY is not a recorded configuration
    assert any("not among the recorded ones" in c.value for c in section.caption)
    (table,) = section.dataframe
    rows = table.value
    assert len(rows) == 12 and set(rows["correct"]) == {"yes"}
    assert list(rows.columns) == ["configuration", "implementation", "gpu_time_ms", "median_ms", "gbps",
                                  "pct_of_copy_bw", "correct"]


def test_recorded_section_stays_apart_from_a_live_run():
    at = open_app(TINY, page=BENCH, timeout=120)
    (before,) = _section(at).dataframe
    at.button(key="bench_run").click().run()
    assert_clean(at)
    live = chart(at, "bench_latency")
    assert all("H200" not in str(t.get("name")) for t in live["data"])
    recorded = chart(at, "recorded_chart")
    assert all(t["hovertemplate"].startswith("recorded · ") for t in recorded["data"])
    # the live tables and history come first, as before; the recorded table is the section's own
    assert list(at.dataframe[0].value["implementation"]) == ["Naive PyTorch", "Optimized PyTorch", "Triton"]
    assert len(_section(at).dataframe) == 1
    # the recorded table keeps its rows and its own unit, whatever the live cards' (review 3)
    (after,) = _section(at).dataframe
    assert after.value.equals(before.value)
    own = formatting.duration_unit(recorded_durations())
    assert recorded["layout"]["yaxis"]["title"]["text"] == f"recorded latency ({own})"
    assert _section(at).proto.expanded == (not torch.cuda.is_available())


def test_sidebar_configuration_that_was_recorded_is_highlighted():
    at = open_app(RECORDED, page=BENCH)
    assert_clean(at)
    assert any("batch 4 × 2,048 tokens, was recorded" in s.value for s in at.success)
    (band,) = chart(at, "recorded_chart")["layout"]["shapes"]
    assert (band["x0"], band["x1"]) == (2.5, 3.5)
    assert at.radio(key="recorded_layout").value == "shuffled"  # the sidebar's layout
    at.radio(key="recorded_layout").set_value("contiguous").run()
    assert_clean(at)
    assert "contiguous block table" in chart(at, "recorded_chart")["layout"]["title"]["subtitle"]["text"]


@CPU_ONLY
def test_presentation_mode_shows_the_recorded_table_as_an_html_table_of_the_same_cells():
    """Issue 27, the back row: Streamlit's grid draws its text on a canvas at 0.875 rem
    whatever the page's style says (15.75 px in presentation mode), so presentation
    mode shows the table with ``st.table``, whose text the page's style sets at 18 px
    (tests/test_browser_benchmark.py measures it): the grid's cells, in its order,
    under its headers, the copy share in the grid's printf format."""
    grid = _section(open_app(TINY, page=BENCH)).dataframe[0].value
    at = open_app({**TINY, "present": "1"}, page=BENCH)
    assert_clean(at)
    section = _section(at)
    assert len(section.dataframe) == 0
    (table,) = section.table
    shown = table.value
    headers = list(shown.columns)
    assert headers[:2] == ["Configuration (recorded)", "Implementation"]
    assert headers[2].startswith("GPU time (") and headers[3].startswith("Call latency (")
    assert headers[4:] == ["GB/s", "% of copy BW", "Correct"]
    assert len(shown) == len(grid) == 12
    assert (shown.to_numpy() == grid.astype(str).to_numpy()).all()
    assert list(shown["% of copy BW"]) == list(grid["pct_of_copy_bw"])


@CPU_ONLY
def test_recorded_shares_of_the_copy_bandwidth_have_three_significant_figures():
    """Issue 27: the recorded tables wrote "0.021%", "2.8%", "0.2%", "17%" ("%.2g")
    where the results table writes three significant figures (format_percent)."""
    from explorer.bench.recorded import recorded_rows
    from explorer.formatting import format_percent
    from ui.recorded import recorded_sets

    at = open_app(TINY, page=BENCH)
    (table,) = _section(at).dataframe
    (classic,) = [s for s in recorded_sets(("classic",))]
    shares = recorded_rows(classic, at.radio(key="recorded_layout").value)["pct_of_copy_bw"]
    cells = list(table.value["pct_of_copy_bw"])
    assert cells == [format_percent(v / 100) for v in shares]
    assert cells[:3] == ["0.0213%", "0.660%", "2.81%"]  # the reviewer saw "0.021%", "0.66%", "2.8%"
    peers = [f"peers:{s.meta['set']}" for s in recorded_sets(("peers",))]
    assert len(peers) == 4
    for kind in peers:
        at.button_group(key="recorded_kind").set_value(kind).run()
        assert_clean(at)
        (table,) = _section(at).dataframe
        cells = [c for c in table.value["pct_of_copy_bw"] if c != "n/a"]
        assert cells and all(c.endswith("%") and len(c.strip("%").replace(".", "").lstrip("0")) == 3 for c in cells)


@CPU_ONLY
def test_recorded_peer_configurations_are_formatted_and_their_column_holds_them():
    """Issue 27 review at 1280x720: the peer tables wrote "8 × 8192" (no thousands separator) and the
    configuration column, 215 px, cut the longest one. Each configuration writes its numbers by
    format_number, in a column CONFIGURATION_PX wide (scaled with presentation mode's text)."""
    import json

    from explorer.bench.recorded_peers import peer_rows
    from ui.recorded import CONFIGURATION_PX, recorded_sets

    at = open_app(TINY, page=BENCH)
    (ragged,) = [s for s in recorded_sets(("peers",)) if s.meta["set"] == "ragged"]
    at.button_group(key="recorded_kind").set_value("peers:ragged").run()
    assert_clean(at)
    (table,) = _section(at).dataframe
    config = json.loads(table.proto.columns)
    assert config["configuration"]["width"] == CONFIGURATION_PX == 232
    shown = list(table.value["configuration"])
    assert shown == list(peer_rows(ragged)["configuration"])
    assert "4 × 236..5,193 (mean 3,642)" in shown and not any(re.search(r"\d{4}", text) for text in shown)
