"""The scorers beyond Michel's: fisher, atp (zero / mean / corrupt), flap, activation, entropy, confidence.

Invariants on every family (shape, a full mask is a no-op, removed heads score 0, no hook left after
success or failure), models built so the answer is known (a head whose W_O columns are zero, a head
whose value projection is zero), and each definition against an independent computation.
"""
import math

import pytest
import torch

from fake_task import FakeTask
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import gate_heads, ones_gates
from pruning_core.scoring import ScoreConfig, get_scorer, scorer_info
from pruning_core.scoring.attribution import attribution_sums, corrupted_inputs
from pruning_core.scoring.gradient import per_token_importance
from pruning_core.scoring.label_free import calibration_sums, flap_fluctuation, output_column_norms
from scorer_cases import FAMILIES, case
from tiers import heavy_beyond
from tiny import tiny_loaded

NEW = ["fisher", "atp", "flap", "activation", "entropy", "confidence"]
# (scorer, baseline): every scorer once, atp with each baseline
RUNS = [("fisher", "zero"), ("atp", "zero"), ("atp", "mean"), ("atp", "corrupt"), ("flap", "zero"),
        ("activation", "zero"), ("entropy", "zero"), ("confidence", "zero")]


def _config(split: str, baseline: str = "zero", **kw) -> ScoreConfig:
    return ScoreConfig(split=split, batch_size=3, max_length=12, baseline=baseline, **kw)


def headprune_hooks(model) -> int:
    """Hooks on ``model`` other than the output-capturing ones transformers installs for good the first
    time ``output_attentions`` is used (the attention-statistics scorers ask for maps)."""
    ours = 0
    for m in model.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks, m._backward_hooks):
            ours += sum(1 for h in hooks.values() if "output_capturing_hook" not in getattr(h, "__qualname__", ""))
    return ours


def _values(scores, kind, layer) -> list[float]:
    return list(scores.kinds[kind][layer])


@pytest.mark.parametrize("arch", heavy_beyond(FAMILIES, fast=["distilbert"]))
def test_every_new_scorer_on_every_family(arch, tmp_path):
    """Shape = the layout; finite; a full mask scores exactly as no mask; a removed head scores 0; no hook left."""
    lm, task, split = case(arch, tmp_path)
    kind = list(lm.layout.kinds)[-1]                  # cross for seq2seq, decoder_self for LMs
    masked = HeadMask.from_removed(lm.layout, [(kind, 1, 2)])
    for name, baseline in RUNS:
        scorer = get_scorer(name)
        config = _config(split, baseline)
        plain = scorer.score(lm, task, config)
        assert plain.scores.layout == lm.layout, (arch, name)
        assert all(math.isfinite(v) for rows in plain.scores.kinds.values() for r in rows for v in r)
        assert plain.method == name and plain.provenance["method"] == name
        full = scorer.score(lm, task, config, mask=HeadMask.full(lm.layout))
        assert full.scores == plain.scores, (arch, name, baseline)          # the same arithmetic: exact
        removed = scorer.score(lm, task, config, mask=masked)
        assert removed.scores.kinds[kind][1][2] == 0.0, (arch, name, baseline)
        assert removed.scores != plain.scores
        assert headprune_hooks(lm.model) == 0, (arch, name)
        assert removed.to_json()["format"] == "headprune.scores/1"


