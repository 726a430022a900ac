"""The dashboard's progress text reads as words ("Pruning curve by gradient importance:
step 1 of 11, 0 of 72 heads removed"), not as the library's stage names ("curve:gradient 1/11 · 0/72
removed"). The events come from a real pruning curve on a tiny model."""
from __future__ import annotations

import re

from app.runtime import work
from app.core.progress_text import curve_label, describe, stage_text
from fake_task import FakeTask
from pruning_core.evaluation.experiments import pruning_curve
from pruning_core.core.progress import ProgressEvent
from pruning_core.scoring import ScoreConfig, get_scorer
from tiny import tiny_loaded


def test_a_pruning_curve_reports_in_words(tmp_path):
    lm = tiny_loaded("bert", tmp_path)                 # 2 layers x 4 heads
    task = FakeTask(n=8)
    events: list[ProgressEvent] = []
    pruning_curve(lm, task, task.data, get_scorer("gradient"), ScoreConfig(), step=0.25, progress=events.append)
    label = curve_label("gradient")
    shown = [re.sub(r"\\(.)", r"\1", work._describe(e, label)[1]) for e in events]   # as the bar renders it
    assert "Pruning curve by gradient importance: step 1 of 5, 0 of 8 heads removed" in shown, shown
    assert shown[-1] == "Pruning curve by gradient importance: step 5 of 5, 8 of 8 heads removed"
    assert describe(ProgressEvent("score:gradient", 1, 3), label)[1] == \
        "Pruning curve by gradient importance · Scoring heads by gradient: batch 1 of 3"
    assert not any(":gradient" in s or "/" in s for s in shown), shown


def test_stage_names_read_as_phrases():
    assert stage_text("score:smp") == ("Scoring heads by smp", "batch")
    assert stage_text("prepare:fetch") == ("Preparing (fetch)", "step")
    assert stage_text("b_smp:finetune") == ("B smp finetune", None)       # not listed: its own words
    assert describe(ProgressEvent("encode", 0, None), "Reading") == (None, "Reading · Reading the data")
    assert describe(None, "Loading model `x`") == (None, "Loading model `x`")
    # the label is Markdown the caller built (kept); the library's words are escaped
    assert describe(ProgressEvent("evaluate", 1, 4, "task_[x]"), "**E**")[1] == \
        "**E** · Evaluating: batch 1 of 4\\, task\\_\\[x\\]"
    assert describe(ProgressEvent("evaluate-examples", 3, 5), "Evaluating this policy")[1] == \
        "Evaluating this policy: example 3 of 5"                    # the label says it: the phrase once


def test_a_click_that_decodes_shows_its_tokens():
    """A translation or speech click's bar moves while it decodes: "Decoding: token 12 of 40, batch 1 of 2"."""
    fraction, text = describe(ProgressEvent("decode", 12, 40, "batch 1 of 2"), "Evaluating the mask")
    assert fraction == 0.3 and text.replace("\\", "") == "Evaluating the mask · Decoding: token 12 of 40, batch 1 of 2"
