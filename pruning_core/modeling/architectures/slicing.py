"""An attention site and slicing its weights: rows and columns of projections, the grouped-query
key/value plan (which key/value heads stay, and which one each query head reads), the module that
stands in for an attention left without heads. Pure functions of modules and sites; the adapter's
derived methods (:mod:`.derived`) call them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from pruning_core.core.heads import HeadLayout


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


def kept_weights(module: nn.Module, outputs: int, inputs: int) -> int:
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