@pytest.mark.parametrize("name,baseline", RUNS)
def test_no_hook_left_when_the_forward_pass_fails(name, baseline, tmp_path, monkeypatch):
    lm = tiny_loaded("bert", tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("forward failed on purpose")
    monkeypatch.setattr(lm.model, "forward", broken)
    with pytest.raises(RuntimeError, match="on purpose"):
        get_scorer(name).score(lm, FakeTask(n=6), _config("validation", baseline))
    assert headprune_hooks(lm.model) == 0


def test_registered_with_their_metadata():
    labels = {"fisher": True, "atp": True, "flap": False, "activation": False, "entropy": False, "confidence": False}
    for name, needs in labels.items():
        info = scorer_info(name)
        assert info.needs_labels is needs and info.cost == "one_pass" and info.description and not info.seeded


def _zero_out_columns(lm, kind, layer, head):
    """Zero the W_O input columns of one head (transformers' Conv1D stores W_O as [in, out])."""
    site = next(s for s in lm.sites if (s.kind, s.layer) == (kind, layer))
    cols = slice(head * site.head_dim, (head + 1) * site.head_dim)
    with torch.no_grad():
        if hasattr(site.out, "nf"):
            site.out.weight[cols, :] = 0
        else:
            site.out.weight[:, cols] = 0
    return site


@pytest.mark.parametrize("arch", heavy_beyond(["bert", "gpt2", "marian"], fast=["bert", "gpt2"]))
def test_a_head_whose_output_projection_columns_are_zero_scores_zero(arch, tmp_path):
    """W_O[:, head] = 0: the loss cannot depend on z_h (dL/dz_h = W_O^T dL/dout = 0 exactly), and the
    head's channels have zero W_O norm, so fisher, atp (every baseline), flap's fluctuation and I_h are 0.
    activation reads z_h before W_O and is not 0 (Minitron's definition)."""
    lm, task, split = case(arch, tmp_path)
    kind = list(lm.layout.kinds)[-1]
    _zero_out_columns(lm, kind, 1, 2)
    for name, baseline in RUNS[:4] + [("gradient", "zero")]:
        res = get_scorer(name).score(lm, task, _config(split, baseline, normalize=False))
        row = _values(res.scores, kind, 1)
        assert row[2] == 0.0 and all(v != 0.0 for h, v in enumerate(row) if h != 2), (name, baseline, row)
    data = task.encode(lm, split, max_length=12)
    raw = flap_fluctuation(lm, calibration_sums(lm, data, None, 3, "flap"))
    assert raw.kinds[kind][1][2] == 0.0 and min(raw.kinds[kind][1][h] for h in (0, 1, 3)) > 0
    flap = get_scorer("flap").score(lm, task, _config(split)).scores.kinds[kind][1]
    assert flap[2] == min(flap)                           # standardised: the layer's lowest
    assert get_scorer("activation").score(lm, task, _config(split)).scores.kinds[kind][1][2] > 0


@pytest.mark.parametrize("arch", heavy_beyond(["bert", "llama"], fast=["llama"]))
def test_a_head_whose_value_projection_is_zero_scores_zero_everywhere(arch, tmp_path):
    """W_V rows (and bias) of a head = 0 make z_h = A V_h = 0 exactly: every scorer reading z_h gives 0."""
    lm, task, split = case(arch, tmp_path)
    kind = list(lm.layout.kinds)[-1]
    site = next(s for s in lm.sites if (s.kind, s.layer) == (kind, 0))
    kv_head = 1 * site.num_kv_heads // site.num_heads          # llama: query heads 0, 1 share value head 0
    rows = slice(kv_head * site.head_dim, (kv_head + 1) * site.head_dim)
    with torch.no_grad():
        site.v.weight[rows, :] = 0
        if site.v.bias is not None:
            site.v.bias[rows] = 0
    zero_heads = [h for h in range(site.num_heads) if h * site.num_kv_heads // site.num_heads == kv_head]
    for name, baseline in RUNS[:4] + [("activation", "zero"), ("gradient", "zero")]:
        row = _values(get_scorer(name).score(lm, task, _config(split, baseline, normalize=False)).scores, kind, 0)
        assert all(row[h] == 0.0 for h in zero_heads) and all(row[h] != 0.0 for h in range(4) if h not in zero_heads), \
            (name, baseline, row)
    data = task.encode(lm, split, max_length=12)
    raw = flap_fluctuation(lm, calibration_sums(lm, data, None, 3, "flap"))
    assert all(raw.kinds[kind][0][h] == 0.0 for h in zero_heads)


@pytest.mark.parametrize("arch", ["bert", "marian", "gpt2", "whisper"])
def test_atp_zero_baseline_magnitude_is_michels_importance(arch, tmp_path):
    """|<0 - z, g>| = |z . g| token by token, summed over the same real tokens in the same order: the
    same float32 products and sums, so equal up to 1e-6 relative (bit-equal on one CPU; the bound
    allows another kernel's summation order)."""
    lm, task, split = case(arch, tmp_path)
    data = task.encode(lm, split, max_length=12)
    michel = per_token_importance(lm, task, data, batch_size=3)
    sums = attribution_sums(lm, task, data, "zero", batch_size=3)
    magnitude = sums.scores("magnitude", per_count=True)
    for kind, rows in michel.kinds.items():
        for a, b in zip(rows, magnitude.kinds[kind]):
            assert b == pytest.approx(a, rel=1e-6, abs=1e-12)
    signed = sums.scores("signed", per_count=True)      # the signed estimate is bounded by its magnitude
    assert all(abs(s) <= m * (1 + 1e-9) for k in signed.kinds for r, mr in zip(signed.kinds[k], magnitude.kinds[k])
               for s, m in zip(r, mr))


def test_atp_zero_baseline_sums_to_minus_the_gate_gradient(tmp_path):
    """Summed over an example's tokens, <0 - z_h, g_h> = -dL/dm_h: the first-order loss change of removing h."""
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=6)
    task.data.attn[:] = 1                      # every token real, so the token sum is the whole gradient
    gates = ones_gates(lm.layout, requires_grad=True)
    batch = next(task.data.batches(6))
    with gate_heads(lm.model, lm.sites, gates):
        task.loss_sum(lm, batch, lm.model(**batch.inputs)).backward()
    sums = attribution_sums(lm, task, task.data, "zero", batch_size=6)
    for layer in range(2):
        # float32 gradients through two different paths (autograd of the gate vs z . dL/dz): 1e-5 relative
        assert torch.allclose(sums.sums["signed"]["encoder_self"][layer].float(),
                              -gates["encoder_self"][layer].grad, rtol=1e-5, atol=1e-7)


def test_fisher_is_the_sum_of_squared_per_batch_gate_gradients(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=10)
    expected = torch.zeros(2, 4, dtype=torch.float64)
    for batch in task.data.batches(4):                       # batches of 4, 4, 2: mean loss per batch
        gates = ones_gates(lm.layout, requires_grad=True)
        with gate_heads(lm.model, lm.sites, gates):
            (task.loss_sum(lm, batch, lm.model(**batch.inputs)) / batch.n_examples).backward()
        expected += torch.stack([g.grad.double() ** 2 for g in gates["encoder_self"]])
    got = get_scorer("fisher").score(lm, task, ScoreConfig(batch_size=4, normalize=False)).scores
    # the gradients agree to float32 rounding (~1e-6 relative); squared, ~2e-6: 1e-5 relative
    assert torch.allclose(torch.tensor(got.kinds["encoder_self"], dtype=torch.float64), expected, rtol=1e-5)


def test_flap_and_activation_match_a_direct_computation(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=9)
    batch = next(task.data.batches(9))
    with torch.no_grad(), gate_heads(lm.model, lm.sites, ones_gates(lm.layout), record=True) as session:
        lm.model(**batch.inputs)
    real = batch.token_masks["encoder_self"].bool()
    flap = get_scorer("flap").score(lm, task, ScoreConfig(batch_size=4)).scores
    activation = get_scorer("activation").score(lm, task, ScoreConfig(batch_size=4, normalize=False)).scores
    for layer, site in enumerate(lm.sites):
        z = session.records[("encoder_self", layer)][0][real].double()          # [tokens, heads, head_dim]
        fluct = (z.var(0, unbiased=False) * output_column_norms(site)).mean(-1)   # [heads]
        standard = (fluct - fluct.mean()) / fluct.std()
        # the scorer runs batches of 4 and the reference one batch of 9: float32 matmuls of other shapes round
        # differently (about 1e-7 relative per value, a few operations deep), then float64 sums: 1e-5
        assert flap.kinds["encoder_self"][layer] == pytest.approx(standard.tolist(), abs=1e-5)
        assert activation.kinds["encoder_self"][layer] == pytest.approx(z.norm(dim=-1).sum(0).tolist(), rel=1e-5)


def test_entropy_and_confidence_match_the_attention_maps(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=9)
    batch = next(task.data.batches(9))
    with torch.no_grad():
        maps = lm.model(**batch.inputs, output_attentions=True).attentions
    real = batch.token_masks["encoder_self"].bool()
    entropy = get_scorer("entropy").score(lm, task, ScoreConfig(batch_size=4)).scores
    confidence = get_scorer("confidence").score(lm, task, ScoreConfig(batch_size=4)).scores
    for layer, a in enumerate(maps):
        a = a.double().permute(0, 2, 1, 3)[real]                             # [rows, heads, keys]
        h = -(a * torch.where(a > 0, a.log(), torch.zeros_like(a))).sum(-1).mean(0)
        # batches of 4 against one of 9: float32 rounding of other shapes (see above), on values of order 1
        assert entropy.kinds["encoder_self"][layer] == pytest.approx((-h).tolist(), abs=1e-5)   # negated: focused ranks high
        assert confidence.kinds["encoder_self"][layer] == pytest.approx(a.amax(-1).mean(0).tolist(), abs=1e-5)


def test_corrupted_inputs_shuffle_the_middle_tokens_the_same_way_in_any_batch():
    task = FakeTask(n=6)
    whole = next(task.data.batches(6))
    one = corrupted_inputs(whole, seed=3)
    for row in range(6):
        ids, new = whole.inputs["input_ids"][row], one["input_ids"][row]
        n = int(whole.inputs["attention_mask"][row].sum())
        assert new[0] == ids[0] and new[n - 1] == ids[n - 1] and torch.equal(new[n:], ids[n:])
        assert sorted(new[1:n - 1].tolist()) == sorted(ids[1:n - 1].tolist())
    assert not torch.equal(one["input_ids"], whole.inputs["input_ids"])
    second_half = list(task.data.batches(3))[1]                   # examples 3..5 in a batch of their own
    assert torch.equal(corrupted_inputs(second_half, seed=3)["input_ids"], one["input_ids"][3:])
    assert not torch.equal(corrupted_inputs(whole, seed=4)["input_ids"], one["input_ids"])
    assert torch.equal(whole.inputs["input_ids"], task.data.ids)  # the batch itself is not modified


def test_atp_baselines_differ_and_bad_baseline_is_refused(tmp_path):
    from pruning_core.core.errors import HeadpruneError
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=6)
    got = {b: get_scorer("atp").score(lm, task, ScoreConfig(baseline=b)) for b in ("zero", "mean", "corrupt")}
    assert got["zero"].scores != got["mean"].scores != got["corrupt"].scores
    assert got["corrupt"].provenance["settings"]["baseline"] == "corrupt"
    with pytest.raises(HeadpruneError, match="baseline must be one of zero, mean, corrupt"):
        ScoreConfig(baseline="noise")


