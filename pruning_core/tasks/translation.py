"""Sequence-to-sequence translation: teacher-forced loss per target token, BLEU of decoded outputs."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import Tensor

from pruning_core.core.errors import DataError
from pruning_core.evaluation.metrics import BLEU, CHRF
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling.inference.greedy import LengthBound, as_generate_output, supports_greedy
from pruning_core.tasks.base import EvalState, Task, draft_record, register_task_type
from pruning_core.tasks.batching import (
    IGNORE,
    EncodedBatch,
    EncodedData,
    collate_classification,
    label_counts,
    label_losses,
    packed_label_losses,
    pad,
    target_forward,
)


# greedy translations stop after twice the source's tokens and a few more: only a translation that repeats itself
# gets there (docs/MODELS.md, the translation section)
BOUND = LengthBound(per=2.0, plus=10, unit="source tokens")


@register_task_type
class TranslationTask(Task):
    """Sequence-to-sequence translation; metric corpus BLEU (sacrebleu), loss per target token."""

    task_type = "translation"
    default_metric = BLEU.name
    beam_search = True
    metric_first = True

    def _specials(self, loaded) -> dict:
        cfg = loaded.model.config
        gen = getattr(loaded.model, "generation_config", None)
        start = getattr(cfg, "decoder_start_token_id", None)
        if start is None and gen is not None:
            start = gen.decoder_start_token_id
        pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else loaded.tokenizer.pad_token_id
        if start is None:
            start = pad_id
        return {"decoder_start": int(start), "decoder_pad": int(pad_id)}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        for i, ex in enumerate(examples):
            if "source" not in ex or "target" not in ex:
                raise DataError(f"Task {self.name!r} example {i} of {split!r} lacks 'source' or 'target'.")
        tok = loaded.tokenizer
        enc = tok([e["source"] for e in examples], text_target=[e["target"] for e in examples],
                  truncation=True, max_length=max_length)
        features = [{"input_ids": list(enc["input_ids"][i]), "labels": list(enc["labels"][i])}
                    for i in range(len(examples))]
        specials = self._specials(loaded)
        specials["pad"] = tok.pad_token_id if tok.pad_token_id is not None else specials["decoder_pad"]
        return EncodedData(task=self, split=split, n_examples=len(examples), fingerprint="", texts=examples,
                           references=[e["target"] for e in examples], features=features, labels=None,
                           lengths=[len(f["input_ids"]) + len(f["labels"]) for f in features],
                           specials=specials, max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        feats = [data.features[i] for i in idx]
        inputs = collate_classification(feats, data.specials["pad"])
        labels = pad([f["labels"] for f in feats], IGNORE)                        # [B, T_dec]
        decoder_input_ids = torch.full_like(labels, data.specials["decoder_start"])
        decoder_input_ids[:, 1:] = labels[:, :-1]                                 # shift right
        decoder_input_ids[decoder_input_ids == IGNORE] = data.specials["decoder_pad"]
        inputs["decoder_input_ids"] = decoder_input_ids
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
            labels = labels.to(device)
        target = (labels != IGNORE).long()
        return EncodedBatch(inputs=inputs, labels=labels,
                            token_masks={"encoder_self": inputs["attention_mask"], "decoder_self": target,
                                         "cross": target},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def example_losses(self, loaded, batch, outputs) -> Tensor:
        """``[B]``: the cross-entropy of ``outputs.logits`` [B, T_dec, V] over each row's target tokens, summed
        (``[N, V]``: the target positions alone, as :func:`pruning_core.modeling.inference.packed_logits.only_at` gives them)."""
        if outputs.logits.dim() == 2:
            return packed_label_losses(outputs.logits, batch.labels)
        return label_losses(outputs.logits, batch.labels)

    def forward_deferred(self, loaded, batch, run):
        """The output head scores the target positions alone, the loss reads nothing else: a chunk of positions at
        a time for a model whose output layer is known (:func:`pruning_core.modeling.inference.packed_logits.output_layer`;
        that projection, most of a teacher-forced pass, waits until the losses are asked for), else as packed
        ``[N, V]`` logits."""
        return target_forward(self, loaded, batch, run)

    def example_weights(self, batch) -> Tensor:
        return label_counts(batch.labels)

    def prediction_inputs(self, outputs, last: bool = True):
        """Decoding reads the encoder's output of the teacher-forced pass, nothing else (not its logits)."""
        return SimpleNamespace(encoder_last_hidden_state=getattr(outputs, "encoder_last_hidden_state", None))

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        """Decode the batch (greedy when ``beams`` is 1) under the mask already in place.

        Greedy decoding reuses the encoder output of the teacher-forced pass (``outputs``) and runs step by step
        (:mod:`pruning_core.modeling.inference.greedy`), each row within :data:`BOUND` of its source's length; beam search, and a
        model that decoder does not cover, use ``generate`` (up to ``max_length``).
        """
        # the decoder's positions bound the output: start token + new tokens <= max positions
        max_new = min(data.max_length, getattr(loaded.model.config, "max_position_embeddings", 1 << 20) - 1)
        inputs = batch.inputs
        shortlist = self.shortlist_of(loaded, state.options)
        if state.options["beams"] == 1 and supports_greedy(loaded.model):
            allowed = None if shortlist is None else shortlist.allowed(
                inputs["input_ids"], inputs["attention_mask"], loaded.model.config.vocab_size)
            state.extra["shortlist"] = None if shortlist is None else shortlist.describe()
            state.extra["bound"] = BOUND.describe()
            bound = BOUND.tokens(inputs["attention_mask"].sum(1).cpu(), max_new)                    # [B]
            generated = as_generate_output(loaded.model, self.greedy_tokens(
                loaded, batch, state, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=bound,
                allowed=allowed, encoder_hidden=getattr(outputs, "encoder_last_hidden_state", None)))
        else:
            generated = loaded.model.generate(
                input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                num_beams=state.options["beams"], do_sample=False, max_new_tokens=max_new)
        texts = loaded.tokenizer.batch_decode(generated, skip_special_tokens=True)
        for j, text in zip(batch.index.tolist(), texts):
            state.predictions[j] = text.strip()

    @staticmethod
    def shortlist_of(loaded, options: dict):
        """The vocabulary shortlist decoding uses: the model's (if it ships one) unless ``options["shortlist"]`` is
        False; only greedy decoding uses one (beam search decodes over the whole vocabulary)."""
        if options["beams"] != 1 or not options.get("shortlist", True):
            return None
        return getattr(loaded, "shortlist", None)

    def summarise(self, data, state: EvalState) -> EvalResult:
        """The task's metric of the decoded texts, and chrF beside it in ``extra`` (named in ``extra["beside"]``;
        its interval on request: :func:`pruning_core.evaluation.significance.beside_intervals`, so a dashboard
        click pays for no second bootstrap); a few samples in ``extra`` for showing."""
        hyps = state.predictions
        metric = self.metric
        value = metric.of(hyps, data.references, state.loss, state.loss_weight)
        extra = {metric.name: value, CHRF.name: CHRF.of(hyps, data.references, state.loss, state.loss_weight),
                 "beside": [CHRF.name],
                 "target_tokens": state.loss_weight, "beams": state.options["beams"],
                 "decoding": {"method": "greedy" if state.options["beams"] == 1 else "beam search",
                              "shortlist": state.extra.get("shortlist"), "bound": state.extra.get("bound"),
                              **draft_record(state)},
                 "samples": [{"source": data.texts[j]["source"], "hypothesis": hyps[j],
                              "reference": data.references[j]} for j in range(min(3, data.n_examples))]}
        return EvalResult(metric.name, value, state.mean_loss, data.n_examples, extra)
