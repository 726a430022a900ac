"""A waiting fragment notices the user at once and costs the CPU nothing (:mod:`app.core.reruns`,
:func:`app.runtime.work.wait_for_change`): the class regression of issue 31 was eight sessions redrawing their
maps four times a second while their evaluations waited for the CPU."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

from app.core import reruns
from app.runtime import board as jobs
from app.runtime.work import wait_for_change
from pruning_core.core.progress import ProgressEvent


def test_user_waiting_reads_the_pinned_streamlit_requests(monkeypatch):
    requests = ScriptRequests()
    monkeypatch.setattr(reruns, "get_script_run_ctx", lambda: SimpleNamespace(script_requests=requests))
    assert not reruns.user_waiting()
    requests.request_rerun(RerunData(fragment_id="live"))      # a click inside the fragment: queued, not preempting
    assert requests.on_scriptrunner_yield() is None
    assert reruns.user_waiting()
    requests.request_stop()                                      # the tab closed
    assert reruns.user_waiting()
    monkeypatch.setattr(reruns, "get_script_run_ctx", lambda: None)
    assert not reruns.user_waiting()                              # outside a script run


class Found:
    """A stand-in for :class:`app.runtime.work.Work`: the session's job it finds."""

    def __init__(self, job):
        self.job = job

    def _found(self):
        return self.job


def started(fn) -> Found:
    return Found(jobs.JobBoard().start("w", "Evaluating this mask", fn, progress=True))


def test_a_finished_job_ends_the_wait():
    gate = threading.Event()
    work = started(lambda _progress: gate.wait(30))
    threading.Timer(0.2, gate.set).start()
    t = time.monotonic()
    assert wait_for_change([work], redraw_s=60, interrupted=lambda: False)
    assert time.monotonic() - t < 5


def test_a_click_ends_the_wait_at_once_without_a_redraw():
    gate = threading.Event()
    work = started(lambda _progress: gate.wait(30))
    clicked = threading.Event()
    threading.Timer(0.2, clicked.set).start()
    t = time.monotonic()
    assert not wait_for_change([work], redraw_s=60, interrupted=clicked.is_set)
    assert time.monotonic() - t < 5 and work.job.running
    gate.set()


def test_unchanged_progress_is_not_redrawn_changed_progress_is():
    gate, first, moved = threading.Event(), threading.Event(), threading.Event()

    def fn(_progress):
        _progress(ProgressEvent("evaluate", 1, 4))
        first.set()
        moved.wait(30)
        _progress(ProgressEvent("evaluate", 2, 4))
        gate.wait(30)

    work = started(fn)
    assert first.wait(30)
    threading.Timer(0.5, moved.set).start()
    assert wait_for_change([work], redraw_s=0.05, interrupted=lambda: False)
    assert moved.is_set() and work.job.latest.done == 2 and work.job.running    # redrawn for step 2, not before
    gate.set()


def test_nothing_running_means_draw_now():
    work = started(lambda _progress: None)
    work.job.wait(10)
    assert wait_for_change([work], redraw_s=60, interrupted=lambda: False)


def test_a_place_in_the_cpu_queue_is_not_redrawn():
    gate = threading.Event()

    def fn(_progress):
        for place in range(8, 0, -1):
            _progress(ProgressEvent(jobs.QUEUED, 0, None, f"{place} in line for the CPU"))
            time.sleep(0.05)
        gate.wait(30)

    work = started(fn)
    threading.Timer(0.8, gate.set).start()
    assert wait_for_change([work], redraw_s=0.01, interrupted=lambda: False)
    assert gate.is_set() and not work.job.running         # only the end redraws


def test_a_partial_result_ends_the_wait_at_once_and_stays_on_the_job():
    """A translation's loss, reported before its decoding, is drawn without waiting for the redraw interval."""
    gate, ready = threading.Event(), threading.Event()

    def fn(_progress):
        _progress(ProgressEvent("evaluate", 2, 4))
        ready.wait(30)
        _progress(ProgressEvent("evaluate", 2, 4, partial=1.25))
        _progress(ProgressEvent("evaluate", 3, 4))               # a later event without one keeps the partial
        gate.wait(30)

    work = started(fn)
    threading.Timer(0.3, ready.set).start()
    t = time.monotonic()
    assert wait_for_change([work], redraw_s=60, interrupted=lambda: False)
    assert time.monotonic() - t < 10 and work.job.running
    deadline = time.monotonic() + 10
    while work.job.latest.done != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert work.job.partial == 1.25
    gate.set()