# -- exact-ablation check ----------------------------------------------------------------------------

def test_spearman_of_a_hand_made_case():
    from pruning_core.evaluation.stats import spearman
    assert spearman([0.1, 0.5, 0.3, 0.9], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(1.0)
    # ranks (1, 2, 3, 4) against (2, 1, 4, 3): d^2 sums to 4, rho = 1 - 6 * 4 / (4 * 15) = 0.6
    assert spearman([1.0, 2.0, 3.0, 4.0], [20.0, 10.0, 40.0, 30.0]) == pytest.approx(0.6)


def _scores_of(lm, values: dict) -> "ScoreResult":
    from pruning_core.core.heads import HeadScores
    from pruning_core.evaluation.results import ScoreResult
    return ScoreResult("hand", HeadScores.from_lists(values), False)


def test_verify_ablates_the_k_highest_and_lowest_heads_exactly(tmp_path):
    from pruning_core.scoring.verify import VerifyResult, mean_loss, verify_scores
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=9)
    scores = _scores_of(lm, {"encoder_self": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]})
    losses = {}
    res = verify_scores(lm, task, task.data, scores, 2, batch_size=64, losses=losses)
    assert [(p.layer, p.head, p.group) for p in res.pairs] == [(0, 0, "bottom"), (0, 1, "bottom"),
                                                              (1, 2, "top"), (1, 3, "top")]
    base = task.evaluate(lm, task.data).loss
    # the batching evaluate uses (64): the same float32 batch losses added in float64, so equal up to
    # the last bits of a float64 sum
    assert res.base_loss == pytest.approx(base, rel=1e-12)            # the loss evaluate reports
    one = task.evaluate(lm, task.data, HeadMask.from_removed(lm.layout, [("encoder_self", 1, 3)])).loss
    assert res.pairs[-1].exact_delta_loss == pytest.approx(one - base, rel=1e-9, abs=1e-12)
    from pruning_core.evaluation.stats import spearman
    assert res.spearman == spearman([p.estimate for p in res.pairs], [p.exact_delta_loss for p in res.pairs])
    assert VerifyResult.from_json(res.to_json()) == res and res.to_json()["format"] == "headprune.verify/1"
    # batches of 3 add the float32 per-example losses in another order: ~1e-7 relative, 1e-6 allowed
    assert len(losses) == 5 and mean_loss(lm, task, task.data, None, 3) == pytest.approx(base, rel=1e-6)
    again = verify_scores(lm, task, task.data, scores, 4, losses=losses)   # 2K = 8 covers every head
    assert len(again.pairs) == 8 and {p.exact_delta_loss for p in again.pairs} >= {p.exact_delta_loss for p in res.pairs}


