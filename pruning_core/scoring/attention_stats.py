"""Attention-statistics scorers, from the eager attention maps A^h (rows = queries, each summing to 1).

- ``entropy`` (as the HF bertology script computes it): the score is **-H_h**, minus the entropy averaged
  over real query rows, so a focused head ranks above a diffuse one (Voita et al.'s reading of confidence).
- ``confidence`` (Voita et al. 2019): the mean over real query rows of max_j A[i, j]; larger = more important.

Both are label-free and forward only; padding keys add 0 log 0 = 0. With a mask the masked model is scored
and removed heads score 0. The model must run eager attention. Data-parallel: float64 sums and row counts,
one all-reduce.
"""
from __future__ import annotations

import time

import torch

from pruning_core.core.runtime import distributed
from pruning_core.modeling.architectures import adapter_for
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.masking import apply_mask
from pruning_core.core.progress import ProgressCallback
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.scoring.base import ScoreConfig, Scorer, register_scorer
from pruning_core.scoring.passes import HeadSums, rank_batches, real_tokens, settings_of, zero_removed


def check_eager(loaded) -> None:
    """Raise unless ``loaded`` computes attention maps (eager attention)."""
    impl = getattr(loaded.model.config, "_attn_implementation", "eager")
    if impl not in (None, "eager"):
        raise HeadpruneError(f"Attention statistics need the attention maps, but the model was loaded with "
                             f"attn_implementation={impl!r}, which returns none. Load it with "
                             "attn_implementation='eager' (the default of load_model).")


def attention_sums(loaded, data, mask: HeadMask | None = None, batch_size: int = 32,
                   progress: ProgressCallback | None = None) -> HeadSums:
    """Per head, sums over the real query rows of the entropy (``"entropy"``) and of the largest
    weight (``"confidence"``) of its attention rows; ``counts`` are the rows per kind."""
    check_eager(loaded)
    if mask is not None:
        mask.check_fits(loaded.layout)
    adapter = adapter_for(loaded)
    sums = HeadSums(loaded.layout, ("entropy", "confidence"))
    with distributed.guard("attention statistics"):
        for batch in rank_batches(loaded, data, batch_size, "score:attention", progress):
            with torch.inference_mode(), apply_mask(loaded, mask):
                outputs = loaded.model(**batch.inputs, output_attentions=True)
            for kind, layers in adapter.attention_maps(outputs).items():
                if kind not in loaded.layout.kinds:
                    continue
                if len(layers) != len(loaded.layout.kinds[kind]):
                    raise HeadpruneError(f"The model returned {kind} attention maps for {len(layers)} of its "
                                         f"{len(loaded.layout.kinds[kind])} layers; load it with eager attention.")
                for layer, a in enumerate(layers):
                    if a is None or a.shape[1] == 0:                   # a layer whose heads were all pruned
                        continue
                    a = a.double()                                        # [B, heads, T_q, T_k]
                    rows = real_tokens(batch, kind, a)[:, None, :a.shape[2]]   # [B, 1, T_q]
                    entropy = -torch.special.xlogy(a, a).sum(-1)          # [B, heads, T_q]
                    sums.add("entropy", kind, layer, (entropy * rows).sum((0, 2)))
                    sums.add("confidence", kind, layer, (a.amax(-1) * rows).sum((0, 2)))
            for kind in loaded.layout.kinds:
                sums.count(kind, float(batch.token_masks[kind].sum()))
        sums.all_reduce("attention statistics")
    return sums


class _AttentionStatScorer(Scorer):
    statistic = ""          # the HeadSums name
    sign = 1.0              # +1: larger statistic = more important; -1: smaller

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress=None, mask=None) -> ScoreResult:
        start = time.perf_counter()
        data = task.encode(loaded, config.split, config.limit, max_length=config.max_length)
        sums = attention_sums(loaded, data, mask, config.batch_size, progress)
        mean = sums.scores(self.statistic, per_count=True)
        scores = HeadScores({k: tuple(tuple(self.sign * v for v in r) for r in rows) for k, rows in mean.kinds.items()})
        settings = settings_of(config, mask, normalize=False, statistic=self.statistic,
                               sign="larger = more important" if self.sign > 0 else "negated: smaller = more important",
                               labels_read=False)
        # a mean per attention row is on one scale in every layer: never re-normalised
        return ScoreResult(self.name, zero_removed(scores, mask), False,
                           provenance(loaded, task=task.name, split=config.split, n_examples=data.n_examples,
                                      method=self.name, settings=settings),
                           seconds=time.perf_counter() - start)


class EntropyScorer(_AttentionStatScorer):
    name = "entropy"
    statistic = "entropy"
    sign = -1.0


class ConfidenceScorer(_AttentionStatScorer):
    name = "confidence"
    statistic = "confidence"


register_scorer(EntropyScorer(), needs_labels=False, cost="one_pass",
                description="Attention entropy (HF bertology script), negated: focused heads (low entropy) rank as "
                            "more important; forward only, eager attention, no labels")
register_scorer(ConfidenceScorer(), needs_labels=False, cost="one_pass",
                description="Voita et al. 2019 confidence: mean largest attention weight of each query row; "
                            "confident heads rank as more important; forward only, eager attention, no labels")
