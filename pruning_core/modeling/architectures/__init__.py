"""Architecture adapters: everything headprune knows about each model family, one module per family.

- :mod:`.base`: the :class:`ArchitectureAdapter` contract, the FLOP dimensions (:class:`FlopDims`) and the
  registry, ``config.model_type`` -> adapter (:func:`adapter_for` raises
  :class:`~pruning_core.core.errors.UnsupportedArchitectureError` with "did you mean");
  :mod:`.slicing`: :class:`AttentionSite`, slicing helpers and :class:`EmptyAttention`.
- one module per family (``bert``, ``distilbert``, ``seq2seq``, ``gpt2``, ...). Every module of
  this package other than ``base``, ``derived`` and ``slicing`` is imported here and registers its adapter,
  so adding a family is adding one file.
"""
from __future__ import annotations

import importlib
import pkgutil

from torch import nn

from pruning_core.core.heads import HeadLayout
from pruning_core.modeling.architectures.base import (
    ARCHITECTURES,
    ArchitectureAdapter,
    AttentionSite,
    EncoderStack,
    FeedForward,
    FlopDims,
    LayerStack,
    StackDims,
    StockShape,
    adapter_for,
    register,
    supported_model_types,
)
from pruning_core.modeling.architectures.slicing import (
    EmptyAttention,
    SharedKVLinear,
    keep_inputs,
    keep_outputs,
    kv_groups,
    kv_groups_of,
    kv_index,
    kv_plan,
    layout_of,
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in ("base", "derived", "slicing"):
        importlib.import_module(f"{__name__}.{_module}")


def find_sites(model: nn.Module) -> list[AttentionSite]:
    """All attention sites of ``model``, sorted by kind (KINDS order), then layer."""
    return adapter_for(model).sites(model)


def layout_for(model: nn.Module) -> HeadLayout:
    """Heads per layer of each attention kind of ``model``."""
    return layout_of(find_sites(model))


__all__ = ["ARCHITECTURES", "ArchitectureAdapter", "AttentionSite", "EmptyAttention", "FeedForward", "FlopDims",
           "EncoderStack", "LayerStack", "SharedKVLinear", "StackDims", "StockShape",
           "adapter_for", "find_sites", "keep_inputs", "keep_outputs", "kv_groups", "kv_groups_of", "kv_index", "kv_plan",
           "layout_for", "layout_of", "register", "supported_model_types"]
