"""A minimal in-memory task implementing the tasks contract, for testing the core on tiny models
without the data layer (classification on random token ids, or translation for seq2seq).

``metric_name`` is "accuracy" (of the argmax, per example or per target token) or "perplexity"
(exp of the mean loss: a lower-is-better metric, continuous, so every head changes it).
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import torch
import torch.nn.functional as F

from pruning_core.modeling.masking import apply_mask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import evidence


@dataclass
class FakeBatch:
    inputs: dict
    labels: torch.Tensor
    token_masks: dict
    n_examples: int
    index: torch.Tensor


class FakeData:
    def __init__(self, task, ids, attn, labels, dec=None):
        self.task, self.ids, self.attn, self.labels, self.dec = task, ids, attn, labels, dec
        self.split, self.n_examples, self.fingerprint = "validation", ids.shape[0], "fake"

    def n_batches(self, batch_size, part=None):
        return -(-self.n_examples // batch_size)

    def batches(self, batch_size=64, device=None):
        for s in range(0, self.n_examples, batch_size):
            sl = slice(s, s + batch_size)
            inputs = {"input_ids": self.ids[sl], "attention_mask": self.attn[sl]}
            masks = {"encoder_self": self.attn[sl]}
            if self.dec is not None:
                inputs["decoder_input_ids"] = self.dec[sl]
                dmask = (self.labels[sl] != -100).long()
                masks.update(decoder_self=dmask, cross=dmask)
            yield FakeBatch(inputs, self.labels[sl], masks, self.ids[sl].shape[0], torch.arange(s, s + self.ids[sl].shape[0]))


class FakeTask:
    name = "fake"
    default_split = "validation"

    def __init__(self, seq2seq: bool = False, n: int = 12, length: int = 9, vocab: int = 29, seed: int = 0,
                 metric_name: str = "accuracy"):
        g = torch.Generator().manual_seed(seed)
        self.seq2seq = seq2seq
        self.task_type = "translation" if seq2seq else "classification"
        assert metric_name in ("accuracy", "perplexity"), metric_name
        self.metric_name = metric_name
        ids = torch.randint(9, vocab, (n, length), generator=g)
        attn = torch.ones(n, length, dtype=torch.long)
        attn[::3, -3:] = 0
        if seq2seq:
            labels = torch.randint(9, vocab, (n, 6), generator=g)
            labels[::2, -2:] = -100
            dec = torch.cat([torch.full((n, 1), 5), labels[:, :-1].clamp(min=0)], 1)
            self.data = FakeData(self, ids, attn, labels, dec)
        else:
            self.data = FakeData(self, ids, attn, torch.randint(0, 2, (n,), generator=g))
        self.encode_calls = 0

    def encode(self, loaded, split, limit=None, max_length=128):
        self.encode_calls += 1
        return self.data

    def loss_sum(self, loaded, batch, outputs):
        logits = outputs.logits
        if self.seq2seq:
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.reshape(-1),
                                   ignore_index=-100, reduction="sum")
        return F.cross_entropy(logits, batch.labels, reduction="sum")

    def loss_weight(self, batch):
        """What loss_sum sums over: target tokens (seq2seq) or examples, as the real tasks count."""
        return int((batch.labels != -100).sum()) if self.seq2seq else batch.n_examples

    def references(self, data):
        return None if self.seq2seq else data.labels.tolist()

    def evaluate(self, loaded, data, mask=None, *, batch_size=64, beams=1, progress=None):
        correct, total, loss, preds = 0.0, 0, 0.0, []
        with torch.inference_mode(), apply_mask(loaded, mask):
            for b in data.batches(batch_size):
                out = loaded.model(**b.inputs)
                loss += float(self.loss_sum(loaded, b, out))
                if self.seq2seq:
                    keep = b.labels != -100
                    correct += float((out.logits.argmax(-1) == b.labels)[keep].sum())
                    total += int(keep.sum())
                else:
                    correct += float((out.logits.argmax(-1) == b.labels).sum())
                    total += b.n_examples
                    preds += out.logits.argmax(-1).tolist()
        if self.metric_name == "perplexity":
            return EvalResult("perplexity", math.exp(loss / total), loss / total, data.n_examples)
        kept = {} if self.seq2seq else evidence(get_metric("accuracy"), preds, self.references(data))
        return EvalResult("accuracy", correct / total, loss / total, data.n_examples, **kept)
