"""The headprune command on a tiny model and a tiny file task: flows and clear errors."""
import json

import pytest

from cli_helpers import run
from pruning_core.cli.main import main


def test_score_mask_evaluate_prune_flow(workdir, capsys):
    assert run("score", "tiny", "--task", "file:tiny.csv", "--method", "gradient", "--out", "s.json") == 0
    scores = json.loads((workdir / "s.json").read_text())
    assert scores["format"] == "headprune.scores/1" and scores["normalized"] is True
    assert scores["provenance"]["n_examples"] == 24 and scores["provenance"]["task"] == "file:tiny.csv"
    assert run("mask", "s.json", "--remove", "0.5", "--out", "m.json") == 0
    mask = json.loads((workdir / "m.json").read_text())
    assert mask["format"] == "headprune.mask/1" and sum(map(sum, mask["kinds"]["encoder_self"])) == 4
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask", "m.json", "--out", "e.json") == 0
    ev = json.loads((workdir / "e.json").read_text())
    assert ev["heads_kept"] == 4 and {"metric", "loss", "provenance"} <= set(ev)
    assert run("prune", "tiny", "--mask", "m.json", "--out", "pruned") == 0
    assert run("evaluate", "pruned", "--task", "file:tiny.csv", "--out", "e2.json") == 0
    ev2 = json.loads((workdir / "e2.json").read_text())
    assert ev2["metric"] == ev["metric"] and ev2["loss"] == pytest.approx(ev["loss"], abs=1e-5)
    assert run("info", "pruned", "--out", "info.json") == 0
    assert sum(json.loads((workdir / "info.json").read_text())["layout"]["encoder_self"]) == 4


def test_curve_and_ablation_outputs(workdir):
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "random", "--step", "0.5",
               "--score-split", "test", "--out", "c.json") == 0
    curve = json.loads((workdir / "c.json").read_text())
    assert [p["heads_removed"] for p in curve["points"]] == [0, 4, 8]
    assert run("ablate", "tiny", "--task", "file:tiny.csv", "--out", "a.json") == 0
    assert len(json.loads((workdir / "a.json").read_text())["rows"]) == 8
    assert run("one-per-layer", "tiny", "--task", "file:tiny.csv", "--out", "o.json") == 0


@pytest.mark.parametrize("args, message", [
    (("score", "tiny", "--task", "file:tiny.csv", "--method", "gradiant"), "Did you mean 'gradient'"),
    (("evaluate", "tiny", "--task", "file:missing.csv"), "does not exist"),
    (("evaluate", "nowhere/at/all", "--task", "file:tiny.csv"), "does not exist"),
    (("evaluate", "tiny", "--task", "file:tiny.csv", "--mask", "tiny.csv"), "not valid JSON"),
    (("evaluate", "default", "--task", "file:tiny.csv"), "headprune prepare"),
    (("bench", "tiny", "--batch-sizes", "1,x"), "--batch-sizes"),
    (("curve", "tiny", "--task", "file:tiny.csv", "--method", "random", "--step", "2"), "fraction"),
    (("prune", "tiny", "--mask", "nope.json", "--out", "x"), "does not exist"),
])
def test_errors_are_clear_and_exit_2(workdir, capsys, args, message):
    assert run(*args) == 2
    err = capsys.readouterr().err
    assert err.startswith("headprune: error:") and message in err and "Traceback" not in err


def test_mask_for_another_model_is_refused(workdir, capsys):
    (workdir / "other.json").write_text(json.dumps(
        {"format": "headprune.mask/1", "model": "x", "kinds": {"encoder_self": [[1] * 12] * 6}}))
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask", "other.json") == 2
    assert "heads per layer" in capsys.readouterr().err


@pytest.mark.heavy
def test_python_dash_m_entry_point(workdir):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "pruning_core", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "prune" in proc.stdout


def test_score_with_a_baseline_and_the_exact_ablation_check(workdir):
    """`score --method atp --baseline corrupt --verify K` writes the scores with a headprune.verify/1 field."""
    out = workdir / "atp.json"
    assert main(["score", "tiny", "--task", "file:tiny.csv", "--score-split", "test", "--method", "atp",
                 "--baseline", "corrupt", "--verify", "2", "--verify-split", "test", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["format"] == "headprune.scores/1" and data["method"] == "atp"
    assert "corrupt" in json.dumps(data["provenance"])                       # the baseline is recorded
    assert data["verify"]["format"] == "headprune.verify/1" and data["verify"]["k"] == 2
    assert -1.0 <= data["verify"]["spearman"] <= 1.0
