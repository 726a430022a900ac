"""Long work per session that survives page changes: :mod:`app.runtime.board`, :class:`app.runtime.work.Work`
and the Curves page, which starts work only on a button.

The board is tested without Streamlit; ``Work.show`` is interrupted the way Streamlit interrupts a
page when the user goes elsewhere (a ``StopException`` in the script thread); the pages run in
AppTest on a tiny model (switch page and back, two sessions at once, a cancelled ablation).
"""
from __future__ import annotations

import threading
import time

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.testing.v1 import AppTest

from app.runtime import board as jobs
from browser_helpers import ROOT, ok
from pruning_core.core.errors import Cancelled
from pruning_core.core.progress import ProgressEvent

CURVES = "app_pages/curves.py"
HEAD_MAP = "app_pages/head_map.py"


class Calls(list):
    """A call log whose repr (what a job's identity reads) does not change as it fills."""

    __repr__ = object.__repr__


class Gate(threading.Event):
    """An event whose repr stays the same when it is set."""

    __repr__ = object.__repr__


def slow(gate: threading.Event, calls: list, value="done", _progress=None):
    """Work that reports progress until ``gate`` is set (a cancel raises inside the callback)."""
    calls.append(value)
    i = 0
    while not gate.is_set():
        i += 1
        if _progress is not None:
            _progress(ProgressEvent("work", i, None, ""))
        time.sleep(0.01)
    return value


def test_a_job_runs_on_without_anyone_watching_and_is_not_started_twice():
    board, gate, calls = jobs.JobBoard(), Gate(), Calls()
    job = board.start("curve", "Curve", slow, (gate, calls))
    deadline = time.time() + 30
    while calls != ["done"] and time.time() < deadline:                    # the job has started
        time.sleep(0.01)
    assert board.start("curve", "Curve", slow, (gate, calls)) is job      # same request: the same job
    assert job.running and calls == ["done"]
    gate.set()
    job.wait(5)
    assert not job.running and job.result == "done" and job.error is None
    assert board.get("curve") is job and calls == ["done"]


def test_a_request_with_other_arguments_cancels_the_old_job():
    board, gate, calls = jobs.JobBoard(), Gate(), Calls()
    old = board.start("curve", "Curve", slow, (gate, calls, "a"))
    new = board.start("curve", "Curve", slow, (gate, calls, "b"))
    old.wait(5)
    assert isinstance(old.error, Cancelled) and board.get("curve") is new and new.running
    board.cancel("curve")
    new.wait(5)
    assert isinstance(new.error, Cancelled) and new.cancelled


def test_the_board_keeps_running_jobs_and_drops_the_oldest_finished_beyond_its_size():
    board, gate = jobs.JobBoard(max_jobs=3), Gate()
    running = board.start("long", "Long", slow, (gate, Calls()))
    for i in range(5):
        board.start(f"quick{i}", "Quick", lambda _progress=None, i=i: i).wait(5)
    assert len(board) <= 3 and board.get("long") is running and board.get("quick4") is not None
    gate.set()


def test_leaving_the_page_while_a_job_runs_does_not_cancel_it(monkeypatch):
    """Streamlit stops a page's script when the user goes to another page; the job goes on, and the
    next visit gets its result without starting it again."""
    from app.runtime import work

    board = jobs.JobBoard()                            # bare mode has no session state: one board
    monkeypatch.setattr(work, "job_board", lambda: board)
    monkeypatch.setattr(work, "_is_cancelled", lambda job: False)
    gate, calls, polls = Gate(), Calls(), []
    real_wait = jobs.Job.wait

    def interrupted(self, seconds):
        real_wait(self, seconds)
        polls.append(seconds)
        if len(polls) == 3:                         # the user clicks another page
            raise StopException()
    monkeypatch.setattr(jobs.Job, "wait", interrupted)
    with pytest.raises(StopException):
        work.Work("curve", "Curve", slow, (gate, calls)).show()
    job = board.get("curve")
    assert job.running and not job.cancel.is_set()
    monkeypatch.setattr(jobs.Job, "wait", real_wait)
    gate.set()
    assert work.Work("curve", "Curve", slow, (gate, calls)).show() == "done"      # back on the page
    assert calls == ["done"]                                               # started once


def queued(gate: threading.Event, _progress=None):
    """Work that waits its turn, reporting the same "queued" event until ``gate`` is set (app.runtime.board.Gate)."""
    while not gate.is_set():
        if _progress is not None:
            _progress(ProgressEvent("queued", 0, None, "3 in line for the CPU"))
        time.sleep(0.01)
    return "done"


def test_a_waiting_job_sends_its_progress_only_when_it_changes(monkeypatch):
    """A class of sessions queued for the CPU: each poll of an unchanged bar would be one more message to
    every waiting browser (which redraws the page for each)."""
    from app.runtime import work

    board = jobs.JobBoard()
    monkeypatch.setattr(work, "job_board", lambda: board)
    monkeypatch.setattr(work, "_is_cancelled", lambda job: False)
    sent, polls, gate = [], [], Gate()

    class Bar:
        def progress(self, value, text=""):
            sent.append(text)

    monkeypatch.setattr(work.st, "progress", lambda value, text="": sent.append(text) or Bar())
    real_wait = jobs.Job.wait

    def counting(self, seconds):
        polls.append(seconds)
        if len(polls) == 12:
            gate.set()
        real_wait(self, min(seconds, 0.02))
    monkeypatch.setattr(jobs.Job, "wait", counting)
    assert work.Work("wait", "Evaluating", queued, (gate,)).show() == "done"
    assert len(polls) >= 12
    assert len(sent) <= 2 and all("3 in line" in t for t in sent[1:])     # the first text, then the queue line once


