"""Probe inputs and their attention maps, as :class:`~.base.ProbeSequence` per kind.

- ``text``: natural sentences (the task's texts), each cut to ``max_tokens`` tokens, one forward pass
  per batch. Encoder-only models read the sentence; decoder-only models read it causally;
  encoder-decoder models read it in the encoder and, teacher-forced, in the decoder (translation: the
  same sentence as the decoder's text; speech: the sentence spoken by espeak-ng in the encoder and its
  transcript in the decoder, as the speech task scores it).
- ``repeated``: [BOS] + R + R with R ``n`` uniform random non-special token ids (seeded): the input of
  decoder-only models, or the decoder's text of an encoder-decoder model (whose encoder then reads
  only its special tokens, or a second of silence for speech).

Maps come from :func:`pruning_core.analysis.attention_maps.batch_maps` (eager attention, the model only read).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from pruning_core.analysis.attention_maps import batch_maps
from pruning_core.analysis.roles.base import ProbeSequence

BatchItems = list[dict[str, tuple[np.ndarray, np.ndarray | None, bool]]]   # per item: kind -> (q ids, k ids, causal)


def max_positions(config) -> int | None:
    """The longest sequence the model's position embeddings take (decoder side for encoder-decoders)."""
    for name in ("max_target_positions", "n_positions", "max_position_embeddings"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def special_ids(tok) -> set[int]:
    return {int(i) for i in getattr(tok, "all_special_ids", ()) or ()}


def _pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[B, T]`` ids and the ``[B, T]`` attention mask (1 = real token)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[i, :len(r)] = 1
    return ids, mask


def _pad_id(loaded) -> int:
    tok, cfg = loaded.tokenizer, loaded.model.config
    for v in (tok.pad_token_id, getattr(cfg, "pad_token_id", None), tok.eos_token_id):
        if isinstance(v, int):
            return v
    return 0


def _decoder_start(loaded) -> list[int]:
    """The ids a teacher-forced decoder text starts with (speech: the transcription prompt)."""
    if loaded.task_type == "asr":
        from pruning_core.tasks.speech import decoder_prompt
        return decoder_prompt(loaded.model)
    start = getattr(loaded.model.config, "decoder_start_token_id", None)
    return [int(start if start is not None else _pad_id(loaded))]


def _speech_encoder(loaded, audios: Sequence[np.ndarray]) -> tuple:
    """Whisper encoder outputs of ``audios`` (computed without attention maps: 1,500 x 1,500 per head)."""
    from pruning_core.tasks.data.speech import RATE
    from pruning_core.tasks.speech import feature_extractor_for
    feats = feature_extractor_for(loaded.model.config)(list(audios), sampling_rate=RATE, return_tensors="pt")
    with torch.inference_mode():
        hidden = loaded.model.get_encoder()(feats.input_features.to(loaded.device, loaded.dtype)).last_hidden_state
    return (hidden,)


def _run(loaded, inputs: dict, items: BatchItems, *, specials: set[int], marks: dict | None = None,
         frequency: dict | None = None, item_marks: Sequence[dict] | None = None) -> list[dict[str, ProbeSequence]]:
    """Forward ``inputs`` once; cut each item's maps to its own query and key lengths. Kinds the model has no
    heads of (an SSRU decoder's ``decoder_self``) are left out. ``item_marks``: marks of each item, added to
    ``marks``."""
    kinds = sorted({k for item in items for k in item if k in loaded.layout.kinds})
    maps = batch_maps(loaded, {k: v.to(loaded.device) if torch.is_tensor(v) else v for k, v in inputs.items()},
                      kinds)
    out = []
    for b, item in enumerate(items):
        seqs = {}
        for kind, (q_ids, k_ids, causal) in item.items():
            if kind not in maps:
                continue
            tq = len(q_ids)
            tk = len(k_ids) if k_ids is not None else None
            layers = tuple(a[b, :, :tq, :tk].numpy() if a.shape[1] else np.zeros((0, tq, tk or 0), np.float32)
                           for a in maps[kind])
            special = None if k_ids is None else np.isin(k_ids, list(specials))
            own = {**(marks or {}), **(item_marks[b] if item_marks else {})}
            seqs[kind] = ProbeSequence(layers, q_ids, k_ids, causal, special, own, frequency)
        out.append(seqs)
    return out


def text_sequences(loaded, texts: Sequence[str], *, max_tokens: int = 48, batch_size: int = 8,
                   frequency: dict | None = None) -> Iterator[dict[str, ProbeSequence]]:
    """The ``text`` probe: per sentence, kind -> :class:`ProbeSequence` (see the module docstring)."""
    tok = loaded.tokenizer
    limit = min(max_tokens, (max_positions(loaded.model.config) or max_tokens) - 4)
    specials, pad = special_ids(tok), _pad_id(loaded)
    for s in range(0, len(texts), batch_size):
        chunk = list(texts[s:s + batch_size])
        if loaded.task_type in ("classification", "language_model"):
            rows = [tok(t, truncation=True, max_length=limit)["input_ids"][:limit] for t in chunk]
            ids, mask = _pad(rows, pad)
            kind, causal = ("encoder_self", False) if loaded.task_type == "classification" else ("decoder_self", True)
            items = [{kind: (np.asarray(r), np.asarray(r), causal)} for r in rows]
            inputs = {"input_ids": ids, "attention_mask": mask}
        elif loaded.task_type == "translation":
            enc = [tok(t, truncation=True, max_length=limit)["input_ids"][:limit] for t in chunk]
            dec = [(_decoder_start(loaded) + tok(text_target=t)["input_ids"])[:limit] for t in chunk]
            ids, mask = _pad(enc, pad)
            dids, dmask = _pad(dec, pad)
            items = [{"encoder_self": (np.asarray(e), np.asarray(e), False),
                      "decoder_self": (np.asarray(d), np.asarray(d), True),
                      "cross": (np.asarray(d), np.asarray(e), False)} for e, d in zip(enc, dec)]
            inputs = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dids,
                      "decoder_attention_mask": dmask}
        else:                                          # speech: spoken sentence in, transcript teacher-forced
            from pruning_core.tasks.data.speech import synthesize
            prompt = _decoder_start(loaded)
            dec = [(prompt + tok(" " + t.strip(), add_special_tokens=False)["input_ids"])[:limit] for t in chunk]
            dids, dmask = _pad(dec, pad)
            items = [{"decoder_self": (np.asarray(d), np.asarray(d), True), "cross": (np.asarray(d), None, False)}
                     for d in dec]
            audios = [synthesize(t) for t in chunk]
            inputs = {"encoder_outputs": _speech_encoder(loaded, audios),
                      "decoder_input_ids": dids, "decoder_attention_mask": dmask}
            yield from _run(loaded, inputs, items, specials=specials, frequency=frequency,
                            item_marks=[speech_marks(tok, d[len(prompt):], len(prompt), a) for d, a in zip(dec, audios)])
            continue
        yield from _run(loaded, inputs, items, specials=specials, frequency=frequency)


