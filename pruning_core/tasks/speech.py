"""Speech recognition (task type ``asr``): log-mel features in, transcript out; metric WER.

Examples are ``{"audio": WAV path, "text": what is spoken}`` (:mod:`pruning_core.data.speech`).

- Features: Whisper's log-mel spectrogram (:func:`feature_extractor_for`: ``WhisperFeatureExtractor``
  sized from the model's config: mel bins, and the window the encoder's positions cover, 30 s for
  Whisper-base), ``input_features`` ``[B, mels, frames]``.
- Teacher-forced loss: the decoder reads the prompt (start of transcript, language, task, no
  timestamps: ``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` for a multilingual
  Whisper, the start token alone otherwise), then the reference tokenised with a leading space, as
  Whisper writes it. ``decoder_input_ids`` are built here from real ids (padding = end-of-text), never
  from labels, so no -100 reaches the embedding; labels are the next tokens with the prompt's own
  predictions ignored (-100), ending with end-of-text. Loss per label token.
- Decoding: ``generate`` (greedy, or beam search with ``beams`` > 1) in the task's language, transcribe.
- Metric: WER (lower is better) of the transcript against the spoken text, both normalised
  (:func:`~pruning_core.data.speech.normalize_transcript`: lower case, no punctuation); the BLEU of the
  same pair is reported beside it in ``extra["bleu_transcript_vs_spoken_text"]``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.speech import RATE, normalize_transcript, read_wav
from ..errors import DataError
from ..metrics import BLEU, WER
from ..results import EvalResult
from .base import EvalState, Task, register_task_type
from .batching import IGNORE, EncodedBatch, EncodedData, pad

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


@register_task_type
class SpeechRecognitionTask(Task):
    """Speech recognition: transcripts of audio, WER (lower is better); loss per transcript token."""

    task_type = "asr"
    default_metric = WER.name
    beam_search = True
    language = "en"

    def _specials(self, loaded) -> dict:
        model = loaded.model
        gen = getattr(model, "generation_config", None)
        start = getattr(model.config, "decoder_start_token_id", None)
        eos = getattr(model.config, "eos_token_id", None)
        pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else eos
        prompt = [int(start)]
        lang_to_id = getattr(gen, "lang_to_id", None) or {}
        if lang_to_id:                                  # multilingual Whisper: language and task tokens
            lang = f"<|{self.language}|>"
            if lang not in lang_to_id:
                raise DataError(f"The model has no language token {lang}; its languages: {', '.join(list(lang_to_id)[:10])} ...")
            prompt += [int(lang_to_id[lang]), int(gen.task_to_id["transcribe"])]
        if getattr(gen, "no_timestamps_token_id", None) is not None:
            prompt.append(int(gen.no_timestamps_token_id))
        return {"prompt": tuple(prompt), "eos": int(eos), "pad": int(pad_id), "multilingual": bool(lang_to_id)}

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

    def _collate(self, data, idx, device) -> EncodedBatch:
        feats = [data.features[i] for i in idx]
        mel = torch.stack([f["input_features"] for f in feats])                     # [B, mels, frames]
        decoder_input_ids = pad([f["decoder_input_ids"] for f in feats], data.specials["pad"])   # [B, T_dec]
        labels = pad([f["labels"] for f in feats], IGNORE)                           # [B, T_dec]
        lens = torch.tensor([len(f["decoder_input_ids"]) for f in feats])
        decoder_mask = (torch.arange(decoder_input_ids.shape[1])[None, :] < lens[:, None]).long()
        frames = (mel.shape[-1] - 1) // 2 + 1                                        # after the stride-2 convolution
        inputs = {"input_features": mel, "decoder_input_ids": decoder_input_ids}
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
            labels, decoder_mask = labels.to(device), decoder_mask.to(device)
        encoder_mask = torch.ones(len(idx), frames, dtype=torch.long, device=labels.device)
        return EncodedBatch(inputs=inputs, labels=labels,
                            token_masks={"encoder_self": encoder_mask, "decoder_self": decoder_mask,
                                         "cross": decoder_mask},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def loss_sum(self, loaded, batch, outputs) -> Tensor:
        """Cross-entropy of ``outputs.logits`` [B, T_dec, V] over the transcript tokens (and end-of-text), summed."""
        logits = outputs.logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.reshape(-1),
                               ignore_index=IGNORE, reduction="sum")

    def loss_weight(self, batch) -> int:
        return int((batch.labels != IGNORE).sum())

    def generate_kwargs(self, loaded, data: EncodedData, beams: int) -> dict:
        """Arguments of ``model.generate`` for this task's decoding (language and task for multilingual Whisper)."""
        room = int(getattr(loaded.model.config, "max_target_positions", 448)) - len(data.specials["prompt"])
        kw = dict(num_beams=beams, do_sample=False, max_new_tokens=max(1, min(data.max_length, room)))
        if data.specials["multilingual"]:
            kw.update(language=self.language, task="transcribe")
        return kw

    def predict_batch(self, loaded, data, batch, outputs, state: EvalState) -> None:
        """Transcribe the batch (greedy when ``beams`` is 1) under the mask already in place."""
        from transformers.modeling_outputs import BaseModelOutput

        # the encoder already ran (under the same mask) in the teacher-forced pass: decode from its output
        encoded = BaseModelOutput(last_hidden_state=outputs.encoder_last_hidden_state)
        generated = loaded.model.generate(encoder_outputs=encoded,
                                          **self.generate_kwargs(loaded, data, state.options["beams"]))
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
                 "samples": [{"audio": data.texts[j]["audio"], "hypothesis": raw.get(j, hyps[j]),
                              "reference": data.texts[j]["text"]} for j in range(min(3, data.n_examples))]}
        return EvalResult(metric.name, value, state.mean_loss, data.n_examples, extra)
