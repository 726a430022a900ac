"""A reference for a language model's perplexity: the perplexity of a **unigram** model, which
predicts every token from its frequency in the training text alone, ignoring the context.

Counts come from the task's training split, tokenised by the model's own tokenizer into the same
windows as the evaluation (:mod:`.language_model`), so the counted tokens are the kind the model
predicts; add-one (Laplace) smoothing over the model's vocabulary gives unseen tokens a count of 1:

    p(t) = (count(t) + 1) / (N + V),    perplexity = exp(-mean over evaluation targets of log p(t))

with ``N`` training tokens and ``V`` the vocabulary size. A model near this value uses almost none
of its context. For a data file (whose splits are all the same text) the counts come from the
evaluated text itself, which flatters the baseline; :class:`UnigramBaseline` says so.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pruning_core.tasks.batching import IGNORE, EncodedData


@dataclass(frozen=True)
class UnigramBaseline:
    """The unigram perplexity on one evaluation set, and what it was fitted on."""

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
