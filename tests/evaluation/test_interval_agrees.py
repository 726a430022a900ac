"""A change's interval and its p-value come from the same test on the same data (the
interval excludes 0 exactly when p < 0.05), and no change is judged on fewer examples than any test
needs (Whisper's 2 utterances read "+0.0 to +11.8 points ... p = 0.64")."""
from __future__ import annotations

import numpy as np
import pytest

from app.core import uncertainty
from app.model import workload
from pruning_core.evaluation import stats
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import MCNEMAR, MIN_PAIRED, compare, too_few


def _accuracy(scores) -> EvalResult:
    return EvalResult("accuracy", float(np.mean(scores)), 0.5, len(scores), per_example=tuple(scores))


def test_the_mcnemar_interval_inverts_the_mcnemar_test():
    for d in range(1, 45):
        for only_b in range(d + 1):
            low, high = stats.mcnemar_interval(d - only_b, only_b, 200)
            p = stats.mcnemar_exact(d - only_b, only_b)
            assert (p < 0.05) == (low > 0 or high < 0), (d, only_b, p, low, high)
            assert low <= (only_b - (d - only_b)) / 200 <= high


def test_clopper_pearson_matches_known_values():
    assert stats.clopper_pearson(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert stats.clopper_pearson(0, 10) == pytest.approx((0.0, 0.3085), abs=1e-4)


@pytest.mark.parametrize("seed", range(12))
def test_an_accuracy_change_reads_the_same_from_its_interval_and_its_p(seed):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, 40)
    other = np.where(rng.random(40) < 0.2 + 0.05 * seed, 1 - base, base)   # from a few flips to many
    cmp = compare(get_metric("accuracy"), _accuracy(base), _accuracy(other), [1] * 40)
    assert cmp.test == MCNEMAR
    assert (cmp.p_value < 0.05) == (not cmp.low <= 0 <= cmp.high), cmp
    shown = uncertainty.change(_accuracy(base), _accuracy(other), cmp)
    assert shown.within_noise == (cmp.p_value >= 0.05)


def test_two_utterances_are_too_few_to_judge_a_change():
    wer = get_metric("wer")
    refs = ["the cat sat on the mat", "a dog ran in the park"]
    base = EvalResult("wer", 0.0, 0.1, 2, per_example=tuple(refs))
    other = EvalResult("wer", 2 / 12, 0.1, 2, per_example=("the cat sat on a mat", "a dog ran in a park"))
    assert compare(wer, base, other, refs) is None
    shown = uncertainty.change(base, other, None)
    assert shown.within_noise and "too few for a paired test" in shown.detail and "at least 6" in shown.detail
    assert "interval" not in shown.detail
    assert too_few(MIN_PAIRED) is None and "too few" in workload.interval_note(2, "utterance")


def test_every_default_evaluation_size_can_be_tested():
    assert workload.SMALLEST_DEFAULT_EVAL_SIZE >= MIN_PAIRED
    assert 2 / 2 ** MIN_PAIRED < 0.05 <= 2 / 2 ** (MIN_PAIRED - 1)   # the fewest on which p < 0.05 is possible


def test_an_interval_that_ends_at_zero_is_not_written_as_a_gain():
    wer = get_metric("wer")
    refs = [f"w{i} x y z" for i in range(10)]
    base = EvalResult("wer", 0.0, 0.1, 10, per_example=tuple(refs))
    hyps = ["q x y z"] + refs[1:]                       # one utterance of ten changed: many resamples see no change
    other = EvalResult("wer", wer.of(hyps, refs), 0.1, 10, per_example=tuple(hyps))
    cmp = compare(wer, base, other, refs)
    assert cmp.low == 0 and cmp.p_value >= 0.05
    shown = uncertainty.change(base, other, cmp)
    assert shown.within_noise and "of the change 0 to +" in shown.detail and "+0 " not in shown.detail
