"""Causal language modelling: next-token cross-entropy over sliding windows, metric perplexity.

Each document is tokenised whole and cut into **windows** of ``context_length`` tokens (``max_length``,
default 128, capped by the model's positions) every ``stride`` tokens (default: the context length; a task built
with ``stride_share`` uses that share of the context, e.g. 0.5: every target after the first window then has at
least half a window of tokens before it). A token
is a target only in the first window that can predict it, so every token is predicted at most once (as in
the Hugging Face perplexity guide). The windows are this task type's examples: each one's prediction is its
``(loss_sum, tokens)`` pair, so a bootstrap over windows gives the perplexity's interval
(:mod:`pruning_core.evaluation.significance`); perplexity = exp(summed loss / targets). A perplexity's reference
is the **unigram** model's on the same targets (:func:`unigram_baseline`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from pruning_core.core.errors import DataError
from pruning_core.evaluation.metrics import PERPLEXITY
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling.inference import packed_logits
from pruning_core.modeling.architectures import adapter_for
from pruning_core.tasks.base import EvalState, Loader, Task, register_task_type
from pruning_core.tasks.batching import IGNORE, EncodedBatch, EncodedData, label_counts, label_losses, pad, row_sums

DEFAULT_CONTEXT = 128


def windows(ids: Sequence[int], context: int, stride: int) -> list[tuple[list[int], list[int]]]:
    """``(input_ids, labels)`` of each window of ``ids`` (labels -100 where a token is not a target).

    A window starts every ``stride`` tokens and holds up to ``context`` tokens; its targets are the
    tokens after its first that no earlier window predicted. Windows without a target are dropped.
    """
    out, predicted_to = [], 1                    # tokens before predicted_to are predicted (or the first)
    for begin in range(0, max(1, len(ids) - 1), stride):
        end = min(begin + context, len(ids))
        first = max(predicted_to, begin + 1)
        if first < end:
            window = list(ids[begin:end])
            out.append((window, [IGNORE if begin + j < first else t for j, t in enumerate(window)]))
            predicted_to = end
        if end == len(ids):
            break
    return out


def token_losses(outputs, labels: Tensor) -> Tensor:
    """``[B]`` next-token cross-entropy summed per row: ``logits[:, t]`` predicts ``labels[:, t + 1]``.

    outputs.logits: ``[B, T, V]``; labels: ``[B, T]`` token ids, -100 where not a target.
    """
    return label_losses(outputs.logits[:, :-1], labels[:, 1:])


@register_task_type
class LanguageModelTask(Task):
    """Causal language modelling over sliding windows; metric perplexity, loss per predicted token."""

    task_type = "language_model"
    default_metric = PERPLEXITY.name
    max_padding = 0.25                 # windows vary in length; every padded position costs a whole decoder pass

    def __init__(self, name: str, loader: Loader, *, stride: int | None = None, stride_share: float | None = None,
                 **kwargs) -> None:
        super().__init__(name, loader, **kwargs)
        if stride is not None and stride < 1:
            raise DataError(f"stride must be a positive number of tokens, got {stride}.")
        if stride_share is not None and not 0.0 < stride_share <= 1.0:
            raise DataError(f"stride_share must be in (0, 1], got {stride_share}.")
        self.stride = stride                     # None: the context length (non-overlapping windows)
        self.stride_share = stride_share         # or this share of the context length

    def _max_length(self, loaded, max_length: int) -> int:
        context = Task._max_length(loaded, max_length)
        cfg = loaded.model.config
        positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        return min(context, int(positions)) if positions else context

    def _specials(self, loaded) -> dict:
        return {"stride": self.stride, "stride_share": self.stride_share}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        context = max_length
        share = round(self.stride_share * context) if self.stride_share else None
        stride = max(1, min(self.stride or share or context, context))
        tok = loaded.tokenizer
        for i, ex in enumerate(examples):
            if not isinstance(ex.get("text"), str):
                raise DataError(f"Task {self.name!r} document {i} of {split!r} has no 'text'.")
        ids = tok([e["text"] for e in examples], truncation=False)["input_ids"]
        features, texts = [], []
        for doc, (example, doc_ids) in enumerate(zip(examples, ids)):
            for k, (window, labels) in enumerate(windows(doc_ids, context, stride)):
                features.append({"input_ids": window, "labels": labels})
                texts.append({"text": example["text"], "document": doc, "window": k})
        if not features:
            raise DataError(f"Task {self.name!r} split {split!r}: no document has two tokens to predict from.")
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else getattr(tok, "eos_token_id", None)
        return EncodedData(task=self, split=split, n_examples=len(features), fingerprint="", texts=texts,
                           references=None, features=features, labels=None,
                           lengths=[len(f["input_ids"]) for f in features],
                           specials={"pad": 0 if pad_id is None else int(pad_id), "context_length": context,
                                     "stride": stride, "documents": len(examples)},
                           max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        feats = [data.features[i] for i in idx]
        input_ids = pad([f["input_ids"] for f in feats], data.specials["pad"])              # [B, T]
        labels = pad([f["labels"] for f in feats], IGNORE)                                  # [B, T]
        lens = torch.tensor([len(f["input_ids"]) for f in feats])
        attention_mask = (torch.arange(input_ids.shape[1])[None, :] < lens[:, None]).long()
        if device is not None:
            input_ids, labels, attention_mask = input_ids.to(device), labels.to(device), attention_mask.to(device)
        # use_cache=False: one pass over whole windows needs no key/value cache (which would only fill memory, and
        # which the layer-input cache cannot reuse: pruning_core.modeling.inference.layer_cache)
        return EncodedBatch(inputs={"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False},
                            labels=labels,
                            token_masks={"decoder_self": attention_mask}, n_examples=len(idx),
                            index=torch.tensor(list(idx), dtype=torch.long))

    def example_losses(self, loaded, batch, outputs) -> Tensor:
        """``[B]``: each window's next-token cross-entropy of ``outputs.logits`` [B, T, V], summed over its targets."""
        return token_losses(outputs, batch.labels)

    def forward_losses(self, loaded, batch, run):
        """The output head projects only the positions that predict a target (not a window's padding or its last
        token), a chunk of positions at a time (:func:`pruning_core.modeling.inference.packed_logits.target_losses`), where the
        family names the layer whose output is the logits (``ArchitectureAdapter.logits_layer``; ``outputs.logits``
        is then ``[B, 0, V]``); else the whole logits."""
        head = adapter_for(loaded.model).logits_layer(loaded.model)
        if head is None:
            return super().forward_losses(loaded, batch, run)
        keep = torch.zeros_like(batch.labels, dtype=torch.bool)          # [B, T]: logits[:, t] predict labels[:, t + 1]
        keep[:, :-1] = batch.labels[:, 1:] != IGNORE
        with packed_logits.hidden_at(loaded.model, keep) as kept:
            outputs = run()
        if kept is None or kept.hidden is None:
            return outputs, self.example_losses(loaded, batch, outputs)     # the head never saw this batch whole
        weight = head.weight                                                  # [V, d]
        bias = head.bias.float() if head.bias is not None else weight.new_zeros(weight.shape[0], dtype=torch.float32)
        # as many bytes of logits per chunk as packed_logits.CHUNK positions of a 32,001-word vocabulary
        chunk = max(16, packed_logits.CHUNK * 32_001 // weight.shape[0])
        losses = packed_logits.target_losses(weight, bias, kept.hidden, batch.labels[:, 1:][keep[:, :-1]], chunk)
        return outputs, row_sums(losses, keep)

    def example_weights(self, batch) -> Tensor:
        return label_counts(batch.labels[:, 1:])

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        """Each window's ``(loss_sum, tokens)`` (the loop's per-example loss): what a bootstrap over windows resamples."""
        for j in batch.index.tolist():
            state.predictions[j] = (state.losses[j], state.weights[j])

    def summarise(self, data, state: EvalState) -> EvalResult:
        """Perplexity = exp(mean token loss); tokens, context length and stride in ``extra``."""
        metric = self.metric
        value = metric.of(state.predictions, [], state.loss, state.loss_weight)
        extra = {metric.name: value, "mean_token_loss": state.mean_loss, "tokens": state.loss_weight,
                 "context_length": data.specials["context_length"], "stride": data.specials["stride"],
                 "documents": data.specials["documents"]}
        return EvalResult(metric.name, value, state.mean_loss, data.n_examples, extra)


def text_loader(texts: Callable[[str], list[str]]) -> Loader:
    """A loader of ``{"text"}`` documents from ``texts(split)`` (labels and other fields dropped)."""
    def load(split: str, limit: int | None) -> list[dict]:
        docs = [{"text": t} for t in texts(split) if t.strip()]
        return docs[:limit] if limit is not None else docs
    return load


# -- the perplexity's reference: a unigram model -------------------------------------------------------
@dataclass(frozen=True)
class UnigramBaseline:
    """The unigram perplexity on one evaluation set, and what it was fitted on.

    A unigram model predicts every token from its frequency in the training text alone, ignoring the context:
    counts come from the task's training split, tokenised by the model's own tokenizer into the same windows as
    the evaluation, so the counted tokens are the kind the model predicts; add-one (Laplace) smoothing over the
    model's vocabulary gives unseen tokens a count of 1:

        p(t) = (count(t) + 1) / (N + V),    perplexity = exp(-mean over evaluation targets of log p(t))

    with ``N`` training tokens and ``V`` the vocabulary size. A model near this value uses almost none of its
    context. For a data file (whose splits are all the same text) the counts come from the evaluated text
    itself, which flatters the baseline (``own_split`` False).
    """

    perplexity: float
    train_split: str        # the split whose tokens were counted
    own_split: bool         # False: that split is the evaluated text itself (a data file), which flatters it
    train_tokens: int       # N
    eval_tokens: int        # targets scored (the ones the model's perplexity is over)
    vocab_size: int         # V, the size of the model's output vocabulary


def targets(data: EncodedData) -> list[int]:
    """The token ids an evaluation of ``data`` (a language-model task's windows) predicts, in order."""
    return [t for f in data.features for t in f["labels"] if t != IGNORE]


def unigram_perplexity(train: Iterable[int], evaluated: Iterable[int], vocab_size: int) -> float:
    """Perplexity on ``evaluated`` token ids of add-one smoothed unigram counts of ``train`` over a
    vocabulary of ``vocab_size`` ids (every id in either must be below it)."""
    counts = Counter(train)
    n = sum(counts.values())
    scored = list(evaluated)
    if not scored:
        raise ValueError("no evaluation tokens to score the unigram baseline on")
    if vocab_size <= max(max(scored), max(counts, default=-1)):
        raise ValueError(f"vocab_size {vocab_size} is smaller than a token id seen "
                         f"({max(max(scored), max(counts, default=-1))}); pass the model's vocabulary size.")
    log_norm = math.log(n + vocab_size)
    nll = sum(log_norm - math.log(counts[t] + 1) for t in scored)
    return math.exp(nll / len(scored))


def unigram_baseline(loaded, task, data: EncodedData, train_split: str = "train") -> UnigramBaseline:
    """The unigram perplexity on ``data`` (``task``'s encoded evaluation windows for ``loaded``),
    counted on ``train_split`` (the evaluated split itself when the task has no distinct one)."""
    own = task.distinct_split(train_split)
    split = train_split if own else data.split
    train = targets(task.encode(loaded, split, None, max_length=data.max_length))
    evaluated = targets(data)
    cfg_vocab = int(getattr(loaded.model.config, "vocab_size", 0) or 0)
    vocab = max(cfg_vocab, len(loaded.tokenizer), max(train + evaluated) + 1)
    return UnigramBaseline(unigram_perplexity(train, evaluated, vocab), split, own, len(train), len(evaluated),
                           vocab)
