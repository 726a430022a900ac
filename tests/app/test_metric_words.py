"""A metric is written with its unit once and rounded by one rule on every page (issue 40, item 3)."""
from __future__ import annotations

from app.core import uncertainty, ui
from app.headmap import panel
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.evaluation.results import EvalResult

BLEU = EvalResult("bleu", 31.58, 2.1, 128, interval=(28.2, 34.7))
ACCURACY = EvalResult("accuracy", 0.898, 0.3, 872, interval=(0.877, 0.916))


def test_bleu_is_named_once_in_the_strip_and_the_caption():
    mask = HeadMask.full(HeadLayout({"encoder_self": (4, 4), "cross": (4,)}))
    strip = panel._strip_done(mask, BLEU)
    assert strip.count("BLEU") == 1 and "BLEU **32**" in strip, strip
    now = uncertainty.shown(BLEU)
    line = uncertainty.labelled("bleu", f"{now.value} ({now.interval})")
    assert line == "BLEU 32 (95 % interval 28–35, 128 examples)", line
    assert uncertainty.unitless("bleu", now.value) == "32"


def test_a_unit_that_is_not_the_name_stays():
    now = uncertainty.shown(ACCURACY)
    assert uncertainty.labelled("accuracy", now.value) == "accuracy 90 %"
    assert uncertainty.unitless("accuracy", now.value) == "90 %"


def test_the_tour_rounds_as_the_head_map_does():
    for ev in (BLEU, ACCURACY):
        assert ui.metric_text(ev.metric_name, ev.metric, ev.interval) == uncertainty.shown(ev).value
    assert ui.metric_text("bleu", 31.58, (28.2, 34.7)) == "32 BLEU"
    assert ui.metric_text("accuracy", 0.898, (0.877, 0.916)) == "90 %"
    assert ui.metric_text("bleu", 31.58) == "31.58 BLEU"          # no interval known: the metric's own precision


def test_the_history_names_skipped_steps_only_when_a_step_was_skipped():
    from app.headmap.ui import skipped_note

    assert skipped_note([True, False], current=1) == ""            # one click, its metric under way: none skipped
    assert skipped_note([True, True, True], current=2) == ""
    assert skipped_note([True, False, True], current=2) == " 1 step skipped by quick clicks has no point."
    assert skipped_note([True, False, False, True], current=3) == " 2 steps skipped by quick clicks have no point."
