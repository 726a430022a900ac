"""What every adapter gets without writing it: the methods derived from the few a family writes
(:class:`~.base.ArchitectureAdapter`'s abstract ones). A family overrides one of these only where its
attention is built otherwise (a fused q|k|v projection overrides :meth:`DerivedMethods.slice_qkv`).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from pruning_core.core.heads import KINDS, HeadLayout
from pruning_core.modeling.architectures.slicing import (
    AttentionSite,
    EmptyAttention,
    SharedKVLinear,
    kept_weights,
    head_index,
    in_width,
    keep_inputs,
    keep_outputs,
    kv_index,
    kv_plan,
    layout_of,
    out_width,
)


class DerivedMethods:
    """The adapter methods built on ``find_sites`` and ``set_head_count`` (mixed into the adapter)."""

    def sites(self, model: nn.Module) -> list[AttentionSite]:
        """All attention sites of ``model``, sorted by kind (KINDS order), then layer."""
        return sorted(self.find_sites(model), key=lambda s: (KINDS.index(s.kind), s.layer))

    def layout(self, model: nn.Module) -> HeadLayout:
        return layout_of(self.sites(model))

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
        :meth:`prune_site` slices otherwise overrides this beside it (``tests/modeling/test_pruning.py`` checks
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
        qkv = sum(kept_weights(m, rows[id(m)], in_width(m)) for m in projections if id(m) in rows)
        out = kept_weights(site.out, out_width(site.out), len(keep) * site.head_dim)      # the bias stays whole
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

    def empty_attention(self, site: AttentionSite) -> nn.Module:
        """The module that replaces an attention with no heads left (its projections already sliced)."""
        container = site.container
        wanted = site.projections()
        children = {name: m for name, m in container.named_children() if any(m is w for w in wanted)}
        out_name = next((name for name, m in children.items() if m is site.out), None)
        cache_layer = getattr(container, "layer_idx", None) if site.kind == "decoder_self" else None
        return EmptyAttention(children, out_name, site.head_dim, cache_layer)

    def attention_maps(self, outputs) -> dict[str, list[torch.Tensor]]:
        """Per kind, one ``[batch, heads, q_tokens, k_tokens]`` tensor per layer, from a model output
        computed with ``output_attentions=True`` (eager attention). Missing maps give an empty list."""
        return {kind: list(getattr(outputs, attr, None) or ()) for kind, attr in self.attention_outputs.items()}
