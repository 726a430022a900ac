"""What an attention run is and how its maps are read: the data types both kinds of input share (text in
:mod:`.attention_maps`, speech in :mod:`.speech_attention`) and the helpers that fill them.

A model loaded with eager attention is only read here (no hook, no config change), so a model shared
with other threads is safe.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.architectures import adapter_for

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
    audio: np.ndarray | None = None                   # a speech model's input: mono float32 [samples], or None
    audio_rate: int = 0                               # its samples per second

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


def maps_of(loaded, outputs) -> dict[str, tuple[np.ndarray, ...]]:
    """Per kind, per layer ``[heads, T_query, T_key]`` float32 arrays of the first batch item."""
    layout = loaded.layout.kinds
    return {kind: _stack_attentions(maps, len(layout[kind]))
            for kind, maps in adapter_for(loaded).attention_maps(outputs).items()}


def zero_removed(maps: Mapping[str, tuple[np.ndarray, ...]], mask: HeadMask) -> dict[str, tuple[np.ndarray, ...]]:
    """``maps`` with each removed head's map set to zeros: what the pruned model's maps would show."""
    out = {}
    for kind, layers in maps.items():
        new = []
        for layer, arr in enumerate(layers):
            keep = np.asarray(mask.kinds[kind][layer], dtype=np.float32)
            new.append(arr * keep[:, None, None] if arr.shape[0] == keep.shape[0] else arr)
        out[kind] = tuple(new)
    return out


def tokens_of(tok, ids: Sequence[int]) -> tuple[str, ...]:
    """Token strings of ``ids``; an id the tokenizer cannot name shows as ``[id 123]``."""
    names = tok.convert_ids_to_tokens(list(ids))
    return tuple(n if isinstance(n, str) else f"[id {i}]" for n, i in zip(names, ids))
