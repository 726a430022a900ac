"""The residual-aware least-squares target of repair (pruning_core.compress.tuning, ``target="residual"``): each
layer fits ``W_O z + b + x`` before its LayerNorm, so drift from earlier pruned layers is corrected too."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fake_task import FakeTask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.pruning import prune_heads
from pruning_core.compress import repair_mask
from pruning_core.compress.capture import capture_site, run_to_site
from scorer_cases import FAMILIES, case
from tiny import logits_of, tiny_inputs, tiny_loaded

ALPHA = 0.75      # layer 0's removed head contributes ALPHA times layer 1's head 0 (a constant per token)


def _drift_model(tmp_path):
    """A 2-layer tiny BERT whose optimum is known. Layer 0 is linear (its LayerNorms are identities, its
    feed-forward adds 0, its heads 1-3 have zero W_O columns), so removing its head 0, which outputs a constant
    ``c = ALPHA * u_0``, shifts layer 1's input by exactly ``-c`` on every token. Layer 1's heads read nothing
    from their input (value weights 0): head h adds the constant ``u_h``. Layer 1's residual sum
    ``x_s + b + sum_h m_h u_h`` then equals the teacher's ``x_t + b + sum_h u_h`` exactly at ``m = (1 + ALPHA, 1,
    1, 1)``; the output-only target's optimum is ``m = 1`` (the heads' outputs are unchanged)."""
    lm = tiny_loaded("bert", tmp_path)
    first, second = lm.sites
    d = first.head_dim
    layer0 = lm.model.bert.encoder.layer[0]
    with torch.no_grad():
        layer0.attention.output.LayerNorm = nn.Identity()
        layer0.output.LayerNorm = nn.Identity()
        layer0.output.dense.weight.zero_()
        layer0.output.dense.bias.zero_()
        second.v.weight.zero_()                                 # layer 1: z_h = value bias, whatever the input
        first.v.weight[:d].zero_()                              # layer 0 head 0: ALPHA x layer 1's head 0
        first.v.bias[:d] = ALPHA * second.v.bias[:d]
        first.out.weight[:, :d] = second.out.weight[:, :d]
        first.out.weight[:, d:].zero_()                         # layer 0's kept heads add nothing
    return lm, HeadMask.full(lm.layout).toggled("encoder_self", 0, 0)


def test_residual_target_corrects_the_drift_from_a_pruned_layer_below(tmp_path):
    lm, mask = _drift_model(tmp_path)
    data = FakeTask(n=8).encode(lm, "validation")
    res = repair_mask(lm, mask, data, target="residual", batch_size=4)
    layer1 = res.layers[1]
    assert layer1.target == "residual" and layer1.choice == "scales"
    # the ridge (1e-6 of the mean Gram diagonal) moves the optimum by ~1e-6 relative; float32 inputs ~1e-6
    assert layer1.scales == pytest.approx((1 + ALPHA, 1.0, 1.0, 1.0), abs=1e-4)
    assert layer1.residual_after <= 1e-6 * layer1.residual_before
    inputs = tiny_inputs("bert")
    # layer 1's sum is the teacher's up to float32 rounding (~1e-6 relative), carried through LayerNorm and
    # the classifier: 1e-4 leaves room
    assert torch.allclose(logits_of(prune_heads(res.model, mask), inputs), logits_of(lm.model, inputs), atol=1e-4)
    assert installed_hook_count(lm.model) == 0


def test_output_target_leaves_the_drift_in_place(tmp_path):
    """The same model with the old target: layer 1's heads already reproduce their outputs, nothing changes."""
    lm, mask = _drift_model(tmp_path)
    data = FakeTask(n=8).encode(lm, "validation")
    old = repair_mask(lm, mask, data, target="output", batch_size=4)
    assert old.layers[1].target == "output"
    assert old.layers[1].scales == pytest.approx((1.0,) * 4, abs=1e-4)
    new = repair_mask(lm, mask, data, target="residual", batch_size=4)
    site = lm.sites[1]
    with torch.no_grad():                                       # c = ALPHA * u_0, layer 1 head 0's constant output
        drift = float((ALPHA * site.v.bias[:site.head_dim] @ site.out.weight[:, :site.head_dim].T).pow(2).sum())
    # layer 1's sum before its LayerNorm, measured: the old target leaves ||c||^2 per token, the new one ~0
    # (float32 sums of magnitude ~1: ~1e-12 squared error, 1e-8 leaves room)
    assert _sum_error(lm, old.model, data, 1) == pytest.approx(drift, rel=1e-4)
    assert _sum_error(lm, new.model, data, 1) < 1e-8 < drift


def _sum_error(lm, student: nn.Module, data, index: int) -> float:
    """Mean ||(y_s + x_s) - (y_t + x_t)||^2 per real token at site ``lm.sites[index]`` (before its LayerNorm)."""
    t_site, s_site = lm.sites[index], adapter_for(student).sites(student)[index]
    total = n = 0.0
    with capture_site(t_site, adapter_for(lm.model).residual_source(t_site)) as t, \
            capture_site(s_site, adapter_for(student).residual_source(s_site)) as s:
        for batch in data.batches(4):
            run_to_site(lm.model, batch.inputs, t)
            run_to_site(student, batch.inputs, s)
            real = batch.token_masks[t_site.kind].bool()
            total += float(((t.y + t.x - s.y - s.x)[real].double() ** 2).sum())
            n += float(real.sum())
    return total / n


def test_unknown_target_is_refused(tmp_path):
    lm, mask = _drift_model(tmp_path)
    with pytest.raises(ValueError, match="residual"):
        repair_mask(lm, mask, FakeTask(n=8).encode(lm, "validation"), target="stream")


def _first_and_last_pruned(layout) -> HeadMask:
    mask = HeadMask.full(layout)
    for kind, rows in layout.kinds.items():
        mask = mask.toggled(kind, 0, 0).toggled(kind, len(rows) - 1, 1).toggled(kind, len(rows) - 1, 2)
    return mask


@pytest.mark.parametrize("arch", FAMILIES)
def test_residual_error_never_increases_and_is_what_the_tuned_model_measures(arch, tmp_path):
    """Every family names its residual; per layer the error with the residual is never above no change, and
    at the last site the recorded error equals ||(y_s + x_s) - (y_t + x_t)||^2 measured on the tuned model."""
    lm, task, split = case(arch, tmp_path)
    mask = _first_and_last_pruned(lm.layout)
    data = task.encode(lm, split, None)
    res = repair_mask(lm, mask, data, bias_compensation=True, target="residual", batch_size=4)
    tuned = [l for l in res.layers if l.residual_before > 0]
    assert tuned and all(l.target == "residual" for l in tuned)
    for l in res.layers:
        assert l.residual_after <= l.residual_before            # "none" is always a candidate
    last = max(res.layers, key=lambda l: (l.kind == "cross", l.kind != "encoder_self", l.layer))
    index = next(i for i, s in enumerate(lm.sites) if (s.kind, s.layer) == (last.kind, last.layer))
    measured = _sum_error(lm, res.model, data, index)
    # float32 forward passes against float64 sums of the same products: ~1e-6 relative, 1e-4 leaves room
    assert measured == pytest.approx(last.residual_after, rel=1e-4, abs=1e-9)
    assert installed_hook_count(lm.model) == 0 and installed_hook_count(res.model) == 0
