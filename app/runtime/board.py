"""Long work that belongs to one browser session and survives page changes.

A :class:`JobBoard` lives in the session's ``st.session_state`` (:func:`app.runtime.work.job_board`). Each job
runs ``fn(*args, **kwargs)`` in a worker thread not tied to a script run, so it keeps running when the user
visits another page, and :meth:`app.runtime.work.Work.show` finds it again by name and arguments. Cancel, a
newer request under the same name, or the end of the session (:func:`session_alive`, after
:data:`GONE_AFTER_S`) stops a job at its next progress callback. Every session's forward passes run one at a
time through :data:`GATE`, the server's CPU queue (``urgent=True`` for work a user waits for); waiting work
reports "queued", so Cancel still stops it. docs/DASHBOARD.md gives the reasons.

Pure: no Streamlit, so the survival rules and the queue are tested without a browser.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pruning_core.core.errors import Cancelled
from pruning_core.core.progress import ProgressCallback, ProgressEvent, report

MAX_JOBS = 24          # jobs a session keeps (finished ones are dropped oldest first beyond this)
GONE_AFTER_S = 20.0    # a session disconnected this long is gone (a page reload reconnects sooner)
EXIT_WAIT_S = 30.0     # at interpreter exit, how long running jobs get to stop at a progress callback
POLL_S = 0.1           # how often work waiting in the CPU queue reports (and so notices a cancel)
QUEUED = "queued"      # the progress stage of work waiting in the CPU queue

_running: set["Job"] = set()     # every board's running jobs, for :func:`stop_running` at exit
_running_lock = threading.Lock()


def session_alive(runtime, session_id: str, gone_after_s: float = GONE_AFTER_S,
                  clock: Callable[[], float] = time.monotonic) -> Callable[[], bool]:
    """A check that session ``session_id`` is still connected to ``runtime`` (Streamlit's
    ``Runtime.is_active_session``, thread-safe); it turns False once the session has been inactive
    for ``gone_after_s`` seconds in a row, so a brief reconnect does not cancel anything."""
    inactive_since: list[float] = []

    def alive() -> bool:
        if runtime.is_active_session(session_id):
            inactive_since.clear()
            return True
        if not inactive_since:
            inactive_since.append(clock())
        return clock() - inactive_since[0] < gone_after_s

    return alive


def identity(fn: Callable[..., Any], args: tuple, kwargs: dict) -> str:
    """What a job computes, as a short key: the function and its arguments (masks and settings)."""
    text = repr((getattr(fn, "__module__", ""), getattr(fn, "__qualname__", repr(fn)), args,
                 sorted(kwargs.items())))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class Job:
    """One piece of work: its thread, the latest progress event, and the outcome once finished."""

    name: str                          # the page's name for it, e.g. "curve_gradient"
    ident: str                         # :func:`identity` of the call
    label: str                         # what the user sees, e.g. "Pruning curve (gradient)"
    cancel: threading.Event = field(default_factory=threading.Event)
    latest: ProgressEvent | None = None
    partial: Any = None                # the latest ``partial`` the work reported (an evaluation's metric before its loss)
    result: Any = None
    error: BaseException | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    thread: threading.Thread | None = None
    alive: Callable[[], bool] | None = None    # False once the session that asked for it is gone

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set() or isinstance(self.error, Cancelled)

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the work to finish."""
        if self.thread is not None:
            self.thread.join(seconds)

    def _callback(self, event: ProgressEvent) -> None:
        self.latest = event
        if event.partial is not None:
            self.partial = event.partial
        if not self.cancel.is_set() and self.alive is not None and not self.alive():
            self.cancel.set()                          # nobody is left to see the result
        if self.cancel.is_set():
            raise Cancelled(f"{self.label} was cancelled.")

    def _work(self, fn: Callable[..., Any], args: tuple, kwargs: dict, progress: bool) -> None:
        try:
            self.result = fn(*args, **({"_progress": self._callback} if progress else {}), **kwargs)
        except BaseException as exc:  # noqa: BLE001 - shown by the page that asks for the job
            self.error = exc
        finally:
            self.finished = time.time()
            with _running_lock:
                _running.discard(self)

    __hash__ = object.__hash__          # a job is itself, not its fields (it sits in :data:`_running`)


