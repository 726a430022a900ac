"""Speech recognition (task type ``asr``): log-mel features in, transcript out; metric WER.

Examples are ``{"audio": WAV path, "text": what is spoken}`` (:mod:`pruning_core.tasks.data.speech`); features
are Whisper's log-mel spectrogram sized from the model's config (:func:`feature_extractor_for`). The
teacher-forced loss reads the prompt (``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` for a
multilingual Whisper) then the reference; ``decoder_input_ids`` come from real ids, so no -100 reaches the
embedding; loss per label token. Decoding is greedy step by step from the loss pass's encoder output
(:func:`greedy_rules`), at most :data:`BOUND` tokens an utterance; beam search with ``generate``. The metric
comes before the loss's output layer (``metric_first``). WER compares normalised texts
(:func:`~pruning_core.tasks.data.speech.normalize_transcript`); the BLEU of the same pair is in ``extra``.
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import torch
from torch import Tensor

from pruning_core.tasks.data.speech import RATE, normalize_transcript, read_wav
from pruning_core.core.errors import DataError
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.metrics import BLEU, WER
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling.inference.greedy import LengthBound, Rules, eos_of
from pruning_core.tasks.base import EvalState, Task, draft_record, register_task_type
from pruning_core.tasks.batching import (IGNORE, EncodedBatch, EncodedData, label_counts, label_losses,
                                         packed_label_losses, pad, target_forward)

LANGUAGE = "en"
HOP = 160                         # Whisper's STFT hop (10 ms at 16 kHz); frames = 2 x encoder positions


def feature_extractor_for(config):
    """A ``WhisperFeatureExtractor`` matching ``config`` (mel bins; window = 2 x max_source_positions frames)."""
    from transformers import WhisperFeatureExtractor

    frames = 2 * int(config.max_source_positions)
    seconds = frames * HOP / RATE
    if seconds != int(seconds):
        raise DataError(f"max_source_positions {config.max_source_positions} does not cover whole seconds of audio.")
    return WhisperFeatureExtractor(feature_size=int(config.num_mel_bins), sampling_rate=RATE, hop_length=HOP,
                                   chunk_length=int(seconds))


def language_kwargs(model, language: str = LANGUAGE) -> dict:
    """``generate`` arguments that fix language and task: for a multilingual Whisper (its generation config
    has ``lang_to_id``), ``{"language": ..., "task": "transcribe"}``; else none."""
    lang_to_id = getattr(getattr(model, "generation_config", None), "lang_to_id", None) or {}
    if not lang_to_id:
        return {}
    if f"<|{language}|>" not in lang_to_id:
        raise DataError(f"The model has no language token <|{language}|>; its languages: "
                        f"{', '.join(list(lang_to_id)[:10])} ...")
    return {"language": language, "task": "transcribe"}


def decoder_prompt(model, language: str = LANGUAGE) -> list[int]:
    """The ids the decoder starts from: start of transcript, then (multilingual Whisper) language and task,
    then no-timestamps when the generation config has it."""
    gen = getattr(model, "generation_config", None)
    prompt = [int(model.config.decoder_start_token_id)]
    if language_kwargs(model, language):
        prompt += [int(gen.lang_to_id[f"<|{language}|>"]), int(gen.task_to_id["transcribe"])]
    if getattr(gen, "no_timestamps_token_id", None) is not None:
        prompt.append(int(gen.no_timestamps_token_id))
    return prompt


# generation settings beyond the prompt, suppressed ids and no timestamps that change Whisper's greedy transcript (or
# make it decode again at other temperatures): a model whose generation config sets one decodes with ``generate``
_OTHER_SETTINGS = ("min_length", "min_new_tokens", "no_repeat_ngram_size", "bad_words_ids", "sequence_bias",
                   "repetition_penalty", "renormalize_logits", "forced_eos_token_id", "compression_ratio_threshold",
                   "logprob_threshold", "no_speech_threshold")

# greedy transcripts stop after this many tokens per second of audio (and a few more): speech runs at about 4 tokens
# a second, so only a transcript that repeats itself reaches it (docs/MODELS.md, the speech section)
BOUND = LengthBound(per=8.0, plus=16, unit="seconds of audio")


def greedy_rules(model, language: str = LANGUAGE) -> Rules | None:
    """The rules under which :func:`~pruning_core.modeling.inference.greedy.greedy_decode` gives ``model.generate``'s greedy
    transcript as :meth:`SpeechRecognitionTask.generate_kwargs` asks for it (the prompt of :func:`decoder_prompt`,
    the generation config's suppressed ids, no timestamps); None where the generation config asks for more."""
    gen = getattr(model, "generation_config", None)
    if gen is None or getattr(model, "proj_out", None) is None:
        return None
    if any(getattr(gen, name, None) not in (None, 1.0) for name in _OTHER_SETTINGS):
        return None
    no_timestamps = getattr(gen, "no_timestamps_token_id", None)
    return Rules(prompt=tuple(decoder_prompt(model, language)), eos=eos_of(model),
                 suppressed=tuple(int(i) for i in gen.suppress_tokens or ()),
                 first_suppressed=tuple(int(i) for i in gen.begin_suppress_tokens or ()),
                 below=None if no_timestamps is None else int(no_timestamps) + 1)


@register_task_type
class SpeechRecognitionTask(Task):
    """Speech recognition: transcripts of audio, WER (lower is better); loss per transcript token."""

    task_type = "asr"
    default_metric = WER.name
    beam_search = True
    metric_first = True
    language = LANGUAGE

    def _specials(self, loaded) -> dict:
        model = loaded.model
        eos = getattr(model.config, "eos_token_id", None)
        pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else eos
        return {"prompt": tuple(decoder_prompt(model, self.language)), "eos": int(eos), "pad": int(pad_id),
                "multilingual": bool(language_kwargs(model, self.language))}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        for i, ex in enumerate(examples):
            if "audio" not in ex or "text" not in ex:
                raise DataError(f"Task {self.name!r} example {i} of {split!r} lacks 'audio' or 'text'.")
        specials = self._specials(loaded)
        extractor = feature_extractor_for(loaded.model.config)
        prompt, eos = list(specials["prompt"]), specials["eos"]
        features = []
        for ex in examples:
            audio = read_wav(ex["audio"])
            mel = extractor(audio, sampling_rate=RATE, return_tensors="pt").input_features[0]   # [mels, frames]
            text_ids = loaded.tokenizer(" " + ex["text"].strip(), add_special_tokens=False)["input_ids"]
            text_ids = text_ids[:max(1, max_length - len(prompt) - 1)]
            ids = prompt + list(text_ids) + [eos]
            labels = [IGNORE] * (len(prompt) - 1) + ids[len(prompt):]
            features.append({"input_features": mel, "decoder_input_ids": ids[:-1], "labels": labels,
                             "seconds": audio.size / RATE})
        references = [normalize_transcript(ex["text"]) for ex in examples]
        return EncodedData(task=self, split=split, n_examples=len(examples), fingerprint="", texts=examples,
                           references=references, features=features, labels=None,
                           lengths=[len(f["labels"]) for f in features], specials=specials, max_length=max_length)

    def with_encoder_outputs(self, loaded, data: EncodedData, batch_size: int = 4) -> EncodedData:
        """A copy of ``data`` whose batches carry the unmasked encoder's output ``[B, positions, d_model]``
        instead of the features, so that evaluating masks that keep every encoder head skips the encoder.

        Exact for such masks (the encoder does not depend on decoder or cross-attention heads);
        :meth:`evaluate` refuses a mask removing an ``encoder_self`` head on this data. Gradient scoring
        needs the features (it would see no encoder heads): score on the original data.
        """
        hidden: dict[int, Tensor] = {}
        with torch.inference_mode():
            for batch in data.batches(batch_size, device=loaded.device):
                out = loaded.model.get_encoder()(batch.inputs["input_features"]).last_hidden_state
                hidden.update({j: h.cpu() for j, h in zip(batch.index.tolist(), out)})
        features = [dict(f, encoder_hidden=hidden[i]) for i, f in enumerate(data.features)]
        return replace(data, features=features, specials=dict(data.specials, encoder_fixed=True),
                       fingerprint=f"{data.fingerprint}:encoder-outputs")

    def evaluate(self, loaded, data: EncodedData, mask: HeadMask | None = None, **kwargs) -> EvalResult:
        if data.specials.get("encoder_fixed") and mask is not None and \
                any(v == 0 for row in mask.kinds.get("encoder_self", ()) for v in row):
            raise DataError("This data carries precomputed encoder outputs, but the mask removes encoder_self heads; "
                            "evaluate that mask on the data from task.encode (with audio features).")
        return super().evaluate(loaded, data, mask, **kwargs)

    def _collate(self, data, idx, device) -> EncodedBatch:
        feats = [data.features[i] for i in idx]
        if "encoder_hidden" in feats[0]:
            return self._collate_encoded(data, feats, idx, device)
        mel = torch.stack([f["input_features"] for f in feats])                     # [B, mels, frames]
        frames = (mel.shape[-1] - 1) // 2 + 1                                        # after the stride-2 convolution
        return self._batch(feats, idx, device, {"input_features": mel}, frames, data.specials["pad"])

    def _collate_encoded(self, data, feats, idx, device) -> EncodedBatch:
        hidden = torch.stack([f["encoder_hidden"] for f in feats])                  # [B, positions, d_model]
        return self._batch(feats, idx, device, {"encoder_outputs": hidden}, hidden.shape[1], data.specials["pad"])

    @staticmethod
    def _batch(feats, idx, device, encoder_inputs: dict, frames: int, pad_id: int) -> EncodedBatch:
        decoder_input_ids = pad([f["decoder_input_ids"] for f in feats], pad_id)     # [B, T_dec]
        labels = pad([f["labels"] for f in feats], IGNORE)                           # [B, T_dec]
        lens = torch.tensor([len(f["decoder_input_ids"]) for f in feats])
        decoder_mask = (torch.arange(decoder_input_ids.shape[1])[None, :] < lens[:, None]).long()
        inputs = {**encoder_inputs, "decoder_input_ids": decoder_input_ids}
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
            labels, decoder_mask = labels.to(device), decoder_mask.to(device)
        if "encoder_outputs" in inputs:
            inputs["encoder_outputs"] = (inputs["encoder_outputs"],)
        encoder_mask = torch.ones(len(idx), frames, dtype=torch.long, device=labels.device)
        return EncodedBatch(inputs=inputs, labels=labels,
                            token_masks={"encoder_self": encoder_mask, "decoder_self": decoder_mask,
                                         "cross": decoder_mask},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def example_losses(self, loaded, batch, outputs) -> Tensor:
        """``[B]``: the cross-entropy of ``outputs.logits`` [B, T_dec, V] over each row's transcript tokens
        (and end-of-text), summed (``[N, V]``: the target positions alone, as
        :func:`pruning_core.modeling.inference.packed_logits.only_at` gives them)."""
        if outputs.logits.dim() == 2:
            return packed_label_losses(outputs.logits, batch.labels)
        return label_losses(outputs.logits, batch.labels)

    def forward_deferred(self, loaded, batch, run):
        """The output head scores the transcript positions alone, and for Whisper only once the losses are asked for
        (:func:`pruning_core.tasks.batching.target_forward`)."""
        return target_forward(self, loaded, batch, run)

    def example_weights(self, batch) -> Tensor:
        return label_counts(batch.labels)

    def generate_kwargs(self, loaded, data: EncodedData, beams: int) -> dict:
        """Arguments of ``model.generate`` for this task's decoding (language and task for multilingual Whisper)."""
        room = int(getattr(loaded.model.config, "max_target_positions", 448)) - len(data.specials["prompt"])
        kw = dict(num_beams=beams, do_sample=False, max_new_tokens=max(1, min(data.max_length, room)))
        if data.specials["multilingual"]:
            kw.update(language_kwargs(loaded.model, self.language))
        no_timestamps = getattr(loaded.model.generation_config, "no_timestamps_token_id", None)
        if no_timestamps is not None:
            kw["logits_processor"] = no_timestamps_processor(int(no_timestamps) + 1)
        return kw

    def prediction_inputs(self, outputs, last: bool = True):
        """Decoding reads the encoder's output of the teacher-forced pass, not its logits; and of the last batch the
        cross-attention keys and values that pass projected (about 37 MB an utterance for Whisper-base: one batch's
        at a time)."""
        cache = getattr(outputs, "past_key_values", None) if last else None
        return SimpleNamespace(encoder_last_hidden_state=outputs.encoder_last_hidden_state,
                               past_key_values=cache)

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        """Transcribe the batch under the mask already in place, from the encoder output of the teacher-forced pass.

        Greedy (``beams`` 1): step by step (:mod:`pruning_core.modeling.inference.greedy`, the tokens of ``generate`` under
        :func:`greedy_rules`), each utterance within :data:`BOUND` of its audio's length; beam search, and a model
        whose generation config asks for more, use ``generate``.
        """
        from transformers.modeling_outputs import BaseModelOutput

        kwargs = self.generate_kwargs(loaded, data, state.options["beams"])
        rules = greedy_rules(loaded.model, self.language) if state.options["beams"] == 1 else None
        if rules is not None:
            seconds = torch.tensor([data.features[j]["seconds"] for j in batch.index.tolist()])       # [B]
            generated = self.greedy_tokens(loaded, batch, state, None, None, rules=rules,
                                           max_new_tokens=BOUND.tokens(seconds, kwargs["max_new_tokens"]),
                                           encoder_hidden=outputs.encoder_last_hidden_state,
                                           cross=_cross_cache(getattr(outputs, "past_key_values", None)))
            generated = [r[:-1] if r and r[-1] == rules.eos else r for r in generated]    # as generate drops it
            state.extra["bound"] = BOUND.describe()
        else:
            encoded = BaseModelOutput(last_hidden_state=outputs.encoder_last_hidden_state)
            generated = loaded.model.generate(encoder_outputs=encoded, **kwargs)
        texts = loaded.tokenizer.batch_decode(generated, skip_special_tokens=True)
        raw = state.extra.setdefault("raw", {})
        for j, text in zip(batch.index.tolist(), texts):
            raw[j] = text.strip()
            state.predictions[j] = normalize_transcript(text)

    def summarise(self, data, state: EvalState) -> EvalResult:
        """WER (or the task's metric) of the normalised transcripts; BLEU beside it; a few samples."""
        hyps = state.predictions
        metric = self.metric
        value = metric.of(hyps, data.references, state.loss, state.loss_weight)
        raw = state.extra.get("raw", {})
        extra = {metric.name: value, "target_tokens": state.loss_weight, "beams": state.options["beams"],
                 "bleu_transcript_vs_spoken_text": BLEU.of(hyps, data.references),
                 "normalisation": "lower case, punctuation removed (data.speech.normalize_transcript)",
                 "audio_seconds": round(sum(f["seconds"] for f in data.features), 2),
                 "decoding": {"method": "greedy" if state.options["beams"] == 1 else "beam search",
                              "bound": state.extra.get("bound"), **draft_record(state)},
                 "samples": [{"audio": data.texts[j]["audio"], "hypothesis": raw.get(j, hyps[j]),
                              "reference": data.texts[j]["text"]} for j in range(min(3, data.n_examples))]}
        return EvalResult(metric.name, value, state.mean_loss, data.n_examples, extra)


def _cross_cache(cache):
    """The cross-attention part of a teacher-forced pass's key/value cache, or None."""
    return getattr(cache, "cross_attention_cache", None)


def no_timestamps_processor(first: int):
    """A logits processor list that forbids Whisper's timestamp tokens (ids from ``first`` on).

    The decoder prompt asks for no timestamps and an intact model obeys, but a pruned one can emit them;
    Whisper's ``generate`` then treats the transcript as segments, moves its seek position by the
    timestamp and loops for the rest of the audio, which, decoding from encoder outputs (no
    ``input_features``), ends in a ``TypeError`` inside transformers. A transcript has no use for them.
    """
    from transformers import LogitsProcessor, LogitsProcessorList

    class NoTimestamps(LogitsProcessor):
        def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
            scores[:, first:] = float("-inf")
            return scores

    return LogitsProcessorList([NoTimestamps()])
