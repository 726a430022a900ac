"""``evaluate_repaired``: a mask's metric after repair, the one path ``curve --repair`` and
``benchmarks/scorers.py`` share, on tiny random models."""
from __future__ import annotations

import pytest
import torch

from pruning_core.evaluation.experiments import CurvePoint, CurveResult
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import gate_heads, installed_hook_count
from pruning_core.compress import evaluate_repaired, repaired_curve
from scorer_cases import case


def _mask(layout) -> HeadMask:
    """Heads 1 and 2 of every kind's last layer and head 0 of its first removed."""
    mask = HeadMask.full(layout)
    for kind, rows in layout.kinds.items():
        mask = mask.toggled(kind, len(rows) - 1, 1).toggled(kind, len(rows) - 1, 2).toggled(kind, 0, 0)
    return mask


def test_the_metric_is_the_masked_model_with_the_tuned_scales(tmp_path):
    """Llama (grouped-query): on the tiny random classifiers the loss hardly moves with the heads (1e-6)."""
    lm, task, split = case("llama", tmp_path)
    data = task.encode(lm, split, None)
    mask = _mask(lm.layout)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    ev, tuned = evaluate_repaired(lm, task, data, mask, data, bias_compensation=False, batch_size=4)
    assert installed_hook_count(lm.model) == 0
    assert all(torch.equal(before[k], v) for k, v in lm.model.state_dict().items())   # the teacher is only read
    assert any(s != 1.0 for l in tuned.layers for s in l.scales), "repair changed some scale"
    # the same model built another way: the original weights, each head gated by its tuned scale (0 = removed)
    gates = {k: [torch.tensor(r, dtype=torch.float32) for r in rows] for k, rows in mask.kinds.items()}
    for l in tuned.layers:
        for h, s in zip(l.kept, l.scales):
            gates[l.kind][l.layer][h] = s
    with gate_heads(lm.model, lm.sites, gates):
        expected = task.evaluate(lm, data, None, batch_size=4)
    masked = task.evaluate(lm, data, mask, batch_size=4)
    # (s * W) z against W (s * z): float32 rounding ~1e-7 relative per product through 2 tiny layers; the mean
    # loss averages a few dozen tokens' losses, so 1e-5 relative bounds it with room. Repair moves the loss by
    # ~4e-4 relative here (measured), so the masked model alone is told apart
    assert ev.loss == pytest.approx(expected.loss, rel=1e-5)
    assert abs(ev.loss - masked.loss) > 1e-4 * abs(masked.loss), "the repaired model is not the masked one"


def test_a_full_mask_gives_the_unpruned_metric_and_the_curve_uses_the_same_path(tmp_path):
    lm, task, split = case("bert", tmp_path)
    data = task.encode(lm, split, None)
    full = task.evaluate(lm, data, None, batch_size=4)
    ev, tuned = evaluate_repaired(lm, task, data, HeadMask.full(lm.layout), data, batch_size=4)
    assert tuned.layers == [] and ev.metric == full.metric
    assert ev.loss == pytest.approx(full.loss, rel=1e-6)     # a deep copy of the same weights: same float32 sums
    mask = _mask(lm.layout)
    ev, _ = evaluate_repaired(lm, task, data, mask, data, bias_compensation=True, batch_size=4)
    masked = task.evaluate(lm, data, mask, batch_size=4)
    point = CurvePoint(fraction_removed=0.5, heads_removed=len(mask.removed()), metric=masked.metric,
                       loss=masked.loss, mask={k: [list(r) for r in rows] for k, rows in mask.kinds.items()})
    curve = CurveResult(method="gradient", metric_name=masked.metric_name, step=0.5, rescore=False,
                        total_heads=lm.layout.total_heads, n_examples=data.n_examples, points=(point,))
    got = repaired_curve(lm, task, data, curve, data, bias_compensation=True, batch_size=4).points[0]
    assert got.repaired_metric == ev.metric and got.repaired_loss == pytest.approx(ev.loss, rel=1e-6)
