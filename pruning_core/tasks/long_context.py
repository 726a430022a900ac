"""Long-context tasks: RULER-style synthetic examples (:mod:`.data.ruler`) at a context length in tokens of
the model's own tokenizer, scored by exact match of a greedy answer; and, on the same machinery, few-shot
in-context pattern tasks (``icl-*``: demonstrations only, ``--context`` a cap; ``icl-*-far``: them deep in noise).
Each example's filler is the largest that keeps prompt plus answer budget within ``max_length`` (``--context``).
Every model gets RULER's template for base models: the question, a space, then the answer prefix the greedy answer
continues (no chat template). Each example runs alone: one prefill, whose last logits give its loss, then greedy
decoding of up to ``new_tokens`` from the same cache (:func:`pruning_core.modeling.kv.kv_cache.new_cache`: a KV
policy's streaming heads keep sink + window entries). Right when every answer string occurs in the output (all or
nothing; RULER's ``string_match_all``, the share found, is ``extra["ruler_score"]``); an in-context example when the
output's first line is its answer word for word (:func:`is_exact`). The metric is accuracy, Wilson interval. Splits
``train`` and ``test`` are disjoint by answer (in-context tasks: by word).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pruning_core.core.errors import DataError
from pruning_core.evaluation.metrics import ACCURACY
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling.kv import kv_cache, kv_policy
from pruning_core.tasks.base import EvalState, Task
from pruning_core.tasks.batching import EncodedBatch, EncodedData, pad
from pruning_core.tasks.data import ruler, wordlists

DEFAULT_CONTEXT = 1024


def prompt_text(prompt: str, answer_prefix: str) -> str:
    """The model's input text: RULER's base-model template, the task's text then `` `` and the answer prefix."""
    return f"{prompt} {answer_prefix}"


def is_correct(text: str, answers: Sequence[str]) -> bool:
    """All or nothing: every answer occurs in the text (case-insensitive); :func:`ruler_score` is 1."""
    return ruler_score(text, answers) == 1.0


def ruler_score(text: str, answers: Sequence[str]) -> float:
    """RULER's ``string_match_all`` for one example: the share of the answers that occur in the text
    (case-insensitive), partial credit where a task asks for several (common words 10, frequent words 3)."""
    low = text.lower()
    return sum(a.lower() in low for a in answers) / len(answers)


def is_exact(text: str, answer: str) -> bool:
    """The first line of ``text`` is ``answer``, word for word (case and surrounding spaces aside)."""
    first = text.lstrip(" ").split("\n", 1)[0]
    return first.lower().split() == answer.lower().split()


def is_right(kind: ruler.Kind, text: str, answers: Sequence[str]) -> bool:
    """An in-context kind's :func:`is_exact` (one answer), else :func:`is_correct`: :func:`partial_score` is 1."""
    return partial_score(kind, text, answers) == 1.0


def partial_score(kind: ruler.Kind, text: str, answers: Sequence[str]) -> float:
    """An in-context kind's :func:`is_exact` as 0 or 1, else :func:`ruler_score`."""
    return float(is_exact(text, answers[0])) if kind.in_context else ruler_score(text, answers)


