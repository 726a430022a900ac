"""Integration tests on the real embedded default (prepared MiniLM-L6 + movie-sentiment).

`make test` runs `headprune prepare` first, so these run in CI too; they skip (with the reason)
only when the default is not prepared in this HEADPRUNE_HOME.
"""
import json
import subprocess
import sys

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import default_model_dir, load_model
from pruning_core.modeling.presets import remove_least_important
from pruning_core.modeling.pruning import prune_heads
from pruning_core.scoring import ScoreConfig, get_scorer
from pruning_core.tasks import get_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default():
    if not (default_model_dir() / "config.json").is_file():
        pytest.skip("the embedded default is not prepared: run `headprune prepare` (make test does)")
    return load_model("default")


@pytest.fixture(scope="module")
def task():
    return get_task("movie-sentiment")


def test_default_layout_and_test_accuracy(default, task):
    assert default.layout.kinds == {"encoder_self": (12,) * 6}
    data = task.encode(default, "test")
    res = task.evaluate(default, data)
    assert res.metric_name == "accuracy" and res.metric >= 0.83, res


def test_gradient_scores_beat_random_when_pruning_half(default, task):
    """Removing the half of the heads with the lowest I_h hurts less than removing a random half."""
    data = task.encode(default, "validation", 400)
    grad = get_scorer("gradient").score(default, task, ScoreConfig(limit=256))
    by_grad = task.evaluate(default, data, remove_least_important(grad.ranking_scores, 0.5)).metric
    randoms = [task.evaluate(default, data, remove_least_important(
        get_scorer("random").score(default, task, ScoreConfig(seed=s)).scores, 0.5)).metric for s in range(3)]
    assert by_grad > sum(randoms) / len(randoms), (by_grad, randoms)
    assert installed_hook_count(default.model) == 0


def test_physical_pruning_matches_masking_on_the_real_model(default, task):
    data = task.encode(default, "validation", 64)
    batch = next(data.batches(64))
    mask = remove_least_important(get_scorer("random").score(default, task, ScoreConfig(seed=1)).scores, 0.5)
    with torch.inference_mode():
        with apply_mask(default, mask):
            masked = default.model(**batch.inputs).logits
        pruned = prune_heads(default.model, mask)(**batch.inputs).logits
        dense_again = default.model(**batch.inputs).logits
    assert torch.allclose(pruned, masked, atol=1e-4)
    assert not torch.allclose(dense_again, masked, atol=1e-4)


def run_cli(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "pruning_core", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    return proc


def test_cli_score_mask_evaluate_prune_roundtrip(default, tmp_path):
    r = run_cli("score", "default", "--task", "movie-sentiment", "--method", "gradient", "--limit", "128",
                "--out", "scores.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "scores.json").read_text())["format"] == "headprune.scores/1"
    r = run_cli("mask", "scores.json", "--remove", "0.5", "--out", "mask.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_cli("evaluate", "default", "--task", "movie-sentiment", "--limit", "200", "--mask", "mask.json",
                "--out", "eval.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ev = json.loads((tmp_path / "eval.json").read_text())
    assert ev["heads_kept"] == 36 and "loss" in ev and ev["provenance"]["weights_sha256"]
    r = run_cli("prune", "default", "--mask", "mask.json", "--out", "pruned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_cli("evaluate", str(tmp_path / "pruned"), "--task", "movie-sentiment", "--limit", "200",
                "--out", "eval-pruned.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pruned = json.loads((tmp_path / "eval-pruned.json").read_text())
    assert pruned["metric"] == pytest.approx(ev["metric"], abs=1e-9)
    assert pruned["loss"] == pytest.approx(ev["loss"], abs=1e-4)
    r = run_cli("info", str(tmp_path / "pruned"), cwd=tmp_path)
    assert r.returncode == 0 and "36 in all" in r.stdout, r.stdout + r.stderr
