"""Architecture adapters: where each attention site of a supported model lives.

An *attention site* is one multi-head attention of one layer (say, the cross-attention of
decoder layer 2). For each site we need its query/key/value projections (sliced by physical
pruning) and its output projection, whose *input* is the concatenation of the heads' outputs,
head-major: ``[batch, tokens, heads * head_dim]``. Masking gates that input; pruning slices the
output projection's input columns.

One registry maps ``config.model_type`` to an adapter. Adding an architecture means adding one
adapter here, nothing elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from .errors import UnsupportedArchitectureError, did_you_mean
from .heads import KINDS, HeadLayout


@dataclass
class AttentionSite:
    """One multi-head attention of one layer, as found in a model instance."""

    kind: str                 # "encoder_self" | "decoder_self" | "cross"
    layer: int                # zero-based layer index within its stack
    parent: nn.Module         # the module holding ``container`` as attribute ``attr``
    attr: str                 # attribute name of the container in ``parent``
    q: nn.Linear              # query projection, out_features = heads * head_dim
    k: nn.Linear
    v: nn.Linear
    out: nn.Linear            # output projection, in_features = heads * head_dim
    head_dim: int
    out_inside: bool          # True when ``out`` is a child of the container (BART), False (BERT)

    @property
    def container(self) -> nn.Module:
        return getattr(self.parent, self.attr)

    @property
    def num_heads(self) -> int:
        return self.out.in_features // self.head_dim if self.head_dim else 0


@dataclass(frozen=True)
class Adapter:
    """How to find the attention sites of one family of architectures."""

    name: str
    model_types: tuple[str, ...]
    task_type: str                                    # "classification" | "translation"
    find_sites: Callable[[nn.Module], list[AttentionSite]]
    auto_class: str                                   # transformers Auto class used to load it


def _head_dim(module: nn.Module, config) -> int:
    for attr in ("attention_head_size", "head_dim"):
        if hasattr(module, attr):
            return int(getattr(module, attr))
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads")
    return config.hidden_size // heads


def _bert_sites(model: nn.Module) -> list[AttentionSite]:
    base = model.base_model
    sites = []
    for i, layer in enumerate(base.encoder.layer):
        attn = layer.attention
        self_attn = attn.self
        sites.append(AttentionSite("encoder_self", i, attn, "self", self_attn.query, self_attn.key,
                                   self_attn.value, attn.output.dense,
                                   _head_dim(self_attn, model.config), out_inside=False))
    return sites


def _distilbert_sites(model: nn.Module) -> list[AttentionSite]:
    base = model.base_model
    sites = []
    for i, layer in enumerate(base.transformer.layer):
        a = layer.attention
        sites.append(AttentionSite("encoder_self", i, layer, "attention", a.q_lin, a.k_lin, a.v_lin,
                                   a.out_lin, _head_dim(a, model.config), out_inside=True))
    return sites


def _seq2seq_sites(model: nn.Module) -> list[AttentionSite]:
    base = model.model  # BartModel / MarianModel inside the ...ForConditionalGeneration
    sites = []
    for i, layer in enumerate(base.encoder.layers):
        a = layer.self_attn
        sites.append(AttentionSite("encoder_self", i, layer, "self_attn", a.q_proj, a.k_proj, a.v_proj,
                                   a.out_proj, a.head_dim, out_inside=True))
    for i, layer in enumerate(base.decoder.layers):
        a = layer.self_attn
        sites.append(AttentionSite("decoder_self", i, layer, "self_attn", a.q_proj, a.k_proj, a.v_proj,
                                   a.out_proj, a.head_dim, out_inside=True))
        c = layer.encoder_attn
        sites.append(AttentionSite("cross", i, layer, "encoder_attn", c.q_proj, c.k_proj, c.v_proj,
                                   c.out_proj, c.head_dim, out_inside=True))
    return sites


ADAPTERS: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    for model_type in adapter.model_types:
        ADAPTERS[model_type] = adapter
    return adapter


register(Adapter("bert-encoder", ("bert", "roberta", "electra", "xlm-roberta", "camembert"),
                 "classification", _bert_sites, "AutoModelForSequenceClassification"))
register(Adapter("distilbert", ("distilbert",), "classification", _distilbert_sites,
                 "AutoModelForSequenceClassification"))
register(Adapter("seq2seq", ("bart", "marian"), "translation", _seq2seq_sites, "AutoModelForSeq2SeqLM"))


def adapter_for(model_type: str) -> Adapter:
    """The adapter for ``config.model_type``, or a clear error listing what is supported."""
    try:
        return ADAPTERS[model_type]
    except KeyError:
        raise UnsupportedArchitectureError(
            f"Architecture {model_type!r} is not supported.{did_you_mean(model_type, ADAPTERS)} "
            f"Supported model types: {', '.join(sorted(ADAPTERS))}. Use a model of one of these types.") from None


def find_sites(model: nn.Module) -> list[AttentionSite]:
    """All attention sites of ``model``, sorted by kind (KINDS order), then layer."""
    sites = adapter_for(model.config.model_type).find_sites(model)
    return sorted(sites, key=lambda s: (KINDS.index(s.kind), s.layer))


def layout_of(sites: list[AttentionSite]) -> HeadLayout:
    kinds: dict[str, list[int]] = {}
    for s in sites:
        kinds.setdefault(s.kind, []).append(s.num_heads)
    return HeadLayout({k: tuple(v) for k, v in kinds.items()})
