"""Repair's newer choices (pruning_core.compress): the LayerNorm-aware target (``target="normed"``), the last
layer fitted on the token the head reads (``head_tokens``), and each layer's candidate chosen by the model's
calibration loss (``choose="loss"``)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fake_task import FakeTask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.compress import repair_mask
from pruning_core.compress.capture import capture_site, run_to_site
from pruning_core.compress.least_squares import NormJacobian
from scorer_cases import FAMILIES, case
from tiers import heavy_beyond
from tiny import logits_of, tiny_inputs, tiny_loaded


def test_norm_jacobian_is_the_layernorm_jacobian():
    torch.manual_seed(0)
    d = 12
    norm = nn.LayerNorm(d, eps=1e-5).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
    u = torch.randn(5, d, dtype=torch.float64) * 3 + 1
    jac = NormJacobian.at(norm, u)
    exact = torch.stack([torch.autograd.functional.jacobian(norm, row) for row in u])      # [N, d, d]
    eye = torch.eye(d, dtype=torch.float64).expand(5, d, d)
    # float64 throughout: the two computations agree to ~1e-15 relative; 1e-10 leaves room
    assert torch.allclose(jac.apply(eye.transpose(1, 2)).transpose(1, 2), exact, atol=1e-10)    # J e_i = column i
    w = torch.randn(5, d, dtype=torch.float64)
    assert torch.allclose(jac.apply_t(w), torch.einsum("nij,ni->nj", exact, w), atol=1e-10)
    assert torch.allclose(jac.gram(), torch.einsum("nij,nik->jk", exact, exact), atol=1e-10)


C = 0.01          # the constant the invisible head adds per hidden unit: comparable with the tiny heads' outputs


def _invisible_head_model(tmp_path):
    """A tiny BERT whose layer-0 head 0 adds the same constant ``C`` to every hidden unit of every token (value
    weights 0, so its output is its value bias; its W_O block maps that bias to ``C * 1``). The LayerNorm after
    the sum removes exactly that, so removing the head changes nothing the model computes: the right repair is
    no change. A least-squares fit before the LayerNorm instead rescales the kept heads to make up ``C * 1``."""
    lm = tiny_loaded("bert", tmp_path)
    site = lm.sites[0]
    d = site.head_dim
    with torch.no_grad():
        site.v.weight[:d].zero_()
        b = site.v.bias[:d].clone()
        site.out.weight[:, :d] = C * torch.ones(site.out.weight.shape[0], 1) * b[None, :] / b.dot(b)
    return lm, HeadMask.full(lm.layout).toggled("encoder_self", 0, 0)


def test_normed_target_leaves_a_head_the_layernorm_cancels_alone(tmp_path):
    lm, mask = _invisible_head_model(tmp_path)
    data = FakeTask(n=8).encode(lm, "validation")
    inputs = tiny_inputs("bert")
    normed = repair_mask(lm, mask, data, target="normed", batch_size=4)
    plain = repair_mask(lm, mask, data, target="residual", batch_size=4)
    first = normed.layers[0]
    assert first.target == "normed" and plain.layers[0].target == "residual"
    # the removed head's C*1 lies in the Jacobian's null space: float32 sums of size ~1 leave ~1e-12 per token
    assert first.residual_before < 1e-9 * first.target_power
    # the ridge moves an exact optimum by ~1e-6 relative
    assert first.scales == pytest.approx((1.0,) * len(first.scales), abs=1e-4)
    assert max(abs(s - 1) for s in plain.layers[0].scales) > 1e-2          # the fit before the LayerNorm moves them
    # after layer 0's LayerNorm (values ~1): float32 rounding ~1e-6 for the normed repair; the rescaled heads
    # leave an error of the order of their own change (~1e-2 of outputs ~1e-1 before the norm's 1/sigma)
    teacher = _after_first_norm(lm.model, inputs)
    assert float((_after_first_norm(normed.model, inputs) - teacher).abs().max()) < 1e-5
    assert float((_after_first_norm(plain.model, inputs) - teacher).abs().max()) > 1e-3
    assert torch.allclose(logits_of(normed.model, inputs), logits_of(lm.model, inputs), atol=1e-5)
    assert installed_hook_count(lm.model) == 0


def _after_first_norm(model: nn.Module, inputs: dict) -> torch.Tensor:
    """``[B, T, H]``: layer 0's attention block output, after its LayerNorm."""
    held = {}
    handle = model.bert.encoder.layer[0].attention.register_forward_hook(lambda m, a, out: held.update(h=out[0]))
    try:
        logits_of(model, inputs)
    finally:
        handle.remove()
    return held["h"]


