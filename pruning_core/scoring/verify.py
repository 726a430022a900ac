"""Exact-ablation check of any scorer: do its estimates rank heads as removing them really does?

:func:`verify_scores` takes the K highest- and K lowest-ranked heads of a :class:`ScoreResult`
(its ranking scores, the ones pruning uses), removes each alone, measures the exact change of the
mean loss on the evaluation data, and reports Spearman's rank correlation between the estimated
importance and that loss change over those 2K heads (all heads when 2K covers them), with every
(estimate, exact) pair. Positive: the scorer's ranking agrees with exact ablation.

The loss is the task's own (``loss_sum / loss_weight`` over the data, as ``evaluate`` reports it)
from a forward pass only, without decoding, and data-parallel under ``torchrun`` (float64 sums of
the batch losses and weights, one all-reduce).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.io.codec import VERIFY_FORMAT, JsonRecord
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadId, HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.evaluation.stats import spearman


@dataclass(frozen=True)
class VerifyPair(JsonRecord):
    """One checked head: the scorer's estimate and the exact loss change when it alone is removed."""

    kind: str
    layer: int
    head: int
    group: str                  # "top" (among the K most important) or "bottom" (the K least)
    estimate: float             # the ranking score (larger = more important)
    exact_delta_loss: float     # mean loss without this head minus the mean loss with every head


@dataclass(frozen=True)
class VerifyResult(JsonRecord):
    _malformed = (f"The {VERIFY_FORMAT} data is incomplete or malformed; re-create it with "
                  "`headprune score ... --verify K`")

    format: str = field(default=VERIFY_FORMAT, init=False)
    method: str
    k: int
    spearman: float | None      # None when either side is constant (no ranking to compare)
    base_loss: float
    n_examples: int
    pairs: tuple[VerifyPair, ...]
    seconds: float = 0.0
    provenance: dict = field(default_factory=dict)


def mean_loss(loaded, task, data, mask: HeadMask | None = None, batch_size: int = 64) -> float:
    """The task's mean loss on ``data`` under ``mask`` (forward only; summed loss / its weight)."""
    total = torch.zeros(2, dtype=torch.float64)                 # loss sum, weight
    with distributed.guard("exact ablation"), torch.inference_mode(), apply_mask(loaded, mask):
        batches, _ = distributed.batches(data, batch_size, loaded.device)
        for batch in batches:
            outputs = loaded.model(**batch.inputs)
            total += torch.tensor([float(task.loss_sum(loaded, batch, outputs)), float(task.loss_weight(batch))],
                                  dtype=torch.float64)
        total = distributed.sum_tensors([total], "exact ablation")[0]
    return float(total[0] / max(float(total[1]), 1.0))


def checked_heads(scores: ScoreResult, k: int, seed: int = 0) -> list[tuple[HeadId, str]]:
    """The K lowest-ranked heads ("bottom") and the K highest ("top"), each once (all heads when 2K >= total)."""
    if k < 1:
        raise HeadpruneError(f"--verify K needs K of at least 1 (K highest and K lowest heads), got {k}.")
    order = scores.ranking_scores.ranked(seed=seed)             # least important first
    if 2 * k >= len(order):
        return [(h, "bottom" if i < len(order) / 2 else "top") for i, h in enumerate(order)]
    return [(h, "bottom") for h in order[:k]] + [(h, "top") for h in order[-k:]]


def verify_scores(loaded, task, data, scores: ScoreResult, k: int, *, batch_size: int = 64, seed: int = 0,
                  losses: dict[HeadId | None, float] | None = None,
                  progress: ProgressCallback | None = None) -> VerifyResult:
    """Spearman between ``scores``' estimates and the exact loss change of removing each checked head alone.

    Args:
        data: the evaluation data (an EncodedData of ``task``), held out from the scoring data ideally.
        k: how many of the highest and of the lowest heads to ablate (2K evaluations plus one).
        losses: a cache ``{head: mean loss without it}`` (key None: with every head) shared between
            calls on the same model and data, so several scorers are checked against the same
            ablations; filled as heads are measured.
    """
    start = time.perf_counter()
    scores.scores.check_fits(loaded.layout)
    chosen = checked_heads(scores, k, seed)
    losses = {} if losses is None else losses
    full = HeadMask.full(loaded.layout)
    if None not in losses:
        losses[None] = mean_loss(loaded, task, data, None, batch_size)
    base = losses[None]
    ranking = scores.ranking_scores
    pairs = []
    for i, (head, group) in enumerate(chosen):
        if head not in losses:
            losses[head] = mean_loss(loaded, task, data, full.toggled(*head), batch_size)
        pairs.append(VerifyPair(*head, group, ranking.get(head), losses[head] - base))
        report(progress, "verify", i + 1, len(chosen), f"{head[0]} L{head[1]} H{head[2]}")
    rho = spearman([p.estimate for p in pairs], [p.exact_delta_loss for p in pairs])
    settings = {"k": k, "heads_checked": len(pairs), "batch_size": batch_size, "scores_method": scores.method,
                "scores_split": scores.provenance.get("split"), "scores_n": scores.provenance.get("n_examples"),
                "estimate": "ranking score (per-layer normalised)" if scores.normalize else "ranking score (raw)",
                "exact": "mean loss without the head minus with every head"}
    return VerifyResult(scores.method, k, rho, base, data.n_examples, tuple(pairs),
                        provenance=provenance(loaded, task=getattr(task, "name", None), split=data.split,
                                              n_examples=data.n_examples, method="verify", settings=settings),
                        seconds=time.perf_counter() - start)
