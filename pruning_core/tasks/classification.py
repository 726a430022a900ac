"""Text and text-pair classification: class-id labels, loss per example, accuracy / F1 / MCC."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from pruning_core.core.errors import DataError
from pruning_core.evaluation.metrics import ACCURACY, F1, MCC
from pruning_core.evaluation.results import EvalResult
from pruning_core.tasks.base import EvalState, Task, register_task_type
from pruning_core.tasks.batching import (
    EncodedBatch,
    EncodedData,
    accepts_argument,
    collate_classification,
    tokenize_classification,
)


@register_task_type
class ClassificationTask(Task):
    """Text or text-pair classification; metric accuracy, F1 (positive class 1) or MCC."""

    task_type = "classification"
    default_metric = ACCURACY.name

    def _specials(self, loaded) -> dict:
        return {"token_type_ids": accepts_argument(loaded.model, "token_type_ids"),
                "num_labels": getattr(loaded.model.config, "num_labels", None)}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        n_model = getattr(loaded.model.config, "num_labels", None)
        labels = []
        for i, ex in enumerate(examples):
            label = ex.get("label")
            if not isinstance(label, int) or label < 0:
                raise DataError(f"Task {self.name!r} example {i} of {split!r} has label {label!r}; "
                                "labels must be class ids 0, 1, ...")
            if n_model is not None and label >= n_model:
                raise DataError(f"Task {self.name!r} has label {label} but model {loaded.model_id!r} has only "
                                f"{n_model} classes. Use a model fine-tuned for this task.")
            labels.append(label)
        specials = self._specials(loaded)
        features = tokenize_classification(loaded.tokenizer, examples, max_length, specials["token_type_ids"])
        pad = loaded.tokenizer.pad_token_id
        return EncodedData(task=self, split=split, n_examples=len(examples), fingerprint="", texts=examples,
                           references=None, features=features, labels=labels,
                           lengths=[len(f["input_ids"]) for f in features],
                           specials={"pad": 0 if pad is None else pad}, max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        inputs = collate_classification([data.features[i] for i in idx], data.specials["pad"])
        inputs = {k: v.to(device) if device is not None else v for k, v in inputs.items()}
        labels = torch.tensor([data.labels[i] for i in idx], dtype=torch.long, device=device)
        return EncodedBatch(inputs=inputs, labels=labels, token_masks={"encoder_self": inputs["attention_mask"]},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def example_losses(self, loaded, batch, outputs) -> Tensor:
        """``[B]``: the cross-entropy of each row of ``outputs.logits`` [B, C] against ``batch.labels`` [B]."""
        return F.cross_entropy(outputs.logits.float(), batch.labels, reduction="none")

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        for j, p in zip(batch.index.tolist(), outputs.logits.argmax(-1).tolist()):
            state.predictions[j] = p

    def summarise(self, data, state: EvalState) -> EvalResult:
        """Accuracy, F1 (two classes only) and MCC in ``extra``; the task's metric as the headline."""
        preds, labels = state.predictions, data.labels
        extra = {ACCURACY.name: ACCURACY.compute(preds, labels)}
        if max(labels + preds) <= 1:
            extra[F1.name] = F1.compute(preds, labels)
        extra[MCC.name] = MCC.compute(preds, labels)
        if self.metric_name not in extra:                 # another metric of class ids, e.g. an error rate
            extra[self.metric_name] = self.metric.of(preds, labels, state.loss, state.loss_weight)
        return EvalResult(self.metric_name, float(extra[self.metric_name]), state.mean_loss, data.n_examples, extra)