FRAME_SAMPLES = 320                # a Whisper encoder frame: 20 ms of 16 kHz audio (two 10 ms mel hops)


def voiced_span(audio: np.ndarray, floor: float = 0.02) -> tuple[int, int]:
    """``(first, end)`` encoder frames of ``audio`` whose RMS is above ``floor`` x the loudest frame's (the speech,
    without leading and trailing silence); ``(0, frames)`` for silence."""
    frames = max(1, len(audio) // FRAME_SAMPLES)
    rms = np.sqrt(np.mean(audio[:frames * FRAME_SAMPLES].reshape(frames, -1).astype(np.float64) ** 2, axis=1))
    loud = np.nonzero(rms > floor * rms.max())[0] if rms.max() > 0 else np.array([], dtype=int)
    return (int(loud[0]), int(loud[-1]) + 1) if loud.size else (0, frames)


def speech_marks(tok, transcript: Sequence[int], prompt: int, audio: np.ndarray) -> dict:
    """Marks of a spoken probe sentence: ``prompt`` (decoder ids before the transcript), ``speech`` (the voiced
    frames, :func:`voiced_span`) and ``chars`` (each transcript token's characters, at least 1): what the
    alignment role lays the transcript over the audio with."""
    chars = [max(1, len(tok.decode([int(t)]).strip())) for t in transcript]
    return {"prompt": prompt, "speech": voiced_span(audio), "chars": chars}


def random_tokens(loaded, n: int, batch: int, seed: int) -> np.ndarray:
    """``[batch, n]`` token ids drawn uniformly from the non-special ids the tokenizer and model share."""
    vocab = min(len(loaded.tokenizer), int(getattr(loaded.model.config, "vocab_size", 0) or len(loaded.tokenizer)))
    candidates = np.setdiff1d(np.arange(vocab), np.fromiter(special_ids(loaded.tokenizer), dtype=np.int64))
    return np.random.default_rng(seed).choice(candidates, size=(batch, n))


def repeat_length(loaded, n: int) -> int:
    """``n`` capped so that [BOS] + R + R fits the model's positions."""
    limit = max_positions(loaded.model.config)
    return max(2, min(n, (limit - 2) // 2)) if limit else n


def repeat_prefix(loaded) -> list[int]:
    """What [BOS] + R + R starts with: [BOS] for a decoder-only model (nothing when it has none), the
    decoder's start ids for an encoder-decoder."""
    if loaded.task_type != "language_model":
        return _decoder_start(loaded)
    tok, cfg = loaded.tokenizer, loaded.model.config
    bos = tok.bos_token_id if tok.bos_token_id is not None else getattr(cfg, "bos_token_id", None)
    return [int(bos)] if bos is not None else []


def repeated_sequences(loaded, n: int = 50, batch: int = 10, seed: int = 0,
                       chunk: int = 10) -> Iterator[dict[str, ProbeSequence]]:
    """The ``repeated`` probe: ``batch`` sequences [BOS] + R + R (decoder self-attention only).

    ``marks``: ``repeat`` = n, ``start`` = the position of the second copy's first token.
    """
    tok = loaded.tokenizer
    rand = random_tokens(loaded, n, batch, seed)
    prefix = repeat_prefix(loaded)
    marks = {"repeat": n, "start": len(prefix) + n}
    specials = special_ids(tok)
    for s in range(0, batch, chunk):
        rows = [prefix + list(map(int, r)) * 2 for r in rand[s:s + chunk]]
        ids = torch.tensor(rows, dtype=torch.long)
        items = [{"decoder_self": (np.asarray(r), np.asarray(r), True)} for r in rows]
        if loaded.task_type == "language_model":
            inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        elif loaded.task_type == "asr":
            from pruning_core.tasks.data.speech import RATE
            inputs = {"encoder_outputs": _speech_encoder(loaded, [np.zeros(RATE, np.float32)] * len(rows)),
                      "decoder_input_ids": ids}
        else:
            enc = torch.tensor([tok("")["input_ids"]] * len(rows), dtype=torch.long)
            inputs = {"input_ids": enc, "attention_mask": torch.ones_like(enc), "decoder_input_ids": ids}
        yield from _run(loaded, inputs, items, specials=specials, marks=marks)
