"""The live panel's "repair" toggle: off by default (a click stays one forward pass), on it shows the metric with
and without least-squares repair; its background work lets other sessions' clicks through between layers."""
from __future__ import annotations

import threading
import time

from app.runtime import board
from app.runtime.work import Work
from apptest_helpers import click_head, metric
from browser_helpers import ok

HEAD_MAP = "app_pages/head_map.py"

REPAIR_KEY = "hp_w_headmap_repair"


def test_repair_is_off_by_default_and_shows_both_metrics_when_on(app_for, tiny_bert_24, monkeypatch):
    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    jobs: list[str] = []
    original = Work.show

    def spying(self, *args, **kwargs):
        jobs.append(self.job)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Work, "show", spying)
    ok(click_head(at, "encoder_self", 1, 2))
    assert at.toggle(key=REPAIR_KEY).value is False
    assert "repair" not in jobs and "with repair" not in [m.label for m in at.metric]
    ok(at.toggle(key=REPAIR_KEY).set_value(True).run())
    assert "repair" in jobs
    assert metric(at, "without repair") == metric(at, "accuracy")
    assert metric(at, "with repair").endswith("%")


def test_background_work_lets_a_click_through_between_its_steps():
    gate, order = board.Gate(), []
    monkey = board.GATE
    board.GATE = gate
    try:
        step = board.yielding(None, "repair")

        def background():
            with gate.hold(urgent=False):
                for i in range(20):
                    time.sleep(0.02)
                    order.append(f"step {i}")
                    while i == 4 and gate.waiting == 0 and "click" not in order:    # held till the click queues
                        time.sleep(0.01)
                    step(None)

        worker = threading.Thread(target=background)
        worker.start()
        while not order:                                    # the background work holds the gate
            time.sleep(0.01)
        with gate.hold(urgent=True):
            order.append("click")
        worker.join(30)
    finally:
        board.GATE = monkey
    assert order.index("click") <= 5                      # in after the step it was queued in, not after all 20
    assert [o for o in order if o != "click"] == [f"step {i}" for i in range(20)]
