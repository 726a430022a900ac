"""Kwon et al. (2022) Fisher importance: the empirical Fisher diagonal of the head gates.

One backward pass per mini-batch of the batch's *mean* loss L_b (as the authors' code does); with
g_{b,h} = dL_b/dm_h the gate gradient at m = 1,

    F_h = sum_b g_{b,h}^2

The sign is squared per batch, not per token (unlike Michel's I_h), so effects that cancel within a batch
score low; F_h depends on the batch size, which the provenance records. Data-parallel: each rank sums the
squares of its own batches, then one all-reduce.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring.base import register_scorer
from pruning_core.scoring.gradient import GradientPassScorer
from pruning_core.scoring.passes import HeadSums, gates_for, outputs_and_grads, rank_batches, settings_of


def batch_gate_gradients(loaded, task, data, mask: HeadMask | None = None, batch_size: int = 32,
                         progress: ProgressCallback | None = None) -> Iterator[dict[tuple[str, int], torch.Tensor]]:
    """For each of this rank's batches: per site ``[heads]`` dL_b/dm_h of the batch's mean loss.

    A head removed by ``mask`` has gradient 0 (its recorded output is gated to 0).
    """
    gates = gates_for(loaded, mask)
    for batch in rank_batches(loaded, data, batch_size, "score:fisher", progress):
        weight = float(task.loss_weight(batch))
        grads = {}
        for key, pairs in outputs_and_grads(loaded, task, batch, gates).items():
            grads[key] = sum((z * g).sum((0, 1, 3)) for z, g in pairs) / max(weight, 1.0)     # [heads]
        yield grads


def fisher_importance(loaded, task, data, mask: HeadMask | None = None, batch_size: int = 32,
                      progress: ProgressCallback | None = None) -> HeadSums:
    """F_h = sum over mini-batches of (dL_b/dm_h)^2, all-reduced over ranks; sums named ``"fisher"``."""
    sums = HeadSums(loaded.layout, ("fisher",))
    with distributed.guard("fisher scoring"):
        for grads in batch_gate_gradients(loaded, task, data, mask, batch_size, progress):
            for (kind, layer), g in grads.items():
                sums.add("fisher", kind, layer, g.double() ** 2)
        sums.all_reduce("fisher scoring")
    return sums


class FisherScorer(GradientPassScorer):
    name = "fisher"

    def raw_scores(self, loaded, task, data, config, batch_size, mask, progress):
        sums = fisher_importance(loaded, task, data, mask=mask, batch_size=batch_size, progress=progress)
        return sums.scores("fisher"), settings_of(config, mask, batch_size=batch_size, loss="mean per batch")

register_scorer(FisherScorer(), needs_labels=True, cost="one_pass",
                description="Kwon et al. 2022: empirical Fisher of the head gates, sum over mini-batches of "
                            "(dL/dm_h)^2 (squared per batch, so effects that cancel within a batch score low)")
