"""Retraining-free repair (pruning_core.compress): least-squares head scales, their folding into W_O, FLAP's bias
compensation, Kwon's rearrangement and the budgeted search, on tiny random models of every family."""
from __future__ import annotations

import pytest
import torch

from fake_task import FakeTask
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.masking import gate_heads, installed_hook_count
from pruning_core.modeling.pruning import prune_heads
from pruning_core.compress import (
    Budget,
    BudgetError,
    CompressConfig,
    block_fisher_loss,
    compress,
    rearrange_layer,
    repair_mask,
    search_mask,
)
from pruning_core.compress.capture import capture_site, run_to_site
from pruning_core.compress.search import flop_fractions
from scorer_cases import FAMILIES, case
from tiny import logits_of, tiny_inputs, tiny_loaded


def _half_of_last_layer(layout) -> HeadMask:
    """Remove heads 1 and 2 of every kind's last layer (and head 0 of the first layer, so tuning sees drift)."""
    mask = HeadMask.full(layout)
    for kind, rows in layout.kinds.items():
        mask = mask.toggled(kind, len(rows) - 1, 1).toggled(kind, len(rows) - 1, 2).toggled(kind, 0, 0)
    return mask


def _data(arch, lm, task, split):
    return task.encode(lm, split, None)


@pytest.mark.parametrize("arch", FAMILIES)
def test_tuning_never_increases_the_layer_residual_and_leaves_the_model_alone(arch, tmp_path):
    lm, task, split = case(arch, tmp_path)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    res = repair_mask(lm, _half_of_last_layer(lm.layout), _data(arch, lm, task, split), bias_compensation=True,
                      batch_size=4)
    tuned = [l for l in res.layers if l.residual_before > 0]
    assert tuned, "some layer had an error to repair"
    for l in res.layers:
        assert l.residual_after <= l.residual_before          # "none" is always a candidate
        assert all(-10 <= s <= 10 for s in l.scales)
    assert any(l.residual_after < l.residual_before for l in tuned)
    assert all(torch.equal(before[k], v) for k, v in lm.model.state_dict().items())   # the teacher is only read
    assert installed_hook_count(lm.model) == 0 and installed_hook_count(res.model) == 0


def test_recorded_residuals_are_the_measured_layer_errors(tmp_path):
    """The quadratic form's residuals equal the error measured by running the masked and the tuned model."""
    lm, task, split = case("bert", tmp_path)
    mask = HeadMask.full(lm.layout).toggled("encoder_self", 1, 1).toggled("encoder_self", 1, 2)   # the last layer only:
    data = _data("bert", lm, task, split)                      # its input is the same in all three models
    res = repair_mask(lm, mask, data, bias_compensation=True, batch_size=4)
    masked = lm.derive(prune_heads(lm.model, mask))
    tuned = lm.derive(prune_heads(res.model, mask))
    errors = {}
    for name, student in (("before", masked), ("after", tuned)):
        total = n = 0.0
        with capture_site(lm.sites[-1]) as t, capture_site(student.sites[-1]) as s:
            for batch in data.batches(4):
                run_to_site(lm.model, batch.inputs, t)
                run_to_site(student.model, batch.inputs, s)
                real = batch.token_masks["encoder_self"].bool()
                total += float(((t.y - s.y)[real].double() ** 2).sum())
                n += float(real.sum())
        errors[name] = total / n
    last = res.layers[-1]
    # float32 forward passes against float64 sums of the same products: ~1e-6 relative, 1e-4 leaves room
    assert errors["before"] == pytest.approx(last.residual_before, rel=1e-4)
    assert errors["after"] == pytest.approx(last.residual_after, rel=1e-4, abs=1e-9)
    assert errors["after"] < errors["before"]


