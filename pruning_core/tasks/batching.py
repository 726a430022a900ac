"""Encoded data and batching: tokenised splits, their in-memory cache, length buckets, padding.

An :class:`EncodedData` is a tokenised split; its :meth:`~EncodedData.batches` are sorted by
length so a batch holds examples of similar length and little padding. The task that made it
collates each batch (``task._collate``), since what a batch holds depends on the task type.
:meth:`pruning_core.tasks.Task.encode` keeps each split it encodes in memory (:func:`lookup_split`,
:func:`store_split`; the least recently used dropped beyond :data:`CACHE_SIZE`), keyed by tokenizer identity.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from pruning_core.core.errors import DataError
from pruning_core.modeling.inference import packed_logits

IGNORE = -100                   # label id ignored by the loss (padding of translation targets)
CACHE_SIZE = 8                  # EncodedData kept in memory (least recently used dropped)


def label_losses(logits: Tensor, labels: Tensor) -> Tensor:
    """``[B]``: the cross-entropy of ``logits`` ``[B, T, V]`` against ``labels`` ``[B, T]`` summed per row
    (in float32), positions labelled -100 left out; what a sequence task's examples each lose."""
    logits = logits.float()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE,
                           reduction="none")
    return loss.view(labels.shape).sum(-1)


def packed_label_losses(logits: Tensor, labels: Tensor) -> Tensor:
    """``[B]``: as :func:`label_losses`, for ``logits`` ``[N, V]`` of the target positions of ``labels`` ``[B, T]``
    alone, row by row (:func:`pruning_core.modeling.inference.packed_logits.only_at`)."""
    keep = labels != IGNORE
    return row_sums(F.cross_entropy(logits.float(), labels[keep], reduction="none"), keep)


def row_sums(values: Tensor, keep: Tensor) -> Tensor:
    """``[B]``: ``values`` ``[N]``, one per True of ``keep`` ``[B, T]`` (row by row, in order), summed per row."""
    rows = keep.nonzero()[:, 0]
    return values.new_zeros(keep.shape[0]).index_add_(0, rows, values)


def target_forward(task, loaded, batch: "EncodedBatch", run) -> tuple[Any, Any]:
    """``(outputs, losses)`` of a teacher-forced pass (``run()``) whose loss reads the positions where ``batch.labels``
    is not -100, ``losses()`` giving ``[B]`` (:meth:`pruning_core.tasks.base.Task.forward_deferred`). The output head
    scores those positions alone: for a model whose output layer is known
    (:func:`pruning_core.modeling.inference.packed_logits.output_layer`) their hidden states are kept and projected a
    chunk at a time when ``losses()`` is called, most of the pass's work; else as packed ``[N, V]`` logits at once
    (``task.example_losses`` reads them)."""
    keep = batch.labels != IGNORE
    layer = packed_logits.output_layer(loaded.model)
    if layer is not None:
        with packed_logits.hidden_at(loaded.model, keep) as kept:
            outputs = run()
        if kept is not None and kept.hidden is not None:
            hidden, targets = kept.hidden, batch.labels[keep]
            return outputs, lambda: row_sums(packed_logits.target_losses(*layer, hidden, targets), keep)
    else:
        with packed_logits.only_at(loaded.model, keep):
            outputs = run()
    rows = task.example_losses(loaded, batch, outputs)        # the head never saw this batch whole, or packed logits
    return outputs, lambda: rows


def label_counts(labels: Tensor) -> Tensor:
    """``[B]``: how many positions of ``labels`` ``[B, T]`` are targets (not -100)."""
    return (labels != IGNORE).sum(-1)


@dataclass
class EncodedBatch:
    """One batch, ready for ``model(**batch.inputs)``.

    inputs: kwargs for the model, on its device; no labels inside. ``input_ids`` and
        ``attention_mask`` are ``[B, T]`` (1 = real token, 0 = padding); seq2seq models also get
        ``decoder_input_ids`` ``[B, T_dec]`` (the targets shifted right); language models ``use_cache=False``.
    labels: ``[B]`` class ids (classification) or ``[B, T_dec]`` target ids, -100 = ignore.
    token_masks: per attention kind ``[B, T]``, 1 for the real tokens the kind attends from:
        ``encoder_self`` -> ``attention_mask``; ``decoder_self`` and ``cross`` -> ``labels != -100``.
    n_examples: B.
    index: ``[B]`` positions of these examples in the split's original order.
    """

    inputs: dict[str, Any]
    labels: Tensor
    token_masks: dict[str, Tensor]
    n_examples: int
    index: Tensor


class BatchingTask(Protocol):
    """What an :class:`EncodedData` needs of the task that made it (a :class:`pruning_core.tasks.Task`), declared
    here so that this module imports no task: its name, the most of a batch's cells that may be padding, and
    how a batch of its examples is collated."""

    name: str
    max_padding: float | None

    def _collate(self, data: EncodedData, idx: Sequence[int], device) -> EncodedBatch: ...


