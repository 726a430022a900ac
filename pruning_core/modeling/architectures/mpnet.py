"""MPNet (sequence classification, e.g. all-mpnet-base-v2): a BERT-like encoder with one shared
relative-position bias.

Each layer's ``attention.attn`` holds ``q``/``k``/``v`` and the output projection ``o``. The encoder computes
one ``position_bias [batch, heads, L, L]`` per pass and hands it to every layer; after physical pruning a
layer keeps fewer heads than the bias has, so it becomes a :class:`HeadSlicedMPNetAttention` that adds only
its kept heads' slice. The kept ids are a buffer rebuilt by ``prune_site`` (also when loading a saved pruned
model), not saved weights, so the state dict keeps the full model's keys. MPNet has eager attention only.
"""
from __future__ import annotations

from collections.abc import Sequence

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


def _self_attention_class() -> type:
    """transformers' ``MPNetSelfAttention``, imported on first use (importing this package stays free of
    transformers); its ``forward`` reads only attributes :class:`HeadSlicedMPNetAttention` also has."""
    from transformers.models.mpnet.modeling_mpnet import MPNetSelfAttention
    return MPNetSelfAttention


class HeadSlicedMPNetAttention(nn.Module):
    """An MPNet self-attention that kept only some heads: the shared position bias is sliced to them.

    It adopts the (already sliced) projections of the attention it replaces under the same names,
    so the module tree and the state dict keys stay those of transformers' ``MPNetSelfAttention``.
    ``kept_heads`` holds the original head ids of the kept heads, ascending (a non-persistent buffer).
    """

    def __init__(self, attention: nn.Module, kept: Sequence[int]) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = attention.q, attention.k, attention.v, attention.o
        self.dropout = attention.dropout
        self.attention_head_size = int(attention.attention_head_size)
        self.num_attention_heads = len(kept)
        self.all_head_size = len(kept) * self.attention_head_size
        self.register_buffer("kept_heads", torch.tensor(list(kept), dtype=torch.long,
                                                        device=attention.q.weight.device), persistent=False)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_bias: torch.Tensor | None = None, output_attentions: bool = False, **kwargs):
        """``hidden_states [batch, L, hidden]``; ``position_bias [batch, all heads, L, L]`` (every head
        of the unpruned model, as the encoder computes it) -> ``(output [batch, L, hidden], maps?)``."""
        if position_bias is not None:
            position_bias = position_bias.index_select(1, self.kept_heads)    # [batch, kept, L, L]
        return _self_attention_class().forward(self, hidden_states, attention_mask, position_bias,
                                               output_attentions=output_attentions)


class MPNetAdapter(ArchitectureAdapter):
    name = "mpnet"
    model_types = ("mpnet",)
    task_type = "classification"
    auto_class = "AutoModelForSequenceClassification"
    attention_outputs = {"encoder_self": "attentions"}
    attn_implementations = ("eager",)             # transformers' MPNet has no sdpa attention

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        default_dim = model.config.hidden_size // model.config.num_attention_heads
        sites = []
        for i, layer in enumerate(model.base_model.encoder.layer):
            a = layer.attention.attn
            d = int(getattr(a, "attention_head_size", None) or getattr(a, "head_dim", None) or default_dim)
            heads = heads_of(a.o, d)
            sites.append(AttentionSite("encoder_self", i, layer.attention, "attn", a.q, a.k, a.v, a.o,
                                       heads, heads, d))
        return sites

    def prune_site(self, site: AttentionSite, keep: Sequence[int]) -> None:
        """Slice q/k/v/o as usual; a layer that keeps some heads also slices the shared position bias.

        ``keep`` counts the attention's current heads; on an attention already sliced the kept
        original ids are composed (``kept_heads[keep]``)."""
        keep = sorted(keep)
        before = site.container
        original = (before.kept_heads.tolist() if isinstance(before, HeadSlicedMPNetAttention)
                    else list(range(site.num_heads)))
        super().prune_site(site, keep)
        if keep:
            setattr(site.parent, site.attr, HeadSlicedMPNetAttention(before, [original[h] for h in keep]))

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """``MPNetAttention``: LayerNorm(o(heads) + hidden_states), its own input (post-LN)."""
        return site.parent

    def feed_forward(self, model: nn.Module, site: AttentionSite) -> FeedForward | None:
        """``output.LayerNorm(output.dense(intermediate(a)) + a)``, as in BERT."""
        return FeedForward.of_encoder_layer(model.base_model.encoder.layer[site.layer])

    def post_norm(self, site: AttentionSite) -> nn.Module | None:
        """``MPNetAttention.LayerNorm``, after o(heads) + hidden_states."""
        return site.parent.LayerNorm

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        attention.num_attention_heads = heads
        attention.all_head_size = heads * head_dim

    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """MPNet's ``classifier`` reads the last hidden state (its first token); every layer receives the
        encoder's one ``position_bias``, recorded with the layer's other arguments."""
        if type(model).__name__ != "MPNetForSequenceClassification":
            return None
        return LayerStack("encoder_self", tuple(model.base_model.encoder.layer), model.classifier,
                          first_token=True)      # MPNetClassificationHead reads features[:, 0]

    def flop_dims(self, config) -> FlopDims:
        return encoder_classifier_dims(config, int(config.intermediate_size))

register(MPNetAdapter())
