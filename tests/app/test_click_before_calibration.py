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
