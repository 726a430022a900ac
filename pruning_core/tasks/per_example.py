"""What a model under a mask gives each evaluated example: its loss and its prediction.

One evaluation (:meth:`pruning_core.tasks.Task.evaluate`) keeps, from its one forward pass, each
example's summed loss, what that loss is summed over and the example's prediction
(:class:`~pruning_core.evaluation.results.EvalResult`). Comparing two masks example by example (which answers
changed, a confusion matrix, a paired interval on the loss) reads them through
:class:`ExampleOutputs`, a view of that result: no second pass over the examples.
"""
from __future__ import annotations

from dataclasses import dataclass

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback
from pruning_core.evaluation.results import EvalResult
from pruning_core.tasks.base import Task
from pruning_core.tasks.batching import EncodedData


@dataclass(frozen=True)
class ExampleOutputs:
    """One model's outputs per example, in the split's order (``n`` = ``data.n_examples``).

    losses: the loss summed over each example (classification: its cross-entropy; translation and
        language modelling: summed over its target tokens); weights: what each is summed over
        (1, or the example's target tokens), so ``sum(losses) / sum(weights)`` is the mean loss.
    predictions: the task's prediction per example (class id, decoded text, or a language-model
        window's ``(loss_sum, tokens)``); ``()`` when not asked for.
    """

    losses: tuple[float, ...]
    weights: tuple[int, ...]
    predictions: tuple = ()

    @property
    def mean_loss(self) -> float:
        return sum(self.losses) / max(1, sum(self.weights))

    @classmethod
    def from_eval(cls, result: EvalResult) -> "ExampleOutputs":
        """The per-example view of ``result`` (the same forward pass as its metric and interval)."""
        if len(result.example_losses) != result.n_examples:
            raise FormatError(f"This evaluation of {result.n_examples} examples has no per-example losses (it was "
                              "written by an older headprune). Evaluate the mask again to compare examples.")
        return cls(tuple(result.example_losses), tuple(result.example_weights), tuple(result.predictions))


def example_outputs(loaded, task: Task, data: EncodedData, mask: HeadMask | None = None, *,
                    predictions: bool = False, batch_size: int = 64,
                    progress: ProgressCallback | None = None) -> ExampleOutputs:
    """Each example's loss (and with ``predictions`` its prediction) under ``mask`` (None: all heads):
    one evaluation, seen per example. Holding the :class:`EvalResult` as well? Use
    :meth:`ExampleOutputs.from_eval` on it instead of evaluating again."""
    out = ExampleOutputs.from_eval(task.evaluate(loaded, data, mask, batch_size=batch_size, progress=progress))
    return out if predictions else ExampleOutputs(out.losses, out.weights)
