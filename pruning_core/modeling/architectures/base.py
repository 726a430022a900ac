"""The architecture extension point: one :class:`ArchitectureAdapter` per family of models.

An *attention site* is one multi-head attention of one layer. Its output projection's *input* is the
heads' outputs concatenated head-major, ``[batch, tokens, heads * head_dim]``: masking gates that input
(:mod:`pruning_core.modeling.masking`), physical pruning slices the query/key/value outputs and those
columns. An adapter owns everything that depends on the family: where the sites are, how they are sliced,
which attributes hold the head count, the dimensions the FLOP ceiling needs, the task type and Auto class.
Nothing else in the library looks at ``config.model_type`` or at module attribute names. A family writes
the three abstract methods; the rest is derived (:mod:`.derived`, :mod:`.slicing`, which also defines
:class:`AttentionSite`, so no module of this folder imports ``base`` back) or an optional hook. A family's module
registers its adapter (:func:`register`) in :data:`ARCHITECTURES`, ``config.model_type`` -> adapter.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from pruning_core.core.errors import UnsupportedArchitectureError, did_you_mean
from pruning_core.core.registry import Registry
from pruning_core.modeling.architectures.derived import DerivedMethods
from pruning_core.modeling.architectures.slicing import AttentionSite




@dataclass(frozen=True)
class StackDims:
    """One stack of layers (the encoder, or the decoder) as the FLOP ceiling needs it."""

    layers: int
    heads: int                # query heads per layer in the config
    kv_heads: int             # key/value heads per layer (== heads without grouped-query attention)
    head_dim: int
    ffn_dim: int              # feed-forward inner size
    ffn_matrices: int = 2     # 2: up + down (BERT-style); 3: gate + up + down (gated, Llama-style)


@dataclass(frozen=True)
class FlopDims:
    """Everything :func:`pruning_core.bench.flop_ceiling` reads from a model's config.

    ``kind_stack`` says which stack each attention kind lives in ("encoder" or "decoder");
    cross-attention reads encoder tokens for its keys and values.
    """

    hidden: int
    stacks: Mapping[str, StackDims]          # "encoder" / "decoder" -> dims
    kind_stack: Mapping[str, str]            # attention kind -> stack name
    is_encoder_decoder: bool
    head_kind: str                           # "classifier" (once per sequence) | "lm_head" (per token)
    head_size: int                           # labels, or vocabulary size
    output_stack: str                        # the stack whose tokens the output head reads


@dataclass(frozen=True)
class LayerStack:
    """A model's layers as a stack that can be run from any layer on (:mod:`pruning_core.modeling.inference.layer_cache`):
    the model computes ``head(layers[-1](... layers[0](x, *a0, **k0) ...))`` and returns it as ``output(logits=...)``.

    ``kind``: the attention kind of these layers; layer ``i``'s input depends only on the mask rows
    ``0 .. i-1`` of that kind. ``layers``: called ``layer(hidden [B, T, H], *args, **kwargs)`` exactly as the
    model's own loop calls them (the extra arguments are recorded from a full forward pass); each returns
    the next hidden state, or a tuple whose first element is it. ``head``: the last layer's output
    ``[B, T, H]`` -> logits (``[B, classes]`` for a classifier, ``[B, T, V]`` for a language model), the same
    modules in the same order as the model's forward. ``output``: the class of the model's outputs, built from
    the logits alone. ``first_token``: the head reads the last layer's output at the first token only (repair
    then fits the last layer on that token alone: :mod:`pruning_core.compress.tuning`).
    """

    kind: str
    layers: Sequence[nn.Module]
    head: Callable[[torch.Tensor], torch.Tensor]
    first_token: bool = False
    output: Callable[..., object] = SequenceClassifierOutput

    def finish(self, hidden: torch.Tensor, inputs: Mapping[str, torch.Tensor]) -> object:
        """The model's outputs (``.logits``) from the last layer's output ``hidden`` ``[B, T, H]``, as
        :meth:`EncoderStack.finish` gives them (``inputs``: the batch's, unread here)."""
        return self.output(logits=self.head(hidden))


@dataclass(frozen=True)
class EncoderStack:
    """An encoder-decoder's encoder as a stack of layers that can be run from any layer on
    (:mod:`pruning_core.modeling.inference.layer_cache`), and what follows it.

    ``layers``: as :class:`LayerStack`'s, of attention kind ``encoder_self``: layer ``i``'s input depends only on
    that kind's mask rows ``0 .. i-1``, the last layer's output on all of them (a change of another kind starts
    there). ``finish(hidden, inputs)``: the model's outputs (``logits``, ``encoder_last_hidden_state``) from the last
    encoder layer's output ``[B, S, d]`` and the batch's inputs: the decoder and the output head, the same
    modules in the same order as the model's forward; an input ``past_key_values`` (a key/value cache whose
    cross-attention part is already filled) goes to the model as it is.
    """

    layers: Sequence[nn.Module]
    finish: Callable[[torch.Tensor, Mapping[str, torch.Tensor]], object]
    kind: str = "encoder_self"


@dataclass(frozen=True)
class FeedForward:
    """The feed-forward block after an attention site: ``norm(out(act(...)) + x)`` with ``x`` the input of
    ``residual`` (its first positional argument); ``out`` is the second projection (nn.Linear), whose input is
    the ``[B, T, ffn_dim]`` neuron activations. Repair can tune one scale per neuron (Kwon et al.'s neuron mask)."""

    out: nn.Module
    residual: nn.Module
    norm: nn.Module | None = None

    @classmethod
    def of_encoder_layer(cls, layer: nn.Module) -> "FeedForward":
        """BERT's layout (also MPNet's): ``output.LayerNorm(output.dense(intermediate(a)) + a)``, ``a`` the
        attention block's output (the input of ``intermediate``)."""
        return cls(layer.output.dense, layer.intermediate, layer.output.LayerNorm)


@dataclass(frozen=True)
class StockShape:
    """Whether a stock transformers config can build a pruned model's shapes, and how.

    ``fields`` are the config values to write (``num_attention_heads``, ``num_key_value_heads``,
    ``head_dim``) so that ``from_pretrained`` in a process without headprune builds exactly these
    projections; empty when no stock config can, and ``reason`` then says why in one sentence.
    """

    fields: Mapping[str, int]
    reason: str = ""



class ArchitectureAdapter(DerivedMethods, ABC):
    """What headprune needs to know about one family of architectures.

    A family sets the class attributes and writes the three abstract methods: :meth:`find_sites`,
    :meth:`set_head_count` and :meth:`flop_dims`. Everything else is derived from them
    (:class:`~.derived.DerivedMethods`: sorted sites, the layout, physical pruning of separate or
    grouped-query projections, parameter counts, attention maps) or is an optional hook below whose
    default says "not known" (the library then takes the general path).
    """

    name: ClassVar[str]                          # family name, recorded as ``LoadedModel.arch``
    model_types: ClassVar[tuple[str, ...]]       # ``config.model_type`` values it handles
    task_type: ClassVar[str]                     # "classification" | "translation" | "language_model"
    auto_class: ClassVar[str]                    # transformers Auto class used to load it
    attention_outputs: ClassVar[Mapping[str, str]]   # kind -> model-output attribute with its maps
    # transformers attention implementations the family has, preferred first; load_model falls back to
    # the first when asked for one the family lacks (recorded in config._attn_implementation)
    attn_implementations: ClassVar[tuple[str, ...]] = ("eager", "sdpa")
    # kinds a family of its shape would have but this one has no heads of, and why (shown beside the map)
    absent_kinds: ClassVar[Mapping[str, str]] = {}

    # -- what every family writes ---------------------------------------------------------------------
    @abstractmethod
    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        """Every attention site of ``model`` (any order; :meth:`sites` sorts them)."""

    @abstractmethod
    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        """Write the new head count into the attention module's own attributes."""

    @abstractmethod
    def flop_dims(self, config) -> FlopDims:
        """The dimensions the FLOP ceiling counts with, read from the config."""

    # -- optional hooks: a family that knows more says so --------------------------------------------
    def stock_shape(self, model: nn.Module) -> StockShape:
        """The config fields that let stock transformers build ``model``'s (pruned) attention shapes, or why
        none can. Default: none, for families whose config derives each head's size from the hidden size
        and the head count (BERT: ``hidden_size / num_attention_heads``), so fewer heads of the same
        size cannot be written, even when every layer keeps the same number."""
        cls = type(model.config).__name__
        return StockShape({}, f"{cls} derives each head's size from the hidden size divided by the head count, "
                              "so fewer heads of the same size have no stock config, even when every layer keeps "
                              "the same number")

    # -- running from a layer on ---------------------------------------------------------------------
    def layer_stack(self, model: nn.Module) -> LayerStack | None:
        """``model``'s layers and output head for :mod:`pruning_core.modeling.inference.layer_cache`, or None when the family
        (or this model class) does not say how its output head reads the last layer: evaluation then runs
        the whole model every time. Default: None; a family that overrides it is listed in
        ``tests/modeling/test_layer_cache.py`` (recomputed == full pass)."""
        return None

    def encoder_stack(self, model: nn.Module) -> EncoderStack | None:
        """An encoder-decoder's encoder layers and what follows them, for :mod:`pruning_core.modeling.inference.layer_cache`;
        None (the default): evaluation runs the whole model. A family that overrides it is listed in
        ``tests/modeling/test_layer_cache.py`` (recomputed == full pass)."""
        return None

    def logits_layer(self, model: nn.Module) -> nn.Module | None:
        """The ``nn.Linear`` (``model``'s output embeddings) whose output is exactly its logits, nothing added or
        capped after it, so that a loss can project the positions it reads alone
        (:meth:`pruning_core.tasks.language_model.LanguageModelTask.forward_losses`); None (the default) where the
        family does not say: the whole logits are computed."""
        return None

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        """The norm between the last layer and :meth:`logits_layer` (the logits are ``logits_layer(final_norm(h))``),
        what direct logit attribution (:mod:`pruning_core.analysis.logit_attribution`) scales by; None (the
        default) where the family does not say."""
        return None

    # -- greedy decoding -------------------------------------------------------------------------------
    def decoder_steps(self, model: nn.Module, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor):
        """Lean greedy decoding steps of ``model``'s decoder over ``encoder_hidden`` ``[B, S, d]`` (an object
        with ``step(token [b]) -> hidden [b, d]`` and ``keep(rows)``, as
        :class:`pruning_core.modeling.inference.greedy.CachedSteps`), giving the same tokens as the model's decoder with
        its cache; None (the default): :mod:`pruning_core.modeling.inference.greedy` runs the model's decoder."""
        return None

    # -- where the residual joins --------------------------------------------------------------------
    def residual_source(self, site: AttentionSite) -> nn.Module | None:
        """The module whose input (its first positional argument, or ``hidden_states``) is the tensor this
        family adds to ``site``'s output projection output as the residual, before any LayerNorm after the
        sum; None where the adapter does not say (repair then fits the output projection's output alone,
        :mod:`pruning_core.compress.tuning`). The module must run before ``site.out`` in the forward pass."""
        return None

    def feed_forward(self, model: nn.Module, site: AttentionSite) -> FeedForward | None:
        """The feed-forward block that follows ``site`` in ``model`` (encoder classifiers), or None where the
        adapter does not say: repair then tunes attention only."""
        return None

    def post_norm(self, site: AttentionSite) -> nn.Module | None:
        """The LayerNorm applied right after ``site``'s residual sum (post-LN families), or None (pre-LN, or not
        said): ``target="normed"`` repair weighs each layer's error by its Jacobian (:mod:`pruning_core.compress`)."""
        return None


# -- the registry: ``config.model_type`` -> adapter instance (one per family) ---------------------------
ARCHITECTURES: Registry[ArchitectureAdapter] = Registry(
    "architecture", UnsupportedArchitectureError, "Use a model of one of these types.")


def register(adapter: ArchitectureAdapter) -> ArchitectureAdapter:
    """Register ``adapter`` under each of its ``model_types`` (a name registered twice raises)."""
    for model_type in adapter.model_types:
        ARCHITECTURES.add(model_type, adapter, description=f"{adapter.name} ({adapter.task_type})",
                          family=adapter.name, task_type=adapter.task_type)
    return adapter


def _model_type(model_or_config) -> str:
    if isinstance(model_or_config, str):
        return model_or_config
    config = getattr(model_or_config, "config", model_or_config)     # model or LoadedModel -> config
    return str(getattr(config, "model_type", type(config).__name__))


def adapter_for(model_or_config) -> ArchitectureAdapter:
    """The adapter for a ``config.model_type`` string, a config, a model or a LoadedModel.

    Raises:
        UnsupportedArchitectureError: no adapter handles that model type (the message lists those that do).
    """
    model_type = _model_type(model_or_config)
    if model_type not in ARCHITECTURES:
        names = ARCHITECTURES.names()
        raise UnsupportedArchitectureError(
            f"Architecture {model_type!r} is not supported.{did_you_mean(model_type, names)} "
            f"Supported model types: {', '.join(names)}. Use a model of one of these types.")
    return ARCHITECTURES.get(model_type)


def supported_model_types(task_type: str | None = None) -> list[str]:
    """Registered model types, optionally only those of one task type ("classification", ...)."""
    return [n for n in ARCHITECTURES.names()
            if task_type is None or ARCHITECTURES.entry(n).meta["task_type"] == task_type]
