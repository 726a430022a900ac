"""Long work on the dashboard: one description of a piece of work and when it starts, and one way to show it.

Every slow call a page makes (scoring, evaluation, curves, timing, training) is a :class:`Work`: the session's
job name, what the user reads, the function and its arguments, whether it reports progress, and when it
starts (:data:`Start`). :meth:`Work.show` runs the call as one of the session's jobs (:mod:`app.runtime.board`)
in a worker thread while the page draws a progress bar with a Cancel button; leaving the page does not stop
it. Cancel makes the progress callback raise ``pruning_core.core.errors.Cancelled``: the work unwinds cleanly
(hooks are removed in ``finally`` blocks), nothing half-done is cached, and a cancelled job does not restart by
itself (the page offers a "Cancelled. Run: ..." button).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import streamlit as st

from app.runtime import board as jobs
from app.core import progress_text
from app.core.session import state
from app.core.ui import show_error
from pruning_core.core.errors import Cancelled

log = logging.getLogger("headprune.app")

# When a Work starts. "auto": when the page asks for it (Work.show), once; later visits find it running or
# finished. "button": only on a button press, its own "Run: <label>" button (drawn by Work.show) or one
# start_button for several (a page then shows only the started ones). "each_time": when the page asks, and again
# the next time: a timing, whose finished result is handed out once (the page keeps what it needs).
Start = Literal["auto", "button", "each_time"]
STARTS: tuple[str, ...] = ("auto", "button", "each_time")
QUICK_S = 0.3          # jobs finishing within this show no progress bar (cache hits, small work)
GLANCE_S = 0.05        # without waiting (``show(wait=False)``): how long a cache hit may take to count as done
POLL_S = 0.15          # how often the progress bar is refreshed
TICK_S = 0.05          # :func:`wait_for_change`: how often it looks at the jobs and the user


class _Pending:
    """What :meth:`Work.show` returns with ``wait=False`` while the work still runs."""

    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()

_describe = progress_text.describe     # "Pruning curve by gradient importance: step 1 of 11, …"


@dataclass(frozen=True)
class Work:
    """One piece of slow work a page asks for, described up front.

    ``fn(*args, **kwargs)`` is called with ``_progress=callback`` added when ``progress``; ``job`` names
    it in the session (e.g. "curve_gradient": a request under the same name with other arguments
    replaces the old job); ``label`` is what the user sees, Markdown, so a value from a link or a file
    in it goes through :mod:`app.core.text` (``md_code(spec)``); ``estimate_s``, its time estimate on 2 CPU
    cores (0 when it has none), given by the factory that builds it.
    """

    job: str
    label: str
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    progress: bool = True        # False: the work reports no progress, so it cannot be cancelled midway
    start: Start = "auto"        # when it starts: see Start
    estimate_s: float = 0.0      # seconds it should take on 2 CPU cores; not part of its identity

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise ValueError(f"Work {self.job!r}: start must be one of {', '.join(STARTS)}, got {self.start!r}.")

    def _ident(self) -> str:
        return jobs.identity(self.fn, self.args, self.kwargs)

    def _found(self) -> jobs.Job | None:
        found = job_board().get(self.job)
        return found if found is not None and found.ident == self._ident() else None

    def cached(self) -> bool:
        """Whether the server already holds this call's result (``fn`` is an ``st.cache_data`` function that another
        session, or this one before, ran with these arguments): a button would offer work already done, so
        :meth:`show` fetches it instead. Reads the cache without computing anything."""
        return in_server_cache(self.fn, self.args, self.kwargs)

    def started(self) -> bool:
        """Whether this session has this job (same arguments): running, finished or cancelled."""
        return self._found() is not None

    def running(self) -> bool:
        """Whether this session's job is this call and still running (e.g. started before a page change)."""
        found = self._found()
        return found is not None and found.running

    def ready(self) -> Any | None:
        """This call's finished result; None while absent, running, failed or cancelled. Draws and starts nothing."""
        found = self._found()
        return found.result if found is not None and not found.running and found.error is None else None

    def partial(self) -> Any | None:
        """What this call's job reported before its result (its progress's last ``partial``: a decoding evaluation's
        metric while its loss is computed); None when there is none or no such job."""
        found = self._found()
        return found.partial if found is not None else None

    def begin(self) -> None:
        """Start the work now if :meth:`show` would start it by itself (not ``"button"``, not cancelled, not
        there already), drawing nothing: a page queues work before it draws what comes first, and
        :meth:`show` later finds it running or finished."""
        if self.start != "button" and not _is_cancelled(self.job) and self._found() is None:
            job_board().start(self.job, self.label, self.fn, self.args, dict(self.kwargs), self.progress)

    def launch(self) -> None:
        """Start the work now (a button's callback: before the page runs), forgetting an earlier Cancel."""
        _clear_cancelled(self.job)
        job_board().start(self.job, self.label, self.fn, self.args, dict(self.kwargs), self.progress)

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for this call's running job to finish (at once when there is none)."""
        found = self._found()
        if found is not None:
            found.wait(seconds)

    def show(self, wait: bool = True) -> Any | None:
        """Start the work if its ``start`` says so, show its progress and Cancel while it runs, and return its
        result. ``None`` when it failed (message shown), was cancelled, or waits for a click: pages test
        for ``None`` and stop or skip the dependent part. With ``wait=False`` the progress is drawn once and
        :data:`PENDING` returned while the work runs: a page that must stay responsive (a fragment whose
        clicks wait for its run to end) ends its run and asks again."""
        board = job_board()
        current = self._found()
        if current is None or _is_cancelled(self.job):
            if _is_cancelled(self.job) or (self.start == "button" and not self.cached()):
                note = "Cancelled. " if _is_cancelled(self.job) else ""
                st.button(f"{note}Run: {self.label}", key=state.widget_key("job", f"run_{self.job}"),
                          on_click=self.launch)
                return None
            current = board.start(self.job, self.label, self.fn, self.args, dict(self.kwargs), self.progress)
        if not _follow(current, self.job, self.label, self.progress, wait):
            return PENDING
        log.debug("job %s (%s) took %.3f s", self.job, self.label,
                  (current.finished or time.time()) - current.started)
        error = current.error
        if self.start == "each_time" or (error is not None and not isinstance(error, Cancelled)):
            board.forget(self.job)   # a timing is shown once; a failure is tried again on the next run
        if error is None:
            return current.result
        if isinstance(error, Cancelled):
            st.info(f"{self.label}: cancelled.")
        elif isinstance(error, Exception):
            show_error(error, self.label)
        else:
            raise error
        return None


