"""A click never waits for the latency calibration: opening the Head map (every head kept) starts none, so the first
click's evaluation is the first work in the CPU queue; the calibration starts after that click's metric."""
from __future__ import annotations

import pytest

from apptest_helpers import click_head
from browser_helpers import ok

HEAD_MAP = "app_pages/head_map.py"

pytestmark = pytest.mark.usefixtures("stand_in_scripts")


def test_opening_the_page_starts_no_calibration_and_a_click_comes_first(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    board = at.session_state["hp_jobs"]
    assert board.get("latency_model") is None                  # the page is open, every head kept: no calibration
    at = ok(click_head(at, "encoder_self", 0, 1))
    board = at.session_state["hp_jobs"]
    evaluation, calibration = board.get("eval"), board.get("latency_model")
    assert evaluation is not None and calibration is not None
    assert evaluation.started <= calibration.started            # queued after the click's evaluation, never before


def test_a_click_during_a_timing_waits_for_one_call_not_a_round():
    """A timing (the calibration, a mask's latency) holds the CPU queue as background work; a click that queues while
    one of its calls runs goes next, before the round's other call, and that round is timed again."""
    import threading

    from app.runtime import board
    from pruning_core.bench.timing import interleaved_latencies

    gate, order, clicked = board.Gate(), [], threading.Event()
    saved, board.GATE = board.GATE, gate

    def click():
        with gate.hold(urgent=True):
            order.append("click")

    def call(name):
        order.append(name)
        if len(order) == 3 and not clicked.is_set():       # round 1's first call: a click arrives meanwhile
            clicked.set()
            threading.Thread(target=click).start()
            while gate.waiting == 0:                        # until the click is in the queue
                threading.Event().wait(0.005)

    try:
        with gate.hold(urgent=False):
            timed = interleaved_latencies({n: (lambda n=n: call(n)) for n in ("dense", "pruned")}, warmup=1,
                                          repeats=2, min_seconds=0.0, pause=board.pausing(None, "latency"))
    finally:
        board.GATE = saved
    assert order[:5] == ["dense", "pruned", "dense", "click", "dense"]      # in before "pruned"; the round redone
    assert timed.rounds == 2
