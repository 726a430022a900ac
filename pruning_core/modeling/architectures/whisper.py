"""Whisper (speech recognition): a BART-style encoder-decoder over log-mel audio frames.

The sites are those of :class:`~.seq2seq.Seq2SeqAdapter`; Whisper's key projections have no bias, which
slicing handles. Encoder tokens are audio frames (1,500 for 30 s), so cross-attention maps are ``[batch,
heads, text tokens, frames]``. The task type is ``asr`` (:mod:`pruning_core.tasks.speech`); the FLOP ceiling
counts the transformer layers, not the convolutional front end. A cross-attention that loses every head
still fills its layer of the cross-attention cache with one zero placeholder head (never read): Whisper's
``generate`` reads every layer of that cache when it returns per-example caches.
"""
from __future__ import annotations

import torch
from torch import nn

from pruning_core.modeling.architectures.base import AttentionSite, EncoderStack, register
from pruning_core.modeling.architectures.slicing import EmptyAttention
from pruning_core.modeling.architectures.seq2seq import Seq2SeqAdapter


class EmptyCrossAttention(EmptyAttention):
    """An emptied cross-attention (output = out-projection bias) that keeps its cross-attention cache layer filled."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, None]:
        cache = kwargs.get("past_key_values")
        states = kwargs.get("key_value_states")                       # encoder output [batch, frames, d_model]
        updated = getattr(cache, "is_updated", None)
        if cache is not None and states is not None and updated is not None and not updated.get(self.cache_layer):
            kv = states.new_zeros(states.shape[0], 1, states.shape[1], self.head_dim)   # [batch, 1, frames, head_dim]
            cache.cross_attention_cache.update(kv, kv, self.cache_layer)
            updated[self.cache_layer] = True
        kwargs.pop("past_key_values", None)
        return super().forward(hidden_states, *args, **kwargs)


class WhisperAdapter(Seq2SeqAdapter):
    name = "whisper"
    model_types = ("whisper",)
    task_type = "asr"
    auto_class = "AutoModelForSpeechSeq2Seq"      # -> WhisperForConditionalGeneration

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """Pre-LN: self-attention adds the layer's input; cross-attention adds the hidden state after
        self-attention, the input of ``encoder_attn_layer_norm``."""
        return site.parent.encoder_attn_layer_norm if site.kind == "cross" else site.parent

    def encoder_stack(self, model: nn.Module) -> EncoderStack | None:
        """The encoder's layers after its convolutional front end; ``finish`` applies the encoder's final LayerNorm
        to the last layer's output, as the encoder does, then runs the decoder and output head on it."""
        if type(model).__name__ != "WhisperForConditionalGeneration":
            return None
        from transformers.modeling_outputs import BaseModelOutput

        encoder = model.model.encoder

        def finish(hidden, inputs):
            rest = {k: v for k, v in inputs.items() if k != "input_features"}
            return model(encoder_outputs=BaseModelOutput(last_hidden_state=encoder.layer_norm(hidden)), **rest)
        return EncoderStack(tuple(encoder.layers), finish)

    def empty_attention(self, site: AttentionSite) -> nn.Module:
        empty = super().empty_attention(site)
        if site.kind != "cross":
            return empty
        cross = EmptyCrossAttention(dict(empty.named_children()), empty.out_name, site.head_dim,
                                    cache_layer=getattr(site.container, "layer_idx", site.layer))
        return cross


register(WhisperAdapter())
