"""AppTest suite for running the Decode benchmark: out-of-memory, refusals and
failures turned into errors, the run lock shared by sessions (queued, or this
session's own earlier run), a run that replaces a stopped one and reuses what it
measured, and the CPU timing threads."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import torch
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from paged_attention import DecodeConfig  # noqa: E402
from explorer import settings as state  # noqa: E402
import ui.benchmark as bench_ui  # noqa: E402

from test_app import BENCH, TINY, assert_clean, chart, open_app  # noqa: E402
from test_app_benchmark import exact_timed_calls  # noqa: E402,F401  (autouse: the timed calls asked for)


def _run_tiny_with(monkeypatch, target: str, exc: BaseException) -> AppTest:
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(bench_ui, target, boom)
    at = open_app(TINY, page=BENCH)
    return at.button(key="bench_run").click().run()


def test_cuda_out_of_memory_is_reported_and_app_recovers(monkeypatch):
    at = _run_tiny_with(monkeypatch, "benchmark_implementations", torch.cuda.OutOfMemoryError("CUDA out of memory. Tried"))
    assert not at.exception
    assert any("ran out of memory" in e.value for e in at.error)
    assert bench_ui.inputs_slot().key is None  # released
    monkeypatch.undo()
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert chart(at, "bench_latency")


def test_memory_refusal_is_reported(monkeypatch):
    refusal = bench_ui.BenchmarkRefused("needs about 200 GiB but only 100 GiB is free")
    monkeypatch.setattr(bench_ui.InputsSlot, "get", lambda self, config: (_ for _ in ()).throw(refusal))
    at = open_app(TINY, page=BENCH)
    at.button(key="bench_run").click().run()
    assert not at.exception
    assert any("only 100 GiB is free" in e.value for e in at.error)


def test_unexpected_failure_is_an_error_not_a_traceback(monkeypatch):
    at = _run_tiny_with(monkeypatch, "benchmark_implementations", RuntimeError("kernel exploded"))
    assert not at.exception
    assert any("RuntimeError: kernel exploded" in e.value for e in at.error)


def _release_once_waited_for(monkeypatch, lock) -> None:
    """Make the holder of ``lock`` let go only once the page blocks on it, so a test
    does not race with how long the page takes to get there (seconds on a GPU host,
    where a fixed timer let go before the click and nothing was queued)."""
    take = lock.acquire

    def acquire(blocking=True, owner=None):
        if blocking and lock.locked():
            threading.Timer(0.2, lock.release).start()
        return take(blocking, owner)

    monkeypatch.setattr(lock, "acquire", acquire)


def test_queued_session_is_told_and_then_runs(monkeypatch):
    lock = bench_ui.run_lock()
    lock.acquire()
    _release_once_waited_for(monkeypatch, lock)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    # The note said so while the run waited; once it ran, no box stays (an empty one did), a caption does.
    assert not any("Queued" in i.value for i in at.info)
    assert any("Queued behind another session's run" in c.value for c in at.caption)
    assert chart(at, "bench_latency")


def test_acquire_calls_on_wait_only_when_busy():
    lock, waited = threading.Lock(), []
    bench_ui.acquire(lock, lambda: waited.append(1))
    assert waited == [] and lock.locked()
    threading.Timer(0.2, lock.release).start()
    bench_ui.acquire(lock, lambda: waited.append(1))
    assert waited == [1]
    lock.release()


@pytest.mark.gpu
def test_check_fits_refuses_more_than_free_memory():
    free, _ = torch.cuda.mem_get_info()
    heads = 8 * 128 * 2 * 2  # bytes per token of K and V at 8 KV heads, head_dim 128, float16
    huge = DecodeConfig(batch_size=64, context_lens=int(2 * free / heads / 64), device="cuda")
    with pytest.raises(bench_ui.BenchmarkRefused, match="free"):
        bench_ui.check_fits(huge)
    bench_ui.check_fits(DecodeConfig(batch_size=1, context_lens=16, device="cuda"))


def test_second_click_while_this_sessions_run_finishes_is_not_another_session(monkeypatch):
    monkeypatch.setattr(bench_ui, "session_id", lambda: "this tab")
    lock = bench_ui.run_lock()
    assert lock.acquire(owner="this tab")  # the first click's run, still timing
    _release_once_waited_for(monkeypatch, lock)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "Waited for your previous run" in captions and "another session" not in captions
    assert chart(at, "bench_latency")


def test_acquire_tells_this_sessions_run_from_another_sessions(monkeypatch):
    monkeypatch.setattr(bench_ui, "session_id", lambda: "me")
    for holder, expected in (("me", "own"), ("someone else", "other"), (None, "other")):
        lock, told = bench_ui.RunLock(), []
        lock.acquire(owner=holder)
        threading.Timer(0.2, lock.release).start()
        bench_ui.acquire(lock, lambda: told.append("other"), lambda: told.append("own"))
        assert told == [expected] and lock.owner == "me"
        lock.release()
        assert lock.owner is None and not lock.locked()


def test_a_replacing_run_reuses_the_results_the_stopped_run_kept(monkeypatch):
    """A second click stops the first run at its next UI update; the new run times only what is left,
    the rest together, and says which results it reused."""
    config = state.settings_from_query(TINY)[0].config()
    timed, told = [], []

    def fake(names, inputs, **kwargs):
        timed.append(list(names))
        return [SimpleNamespace(name=name) for name in names]

    monkeypatch.setattr(bench_ui, "benchmark_implementations", fake)
    kept = SimpleNamespace(name="naive")
    done = [kept]
    results, _ = bench_ui.run_benchmark_locked(
        config, ["naive", "vectorized", "triton"], warmup=0, iters=1, on_progress=lambda *a: None,
        on_result=lambda r, reused: told.append((r.name, reused)), on_wait=lambda: None, done=done,
    )
    assert timed == [["vectorized", "triton"]]  # one interleaved run of what is left
    assert told == [("naive", True), ("vectorized", False), ("triton", False)]
    assert results[0] is kept and [r.name for r in results] == ["naive", "vectorized", "triton"]
    assert [r.name for r in done] == ["naive", "vectorized", "triton"]  # kept as measured, for a next replacement


def test_cpu_runs_time_on_one_torch_thread_and_restore_the_count(monkeypatch):
    """The browser shares a CPU host's cores; torch's threads waiting for each other
    made a sweep point 40 times slower on 2 cores."""
    config = state.settings_from_query({**TINY, "device": "cpu"})[0].config()  # a CPU run on any host
    assert config.device == "cpu"
    seen = []

    def fake(names, inputs, **kwargs):
        seen.append(torch.get_num_threads())
        return [SimpleNamespace(name=name) for name in names]

    monkeypatch.setattr(bench_ui, "benchmark_implementations", fake)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        bench_ui.run_benchmark_locked(config, ["naive", "vectorized"], warmup=0, iters=1,
                                      on_progress=lambda *a: None, on_result=lambda r, reused: None,
                                      on_wait=lambda: None)
        assert seen == [bench_ui.CPU_TIMING_THREADS]  # both timed together, on one thread
        assert torch.get_num_threads() == 2  # restored
        with bench_ui.cpu_timing_threads("cuda:0"):
            assert torch.get_num_threads() == 2  # a GPU run keeps the host's threads
    finally:
        torch.set_num_threads(before)


def test_a_run_stopped_midway_says_so_and_the_next_run_keeps_what_it_measured(monkeypatch):
    """Streamlit stops a running script when the page is left or a setting changes:
    the page says the last run stopped, and pressing Run again measures only what
    is missing (the stopped run's results are kept)."""
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    real = bench_ui.run_benchmark_locked
    calls = []

    def stops_after_the_first(config, names, **kw):
        calls.append(list(names))
        if len(calls) == 1:
            real(config, names[:1], **kw)  # measures the first implementation, then the script is stopped
            raise StopException()
        return real(config, names, **kw)

    monkeypatch.setattr(bench_ui, "run_benchmark_locked", stops_after_the_first)
    at = open_app(TINY, page=BENCH, timeout=120)
    at.button(key="bench_run").click().run()
    at.run()  # the page as it is drawn after the stop, on the next script run
    assert not at.exception
    stopped = [w.value for w in at.warning if "last run stopped" in w.value]
    assert stopped and "1 of 3 implementations measured" in stopped[0] and "what it measured is kept" in stopped[0]
    at.button(key="bench_run").click().run()
    assert_clean(at)
    assert not [w for w in at.warning if "last run stopped" in w.value]
    assert list(at.dataframe[1].value["correct"]) == ["yes", "yes", "yes"]  # the accuracy table
    assert any("measured by the run your click replaced" in m.value for m in at.markdown)
