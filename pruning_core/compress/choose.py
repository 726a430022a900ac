"""Choose a layer's repair by the whole model's calibration loss instead of the layer's own error.

:func:`.tuning.repair_mask` offers each layer a few candidates (:func:`.least_squares.layer_candidates`); by
default the smallest least-squares error wins, with ``choose="loss"`` the smallest mean task loss of the
whole pruned model on the calibration examples (greedy from the bottom): the layer error weighs every token
and unit alike, the loss only what reaches the output. :class:`SuffixLoss` computes it; where the family
describes its layer stack (:meth:`ArchitectureAdapter.layer_stack`) each candidate reruns only its layer and
those above (:func:`pruning_core.modeling.inference.layer_cache.run_from_layer`), else the whole masked model.
"""
from __future__ import annotations

import torch
from transformers.modeling_outputs import SequenceClassifierOutput

from pruning_core.modeling.architectures import AttentionSite, adapter_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.layer_cache import recording_layer_calls, run_from_layer
from pruning_core.modeling.masking import apply_mask
from pruning_core.compress.capture import add_to_bias, scale_head_columns
from pruning_core.compress.least_squares import Candidate


class SuffixLoss:
    """The mean calibration loss of ``student`` (a ``LoadedModel`` whose model repair is changing) under
    ``mask`` on ``data``, recomputed from the layer of ``site`` on; make one per site, after the layers
    below it are repaired (their output is recorded here)."""

    def __init__(self, student, task, data, mask: HeadMask, site: AttentionSite, batch_size: int) -> None:
        self.student, self.task, self.data, self.mask, self.batch_size = student, task, data, mask, batch_size
        stack = adapter_for(student.model).layer_stack(student.model)
        self.stack = stack if stack is not None and stack.kind == site.kind else None
        self.layer = site.layer
        self.recorded: list | None = None
        if self.stack is not None:
            self.recorded = []
            with torch.inference_mode(), apply_mask(student, mask), \
                    recording_layer_calls(student.model, self.stack) as record:
                for i, batch in enumerate(data.batches(batch_size, device=student.device)):
                    calls: list = []
                    record(i, batch, calls)
                    # keep this layer's hidden input [B, T, H] and every later layer's extra arguments
                    self.recorded.append((calls[0][self.layer][0][0],
                                          [(a[1:], k) for a, k in calls[0]]))

    def __call__(self) -> float:
        """The mean loss per example (per weighted unit) of the model as it is now."""
        if self.stack is None:
            return float(self.task.evaluate(self.student, self.data, self.mask, batch_size=self.batch_size).loss)
        total, weight = 0.0, 0
        with torch.inference_mode(), apply_mask(self.student, self.mask):
            for (hidden, calls), batch in zip(self.recorded, self.data.batches(self.batch_size,
                                                                                 device=self.student.device)):
                logits = run_from_layer(self.stack, self.layer, hidden, calls, {}, batch.n_examples)
                outputs = SequenceClassifierOutput(logits=logits)
                total += float(self.task.loss_sum(self.student, batch, outputs))
                weight += int(self.task.loss_weight(batch))
        return total / max(weight, 1)


def pick_by_loss(site: AttentionSite, row, kept: list[int], loss: SuffixLoss, losses: dict[str, float]):
    """A ``pick`` for :func:`.least_squares.solve_layer`: applies each candidate to ``site`` in turn (restoring
    the weights after each), fills ``losses`` (choice -> calibration loss) and returns the best one's index."""
    def pick(candidates: list[Candidate]) -> int:
        weight = site.out.weight.detach().clone()
        bias = site.out.bias.detach().clone() if getattr(site.out, "bias", None) is not None else None
        values = []
        try:
            for name, scales, shift in candidates:
                apply_candidate(site, row, kept, scales, shift)
                values.append(loss())
                losses[name] = values[-1]
                _restore(site, weight, bias)
        finally:
            _restore(site, weight, bias)
        return min(range(len(values)), key=values.__getitem__)
    return pick


def apply_candidate(site: AttentionSite, row, kept: list[int], scales, shift) -> None:
    """Fold a candidate into ``site``: kept heads' W_O columns times their scale, removed ones 0, bias shift."""
    factor = [0.0] * len(row)
    for h, s in zip(kept, scales):
        factor[h] = float(s)
    scale_head_columns(site, factor)
    if shift is not None:
        add_to_bias(site, shift)


def _restore(site: AttentionSite, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    with torch.no_grad():
        site.out.weight.copy_(weight)
        if bias is not None:
            site.out.bias.copy_(bias)
