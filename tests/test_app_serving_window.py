"""AppTest of the Serving simulation page with a sliding window from the sidebar: the
"free blocks outside the window" toggle and the freed-against-kept readout."""

from streamlit.testing.v1 import AppTest

from tests.test_app_serving import ROOT, SERVING, SIM, TINY, open_serving, url_notes

from explorer.serving.block_manager import blocks_for
from explorer.serving.history import simulate
from explorer.serving.view import serving_config
from explorer.serving.window import window_bound

WINDOW = 16


def history(free: bool):
    config = serving_config(SIM["sv_num_blocks"], SIM["sv_block_size"], SIM["sv_max_batch"], SIM["sv_rate"],
                            ("long-tail", SIM["sv_prompt_lo"], SIM["sv_prompt_hi"]),
                            ("long-tail", SIM["sv_output_lo"], SIM["sv_output_hi"]), 0, window=WINDOW,
                            free_window=free)
    return simulate(config, SIM["sv_steps"])


def open_windowed(**changes):
    """The page with the sidebar's window of WINDOW tokens (from the URL)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**TINY, "window": str(WINDOW)}.items():
        at.query_params[key] = value
    for key, value in {**SIM, **changes}.items():
        at.session_state[key] = value
    at.switch_page(SERVING)
    return at.run()


def metric(at, label):
    return next(m for m in at.metric if m.label == label)


def test_without_a_window_there_is_no_toggle_and_no_comparison():
    at = open_serving()
    assert not at.exception
    assert not [t for t in at.toggle if t.key == "sv_free_window"]
    assert not [m for m in at.metric if m.label == "Peak blocks in use"]


def test_the_window_frees_blocks_by_default_and_the_readout_compares_with_keeping_them():
    at = open_windowed()
    assert not at.exception and not at.error
    toggle = next(t for t in at.toggle if t.key == "sv_free_window")
    assert toggle.value is True
    freed, kept = history(True), history(False)
    peak = metric(at, "Peak blocks in use")
    assert peak.value == str(int(freed.metrics["blocks_in_use"].max()))
    assert peak.delta == f"{int(kept.metrics['blocks_in_use'].max())} without freeing"
    assert int(freed.metrics["blocks_in_use"].max()) < int(kept.metrics["blocks_in_use"].max())
    end = metric(at, "Blocks at the end")
    assert end.value == str(int(freed.metrics["blocks_in_use"].iloc[-1]))
    bs = SIM["sv_block_size"]
    longest = blocks_for(SIM["sv_prompt_hi"] + SIM["sv_output_hi"], bs)
    assert metric(at, "Blocks per sequence at most").value == str(window_bound(WINDOW, bs))
    fits = metric(at, "Longest that fit")
    assert fits.value == str(SIM["sv_num_blocks"] // window_bound(WINDOW, bs))
    assert fits.delta == f"{SIM['sv_num_blocks'] // longest} without freeing"
    # the cards over the pool follow the run with freeing
    step = at.slider(key="sv_step").value
    assert metric(at, "Physical blocks").value == str(int(freed.metrics["blocks_in_use"].iloc[step]))


def test_turning_freeing_off_shows_the_run_that_keeps_every_block():
    at = open_windowed()
    at.toggle(key="sv_free_window").set_value(False).run()
    assert not at.exception and not at.error
    kept = history(False)
    step = at.slider(key="sv_step").value
    assert metric(at, "Physical blocks").value == str(int(kept.metrics["blocks_in_use"].iloc[step]))
    assert metric(at, "Peak blocks in use").value == str(int(history(True).metrics["blocks_in_use"].max()))


def test_freeing_off_travels_in_a_copied_url():
    """Off was left out of the URL, so a copied URL opened with freeing on again."""
    at = open_windowed()
    assert at.query_params["sv_free_window"] in ("1", ["1"])
    at.toggle(key="sv_free_window").set_value(False).run()
    copied = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert copied["sv_free_window"] == "0"
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in copied.items():
        fresh.query_params[key] = value
    fresh.switch_page(SERVING)
    fresh.run()
    assert not fresh.exception and not url_notes(fresh)
    assert fresh.toggle(key="sv_free_window").value is False
    kept = history(False)
    step = fresh.slider(key="sv_step").value
    assert metric(fresh, "Physical blocks").value == str(int(kept.metrics["blocks_in_use"].iloc[step]))


def test_the_caption_says_when_no_request_outgrows_the_window():
    from explorer.serving.history import window_caption

    assert "No request outgrows the window" in window_caption(4096, True, longest=300)
    assert "No request outgrows" not in window_caption(128, True, longest=300)
    assert "No request outgrows" not in window_caption(300, False, longest=301)  # one token past it
