"""Baseline scorers: ``random`` (seeded) and ``ablation`` (measured single-head metric worsening)."""
from __future__ import annotations

import random
import time

from pruning_core.core.heads import HeadScores
from pruning_core.evaluation.metrics import get_metric
from pruning_core.core.progress import report
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.scoring.base import ScoreConfig, Scorer, register_scorer


class RandomScorer(Scorer):
    name = "random"

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress=None, mask=None) -> ScoreResult:
        rng = random.Random(config.seed)
        kinds = {k: [[rng.random() for _ in range(n)] for n in rows] for k, rows in loaded.layout.kinds.items()}
        if mask is not None:
            kinds = {k: [[v * m for v, m in zip(r, mr)] for r, mr in zip(rows, mask.kinds[k])]
                     for k, rows in kinds.items()}
        report(progress, "score:random", 1, 1)
        # random scores are not normalised: the ranking would be just as random, and this keeps it exact
        return ScoreResult(self.name, HeadScores.from_lists(kinds), False,
                           provenance(loaded, task=getattr(task, "name", None), method=self.name,
                                      settings={"seed": config.seed}))


class AblationScorer(Scorer):
    name = "ablation"

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress=None, mask=None) -> ScoreResult:
        from pruning_core.evaluation.experiments import ablation_table

        start = time.perf_counter()
        data = task.encode(loaded, config.split, config.limit, max_length=config.max_length)
        table = ablation_table(loaded, task, data, base_mask=mask, batch_size=config.batch_size, progress=progress,
                               tests=False)
        # how much worse the metric gets (a drop, or a rise for lower-is-better metrics), plus a tiny
        # share of the loss increase so equal metrics still rank
        metric = get_metric(table.metric_name)
        kinds = {k: [[0.0] * n for n in rows] for k, rows in loaded.layout.kinds.items()}
        for row in table.rows:
            worse = metric.worsening(row.metric, table.base_metric)
            kinds[row.kind][row.layer][row.head] = worse + 1e-3 * row.delta_loss
        # already comparable across layers (a measured metric change), so never re-normalised
        return ScoreResult(self.name, HeadScores.from_lists(kinds), False,
                           provenance(loaded, task=task.name, split=config.split, n_examples=data.n_examples,
                                      method=self.name, settings={"batch_size": config.batch_size}),
                           seconds=time.perf_counter() - start)


register_scorer(RandomScorer(), needs_labels=False, cost="one_pass", seeded=True,
                description="Uniform random scores from a seed: the baseline any real scorer must beat")
register_scorer(AblationScorer(), needs_labels=True, cost="per_head",
                description="Metric worsening when that head alone is removed (loss increase breaks ties)")