def wait_for_change(works: list[Work], redraw_s: float, interrupted: Callable[[], bool]) -> bool:
    """Wait, drawing nothing, until one of ``works`` finishes or reports a partial result, or (after ``redraw_s``)
    the progress of one has moved on, or ``interrupted()``. Returns whether the page should draw again (at once when none of
    them still runs); False when interrupted: the user's click or page change comes next.

    A place in the CPU queue moving up is not progress worth a redraw: in a class, every waiting session
    would redraw its page each time one evaluation ends, taking the CPU from the evaluations themselves."""
    found = [f for f in (w._found() for w in works) if f is not None and f.running]
    if not found:
        return True
    shown = [_progress_of(f) for f in found]
    partials = [f.partial for f in found]
    start = time.monotonic()
    while not interrupted():
        found[0].wait(TICK_S)
        if any(not f.running for f in found) or [f.partial for f in found] != partials:
            return True
        if time.monotonic() - start >= redraw_s and shown != [_progress_of(f) for f in found]:
            return True
    return False


def _progress_of(job: jobs.Job) -> tuple | None:
    """What the bar of ``job`` would show, None before its first report and while it waits in the CPU queue."""
    if job.latest is None or job.latest.stage == jobs.QUEUED:
        return None
    return _describe(job.latest, job.label)


