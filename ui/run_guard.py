"""How a page runs timed work: the note while a run waits for the machine
(:class:`QueueNote`) and the ways a run can end in an error (:func:`guarded`),
written once for every page that times (Decode benchmark, Sweep, Serving
simulation).
"""

from __future__ import annotations

from typing import Callable, TypeVar

import streamlit as st

from ui.benchmark import BenchmarkOOM, BenchmarkRefused

T = TypeVar("T")
WAIT_ICON = ":material/hourglass_top:"
MEMORY_ICON = ":material/memory:"
ERROR_ICON = ":material/error:"


class QueueNote:
    """The note of a run that waits for the process-wide run lock
    (:func:`ui.benchmark.acquire`), in a placeholder drawn where the run starts.

    Pass :meth:`on_wait` and :meth:`on_own_wait` to the run and use the note as
    a context manager around it: while the run waits, the placeholder says for
    what; once the run is over, a waited run leaves a caption saying it was
    queued, and one that did not wait leaves nothing (before, the note of a run
    that had waited stayed on the page as a box once the other run was over).

    Parameters
    ----------
    then : str
        What happens once another session's run ends (``"yours starts when it ends"``).
    own_then : str, optional
        What happens once this session's own earlier run (stopped by a click)
        lets go; by default ``then``.
    parent : module or container
        Where the placeholder goes (``st`` by default).
    """

    def __init__(self, then: str, own_then: str | None = None, parent=st) -> None:
        self._then, self._own_then = then, own_then or then
        self._slot = parent.empty()
        self.waited: str | None = None  # "other" or "own" once the run waited

    def on_wait(self) -> None:
        """Another session's run holds the lock."""
        self.waited = "other"
        self._slot.info(f"Queued: another session is running a benchmark on this machine; {self._then}.",
                        icon=WAIT_ICON)

    def on_own_wait(self) -> None:
        """This session's own earlier run still holds the lock."""
        self.waited = "own"
        self._slot.info(f"Your previous run is still finishing; {self._own_then}.", icon=WAIT_ICON)

    def show(self, waiting: str | None, waited: str | None) -> None:
        """The note of a run timed in another thread (a sweep's worker), from what
        it says of itself: ``waiting`` is ``"other"`` or ``"own"`` while it waits,
        else None; ``waited`` is what it last waited for (the caption once it runs)."""
        if waiting == "other":
            self.on_wait()
        elif waiting == "own":
            self.on_own_wait()
        else:
            self.waited = waited
            self.__exit__()

    def __enter__(self) -> QueueNote:
        return self

    def __exit__(self, *exc) -> None:
        if self.waited == "other":
            self._slot.caption(":material/hourglass_bottom: Queued behind another session's run, then run.")
        elif self.waited == "own":
            self._slot.caption(":material/hourglass_bottom: Waited for your previous run to finish.")
        else:
            self._slot.empty()


def guarded(run: Callable[..., T], *args, status=None, **kwargs) -> T | None:
    """``run(*args, **kwargs)``, its failures shown on the page instead of raised.

    A refused run (:class:`~ui.benchmark.BenchmarkRefused`: too large for free
    memory), the GPU running out of memory (:class:`~ui.benchmark.BenchmarkOOM`),
    an invalid configuration (``ValueError``) and anything else (the app must keep
    working whatever a run does) each become an ``st.error``; ``status`` (an
    ``st.status``), when given, is set to the error state with the failure's
    label. Streamlit's own stop and rerun are not caught.

    Returns
    -------
    What ``run`` returns, or None when it failed.
    """
    try:
        return run(*args, **kwargs)
    except BenchmarkRefused as exc:
        failure = ("Not run: not enough memory", str(exc), MEMORY_ICON)
    except BenchmarkOOM as exc:
        failure = ("Out of GPU memory", str(exc), MEMORY_ICON)
    except ValueError as exc:
        failure = ("Invalid configuration", str(exc), ERROR_ICON)
    except Exception as exc:  # the app must keep working whatever a run does
        failure = ("The run failed", f"The run failed: {type(exc).__name__}: {exc}", ERROR_ICON)
    label, message, icon = failure
    if status is not None:
        status.update(label=label, state="error", expanded=True)
    st.error(message, icon=icon)
    return None