def test_least_squares_recovers_a_known_scale(tmp_path):
    """Head 1 of BERT's last layer is a copy of head 0 with twice its W_O columns: removing it, the best
    repair is head 0 at scale 3 (1 + 2), every other head at 1, with no error left."""
    lm = tiny_loaded("bert", tmp_path)
    site, d = lm.sites[-1], lm.sites[-1].head_dim
    with torch.no_grad():
        for proj in (site.q, site.k, site.v):          # head 1 computes exactly what head 0 computes
            proj.weight[d:2 * d] = proj.weight[:d]
            proj.bias[d:2 * d] = proj.bias[:d]
        site.out.weight[:, d:2 * d] = 2 * site.out.weight[:, :d]
    mask = HeadMask.full(lm.layout).toggled("encoder_self", 1, 1)
    res = repair_mask(lm, mask, FakeTask(n=8).encode(lm, "validation"), batch_size=4)
    last = res.layers[-1]
    assert last.kept == (0, 2, 3) and last.choice == "scales"
    # the ridge (1e-6 of the mean Gram diagonal) moves the optimum by ~1e-6 relative; float32 inputs ~1e-6
    assert last.scales == pytest.approx((3.0, 1.0, 1.0), abs=1e-4)
    assert last.residual_after <= 1e-6 * last.residual_before


@pytest.mark.parametrize("arch", FAMILIES)
def test_folded_model_equals_the_masked_model_with_the_scales(arch, tmp_path):
    lm, task, split = case(arch, tmp_path)
    mask = _half_of_last_layer(lm.layout)
    res = repair_mask(lm, mask, _data(arch, lm, task, split), batch_size=4)
    gates = {k: [torch.tensor(r, dtype=torch.float32) for r in rows] for k, rows in mask.kinds.items()}
    for l in res.layers:
        for h, s in zip(l.kept, l.scales):
            gates[l.kind][l.layer][h] = s
    inputs = tiny_inputs(arch)
    with torch.no_grad(), gate_heads(lm.model, lm.sites, gates):
        expected = lm.model(**inputs).logits
    got = logits_of(prune_heads(res.model, mask), inputs)
    # (s * W) z against W (s * z): float32 rounding ~1e-7 relative per product, through 2 layers -> 1e-5
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_bias_compensation_moves_the_bias_by_the_removed_heads_mean(tmp_path):
    """Every head of the last layer removed: no scale to tune, and the best (and only) repair is the shift of
    the output bias by the removed heads' mean contribution (least squares' optimum for a constant)."""
    lm, task, split = case("bert", tmp_path)
    mask = HeadMask.full(lm.layout)
    for h in range(4):
        mask = mask.toggled("encoder_self", 1, h)
    res = repair_mask(lm, mask, _data("bert", lm, task, split), bias_compensation=True, batch_size=4)
    last = res.layers[-1]
    assert last.choice == "bias" and last.bias_shift_norm > 0 and last.residual_after < last.residual_before
    off = repair_mask(lm, mask, _data("bert", lm, task, split), bias_compensation=False, batch_size=4)
    assert off.layers[-1].choice == "none"


def test_rearrangement_finds_the_cancelling_pair_and_never_increases_the_loss():
    v = torch.tensor([1.0, -2.0, 0.5, 3.0])
    grads = torch.stack([v, v, -1.01 * v, 5 * torch.tensor([1.0, 1.0, -1.0, 0.2])], 1)    # [batches, heads]
    after, swaps, before, loss = rearrange_layer(grads, [0, 1])     # 0 and 1 move together: 4 |v|^2
    assert before == pytest.approx(4 * float(v @ v)) and after in ([0, 2], [1, 2]) and loss < 1e-3 * before
    assert len(swaps) == 1
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        grads = torch.randn(6, 8, generator=g)
        removed = torch.randperm(8, generator=g)[:3].tolist()
        after, _, before, loss = rearrange_layer(grads, removed)
        assert len(after) == 3 and loss <= before and loss == pytest.approx(block_fisher_loss(grads, after))


def _scores(layout, seed=0) -> HeadScores:
    g = torch.Generator().manual_seed(seed)
    return HeadScores.from_lists({k: [torch.rand(n, generator=g).tolist() for n in rows] for k, rows in layout.kinds.items()})


