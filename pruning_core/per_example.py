"""What a model under a mask gives each evaluated example: its loss and (optionally) its prediction.

:meth:`pruning_core.tasks.Task.evaluate` keeps what the metric needs per example (0/1 scores for
accuracy); comparing two masks example by example (which answers changed, a confusion matrix, a
paired interval on the loss) needs each example's own prediction and loss. This module runs the
same forward passes through the task's own hooks (``loss_sum``, ``loss_weight``, ``predict_batch``)
and splits each batch into its rows for the loss, so every task type is covered without code of
its own. ``loss_sum`` reads ``outputs.logits`` (``[B, ...]``, the batch first) and the batch's
tensors, which are all sliced row by row.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from .heads import HeadMask
from .masking import apply_mask
from .progress import ProgressCallback, report
from .tasks.base import EvalState, Task
from .tasks.batching import EncodedBatch, EncodedData


@dataclass(frozen=True)
class ExampleOutputs:
    """One model's outputs per example, in the split's order (``n`` = ``data.n_examples``).

    losses: the loss summed over each example (classification: its cross-entropy; translation and
        language modelling: summed over its target tokens); weights: what each is summed over
        (1, or the example's target tokens), so ``sum(losses) / sum(weights)`` is the mean loss.
    predictions: the task's prediction per example (class id, decoded text, or a language-model
        window's ``(loss_sum, tokens)``); ``()`` when not asked for (decoding can be slow).
    """

    losses: tuple[float, ...]
    weights: tuple[int, ...]
    predictions: tuple = ()

    @property
    def mean_loss(self) -> float:
        return sum(self.losses) / max(1, sum(self.weights))


def _row(batch: EncodedBatch, j: int) -> EncodedBatch:
    """Row ``j`` of ``batch`` as a batch of one (padding kept as in the batch)."""
    return EncodedBatch(inputs={k: v[j:j + 1] for k, v in batch.inputs.items()}, labels=batch.labels[j:j + 1],
                        token_masks={k: v[j:j + 1] for k, v in batch.token_masks.items()}, n_examples=1,
                        index=batch.index[j:j + 1])


def example_outputs(loaded, task: Task, data: EncodedData, mask: HeadMask | None = None, *,
                    predictions: bool = False, batch_size: int = 64,
                    progress: ProgressCallback | None = None) -> ExampleOutputs:
    """Each example's loss (and with ``predictions`` its prediction) under ``mask`` (None: all heads)."""
    n = data.n_examples
    losses, weights = [0.0] * n, [0] * n
    state = EvalState(predictions=[None] * n, options={"beams": 1})
    total = math.ceil(n / batch_size)
    with torch.inference_mode(), apply_mask(loaded, mask):
        for i, batch in enumerate(data.batches(batch_size, device=loaded.device)):
            outputs = loaded.model(**batch.inputs)
            for j, where in enumerate(batch.index.tolist()):
                row = _row(batch, j)
                losses[where] = float(task.loss_sum(loaded, row, SimpleNamespace(logits=outputs.logits[j:j + 1])))
                weights[where] = int(task.loss_weight(row))
            if predictions:
                task.predict_batch(loaded, data, batch, outputs, state)
            report(progress, "evaluate", i + 1, total, f"{task.name}, per example")
    return ExampleOutputs(tuple(losses), tuple(weights), tuple(state.predictions) if predictions else ())
