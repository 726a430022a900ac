"""GPT-2 (causal language model): masking and physical pruning only; no task type uses it yet.

Each block's ``attn`` has one fused ``c_attn`` Conv1D producing ``q | k | v`` (each
``heads * head_dim`` wide) and a ``c_proj`` Conv1D output projection. transformers' Conv1D
stores its weight as ``[in, out]``; :func:`~.slicing.keep_outputs` and :func:`~.slicing.keep_inputs`
handle that.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from pruning_core.modeling.architectures.base import (
    ArchitectureAdapter,
    AttentionSite,
    FlopDims,
    LayerStack,
    StackDims,
    register,
)
from pruning_core.modeling.architectures.slicing import head_index, heads_of, keep_outputs


class GPT2Adapter(ArchitectureAdapter):
    name = "gpt2"
    model_types = ("gpt2",)
    task_type = "language_model"
    auto_class = "AutoModelForCausalLM"
    attention_outputs = {"decoder_self": "attentions"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        config = model.config
        default_dim = config.n_embd // config.n_head
        sites = []
        for i, block in enumerate(model.base_model.h):
            a = block.attn
            d = int(getattr(a, "head_dim", None) or default_dim)
            heads = heads_of(a.c_proj, d)
            sites.append(AttentionSite("decoder_self", i, block, "attn", a.c_attn, a.c_attn, a.c_attn, a.c_proj,
                                       heads, heads, d))
        return sites

    def slice_qkv(self, site: AttentionSite, keep: Sequence[int], kv_keep: Sequence[int]) -> None:
        # no grouped-query attention in GPT-2: kv_keep == keep
        width = site.num_heads * site.head_dim          # c_attn outputs q | k | v, each ``width`` wide
        index = torch.cat([head_index(keep, site.head_dim, offset=part * width) for part in range(3)])
        keep_outputs(site.q, index)

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """Pre-LN: ``c_proj(heads) + hidden_states``, the block's input."""
        return site.parent

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        attention.num_heads = heads
        attention.split_size = heads * head_dim       # c_attn's output is split into q, k, v of this width

    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """``GPT2LMHeadModel``: the blocks, then ``ln_f`` and ``lm_head`` over every position, as its forward runs
        them; other classes (double heads, classifiers) run the whole model."""
        if type(model).__name__ != "GPT2LMHeadModel":
            return None
        from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

        return LayerStack("decoder_self", tuple(model.transformer.h),
                          lambda h: model.lm_head(model.transformer.ln_f(h)), output=CausalLMOutputWithCrossAttentions)

    def logits_layer(self, model: nn.Module) -> nn.Module | None:
        """``GPT2LMHeadModel.lm_head``, whose output its forward returns as the logits."""
        return model.lm_head if type(model).__name__ == "GPT2LMHeadModel" else None

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        """``GPT2LMHeadModel.transformer.ln_f``, between the blocks and ``lm_head``."""
        return model.transformer.ln_f if type(model).__name__ == "GPT2LMHeadModel" else None

    def flop_dims(self, config) -> FlopDims:
        heads = int(config.n_head)
        d = int(config.n_embd)
        stack = StackDims(layers=int(config.n_layer), heads=heads, kv_heads=heads, head_dim=d // heads,
                          ffn_dim=int(config.n_inner or 4 * d))
        return FlopDims(hidden=d, stacks={"decoder": stack}, kind_stack={"decoder_self": "decoder"},
                        is_encoder_decoder=False, head_kind="lm_head", head_size=int(config.vocab_size),
                        output_stack="decoder")


register(GPT2Adapter())
