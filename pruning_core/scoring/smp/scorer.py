"""The ``smp`` scorer: a trained SMP pruner scores every head from the task's texts, no labels.

The pruner's per-head logits are averaged over the scored examples and turned into per-layer softmax
probabilities (positive, summing to 1 in each layer: one scale, never re-normalised). With a mask, removed
heads get 0. SMP is meant for single-shot pruning: keep the top half of every layer
(:func:`pruning_core.modeling.presets.keep_top_fraction_per_layer`). The default pruner is the one
``headprune smp train`` writes to ``headprune_home()/smp/pruner/``; until then the pruner shipped in
:data:`BUNDLED_DIR` (its ``training.json`` says how it was trained) serves.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.errors import CacheError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.scoring.base import ScoreConfig, Scorer
from pruning_core.scoring.smp.pruner import (
    CONFIG_FILE,
    PrunerFile,
    capture_attention,
    head_logits,
    load_pruner,
    scores_from_logits,
)

__all__ = ["BUNDLED_DIR", "SMPScorer", "default_pruner_dir", "mean_head_logits", "resolve_pruner",
           "scores_from_logits"]

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"    # the pruner shipped with headprune (17 KB)


def default_pruner_dir() -> Path:
    """Where ``headprune smp train`` saves the pruner (``$HEADPRUNE_HOME/smp/pruner``)."""
    from pruning_core.modeling.sources.loading import headprune_home
    return headprune_home() / "smp" / "pruner"


def resolve_pruner(pruner: "str | Path | PrunerFile | None" = None) -> PrunerFile:
    """A PrunerFile as given, loaded from a path, or the default one: the pruner ``headprune smp train``
    saved, else the bundled one (CacheError if neither exists)."""
    if isinstance(pruner, PrunerFile):
        return pruner
    if pruner is None:
        for folder in (default_pruner_dir(), BUNDLED_DIR):
            if (folder / CONFIG_FILE).is_file():
                return load_pruner(folder)
        raise CacheError(f"No SMP pruner: none trained in {default_pruner_dir()} and none bundled in {BUNDLED_DIR} "
                         "(a damaged install). Run `headprune smp train` (about 10 minutes on a 2-core CPU), "
                         "or pass a pruner folder.")
    return load_pruner(pruner)


@torch.no_grad()
def mean_head_logits(loaded, pfile: PrunerFile, data, *, mask: HeadMask | None = None, batch_size: int = 32,
                     progress: ProgressCallback | None = None) -> list[torch.Tensor]:
    """Per site ``[H_i]``: the pruner's logits averaged over every example of ``data`` (an EncodedData)."""
    pfile.check_applies_to(loaded)
    pruner = pfile.pruner.to(loaded.device).eval()
    sums: list[torch.Tensor] | None = None
    n = 0
    share = distributed.batch_part()          # None alone; else this rank's share of the batches
    batches, total = distributed.batches(data, batch_size, loaded.device)
    with distributed.guard("SMP scoring"), apply_mask(loaded, mask):
        for i, batch in enumerate(batches):
            am = batch.token_masks["encoder_self"]
            with capture_attention(loaded, am) as maps:
                loaded.model(**batch.inputs)
            rows = head_logits(pruner, maps, am, reduce=False)          # per site [B, H_i]
            part = [r.sum(0) for r in rows]
            sums = part if sums is None else [a + b for a, b in zip(sums, part)]
            n += batch.n_examples
            report(progress, "score:smp", i + 1, total)
        if share is not None:                 # one all-reduce of the logit sums and the example count
            device = next(pruner.parameters()).device
            if sums is None:                  # this rank got no batch: it adds zeros
                sums = [torch.zeros(s.num_heads, device=device) for s in loaded.sites]
            *sums, count = distributed.sum_tensors([*sums, torch.tensor([float(n)], dtype=torch.float64)],
                                                   "SMP scoring")
            n = int(count.item())
    assert sums is not None
    return [s / max(n, 1) for s in sums]


class SMPScorer(Scorer):
    """Score heads with a trained SMP pruner (the default one, or ``pruner`` given here)."""

    name = "smp"        # registered lazily, with its metadata, in pruning_core.scoring

    def __init__(self, pruner: "str | Path | PrunerFile | None" = None) -> None:
        self.pruner = pruner

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress: ProgressCallback | None = None,
              mask: HeadMask | None = None) -> ScoreResult:
        start = time.perf_counter()
        pfile = resolve_pruner(self.pruner)
        pfile.check_applies_to(loaded)
        if mask is not None:
            mask.check_fits(loaded.layout)
        data = task.encode(loaded, config.split, config.limit, max_length=config.max_length)
        logits = mean_head_logits(loaded, pfile, data, mask=mask, batch_size=config.batch_size, progress=progress)
        scores = scores_from_logits(loaded, logits, mask)
        p = pfile.provenance
        settings = {"pruner": str(pfile.path) if pfile.path else None,
                    "pruner_base_model": p.get("model"), "pruner_base_weights_sha256": p.get("weights_sha256"),
                    "pruner_steps": (p.get("settings") or {}).get("steps_done"),
                    "pruner_sources": list(((p.get("settings") or {}).get("sources") or {}).keys()),
                    "scores": "per-layer softmax of the batch-averaged pruner logits",
                    "batch_size": config.batch_size, "max_length": config.max_length,
                    "masked_heads": len(mask.removed()) if mask is not None else 0}
        return ScoreResult(self.name, scores, False,
                           provenance(loaded, task=getattr(task, "name", None), split=config.split,
                                      n_examples=data.n_examples, method=self.name, settings=settings),
                           seconds=time.perf_counter() - start)

