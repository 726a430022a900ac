"""Attention maps of one spoken sentence for a speech-recognition model (the Attention page with Whisper).

The sentence is spoken by espeak-ng (:func:`pruning_core.tasks.data.speech.synthesize`), the dense model
transcribes it (greedy), and both the dense and the masked model are run teacher-forced on the prompt
plus that transcript with ``output_attentions=True``, so their token grids line up (as for translation
in :mod:`.attention_maps`). Encoder tokens are audio frames (20 ms each after Whisper's stride-2
convolution); a 30 s window has 1,500 of them, far too many to draw, so only the frames that hold the
speech are kept and pooled into at most ``max_bins`` bins: for each kept query bin the mean over its
frames, for each key bin the sum, so a cross-attention row shows how much of a token's attention falls
on each stretch of the speech (a row sums to less than 1 when some attention goes to the trailing silence).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from pruning_core.analysis.attention_run import AttentionRun, Prediction, maps_of, tokens_of, zero_removed
from pruning_core.tasks.data.speech import RATE, synthesize
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.tasks.speech import decoder_prompt, feature_extractor_for, language_kwargs

FRAME_SECONDS = 0.02         # one encoder position
MAX_BINS = 48


def _pool(maps: dict[str, tuple[np.ndarray, ...]], frames: int, bin_size: int) -> dict[str, tuple[np.ndarray, ...]]:
    """Cut encoder axes to the first ``frames`` positions and pool them by ``bin_size`` (queries: mean, keys: sum)."""
    bins = math.ceil(frames / bin_size)

    def keys(a: np.ndarray) -> np.ndarray:              # [..., T_k] -> [..., bins]
        a = a[..., :frames]
        padded = np.zeros(a.shape[:-1] + (bins * bin_size,), dtype=a.dtype)
        padded[..., :frames] = a
        return padded.reshape(a.shape[:-1] + (bins, bin_size)).sum(-1)

    def queries(a: np.ndarray) -> np.ndarray:           # [H, T_q, K] -> [H, bins, K]
        a = a[:, :frames]
        out = np.stack([a[:, i * bin_size:(i + 1) * bin_size].mean(1) for i in range(bins)], axis=1)
        return out

    out = {}
    for kind, layers in maps.items():
        if kind == "encoder_self":
            out[kind] = tuple(queries(keys(a)) if a.size else a for a in layers)
        elif kind == "cross":
            out[kind] = tuple(keys(a) if a.size else a for a in layers)
        else:
            out[kind] = layers
    return out


def run_speech_attention(loaded, text: str, mask: HeadMask | None = None, *, max_new_tokens: int = 32,
                         max_bins: int = MAX_BINS) -> AttentionRun:
    """Speak ``text``, transcribe it, and return the dense and masked attention maps (encoder axes pooled).

    Raises:
        HeadpruneError: empty text, a mask for another model, a model without attention maps, or no espeak-ng.
    """
    started = time.perf_counter()
    text = (text or "").strip()
    if not text:
        raise HeadpruneError("Type a sentence first: it is spoken by espeak-ng and transcribed.")
    mask = mask or HeadMask.full(loaded.layout)
    mask.check_fits(loaded.layout)
    model, tok = loaded.model, loaded.tokenizer
    if getattr(model.config, "_attn_implementation", "eager") not in (None, "eager"):
        raise HeadpruneError("The model was not loaded with attn_implementation='eager', which attention maps need.")
    audio = synthesize(text)
    features = feature_extractor_for(model.config)(audio, sampling_rate=RATE, return_tensors="pt").input_features
    features = features.to(loaded.device)
    prompt = decoder_prompt(model)
    gen = dict(max_new_tokens=max_new_tokens, num_beams=1, do_sample=False, **language_kwargs(model))
    with torch.inference_mode():
        dense_ids = _newtokens_of(model.generate(features, **gen)[0].tolist(), prompt)
        with apply_mask(loaded, mask):
            pruned_ids = _newtokens_of(model.generate(features, **gen)[0].tolist(), prompt)
        decoder_ids = torch.tensor([prompt + dense_ids], device=loaded.device)
        forward = dict(input_features=features, decoder_input_ids=decoder_ids, output_attentions=True)
        dense_maps = maps_of(loaded, model(**forward))
        with apply_mask(loaded, mask):
            pruned_maps = zero_removed(maps_of(loaded, model(**forward)), mask)
    positions = int(model.config.max_source_positions)
    frames = min(positions, max(1, math.ceil(audio.size / RATE / FRAME_SECONDS)))
    bin_size = max(1, math.ceil(frames / max_bins))
    bins = math.ceil(frames / bin_size)
    encoder_tokens = tuple(f"{i * bin_size * FRAME_SECONDS:.2f}s" for i in range(bins))
    notes = (f"The sentence was spoken by espeak-ng ({audio.size / RATE:.1f} s of audio) and transcribed by the full "
             "model; decoder and cross-attention maps of both models are computed on that transcript "
             "(teacher-forced) so their token grids line up.",
             f"Encoder tokens are audio frames of {1000 * FRAME_SECONDS:.0f} ms, pooled into {bins} bins of "
             f"{1000 * bin_size * FRAME_SECONDS:.0f} ms over the speech ({frames} of {positions} frames; the rest "
             "of Whisper's 30 s window is silence): a cross-attention row shows how much of a token's attention "
             "falls on each stretch of speech and sums to less than 1 when some goes to the silence.")
    return AttentionRun(text=text, encoder_tokens=encoder_tokens, decoder_tokens=tokens_of(tok, prompt + dense_ids),
                        sentence_b_start=None, dense=_pool(dense_maps, frames, bin_size),
                        pruned=_pool(pruned_maps, frames, bin_size), mask=mask,
                        dense_prediction=Prediction(tok.decode(dense_ids, skip_special_tokens=True).strip()),
                        pruned_prediction=Prediction(tok.decode(pruned_ids, skip_special_tokens=True).strip()),
                        truncated=False, seconds=time.perf_counter() - started, model_id=str(loaded.model_id),
                        notes=notes, audio=audio, audio_rate=RATE)


def _newtokens_of(ids: list[int], prompt: list[int]) -> list[int]:
    """Generated ids without the decoder prompt (``generate`` may or may not return it)."""
    return ids[len(prompt):] if ids[:len(prompt)] == prompt else ids
