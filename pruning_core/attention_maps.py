"""Attention maps of one input, with all heads and under a head mask (library side of the
dashboard's Attention page).

:func:`run_attention` runs a model loaded with eager attention once densely and once under the
mask (``apply_mask``, per call: a model shared with other threads is only read) with
``output_attentions=True`` and returns an :class:`AttentionRun`: numpy arrays, strings and
small dataclasses, no live tensors. Translation models first generate the dense model's
translation (greedy) and compute decoder and cross maps teacher-forced on it, so the two models'
token grids line up; the masked model's own translation is its prediction.

What "pruned" means here: the masked model, which computes exactly what the physically pruned
model computes. A removed head's own attention map is still computed by the masked model but
contributes nothing, so in the pruned model's maps it is set to all zeros; later layers' kept
heads can attend differently than in the dense model because their inputs changed.
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .architectures import adapter_for
from .errors import HeadpruneError
from .heads import HeadMask
from .masking import apply_mask

MAX_TOKENS = 48            # longer inputs are cut: bertviz draws one row per token
MAX_NEW_TOKENS = 32        # translation length for seq2seq models


@dataclass(frozen=True)
class Prediction:
    """What a model outputs for the sentence."""

    label: str                                        # class name, the translation, or the next token
    probabilities: tuple[tuple[str, float], ...] = ()  # classification: (class name, p) in class order;
                                                      # language model: the top next tokens, most likely first


@dataclass(frozen=True)
class AttentionRun:
    """Attention maps of one input for the dense and the pruned (masked) model.

    ``dense[kind][layer]`` is a float32 array ``[heads, T_query, T_key]``: row ``i`` is how query
    token ``i`` distributes its attention over the key tokens (each row sums to 1). ``pruned`` has
    the same shapes, with the removed heads' maps set to 0. Kinds: ``encoder_self`` (queries and
    keys are encoder tokens), ``decoder_self`` (decoder tokens), ``cross`` (decoder queries,
    encoder keys).
    """

    text: str
    encoder_tokens: tuple[str, ...]
    decoder_tokens: tuple[str, ...] | None            # seq2seq: the dense model's translation, teacher-forced
    sentence_b_start: int | None                      # first token of the second text of a pair
    dense: Mapping[str, tuple[np.ndarray, ...]]
    pruned: Mapping[str, tuple[np.ndarray, ...]]
    mask: HeadMask
    dense_prediction: Prediction
    pruned_prediction: Prediction
    truncated: bool                                   # the input was cut to ``MAX_TOKENS`` tokens
    seconds: float = 0.0
    model_id: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.dense)

    def tokens_for(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query tokens, key tokens) of ``kind``'s maps."""
        if kind == "encoder_self":
            return self.encoder_tokens, self.encoder_tokens
        if self.decoder_tokens is None:
            raise HeadpruneError(f"This model has no {kind} attention.")
        if kind == "decoder_self":
            return self.decoder_tokens, self.decoder_tokens
        return self.decoder_tokens, self.encoder_tokens


def example_text(example: Mapping) -> tuple[str, str | None]:
    """The input text(s) of a raw data example: ``(text, None)`` or ``(text_a, text_b)`` for a pair."""
    if "text_a" in example and "text_b" in example:
        return str(example["text_a"]), str(example["text_b"])
    for key in ("text", "source", "sentence"):
        if key in example:
            return str(example[key]), None
    strings = [v for v in example.values() if isinstance(v, str)]
    if not strings:
        raise HeadpruneError(f"The example {dict(example)!r} has no text field (text, text_a/text_b or source).")
    return strings[0], None


def _label_names(loaded, label_names: Sequence[str] | None, n: int) -> list[str]:
    if label_names and len(label_names) == n:
        return [str(x) for x in label_names]
    id2label = getattr(loaded.model.config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), f"class {i}"))) for i in range(n)]


