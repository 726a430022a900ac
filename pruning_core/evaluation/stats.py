"""Small, exact statistics for comparing evaluations: intervals, paired tests, multiple comparisons.

Pure functions of numbers and arrays (numpy only), seeded where they resample: :func:`wilson_interval`
(a proportion), :func:`mcnemar_exact` and :func:`paired_correctness` (the exact McNemar p-value),
:func:`mcnemar_interval` (the accuracy difference's interval that inverts the same test),
:func:`bootstrap_interval` (any statistic of resampled example indices), :func:`paired_bootstrap` (the
difference of a per-example mean between two models), :func:`holm` (Holm–Bonferroni), :func:`spearman`
(ties share their mean rank) and :func:`format_p` (never "p = 0").
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from pruning_core.core.errors import HeadpruneError

Z95 = 1.959963984540054        # standard normal quantile 0.975
RESAMPLES = 1000
P_FLOOR = 1e-4                 # smaller p-values are printed as "p < 1e-4"


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the proportion ``k / n`` (0.95 by default); (0, 1) when ``n`` is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: ``b`` + ``c`` discordant pairs, each way with probability 1/2.

    ``p = min(1, 2 * P(X <= min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)``; 1.0 without discordant pairs.
    """
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _binomial_tail_at_most(k: int, n: int, theta: float) -> float:
    """P(X <= k) for X ~ Binomial(n, theta), summed in log space (no overflow for large n)."""
    if theta <= 0.0:
        return 1.0
    if theta >= 1.0:
        return 1.0 if k >= n else 0.0
    log_t, log_u = math.log(theta), math.log1p(-theta)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_t + (n - i) * log_u
             for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a binomial proportion ``k / n``: the ``theta`` that neither
    one-sided exact test at ``(1 - level) / 2`` rejects; (0, 1) when ``n`` is 0."""
    if n <= 0:
        return 0.0, 1.0
    alpha = (1 - level) / 2

    def crossing(below_alpha) -> float:          # bisection: the theta where a monotone tail crosses alpha
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if below_alpha(mid) else (lo, mid)
        return (lo + hi) / 2

    # low: P(X >= k) rises with theta; high: P(X <= k) falls with theta
    low = 0.0 if k == 0 else crossing(lambda t: 1 - _binomial_tail_at_most(k - 1, n, t) < alpha)
    high = 1.0 if k == n else crossing(lambda t: _binomial_tail_at_most(k, n, t) > alpha)
    return low, high


def mcnemar_interval(only_a: int, only_b: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Interval of the accuracy difference ``(only_b - only_a) / n`` (B minus A on ``n`` paired examples)
    that inverts the exact McNemar test: given the ``d = only_a + only_b`` examples on which the two
    disagree, ``only_b ~ Binomial(d, theta)`` and the difference is ``d / n * (2 theta - 1)``, so the
    interval excludes 0 exactly when :func:`mcnemar_exact` gives p < 1 - level."""
    d = only_a + only_b
    if d == 0 or n <= 0:
        return 0.0, 0.0
    low, high = clopper_pearson(only_b, d, level)
    return d / n * (2 * low - 1), d / n * (2 * high - 1)


def paired_correctness(a: Sequence[int], b: Sequence[int]) -> tuple[int, int, float]:
    """(right only in ``a``, right only in ``b``, McNemar p) for two 0/1 vectors over the same examples."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"paired vectors differ in length: {x.shape[0]} vs {y.shape[0]}")
    only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
    return only_a, only_b, mcnemar_exact(only_a, only_b)


def _indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """[resamples, n] example indices drawn with replacement (one row per bootstrap sample)."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def bootstrap_interval(statistic: Callable[[np.ndarray], float], n: int, *, resamples: int = RESAMPLES,
                       seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(idx)``, ``idx`` an int array [n] of resampled examples."""
    if n <= 0:
        raise ValueError("bootstrap needs at least one example")
    values = np.array([statistic(idx) for idx in _indices(n, resamples, seed)], dtype=float)
    return _percentiles(values, level)


def bootstrap_p(values: np.ndarray) -> float:
    """Two-sided bootstrap p-value of 'the difference is 0' from resampled differences ``values``."""
    values = np.asarray(values, dtype=float)
    below, above = np.mean(values <= 0), np.mean(values >= 0)
    return float(min(1.0, 2 * min(below, above)))


def paired_difference(statistic: Callable[[np.ndarray], float], n: int, *, resamples: int = RESAMPLES,
                      seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, p) of a paired difference given as ``statistic(idx)`` (model B minus model A on ``idx``)."""
    values = np.array([statistic(idx) for idx in _indices(n, resamples, seed)], dtype=float)
    low, high = _percentiles(values, level)
    return low, high, bootstrap_p(values)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean(b - a), low, high, p) for per-example scores ``a``, ``b`` [n] of two models on the same examples."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"paired vectors must be non-empty and equally long: {x.shape} vs {y.shape}")
    d = y - x
    means = d[_indices(d.size, resamples, seed)].mean(axis=1)          # [resamples]
    low, high = _percentiles(means, level)
    p = 1.0 if not d.any() else bootstrap_p(means)
    return float(d.mean()), low, high, p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given), each at most 1."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    x = np.asarray(values, dtype=float)
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0


def _ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation of two equally long lists; None when either is constant."""
    if len(a) != len(b):
        raise HeadpruneError(f"Rank correlation needs equally long lists, got {len(a)} and {len(b)}.")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else None


def format_p(p: float, resamples: int | None = None) -> str:
    """'p = 0.64', 'p < 1e-4'; a bootstrap p-value of 0 from ``resamples`` resamples reads 'p < 0.002',
    the smallest nonzero value it could have taken (2 / resamples), since 0 only bounds it."""
    floor = max(P_FLOOR, 2 / resamples) if resamples else P_FLOOR
    if p < floor:
        return f"p < {floor:.1g}" if resamples else "p < 1e-4"
    return f"p = {p:.2g}"
