"""BART-style encoder-decoders: bart, marian (translation).

Encoder layers have ``self_attn``; decoder layers ``self_attn`` and the cross-attention
``encoder_attn``; each holds ``q_proj``/``k_proj``/``v_proj``/``out_proj``.
"""
from __future__ import annotations

from torch import nn

from pruning_core.modeling.architectures.base import (
    ArchitectureAdapter,
    AttentionSite,
    EncoderStack,
    FlopDims,
    StackDims,
    register,
)
from pruning_core.modeling.architectures.slicing import heads_of


# model classes whose forward runs the encoder, then the decoder on its output (Whisper's own adapter: not these)
_RESUMABLE = ("MarianMTModel", "MarianSSRUMTModel", "BartForConditionalGeneration")


def _site(kind: str, layer: int, parent: nn.Module, attr: str) -> AttentionSite:
    a = getattr(parent, attr)
    heads = heads_of(a.out_proj, a.head_dim)
    return AttentionSite(kind, layer, parent, attr, a.q_proj, a.k_proj, a.v_proj, a.out_proj, heads, heads,
                         int(a.head_dim))


class Seq2SeqAdapter(ArchitectureAdapter):
    name = "seq2seq"
    model_types = ("bart", "marian")
    task_type = "translation"
    auto_class = "AutoModelForSeq2SeqLM"
    attention_outputs = {"encoder_self": "encoder_attentions", "decoder_self": "decoder_attentions",
                         "cross": "cross_attentions"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        base = model.model  # BartModel / MarianModel inside the ...ForConditionalGeneration
        sites = [_site("encoder_self", i, layer, "self_attn") for i, layer in enumerate(base.encoder.layers)]
        for i, layer in enumerate(base.decoder.layers):
            sites += [_site("decoder_self", i, layer, "self_attn"), _site("cross", i, layer, "encoder_attn")]
        return sites

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """Post-LN (BART, Marian): self-attention adds the layer's input; cross-attention adds the hidden
        state after self-attention (and its LayerNorm), which is the cross-attention's own input."""
        return site.container if site.kind == "cross" else site.parent

    def encoder_stack(self, model: nn.Module) -> EncoderStack | None:
        """Marian's and BART's encoders end with their last layer (no final norm); the decoder and output head
        follow, given the encoder's output as ``encoder_outputs``."""
        if type(model).__name__ not in _RESUMABLE or getattr(model.model.encoder, "layer_norm", None) is not None:
            return None
        from transformers.modeling_outputs import BaseModelOutput

        def finish(hidden, inputs):
            rest = {k: v for k, v in inputs.items() if k != "input_ids"}
            return model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), **rest)
        return EncoderStack(tuple(model.model.encoder.layers), finish)

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        attention.num_heads = heads

    def flop_dims(self, config) -> FlopDims:
        d = int(config.d_model)

        def stack(layers: int, heads: int, ffn: int) -> StackDims:
            return StackDims(layers=int(layers), heads=int(heads), kv_heads=int(heads), head_dim=d // int(heads),
                             ffn_dim=int(ffn))

        return FlopDims(hidden=d,
                        stacks={"encoder": stack(config.encoder_layers, config.encoder_attention_heads,
                                                 config.encoder_ffn_dim),
                                "decoder": stack(config.decoder_layers, config.decoder_attention_heads,
                                                 config.decoder_ffn_dim)},
                        kind_stack={"encoder_self": "encoder", "decoder_self": "decoder", "cross": "decoder"},
                        is_encoder_decoder=True, head_kind="lm_head", head_size=int(config.vocab_size),
                        output_stack="decoder")


register(Seq2SeqAdapter())