class JobBoard:
    """The jobs of one session, by name (one job per name; a new call under a name replaces the old)."""

    def __init__(self, max_jobs: int = MAX_JOBS, alive: Callable[[], bool] | None = None) -> None:
        self.max_jobs = max_jobs
        self.alive = alive              # the session's liveness (:func:`session_alive`); None: always alive
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def running(self, name: str) -> bool:
        job = self._jobs.get(name)
        return job is not None and job.running

    def start(self, name: str, label: str, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
              progress: bool = True) -> Job:
        """Start ``fn(*args, **kwargs)`` as job ``name`` (plus ``_progress=`` when ``progress``); a job
        of that name still running for other arguments is cancelled. A running job for the same
        arguments is kept and returned (a double click starts nothing twice)."""
        kwargs = dict(kwargs or {})
        ident = identity(fn, args, kwargs)
        with self._lock:
            old = self._jobs.get(name)
            if old is not None and old.running and old.ident == ident and not old.cancel.is_set():
                return old
            if old is not None and old.running:
                old.cancel.set()
            job = Job(name, ident, label, alive=self.alive)
            job.thread = threading.Thread(target=job._work, args=(fn, args, kwargs, progress),
                                          name=f"headprune-{name}", daemon=True)
            self._jobs.pop(name, None)
            self._jobs[name] = job
            self._trim()
        with _running_lock:
            _running.add(job)
        job.thread.start()
        return job

    def results(self, prefix: str) -> dict[str, Any]:
        """The results of this board's finished, successful jobs whose name starts with ``prefix``, by name."""
        with self._lock:
            done = [j for j in self._jobs.values() if j.name.startswith(prefix) and not j.running]
        return {j.name: j.result for j in done if j.error is None and j.result is not None}

    def cancel(self, name: str) -> None:
        """Ask job ``name`` to stop at its next progress callback (nothing when there is none)."""
        job = self._jobs.get(name)
        if job is not None:
            job.cancel.set()

    def forget(self, name: str) -> None:
        """Drop job ``name`` (a finished timing is shown once; the next request measures again)."""
        with self._lock:
            self._jobs.pop(name, None)

    def cancel_all(self) -> None:
        for job in list(self._jobs.values()):
            job.cancel.set()

    def _trim(self) -> None:
        finished = [n for n, j in self._jobs.items() if not j.running]
        while len(self._jobs) > self.max_jobs and finished:
            self._jobs.pop(finished.pop(0))

    def __len__(self) -> int:
        return len(self._jobs)


@atexit.register
def stop_running(timeout_s: float = EXIT_WAIT_S) -> int:
    """Cancel every running job and wait up to ``timeout_s`` in all for their threads; returns how many
    are still running after that.

    Registered to run at interpreter exit (a server stopped, a test process ending): job threads are
    daemons, and one still inside torch when the interpreter finalizes is killed as it takes the GIL
    back, which aborts the process ("terminate called without an active exception") after all the
    work that mattered is done. Cancelled, the work stops at its next progress callback and unwinds
    (hooks removed in ``finally`` blocks).
    """
    with _running_lock:
        jobs = list(_running)
    for job in jobs:
        job.cancel.set()
    deadline = time.monotonic() + timeout_s
    for job in jobs:
        if job.thread is not None and job.thread is not threading.current_thread():
            job.thread.join(max(0.0, deadline - time.monotonic()))
    return sum(1 for job in jobs if job.running)