@pytest.fixture
def app_eval_limit():
    """The jobs run with the dashboard's own example count."""
    return None


def _curve_figures(at: AppTest) -> int:
    return sum(1 for e in at.get("plotly_chart") if e.key is None)


def _button(at: AppTest, label: str):
    return next((b for b in at.button if b.label == label), None)


def test_curves_start_on_a_button_and_survive_a_page_change(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, CURVES))
    assert _curve_figures(at) == 0 and _button(at, "Compute the curves") is not None   # nothing ran by itself
    assert not at.session_state["hp_jobs"].get("curve_gradient") if "hp_jobs" in at.session_state else True
    ok(_button(at, "Compute the curves").click().run())
    assert _curve_figures(at) == 1 and _button(at, "Compute the curves") is None
    job = at.session_state["hp_jobs"].get("curve_gradient")
    ok(at.switch_page(HEAD_MAP).run())
    ok(at.switch_page(CURVES).run())
    assert _curve_figures(at) == 1 and _button(at, "Compute the curves") is None       # still there
    assert at.session_state["hp_jobs"].get("curve_gradient") is job                    # not run again
    other = ok(app_for(tiny_bert, CURVES))               # a second session: the server's curve, not its button
    assert _curve_figures(other) == 1 and _button(other, "Compute the curves") is None


def test_after_a_cancelled_ablation_the_run_button_goes_when_the_table_shows(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, CURVES))
    at.session_state["hp_cancelled"] = {"ablation"}
    ok(at.run())
    rerun = next((b for b in at.button if b.label.startswith("Cancelled. Run: Single-head ablation")), None)
    assert rerun is not None and not _ablation_shown(at)
    ok(rerun.click().run())
    assert _ablation_shown(at)                                                         # the finished table
    assert not [b.label for b in at.button if "Run: Single-head ablation" in b.label]
    ok(at.switch_page(HEAD_MAP).run())
    ok(at.switch_page(CURVES).run())
    assert _ablation_shown(at) and not [b.label for b in at.button if "Run: Single-head ablation" in b.label]  # kept


def _ablation_shown(at) -> bool:
    return any(c.key == "ablation_heatmap" for c in at.get("plotly_chart"))


class FakeRuntime:
    """Streamlit's ``Runtime.is_active_session`` for one session, switched by the test."""

    def __init__(self) -> None:
        self.connected = True

    def is_active_session(self, session_id: str) -> bool:
        assert session_id == "s1"
        return self.connected


def test_a_session_counts_as_gone_only_after_a_grace_period():
    runtime, now = FakeRuntime(), [100.0]
    alive = jobs.session_alive(runtime, "s1", gone_after_s=20, clock=lambda: now[0])
    assert alive()
    runtime.connected = False                    # the browser closed (or is reloading)
    assert alive()
    now[0] += 19
    assert alive()
    runtime.connected = True                     # a reload reconnected: the clock starts again
    assert alive()
    runtime.connected = False
    now[0] += 1
    assert alive()
    now[0] += 20
    assert not alive()


def test_a_job_whose_session_is_gone_stops():
    runtime, gate, calls = FakeRuntime(), Gate(), Calls()
    board = jobs.JobBoard(alive=jobs.session_alive(runtime, "s1", gone_after_s=0.2))
    job = board.start("score_gradient", "Scoring heads", slow, (gate, calls))
    time.sleep(0.1)
    assert job.running
    runtime.connected = False                    # nobody is left to see the result
    job.wait(5)
    assert not job.running and isinstance(job.error, Cancelled)
    gate.set()


def test_the_share_bundle_includes_every_curve_the_session_computed(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, CURVES))
    at.select_slider(key="hp_w_curves_step").set_value(0.2).run()       # not the Share page's own 10 % step
    ok(_button(at, "Compute the curves").click().run())
    assert _curve_figures(at) == 1
    at = ok(at.switch_page("app_pages/share.py").run())
    computed = sorted(n.removeprefix("curve_") for n in at.session_state["hp_jobs"].results("curve_"))
    assert computed and at.multiselect(key="hp_w_share_curves").value == computed
    assert any("curves" in c.value for c in at.caption if c.value.startswith("The bundle has")), \
        [c.value for c in at.caption]
    for name in computed:                                              # the same curves, not new ones
        assert at.session_state["hp_jobs"].get(f"curve_{name}").result.step == 0.2


EXIT_SCRIPT = """
import sys, time
from app.runtime import board as jobs

def work(marker, _progress):
    try:
        while True:                      # stands for a long scoring: a progress callback now and then
            time.sleep(0.01)
            _progress(None)
    finally:
        with open(marker, "w") as out:
            out.write("unwound")

jobs.JobBoard().start("scoring", "Scoring", work, (sys.argv[1],))
time.sleep(0.1)                          # the interpreter now exits with the job running
"""


def test_a_job_still_running_at_exit_is_cancelled_and_unwinds_before_the_interpreter_ends(tmp_path):
    """A daemon job thread inside torch when the interpreter finalizes aborts the process ("terminate called
    without an active exception"); at exit the running jobs are cancelled and waited for instead."""
    import os
    import subprocess
    import sys

    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(marker)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "unwound"          # without the exit hook the thread is killed mid-loop