@dataclass
class EncodedData:
    """A tokenised split, cached and shared: treat it as read-only.

    ``features[i]`` holds example i's token id lists (``input_ids``, maybe ``token_type_ids``,
    and ``labels`` for translation); ``lengths[i]`` is the sort key of the length buckets.
    """

    task: BatchingTask
    split: str
    n_examples: int
    fingerprint: str                        # sha256 of the examples, the tokenizer and max_length
    texts: list                             # raw examples (dicts), for showing in the UI
    references: list[str] | None            # translation targets (for BLEU), else None
    features: list[dict[str, list[int]]] = field(repr=False, default_factory=list)
    labels: list[int] | None = field(repr=False, default=None)   # classification class ids
    lengths: list[int] = field(repr=False, default_factory=list)
    specials: dict = field(repr=False, default_factory=dict)     # pad / decoder start ids
    max_length: int = 128

    def order(self, sort_by_length: bool = True) -> list[int]:
        """Example positions in batch order: by length (ties by position), or as they are."""
        if not sort_by_length:
            return list(range(self.n_examples))
        return sorted(range(self.n_examples), key=lambda i: (self.lengths[i], i))

    def plan(self, batch_size: int = 64, sort_by_length: bool = True) -> list[list[int]]:
        """Example positions of each batch, in batch order: at most ``batch_size`` each, shortest first.

        Where the task sets ``max_padding`` (a share of a batch's cells), a length-sorted batch also closes before
        the next example would make more of its cells padding than that; the plan depends only on the data, so
        every caller (CLI, dashboard, scorers) batches a split alike.
        """
        if batch_size < 1:
            raise DataError(f"batch_size must be at least 1, got {batch_size}.")
        order = self.order(sort_by_length)
        max_padding = getattr(self.task, "max_padding", None) if sort_by_length else None
        plan: list[list[int]] = []
        real = 0                                # tokens in the open batch; sorted, so the newest is the widest
        for i in order:
            batch = plan[-1] if plan else None
            fits = (batch is not None and len(batch) < batch_size
                    and (max_padding is None
                         or real + self.lengths[i] >= (1 - max_padding) * self.lengths[i] * (len(batch) + 1)))
            if fits:
                batch.append(i)
                real += self.lengths[i]
            else:
                plan.append([i])
                real = self.lengths[i]
        return plan

    def batches(self, batch_size: int = 64, device: torch.device | str | None = None,
                sort_by_length: bool = True, part: tuple[int, int] | None = None) -> Iterator[EncodedBatch]:
        """Every example once, batch by batch as :meth:`plan` groups them.

        part: ``(rank, world_size)``: only batches ``rank, rank + world_size, ...`` of that sequence
        (a data-parallel rank's share, :mod:`pruning_core.core.runtime.distributed`); the others are not collated.
        """
        first, every = part if part is not None else (0, 1)
        for rows in self.plan(batch_size, sort_by_length)[first::every]:
            yield self.task._collate(self, rows, device)

    def n_batches(self, batch_size: int, part: tuple[int, int] | None = None) -> int:
        """How many batches :meth:`batches` yields (for ``part``: that rank's share)."""
        total = len(self.plan(batch_size))
        if part is None:
            return total
        rank, size = part
        return len(range(rank, total, size))

    def padding_fraction(self, batch_size: int = 64, sort_by_length: bool = True) -> float:
        """Share of the encoder input positions that are padding, for this batching."""
        pad, total = 0, 0
        for rows in self.plan(batch_size, sort_by_length):
            lens = [len(self.features[i]["input_ids"]) for i in rows]
            pad += max(lens) * len(lens) - sum(lens)
            total += max(lens) * len(lens)
        return pad / total if total else 0.0


def pad(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    """``[len(rows), longest]`` long tensor, each row padded at the end with ``value``."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def accepts_argument(model: torch.nn.Module, name: str) -> bool:
    """Whether ``model.forward`` names ``name`` explicitly (DistilBERT takes no ``token_type_ids``)."""
    return name in inspect.signature(model.forward).parameters


def tokenize_classification(tokenizer, examples: Sequence[dict], max_length: int,
                            token_types: bool = True) -> list[dict[str, list[int]]]:
    """Token ids of text (``text``) or text-pair (``text_a``, ``text_b``) examples, truncated."""
    if not examples:
        return []
    if "text_a" in examples[0]:
        enc = tokenizer([e["text_a"] for e in examples], [e["text_b"] for e in examples],
                        truncation=True, max_length=max_length)
    else:
        enc = tokenizer([e["text"] for e in examples], truncation=True, max_length=max_length)
    keys = ["input_ids"] + (["token_type_ids"] if token_types and "token_type_ids" in enc else [])
    return [{k: list(enc[k][i]) for k in keys} for i in range(len(examples))]


def collate_classification(features: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, Tensor]:
    """Pad a list of tokenised examples: ``input_ids``, ``attention_mask`` (and ``token_type_ids``) [B, T]."""
    out = {"input_ids": pad([f["input_ids"] for f in features], pad_id)}
    lens = torch.tensor([len(f["input_ids"]) for f in features])
    out["attention_mask"] = (torch.arange(out["input_ids"].shape[1])[None, :] < lens[:, None]).long()
    if "token_type_ids" in features[0]:
        out["token_type_ids"] = pad([f["token_type_ids"] for f in features], 0)
    return out


# -- the in-memory cache of encoded splits -----------------------------------------------------------
_CACHE: OrderedDict[Hashable, EncodedData] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_VOCAB_HASH: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tokenizer_key(tokenizer) -> tuple:
    """Identify a tokenizer by name, size and a hash of its vocabulary (memoised per object)."""
    try:
        digest = _VOCAB_HASH.get(tokenizer)
    except TypeError:
        digest = None
    if digest is None:
        vocab = sorted(tokenizer.get_vocab().items())
        digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]
        try:
            _VOCAB_HASH[tokenizer] = digest
        except TypeError:
            pass
    return type(tokenizer).__name__, getattr(tokenizer, "name_or_path", ""), len(tokenizer), digest


def lookup_split(key: Hashable) -> EncodedData | None:
    """The cached data for ``key`` (now the most recently used), or None."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
        return hit


def store_split(key: Hashable, data: EncodedData) -> None:
    """Cache ``data`` under ``key``, dropping the least recently used beyond ``CACHE_SIZE``."""
    with _CACHE_LOCK:
        _CACHE[key] = data
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def clear_cache() -> None:
    """Forget every cached EncodedData."""
    with _CACHE_LOCK:
        _CACHE.clear()