class LongContextTask(Task):
    """A RULER-style or in-context pattern task (``kind``) for decoder language models; exact-match accuracy."""

    task_type = "language_model"
    default_metric = ACCURACY.name

    def __init__(self, kind: str, *, seed: int = 0, words: wordlists.Words | None = None) -> None:
        self.kind = ruler.KINDS[kind]
        self.seed = seed
        self._words = words

        def loader(split: str, limit: int | None) -> list[dict]:
            return ruler.specs(kind, split, self.words, limit, seed)

        super().__init__(kind, loader, splits=ruler.SPLITS, default_split="test",
                         description=self.kind.description,
                         cache_token=lambda split: f"seed={seed}:words={hash(self.words)}")

    @property
    def words(self) -> wordlists.Words:
        if self._words is None:
            self._words = wordlists.load_words()
        return self._words

    def _max_length(self, loaded, max_length: int) -> int:
        context = Task._max_length(loaded, max_length)
        positions = getattr(loaded.model.config, "max_position_embeddings", None)
        if positions and context > int(positions):
            raise DataError(f"Model {loaded.model_id!r} has {positions} positions; a context of {context} tokens "
                            f"does not fit. Give --context {positions} or less.")
        if context <= self.kind.new_tokens + 16:
            raise DataError(f"A context of {context} tokens leaves no room for {self.name!r}'s question and "
                            f"{self.kind.new_tokens}-token answer; give --context 256 or more.")
        return context

    def encode(self, loaded, split: str, limit: int | None = None, max_length: int = DEFAULT_CONTEXT,
               progress=None) -> EncodedData:
        return super().encode(loaded, split, limit, max_length, progress)

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        tok = loaded.tokenizer
        budget = max_length - self.kind.new_tokens
        features, texts, labels = [], [], []
        for spec in examples:
            def ids_of(k: int) -> list[int]:
                return tok(prompt_text(*ruler.render(spec, self.words, k, max_length)))["input_ids"]
            k = ruler.fit(lambda k: len(ids_of(k)), budget, ruler.max_units(spec, self.words))
            ids = ids_of(k)
            first = tok(" " + spec["answers"][0], add_special_tokens=False)["input_ids"]
            features.append({"input_ids": ids})
            labels.append(int(first[0]))
            texts.append({"id": spec["id"], "answers": list(spec["answers"]), "filler": k, "tokens": len(ids)})
        eos = getattr(tok, "eos_token_id", None)
        return EncodedData(task=self, split=split, n_examples=len(features), fingerprint="", texts=texts,
                           references=None, features=features, labels=[1] * len(features),
                           lengths=[len(f["input_ids"]) for f in features],
                           specials={"first_answer_token": labels, "eos": eos, "context": max_length,
                                     "new_tokens": self.kind.new_tokens}, max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        rows = [data.features[i]["input_ids"] for i in idx]
        input_ids = pad(rows, 0)                                                         # [B, T] right-padded
        lens = torch.tensor([len(r) for r in rows])
        attention_mask = (torch.arange(input_ids.shape[1])[None, :] < lens[:, None]).long()
        first = torch.tensor([data.specials["first_answer_token"][i] for i in idx])      # [B]
        if device is not None:
            input_ids, attention_mask, first = input_ids.to(device), attention_mask.to(device), first.to(device)
        return EncodedBatch(inputs={"input_ids": input_ids, "attention_mask": attention_mask}, labels=first,
                            token_masks={"decoder_self": attention_mask}, n_examples=len(idx),
                            index=torch.tensor(list(idx), dtype=torch.long))

    def example_losses(self, loaded, batch, outputs) -> Tensor:
        """``[B]``: cross-entropy of the answer's first token at each prompt's last position (``outputs.logits``
        ``[B, T, V]`` of a right-padded batch: what a scorer differentiates)."""
        last = batch.inputs["attention_mask"].sum(-1) - 1                                  # [B]
        logits = outputs.logits[torch.arange(len(last), device=last.device), last]         # [B, V]
        return torch.nn.functional.cross_entropy(logits.float(), batch.labels, reduction="none")

    def forward_losses(self, loaded, batch, run):
        """Each example alone: prefill with the (policy's) cache, the loss, then greedy decoding from that cache."""
        policy = kv_policy.active_policy()
        ids, mask = batch.inputs["input_ids"], batch.inputs["attention_mask"]
        decoded, losses = [], []
        new_tokens = self.kind.new_tokens
        eos = getattr(loaded.tokenizer, "eos_token_id", None)
        one_line = self.kind.in_context
        for j in range(ids.shape[0]):
            row = ids[j, : int(mask[j].sum())][None]                                        # [1, T]
            cache = kv_cache.new_cache(loaded, policy)
            out = loaded.model(input_ids=row, past_key_values=cache, use_cache=True, logits_to_keep=1)
            step = out.logits[0, -1]                                                        # [V]
            losses.append(torch.nn.functional.cross_entropy(step.float()[None], batch.labels[j:j + 1]))
            tokens: list[int] = []
            for _ in range(new_tokens):
                nxt = int(step.argmax())
                if nxt == eos:
                    break
                tokens.append(nxt)
                if len(tokens) == new_tokens or (one_line and "\n" in loaded.tokenizer.decode([nxt])):
                    break
                out = loaded.model(input_ids=torch.tensor([[nxt]], device=row.device), past_key_values=cache,
                                   use_cache=True)
                step = out.logits[0, -1]
            decoded.append(loaded.tokenizer.decode(tokens, skip_special_tokens=True))
        return decoded, torch.stack(losses)

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        """1 when the decoded answer (``outputs``: one text per example) is right (:func:`is_right`), else 0."""
        for j, text in zip(batch.index.tolist(), outputs):
            score = partial_score(self.kind, text, data.texts[j]["answers"])
            state.predictions[j] = int(score == 1.0)                          # all or nothing
            state.extra.setdefault("answers", {})[j] = text
            state.extra.setdefault("ruler", {})[j] = score

    def summarise(self, data, state: EvalState) -> EvalResult:
        metric = self.metric
        value = metric.of(state.predictions, data.labels)
        answers, partial = state.extra.get("answers", {}), state.extra.get("ruler", {})
        scores = [partial.get(i, 0.0) for i in range(data.n_examples)]
        extra = {metric.name: value, "context": data.specials["context"],
                 "prompt_tokens": [t["tokens"] for t in data.texts],
                 "decoded": [answers.get(i, "") for i in range(data.n_examples)], "kind": self.kind.ruler_name,
                 "seed": self.seed, "ruler_scores": scores,
                 "ruler_score": sum(scores) / len(scores) if scores else None}
        policy = kv_policy.active_policy()
        if policy is not None:
            extra["kv_policy"] = {"streaming_kv_heads": policy.n_streaming, "kv_heads": policy.n_heads,
                                  "sink": policy.sink, "window": policy.window}
        return EvalResult(metric.name, value, state.mean_loss, data.n_examples, extra)

    def evaluate(self, loaded, data, mask=None, *, layer_cache=None, **kwargs) -> EvalResult:
        """:meth:`Task.evaluate` without the layer-input cache (each example runs its own prefill and decoding).
        Under :func:`pruning_core.modeling.kv.kv_policy.applied` the policy holds in the forward pass and the cache."""
        return super().evaluate(loaded, data, mask, layer_cache=None, **kwargs)


def long_context_task(kind: str) -> LongContextTask:
    return LongContextTask(kind)