@pytest.mark.heavy
def test_gradient_scores_correlate_with_exact_ablation_on_a_trained_tiny_model(tmp_path):
    """A tiny BERT trained a little (3 epochs, loss 0.69 -> 0.68) on synthetic sentiment: I_h's ranking
    agrees with exact ablation (rho 0.93 here; much longer training drives the loss to 0.08, where
    removing any one head changes it by ~1e-5 and the ranking is noise)."""
    from pruning_core.scoring.verify import verify_scores
    from pruning_core.tasks.classification import ClassificationTask
    from tiny import synthetic_sentiment
    torch.manual_seed(0)
    lm = tiny_loaded("bert", tmp_path)
    rows = synthetic_sentiment(96, seed=1)
    task = ClassificationTask("syn", lambda split, limit: rows[:limit], splits=("train",), default_split="train")
    data = task.encode(lm, "train")
    opt = torch.optim.Adam(lm.model.parameters(), lr=3e-3)
    lm.model.train()
    for _ in range(3):
        for batch in data.batches(16):
            opt.zero_grad()
            task.loss_sum(lm, batch, lm.model(**batch.inputs)).backward()
            opt.step()
    lm.model.eval()
    for name in ("gradient", "atp"):
        scores = get_scorer(name).score(lm, task, ScoreConfig(split="train", limit=None, normalize=False))
        res = verify_scores(lm, task, data, scores, 4)
        assert len(res.pairs) == 8 and res.spearman is not None and res.spearman > 0.5, (name, res.spearman)


def test_cli_options_parse_baseline_and_verify_into_the_scores_file(tmp_path, capsys):
    import argparse

    from pruning_core.cli.args import run_checks
    from pruning_core.cli.scoring_options import add_score_options, scores_json, with_score_options
    from pruning_core.scoring.verify import VerifyResult
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=4)
    add_score_options(p)
    args = p.parse_args(["--baseline", "corrupt", "--verify", "2", "--verify-limit", "6"])
    run_checks(args)
    config = with_score_options(ScoreConfig(), args)
    assert config.baseline == "corrupt"
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=6)
    result = get_scorer("atp").score(lm, task, config)
    data = scores_json(args, lm, task, result)
    check = VerifyResult.from_json(data["verify"])
    assert check.k == 2 and len(check.pairs) == 4 and data["format"] == "headprune.scores/1"
    assert "Spearman" in capsys.readouterr().out
    assert "verify" not in scores_json(p.parse_args([]), lm, task, result)
    with pytest.raises(SystemExit):
        p.parse_args(["--baseline", "noise"])
    bad = p.parse_args(["--verify", "0"])
    from pruning_core.core.errors import UsageError
    with pytest.raises(UsageError):
        run_checks(bad)
