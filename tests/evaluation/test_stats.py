"""pruning_core.evaluation.stats against hand-computed values, and the metric-driven choice of test."""
import math

import numpy as np
import pytest

from pruning_core.evaluation import stats
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import BOOTSTRAP, MCNEMAR, compare, evidence


def test_wilson_85_of_100():
    low, high = stats.wilson_interval(85, 100)
    assert low == pytest.approx(0.7672, abs=1e-4) and high == pytest.approx(0.9069, abs=1e-4)
    assert stats.wilson_interval(0, 10)[0] == 0.0 and stats.wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


def test_mcnemar_exact():
    # b=10, c=2: 2 * P(X <= 2), X ~ Bin(12, 1/2) = 2 * (1 + 12 + 66) / 4096
    assert stats.mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096)
    assert stats.mcnemar_exact(2, 10) == stats.mcnemar_exact(10, 2)
    assert stats.mcnemar_exact(0, 0) == 1.0 and stats.mcnemar_exact(3, 3) == 1.0
    assert stats.mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    a = [1] * 10 + [0] * 2 + [1] * 5
    b = [0] * 10 + [1] * 2 + [1] * 5
    assert stats.paired_correctness(a, b) == (10, 2, pytest.approx(2 * 79 / 4096))


def test_holm():
    assert stats.holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


def test_bootstraps_are_seeded_and_sensible():
    a = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 5
    b = [1] * 50
    d, low, high, p = stats.paired_bootstrap(a, b, seed=3)
    assert d == pytest.approx(0.3) and low <= d <= high and p < 0.05
    assert stats.paired_bootstrap(a, b, seed=3) == (d, low, high, p)
    assert stats.paired_bootstrap(a, a)[1:] == (0.0, 0.0, 1.0)
    values = np.arange(100, dtype=float)
    low, high = stats.bootstrap_interval(lambda idx: float(values[idx].mean()), 100, seed=1)
    assert low < 49.5 < high and high - low < 25
    assert stats.mean_sd([1.0, 2.0, 3.0]) == (2.0, 1.0) and stats.mean_sd([4.0]) == (4.0, 0.0)


def test_metric_registry_declares_per_example():
    assert get_metric("accuracy").per_example
    assert not any(get_metric(n).per_example for n in ("f1", "mcc", "bleu", "wer", "perplexity"))


def test_evidence_and_compare_follow_the_metric():
    labels = [0, 1] * 20
    preds = labels[:30] + [1 - y for y in labels[30:]]          # 30 of 40 right
    acc = evidence(get_metric("accuracy"), preds, labels)
    assert acc["per_example"] == tuple([1] * 30 + [0] * 10)
    assert acc["interval"] == stats.wilson_interval(30, 40)
    f1 = evidence(get_metric("f1"), preds, labels)
    assert f1["per_example"] == tuple(preds) and f1["interval"][0] < get_metric("f1").of(preds, labels) < f1["interval"][1]
    base = EvalResult("accuracy", 1.0, 0.0, 40, per_example=tuple([1] * 40))
    worse = EvalResult("accuracy", 0.75, 0.0, 40, per_example=acc["per_example"])
    c = compare(get_metric("accuracy"), base, worse, labels)
    assert c.test == MCNEMAR and c.p_value == pytest.approx(stats.mcnemar_exact(10, 0)) and c.high <= 0
    assert c.delta == pytest.approx(-0.25)
    fb = EvalResult("f1", 1.0, 0.0, 40, per_example=tuple(labels))
    fw = EvalResult("f1", get_metric("f1").of(preds, labels), 0.0, 40, per_example=tuple(preds))
    c = compare(get_metric("f1"), fb, fw, labels)
    assert c.test == BOOTSTRAP and c.low <= c.delta <= c.high and c.p_value < 0.05
    assert compare(get_metric("accuracy"), EvalResult("accuracy", 1.0, 0.0, 40), worse, labels) is None


def test_old_eval_json_still_reads():
    old = {"format": "headprune.eval/1", "metric_name": "accuracy", "metric": 0.5, "loss": 1.0, "n_examples": 4,
           "extra": {}, "seconds": 0.1}
    r = EvalResult.from_json(old)
    assert r.per_example == () and r.interval is None
    new = EvalResult("accuracy", 0.5, 1.0, 4, per_example=(1, 0, 1, 0), interval=stats.wilson_interval(2, 4))
    assert EvalResult.from_json(new.to_json()) == new
    assert not math.isnan(new.to_json()["interval"][0])
