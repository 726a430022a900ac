"""Whisper (speech recognition): a BART-style encoder-decoder over log-mel audio frames.

The sites are those of :class:`~.seq2seq.Seq2SeqAdapter` (``model.model.encoder.layers[i].self_attn``,
``decoder.layers[i].self_attn`` and the cross-attention ``encoder_attn``, each with
``q_proj``/``k_proj``/``v_proj``/``out_proj`` and ``num_heads``); Whisper's key projections have no
bias, which slicing handles. Encoder tokens are audio frames (1,500 for 30 s after the two
convolutions), so cross-attention maps are ``[batch, heads, text tokens, frames]``. The task type is
``asr`` (:mod:`pruning_core.tasks.speech`); the convolutional front end is not counted in the FLOP
ceiling's attention/FFN terms, only the transformer layers.
"""
from __future__ import annotations

from .registry import register
from .seq2seq import Seq2SeqAdapter


class WhisperAdapter(Seq2SeqAdapter):
    name = "whisper"
    model_types = ("whisper",)
    task_type = "asr"
    auto_class = "AutoModelForSpeechSeq2Seq"      # -> WhisperForConditionalGeneration


register(WhisperAdapter())