@pytest.mark.parametrize("arch", ["bert", "distilbert", "mpnet"])
def test_heads_marked_first_token_read_only_the_first_token(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    stack = adapter_for(lm.model).layer_stack(lm.model)
    assert stack.first_token and adapter_for(lm.model).post_norm(lm.sites[0]) is not None
    torch.manual_seed(0)
    hidden = torch.randn(3, 7, lm.model.config.hidden_size)
    other = hidden.clone()
    other[:, 1:] = torch.randn(3, 6, hidden.shape[-1])
    with torch.no_grad():
        assert torch.equal(stack.head(hidden), stack.head(other))


def _first_token_error(lm, student: nn.Module, data, index: int) -> float:
    """Sum over examples of ||y_s - y_t||^2 at the first token of site ``index``'s output projection."""
    t_site, s_site = lm.sites[index], adapter_for(student).sites(student)[index]
    total = 0.0
    with capture_site(t_site) as t, capture_site(s_site) as s:
        for batch in data.batches(4):
            run_to_site(lm.model, batch.inputs, t)
            run_to_site(student, batch.inputs, s)
            total += float(((t.y[:, 0] - s.y[:, 0]).double() ** 2).sum())
    return total


def test_head_tokens_fits_the_last_layer_on_the_first_token_only(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    mask = HeadMask.full(lm.layout).toggled("encoder_self", 1, 0).toggled("encoder_self", 1, 2)
    data = FakeTask(n=8).encode(lm, "validation")
    first = repair_mask(lm, mask, data, head_tokens=True, batch_size=4)
    every = repair_mask(lm, mask, data, batch_size=4)
    assert [l.tokens for l in first.layers] == ["all", "first"]
    assert first.calibration_tokens["encoder_self"] == 8                     # one token per example
    assert first.layers[1].choice == "scales" and first.layers[1].scales != every.layers[1].scales
    # least squares on the first tokens' rows: no other scales do better there (ridge: ~1e-6 relative)
    assert _first_token_error(lm, first.model, data, 1) <= _first_token_error(lm, every.model, data, 1) * (1 + 1e-5)


def _last_site_pruned(layout) -> HeadMask:
    kind = "cross" if "cross" in layout.kinds else "decoder_self" if "decoder_self" in layout.kinds else "encoder_self"
    last = len(layout.kinds[kind]) - 1
    return HeadMask.full(layout).toggled(kind, last, 0).toggled(kind, last, 1)


@pytest.mark.parametrize("arch", heavy_beyond(FAMILIES, fast={"bert", "gpt2", "marian"}))
def test_loss_choice_records_the_loss_the_repaired_model_has(arch, tmp_path):
    """Only the last site is pruned: the loss chosen there is the repaired model's calibration loss (the
    resumed layers run the same float32 operations as a full pass), the smallest of the candidates', so
    never above the loss of the candidate the least-squares choice keeps."""
    lm, task, split = case(arch, tmp_path)
    mask = _last_site_pruned(lm.layout)
    data = task.encode(lm, split, None)
    by_loss = repair_mask(lm, mask, data, bias_compensation=True, choose="loss", task=task, batch_size=4)
    by_error = repair_mask(lm, mask, data, bias_compensation=True, batch_size=4)
    chosen = next(l for l in by_loss.layers if l.losses)
    assert len(chosen.losses) >= 2 and chosen.losses[chosen.choice] == min(chosen.losses.values())
    other = next(l for l in by_error.layers if (l.kind, l.layer) == (chosen.kind, chosen.layer))
    assert chosen.losses[chosen.choice] <= chosen.losses[other.choice]
    measured = task.evaluate(lm.derive(by_loss.model), data, mask, batch_size=4).loss
    # the same operations in the same order, except the resumed head: float32, ~1e-7 relative
    assert measured == pytest.approx(chosen.losses[chosen.choice], rel=1e-5)
    assert installed_hook_count(lm.model) == 0


def test_loss_choice_needs_a_task(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    with pytest.raises(ValueError, match="loss"):
        repair_mask(lm, HeadMask.full(lm.layout).toggled("encoder_self", 0, 0),
                    FakeTask(n=8).encode(lm, "validation"), choose="loss")


def _absorbable_head_model(tmp_path):
    """A tiny BERT whose layer-0 head 0 adds the constant ``v`` (value weights 0) to every token, whose other
    heads add nothing (W_O columns 0), whose attention LayerNorm is the identity and whose layer-0 neurons are
    constant (first feed-forward weights 0). Removing head 0 shifts the feed-forward block's residual by ``-v``;
    the neurons' W2 columns span the hidden space, so some neuron scales add ``v`` back exactly."""
    lm = tiny_loaded("bert", tmp_path)
    site, layer0 = lm.sites[0], lm.model.bert.encoder.layer[0]
    d = site.head_dim
    with torch.no_grad():
        layer0.attention.output.LayerNorm = nn.Identity()
        site.v.weight[:d].zero_()
        site.v.bias[:d] = 0.5
        site.out.weight[:, d:].zero_()
        layer0.intermediate.dense.weight.zero_()
        layer0.intermediate.dense.bias.fill_(1.0)           # every neuron GELU(1) ~ 0.84: scales near 1 suffice
    return lm, HeadMask.full(lm.layout).toggled("encoder_self", 0, 0)


def _after_layer(model: nn.Module, inputs: dict, index: int) -> torch.Tensor:
    """``[B, T, H]``: encoder layer ``index``'s output."""
    held = {}
    handle = model.bert.encoder.layer[index].register_forward_hook(lambda m, a, out: held.update(h=out[0]))
    try:
        logits_of(model, inputs)
    finally:
        handle.remove()
    return held["h"]


def test_feed_forward_scales_absorb_a_removed_head(tmp_path):
    lm, mask = _absorbable_head_model(tmp_path)
    data = FakeTask(n=8).encode(lm, "validation")
    inputs = tiny_inputs("bert")
    with_ffn = repair_mask(lm, mask, data, ffn=True, batch_size=4)
    without = repair_mask(lm, mask, data, batch_size=4)
    block = with_ffn.feed_forward[0]
    assert (block.layer, block.choice, block.tokens) == (0, "scales", "all") and not without.feed_forward
    # the exact solution leaves float32 rounding (~1e-12 squared per token) and the ridge's ~1e-6 relative pull
    assert block.residual_after < 1e-6 * block.residual_before
    teacher = _after_layer(lm.model, inputs, 0)
    # values ~1 after the LayerNorm: float32 rounding ~1e-6; the missing v moves them by ~1e-1
    assert float((_after_layer(with_ffn.model, inputs, 0) - teacher).abs().max()) < 1e-4
    assert float((_after_layer(without.model, inputs, 0) - teacher).abs().max()) > 1e-2
    assert installed_hook_count(lm.model) == 0


def test_damping_pulls_the_scales_towards_one():
    """``damped_solve`` minimises ||A m - b||^2 + mu ||m - 1||^2 (+ the tiny ridge): the same as least squares on A
    stacked over sqrt(mu) I with b stacked over sqrt(mu) 1; large damping leaves the scales at 1."""
    from pruning_core.compress.least_squares import RIDGE, damped_solve
    torch.manual_seed(0)
    a, b = torch.randn(40, 5, dtype=torch.float64), torch.randn(40, dtype=torch.float64) * 3
    gram, cross = a.T @ a, a.T @ b
    size = float(gram.diagonal().mean())
    for damping in (0.0, 0.3, 2.0):
        pull, ridge = damping * size, RIDGE * size
        stacked = torch.cat([a, (pull + ridge) ** 0.5 * torch.eye(5, dtype=torch.float64)])
        goal = torch.cat([b, pull / (pull + ridge) ** 0.5 * torch.ones(5, dtype=torch.float64)])
        # float64 normal equations vs a QR solve of the same problem: ~1e-12 apart
        assert torch.allclose(damped_solve(gram, cross, damping), torch.linalg.lstsq(stacked, goal).solution, atol=1e-9)
    far = damped_solve(gram, cross, 1e6)
    assert torch.allclose(far, torch.ones(5, dtype=torch.float64), atol=1e-4)
