"""Scorers: the gradient score against finite differences, the registry, baselines."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fake_task import FakeTask
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import gate_heads, installed_hook_count, ones_gates
from pruning_core.scoring import (COSTS, SCORERS, ScoreConfig, get_scorer, register_scorer, scorer_info,
                                  scorer_names)
from pruning_core.scoring.gradient import per_token_importance, token_contributions
from tiny import tiny_loaded


def loss_with_gates(lm, task, batch, gates):
    with torch.no_grad(), gate_heads(lm.model, lm.sites, gates):
        return float(task.loss_sum(lm, batch, lm.model(**batch.inputs)))


@pytest.mark.parametrize("arch", ["bert", "distilbert", "bart"])
def test_gradient_matches_finite_differences(arch, tmp_path):
    torch.manual_seed(0)
    lm = tiny_loaded(arch, tmp_path)
    lm.model.double()
    task = FakeTask(seq2seq=arch == "bart", n=4)
    batch = next(task.data.batches(4))
    gates = {k: [g.double() for g in v] for k, v in ones_gates(lm.layout).items()}
    contrib = token_contributions(lm, task, batch, gates)
    eps = 1e-5
    for kind, layer, head in [(k, l, h) for k in lm.layout.kinds for l, h in ((0, 1), (1, 3))]:
        up = {k: [g.clone() for g in v] for k, v in gates.items()}
        down = {k: [g.clone() for g in v] for k, v in gates.items()}
        up[kind][layer][head] += eps
        down[kind][layer][head] -= eps
        fd = (loss_with_gates(lm, task, batch, up) - loss_with_gates(lm, task, batch, down)) / (2 * eps)
        analytic = float(contrib[(kind, layer)][..., head].sum())
        assert analytic == pytest.approx(fd, rel=1e-4, abs=1e-7), (kind, layer, head)
    assert installed_hook_count(lm.model) == 0


def test_gate_grad_equals_sum_of_token_contributions(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=6)
    batch = next(task.data.batches(6))
    gates = ones_gates(lm.layout, requires_grad=True)
    with gate_heads(lm.model, lm.sites, gates):
        task.loss_sum(lm, batch, lm.model(**batch.inputs)).backward()
    contrib = token_contributions(lm, task, batch, ones_gates(lm.layout))
    for layer in range(2):
        assert torch.allclose(gates["encoder_self"][layer].grad, contrib[("encoder_self", layer)].sum((0, 1)),
                              atol=1e-5)


def test_score_is_mean_absolute_token_contribution_over_real_tokens(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=6)
    batch = next(task.data.batches(6))
    contrib = token_contributions(lm, task, batch, ones_gates(lm.layout))
    scores = per_token_importance(lm, task, task.data, batch_size=6)
    real = batch.token_masks["encoder_self"].unsqueeze(-1).float()
    expected = (contrib[("encoder_self", 1)].abs() * real).sum((0, 1)) / real.sum()
    assert torch.allclose(torch.tensor(scores.kinds["encoder_self"][1]), expected.double().float(), atol=1e-6)
    # the same whatever the batch size (accumulation bookkeeping)
    again = per_token_importance(lm, task, task.data, batch_size=4)
    assert torch.allclose(torch.tensor(again.kinds["encoder_self"][1]), torch.tensor(scores.kinds["encoder_self"][1]),
                          atol=1e-6)


def test_gradient_scorer_scores_every_kind_and_masked_heads_score_zero(tmp_path):
    lm = tiny_loaded("marian", tmp_path)
    task = FakeTask(seq2seq=True)
    mask = HeadMask.from_removed(lm.layout, [("cross", 1, 2)])
    result = get_scorer("gradient").score(lm, task, ScoreConfig(), mask=mask)
    assert set(result.scores.kinds) == {"encoder_self", "decoder_self", "cross"}
    assert result.scores.kinds["cross"][1][2] == 0.0
    assert all(v > 0 for k in result.scores.kinds.values() for row in k for v in row if v != 0.0)
    normed = result.ranking_scores
    for rows in normed.kinds.values():
        for row in rows:
            assert sum(v * v for v in row) == pytest.approx(1.0)
    assert result.to_json()["format"] == "headprune.scores/1"
    assert result.provenance["weights_sha256"] == lm.weights_sha256


def test_registry_and_random_scorer(tmp_path):
    assert {"gradient", "random", "ablation"} <= set(SCORERS)
    with pytest.raises(HeadpruneError, match="Did you mean 'gradient'"):
        get_scorer("gradiant")
    lm = tiny_loaded("bert", tmp_path)
    a = get_scorer("random").score(lm, FakeTask(), ScoreConfig(seed=3))
    b = get_scorer("random").score(lm, FakeTask(), ScoreConfig(seed=3))
    c = get_scorer("random").score(lm, FakeTask(), ScoreConfig(seed=4))
    assert a.scores == b.scores and a.scores != c.scores


def test_scorer_metadata_is_declared_at_registration():
    assert scorer_names() == ["ablation", "activation", "atp", "confidence", "entropy", "fisher", "flap", "gradient",
                              "random", "smp"]
    expected = {"gradient": (True, "one_pass"), "random": (False, "one_pass"), "ablation": (True, "per_head"),
                "smp": (False, "one_pass")}
    for name, (needs_labels, cost) in expected.items():
        info = scorer_info(name)
        assert (info.needs_labels, info.cost) == (needs_labels, cost) and info.cost in COSTS and info.description
    assert get_scorer("ablation").needs_labels is True and get_scorer("ablation").cost == "per_head"
    assert get_scorer("random").description == scorer_info("random").description
    with pytest.raises(HeadpruneError, match="Did you mean 'gradient'"):
        scorer_info("gradiant")


def test_registering_a_taken_name_or_bad_metadata_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_scorer(get_scorer("random"), needs_labels=False, cost="one_pass", description="again")
    with pytest.raises(ValueError, match="cost must be one of"):
        register_scorer(get_scorer("random"), needs_labels=False, cost="cheap", description="x")
    assert get_scorer("random").description.startswith("Uniform random")


@pytest.mark.heavy
def test_scoring_does_not_import_smp_until_asked():
    """scoring sits below smp: the smp entry is lazy, so importing scoring runs no upward import."""
    code = ("import sys; import pruning_core.scoring as s; assert 'pruning_core.scoring.smp' not in sys.modules; "
            "assert s.scorer_info('smp').needs_labels is False; assert 'pruning_core.scoring.smp' not in sys.modules; "
            "assert s.get_scorer('smp').name == 'smp'; assert 'pruning_core.scoring.smp.scorer' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_ablation_scorer_is_the_metric_drop(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=9)
    res = get_scorer("ablation").score(lm, task, ScoreConfig())
    base = task.evaluate(lm, task.data)
    one = task.evaluate(lm, task.data, HeadMask.from_removed(lm.layout, [("encoder_self", 1, 2)]))
    expected = (base.metric - one.metric) + 1e-3 * (one.loss - base.loss)
    assert res.scores.kinds["encoder_self"][1][2] == pytest.approx(expected, abs=1e-9)
