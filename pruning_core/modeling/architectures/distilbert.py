"""DistilBERT (sequence classification): ``transformer.layer[i].attention`` holds q/k/v/out_lin."""
from __future__ import annotations

import torch
from torch import nn

from pruning_core.modeling.architectures.base import (
    ArchitectureAdapter,
    AttentionSite,
    FeedForward,
    FlopDims,
    LayerStack,
    register,
)
from pruning_core.modeling.architectures.slicing import heads_of
from pruning_core.modeling.architectures.bert import encoder_classifier_dims


class DistilBertAdapter(ArchitectureAdapter):
    name = "distilbert"
    model_types = ("distilbert",)
    task_type = "classification"
    auto_class = "AutoModelForSequenceClassification"
    attention_outputs = {"encoder_self": "attentions"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        default_dim = model.config.dim // model.config.n_heads
        sites = []
        for i, layer in enumerate(model.base_model.transformer.layer):
            a = layer.attention
            d = int(getattr(a, "attention_head_size", None) or getattr(a, "head_dim", None) or default_dim)
            heads = heads_of(a.out_lin, d)
            sites.append(AttentionSite("encoder_self", i, layer, "attention", a.q_lin, a.k_lin, a.v_lin,
                                       a.out_lin, heads, heads, d))
        return sites

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        attention.n_heads = heads

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """``sa_layer_norm(out_lin(heads) + x)``, ``x`` the block's input (post-LN)."""
        return site.parent

    def feed_forward(self, model: nn.Module, site: AttentionSite) -> FeedForward | None:
        """``output_layer_norm(ffn(a) + a)``: ``ffn.lin2`` is the second projection."""
        return FeedForward(site.parent.ffn.lin2, site.parent.ffn, site.parent.output_layer_norm)

    def post_norm(self, site: AttentionSite) -> nn.Module | None:
        """The block's ``sa_layer_norm``."""
        return site.parent.sa_layer_norm

    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """DistilBERT's head: the first token -> ``pre_classifier`` -> ReLU -> dropout -> ``classifier``."""
        if type(model).__name__ != "DistilBertForSequenceClassification":
            return None

        def head(hidden: torch.Tensor) -> torch.Tensor:                   # [B, T, dim] -> [B, labels]
            pooled = torch.relu(model.pre_classifier(hidden[:, 0]))
            return model.classifier(model.dropout(pooled))
        return LayerStack("encoder_self", tuple(model.base_model.transformer.layer), head, first_token=True)

    def flop_dims(self, config) -> FlopDims:
        return encoder_classifier_dims(config, int(config.hidden_dim))

register(DistilBertAdapter())