def test_budgets_are_met_and_impossible_ones_refused(tmp_path):
    lm = tiny_loaded("bart", tmp_path)
    scores = _scores(lm.layout)
    total = lm.layout.total_heads
    found = search_mask(lm, scores, Budget("remove", 0.5))
    assert found.heads_removed == total // 2 == found.mask.n_total - found.mask.n_kept
    assert all(sum(r) >= 1 for rows in found.mask.kinds.values() for r in rows)
    flops = search_mask(lm, scores, Budget("flops", 0.1))
    assert flops.flop_fraction >= 0.1
    fewer = HeadMask.from_removed(lm.layout, flops.mask.removed()[:0])
    assert flop_fractions(lm.config, fewer, 128)[0] < 0.1
    with pytest.raises(BudgetError, match="at most 18"):
        search_mask(lm, scores, Budget("remove", 1.0))
    assert search_mask(lm, scores, Budget("remove", 1.0), min_heads_per_layer=0).mask.n_kept == 0
    with pytest.raises(BudgetError, match="--flops 0.9 cannot be met"):
        search_mask(lm, scores, Budget("flops", 0.9))
    with pytest.raises(BudgetError, match="fraction"):
        Budget("remove", 1.5)


def test_flops_budget_removes_the_fewest_heads(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    scores = _scores(lm.layout, 1)
    found = search_mask(lm, scores, Budget("flops", 0.05))
    order = found.mask.removed()
    assert found.flop_fraction >= 0.05
    one_fewer = HeadMask.from_removed(lm.layout, [h for h in order if h != order[-1]] if order else [])
    assert flop_fractions(lm.config, one_fewer, 128)[0] < 0.05 or not order


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_compress_removing_nothing_is_a_no_op(arch, tmp_path):
    lm, task, split = case(arch, tmp_path)
    res = compress(lm, task, CompressConfig(Budget("remove", 0.0), calibration=8, split=split, batch_size=4))
    assert res.mask.is_full() and res.tuned is None and res.report.heads_removed == 0
    original = lm.model.state_dict()
    assert all(torch.equal(original[k], v) for k, v in res.model.state_dict().items())
    inputs = tiny_inputs(arch)
    assert torch.equal(logits_of(res.model, inputs), logits_of(lm.model, inputs))


@pytest.mark.parametrize("arch", ["bert", "llama", "bart"])
def test_compress_records_every_step_and_meets_the_budget(arch, tmp_path):
    lm, task, split = case(arch, tmp_path)
    res = compress(lm, task, CompressConfig(Budget("remove", 0.5), calibration=8, split=split, batch_size=4))
    report = res.report
    assert report.heads_removed == lm.layout.total_heads // 2
    assert {"score", "search", "rearrange", "repair", "prune", "total"} <= set(report.seconds)
    assert "swaps" in report.rearrangement
    assert report.repair["calibration_examples"] == report.calibration["examples"] <= 8
    assert report.parameters["after"] < report.parameters["before"]
    assert sum(sum(r) for rows in res.mask.kinds.values() for r in rows) == res.mask.n_kept
    flap = compress(lm, task, CompressConfig(Budget("remove", 0.5), scorer="flap", calibration=8, split=split,
                                             batch_size=4))
    assert flap.report.repair["bias_compensation"] is True and "skipped" in flap.report.rearrangement
    off = compress(lm, task, CompressConfig(Budget("remove", 0.5), calibration=8, split=split, batch_size=4,
                                            bias_compensation=False))
    assert not any("bias" in l["choice"] for l in off.report.repair["layers"])


def test_scales_and_bias_fitted_together_recover_a_known_layer():
    """Teacher = every kept head at twice its weight plus a constant: the joint fit finds both exactly."""
    from pruning_core.compress.least_squares import LayerStats, solve_layer
    g = torch.Generator().manual_seed(0)
    heads, dim, out = 3, 4, 5
    columns, bias, offset = torch.randn(heads, dim, out, generator=g), torch.randn(out, generator=g), torch.randn(out, generator=g)
    stats = LayerStats([0, 2], heads, dim, out)
    for _ in range(3):
        z = torch.randn(50, heads * dim, generator=g, dtype=torch.float64)
        parts = torch.einsum("nhd,hdo->nho", z.reshape(50, heads, dim), columns.double())
        y = bias + offset + 2 * (parts[:, 0] + parts[:, 2])                       # head 1 removed, no share of it
        stats.add(z, y, columns, bias)
    solution = solve_layer(stats, delta=torch.zeros(out, dtype=torch.float64), fit_bias=True)
    assert solution.choice == "scales+fitted-bias"
    # float64 throughout: the ridge (1e-6 of the mean Gram diagonal) is the only error, ~1e-6 relative
    assert solution.scales == pytest.approx((2.0, 2.0), abs=1e-4)
    assert torch.allclose(solution.delta, offset.double(), atol=1e-4)
    assert solution.residual_after <= 1e-6 * solution.residual_before


def test_kept_teacher_outputs_and_recomputed_ones_give_the_same_repair(tmp_path, monkeypatch):
    from pruning_core.compress import tuning
    lm, task, split = case("bart", tmp_path)
    mask, data = _half_of_last_layer(lm.layout), _data("bart", lm, task, split)
    kept = repair_mask(lm, mask, data, bias_compensation=True, batch_size=4)
    monkeypatch.setattr(tuning, "TEACHER_CACHE_BYTES", 0)             # too little room: recomputed per layer
    recomputed = repair_mask(lm, mask, data, bias_compensation=True, batch_size=4)
    for a, b in zip(kept.layers, recomputed.layers):
        # the same forward passes, full or stopped early: equal up to float32 summation order
        assert a.choice == b.choice and a.scales == pytest.approx(b.scales, rel=1e-5, abs=1e-6)
        assert a.residual_after == pytest.approx(b.residual_after, rel=1e-4, abs=1e-9)
    assert installed_hook_count(lm.model) == 0


class _Breaks:
    """Calibration data whose second batch fails (a reader error in the middle of a pass)."""

    def __init__(self, data):
        self.data, self.n_examples, self.split = data, data.n_examples, data.split

    def batches(self, batch_size, device=None):
        for i, batch in enumerate(self.data.batches(batch_size, device=device)):
            if i == 1:
                raise RuntimeError("broken reader")
            yield batch


@pytest.mark.parametrize("room", [2**30, 0])          # teacher outputs kept from one pass / recomputed per layer
def test_no_hook_is_left_when_a_pass_fails(tmp_path, monkeypatch, room):
    from pruning_core.compress import tuning
    monkeypatch.setattr(tuning, "TEACHER_CACHE_BYTES", room)
    lm, task, split = case("bert", tmp_path)
    with pytest.raises(RuntimeError, match="broken reader"):
        repair_mask(lm, _half_of_last_layer(lm.layout), _Breaks(_data("bert", lm, task, split)), batch_size=2)
    assert installed_hook_count(lm.model) == 0


def test_latency_budgets_are_measured_and_impossible_ones_refused(tmp_path):
    from pruning_core.compress.latency import latency_probe
    lm = tiny_loaded("bert", tmp_path)
    scores = _scores(lm.layout)
    probe = latency_probe(lm, seq_len=8, repeats=1, min_seconds=0.0)
    loose = search_mask(lm, scores, Budget("latency_ms", 1e6), latency_probe=probe)
    assert loose.heads_removed == 0 and "dense model already meets" in loose.latency["note"]
    assert "synthetic tokens" in loose.latency["measures"] and loose.latency["minimal_ms"] > 0
    with pytest.raises(BudgetError, match="--latency-ms 1e-06 cannot be met"):
        search_mask(lm, scores, Budget("latency_ms", 1e-6), latency_probe=probe)


def test_latency_search_predicts_then_checks_by_measuring(tmp_path, monkeypatch):
    """A fake clock where latency falls 1 ms per head removed (8 heads: 10 ms dense) and the prediction is
    off by 1 head: the search predicts from dense and minimal, measures, and removes one more."""
    from pruning_core.modeling.architectures import find_sites, layout_of
    from pruning_core.compress import latency
    lm = tiny_loaded("bert", tmp_path)

    def fake_timer(loaded, batch_size, seq_len, repeats, min_seconds):
        def time_models(models):
            return {k: 2.0 + layout_of(find_sites(m)).total_heads + (0.5 if k == "pruned" else 0.0)
                    for k, m in models.items()}
        return time_models
    monkeypatch.setattr(latency, "_timer", fake_timer)
    found = search_mask(lm, _scores(lm.layout), Budget("latency_ms", 7.0), latency_probe=latency.latency_probe(lm))
    record = found.latency
    assert record["dense_ms"] == 10.0 and record["minimal_ms"] == 4.0 and record["predicted_heads"] == 3
    assert [t["heads_removed"] for t in record["tries"]] == [3, 4] and record["met"] and found.heads_removed == 4
