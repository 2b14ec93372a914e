"""The Inside the kernel page's tables (explorer/kernel/tables.py): their numbers read
as the cards and charts beside them write them (issue 27: the split table showed m
"1.714" under a bar labelled 1.71, and a share of 0.3409 beside a chart's 34.1%)."""

import pandas as pd
import pytest
from test_figures_kernel import kernel_trace, option_trace

from explorer.formatting import format_percent, sig3
from explorer.kernel import figures as kernel_figures
from explorer.kernel.tables import SPLIT_TABLE, TILE_NUMBERS, split_table, split_text, tile_text, with_sink


def test_split_table_writes_what_the_merge_chart_writes():
    *_, trace = kernel_trace(block_n=16, num_splits=4)
    splits = trace.splits
    text = split_text(splits[list(split_table(False))])
    chart = kernel_figures.split_merge_figure(splits)
    m_labels, share_labels = chart.data[0].text, chart.data[1].text
    assert list(text["m"]) == list(m_labels) == [sig3(v) for v in splits["m"]]
    assert list(text["share"]) == list(share_labels) == [format_percent(v) for v in splits["share"]]
    assert all(s.endswith("%") for s in text["share"])
    for name in ("l", "weight", "err_vs_row"):
        assert list(text[name]) == [sig3(v) for v in splits[name]], name
    # Counts stay counts: the token bounds are the trace's integers.
    assert list(text["token_start"]) == list(splits["token_start"])


def test_the_sink_row_has_no_error_and_its_share_in_percent():
    _, _, trace = option_trace(sinks=True)
    rows = with_sink(trace.splits, trace.sink_m, trace.sink_term, trace.sink_share)
    text = split_text(rows[list(split_table(False))])
    last = text.iloc[-1]
    assert last["split"] == "sink" and last["err_vs_row"] == "n/a"
    assert last["share"] == format_percent(trace.sink_share) and last["m"] == sig3(trace.sink_m)
    assert sum(float(s.rstrip("%")) for s in text["share"]) == pytest.approx(100, abs=0.1 * len(text))


def test_number_columns_are_the_ones_written_as_text():
    assert [n for n, c in SPLIT_TABLE.items() if c.number] == ["m", "l", "weight", "share", "err_vs_row"]


def test_tile_table_writes_three_significant_figures():
    *_, trace = kernel_trace(block_n=16, num_splits=2)
    tiles = trace.tiles
    text = tile_text(tiles)
    for name in TILE_NUMBERS:
        expected = ["n/a" if pd.isna(v) else sig3(v) for v in tiles[name]]
        assert list(text[name]) == expected, name
    assert text["physical_blocks"].iloc[0] == ", ".join(map(str, tiles["physical_blocks"].iloc[0]))


def test_presentation_tables_right_align_their_number_columns_over_streamlits_own_style():
    """Review at 1280x720 (issue 27): presentation mode's HTML tables (st.table)
    drew every number left-aligned, where normal mode's grid right-aligns them:
    st.table writes "text-align: left" on each text cell's style attribute, which
    beats a stylesheet's rule unless it is !important. Number columns (and only
    they) get a right alignment that wins; a cell's own CSS is kept beside it."""
    import pandas as pd
    import streamlit as st

    from ui.tables import number_column, presented_table

    frame = pd.DataFrame({"name": ["a", "b"], "value": ["1,230", "4.56"], "count": [3, 40]})
    css = pd.DataFrame({"name": ["", ""], "value": ["font-weight: bold", ""], "count": ["", ""]})
    styler = presented_table(frame, {"name": st.column_config.Column("Name"), "value": number_column("Value"),
                                     "count": "Count"}, css)
    styler._compute()
    cells = {(r, c): dict(decl) for (r, c), decl in styler.ctx.items()}
    for row in (0, 1):
        assert cells.get((row, 0), {}).get("text-align") is None  # a text column stays as st.table has it
        for col in (1, 2):  # a number column (right-aligned text) and a numeric dtype
            assert cells[(row, col)]["text-align"].split() == ["right", "!important"]
    assert cells[(0, 1)]["font-weight"] == "bold"


def test_presented_number_headers_align_with_their_numbers():
    """Issue 27's leftovers: presentation mode's numbers were right-aligned under
    left-aligned headers. The headers of number columns (and only they) are
    right-aligned too, in the CSS Streamlit sends with the table."""
    import pandas as pd
    import streamlit as st
    from streamlit.elements.lib.pandas_styler_utils import marshall_styler
    from streamlit.proto.ArrowData_pb2 import ArrowData

    from ui.tables import number_column, presented_table

    frame = pd.DataFrame({"name": ["a", "b"], "value": ["1,230", "4.56"], "count": [3, 40], "note": ["x", "y"]})
    styler = presented_table(frame, {"name": st.column_config.Column("Name"), "value": number_column("Value"),
                                     "count": "Count", "note": "Note"})
    proto = ArrowData()
    marshall_styler(proto, styler, "t")
    rules = dict(rule.split(" { ") for rule in proto.styler.styles.split("\n") if " th." in rule)
    uuid = proto.styler.uuid
    assert set(rules) == {f"#T_{uuid} th.col1", f"#T_{uuid} th.col2"}
    assert all(r.rstrip(" }").split(": ") == ["text-align", "right !important"] for r in rules.values())
