"""Repaired points for a pruning curve (``headprune curve --repair``).

For each point's mask, :func:`pruning_core.compress.tuning.repair_mask` tunes a copy on the calibration
examples (least-squares scales; FLAP's bias compensation when asked) and the copy is evaluated on the
curve's own examples. The mask is the curve's (the scorer's order): no budgeted search and no
rearrangement, so the repaired curve shows what tuning adds to the same heads removed. The points keep
their fields and gain ``repaired_metric``, ``repaired_loss`` and the interval ``repaired_low`` /
``repaired_high`` (``headprune.curve/1``: readers that do not know them ignore them).

:func:`evaluate_repaired` is one such point: a mask's metric after repair, for callers that hold masks
rather than a curve (``benchmarks/scorers.py``).
"""
from __future__ import annotations

from dataclasses import replace

from pruning_core.evaluation.experiments import CurveResult
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.results import EvalResult
from pruning_core.compress.tuning import RepairResult, repair_mask


def evaluate_repaired(loaded, task, data, mask: HeadMask, calibration, *, bias_compensation: bool = False,
                      batch_size: int = 64, progress: ProgressCallback | None = None
                      ) -> tuple[EvalResult, RepairResult]:
    """``mask``'s (1 = keep) metric on ``data`` after :func:`repair_mask` tunes a copy on ``calibration``
    (encoded examples, labels unread), and the repair's record. ``loaded`` is only read; a full mask
    still runs the (no-op) repair, so the result is the unpruned model's metric."""
    tuned = repair_mask(loaded, mask, calibration, bias_compensation=bias_compensation, batch_size=batch_size,
                        progress=progress)
    return task.evaluate(loaded.derive(tuned.model), data, None, batch_size=batch_size), tuned


def repaired_curve(loaded, task, data, curve: CurveResult, calibration, *, bias_compensation: bool = False,
                   batch_size: int = 64, progress: ProgressCallback | None = None) -> CurveResult:
    """``curve`` with every point's repaired metric; ``calibration``: encoded examples to tune on (labels unread)."""
    points = []
    for i, point in enumerate(curve.points):
        mask = HeadMask.from_lists(point.mask)
        if mask.is_full():
            points.append(replace(point, repaired_metric=point.metric, repaired_loss=point.loss,
                                  repaired_low=point.low, repaired_high=point.high))
        else:
            ev, _ = evaluate_repaired(loaded, task, data, mask, calibration, bias_compensation=bias_compensation,
                                      batch_size=batch_size)
            low, high = ev.interval if ev.interval is not None else (None, None)
            points.append(replace(point, repaired_metric=ev.metric, repaired_loss=ev.loss, repaired_low=low,
                                  repaired_high=high))
        report(progress, "curve:repair", i + 1, len(curve.points), f"{point.heads_removed} heads removed")
    settings = {**curve.provenance.get("settings", {}),
                "repair": {"method": "least-squares head scales (Kwon et al. 2022)", "bias_compensation": bias_compensation,
                           "calibration_split": calibration.split, "calibration_examples": calibration.n_examples}}
    return replace(curve, points=tuple(points), provenance={**curve.provenance, "settings": settings})
