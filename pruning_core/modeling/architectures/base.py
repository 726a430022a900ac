"""The architecture extension point: one :class:`ArchitectureAdapter` per family of models.

An *attention site* is one multi-head attention of one layer (say, the cross-attention of
decoder layer 2). Every site has an output projection whose *input* is the concatenation of the
heads' outputs, head-major: ``[batch, tokens, heads * head_dim]``. Masking gates that input (a
forward pre-hook, in :mod:`pruning_core.modeling.masking`); physical pruning slices the query/key/value
outputs and the output projection's input columns.

An adapter owns everything that depends on the family: where the sites are, how to slice them
(separate or fused projections, ``nn.Linear`` or transformers' ``Conv1D``), which attributes hold
the head count, the dimensions the FLOP ceiling needs, how to read attention maps from a model
output, the task type and the transformers Auto class. Nothing else in the library looks at
``config.model_type`` or at module attribute names.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from pruning_core.core.heads import KINDS, HeadLayout


@dataclass
class AttentionSite:
    """One multi-head attention of one layer, as found in a model instance.

    ``q``, ``k`` and ``v`` are the modules that produce queries, keys and values; with a fused
    projection (GPT-2's ``c_attn``) they are the same module. Query heads and key/value heads are
    counted separately so that grouped-query attention (``num_kv_heads < num_heads``) fits.
    """

    kind: str                 # "encoder_self" | "decoder_self" | "cross"
    layer: int                # zero-based layer index within its stack
    parent: nn.Module         # the module holding ``container`` as attribute ``attr``
    attr: str                 # attribute name of the container (the attention module) in ``parent``
    q: nn.Module              # query projection (nn.Linear or Conv1D), outputs heads * head_dim
    k: nn.Module
    v: nn.Module
    out: nn.Module            # output projection, inputs heads * head_dim (the gate hook sits here)
    num_heads: int            # query heads now (fewer after pruning, 0 when all were removed)
    num_kv_heads: int         # key/value heads now (== num_heads without grouped-query attention)
    head_dim: int

    @property
    def container(self) -> nn.Module:
        return getattr(self.parent, self.attr)

    def projections(self) -> list[nn.Module]:
        """The distinct q/k/v/out modules (a fused projection counted once)."""
        seen: list[nn.Module] = []
        for m in (self.q, self.k, self.v, self.out):
            if not any(m is s for s in seen):
                seen.append(m)
        return seen


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
    """A model's layers as a stack that can be run from any layer on (:mod:`pruning_core.modeling.layer_cache`):
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
    (:mod:`pruning_core.modeling.layer_cache`), and what follows it.

    ``layers``: as :class:`LayerStack`'s, of attention kind ``encoder_self``: layer ``i``'s input depends only on
    that kind's mask rows ``0 .. i-1``, the last layer's output on all of them (a change of another kind starts
    there). ``finish(hidden, inputs)``: the model's outputs (``logits``, ``encoder_last_hidden_state``) from the last
    encoder layer's output ``[B, S, d]`` and the batch's inputs: the decoder and the output head, the same
    modules in the same order as the model's forward.
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


def keep_outputs(module: nn.Module, index: torch.Tensor) -> None:
    """Keep only the output features ``index`` of a Linear or Conv1D, in place (weight and bias)."""
    _keep(module, index, outputs=True)


def keep_inputs(module: nn.Module, index: torch.Tensor) -> None:
    """Keep only the input features ``index`` of a Linear or Conv1D, in place (the bias stays)."""
    _keep(module, index, outputs=False)


def _keep(module: nn.Module, index: torch.Tensor, outputs: bool) -> None:
    # nn.Linear stores weight as [out, in]; transformers' Conv1D as [in, out] (attributes nf = out, nx = in)
    conv1d = hasattr(module, "nf") and hasattr(module, "nx")
    dim = (1 if conv1d else 0) if outputs else (0 if conv1d else 1)
    index = index.to(module.weight.device)
    with torch.no_grad():
        weight = module.weight.index_select(dim, index).clone()
        module.weight = nn.Parameter(weight, requires_grad=module.weight.requires_grad)
        if outputs and module.bias is not None:
            module.bias = nn.Parameter(module.bias.index_select(0, index).clone(),
                                       requires_grad=module.bias.requires_grad)
    width = weight.shape[dim]
    if conv1d:
        setattr(module, "nf" if outputs else "nx", width)
    else:
        setattr(module, "out_features" if outputs else "in_features", width)


def head_index(heads: Sequence[int], head_dim: int, offset: int = 0) -> torch.Tensor:
    """Feature indices ``[offset + h*head_dim, offset + (h+1)*head_dim)`` of the given heads, in order."""
    if not heads:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat([torch.arange(offset + h * head_dim, offset + (h + 1) * head_dim) for h in heads])


def in_width(module: nn.Module) -> int:
    """Input features of a Linear or Conv1D."""
    return int(module.nx if hasattr(module, "nx") else module.in_features)


def out_width(module: nn.Module) -> int:
    """Output features of a Linear or Conv1D."""
    return int(module.nf if hasattr(module, "nf") else module.out_features)


def _weights(module: nn.Module, outputs: int, inputs: int) -> int:
    """Parameters of a Linear or Conv1D with ``outputs`` x ``inputs`` weights (plus ``outputs`` if it has a bias)."""
    return outputs * inputs + (outputs if getattr(module, "bias", None) is not None else 0)


class SharedKVLinear(nn.Linear):
    """A key or value projection of a grouped-query layer whose kept groups are uneven (say 2 and 3
    query heads left of 3): it stores each kept key/value head once, ``weight`` ``[kv_heads * head_dim,
    in]``, and gives every kept query head its group's head, ``forward(x)`` ``[..., heads * head_dim]``
    with head ``i`` the stored head ``head_index[i]``. The attention then runs one key/value head per
    query head (``num_key_value_groups = 1``), exactly as the unpruned model grouped them, and removing a
    query head never adds parameters. headprune's own format: ``head_index`` is derived again from the
    removed heads when a saved model is loaded (:func:`kv_index`), so the state dict keeps the keys and
    shapes of a plain ``nn.Linear``.
    """

    def __init__(self, linear: nn.Linear, head_index: Sequence[int], head_dim: int) -> None:
        # built on the meta device (no memory, no initialisation), then given the projection's own parameters
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta",
                         dtype=linear.weight.dtype)
        self.weight, self.bias = linear.weight, linear.bias
        self.head_dim = head_dim
        self.register_buffer("head_index", torch.tensor(list(head_index), dtype=torch.long,
                                                        device=linear.weight.device), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stored = super().forward(x)                                     # [..., kv_heads * head_dim]
        heads = stored.unflatten(-1, (-1, self.head_dim))               # [..., kv_heads, head_dim]
        return heads.index_select(-2, self.head_index).flatten(-2)      # [..., heads * head_dim]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, query heads read key/value heads {self.head_index.tolist()}"


class EmptyAttention(nn.Module):
    """An attention whose heads were all removed: zero-width projections, output = out-projection bias.

    It keeps the (zero-width) projections under their original attribute names so that the
    module tree, and the saved state dict, keep the same keys. ``out_name`` is None when the
    output projection lives outside the attention module (BERT): then the output is the empty
    ``[batch, tokens, 0]`` tensor and the outer projection adds its bias.
    """

    def __init__(self, children: Mapping[str, nn.Module], out_name: str | None, head_dim: int,
                 cache_layer: int | None = None) -> None:
        super().__init__()
        for name, module in children.items():
            setattr(self, name, module)
        self.out_name = out_name
        self.head_dim = head_dim
        self.num_heads = 0
        self.cache_layer = cache_layer

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, None]:
        empty = hidden_states.new_zeros(*hidden_states.shape[:-1], 0)   # [batch, tokens, 0]
        cache = kwargs.get("past_key_values")
        if cache is not None and self.cache_layer is not None:
            # a decoder self-attention still counts its tokens in the key/value cache: models (BART) read
            # the cached length of layer 0 to place the next token, and a cache of zero heads counts as
            # empty, so one zero placeholder head [batch, 1, tokens, head_dim] is cached (never read)
            cache = getattr(cache, "self_attention_cache", cache)
            kv = hidden_states.new_zeros(hidden_states.shape[0], 1, hidden_states.shape[1], self.head_dim)
            cache.update(kv, kv, self.cache_layer)
        if self.out_name is None:
            return empty, None
        out = getattr(self, self.out_name)
        if isinstance(out, nn.Linear):
            return out(empty), None
        # Conv1D cannot take a zero-width input (it flattens it with view(-1, 0)); its output is its bias
        width = int(out.nf)
        bias = out.bias if out.bias is not None else hidden_states.new_zeros(width)
        return bias.to(hidden_states.dtype).expand(*hidden_states.shape[:-1], width), None


