"""Physical pruning: remove masked heads from the weights, so the model gets smaller and faster.

For each site, the kept heads' rows of the query, key and value projections and the matching
input columns of the output projection are kept; the rest is dropped. A site that loses every
head is replaced by :class:`EmptyAttention`, which outputs zeros of width 0 (so the output
projection yields just its bias, exactly what the masked model computes).

Pruning always works on a deep copy: the model passed in, often a shared cached one, is left as
it was. The removed heads are written into ``config.headprune_pruned_heads`` so that
``models.load_model`` can rebuild the smaller shapes when loading a saved pruned model.
"""
from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from .architectures import AttentionSite, find_sites
from .errors import FormatError
from .heads import HeadMask

CONFIG_KEY = "headprune_pruned_heads"   # {kind: {layer (str): [original head indices removed]}}


class EmptyAttention(nn.Module):
    """An attention whose heads were all removed: zero-width q/k/v, output = out-projection bias.

    It keeps zero-width projections under the original attribute names so that the module tree
    (and the saved state dict) keeps the same keys.
    """

    def __init__(self, site: AttentionSite, qkv_names: tuple[str, str, str], out_name: str | None) -> None:
        super().__init__()
        in_features = site.q.in_features
        for name, lin in zip(qkv_names, (site.q, site.k, site.v)):
            with warnings.catch_warnings():   # "initializing zero-element tensors is a no-op"
                warnings.simplefilter("ignore", UserWarning)
                empty = nn.Linear(in_features, 0, bias=lin.bias is not None, device=lin.weight.device,
                                  dtype=lin.weight.dtype)
            setattr(self, name, empty)
        self.out_name = out_name
        if out_name is not None:
            setattr(self, out_name, site.out)
        self.head_dim = site.head_dim
        self.num_heads = 0

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, None]:
        empty = hidden_states.new_zeros(*hidden_states.shape[:-1], 0)   # [batch, tokens, 0]
        if self.out_name is not None:
            return getattr(self, self.out_name)(empty), None
        return empty, None


def _child_name(parent: nn.Module, child: nn.Module) -> str:
    for name, module in parent.named_children():
        if module is child:
            return name
    raise RuntimeError(f"{type(child).__name__} is not a child of {type(parent).__name__}")


def _slice_linear(lin: nn.Linear, index: torch.Tensor, dim: int) -> None:
    """Keep only ``index`` along the weight's ``dim`` (0 = outputs, 1 = inputs), in place."""
    with torch.no_grad():
        weight = lin.weight.index_select(dim, index).clone()
        lin.weight = nn.Parameter(weight, requires_grad=lin.weight.requires_grad)
        if dim == 0 and lin.bias is not None:
            lin.bias = nn.Parameter(lin.bias.index_select(0, index).clone(), requires_grad=lin.bias.requires_grad)
    if dim == 0:
        lin.out_features = weight.shape[0]
    else:
        lin.in_features = weight.shape[1]


def _prune_site(site: AttentionSite, keep: list[int]) -> None:
    container = site.container
    if not keep:
        qkv = tuple(_child_name(container, lin) for lin in (site.q, site.k, site.v))
        out_name = _child_name(container, site.out) if site.out_inside else None
        _slice_linear(site.out, torch.zeros(0, dtype=torch.long, device=site.out.weight.device), 1)
        setattr(site.parent, site.attr, EmptyAttention(site, qkv, out_name))
        return
    d = site.head_dim
    index = torch.cat([torch.arange(h * d, (h + 1) * d) for h in keep]).to(site.q.weight.device)
    for lin in (site.q, site.k, site.v):
        _slice_linear(lin, index, 0)
    _slice_linear(site.out, index, 1)
    n = len(keep)
    for attr in ("num_attention_heads", "num_heads", "n_heads"):
        if hasattr(container, attr):
            setattr(container, attr, n)
    if hasattr(container, "all_head_size"):
        container.all_head_size = n * d


def prune_heads(model: nn.Module, mask: HeadMask) -> nn.Module:
    """A pruned deep copy of ``model`` with every head that ``mask`` removes physically gone.

    The copy's outputs equal those of ``model`` run under ``apply_mask(loaded, mask)`` (up to float
    rounding). ``model`` itself is not modified.
    """
    from .architectures import layout_of

    sites = find_sites(model)
    mask.check_fits(layout_of(sites))
    if getattr(model.config, CONFIG_KEY, None):
        raise FormatError("This model was already pruned; prune the original model with a combined mask instead.")
    pruned = copy.deepcopy(model)
    removed: dict[str, dict[str, list[int]]] = {}
    for site in find_sites(pruned):
        row = mask.kinds[site.kind][site.layer]
        keep = [h for h, v in enumerate(row) if v == 1]
        gone = [h for h, v in enumerate(row) if v == 0]
        if gone:
            removed.setdefault(site.kind, {})[str(site.layer)] = gone
            _prune_site(site, keep)
    setattr(pruned.config, CONFIG_KEY, removed)
    return pruned


def restructure_for_loading(model: nn.Module, removed: dict[str, dict[str, list[int]]]) -> None:
    """Give a freshly built full-size ``model`` the shapes recorded in ``removed``, in place.

    Used by ``load_model`` before it loads the weights of a saved pruned model.
    """
    for site in find_sites(model):
        gone = set(removed.get(site.kind, {}).get(str(site.layer), []))
        if gone:
            _prune_site(site, [h for h in range(site.num_heads) if h not in gone])
    setattr(model.config, CONFIG_KEY, removed)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def attention_parameter_count(model: nn.Module) -> int:
    """Parameters in the q/k/v/output projections of every attention site."""
    total = 0
    for s in find_sites(model):
        for lin in (s.q, s.k, s.v, s.out):
            total += lin.weight.numel() + (lin.bias.numel() if lin.bias is not None else 0)
    return total
