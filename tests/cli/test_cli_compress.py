"""``headprune compress`` and ``curve --repair`` on a tiny model and a tiny file task."""
import json

import pytest

from pruning_core.evaluation.experiments import CurveResult
from pruning_core.modeling.sources.loading import load_model
from cli_helpers import run

COMMON = ("--task", "file:tiny.csv", "--calibration", "16", "--batch-size", "8")


def test_compress_saves_a_smaller_model_that_loads_and_reports_every_step(workdir, capsys):
    assert run("compress", "tiny", *COMMON, "--remove", "0.5", "--out", "small") == 0
    out = capsys.readouterr().out
    assert "pruned without repair" in out and "with repair" in out and "removed 4/8 heads" in out
    report = json.loads((workdir / "small" / "headprune_compress.json").read_text())
    assert report["format"] == "headprune.compress/1" and report["heads_removed"] == 4
    assert {"scores", "search", "rearrangement", "repair", "seconds", "provenance", "evaluation"} <= set(report)
    assert report["scores"]["method"] == "fisher" and report["calibration"]["examples"] == 16
    loaded = load_model(str(workdir / "small"), device="cpu")
    assert loaded.layout.total_heads == 4
    assert run("evaluate", "small", "--task", "file:tiny.csv", "--split", "test", "--out", "e.json") == 0
    ev = json.loads((workdir / "e.json").read_text())
    assert ev["loss"] == pytest.approx(report["evaluation"]["repaired"]["loss"], abs=1e-5)


def test_compress_without_repair_is_the_masked_model(workdir):
    assert run("compress", "tiny", *COMMON, "--flops", "0.05", "--no-repair", "--out", "plain") == 0
    report = json.loads((workdir / "plain" / "headprune_compress.json").read_text())
    assert "skipped" in report["repair"] and "repaired" not in report["evaluation"]
    assert report["search"]["flop_fraction"] >= 0.05
    assert run("evaluate", "plain", "--task", "file:tiny.csv", "--split", "test", "--out", "e.json") == 0
    ev = json.loads((workdir / "e.json").read_text())
    assert ev["loss"] == pytest.approx(report["evaluation"]["pruned"]["loss"], abs=1e-5)


@pytest.mark.parametrize("args, message", [
    (("--remove", "1.0"), "at most 6"),
    (("--flops", "0.9"), "cannot be met"),
    (("--remove", "1.5"), "fraction from 0 to 1"),
    (("--remove", "0.5", "--scorer", "fishr"), "Did you mean 'fisher'"),
])
def test_impossible_budgets_say_what_to_do_and_leave_no_folder(workdir, capsys, args, message):
    assert run("compress", "tiny", *COMMON, *args, "--out", "never") == 2
    err = capsys.readouterr().err
    assert "headprune: error:" in err and message in err and "Traceback" not in err
    assert not (workdir / "never").exists() and not list(workdir.glob("never.*"))


def test_curve_repair_adds_repaired_points(workdir):
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "fisher", "--step", "0.5",
               "--score-split", "test", "--repair", "--out", "c.json") == 0
    data = json.loads((workdir / "c.json").read_text())
    assert data["format"] == "headprune.curve/1" and data["provenance"]["settings"]["repair"]["calibration_examples"]
    points = CurveResult.from_json(data).points
    assert all(p.repaired_metric is not None and p.repaired_loss is not None for p in points)
    assert points[0].repaired_metric == points[0].metric            # nothing removed: nothing to repair
    assert run("curve", "tiny", "--task", "file:tiny.csv", "--method", "random", "--step", "0.5",
               "--score-split", "test", "--repair", "--seeds", "3") == 2


def test_compress_target_option_reaches_every_tuned_layer(workdir):
    """--target residual fits each layer's sum before its LayerNorm (the default stays the output projection's)."""
    for target, out in (("residual", "res"), (None, "plain-target")):
        assert run("compress", "tiny", *COMMON, "--remove", "0.5", *(("--target", target) if target else ()),
                   "--out", out) == 0
        repair = json.loads((workdir / out / "headprune_compress.json").read_text())["repair"]
        tuned = [l for l in repair["layers"] if l["residual_before"] > 0]
        assert tuned and {l["target"] for l in tuned} == {target or "output"}
        assert repair["target"].startswith("residual sum" if target else "output projection")
