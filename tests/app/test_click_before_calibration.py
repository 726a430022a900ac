"""A click never waits for the latency calibration: opening the Head map (every head kept) starts none, so the first
click's evaluation is the first work in the CPU queue; the calibration starts after that click's metric and, as idle
work, lets the click's own timing go first."""
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


def _timed_while_one_arrives(arrival: str, arrival_rank: dict, *, idle: bool) -> tuple[list[str], int]:
    """A dense/pruned timing holding a fresh CPU queue (``idle`` or plain work) whose round 1's first call sees
    ``arrival`` queue with ``arrival_rank`` (``Gate.hold`` keywords); returns the order of calls and the rounds."""
    import threading

    from app.runtime import board
    from pruning_core.bench.timing import interleaved_latencies

    gate, order, arrived = board.Gate(), [], threading.Event()
    saved, board.GATE = board.GATE, gate

    def arrive():
        with gate.hold(**arrival_rank):
            order.append(arrival)

    def call(name):
        order.append(name)
        if len(order) == 3 and not arrived.is_set():       # round 1's first call: the other work queues meanwhile
            arrived.set()
            threading.Thread(target=arrive).start()
            while gate.waiting == 0:                        # until it is in the queue
                threading.Event().wait(0.005)

    try:
        with gate.hold(urgent=False, idle=idle):
            timed = interleaved_latencies({n: (lambda n=n: call(n)) for n in ("dense", "pruned")}, warmup=1,
                                          repeats=2, min_seconds=0.0, pause=board.pausing(None, "latency", idle=idle))
    finally:
        board.GATE = saved
    return order, timed.rounds


def test_a_click_during_a_timing_waits_for_one_call_not_a_round():
    """A timing (the calibration, a mask's latency) holds the CPU queue as background work; a click that queues while
    one of its calls runs goes next, before the round's other call, and that round is timed again."""
    order, rounds = _timed_while_one_arrives("click", {"urgent": True}, idle=False)
    assert order[:5] == ["dense", "pruned", "dense", "click", "dense"]      # in before "pruned"; the round redone
    assert rounds == 2


def test_a_waiting_mask_timing_goes_before_the_estimates_calibration():
    """Three ranks: with a click holding the CPU, the estimate's calibration (idle) and a mask's timing (plain)
    queued behind it, the timing goes next, whichever queued first."""
    import threading

    from app.runtime import board

    gate, order = board.Gate(), []

    def holder(name, **rank):
        with gate.hold(**rank):
            order.append(name)

    with gate.hold(urgent=True):
        idle = threading.Thread(target=holder, args=("calibration",), kwargs={"urgent": False, "idle": True})
        idle.start()
        while gate.waiting < 1:
            threading.Event().wait(0.005)
        plain = threading.Thread(target=holder, args=("timing",), kwargs={"urgent": False})
        plain.start()
        while gate.waiting < 2:
            threading.Event().wait(0.005)
    idle.join(30)
    plain.join(30)
    assert order == ["timing", "calibration"]


def test_the_calibration_lets_a_masks_timing_through_between_its_calls():
    """The calibration holds the queue; a mask's timing that queues while one of its calls runs goes next (the
    calibration's round is timed again); a plain timing's pause lets no plain work through."""
    from app.runtime import board

    order, rounds = _timed_while_one_arrives("timing", {"urgent": False}, idle=True)
    assert order[:5] == ["dense", "pruned", "dense", "timing", "dense"]
    assert rounds == 2
    gate, saved = board.Gate(), board.GATE
    board.GATE = gate
    try:
        with gate.hold(urgent=False):
            assert board.pausing(None, "latency")() is False  # nothing waits
            gate._plain_waiting = 1                          # as if a mask's timing waited
            assert board.pausing(None, "latency")() is False
            gate._plain_waiting = 0
    finally:
        board.GATE = saved


def test_the_first_clicks_timing_does_not_wait_for_the_calibration(tiny_bert_24, monkeypatch):
    """The estimate's calibration and the first mask's timing start together after the first click's metric;
    the timing takes the CPU first (the calibration serves later clicks)."""
    import threading

    from app.headmap import cache as cache_headmap
    from app.model import cache
    from app.runtime import board
    from pruning_core.bench import half_mask

    monkeypatch.setattr(board, "GATE", board.Gate())
    spec = str(tiny_bert_24.model)
    mask = half_mask(cache.load(spec).layout, seed=5)
    order, real = [], cache_headmap.probe_shape
    monkeypatch.setattr(cache_headmap, "probe_shape",                  # called first thing inside the queue
                        lambda loaded: order.append(threading.current_thread().name) or real(loaded))
    cache_headmap.latency_model.clear()
    jobs = [threading.Thread(target=lambda: cache_headmap.latency_model(spec), name="calibration"),
            threading.Thread(target=lambda: cache_headmap.latency(spec, mask), name="timing")]
    with board.GATE.hold(urgent=True):                                  # the click's evaluation
        for job in jobs:
            job.start()
            while board.GATE.waiting < jobs.index(job) + 1:                  # in line, in this order
                threading.Event().wait(0.005)
    for job in jobs:
        job.join(120)
    assert order == ["timing", "calibration"]
    cache_headmap.pruned_model.clear()
    cache_headmap.latency_model.clear()
