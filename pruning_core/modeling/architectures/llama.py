"""Llama-style decoder-only language models: llama, qwen2, mistral, gemma (causal LM).

Each layer's ``self_attn`` holds separate ``q_proj``/``k_proj``/``v_proj``/``o_proj`` (Qwen2 with q/k/v biases);
key/value head ``j`` serves query heads ``j*g .. j*g+g-1`` (grouped-query attention). The attention reads only
``head_dim`` and ``num_key_value_groups`` from itself, so a pruned layer needs just the latter rewritten.
Grouped-query pruning is exact: a key/value head stays, once, while any query head of its group stays
(:func:`~.slicing.kv_plan`); even groups keep a stock config, uneven ones get :class:`~.slicing.SharedKVLinear`
(headprune's own format; the group presets make even masks). A layer without heads still caches one
placeholder head, so ``generate`` keeps counting tokens (dynamic cache only: a static one is sized from the
unpruned config). Phi-3's fused ``qkv_proj`` does not fit and is not listed.
"""
from __future__ import annotations

from torch import nn

from pruning_core.modeling.architectures.base import (
    ArchitectureAdapter,
    AttentionSite,
    FlopDims,
    LayerStack,
    StackDims,
    StockShape,
    register,
)
from pruning_core.modeling.architectures.slicing import SharedKVLinear, heads_of


# the causal LMs whose forward is ``lm_head(norm(layers(embeddings)))`` and nothing after (no logit soft-capping)
_CAUSAL_LMS = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM", "GemmaForCausalLM"})


def _width(linear: nn.Module) -> int:
    return int(linear.out_features)


class LlamaAdapter(ArchitectureAdapter):
    name = "llama"
    model_types = ("llama", "qwen2", "mistral", "gemma")
    task_type = "language_model"
    auto_class = "AutoModelForCausalLM"
    attention_outputs = {"decoder_self": "attentions"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        sites = []
        for i, layer in enumerate(model.base_model.layers):
            a = layer.self_attn
            d = int(a.head_dim)
            heads = heads_of(a.o_proj, d)
            kv_heads = _width(a.k_proj) // d if heads else 0
            sites.append(AttentionSite("decoder_self", i, layer, "self_attn", a.q_proj, a.k_proj, a.v_proj,
                                       a.o_proj, heads, kv_heads, d))
        return sites

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """Pre-LN: ``o_proj(heads) + hidden_states``, the decoder layer's input."""
        return site.parent

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        # keys/values were sliced first (prune_site): their width gives the key/value heads left, and
        # SharedKVLinear projections already give every query head its own key/value head
        if isinstance(attention.k_proj, SharedKVLinear):
            attention.num_key_value_groups = 1
        else:
            attention.num_key_value_groups = heads // (_width(attention.k_proj) // head_dim)

    def stock_shape(self, model: nn.Module) -> StockShape:
        """Stock when every layer keeps the same query heads and key/value heads in even groups: the config
        then says so with ``head_dim`` written out (its default, ``hidden_size // num_attention_heads``, would
        change with the head count). Uneven groups (:class:`~.slicing.SharedKVLinear`) have no stock config."""
        sites = self.sites(model)
        shared = [s.layer for s in sites if isinstance(s.k, SharedKVLinear)]
        if shared:
            return StockShape({}, f"layer(s) {', '.join(map(str, shared))} keep uneven key/value groups, each "
                                  "key/value head stored once and read by its remaining query heads (headprune's "
                                  "format), and a stock config gives every group the same number of query heads")
        heads = sorted({s.num_heads for s in sites})
        kv = sorted({s.num_kv_heads for s in sites})
        if 0 in heads:
            gone = [s.layer for s in sites if s.num_heads == 0]
            return StockShape({}, f"layer(s) {', '.join(map(str, gone))} lost every head, and a stock config "
                                  "gives every layer the same heads, at least one")
        if len(heads) > 1 or len(kv) > 1:
            per_layer = ", ".join(f"{s.num_heads}/{s.num_kv_heads}" for s in sites)
            return StockShape({}, f"layers keep different numbers of query/key-value heads ({per_layer}), and a "
                                  "stock config has one count for every layer")
        return StockShape({"num_attention_heads": heads[0], "num_key_value_heads": kv[0],
                           "head_dim": sites[0].head_dim})

    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """The decoder layers, then the final norm and ``lm_head`` over every position (``logits_to_keep=0``), as
        the causal LM's forward runs them; other classes of these types run the whole model."""
        if type(model).__name__ not in _CAUSAL_LMS:
            return None
        from transformers.modeling_outputs import CausalLMOutputWithPast

        return LayerStack("decoder_self", tuple(model.model.layers), lambda h: model.lm_head(model.model.norm(h)),
                          output=CausalLMOutputWithPast)

    def logits_layer(self, model: nn.Module) -> nn.Module | None:
        """``lm_head`` of the causal LMs whose forward returns its output as the logits."""
        return model.lm_head if type(model).__name__ in _CAUSAL_LMS else None

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        """``model.model.norm`` of the causal LMs whose logits are ``lm_head(norm(h))``."""
        return model.model.norm if type(model).__name__ in _CAUSAL_LMS else None

    def flop_dims(self, config) -> FlopDims:
        heads = int(config.num_attention_heads)
        d = int(config.hidden_size)
        stack = StackDims(layers=int(config.num_hidden_layers), heads=heads,
                          kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
                          head_dim=int(getattr(config, "head_dim", None) or d // heads),
                          ffn_dim=int(config.intermediate_size), ffn_matrices=3)
        return FlopDims(hidden=d, stacks={"decoder": stack}, kind_stack={"decoder_self": "decoder"},
                        is_encoder_decoder=False, head_kind="lm_head", head_size=int(config.vocab_size),
                        output_stack="decoder")


register(LlamaAdapter())
