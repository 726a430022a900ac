"""Attribution patching (AtP; Nanda 2023, Kramar et al. 2024): the first-order estimate of the loss
change when head h's output z_h is replaced by a baseline b_h,

    e_{h,t} = <b_{h,t} - z_{h,t}, dL/dz_{h,t}>,   atp_h = (1 / N_tokens) * sum_x sum_t e_{h,t}(x)

signed: positive when patching increases the loss (the head helps). Tokens are the gradient scorer's, so with
the zero baseline ``(1 / N_tokens) * sum |e_{h,t}|`` is exactly Michel's I_h (:func:`attribution_sums` gives
it too). Baselines (``ScoreConfig.baseline``): ``zero`` (the head removed), ``mean`` (z_h averaged over the
scoring data's real tokens; one extra pass, all-reduced), ``corrupt`` (z_h on the example with its tokens
shuffled, :func:`corrupted_inputs`). Check any estimate against exact ablation with
:func:`pruning_core.scoring.verify.verify_scores`.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring.base import ATP_BASELINES, register_scorer
from pruning_core.scoring.gradient import GradientPassScorer
from pruning_core.scoring.passes import (
    HeadSums,
    gates_for,
    head_outputs,
    outputs_and_grads,
    rank_batches,
    real_tokens,
    settings_of,
)

SEED_STRIDE = 1_000_003         # example i of seed s shuffles with generator seed s * SEED_STRIDE + i


def _permutation(n: int, seed: int, index: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * SEED_STRIDE + index)
    return torch.randperm(n, generator=g)


def corrupted_inputs(batch, seed: int) -> dict[str, torch.Tensor]:
    """``batch.inputs`` with each example's input tokens shuffled, seeded by ``seed`` and the example's index.

    Token inputs (``input_ids``): the real tokens between the first and the last (which stay, so
    [CLS]/[SEP] or <s>/</s> keep their places) are permuted; padding stays. Speech
    (``input_features`` ``[B, mels, frames]``): the frames are permuted. Decoder inputs of a seq2seq
    model are left as they are (the corruption is of the input, not of the teacher-forced target).
    The same example gets the same permutation whatever batch or rank it lands in.
    """
    inputs = dict(batch.inputs)
    index = batch.index.tolist()
    if "input_ids" in inputs:
        ids = inputs["input_ids"].clone()                                   # [B, T]
        lengths = inputs["attention_mask"].sum(-1).tolist() if "attention_mask" in inputs else [ids.shape[1]] * len(ids)
        for row, (n, i) in enumerate(zip(lengths, index)):
            n = int(n)
            if n > 3:
                middle = 1 + _permutation(n - 2, seed, i).to(ids.device)
                ids[row, 1:n - 1] = ids[row, middle]
        inputs["input_ids"] = ids
    elif "input_features" in inputs:
        feats = inputs["input_features"].clone()                           # [B, mels, frames]
        for row, i in enumerate(index):
            feats[row] = feats[row][:, _permutation(feats.shape[-1], seed, i).to(feats.device)]
        inputs["input_features"] = feats
    else:
        raise HeadpruneError(f"The corrupt baseline shuffles input_ids or input_features, but this batch holds only "
                             f"{sorted(inputs)}; use --baseline zero or mean, or score on data with model inputs.")
    return inputs


def mean_head_outputs(loaded, data, gates, batch_size: int, progress: ProgressCallback | None = None) -> HeadSums:
    """Per site ``[heads, head_dim]``: z_h summed over the real tokens of ``data`` (``"z"``), with token counts."""
    sums = HeadSums(loaded.layout, ("z",), vectors={"z": {(s.kind, s.layer): s.head_dim for s in loaded.sites}})
    for batch in rank_batches(loaded, data, batch_size, "score:atp mean", progress):
        for (kind, layer), recs in head_outputs(loaded, batch, gates).items():
            for z in recs:
                sums.add("z", kind, layer, (z * real_tokens(batch, kind, z)[..., None, None]).sum((0, 1)))
        for kind in loaded.layout.kinds:
            sums.count(kind, float(batch.token_masks[kind].sum()))
    sums.all_reduce("atp mean baseline")
    return sums


def attribution_sums(loaded, task, data, baseline: str = "zero", mask: HeadMask | None = None, batch_size: int = 32,
                     seed: int = 0, progress: ProgressCallback | None = None) -> HeadSums:
    """Sums over the real tokens of e_{h,t} (``"signed"``) and |e_{h,t}| (``"magnitude"``), and token counts.

    ``sums.scores("signed", per_count=True)`` is atp_h; ``"magnitude"`` with the zero baseline is I_h.
    """
    if baseline not in ATP_BASELINES:
        raise HeadpruneError(f"baseline must be one of {', '.join(ATP_BASELINES)}, got {baseline!r}.")
    gates = gates_for(loaded, mask)
    sums = HeadSums(loaded.layout, ("signed", "magnitude"))
    with distributed.guard(f"atp scoring ({baseline})"):
        means = None
        if baseline == "mean":
            ref = mean_head_outputs(loaded, data, gates, batch_size, progress)
            means = {(k, l): (t / max(ref.counts[k], 1.0)).float() for k, rows in ref.sums["z"].items()
                     for l, t in enumerate(rows)}                            # [heads, head_dim]
        for batch in rank_batches(loaded, data, batch_size, f"score:atp {baseline}", progress):
            pairs = outputs_and_grads(loaded, task, batch, gates)
            corrupt = head_outputs(loaded, _with_inputs(batch, corrupted_inputs(batch, seed)), gates) \
                if baseline == "corrupt" else None
            for (kind, layer), items in pairs.items():
                for j, (z, g) in enumerate(items):                         # z, g: [B, T, heads, head_dim]
                    if baseline == "zero":
                        e = -(z * g).sum(-1)                               # [B, T, heads]
                    elif baseline == "mean":
                        e = ((means[(kind, layer)].to(z.device, z.dtype) - z) * g).sum(-1)
                    else:
                        e = ((corrupt[(kind, layer)][j] - z) * g).sum(-1)
                    real = real_tokens(batch, kind, e).unsqueeze(-1)       # [B, T, 1]
                    sums.add("signed", kind, layer, (e * real).sum((0, 1)))
                    sums.add("magnitude", kind, layer, (e.abs() * real).sum((0, 1)))
            for kind in loaded.layout.kinds:
                sums.count(kind, float(batch.token_masks[kind].sum()))
        sums.all_reduce(f"atp scoring ({baseline})")
    return sums


def _with_inputs(batch, inputs: dict):
    """A shallow copy of ``batch`` with other model inputs (the same examples, labels and token masks)."""
    return replace(batch, inputs=inputs)


class AttributionScorer(GradientPassScorer):
    name = "atp"

    def raw_scores(self, loaded, task, data, config, batch_size, mask, progress):
        sums = attribution_sums(loaded, task, data, config.baseline, mask=mask, batch_size=batch_size,
                                seed=config.seed, progress=progress)
        settings = settings_of(config, mask, batch_size=batch_size, baseline=config.baseline,
                               seed=config.seed if config.baseline == "corrupt" else None,
                               reference="the scoring data" if config.baseline == "mean" else None)
        return sums.scores("signed", per_count=True), settings

register_scorer(AttributionScorer(), needs_labels=True, cost="one_pass",
                description="Attribution patching (Kramar et al. 2024): signed first-order estimate of the loss "
                            "change when a head's output is patched with a baseline (zero, mean or corrupt)")
