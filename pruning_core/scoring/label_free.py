"""Label-free, forward-only scorers on calibration text (the task's inputs; no labels, no backward pass).

- ``flap`` (An et al., AAAI 2024): per input channel j of a site's output projection,
  ``Var_tokens(X_j) * sum_i W_O[i, j]^2``; a head's fluctuation is the mean over its channels, standardised
  within the layer (``torch.std``'s n - 1); :func:`flap_fluctuation` gives the raw value. A layer with fewer
  than two kept heads, or equal fluctuations, standardises to 0.
- ``activation`` (Minitron, Muralidharan et al. 2024): the sum over real tokens of ``||z_h||_2`` before the
  output projection (it does not read W_O).

Removed heads score 0. Data-parallel: per-head float64 sums and token counts, one all-reduce.
"""
from __future__ import annotations

import time

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.core.progress import ProgressCallback
from pruning_core.evaluation.results import ScoreResult, provenance
from pruning_core.scoring.base import ScoreConfig, Scorer, register_scorer
from pruning_core.scoring.passes import (
    HeadSums,
    gates_for,
    head_outputs,
    rank_batches,
    real_tokens,
    settings_of,
    zero_removed,
)


def output_column_norms(site) -> torch.Tensor:
    """``[heads, head_dim]``: sum_i W_O[i, j]^2 for every input channel j of ``site``'s output projection."""
    w = site.out.weight.detach().double()
    conv1d = hasattr(site.out, "nf") and hasattr(site.out, "nx")        # transformers' Conv1D stores [in, out]
    per_input = (w ** 2).sum(1) if conv1d else (w ** 2).sum(0)          # [heads * head_dim]
    return per_input.cpu().reshape(site.num_heads, site.head_dim)


def calibration_sums(loaded, data, mask: HeadMask | None, batch_size: int, stage: str,
                     progress: ProgressCallback | None = None) -> HeadSums:
    """Per site, over the real tokens of ``data``: ``"x"`` and ``"x2"`` (sums of z and z^2,
    ``[heads, head_dim]``), ``"norm"`` (sum of ||z_h||_2, ``[heads]``) and token counts."""
    gates = gates_for(loaded, mask)
    widths = {(s.kind, s.layer): s.head_dim for s in loaded.sites}
    sums = HeadSums(loaded.layout, ("x", "x2", "norm"), vectors={"x": widths, "x2": widths})
    with distributed.guard(f"{stage} scoring"):
        for batch in rank_batches(loaded, data, batch_size, f"score:{stage}", progress):
            for (kind, layer), recs in head_outputs(loaded, batch, gates).items():
                for z in recs:                                               # [B, T, heads, head_dim]
                    z = z.double()
                    real = real_tokens(batch, kind, z)[..., None]            # [B, T, 1]
                    sums.add("x", kind, layer, (z * real[..., None]).sum((0, 1)))
                    sums.add("x2", kind, layer, (z * z * real[..., None]).sum((0, 1)))
                    sums.add("norm", kind, layer, (z.norm(dim=-1) * real).sum((0, 1)))
            for kind in loaded.layout.kinds:
                sums.count(kind, float(batch.token_masks[kind].sum()))
        sums.all_reduce(f"{stage} scoring")
    return sums


def flap_fluctuation(loaded, sums: HeadSums) -> HeadScores:
    """Raw FLAP fluctuation per head: mean over its channels of Var_tokens(X_j) * ||W_O[:, j]||^2."""
    sites = {(s.kind, s.layer): s for s in loaded.sites}
    kinds = {}
    for kind, rows in sums.sums["x"].items():
        n = max(sums.counts[kind], 1.0)
        out = []
        for layer, total in enumerate(rows):
            if total.shape[0] == 0:
                out.append([])
                continue
            mean = total / n
            var = (sums.sums["x2"][kind][layer] / n - mean ** 2).clamp(min=0.0)    # [heads, head_dim]
            out.append((var * output_column_norms(sites[(kind, layer)])).mean(-1).tolist())
        kinds[kind] = out
    return HeadScores.from_lists(kinds)


def standardize_per_layer(scores: HeadScores, mask: HeadMask | None = None) -> HeadScores:
    """(f - mean) / std over each layer's kept heads (std with n - 1); removed heads and degenerate layers 0."""
    out = {}
    for kind, rows in scores.kinds.items():
        new = []
        for layer, row in enumerate(rows):
            keep = [mask is None or bool(mask.kinds[kind][layer][h]) for h in range(len(row))]
            values = torch.tensor([v for v, k in zip(row, keep) if k], dtype=torch.float64)
            std = float(values.std()) if values.numel() > 1 else 0.0
            mean = float(values.mean()) if values.numel() else 0.0
            new.append([(v - mean) / std if k and std > 0 else 0.0 for v, k in zip(row, keep)])
        out[kind] = new
    return HeadScores.from_lists(out)


class _CalibrationScorer(Scorer):
    """One forward pass over the calibration data (:func:`calibration_sums`), then :meth:`from_sums`."""

    def from_sums(self, loaded, sums: HeadSums, mask: HeadMask | None,
                  config: ScoreConfig) -> tuple[HeadScores, bool, dict]:
        """(scores, whether ranking re-normalises them per layer, extra provenance settings)."""
        raise NotImplementedError

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress=None, mask=None) -> ScoreResult:
        start = time.perf_counter()
        data = task.encode(loaded, config.split, config.limit, max_length=config.max_length)
        sums = calibration_sums(loaded, data, mask, config.batch_size, self.name, progress)
        scores, normalize, extra = self.from_sums(loaded, sums, mask, config)
        return ScoreResult(self.name, scores, normalize,
                           provenance(loaded, task=task.name, split=config.split, n_examples=data.n_examples,
                                      method=self.name, settings=settings_of(config, mask, labels_read=False, **extra)),
                           seconds=time.perf_counter() - start)


class FlapScorer(_CalibrationScorer):
    name = "flap"

    def from_sums(self, loaded, sums, mask, config):
        # standardised within each layer already: never re-normalised
        return standardize_per_layer(flap_fluctuation(loaded, sums), mask), False, \
            {"normalize": "standardised within each layer"}


class ActivationScorer(_CalibrationScorer):
    name = "activation"

    def from_sums(self, loaded, sums, mask, config):
        return zero_removed(sums.scores("norm"), mask), config.normalize, {}


register_scorer(FlapScorer(), needs_labels=False, cost="one_pass",
                description="FLAP (An et al. 2024): fluctuation of each head's output channels times the squared "
                            "W_O column norms, standardised within the layer; forward only, no labels")
register_scorer(ActivationScorer(), needs_labels=False, cost="one_pass",
                description="Minitron (Muralidharan et al. 2024): summed L2 norm of each head's output over the "
                            "calibration tokens; forward only, no labels")
