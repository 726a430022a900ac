"""Michel et al. (2019) head importance: I_h = E_x |dL/dxi_h|, taken per token.

With gates xi = 1, dL/dxi_h = sum_t a_{h,t} . dL/da_{h,t} (a_{h,t}: head h's output at token t, the input of
the output projection). Like the authors' code, the absolute value is taken per token, then averaged over
the real tokens (source tokens for encoder self-attention, target tokens for the decoder's kinds):

    I_h = (1 / N_tokens) * sum_x sum_t | a_{h,t}(x) . dL(x)/da_{h,t}(x) |

Data-parallel (:mod:`pruning_core.core.runtime.distributed`): each rank sums its batches, then one all-reduce.
"""
from __future__ import annotations

import time

import torch

from pruning_core.bench import budget
from pruning_core.core.runtime import distributed
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.masking import gate_heads, gates_from_mask, ones_gates
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring.passes import HeadSums, rank_batches
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.scoring.base import ScoreConfig, Scorer, register_scorer


def token_contributions(loaded, task, batch, gates) -> dict[tuple[str, int], torch.Tensor]:
    """Signed a_{h,t} . dL/da_{h,t} for one batch: ``{(kind, layer): [B, T, heads]}``.

    Summed over tokens this is exactly dL/dxi_h (the gate gradient). Gradients are taken only
    with respect to the head outputs, so no parameter gradient is computed or stored.
    """
    with torch.enable_grad(), gate_heads(loaded.model, loaded.sites, gates, record=True) as session:
        outputs = loaded.model(**batch.inputs)
        loss = task.loss_sum(loaded, batch, outputs)
        keys = [key for key, recs in session.records.items() for _ in recs]
        recs = [r for recs in session.records.values() for r in recs]
        if not recs:                # every head was pruned away: nothing to take the gradient of
            return {}
        grads = torch.autograd.grad(loss, recs, allow_unused=True)
    out: dict[tuple[str, int], torch.Tensor] = {}
    for key, a, g in zip(keys, recs, grads):
        if g is not None:
            contrib = (a.detach() * g).sum(-1)                      # [B, T, heads]
            out[key] = out[key] + contrib if key in out else contrib
    return out


def per_token_importance(loaded, task, data, mask: HeadMask | None = None, batch_size: int = 32,
                         progress: ProgressCallback | None = None) -> HeadScores:
    """Raw I_h for every head over ``data`` (an EncodedData): each head's summed |dL/dxi_h| over real
    tokens, divided by the number of tokens; this rank's batches, then one all-reduce."""
    layout = loaded.layout
    gates = gates_from_mask(mask, loaded.device) if mask is not None else ones_gates(layout, loaded.device)
    sums = HeadSums(layout, ("importance",))
    with distributed.guard("gradient scoring"):
        for batch in rank_batches(loaded, data, batch_size, "score:gradient", progress):
            for (kind, layer), contrib in token_contributions(loaded, task, batch, gates).items():
                token_mask = batch.token_masks[kind].to(contrib.device, contrib.dtype).unsqueeze(-1)   # [B, T, 1]
                sums.add("importance", kind, layer, (contrib.abs() * token_mask).sum((0, 1)))
            for kind in layout.kinds:
                sums.count(kind, batch.token_masks[kind].sum())
        sums.all_reduce("gradient scoring")
    return sums.scores("importance", per_count=True)


def scoring_batch_size(loaded, data, wanted: int) -> int:
    """``wanted``, or fewer examples per batch where a gradient pass over the longest example would
    take this process past its memory budget (:mod:`pruning_core.bench.budget`: speech frames, vocabulary
    and sequence length make an example expensive). Data-parallel ranks keep ``wanted``: they must
    cut the batches alike.

    Raises:
        BudgetError: not even one example fits the memory budget.
    """
    longest = max(getattr(data, "lengths", None) or [getattr(data, "max_length", 128)])
    cost = budget.example_cost(loaded, loaded.task_type, longest)
    if distributed.current() is not None:
        return wanted
    return budget.gradient_batch_size(cost, wanted)


class GradientPassScorer(Scorer):
    """A scorer of gradient passes over the scoring data (gradient, fisher, atp): :meth:`score` encodes the
    data, cuts batches that fit the memory budget and records the provenance; a subclass computes the raw
    scores and the settings to record in :meth:`raw_scores`."""

    def raw_scores(self, loaded, task, data, config: ScoreConfig, batch_size: int, mask: HeadMask | None,
                   progress: ProgressCallback | None) -> tuple[HeadScores, dict]:
        """Every head's raw score over ``data`` in batches of ``batch_size``, and the settings that made it."""
        raise NotImplementedError

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress=None, mask=None) -> ScoreResult:
        start = time.perf_counter()
        data = task.encode(loaded, config.split, config.limit, max_length=config.max_length)
        batch_size = scoring_batch_size(loaded, data, config.batch_size)
        raw, settings = self.raw_scores(loaded, task, data, config, batch_size, mask, progress)
        return ScoreResult(self.name, raw, config.normalize,
                           provenance(loaded, task=task.name, split=config.split, n_examples=data.n_examples,
                                      method=self.name, settings=settings),
                           seconds=time.perf_counter() - start)


class GradientScorer(GradientPassScorer):
    name = "gradient"

    def raw_scores(self, loaded, task, data, config, batch_size, mask, progress):
        raw = per_token_importance(loaded, task, data, mask=mask, batch_size=batch_size, progress=progress)
        return raw, {"normalize": config.normalize, "batch_size": batch_size, "max_length": config.max_length,
                     "masked_heads": len(mask.removed()) if mask is not None else 0}

register_scorer(GradientScorer(), needs_labels=True, cost="one_pass",
                description="Michel et al. 2019: expected |dL/dxi_h| per token (first-order Taylor estimate "
                            "of the loss change)")
