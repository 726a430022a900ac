"""The numbers a class can check by hand: a change shown beside two values is the difference of those values as
shown (BLEU 4.2 beside all heads 32 reads -27.8, never the unrounded -27.36), for metrics and for the loss."""
from __future__ import annotations

import random
import re

import pytest

from app.core import uncertainty
from pruning_core.evaluation import stats
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import compare
from pruning_core.tasks.per_example import ExampleOutputs

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _number(text: str) -> tuple[float, int]:
    """The first number in ``text`` and its decimals."""
    found = _NUMBER.search(text.replace("−", "-")).group(0)
    return float(found), len(found.split(".")[1]) if "." in found else 0


def _assert_adds_up(base: EvalResult, other: EvalResult, comparison=None) -> None:
    shown_base, _ = _number(uncertainty.shown(base).value)
    shown_other, _ = _number(uncertainty.shown(other).value)
    change, places = _number(uncertainty.change(base, other, comparison).text)
    assert change == pytest.approx(round(shown_other - shown_base, places), abs=1e-9), (
        uncertainty.shown(base).value, uncertainty.shown(other).value, uncertainty.change(base, other, comparison).text)


def test_bleu_4_2_beside_32_reads_minus_27_8():
    base = EvalResult("bleu", 31.55, 2.0, 128, interval=(28.4, 35.1))          # ± 3.4: shown "32 BLEU"
    other = EvalResult("bleu", 4.19, 4.0, 128, interval=(3.8, 4.6))            # ± 0.4: shown "4.2 BLEU"
    assert (uncertainty.shown(base).value, uncertainty.shown(other).value) == ("32 BLEU", "4.2 BLEU")
    assert uncertainty.change(base, other, None).text == "-27.8 BLEU"


@pytest.mark.parametrize("metric", ["accuracy", "bleu", "perplexity", "wer"])
def test_the_shown_change_is_the_difference_of_the_shown_values(metric):
    rng = random.Random(f"shown-{metric}")
    scale = get_metric(metric).scale
    for _ in range(2000):
        values = []
        for _ in range(2):
            value = rng.uniform(0.0, 1.0 if scale != 1.0 else 60.0)
            half = rng.choice([0.0004, 0.004, 0.04, 0.4, 4.0]) / scale * rng.uniform(0.5, 2)
            values.append(EvalResult(metric, value, 1.0, 100, interval=(value - half, value + half)))
        _assert_adds_up(*values)


def test_paired_changes_of_counted_examples_add_up():
    rng = random.Random("paired")
    for _ in range(300):
        n = rng.choice([10, 12, 128, 500])
        a = tuple(rng.random() < 0.8 for _ in range(n))
        b = tuple(x if rng.random() < 0.9 else not x for x in a)
        base, other = (EvalResult("accuracy", sum(r) / n, 0.5, n, per_example=tuple(map(int, r)),
                                  interval=stats.wilson_interval(sum(r), n)) for r in (a, b))
        _assert_adds_up(base, other, compare(get_metric("accuracy"), base, other, None))


def test_the_loss_change_is_the_difference_of_the_printed_losses():
    rng = random.Random("loss")
    for _ in range(300):
        dense = ExampleOutputs(tuple(rng.uniform(0.05, 1.5) for _ in range(40)), (1,) * 40)
        pruned = ExampleOutputs(tuple(x + rng.uniform(-0.05, 0.2) for x in dense.losses), (1,) * 40)
        printed = [float(uncertainty.loss_text(o.mean_loss)) for o in (dense, pruned)]
        change, places = _number(uncertainty.loss_change(dense, pruned).text)
        assert places == uncertainty.LOSS_PLACES
        assert change == pytest.approx(round(printed[1] - printed[0], places), abs=1e-9)
