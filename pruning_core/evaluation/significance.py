"""Intervals and paired tests of evaluations, chosen by what the metric declares.

The metric registry says whether a metric is the mean of a score per example (``Metric.per_example``:
accuracy) or corpus-level (F1, MCC, BLEU, WER); this module turns that into statistics
(:mod:`pruning_core.evaluation.stats`), never branching on a metric's name. :func:`evidence` gives the
95 % interval (Wilson for 0/1 scores, bootstrap over examples otherwise; a loss-based metric resamples
each example's ``(loss_sum, weight)``). :func:`compare` runs a paired test of two evaluations on the same
examples (exact McNemar for 0/1 scores, paired bootstrap otherwise) with the interval of the difference
from the same test, so it excludes 0 exactly when p < 0.05; none below :data:`MIN_PAIRED` (:func:`too_few`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pruning_core.evaluation import stats
from pruning_core.evaluation.metrics import Metric, get_metric
from pruning_core.evaluation.results import EvalResult

MCNEMAR = "exact McNemar test on per-example correctness"
BOOTSTRAP = "paired bootstrap over examples"
LEVEL = 0.95
# The fewest paired examples on which any change can reach p < 0.05: even when every example moves the
# same way, a sign test's two-sided p on n examples is 2 / 2^n (0.5 on 2, 0.0625 on 5, 0.031 on 6).
MIN_PAIRED = 6


def too_few(n: int, unit: str = "example") -> str | None:
    """Why ``n`` paired examples cannot be tested (fewer than :data:`MIN_PAIRED`), or None when they can."""
    if n >= MIN_PAIRED:
        return None
    return (f"{n} {unit}{'s' if n != 1 else ''} are too few for a paired test: even if every one changed the "
            f"same way the smallest p would be {2 / 2 ** n:.2g}, so no change can be told from noise; evaluate "
            f"at least {MIN_PAIRED}")


def _is_binary(scores: Sequence) -> bool:
    return all(s in (0, 1) for s in scores)


def _subset(values: Sequence, idx: np.ndarray) -> list:
    return [values[i] for i in idx]


def _loss_pairs(metric: Metric, predictions: Sequence) -> np.ndarray | None:
    """``[n, 2]``: the ``(loss_sum, weight)`` of each example for a loss-based metric, else None."""
    if metric.inputs != "loss" or not predictions:
        return None
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in predictions):
        return None
    return np.asarray(predictions, dtype=float).reshape(len(predictions), 2)


def _loss_metric(metric: Metric, pairs: np.ndarray, idx: np.ndarray) -> float:
    """``metric`` of the examples ``idx`` (with repeats) from their ``(loss_sum, weight)`` pairs [n, 2]."""
    loss, weight = pairs[idx].sum(0)
    return metric.of((), (), float(loss), int(round(weight)))


def evidence(metric: Metric, predictions: Sequence, references: Sequence | None, *, seed: int = 0) -> dict:
    """``{"per_example": tuple, "interval": (low, high) | None}`` for an EvalResult of ``metric``.

    predictions, references: one per example (class ids and labels, or texts). A loss-based
    metric keeps the predictions; it has an interval when they are ``(loss_sum, weight)`` pairs.
    """
    n = len(predictions)
    if metric.per_example and references is not None:
        scores = tuple(int(s) if float(s).is_integer() else s
                       for s in metric.example_scores(predictions, references))
        if _is_binary(scores):
            return {"per_example": scores, "interval": stats.wilson_interval(int(sum(scores)), n)}
        return {"per_example": scores, "interval": stats.bootstrap_interval(
            lambda idx: float(np.mean([scores[i] for i in idx])), n, resamples=metric.resamples, seed=seed)}
    pairs = _loss_pairs(metric, predictions)
    if pairs is not None:
        return {"per_example": tuple(predictions), "interval": stats.bootstrap_interval(
            lambda idx: _loss_metric(metric, pairs, idx), n, resamples=metric.resamples, seed=seed, level=LEVEL)}
    if metric.inputs == "loss" or references is None or n == 0:
        return {"per_example": tuple(predictions), "interval": None}
    statistic = _resampled(metric, predictions, references)
    interval = stats.bootstrap_interval(statistic, n, resamples=metric.resamples, seed=seed, level=LEVEL)
    return {"per_example": tuple(predictions), "interval": interval}


@dataclass(frozen=True)
class Comparison:
    """``other`` minus ``base`` on the same examples: the difference, its 95 % interval and a p-value."""

    test: str                   # MCNEMAR or BOOTSTRAP
    delta: float                # metric units (not display units)
    low: float
    high: float
    p_value: float
    resamples: int | None = None    # bootstrap resamples behind the p-value; None for an exact test

    @property
    def p_text(self) -> str:
        """'p = 0.64', 'p < 1e-4' (exact test), 'p < 0.002' (a bootstrap p of 0 over 1000 resamples)."""
        return stats.format_p(self.p_value, self.resamples)


def compare(metric: Metric, base: EvalResult, other: EvalResult, references: Sequence | None, *,
            seed: int = 0) -> Comparison | None:
    """Paired test of ``other`` against ``base`` (both of ``metric`` on the same examples).

    None when either lacks per-example results (an old file, a loss-based metric without
    ``(loss_sum, weight)`` pairs), when they were not on the same number of examples, or when there
    are fewer than :data:`MIN_PAIRED` of them (:func:`too_few` says why).
    """
    a, b = base.per_example, other.per_example
    if not a or len(a) != len(b) or too_few(len(a)):
        return None
    delta = other.metric - base.metric
    if metric.per_example and _is_binary(a) and _is_binary(b):
        only_a, only_b, p = stats.paired_correctness(a, b)
        low, high = stats.mcnemar_interval(only_a, only_b, len(a), LEVEL)
        return Comparison(MCNEMAR, delta, low, high, p)
    if metric.per_example:
        _, low, high, p = stats.paired_bootstrap(a, b, resamples=metric.resamples, seed=seed, level=LEVEL)
        return Comparison(BOOTSTRAP, delta, low, high, p, metric.resamples)
    pairs_a, pairs_b = _loss_pairs(metric, a), _loss_pairs(metric, b)
    if pairs_a is not None and pairs_b is not None:
        if np.array_equal(pairs_a, pairs_b):
            return Comparison(BOOTSTRAP, delta, 0.0, 0.0, 1.0, metric.resamples)
        low, high, p = stats.paired_difference(
            lambda idx: _loss_metric(metric, pairs_b, idx) - _loss_metric(metric, pairs_a, idx), len(a),
            resamples=metric.resamples, seed=seed, level=LEVEL)
        return Comparison(BOOTSTRAP, delta, low, high, p, metric.resamples)
    if metric.inputs == "loss" or references is None:
        return None

    if list(a) == list(b):
        return Comparison(BOOTSTRAP, delta, 0.0, 0.0, 1.0, metric.resamples)
    of_a, of_b = _resampled(metric, a, references), _resampled(metric, b, references)
    low, high, p = stats.paired_difference(lambda idx: of_b(idx) - of_a(idx), len(a), resamples=metric.resamples,
                                           seed=seed, level=LEVEL)
    return Comparison(BOOTSTRAP, delta, low, high, p, metric.resamples)


def _resampled(metric: Metric, predictions: Sequence, references: Sequence) -> Callable[[np.ndarray], float]:
    """``idx -> metric`` of the examples ``idx`` (with repeats): from summed per-example counts when the metric
    has them (BLEU, chrF: the same value, without re-tokenising each resample), else computed on the texts."""
    if metric.statistics is not None and metric.of_statistics is not None:
        counts = metric.statistics(list(predictions), list(references))           # [n, k]
        return lambda idx: metric.of_statistics(counts[idx].sum(0))
    return lambda idx: metric.of(_subset(predictions, idx), _subset(references, idx))


def p_text(p: float, test: str, metric: Metric) -> str:
    """A p-value of ``test`` on ``metric`` as text (see :func:`pruning_core.evaluation.stats.format_p`)."""
    return stats.format_p(p, metric.resamples if test == BOOTSTRAP else None)


def beside_intervals(result: EvalResult, references: Sequence | None) -> dict:
    """95 % intervals of the metrics a task computed beside its main one (``extra["beside"]``, e.g. chrF
    beside BLEU), from the result's predictions: ``{name: (low, high) | None}``. Computed on request, not in
    every evaluation (a bootstrap of a corpus metric costs about a second per hundred texts)."""
    if not result.predictions or references is None:
        return {}
    return {name: evidence(get_metric(name), list(result.predictions), references)["interval"]
            for name in result.extra.get("beside", ())}
