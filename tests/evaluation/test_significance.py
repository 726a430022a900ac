"""Significance on tiny models: ablation rows carry paired tests, curves carry intervals, seeds and
the split they were scored on (the CLI's --score-split and --seeds: tests/cli/test_cli_significance.py)."""
import pytest

from fake_task import FakeTask
from pruning_core.evaluation.experiments import (
    AblationResult,
    CurveResult,
    ablation_table,
    pruning_curve,
    seeded_curves,
)
from pruning_core.scoring import ScoreConfig, get_scorer
from pruning_core.evaluation.significance import MCNEMAR
from tiny import tiny_loaded


def test_ablation_rows_carry_p_values_and_counts_agree(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=40)
    table = ablation_table(lm, task, task.data)
    assert table.test == MCNEMAR and "Holm" in table.note
    for r in table.rows:
        assert 0 <= r.p_value <= r.p_holm <= 1
        assert r.delta_low <= r.delta_metric + 1e-9 and r.delta_metric - 1e-9 <= r.delta_high
        assert r.significant == (r.p_holm < 0.05)
    raw, held = table.n_significant(adjusted=False), table.n_significant()
    assert held <= raw == sum(r.p_value < 0.05 for r in table.rows)
    data = table.to_json()
    assert data["n_significant_holm"] == held and data["n_significant_raw"] == raw
    assert data["provenance"]["settings"]["adjustment"] == "holm"
    assert AblationResult.from_json(data) == table
    old = {**data, "rows": [{k: v for k, v in r.items() if k not in ("p_value", "p_holm", "significant",
                                                                     "delta_low", "delta_high")}
                            for r in data["rows"]]}
    assert AblationResult.from_json(old).rows[0].p_value is None


def test_curve_scored_on_train_measured_elsewhere(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=12)
    curve = pruning_curve(lm, task, task.data, get_scorer("gradient"), ScoreConfig(split="train", limit=8), step=0.5)
    settings = curve.provenance["settings"]
    assert settings["score_split"] == "train" and settings["score_limit"] == 8
    assert settings["eval_split"] == curve.provenance["split"] == "validation" != settings["score_split"]
    assert settings["eval_n"] == 12
    for p in curve.points:
        assert p.low <= p.metric <= p.high and len(p.per_example) == 12
    assert CurveResult.from_json(curve.to_json()) == curve


def test_random_curve_over_seeds_has_a_band(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=12)
    curve = seeded_curves(lm, task, task.data, get_scorer("random"), ScoreConfig(seed=4), 3, step=0.5)
    assert curve.seeds == (4, 5, 6) and curve.has_band
    for p in curve.points:
        assert len(p.seed_metrics) == 3 and p.metric == pytest.approx(sum(p.seed_metrics) / 3)
        assert p.band_low <= p.metric <= p.band_high and p.sd >= 0 and p.low <= p.metric <= p.high
    assert curve.points[0].sd == 0                       # nothing removed: every seed is the same model
    assert CurveResult.from_json(curve.to_json()) == curve
