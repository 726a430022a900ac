"""``headprune evaluate`` prints its metric with the 95 % interval, and the CLI's
progress bars never show a rate for a step answered at once (a cached encode read "38130.04it/s")."""
from __future__ import annotations

import io
import re

import pytest

from pruning_core.core import progress
from pruning_core.cli.main import main
from pruning_core.evaluation.metrics import get_metric


def test_evaluate_prints_the_metric_with_its_interval(workdir, capsys):
    assert main(["evaluate", "tiny", "--task", "file:tiny.csv"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.search(r"accuracy \d+\.\d % \(95 % interval \d+\.\d–\d+\.\d %\), loss \d\.\d{4}", line), line


def test_intervals_write_the_unit_once():
    assert get_metric("accuracy").format_with_interval(0.852, (0.81, 0.887)) == \
        "85.2 % (95 % interval 81.0–88.7 %)"
    assert get_metric("bleu").format_interval(25.1, 29.4) == "25.10–29.40 BLEU"
    assert get_metric("perplexity").format_interval(12.0, 15.5) == "12.00–15.50"
    assert get_metric("accuracy").format_with_interval(0.5, None) == "50.0 %"


def test_a_step_done_at_once_shows_no_rate(monkeypatch):
    import tqdm.auto

    stream = io.StringIO()
    real = tqdm.auto.tqdm
    monkeypatch.setattr(tqdm.auto, "tqdm", lambda *a, **k: real(*a, file=stream, mininterval=0, **k))
    bars = progress.tqdm_progress()
    progress.report(bars, "encode", 0, 1, "file:tiny.csv test")
    progress.report(bars, "encode", 1, 1, "24 examples")
    drawn = stream.getvalue()
    assert "24 examples" in drawn and "it/s" not in drawn and "steps/s" not in drawn, drawn


def test_a_rate_reads_per_step_once_a_step_has_taken_time():
    assert progress.rate_text(1, 0.0001) == ""                  # answered from a cache: no rate
    assert progress.rate_text(3, 7.5) == "2.5 s per step"
    assert progress.rate_text(30, 2.0) == "15.0 steps/s"


# -- p-values and links ------------------------------------------------------------

def test_a_p_value_of_zero_is_never_printed_as_zero():
    from pruning_core.evaluation.stats import format_p

    assert format_p(0.0) == "p < 1e-4" and format_p(3e-6) == "p < 1e-4"
    assert format_p(0.0, resamples=1000) == "p < 0.002"       # a bootstrap's p of 0 only bounds it
    assert format_p(0.6412) == "p = 0.64" and format_p(0.0123, resamples=1000) == "p = 0.012"


def test_a_paired_comparison_reads_its_p_value_without_zero():
    from pruning_core.evaluation.metrics import get_metric
    from pruning_core.evaluation.results import EvalResult
    from pruning_core.evaluation.significance import compare

    accuracy = get_metric("accuracy")
    base = EvalResult("accuracy", 1.0, 0.1, 40, per_example=(1,) * 40)
    worse = EvalResult("accuracy", 0.0, 2.0, 40, per_example=(0,) * 40)
    exact = compare(accuracy, base, worse, [1] * 40)
    assert exact.p_value < 1e-4 and exact.p_text == "p < 1e-4"
    wer = get_metric("wer")
    refs = [f"word{i} other" for i in range(30)]
    good = EvalResult("wer", 0.0, 0.1, 30, per_example=tuple(refs))
    bad = EvalResult("wer", 1.0, 0.1, 30, per_example=tuple("x y" for _ in refs))
    boot = compare(wer, good, bad, refs)
    assert boot.p_value == 0 and boot.p_text == "p < 0.01"    # WER: 200 resamples


def test_a_link_cut_short_is_not_called_another_model():
    from pruning_core.core.errors import FormatError
    from pruning_core.core.heads import HeadLayout
    from pruning_core.core.io.share_link import decode_mask

    layout = HeadLayout({"encoder_self": (4,) * 6})
    with pytest.raises(FormatError, match="cut short") as cut:
        decode_mask("e:f.f.f", layout)
    assert "another model" not in str(cut.value)
    two_kinds = HeadLayout({"encoder_self": (4, 4), "decoder_self": (4, 4)})
    with pytest.raises(FormatError, match="cut short"):
        decode_mask("e:f.f", two_kinds)
    with pytest.raises(FormatError, match="another model"):
        decode_mask("e:f.f.f.f.f.f.f", layout)                # more layers than the model: not a cut


def test_role_texts_use_human_labels_and_say_how_the_strongest_is_picked():
    import numpy as np

    from app.headmap.figures import role_hover
    from pruning_core.core.heads import HeadLayout, HeadMask
    from pruning_core.analysis.roles import RoleReport, removal_summary

    layout = HeadLayout({"decoder_self": (2,)})
    report = RoleReport(layout, {"previous_token": {"decoder_self": np.array([[0.72, 0.1]])},
                                 "positional": {"decoder_self": np.array([[0.95, 0.2]])}},
                        {"previous_token": 0.4, "positional": 0.9})
    assert report.strongest_of(("decoder_self", 0, 0)) == "previous_token"     # x1.8 beats x1.06
    assert report.strongest_of(("decoder_self", 0, 1)) is None
    hover = role_hover(report, "decoder_self", 0, 0)
    assert "previous_token" not in hover and "previous token 0.72 (threshold 0.40, ×1.8)" in hover
    assert "strongest role: <b>previous token</b> (the role whose score is the largest multiple of its own " \
           "threshold)" in hover
    text = removal_summary(report, HeadMask.full(layout).toggled("decoder_self", 0, 0))
    assert text.startswith("removes 1 of 1 previous token head") and "_" not in text
