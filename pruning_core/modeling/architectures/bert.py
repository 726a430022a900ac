"""BERT-style encoders: bert, roberta, electra, xlm-roberta, camembert (sequence classification).

Each layer's ``attention.self`` holds ``query``/``key``/``value``; the output projection
``attention.output.dense`` sits outside it, so an attention with no heads left returns an empty
``[batch, tokens, 0]`` tensor and the outer projection adds its bias.
"""
from __future__ import annotations

from torch import nn

from pruning_core.modeling.architectures.base import (
    ArchitectureAdapter,
    AttentionSite,
    FeedForward,
    FlopDims,
    LayerStack,
    StackDims,
    register,
)
from pruning_core.modeling.architectures.slicing import heads_of


def encoder_classifier_dims(config, ffn_dim: int) -> FlopDims:
    """The FLOP dimensions of a BERT-like encoder (one self-attention stack) under a classifier, for BERT,
    MPNet and DistilBERT: ``config`` gives ``hidden_size``, ``num_attention_heads``, ``num_hidden_layers``
    (DistilBERT's config maps its own names onto these) and ``num_labels``; ``ffn_dim`` the feed-forward width."""
    heads = int(config.num_attention_heads)
    stack = StackDims(layers=int(config.num_hidden_layers), heads=heads, kv_heads=heads,
                      head_dim=int(config.hidden_size) // heads, ffn_dim=ffn_dim)
    return FlopDims(hidden=int(config.hidden_size), stacks={"encoder": stack}, kind_stack={"encoder_self": "encoder"},
                    is_encoder_decoder=False, head_kind="classifier",
                    head_size=int(getattr(config, "num_labels", 2) or 2), output_stack="encoder")


class BertAdapter(ArchitectureAdapter):
    name = "bert-encoder"
    model_types = ("bert", "roberta", "electra", "xlm-roberta", "camembert")
    task_type = "classification"
    auto_class = "AutoModelForSequenceClassification"
    attention_outputs = {"encoder_self": "attentions"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        config = model.config
        default_dim = config.hidden_size // config.num_attention_heads
        sites = []
        for i, layer in enumerate(model.base_model.encoder.layer):
            attn = layer.attention
            a = attn.self
            d = int(getattr(a, "attention_head_size", None) or getattr(a, "head_dim", None) or default_dim)
            heads = heads_of(attn.output.dense, d)
            sites.append(AttentionSite("encoder_self", i, attn, "self", a.query, a.key, a.value,
                                       attn.output.dense, heads, heads, d))
        return sites

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        attention.num_attention_heads = heads
        attention.all_head_size = heads * head_dim

    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """``BertSelfOutput``: LayerNorm(dense(heads) + hidden_states), the input of ``attention`` (post-LN)."""
        return site.parent

    def feed_forward(self, model: nn.Module, site: AttentionSite) -> FeedForward | None:
        """``output.LayerNorm(output.dense(intermediate(a)) + a)``, ``a`` the attention block's output."""
        return FeedForward.of_encoder_layer(model.base_model.encoder.layer[site.layer])

    def post_norm(self, site: AttentionSite) -> nn.Module | None:
        """``BertSelfOutput.LayerNorm``, after dense(heads) + hidden_states."""
        return site.parent.output.LayerNorm

    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """BERT's head pools the first token (``bert.pooler``), drops out and classifies; RoBERTa's and
        ELECTRA's ``classifier`` reads the whole last hidden state. Other classes of these types
        (xlm-roberta, camembert: not tested here) run the whole model."""
        heads = {"BertForSequenceClassification": lambda h: model.classifier(model.dropout(model.bert.pooler(h))),
                 "RobertaForSequenceClassification": lambda h: model.classifier(h),
                 "ElectraForSequenceClassification": lambda h: model.classifier(h)}
        head = heads.get(type(model).__name__)
        if head is None or model.config.is_decoder:
            return None
        # all three heads read the first token only ([:, 0])
        return LayerStack("encoder_self", tuple(model.base_model.encoder.layer), head, first_token=True)

    def flop_dims(self, config) -> FlopDims:
        return encoder_classifier_dims(config, int(config.intermediate_size))

register(BertAdapter())
