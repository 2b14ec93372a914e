"""The one formatter module: counts, byte sizes, durations, code spans, sentences and compact labels."""

import pytest

from explorer import formatting


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1536, "1.54 kB"), (3 * 2**30, "3.22 GB")])
def test_format_bytes_in_two_decimals(n, text):
    assert formatting.format_bytes(n) == text


@pytest.mark.parametrize("ms, text", [(0.001683, "1.68 µs"), (0.5162, "516 µs"), (0.99996, "1.00 ms"),
                                      (12.34, "12.3 ms"), (1234.0, "1.23 s"), (0.0, "0 µs"), (0.0001, "0.100 µs")])
def test_format_duration(ms, text):
    assert formatting.format_duration(ms) == text


@pytest.mark.parametrize("ms, text", [(518.6, "519 ms"), (184.9, "185 ms"), (2, "2.00 ms"), (0.1849, "0.185 ms"),
                                      (99.96, "100 ms"), (0.99996, "1.00 ms"), (1234.5, "1,230 ms"),
                                      (0.0, "0 ms"), (float("nan"), "n/a ms")])
def test_format_ms_keeps_three_significant_digits_in_ms(ms, text):
    """The charts' one duration rule is the metric cards' (three significant digits),
    fixed to the axes' unit: it wrote "100.0 ms", "1.000 ms" and "1,235 ms"."""
    assert formatting.format_ms(ms) == text
    if ms and ms == ms:
        assert formatting.format_duration(ms, "ms") == text


@pytest.mark.parametrize("n, noun, text", [(1, "sequence", "1 sequence"), (0, "sequence", "0 sequences"),
                                           (1200, "token", "1,200 tokens"), (2, "block size", "2 block sizes")])
def test_count(n, noun, text):
    assert formatting.count(n, noun) == text


def test_plain_is_a_code_span_that_cannot_be_closed_early():
    assert formatting.plain("# **bold** :material/home: $x$ `c`\n1. h200_v1.csv") == (
        "`# **bold** :material/home: $x$ 'c' 1. h200_v1.csv`")


@pytest.mark.parametrize("text, expected", [
    ("the CSV has a header but no rows", "The CSV has a header but no rows."),
    ("num_heads (6) must be a multiple", "num_heads (6) must be a multiple."),  # code names keep their case
    ("`lens` ignored", "`lens` ignored."),
    ("From (3) must not exceed To (2).", "From (3) must not exceed To (2)."),  # one full stop, not two
])
def test_sentence(text, expected):
    assert formatting.sentence(text) == expected


@pytest.mark.parametrize("n, significant, text", [
    (1536, None, "1.54 kB"), (813_600_000, 3, "814 MB"), (2_950_000, 3, "2.95 MB"), (512, 3, "512 B"),
    (50 * 10**9, 3, "50.0 GB"), (0, 3, "0 B"),
])
def test_format_bytes(n, significant, text):
    assert formatting.format_bytes(n, significant) == text


@pytest.mark.parametrize("n, text", [(0, "0"), (12345, "12,345"), (524288, "524k"), (589824, "590k"), (8_388_608, "8.39M"), (12_345_678, "12.3M")])
def test_compact(n, text):
    assert formatting.compact(n) == text


@pytest.mark.parametrize("values, unit", [([0.02, 1.5], "µs"), ([0.3, 3000.0], "ms"), ([5.0, 2000.0], "ms"),
                                          ([1500.0, 90_000.0], "s"), ([], "ms"), ([None, 0.0, float("nan")], "ms"),
                                          ([0.0044, 69.8, None], "µs")])
def test_duration_unit_is_chosen_once_from_the_data(values, unit):
    """A page's cards, charts and tables share one unit: the metric cards wrote
    "814 µs" while the charts said ms and the tables 0.8137."""
    assert formatting.duration_unit(values) == unit


@pytest.mark.parametrize("ms, unit, text", [(0.8137, "µs", "814"), (69.84, "µs", "69,800"), (0.8137, "ms", "0.814"),
                                            (1234.5, "s", "1.23"), (0.0, "ms", "0")])
def test_duration_number_is_three_significant_digits_in_the_unit(ms, unit, text):
    assert formatting.duration_number(ms, unit) == text
    assert formatting.format_duration(ms, unit) == f"{text} {unit}"


@pytest.mark.parametrize("gbps, text", [(0.000612, "0.000612"), (0.0002863, "0.000286"), (48.31, "48.3"),
                                        (4243.2, "4,240"), (None, "n/a"), (float("nan"), "n/a")])
def test_format_gbps_keeps_three_significant_digits(gbps, text):
    assert formatting.format_gbps(gbps) == text


@pytest.mark.parametrize("value, text", [(382.5, "382"), (0.99996, "1.00"), (12345.6, "12,300"), (2, "2.00"),
                                         (0.000612, "0.000612"), (1.234e-7, "1.23e-7"), (-48.31, "-48.3"),
                                         (0, "0"), (None, "n/a"), (float("nan"), "n/a"), (float("inf"), "inf")])
def test_sig3_is_the_one_rule_for_a_measured_number(value, text):
    assert formatting.sig3(value) == text


def test_a_table_cell_reads_as_the_card_above_it():
    """Review: "382 ms" in a card above "382.5" in its table."""
    assert formatting.sig3_column([382.5, None, float("nan"), 0.0612]) == ["382", "n/a", "n/a", "0.0612"]
    assert formatting.format_ms(382.5) == formatting.sig3_column([382.5])[0] + " ms"


@pytest.mark.parametrize("share, text", [(0.4375, "43.8%"), (1, "100%"), (0.00123, "0.123%"), (None, "n/a")])
def test_format_percent(share, text):
    assert formatting.format_percent(share) == text


@pytest.mark.parametrize("s, text", [(44, "44.0×"), (0.5, "0.500×"), (1234, "1,230×"), (float("inf"), "")])
def test_format_speedup_keeps_three_significant_figures(s, text):
    assert formatting.format_speedup(s) == text


def test_shorten_cuts_a_long_value_with_an_ellipsis():
    assert formatting.shorten("9" * 400) == "9" * (formatting.QUOTE_CHARS - 1) + "…"
    assert formatting.shorten("short") == "short"


def test_lines_break_at_separators_first_then_at_spaces():
    text = "8 sequences x 482 logical blocks; colour = physical block id · sampled: every 2nd row shown"
    assert formatting.wrap_at_separators(text, 40).split("<br>") == [
        "8 sequences x 482 logical blocks;", "colour = physical block id", "sampled: every 2nd row shown"]
    assert formatting.wrap_at_separators("short", 40) == "short"
    assert formatting.wrap_words("a b averyveryverylongword c", 5).split("<br>") == ["a b", "averyveryverylongword", "c"]
    assert formatting.line_count(None) == 0 and formatting.line_count("a<br>b") == 2
