"""The CLI's significance and score-split options on a tiny BERT: ``curve --score-split/--seeds``, ``ablate``'s
paired tests, ``one-per-layer`` and ``score`` on the score split, and the mask that records it."""
import json

from cli_helpers import run


def test_cli_curve_needs_a_score_split_on_a_file_task(workdir, capsys):
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


def test_cli_curve_seeds(workdir, capsys):
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


def test_cli_ablate_reports_significance(workdir, capsys):
    assert run("ablate", "tiny", "--task", "file:tiny.csv", "--out", "a.json") == 0
    out = capsys.readouterr().out
    data = json.loads((workdir / "a.json").read_text())
    assert f"{data['n_significant_raw']} of 8 heads differ" in out
    assert f"{data['n_significant_holm']} after Holm" in out
    assert all(r["p_value"] is not None for r in data["rows"])


def test_cli_one_per_layer_scores_on_the_score_split(workdir, capsys):
    assert run("one-per-layer", "tiny", "--task", "file:tiny.csv", "--method", "gradient", "--score-split", "train",
               "--score-limit", "8", "--out", "o.json") == 0
    assert "heads scored by gradient on train (8 examples)" in capsys.readouterr().out
    assert json.loads((workdir / "o.json").read_text())["selection"] == "scores:gradient"
    assert run("one-per-layer", "tiny", "--task", "file:tiny.csv", "--method", "gradient") == 2


def test_cli_score_split_for_the_mask_producer(workdir):
    assert run("score", "tiny", "--task", "file:tiny.csv", "--score-split", "train", "--score-limit", "6",
               "--out", "s.json") == 0
    prov = json.loads((workdir / "s.json").read_text())["provenance"]
    assert prov["split"] == "train" and prov["n_examples"] == 6
    assert run("mask", "s.json", "--remove", "0.5", "--out", "m.json") == 0
    mask_prov = json.loads((workdir / "m.json").read_text())["provenance"]
    assert mask_prov["score_split"] == "train" and mask_prov["score_n"] == 6


def test_cli_score_defaults_to_a_train_subset_when_the_task_has_one(workdir, monkeypatch):
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
