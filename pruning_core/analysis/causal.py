"""The causal test of a head score: remove the top ``fraction`` of heads by the score against the same number
of random heads (several seeds), measured on held-out examples, with paired tests.

The hypothesis it tests (Wu et al. ICLR 2025 for retrieval heads; Crosbie & Shutova 2025 for induction heads):
heads a score ranks high matter for the task far more than as many random heads. Scores should come from
another split than the one measured (``train`` vs ``test``); the result records both. Removing a head is its
gate set to 0 (:func:`pruning_core.modeling.masking.apply_mask`); random heads are drawn from all heads.

The result, a :class:`CausalResult` (``headprune.causal/1``), holds the dense model's result, the top heads'
and each seed's, and McNemar's exact paired test (accuracy) of each against the dense model and of top against
each random.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from pruning_core.core.io.codec import CAUSAL_FORMAT, JsonRecord
from pruning_core.core.errors import UsageError
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.significance import compare


@dataclass(frozen=True)
class CausalConfig:
    """fraction: share of all heads removed (top and random alike); seeds: one random draw each."""

    fraction: float = 0.05
    seeds: tuple[int, ...] = (0, 1, 2)
    split: str = "test"
    limit: int | None = None
    context: int | None = None             # max_length of the encoding (a long-context task's context)
    batch_size: int = 8

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction < 1.0:
            raise UsageError(f"The share of heads to remove must be between 0 and 1, got {self.fraction}.")
        if not self.seeds:
            raise UsageError("The causal test needs at least one random seed.")


@dataclass(frozen=True)
class CausalResult(JsonRecord):
    """The dense model's, the top heads' and each seed's results, with the paired tests between them."""

    format: str = field(default=CAUSAL_FORMAT, init=False)
    metric_name: str
    n_heads_removed: int
    total_heads: int
    fraction: float
    seeds: tuple[int, ...]
    split: str
    n_examples: int
    context: int | None
    runs: dict                      # "dense" / "top" / "random-<seed>" -> removed, metric, interval, loss, drop
    mean_random_drop: float
    top_drop: float
    comparisons: tuple[dict, ...]   # McNemar (accuracy) of base vs other: delta, p value, p_text
    scores: dict = field(default_factory=dict)          # where the scores came from (file, method, split)
    provenance: dict = field(default_factory=dict)


def top_heads(scores: HeadScores, n: int) -> list:
    """The ``n`` heads with the highest scores (ties broken by the seeded order of :meth:`HeadScores.ranked`)."""
    return scores.ranked()[::-1][:n]


def random_heads(scores: HeadScores, n: int, seed: int) -> list:
    return random.Random(seed).sample(scores.layout.heads(), n)


def causal_test(loaded, task, scores: HeadScores, config: CausalConfig = CausalConfig(), *,
                progress: ProgressCallback | None = None) -> CausalResult:
    """Run the test; the result has no provenance yet (the caller adds it with ``dataclasses.replace``)."""
    scores.check_fits(loaded.layout)
    n = max(1, round(config.fraction * loaded.layout.total_heads))
    kwargs = {"max_length": config.context} if config.context else {}
    data = task.encode(loaded, config.split, config.limit, **kwargs)
    runs = {"dense": None, "top": top_heads(scores, n), **{f"random-{s}": random_heads(scores, n, s)
                                                            for s in config.seeds}}
    results = {}
    for i, (name, removed) in enumerate(runs.items()):
        report(progress, "causal", i, len(runs), name)
        mask = None if removed is None else HeadMask.from_removed(loaded.layout, removed)
        results[name] = task.evaluate(loaded, data, mask, batch_size=config.batch_size)
    report(progress, "causal", len(runs), len(runs), "done")
    metric = task.metric
    refs = task.references(data)

    def paired(a: str, b: str) -> dict | None:
        c = compare(metric, results[a], results[b], refs)
        return None if c is None else {"base": a, "other": b, **asdict(c), "p_text": c.p_text}

    randoms = [f"random-{s}" for s in config.seeds]
    mean_random = sum(results[r].metric for r in randoms) / len(randoms)
    return CausalResult(
        metric_name=metric.name, n_heads_removed=n, total_heads=loaded.layout.total_heads,
        fraction=config.fraction, seeds=tuple(config.seeds), split=config.split,
        n_examples=data.n_examples, context=config.context,
        runs={name: {"removed": [list(h) for h in (runs[name] or [])], "metric": r.metric,
                     "interval": list(r.interval) if r.interval else None, "per_example": list(r.per_example),
                     "loss": r.loss, "drop": results["dense"].metric - r.metric} for name, r in results.items()},
        mean_random_drop=results["dense"].metric - mean_random,
        top_drop=results["dense"].metric - results["top"].metric,
        comparisons=tuple(c for c in [paired("dense", "top"), *(paired("dense", r) for r in randoms),
                                      *(paired(r, "top") for r in randoms)] if c is not None),
    )
