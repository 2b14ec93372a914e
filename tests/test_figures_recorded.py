"""The figure of a recorded GPU set: dots per implementation on a log axis, coloured
as everywhere else, titled as recorded, the sidebar's configuration highlighted."""

from explorer import style
from explorer.bench import recorded_figures
from explorer.bench.recorded import RECORDED_DIR, load_recorded_set, recorded_rows

ROWS = recorded_rows(load_recorded_set(RECORDED_DIR / "h200_2026-11-29.csv"), "shuffled")


def _fig(highlight=None):
    return recorded_figures.recorded_latency_figure(ROWS, gpu="NVIDIA H200", date="2026-11-29", layout="shuffled",
                                           highlight=highlight).to_plotly_json()


def test_dots_per_implementation_on_a_log_axis():
    spec = _fig()
    names = [t["name"] for t in spec["data"]]
    assert names == ["Naive PyTorch · call latency", "Optimized PyTorch · GPU time", "Optimized PyTorch · call latency",
                     "Triton · GPU time", "Triton · call latency"]
    assert all(t["type"] == "scatter" and t["mode"] == "markers" for t in spec["data"])  # dots, not bars
    colors = [t["marker"]["color"] for t in spec["data"]]
    assert colors == [style.impl_color(k) for k in ("naive", "vectorized", "vectorized", "triton", "triton")]
    assert [t["marker"]["symbol"] for t in spec["data"]][:2] == ["circle-open", "circle"]
    triton_gpu = spec["data"][3]
    assert list(triton_gpu["x"]) == ["batch 2 × 60 tokens", "batch 1 × 512 tokens", "batch 16 × 256 tokens",
                                     "batch 4 × 2,048 tokens"]
    assert list(triton_gpu["y"])[-1] == ROWS[(ROWS["key"] == "triton")]["gpu_time_ms"].iloc[-1]
    assert spec["layout"]["yaxis"]["type"] == "log"
    assert spec["layout"]["scattermode"] == "group"


def test_labelled_as_recorded():
    spec = _fig()
    title = spec["layout"]["title"]
    assert title["text"].startswith("Recorded on NVIDIA H200")
    assert "recorded 2026-11-29, not this machine" in title["subtitle"]["text"]
    assert "recorded" in spec["layout"]["yaxis"]["title"]["text"]
    assert all(t["hovertemplate"].startswith("recorded · ") for t in spec["data"])


def test_highlight_marks_the_sidebar_configuration():
    assert not _fig().get("layout", {}).get("shapes")
    spec = _fig("batch 16 × 256 tokens")
    (band,) = spec["layout"]["shapes"]
    assert (band["x0"], band["x1"]) == (1.5, 2.5)  # the third category
    assert any(a["text"] == "your configuration" for a in spec["layout"]["annotations"])
    assert not _fig("batch 3 × 99 tokens").get("layout", {}).get("shapes")


def test_configurations_in_kv_token_order_and_labels_on_two_lines_at_most():
    """Issue 27: the categories must read in the order of the K/V tokens they hold
    (batch x context), whatever the file's order, and "batch 4 × 2,048 tokens" took three lines."""
    from explorer.formatting import line_count
    shuffled = ROWS.iloc[::-1].reset_index(drop=True)
    expected = ["batch 2 × 60 tokens", "batch 1 × 512 tokens", "batch 16 × 256 tokens", "batch 4 × 2,048 tokens"]
    assert recorded_figures.kv_token_order(shuffled) == expected
    for scale in (1.0, style.PRESENTATION_SCALE):
        with style.presentation(scale):
            xaxis = recorded_figures.recorded_latency_figure(shuffled, gpu="NVIDIA H200", date="2026-11-29",
                                                             layout="shuffled").to_plotly_json()["layout"]["xaxis"]
        assert list(xaxis["categoryarray"]) == list(xaxis["tickvals"]) == expected
        assert max(line_count(t) for t in xaxis["ticktext"]) <= 2
