"""Retraining-free compression and repair of a head-pruned model (Kwon et al. 2022; FLAP's bias compensation).

Read top to bottom, one step per module:

- :mod:`.search`: the budgeted mask search (heads, multiply-adds, or measured latency via :mod:`.latency`);
- :mod:`.rearrange`: per-layer swaps by the block-diagonal Fisher of the gate gradients;
- :mod:`.capture`, :mod:`.least_squares`, :mod:`.tuning`: least-squares scales of the kept heads, per layer,
  against the unpruned layer's output, folded into W_O on a copy; FLAP's bias compensation;
- :mod:`.compress`: all of it, then physical pruning, with a report of every step;
- :mod:`.curve`: repaired points for a pruning curve.
"""
from __future__ import annotations

from pruning_core.compress.compress import (
    COMPRESS_FORMAT,
    CompressConfig,
    CompressReport,
    CompressResult,
    compress,
    evaluate_compression,
    summary_json,
)
from pruning_core.compress.curve import evaluate_repaired, repaired_curve
from pruning_core.compress.rearrange import LayerRearrangement, block_fisher_loss, rearrange, rearrange_layer
from pruning_core.compress.search import (
    BUDGET_KINDS,
    Budget,
    BudgetError,
    SearchResult,
    removal_order,
    search_mask,
)
from pruning_core.compress.tuning import LayerRepair, RepairResult, repair_mask

__all__ = ["BUDGET_KINDS", "COMPRESS_FORMAT", "Budget", "BudgetError", "CompressConfig", "CompressReport",
           "CompressResult", "LayerRearrangement", "LayerRepair", "RepairResult", "SearchResult", "block_fisher_loss",
           "compress", "evaluate_compression", "evaluate_repaired", "rearrange", "rearrange_layer", "removal_order",
           "repair_mask", "repaired_curve", "search_mask", "summary_json"]
