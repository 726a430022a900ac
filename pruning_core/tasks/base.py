"""The Task base class: a data source plus how to encode, score and evaluate it.

A task tokenises a split once (:meth:`Task.encode`, cached) into an
:class:`~pruning_core.tasks.batching.EncodedData`. :meth:`Task.loss_sum` is a batch's *summed* loss (the sum
of :meth:`Task.example_losses`), so gradients of several batches add up. :meth:`Task.evaluate` is the one
evaluation loop (a template method: inference mode, the head mask, each example's loss, progress, timing);
a task type supplies :meth:`Task.example_losses`, :meth:`Task.predict_batch` and :meth:`Task.summarise`. A
task declares its ``task_type`` (checked against the model's) and its headline metric's name.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from pruning_core.core.runtime import distributed
from pruning_core.core.errors import DataError, did_you_mean
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.drafts import DraftStats, DraftStore, draft_greedy_decode, draft_key
from pruning_core.modeling.inference.greedy import greedy_decode
from pruning_core.modeling.inference.layer_cache import LayerInputCache, forward_for
from pruning_core.modeling.masking import apply_mask
from pruning_core.evaluation.metrics import Metric, get_metric
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.core.registry import Registry
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import evidence
from pruning_core.tasks.batching import EncodedBatch, EncodedData, lookup_split, store_split, tokenizer_key

Loader = Callable[[str, "int | None"], list[dict]]


@dataclass
class EvalState:
    """What the evaluation loop gathers over the batches, for :meth:`Task.summarise`.

    predictions: one entry per example, in the split's original order (class id, decoded text).
    losses, weights: per example, in that order, its summed loss and what it is summed over.
    loss: the summed loss; loss_weight: what it is summed over (examples or target tokens).
    options: evaluation options (``beams``); extra: anything else a task type counts.
    """

    predictions: list
    losses: list[float] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    loss: float = 0.0
    loss_weight: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_loss(self) -> float:
        return self.loss / max(1, self.loss_weight)


def _a(word: str) -> str:
    """``word`` with its indefinite article ("a translation", "an asr")."""
    return ("an " if word[:1].lower() in "aeio" else "a ") + word


class Task:
    """One task: a data source plus how to encode, score and evaluate it.

    Subclasses (one per task type) set ``task_type`` and ``default_metric`` and implement
    ``_encode_examples``, ``_collate``, ``example_losses`` (and ``example_weights`` unless each example
    weighs 1), ``predict_batch`` and ``summarise``; the data
    source is a ``loader(split, limit) -> list[dict]`` given at construction.
    """

    task_type: str = ""
    default_metric: str = ""
    max_padding: float | None = None  # batching: the most of a batch's cells that may be padding (None: count only)
    beam_search: bool = False         # whether evaluate decodes text, so that beams > 1 means something
    metric_first: bool = False        # evaluate: every batch's predictions, then their metric (reported as progress's
    #                                   ``partial``), then the loss: a page shows a decoded metric before the output
    #                                   layer's pass over the references (a metric read from the loss: no partial)

    def __init__(self, name: str, loader: Loader, *, splits: Sequence[str], default_split: str,
                 metric_name: str | None = None, label_names: Sequence[str] | None = None,
                 description: str = "", cache_token: Callable[[str], str] | None = None,
                 shared_splits: bool = False) -> None:
        self.name = name
        self._loader = loader
        self.splits = tuple(splits)
        self.default_split = default_split
        self.metric_name = get_metric(metric_name or self.default_metric).name     # unknown names raise here
        self.label_names = list(label_names) if label_names is not None else None
        self.num_labels = len(self.label_names) if self.label_names is not None else None
        self.description = description
        self._cache_token = cache_token or (lambda split: "")
        self.shared_splits = shared_splits    # True: every split name gives the same examples (a data file)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, metric={self.metric_name})"

    @property
    def metric(self) -> Metric:
        """The headline metric (its registry entry)."""
        return get_metric(self.metric_name)

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise DataError(f"Task {self.name!r} has no split {split!r}.{did_you_mean(split, self.splits)} "
                            f"Its splits: {', '.join(self.splits)}.")

    def distinct_split(self, split: str) -> bool:
        """Whether ``split`` holds examples of its own (False for a data file, whose splits are one set)."""
        return split in self.splits and not self.shared_splits

    def check_beams(self, beams: int) -> None:
        """Raise unless ``beams`` is 1, or at least 1 for a task that decodes (``beam_search``)."""
        if beams < 1:
            raise DataError(f"beams must be at least 1 (1 = greedy decoding), got {beams}.")
        if beams != 1 and not self.beam_search:
            raise DataError(f"beams {beams} has no effect on {self.task_type} task {self.name!r}: only tasks that "
                            "decode text (translation) use beam search. Leave --beams out, or give 1.")

    def check_model(self, loaded) -> None:
        """Raise unless ``loaded`` (its adapter's task type) can do this task."""
        if loaded.task_type != self.task_type:
            raise DataError(f"Task {self.name!r} is {_a(self.task_type)} task but model {loaded.model_id!r} is "
                            f"{_a(loaded.task_type)} model. Pick {_a(loaded.task_type)} task or another model.")

    def load(self, split: str, limit: int | None = None) -> list[dict]:
        """Raw examples of ``split`` (the first ``limit`` of them, in the source's order)."""
        self.check_split(split)
        if limit is not None and limit < 1:
            raise DataError(f"limit must be a positive number of examples, got {limit}.")
        rows = self._loader(split, limit)
        rows = rows[:limit] if limit is not None else rows
        if not rows:
            raise DataError(f"Task {self.name!r} split {split!r} has no examples.")
        return rows

    def encode(self, loaded, split: str, limit: int | None = None, max_length: int = 128,
               progress: ProgressCallback | None = None) -> EncodedData:
        """Tokenise ``split`` for ``loaded``'s tokenizer, once: later calls return the cached data."""
        self.check_split(split)
        self.check_model(loaded)
        max_length = self._max_length(loaded, max_length)
        key = (self.name, self._cache_token(split), split, limit, tokenizer_key(loaded.tokenizer), max_length,
               tuple(sorted(self._specials(loaded).items())))
        hit = lookup_split(key)
        if hit is not None:
            return hit
        report(progress, "encode", 0, 1, f"{self.name} {split}")
        examples = self.load(split, limit)
        data = self._encode_examples(loaded, split, examples, max_length)
        h = hashlib.sha256(json.dumps(examples, sort_keys=True, ensure_ascii=False, default=str).encode())
        h.update(repr(key[4:]).encode())
        data.fingerprint = h.hexdigest()
        report(progress, "encode", 1, 1, f"{data.n_examples} examples")
        store_split(key, data)
        return data

    @staticmethod
    def _max_length(loaded, max_length: int) -> int:
        if max_length < 2:
            raise DataError(f"max_length must be at least 2 tokens, got {max_length}.")
        limit = getattr(loaded.tokenizer, "model_max_length", None)
        return min(max_length, limit) if isinstance(limit, int) and 2 <= limit < 1_000_000 else max_length

    def _specials(self, loaded) -> dict:
        return {}

    # -- the evaluation loop (template method) ------------------------------------------------------
    def evaluate(self, loaded, data: EncodedData, mask: HeadMask | None = None, *, batch_size: int = 64,
                 beams: int = 1, progress: ProgressCallback | None = None,
                 layer_cache: LayerInputCache | None = None, shortlist: bool = True,
                 drafts: DraftStore | None = None) -> EvalResult:
        """The metric and mean loss of ``loaded`` under ``mask`` on ``data`` (``beams``: decoding only),
        with each example's summed loss, its weight and its prediction, all from one forward pass.

        ``shortlist``: a translation model that ships a vocabulary shortlist (``loaded.shortlist``, Bergamot's) decodes
        with it, as deployed (:mod:`pruning_core.modeling.inference.shortlist`); False decodes over the whole vocabulary.
        The loss always uses the whole vocabulary.

        ``layer_cache``: start each batch at the first layer whose heads differ from an evaluation already
        cached there (:mod:`pruning_core.modeling.inference.layer_cache`; the same figures, less work). Only for a model that
        does not change while cached; families without a layer stack, and data-parallel runs, run the
        whole model.

        ``drafts``: a task that decodes greedily checks, per example, the output under the nearest mask kept there
        instead of decoding it again, then keeps this one's (:mod:`pruning_core.modeling.inference.drafts`; the same tokens,
        less work). Only for a model that does not change while kept; data-parallel runs decode as usual.

        Under ``torchrun`` each rank runs its share of the batches (the batch iterator's ``part``);
        predictions and losses are gathered and the batch losses re-added in the single-process
        order, so every figure equals one process's exactly (:mod:`pruning_core.core.runtime.distributed`).
        """
        self.check_beams(beams)
        start = time.perf_counter()
        n = data.n_examples
        state = EvalState(predictions=[None] * n, losses=[0.0] * n, weights=[0] * n, options={"beams": beams,
                                                                                        "shortlist": shortlist})
        part = distributed.batch_part()
        rank, size = part if part is not None else (0, 1)
        key = draft_key(loaded, data, state.options) if drafts is not None and part is None and beams == 1 else None
        if key is not None:
            state.extra["drafts"], state.extra["tokens"] = drafts.draft(key, mask), {}
        batches, total = distributed.batches(data, batch_size, loaded.device)     # this rank's share
        batch_losses: dict[int, tuple[float, int]] = {}        # global batch index -> (loss sum, weight)
        mine: list[int] = []                                   # the examples this process evaluated
        with distributed.guard(f"evaluate {self.name}"):
            with torch.inference_mode(), apply_mask(loaded, mask), \
                    forward_for(loaded, data, mask, batch_size, layer_cache if part is None else None) as forward:
                run = self._metric_first if self.metric_first else self._in_turn
                early = run(loaded, data, batches, total, forward, state, batch_losses, mine, (rank, size), progress,
                            report_early=part is None and self.metric.inputs != "loss", start=start)
            if part is not None:
                self._gather(state, mine, batch_losses)
        state.loss, state.loss_weight = _summed(batch_losses)
        state.extra.pop("on_step", None)
        tokens = state.extra.pop("tokens", None)
        state.extra.pop("drafts", None)
        if key is not None and tokens is not None and len(tokens) == n:
            drafts.put(key, mask, [tokens[j] for j in range(n)])
        if early is not None:             # the metric and its evidence read no loss: computed once, before it
            return replace(early, loss=state.mean_loss, seconds=time.perf_counter() - start,
                           example_losses=tuple(state.losses))
        return self._finish(data, state, start)

    def _in_turn(self, loaded, data, batches, total, forward, state, batch_losses, mine, place, progress,
                 **_) -> None:
        """Each batch's loss and predictions in turn."""
        for i, batch in enumerate(batches):
            outputs, rows = self.forward_losses(loaded, batch, lambda: forward(i, batch))
            self._keep_losses(state, batch_losses, place, i, batch, rows)
            state.extra["on_step"] = _decoding(progress, i, total)
            self.predict_batch(loaded, data, batch, outputs, state)
            mine += batch.index.tolist()
            report(progress, "evaluate", i + 1, total, self.name)
        return None

    def _metric_first(self, loaded, data, batches, total, forward, state, batch_losses, mine, place, progress, *,
                      report_early: bool, start: float) -> EvalResult | None:
        """Every batch's forward pass (its losses left for later, :meth:`forward_deferred`), then the predictions,
        then the metric as progress's ``partial`` (when ``report_early``; returned), then the losses."""
        later: list = []                   # (batch, its losses to compute, what its prediction reads)
        steps = 3 * total
        for i, batch in enumerate(batches):
            outputs, losses = self.forward_deferred(loaded, batch, lambda: forward(i, batch))
            later.append((batch, losses, self.prediction_inputs(outputs, last=i == total - 1)))
            del outputs
            for j, weight in zip(batch.index.tolist(), self.example_weights(batch).tolist()):
                state.weights[j] = int(weight)
            mine += batch.index.tolist()
            report(progress, "evaluate", i + 1, steps, self.name)
        for k, (batch, _, kept) in enumerate(later):
            state.extra["on_step"] = _decoding(progress, k, total)
            self.predict_batch(loaded, data, batch, kept, state)
            later[k] = later[k][:2]
            report(progress, "evaluate", total + k + 1, steps, self.name)
        early = None
        if report_early:
            state.loss, state.loss_weight = float("nan"), sum(state.weights)
            early = self._finish(data, state, start)
            report(progress, "evaluate", 2 * total, steps, self.name, partial=early)
        for i, (batch, losses) in enumerate(later):
            self._keep_losses(state, batch_losses, place, i, batch, losses())
            report(progress, "evaluate", 2 * total + i + 1, steps, self.name)
        return early

    def _keep_losses(self, state, batch_losses, place, i, batch, rows) -> None:
        """Store ``batch``'s (the ``i``-th of this rank, ``place``: (rank, size)) per-example losses ``rows`` [B]."""
        rank, size = place
        rows = rows.float()
        weights = self.example_weights(batch).tolist()                        # [B]
        for j, loss, weight in zip(batch.index.tolist(), rows.tolist(), weights):
            state.losses[j], state.weights[j] = loss, int(weight)
        batch_losses[rank + i * size] = (float(rows.sum()), int(sum(weights)))

    def _gather(self, state: EvalState, mine: list[int], batch_losses: dict[int, tuple[float, int]]) -> None:
        """Fill ``state`` and ``batch_losses`` with every rank's examples and batches (data-parallel runs)."""
        share = ([(j, state.predictions[j], state.losses[j], state.weights[j]) for j in mine], batch_losses)
        for examples, losses in distributed.gather(share, f"evaluate {self.name}"):
            for j, prediction, loss, weight in examples:
                state.predictions[j], state.losses[j], state.weights[j] = prediction, loss, weight
            batch_losses.update(losses)

    def _finish(self, data: EncodedData, state: EvalState, start: float) -> EvalResult:
        """The result of the predictions in ``state``, with per-example evidence, losses and timing."""
        result = self.summarise(data, state)
        kept = evidence(get_metric(result.metric_name), state.predictions, self.references(data))
        return replace(result, seconds=time.perf_counter() - start, example_losses=tuple(state.losses),
                       example_weights=tuple(state.weights), predictions=tuple(state.predictions), **kept)

    @staticmethod
    def references(data: EncodedData) -> list | None:
        """What predictions are compared with, one per example: class ids, or reference texts."""
        return data.labels if data.labels is not None else data.references

    # -- implemented per task type ------------------------------------------------------------------
    def _encode_examples(self, loaded, split: str, examples: list[dict], max_length: int) -> EncodedData:
        raise NotImplementedError

    def _collate(self, data: EncodedData, idx: Sequence[int], device) -> EncodedBatch:
        raise NotImplementedError

    def example_losses(self, loaded, batch: EncodedBatch, outputs) -> Tensor:
        """``[B]``: each example's loss, summed over what it is scored on (itself, or its target tokens)."""
        raise NotImplementedError

    def prediction_inputs(self, outputs, last: bool = True) -> Any:
        """What :meth:`predict_batch` reads of a batch's ``outputs``, kept until every loss is known (``loss_first``);
        ``last``: no batch follows (what it keeps is held while no other batch's is)."""
        return outputs

    def forward_losses(self, loaded, batch: EncodedBatch, run: Callable[[], Any]) -> tuple[Any, Tensor]:
        """The model's outputs on ``batch`` (``run()``: the forward pass :meth:`evaluate` chose) and ``[B]`` each
        example's loss (:meth:`example_losses`); a task whose loss reads less than the whole logits narrows
        the output head here (or in :meth:`forward_deferred`)."""
        outputs, losses = self.forward_deferred(loaded, batch, run)
        return outputs, losses()

    def forward_deferred(self, loaded, batch: EncodedBatch, run: Callable[[], Any]) -> tuple[Any, Callable[[], Tensor]]:
        """:meth:`forward_losses` with the losses as a function: a task may leave work for it (its output layer's
        pass over the targets) that :meth:`evaluate` does after the metric (``metric_first``)."""
        outputs = run()
        rows = self.example_losses(loaded, batch, outputs)
        return outputs, lambda: rows

    def example_weights(self, batch: EncodedBatch) -> Tensor:
        """``[B]``: what each of :meth:`example_losses` sums over (1 per example by default)."""
        return torch.ones(batch.n_examples, dtype=torch.long)

    def loss_sum(self, loaded, batch: EncodedBatch, outputs) -> Tensor:
        """Scalar: the loss summed over the batch's examples (what scoring differentiates)."""
        return self.example_losses(loaded, batch, outputs).sum()

    def loss_weight(self, batch: EncodedBatch) -> int:
        """What :meth:`loss_sum` sums over in ``batch`` (the mean loss divides by the total)."""
        return int(self.example_weights(batch).sum())

    def predict_batch(self, loaded, data: EncodedData, batch: EncodedBatch, outputs, state: EvalState) -> None:
        """Store the predictions of ``batch`` in ``state.predictions[batch.index]`` (inside the loop)."""
        raise NotImplementedError

    @staticmethod
    def greedy_tokens(loaded, batch: EncodedBatch, state: EvalState, *args, **kwargs) -> list[list[int]]:
        """:func:`~pruning_core.modeling.inference.greedy.greedy_decode`'s tokens of ``batch`` (``args``, ``kwargs``: its
        own); where :meth:`evaluate` was given drafts, checked against the nearest mask's output
        (:func:`~pruning_core.modeling.inference.drafts.draft_greedy_decode`, counted in ``state.extra["draft"]``) and kept."""
        tokens, drafts = state.extra.get("tokens"), state.extra.get("drafts")
        if state.extra.get("on_step") is not None:
            kwargs.setdefault("on_step", state.extra["on_step"])
        index = batch.index.tolist()
        if drafts is None:
            out = greedy_decode(loaded.model, *args, **kwargs)
        else:
            out, stats = draft_greedy_decode(loaded.model, *args, drafts=[drafts[j] for j in index], **kwargs)
            state.extra["draft"] = stats + state.extra.get("draft", DraftStats())
        if tokens is not None:
            tokens.update(zip(index, out))
        return out

    def summarise(self, data: EncodedData, state: EvalState) -> EvalResult:
        """The :class:`EvalResult` of the predictions gathered in ``state``."""
        raise NotImplementedError


def draft_record(state: EvalState) -> dict:
    """``{"draft": {...}}``: what checking drafts counted (:class:`~pruning_core.modeling.inference.drafts.DraftStats`) for a
    result's ``extra["decoding"]``, or ``{}`` when no draft was checked."""
    stats = state.extra.get("draft")
    return {} if stats is None else {"draft": asdict(stats)}


def _summed(batch_losses: dict[int, tuple[float, int]]) -> tuple[float, int]:
    """The loss and weight of ``batch_losses`` (global batch index -> (loss sum, weight)) added in batch order: the
    single-process order, whatever order the batches ran in."""
    loss, weight = 0.0, 0
    for b in sorted(batch_losses):
        loss += batch_losses[b][0]
        weight += batch_losses[b][1]
    return loss, weight


SCORE_SPLIT = "train"      # heads are scored on training data and measured on held-out data (Michel et al.)


def default_score_split(task: Task) -> str:
    """The split heads are scored on unless the caller says otherwise: ``train`` when ``task`` has training
    examples of its own (distinct from the split it is evaluated on), so the order of the heads is not chosen
    on the examples it is measured on; else the task's evaluation split (``task.default_split``).

    The CLI (``score``, ``curve``, ``one-per-layer``) and the dashboard (Head map, Curves, Share) use it.
    """
    return SCORE_SPLIT if task.distinct_split(SCORE_SPLIT) else task.default_split


TASK_TYPES: Registry[type[Task]] = Registry("task type", DataError,
                                            "Add a Task subclass under pruning_core/tasks/ and register it.")


def register_task_type(cls: type[Task]) -> type[Task]:
    """Class decorator: make ``cls`` the Task class for its ``task_type``."""
    TASK_TYPES.add(cls.task_type, cls, description=(cls.__doc__ or "").strip().split("\n")[0],
                   default_metric=cls.default_metric)
    return cls


def _decoding(progress: ProgressCallback | None, batch: int, batches: int):
    """Greedy decoding's per-token progress for batch ``batch`` of ``batches`` (None without a callback): the
    stage ``decode`` counts tokens against the most a row may have, so a long decode's bar moves."""
    if progress is None:
        return None
    note = f"batch {batch + 1} of {batches}" if batches > 1 else ""
    return lambda done, bound: report(progress, "decode", done, bound, note)
