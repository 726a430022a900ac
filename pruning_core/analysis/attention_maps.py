"""Attention maps of one input, with all heads and under a head mask (library side of the
dashboard's Attention page).

:func:`run_attention` runs an eager-attention model once densely and once under the mask (per call: a
shared model is only read) and returns an :class:`AttentionRun` of numpy arrays, strings and small
dataclasses. A translation model's decoder and cross maps are computed teacher-forced on the dense model's
greedy translation, so the two token grids line up. "Pruned" means the masked model, which computes what
the physically pruned one does: a removed head's map is shown all zeros; later kept heads may attend
differently because their inputs changed.
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

import torch

from pruning_core.analysis.attention_run import (  # noqa: F401 (AttentionRun, batch_maps ...: this module's API)
    MAX_NEW_TOKENS,
    MAX_TOKENS,
    AttentionRun,
    Prediction,
    batch_maps,
    check_eager,
    example_text,
    maps_of,
    tokens_of,
    zero_removed,
)
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask

def _label_names(loaded, label_names: Sequence[str] | None, n: int) -> list[str]:
    if label_names and len(label_names) == n:
        return [str(x) for x in label_names]
    id2label = getattr(loaded.model.config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), f"class {i}"))) for i in range(n)]


def _model_inputs(model, encoding) -> dict:
    """Only the inputs the model's forward takes (DistilBERT and BART take no token_type_ids)."""
    accepted = inspect.signature(model.forward).parameters
    return {k: v for k, v in encoding.items() if k in accepted}


def run_attention(loaded, text: str, mask: HeadMask | None = None, *, text_b: str | None = None,
                  label_names: Sequence[str] | None = None, max_tokens: int = MAX_TOKENS,
                  max_new_tokens: int = MAX_NEW_TOKENS) -> AttentionRun:
    """Run ``loaded`` on ``text`` (and ``text_b`` for a pair task) densely and under ``mask``.

    Args:
        loaded: a ``LoadedModel`` loaded with eager attention; it is only read (the mask is applied
            per call, so a model shared with other sessions is safe).
        mask: 1 = keep, 0 = removed, per kind and layer; ``None`` keeps every head.
        label_names: class names of the task (classification); default: the model config's.
        max_tokens: the input is cut to this many tokens (``run.truncated`` says whether it was).
        max_new_tokens: longest translation generated (seq2seq models).

    Raises:
        HeadpruneError: empty text, a mask for another model, or a model without attention maps.
    """
    if loaded.task_type == "asr":                     # speech in: the sentence is spoken, then transcribed
        from pruning_core.analysis.speech_attention import run_speech_attention
        return run_speech_attention(loaded, text, mask, max_new_tokens=max_new_tokens)
    started = time.perf_counter()
    text = (text or "").strip()
    text_b = (text_b or "").strip() or None
    if not text:
        raise HeadpruneError("Type a sentence first: the attention views need at least one word.")
    if max_tokens < 2:
        raise HeadpruneError(f"max_tokens must be at least 2, got {max_tokens}.")
    mask = mask or HeadMask.full(loaded.layout)
    mask.check_fits(loaded.layout)
    model, tok = loaded.model, loaded.tokenizer
    check_eager(loaded)
    args = (text, text_b) if text_b else (text,)
    full_length = len(tok(*args, truncation=False)["input_ids"])
    encoding = tok(*args, truncation=True, max_length=max_tokens, return_tensors="pt")
    truncated = full_length > encoding["input_ids"].shape[1]
    sentence_b_start = None
    if text_b and hasattr(encoding, "sequence_ids"):
        ids = encoding.sequence_ids(0)
        sentence_b_start = next((i for i, s in enumerate(ids) if s == 1), None)
    device = loaded.device
    inputs = {k: v.to(device) for k, v in _model_inputs(model, encoding).items()}
    encoder_tokens = tokens_of(tok, encoding["input_ids"][0].tolist())
    notes: list[str] = []

    with torch.inference_mode():
        if loaded.task_type == "translation":
            gen = dict(max_new_tokens=max_new_tokens, num_beams=1, do_sample=False)
            dense_ids = model.generate(**inputs, **gen)
            with apply_mask(loaded, mask):
                pruned_ids = model.generate(**inputs, **gen)
            dense_pred = Prediction(tok.decode(dense_ids[0], skip_special_tokens=True))
            pruned_pred = Prediction(tok.decode(pruned_ids[0], skip_special_tokens=True))
            forward = dict(inputs, decoder_input_ids=dense_ids, output_attentions=True)
            decoder_tokens = tokens_of(tok, dense_ids[0].tolist())
            notes.append("Decoder and cross-attention maps are computed for both models on the dense model's "
                         "translation (teacher-forced), so that their token grids line up.")
        else:
            forward = dict(inputs, output_attentions=True)
            decoder_tokens = None
        dense_out = model(**forward)
        with apply_mask(loaded, mask):
            pruned_out = model(**forward)
        dense_maps = maps_of(loaded, dense_out)
        pruned_maps = zero_removed(maps_of(loaded, pruned_out), mask)
        if loaded.task_type == "language_model":
            decoder_tokens = encoder_tokens               # a decoder-only model's one stack reads the input
            dense_pred, pruned_pred = _next_token(tok, dense_out.logits), _next_token(tok, pruned_out.logits)
            notes.append("Causal attention: each token attends only to itself and the tokens before it (the "
                         "upper triangle is empty). The prediction is the most likely next token.")
        elif loaded.task_type != "translation":
            dense_pred = _classification(loaded, dense_out.logits, label_names)
            pruned_pred = _classification(loaded, pruned_out.logits, label_names)
    return AttentionRun(text=text if not text_b else f"{text} ‖ {text_b}", encoder_tokens=encoder_tokens,
                        decoder_tokens=decoder_tokens, sentence_b_start=sentence_b_start, dense=dense_maps,
                        pruned=pruned_maps, mask=mask, dense_prediction=dense_pred, pruned_prediction=pruned_pred,
                        truncated=truncated, seconds=time.perf_counter() - started,
                        model_id=str(loaded.model_id), notes=tuple(notes))


def _next_token(tok, logits: torch.Tensor, top: int = 5) -> Prediction:
    """A language model's most likely next token after the text (``logits`` ``[1, T, V]``) and the top ``top``."""
    probs = torch.softmax(logits[0, -1].float(), dim=-1)
    p, ids = probs.topk(min(top, probs.shape[-1]))
    names = [repr(tok.decode([i])) for i in ids.tolist()]
    return Prediction(names[0], tuple(zip(names, (float(x) for x in p.tolist()))))


def _classification(loaded, logits: torch.Tensor, label_names: Sequence[str] | None) -> Prediction:
    probs = torch.softmax(logits[0].float(), dim=-1).cpu().tolist()
    names = _label_names(loaded, label_names, len(probs))
    best = max(range(len(probs)), key=lambda i: probs[i])
    return Prediction(names[best], tuple(zip(names, (float(p) for p in probs))))
