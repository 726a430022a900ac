"""Physical pruning: remove masked heads from the weights, so the model gets smaller and faster.

Each site keeps its kept heads' query/key/value outputs and the matching input columns of the output
projection (how is the adapter's business, :mod:`pruning_core.modeling.architectures`); a site that loses
every head becomes an :class:`~pruning_core.modeling.architectures.EmptyAttention` (the output projection
then yields its bias, as the masked model computes). Pruning works on a deep copy; the removed heads go into
``config.headprune_pruned_heads`` so loading rebuilds the shapes, or, when every layer keeps the same shape
and the family's config can say so (:func:`stock_shape`), ``save_pruned`` writes stock head counts instead.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import nn

from pruning_core.modeling.architectures import EmptyAttention, StockShape, adapter_for, kv_groups, layout_of
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask

CONFIG_KEY = "headprune_pruned_heads"   # {kind: {layer (str): [original head indices removed]}}
STOCK_KEY = "headprune_stock_config"    # true: the config's head counts are the pruned ones (a record only)

__all__ = ["CONFIG_KEY", "STOCK_KEY", "EmptyAttention", "HeadSaving", "StockShape", "attention_parameter_count",
           "describe_change", "head_savings", "parameter_count",
           "parameter_count_after", "prune_heads", "loads_in", "restructure_for_loading", "stock_shape"]


def prune_heads(model: nn.Module, mask: HeadMask, *, share_weights: bool = False) -> nn.Module:
    """A pruned deep copy of ``model`` with every head that ``mask`` removes physically gone.

    The copy's outputs equal those of ``model`` run under ``apply_mask(loaded, mask)`` (up to float
    rounding). ``model`` itself is not modified. ``share_weights``: the copy's tensors that pruning leaves whole
    (everything but the sliced projections) are ``model``'s own, not copies, so a copy costs its sliced
    projections in memory and time; for a copy that is only run (a timing), never trained or changed.
    """
    adapter = adapter_for(model)
    mask.check_fits(layout_of(adapter.sites(model)))
    if getattr(model.config, CONFIG_KEY, None):
        raise FormatError("This model was already pruned; prune the original model with a combined mask instead.")
    # slicing assigns new parameters (architectures.slicing), so the shared tensors are never written
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())} if share_weights else {}
    pruned = copy.deepcopy(model, shared)
    removed: dict[str, dict[str, list[int]]] = {}
    for site in adapter.sites(pruned):
        row = mask.kinds[site.kind][site.layer]
        keep = [h for h, v in enumerate(row) if v == 1]
        gone = [h for h, v in enumerate(row) if v == 0]
        if gone:
            removed.setdefault(site.kind, {})[str(site.layer)] = gone
            adapter.prune_site(site, keep)
    setattr(pruned.config, CONFIG_KEY, removed)
    return pruned


def restructure_for_loading(model: nn.Module, removed: dict[str, dict[str, list[int]]]) -> None:
    """Give a freshly built full-size ``model`` the shapes recorded in ``removed``, in place.

    Used by ``load_model`` before it loads the weights of a saved pruned model.
    """
    adapter = adapter_for(model)
    for site in adapter.sites(model):
        gone = set(removed.get(site.kind, {}).get(str(site.layer), []))
        if gone:
            adapter.prune_site(site, [h for h in range(site.num_heads) if h not in gone])
    setattr(model.config, CONFIG_KEY, removed)


def stock_shape(model: nn.Module) -> StockShape:
    """Whether a stock config can express ``model``'s attention shapes (see
    :meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.stock_shape`); an unpruned model always can."""
    if not getattr(model.config, CONFIG_KEY, None) or getattr(model.config, STOCK_KEY, False):
        return StockShape({})
    return adapter_for(model).stock_shape(model)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_count_after(model: nn.Module, mask: HeadMask) -> int:
    """``parameter_count(prune_heads(model, mask))``, by arithmetic on the sites' shapes: no copy is made.

    Each site whose row of ``mask`` removes a head changes by what its adapter's
    :meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.site_parameters` says (grouped-query
    key/value heads kept, once, while a query head of their group stays; an output projection's bias
    kept), as the FLOP ceiling counts from the config (:mod:`pruning_core.bench.ceiling`). Removing a
    head therefore never adds parameters.
    """
    adapter = adapter_for(model)
    sites = adapter.sites(model)
    mask.check_fits(layout_of(sites))
    total = parameter_count(model)
    for site in sites:
        row = mask.kinds[site.kind][site.layer]
        if 0 in row:
            total += adapter.site_parameters(site, [h for h, v in enumerate(row) if v == 1]) - \
                adapter.site_parameters(site)
    return total


@dataclass(frozen=True)
class HeadSaving:
    """What removing heads of one attention kind saves, from the first layer of that kind with heads.

    head: parameters one query head's removal saves while its key/value head stays (its ``W_Q`` rows and
    ``W_O`` columns; without grouped-query attention also its ``W_K``/``W_V`` rows, as each head is its own
    group); group_size: query heads sharing one key/value head (1 without grouping); kv_head: what the
    shared key/value head adds when the last query head of its group goes (0 without grouping).
    """

    head: int
    group_size: int
    kv_head: int


def head_savings(model: nn.Module) -> dict[str, HeadSaving]:
    """Per attention kind, :class:`HeadSaving` counted by the adapter's
    :meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.site_parameters` (what physical pruning removes)."""
    adapter = adapter_for(model)
    out: dict[str, HeadSaving] = {}
    for site in adapter.sites(model):
        groups = kv_groups(site)
        if site.kind in out or not groups:
            continue
        whole = adapter.site_parameters(site)
        first = groups[0]
        one = whole - adapter.site_parameters(site, [h for h in range(site.num_heads) if h != first[0]])
        if len(first) == 1:
            out[site.kind] = HeadSaving(one, 1, 0)
            continue
        group = whole - adapter.site_parameters(site, [h for h in range(site.num_heads) if h not in first])
        out[site.kind] = HeadSaving(one, len(first), group - len(first) * one)
    return out


def describe_change(before: int, after: int) -> str:
    """The parameter change in words: ``'2.4 % fewer'``, ``'2.4 % more'`` or ``'no change'``; the share is
    of ``before``."""
    if after == before:
        return "no change"
    share = abs(after - before) / before if before else 0.0
    return f"{share * 100:.1f} % {'fewer' if after < before else 'more'}"


def attention_parameter_count(model: nn.Module) -> int:
    """Parameters in the q/k/v/output projections of every attention site (a fused one counted once)."""
    total = 0
    for s in adapter_for(model).sites(model):
        for proj in s.projections():
            total += sum(p.numel() for p in proj.parameters(recurse=False))
    return total


def loads_in(model, where: str, saved_now: bool = False) -> str:
    """Where a model loads, in words: 'stock transformers ...' or 'headprune only: why; the export to use'.
    ``saved_now``: ``model`` is the pruned copy that ``save_pruned`` just wrote (with a stock config if it can)."""
    shape = stock_shape(model)
    counts = ", ".join(f"{k} {v}" for k, v in shape.fields.items())
    if shape.fields and not saved_now and getattr(model.config, CONFIG_KEY, None) \
            and not getattr(model.config, STOCK_KEY, False):
        return (f"headprune only: it was saved with its original head counts; prune the original model again to "
                f"write a stock config ({counts})")
    if shape.reason:
        return (f"headprune only: {shape.reason}. For other runtimes use `headprune export {where} --format onnx "
                "--out FILE.onnx`")
    return (f"stock transformers{f' ({counts})' if counts else ''}: "
            f"{adapter_for(model).auto_class}.from_pretrained({where!r}) needs no headprune")
