"""One forward-pass workload at a time in the dashboard's server process; evaluations before timings.

Every browser session runs its work in its own threads (:mod:`app.jobs.board`), and each forward pass
already uses all the cores through torch's intra-op threads. When a class of eight clicks at the
same moment, eight evaluations side by side each get a quarter of a core and all finish late
(threads fighting over 2 cores: a median of 40 s). Queued one at a time, each takes the
0.5 s a lone evaluation takes, and the n-th in the queue waits n of them.

:data:`GATE` is that queue. ``with GATE.hold(urgent=True)`` wraps the work a user waits for (an
evaluation behind a click); ``urgent=False`` wraps work that can wait (a latency timing, which
also measures better alone). Waiting work reports "queued" through its progress callback, so a
Cancel, or a newer click that replaces the job, stops it while it waits.

Pure: no Streamlit.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from pruning_core.core.progress import ProgressCallback, report

POLL_S = 0.1          # how often a waiting job reports (and so notices a cancel)


class Gate:
    """A lock that lets urgent holders in first: a non-urgent holder waits while any urgent one waits."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0
        self.waiting = 0                 # holders waiting now (what a queued job reports)

    @contextlib.contextmanager
    def hold(self, *, urgent: bool, progress: ProgressCallback | None = None, what: str = "") -> Iterator[None]:
        """Hold the gate for the block. ``progress`` receives a "queued" event while waiting; an
        exception it raises (``Cancelled``) leaves the queue without running the block."""
        with self._cond:
            self.waiting += 1
            self._urgent_waiting += urgent
            try:
                while self._busy or (not urgent and self._urgent_waiting):
                    report(progress, "queued", 0, None, f"{self.waiting} in line for the CPU{f' ({what})' if what else ''}")
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1
                self._urgent_waiting -= urgent
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def yield_to_urgent(self, progress: ProgressCallback | None = None, what: str = "") -> None:
        """Inside ``hold(urgent=False)``: when urgent holders wait, let them all run, then take the gate
        back. Long background work (a repair, layer by layer) calls it between its steps, so a click
        waits for one step, not for the whole work."""
        with self._cond:
            if not self._urgent_waiting:
                return
            self._busy = False
            self._cond.notify_all()
            self.waiting += 1
            try:
                while self._busy or self._urgent_waiting:
                    report(progress, "queued", 0, None, f"{self.waiting} in line for the CPU{f' ({what})' if what else ''}")
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1
            self._busy = True


GATE = Gate()


def yielding(progress: ProgressCallback | None, what: str) -> ProgressCallback:
    """``progress`` that also lets waiting urgent work through :data:`GATE` at every step it reports."""
    def callback(event) -> None:
        if progress is not None:
            progress(event)
        GATE.yield_to_urgent(progress, what)
    return callback
