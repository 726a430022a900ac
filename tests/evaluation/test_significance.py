"""Significance on tiny models: ablation rows carry paired tests, curves carry intervals, seeds and
the split they were scored on; the CLI's --score-split and --seeds."""
import json

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
from cli_helpers import run
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


def test_cli_curve_needs_a_score_split_on_a_file_task(workdir, capsys):  # noqa: F811
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "gradient") == 2
    err = capsys.readouterr().err
    assert "--score-split" in err and len(err.strip().splitlines()) == 1
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "gradient", "--score-split", "nope") == 2
    assert "has no 'nope' split" in capsys.readouterr().err
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "gradient", "--step", "0.5",
               "--score-split", "train", "--score-limit", "10", "--split", "test", "--out", "c.json") == 0
    settings = json.loads((workdir / "c.json").read_text())["provenance"]["settings"]
    assert settings["score_split"] == "train" and settings["score_limit"] == 10 and settings["score_n"] == 10
    assert settings["eval_split"] == "test" and settings["eval_n"] == 24


def test_cli_curve_seeds(workdir, capsys):  # noqa: F811
    base = ("curve", "tiny", "--task", "file:tiny.csv", "--step", "0.5", "--score-split", "test")
    assert run(*base, "--method", "random", "--out", "r.json") == 0            # random: 3 seeds by default
    data = json.loads((workdir / "r.json").read_text())
    assert data["seeds"] == [0, 1, 2] and all(len(p["seed_metrics"]) == 3 for p in data["points"])
    assert "mean ± sd over 3 seeds" in capsys.readouterr().out
    assert run(*base, "--method", "random", "--seeds", "2", "--seed", "7", "--out", "r2.json") == 0
    assert json.loads((workdir / "r2.json").read_text())["seeds"] == [7, 8]
    assert run(*base, "--method", "gradient", "--seeds", "2") == 2
    assert "Leave --seeds out" in capsys.readouterr().err
    assert run(*base, "--method", "random", "--seeds", "0") == 2


def test_cli_ablate_reports_significance(workdir, capsys):  # noqa: F811
    assert run("ablate", "tiny", "--task", "file:tiny.csv", "--out", "a.json") == 0
    out = capsys.readouterr().out
    data = json.loads((workdir / "a.json").read_text())
    assert f"{data['n_significant_raw']} of 8 heads differ" in out
    assert f"{data['n_significant_holm']} after Holm" in out
    assert all(r["p_value"] is not None for r in data["rows"])


def test_cli_one_per_layer_scores_on_the_score_split(workdir, capsys):  # noqa: F811
    assert run("one-per-layer", "tiny", "--task", "file:tiny.csv", "--method", "gradient", "--score-split", "train",
               "--score-limit", "8", "--out", "o.json") == 0
    assert "heads scored by gradient on train (8 examples)" in capsys.readouterr().out
    assert json.loads((workdir / "o.json").read_text())["selection"] == "scores:gradient"
    assert run("one-per-layer", "tiny", "--task", "file:tiny.csv", "--method", "gradient") == 2


def test_cli_score_split_for_the_mask_producer(workdir):  # noqa: F811
    assert run("score", "tiny", "--task", "file:tiny.csv", "--score-split", "train", "--score-limit", "6",
               "--out", "s.json") == 0
    prov = json.loads((workdir / "s.json").read_text())["provenance"]
    assert prov["split"] == "train" and prov["n_examples"] == 6
    assert run("mask", "s.json", "--remove", "0.5", "--out", "m.json") == 0
    mask_prov = json.loads((workdir / "m.json").read_text())["provenance"]
    assert mask_prov["score_split"] == "train" and mask_prov["score_n"] == 6


def test_cli_score_defaults_to_a_train_subset_when_the_task_has_one(workdir, monkeypatch):  # noqa: F811
    import pruning_core.tasks as tasks
    from tiny import synthetic_sentiment

    data = {"train": synthetic_sentiment(40, 0), "validation": synthetic_sentiment(12, 1)}
    task = tasks.ClassificationTask("two-splits", lambda split, limit: data[split], splits=("train", "validation"),
                                    default_split="validation", label_names=["neg", "pos"])
    monkeypatch.setattr(tasks, "get_task", lambda name: task)
    assert run("score", "tiny", "--task", "two-splits", "--method", "gradient", "--out", "s.json") == 0
    prov = json.loads((workdir / "s.json").read_text())["provenance"]
    assert prov["split"] == "train" and prov["n_examples"] == 40        # all 40 (< the default 512)
    assert run("score", "tiny", "--task", "two-splits", "--split", "validation", "--out", "v.json") == 0
    assert json.loads((workdir / "v.json").read_text())["provenance"]["split"] == "validation"
