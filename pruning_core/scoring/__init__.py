"""Head scorers: one class per method behind one call, in one registry.

``get_scorer(name).score(loaded, task, config, progress=None, mask=None) -> ScoreResult``

Registered: ``gradient`` (Michel et al. 2019), ``random``, ``ablation``, ``smp``, ``fisher`` (Kwon et al.
2022), ``atp`` (attribution patching), the label-free ``flap`` and ``activation``, and the attention
statistics ``entropy`` and ``confidence``; :func:`pruning_core.scoring.verify.verify_scores` checks any of
them against exact ablation. Each is registered with ``needs_labels`` and ``cost`` (:class:`ScorerInfo`),
which :func:`scorer_info` reads without importing the scorer; ``smp`` (:mod:`pruning_core.scoring.smp`) is
registered lazily and imported on the first ``get_scorer("smp")``.
"""
from __future__ import annotations

from pruning_core.scoring.base import (
    COSTS,
    SCORERS,
    ScoreConfig,
    Scorer,
    ScorerInfo,
    get_scorer,
    register_lazy_scorer,
    register_scorer,
    scorer_info,
    scorer_names,
)
# each of these modules registers its scorers
from pruning_core.scoring import attention_stats, attribution, baselines, fisher, gradient, label_free  # noqa: F401
from pruning_core.core.registry import lazy_object

register_lazy_scorer("smp", lazy_object("pruning_core.scoring.smp.scorer:SMPScorer"), needs_labels=False, cost="one_pass",
                     description="Zhang et al. 2020 (Single-Shot Meta-Pruning): a learned network reads each "
                                 "head's attention map; label-free, meant for keeping the top half of every "
                                 "layer before fine-tuning")

__all__ = ["COSTS", "SCORERS", "ScoreConfig", "Scorer", "ScorerInfo", "get_scorer", "register_lazy_scorer",
           "register_scorer", "scorer_info", "scorer_names"]