def _stack_attentions(attentions, expected_layers: int) -> tuple[np.ndarray, ...]:
    """Per-layer ``[heads, T_q, T_k]`` float32 arrays from a model's ``[1, heads, T_q, T_k]`` outputs."""
    if attentions is None or len(attentions) != expected_layers:
        got = 0 if attentions is None else len(attentions)
        raise HeadpruneError(
            f"The model returned attention maps for {got} of its {expected_layers} layers. Attention maps need "
            "the 'eager' attention implementation; load the model with attn_implementation='eager'.")
    out = []
    for a in attentions:
        if a is None:       # a layer whose heads were all physically pruned
            out.append(np.zeros((0, 0, 0), dtype=np.float32))
        else:
            out.append(a[0].detach().float().cpu().numpy())
    return tuple(out)


def check_eager(loaded) -> None:
    """Raise unless ``loaded`` was loaded with eager attention (other implementations return no maps)."""
    impl = getattr(loaded.model.config, "_attn_implementation", "eager")
    if impl not in (None, "eager"):
        raise HeadpruneError(f"The model was loaded with attn_implementation={impl!r}, which returns no attention "
                             "maps. Load it with attn_implementation='eager' (the dashboard does by default).")


def batch_maps(loaded, inputs: Mapping[str, torch.Tensor],
               kinds: Sequence[str] | None = None) -> dict[str, list[torch.Tensor]]:
    """One forward pass of ``loaded`` on a batch with ``output_attentions=True``, in inference mode.

    The model is only read (no hook, no config change), so a model shared with other threads is safe.
    Returns for each of ``kinds`` (default: every kind of the model) one float32 CPU tensor
    ``[batch, heads, T_query, T_key]`` per layer (a layer whose heads were all pruned gives
    ``[1, 0, 0, 0]``); rows of padded queries are whatever the model computed there: cut them off with
    the batch's lengths. An encoder-decoder model given ``encoder_outputs`` returns no encoder maps:
    leave ``encoder_self`` out of ``kinds`` then.
    """
    check_eager(loaded)
    with torch.inference_mode():
        outputs = loaded.model(**inputs, output_attentions=True)
    out = {}
    for kind, layers in adapter_for(loaded).attention_maps(outputs).items():
        if kinds is not None and kind not in kinds:
            continue
        expected = len(loaded.layout.kinds[kind])
        if len(layers) != expected:
            raise HeadpruneError(f"The model returned {kind} attention maps for {len(layers)} of its {expected} "
                                 "layers; load it with attn_implementation='eager'.")
        out[kind] = [torch.zeros(1, 0, 0, 0) if a is None else a.detach().float().cpu() for a in layers]
    return out


def _maps_of(loaded, outputs) -> dict[str, tuple[np.ndarray, ...]]:
    """Per kind, per layer ``[heads, T_query, T_key]`` float32 arrays of the first batch item."""
    layout = loaded.layout.kinds
    return {kind: _stack_attentions(maps, len(layout[kind]))
            for kind, maps in adapter_for(loaded).attention_maps(outputs).items()}


def _zero_removed(maps: Mapping[str, tuple[np.ndarray, ...]], mask: HeadMask) -> dict[str, tuple[np.ndarray, ...]]:
    out = {}
    for kind, layers in maps.items():
        new = []
        for layer, arr in enumerate(layers):
            keep = np.asarray(mask.kinds[kind][layer], dtype=np.float32)
            new.append(arr * keep[:, None, None] if arr.shape[0] == keep.shape[0] else arr)
        out[kind] = tuple(new)
    return out


def _tokens(tok, ids: Sequence[int]) -> tuple[str, ...]:
    """Token strings of ``ids``; an id the tokenizer cannot name shows as ``[id 123]``."""
    names = tok.convert_ids_to_tokens(list(ids))
    return tuple(n if isinstance(n, str) else f"[id {i}]" for n, i in zip(names, ids))


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
        from .speech_attention import run_speech_attention
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
    encoder_tokens = _tokens(tok, encoding["input_ids"][0].tolist())
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
            decoder_tokens = _tokens(tok, dense_ids[0].tolist())
            notes.append("Decoder and cross-attention maps are computed for both models on the dense model's "
                         "translation (teacher-forced), so that their token grids line up.")
        else:
            forward = dict(inputs, output_attentions=True)
            decoder_tokens = None
        dense_out = model(**forward)
        with apply_mask(loaded, mask):
            pruned_out = model(**forward)
        dense_maps = _maps_of(loaded, dense_out)
        pruned_maps = _zero_removed(_maps_of(loaded, pruned_out), mask)
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