# -- the server's CPU queue -------------------------------------------------------------------------
class Gate:
    """A lock with three ranks: urgent holders (a click's evaluation) go first, then plain ones (the work a user waits
    for now: a mask's latency, a repair), then idle ones (work for later: the latency estimate's calibration). A
    holder waits while one of a higher rank waits (or one that let others through waits to take the gate back)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._owner: int | None = None   # the thread holding the gate (one that let urgent work through holds none)
        self._urgent_waiting = 0
        self._returning = 0              # urgent holders that let others through, waiting to take the gate back
        self._plain_waiting = 0          # plain holders waiting, new or taking the gate back (idle ones wait for them)
        self.waiting = 0                 # holders waiting now (what a queued job reports)

    def _blocked(self, urgent: bool, idle: bool, returning: bool = False) -> bool:
        """Whether a waiter of this rank waits on (one ``returning`` lets the urgent holders now waiting go first)."""
        return bool(self._busy or ((returning or not urgent) and self._urgent_waiting)
                    or (not urgent and self._returning) or (idle and self._plain_waiting))

    @contextlib.contextmanager
    def hold(self, *, urgent: bool, idle: bool = False, progress: ProgressCallback | None = None,
             what: str = "") -> Iterator[None]:
        """Hold the gate for the block (``idle``: only when no other holder waits). ``progress`` receives a "queued"
        event while waiting; an exception it raises (``Cancelled``) leaves the queue without running the block."""
        plain = not urgent and not idle
        with self._cond:
            self.waiting += 1
            self._urgent_waiting += urgent
            self._plain_waiting += plain
            try:
                while self._blocked(urgent, idle):
                    report(progress, QUEUED, 0, None, f"{self.waiting} in line for the CPU{f' ({what})' if what else ''}")
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1
                self._urgent_waiting -= urgent
                self._plain_waiting -= plain
            self._busy, self._owner = True, threading.get_ident()
        try:
            yield
        finally:
            with self._cond:
                if self._owner == threading.get_ident():   # not when cancelled while letting urgent work run
                    self._busy, self._owner = False, None
                self._cond.notify_all()

    def yield_to_urgent(self, progress: ProgressCallback | None = None, what: str = "", *, urgent: bool = False,
                        idle: bool = False) -> bool:
        """Inside ``hold``: when urgent holders wait (for an ``idle`` caller: any holder), let them all run, then take
        the gate back; True when some ran. Long background work (a repair, layer by layer) calls it between its
        steps, so a click waits for one step, not for the whole work. ``urgent``: the caller is itself urgent (an
        evaluation that has shown its metric lets the next clicks' evaluations through before its loss); no
        background work takes the gate before it is back. Outside the gate it does nothing; cancelled while it waits
        (``progress`` raises), it leaves the gate to whoever holds it then."""
        plain = not urgent and not idle
        with self._cond:
            if not (self._urgent_waiting or (idle and self._plain_waiting)) or self._owner != threading.get_ident():
                return False
            self._busy, self._owner = False, None
            self._cond.notify_all()
            self.waiting += 1
            self._returning += urgent
            self._plain_waiting += plain
            try:
                while self._blocked(urgent, idle, returning=True):
                    report(progress, QUEUED, 0, None, f"{self.waiting} in line for the CPU{f' ({what})' if what else ''}")
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1
                self._returning -= urgent
                self._plain_waiting -= plain
            self._busy, self._owner = True, threading.get_ident()
            return True


GATE = Gate()


def pausing(progress: ProgressCallback | None, what: str, *, idle: bool = False) -> Callable[[], bool]:
    """A timing's ``pause`` (``pruning_core.bench.benchmark``): before each timed call, waiting urgent work (for an
    ``idle`` timing: any waiting work) goes through :data:`GATE` first; True when some did (the timing then redoes
    its round)."""
    return lambda: GATE.yield_to_urgent(progress, what, idle=idle)


def yielding(progress: ProgressCallback | None, what: str) -> ProgressCallback:
    """``progress`` that also lets waiting urgent work through :data:`GATE` at every step it reports."""
    def callback(event) -> None:
        if progress is not None:
            progress(event)
        GATE.yield_to_urgent(progress, what)
    return callback