class ArchitectureAdapter:
    """What headprune needs to know about one family of architectures.

    A subclass sets the class attributes and implements :meth:`find_sites`, :meth:`set_head_count`
    and :meth:`flop_dims`. The defaults of :meth:`prune_site` handle separate q/k/v projections,
    grouped-query attention included (:func:`kv_plan`); a fused projection overrides :meth:`slice_qkv`.
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

    # -- finding the sites ---------------------------------------------------------------------------
    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        """Every attention site of ``model`` (any order; :meth:`sites` sorts them)."""
        raise NotImplementedError

    def sites(self, model: nn.Module) -> list[AttentionSite]:
        """All attention sites of ``model``, sorted by kind (KINDS order), then layer."""
        return sorted(self.find_sites(model), key=lambda s: (KINDS.index(s.kind), s.layer))

    def layout(self, model: nn.Module) -> HeadLayout:
        return layout_of(self.sites(model))

    # -- physical pruning ----------------------------------------------------------------------------
    def prune_site(self, site: AttentionSite, keep: Sequence[int]) -> None:
        """Keep only the query heads ``keep`` of ``site``, in place; no heads left -> EmptyAttention.

        Key/value heads follow :func:`kv_plan`: a group's key/value head stays, once, while any of its
        query heads stays; when the kept groups are uneven the key and value projections become
        :class:`SharedKVLinear` (:func:`kv_index` says which stored head each query head reads).
        """
        keep = sorted(keep)
        kv_keep, shared = kv_plan(site, keep), kv_index(site, keep)
        self.slice_qkv(site, keep, kv_keep)
        if shared is not None:
            self.share_kv(site, shared)
        keep_inputs(site.out, head_index(keep, site.head_dim))
        if keep:
            self.set_head_count(site.container, len(keep), site.head_dim)
        else:
            setattr(site.parent, site.attr, self.empty_attention(site))

    def site_parameters(self, site: AttentionSite, keep: Sequence[int] | None = None) -> int:
        """Parameters of ``site`` (its projections and the attention module's other parameters) as it is,
        or with ``keep``, as :meth:`prune_site` would leave it: counted from the shapes, nothing copied.

        Queries keep ``len(keep)`` heads, keys and values the :func:`kv_plan` heads (each once),
        each ``head_dim`` rows of the projection's input width (plus bias); the output projection keeps
        ``len(keep) * head_dim`` input columns and its whole bias; a site left without heads loses the
        attention module's other parameters (it becomes an :class:`EmptyAttention`). A family whose
        :meth:`prune_site` slices otherwise overrides this beside it (``tests/test_pruning.py`` checks
        both agree for every family).
        """
        projections = site.projections()
        own = {id(p) for m in projections for p in m.parameters()}
        other = sum(p.numel() for p in site.container.parameters() if id(p) not in own)
        if keep is None:
            return other + sum(p.numel() for m in projections for p in m.parameters(recurse=False))
        keep = sorted(keep)
        kv_heads = len(kv_plan(site, keep))
        rows: dict[int, int] = {}                      # id(module) -> kept output rows (fused q|k|v add up)
        for module, heads in ((site.q, len(keep)), (site.k, kv_heads), (site.v, kv_heads)):
            rows[id(module)] = rows.get(id(module), 0) + heads * site.head_dim
        qkv = sum(_weights(m, rows[id(m)], in_width(m)) for m in projections if id(m) in rows)
        out = _weights(site.out, out_width(site.out), len(keep) * site.head_dim)      # the bias stays whole
        return qkv + out + (other if keep else 0)

    def slice_qkv(self, site: AttentionSite, keep: Sequence[int], kv_keep: Sequence[int]) -> None:
        """Keep the query outputs of heads ``keep`` and the key/value outputs of heads ``kv_keep``
        (key/value head ids, possibly repeated; separate projections)."""
        keep_outputs(site.q, head_index(keep, site.head_dim))
        kv_index = head_index(kv_keep, site.head_dim)
        for proj in (site.k, site.v):
            keep_outputs(proj, kv_index)

    def share_kv(self, site: AttentionSite, index: Sequence[int]) -> None:
        """Make ``site``'s (already sliced) key and value projections :class:`SharedKVLinear` with ``index``:
        query head ``i`` reads stored key/value head ``index[i]``. Separate ``nn.Linear`` projections;
        :func:`kv_index` is None for a family without grouped-query attention, so others never get here."""
        container = site.container
        for name, child in list(container.named_children()):
            if child is site.k or child is site.v:
                setattr(container, name, SharedKVLinear(child, index, site.head_dim))

    def set_head_count(self, attention: nn.Module, heads: int, head_dim: int) -> None:
        """Write the new head count into the attention module's own attributes."""
        raise NotImplementedError

    def empty_attention(self, site: AttentionSite) -> nn.Module:
        """The module that replaces an attention with no heads left (its projections already sliced)."""
        container = site.container
        wanted = site.projections()
        children = {name: m for name, m in container.named_children() if any(m is w for w in wanted)}
        out_name = next((name for name, m in children.items() if m is site.out), None)
        cache_layer = getattr(container, "layer_idx", None) if site.kind == "decoder_self" else None
        return EmptyAttention(children, out_name, site.head_dim, cache_layer)

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
        """``model``'s layers and output head for :mod:`pruning_core.modeling.layer_cache`, or None when the family
        (or this model class) does not say how its output head reads the last layer: evaluation then runs
        the whole model every time. Default: None; a family that overrides it is listed in
        ``tests/test_layer_cache.py`` (recomputed == full pass)."""
        return None

    def encoder_stack(self, model: nn.Module) -> EncoderStack | None:
        """An encoder-decoder's encoder layers and what follows them, for :mod:`pruning_core.modeling.layer_cache`;
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
        :class:`pruning_core.modeling.greedy.CachedSteps`), giving the same tokens as the model's decoder with
        its cache; None (the default): :mod:`pruning_core.modeling.greedy` runs the model's decoder."""
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

    # -- compute, attention maps ---------------------------------------------------------------------
    def flop_dims(self, config) -> FlopDims:
        """The dimensions the FLOP ceiling counts with, read from the config."""
        raise NotImplementedError

    def attention_maps(self, outputs) -> dict[str, list[torch.Tensor]]:
        """Per kind, one ``[batch, heads, q_tokens, k_tokens]`` tensor per layer, from a model output
        computed with ``output_attentions=True`` (eager attention). Missing maps give an empty list."""
        return {kind: list(getattr(outputs, attr, None) or ()) for kind, attr in self.attention_outputs.items()}


def kv_groups(site: AttentionSite) -> list[list[int]]:
    """The query head ids of each key/value head of ``site``, in key/value head order.

    transformers' grouped-query attention (``repeat_kv``) gives key/value head ``j`` the query heads
    ``j*g .. j*g + g-1`` with ``g = num_heads // num_kv_heads``; without grouping every head is its
    own group. An attention with no heads left has no groups.
    """
    if site.num_heads == 0 or site.num_kv_heads == 0:
        return []
    shared = getattr(site.k, "head_index", None)          # a pruned layer of uneven groups: SharedKVLinear
    if shared is not None:
        index = shared.tolist()
        return [[h for h, j in enumerate(index) if j == kv] for kv in range(site.num_kv_heads)]
    g = site.num_heads // site.num_kv_heads
    return [list(range(j * g, (j + 1) * g)) for j in range(site.num_kv_heads)]


def kv_groups_of(sites: Sequence[AttentionSite]) -> dict[str, tuple[tuple[tuple[int, ...], ...], ...]]:
    """Per kind, per layer, the query head ids of each key/value group (:func:`kv_groups`), for
    :func:`pruning_core.core.heads.group_scores` and the group presets."""
    kinds: dict[str, list[tuple[tuple[int, ...], ...]]] = {}
    for s in sites:
        kinds.setdefault(s.kind, []).append(tuple(tuple(g) for g in kv_groups(s)))
    return {k: tuple(v) for k, v in kinds.items()}


def _kept_per_group(site: AttentionSite, keep: Sequence[int]) -> list[tuple[int, int]]:
    """``(key/value head, query heads kept)`` for each group of ``site`` that keeps any of ``keep``."""
    groups = kv_groups(site)
    if site.num_heads and site.num_heads != sum(len(g) for g in groups):
        from pruning_core.core.errors import UnsupportedArchitectureError
        raise UnsupportedArchitectureError(
            f"{site.kind} layer {site.layer} has {site.num_heads} query heads, not a multiple of its "
            f"{site.num_kv_heads} key/value heads; it cannot be pruned physically (use masking).")
    counts = [(j, sum(1 for h in keep if h in group)) for j, group in enumerate(groups)]
    return [(j, c) for j, c in counts if c]


def kv_plan(site: AttentionSite, keep: Sequence[int]) -> list[int]:
    """The key/value heads (original ids, in order, each once) that query heads ``keep`` need: a
    group's key/value head stays while any of its query heads stays, and goes with the last one.

    When the kept groups are even (every group keeps the same number ``c`` of query heads), the
    attention's own uniform grouping fits (``num_key_value_groups = c``) and a stock config can
    describe the layer. When they are uneven (say 2 and 3 kept of 3), :func:`kv_index` maps each kept
    query head to its stored key/value head (:class:`SharedKVLinear`). Either way removing a query head
    never adds a parameter. Without grouped-query attention this is ``keep`` itself.
    """
    return [j for j, _ in _kept_per_group(site, keep)]


def kv_index(site: AttentionSite, keep: Sequence[int]) -> list[int] | None:
    """For kept query heads ``keep`` (sorted) of uneven groups: the position in :func:`kv_plan`'s list of
    the key/value head each one reads, e.g. ``[0, 0, 1]`` when group 0 keeps 2 and group 1 keeps 1.
    None when the kept groups are even (the attention's uniform grouping fits) or nothing is kept."""
    counts = _kept_per_group(site, keep)
    if len({c for _, c in counts}) <= 1:
        return None
    return [position for position, (_, c) in enumerate(counts) for _ in range(c)]


def layout_of(sites: Sequence[AttentionSite]) -> HeadLayout:
    """Heads per layer of each kind, from sites sorted as :meth:`ArchitectureAdapter.sites` sorts them."""
    kinds: dict[str, list[int]] = {}
    for s in sites:
        kinds.setdefault(s.kind, []).append(s.num_heads)
    return HeadLayout({k: tuple(v) for k, v in kinds.items()})


def heads_of(module: nn.Module, head_dim: int) -> int:
    """Heads feeding an output projection: its input width / head_dim (0 when no head is left)."""
    return in_width(module) // head_dim if head_dim else 0