def _follow(current: jobs.Job, job: str, label: str, progress: bool, wait: bool = True) -> bool:
    """Wait for ``current`` with a progress bar (and Cancel when the work reports ``progress``); nothing is
    drawn when it finishes within :data:`QUICK_S`. Without ``wait``: the bar drawn once, and False while
    the work runs. Returns whether it finished."""
    current.wait(QUICK_S if wait else GLANCE_S)
    if not current.running:
        return True
    holder = st.empty()
    with holder.container():
        fraction, text = _describe(current.latest, label)
        bar = st.progress(fraction or 0.0, text=text)
        if progress:             # without a progress callback the work cannot be stopped midway
            st.button("Cancel", key=state.widget_key("job", f"cancel_{job}"), on_click=_cancel,
                      args=(job,), icon=":material/cancel:")
    if not wait:
        return False
    # a page change or a click stops this loop (Streamlit raises in the script thread), not the job
    shown = (fraction, text)
    while current.running:
        current.wait(POLL_S)
        now = _describe(current.latest, label)
        if now != shown:    # an unchanged bar is not sent again: each send makes the browser redraw, and a
            shown = now     # class's sessions queued for the CPU would each send one per poll
            bar.progress(now[0] if now[0] is not None else 0.0, text=now[1])
    holder.empty()
    return True


def start_button(label: str, key: str, works: list[Work], **button: Any) -> None:
    """One button that starts every work of ``works`` not started yet (each should have ``start="button"``);
    drawn only while one is neither started nor in the server's cache, so it is gone once the work runs (its
    results then show where the button was). ``key`` is the button's name under :func:`app.core.session.state.widget_key`'s "job" page."""
    waiting = [w for w in works if not w.started() and not w.cached()]
    if waiting:
        st.button(label, key=state.widget_key("job", key), on_click=_launch_all, args=(waiting,), **button)


def in_server_cache(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """Whether the ``st.cache_data`` function ``fn`` holds a result for ``args`` and ``kwargs`` (their hash, as
    Streamlit keys it), computing nothing. Streamlit has no public call for this; its cache's own key and read are
    used, and anything unexpected (another function, another Streamlit) counts as not cached: the page then
    offers its button as before."""
    try:
        from streamlit.runtime.caching import cache_utils

        info = fn._info
        cache = info.get_function_cache(fn._function_key)
        key = cache_utils._make_value_key(cache_type=info.cache_type, func=info.func, func_args=args,
                                          func_kwargs=kwargs, hash_funcs=info.hash_funcs)
        cache.read_result_and_freshness(key)
    except Exception:                   # noqa: BLE001 - a miss (CacheKeyNotFoundError) or not a cached function
        return False
    return True


def _launch_all(works: list[Work]) -> None:
    for w in works:
        w.launch()


def _cancel(job: str) -> None:
    job_board().cancel(job)
    _mark_cancelled(job)


# -- this session's jobs ------------------------------------------------------------------------
def job_board() -> jobs.JobBoard:
    """This session's :class:`app.runtime.board.JobBoard` (long work that survives page changes)."""
    board = st.session_state.get(state.JOBS)
    if board is None:
        board = st.session_state[state.JOBS] = jobs.JobBoard(alive=_session_alive())
    return board


def _session_alive():
    """This browser session's liveness check for its jobs (None without a Streamlit server, e.g. AppTest)."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not runtime.exists():
        return None
    return jobs.session_alive(runtime.get_instance(), ctx.session_id)


def _is_cancelled(job: str) -> bool:
    """Whether the user cancelled ``job`` (it then waits for a click instead of starting by itself)."""
    state.init()
    return job in st.session_state[state.CANCELLED]


def _mark_cancelled(job: str) -> None:
    state.init()
    st.session_state[state.CANCELLED].add(job)


def _clear_cancelled(job: str) -> None:
    state.init()
    st.session_state[state.CANCELLED].discard(job)


__all__ = ["Work", "Start", "STARTS", "PENDING", "start_button", "job_board", "wait_for_change"]
