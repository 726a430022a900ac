"""Training dynamics (``headprune dynamics``) on a tiny BERT and a synthetic task: the steps it
records, what step 0 is, the JSON format, the CLI's option checks and the dashboard page."""
from __future__ import annotations

import copy
import functools
import json

import pytest
import torch

from pruning_core.analysis.dynamics import (
    Checkpoint,
    DynamicsConfig,
    DynamicsResult,
    format_table,
    spearman,
    summary_rows,
    training_dynamics,
)
from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.evaluation.experiments import CurvePoint
from pruning_core.tasks.finetune import FinetuneConfig, finetune_classifier
from pruning_core.modeling.sources.loading import weights_hash_of_module
from pruning_core.tasks.classification import ClassificationTask
from tiny import synthetic_sentiment, tiny_model, tokenizer_for

synthetic = functools.partial(synthetic_sentiment, max_filler=8)    # 2 to 8 filler words

FINETUNE = FinetuneConfig(epochs=2, lr=3e-3, batch_size=16, max_length=16, seed=1)   # 96 examples: 6 steps an epoch


def synthetic_task():
    data = {"train": synthetic(96, 0), "validation": synthetic(40, 1)}
    return ClassificationTask("synthetic", lambda split, limit: data[split], splits=("train", "validation"),
                              default_split="validation", label_names=["neg", "pos"])


CONFIG = DynamicsConfig(steps=(0, 2, 5), fractions=(0.0, 0.25, 0.5), score_limit=32, eval_limit=40, batch_size=16,
                        finetune=FINETUNE)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tok = tokenizer_for(tmp_path_factory.mktemp("dyn"))
    model = tiny_model("bert", seed=0)
    before = copy.deepcopy(model)
    events = []
    result = training_dynamics(model, tok, synthetic_task(), CONFIG, model_id="tiny-bert", progress=events.append)
    return result, before, tok, events


def test_records_the_requested_steps_in_order_and_stops_after_the_last(run):
    result, _, _, events = run
    assert [c.step for c in result.checkpoints] == [0, 2, 5]
    assert result.total_steps == 12 and result.total_heads == 8 and result.metric_name == "accuracy"
    assert result.n_score_examples == 32 and result.n_eval_examples == 40
    assert result.provenance["settings"]["finetune_stats"]["steps"] == 5        # stopped at the last step
    assert [e.done for e in events if e.stage == "dynamics:measure"] == [1, 2, 3]
    for c in result.checkpoints:
        assert c.head_scores.layout.kinds == {"encoder_self": (4, 4)}              # 2 layers x 4 heads
        assert [p.heads_removed for p in c.points] == [0, 2, 4]
        assert c.points[0].metric == c.metric and 0 <= c.metric <= 1
        removed = [sum(1 - v for row in p.mask["encoder_self"] for v in row) for p in c.points]
        assert removed == [0, 2, 4]
    first, last = result.checkpoints[0], result.checkpoints[-1]
    assert first.train_loss is None and first.epoch == 0 and first.rank_corr_previous is None
    assert last.rank_corr_final == pytest.approx(1.0) and last.epoch == pytest.approx(5 / 6)
    assert all(c.rank_corr_previous is not None for c in result.checkpoints[1:])
    assert len(result.provenance["settings"]["weights_sha256_by_step"]) == 3


def test_step_0_is_the_model_before_any_update(run):
    from pruning_core.analysis.dynamics import _as_loaded
    from pruning_core.scoring.gradient import per_token_importance
    result, before, tok, _ = run
    hashes = result.provenance["settings"]["weights_sha256_by_step"]
    assert hashes["0"] == weights_hash_of_module(before) != hashes["2"]
    task = synthetic_task()
    loaded = _as_loaded(before, tok, "before")
    raw = per_token_importance(loaded, task, task.encode(loaded, "train", 32, max_length=16), batch_size=16)
    got = result.checkpoints[0].head_scores
    assert all(got.get(h) == pytest.approx(raw.get(h), rel=1e-5) for h in raw.layout.heads())
    base = task.evaluate(loaded, task.encode(loaded, "validation", 40, max_length=16), None, batch_size=16)
    assert result.checkpoints[0].metric == pytest.approx(base.metric)


def test_json_round_trips_and_bad_files_are_refused(run):
    result = run[0]
    data = json.loads(json.dumps(result.to_json()))
    assert data["format"] == "headprune.dynamics/1" and data["config"]["steps"] == [0, 2, 5]
    assert DynamicsResult.from_json(data) == result
    with pytest.raises(FormatError, match="headprune.curve/1"):
        DynamicsResult.from_json({**data, "format": "headprune.curve/1"})
    with pytest.raises(FormatError, match="malformed"):
        DynamicsResult.from_json({**data, "checkpoints": [{"step": 1}]})
    table = format_table(result)
    assert "rho_final" in table and len(table.splitlines()) == 2 + 3
    assert [r["step"] for r in summary_rows(result)] == [0, 2, 5] and "removed_50%" in summary_rows(result)[0]


def test_measuring_does_not_change_the_training_run(tmp_path):
    tok = tokenizer_for(tmp_path)
    short = FinetuneConfig(epochs=1, lr=3e-3, batch_size=16, max_length=16, seed=1, max_steps=4)
    plain = finetune_classifier(tiny_model("bert", seed=0), tok, synthetic(), short)
    seen, modes = [], []

    def on_step(step, model):
        modes.append(model.training)
        seen.append(step)
        model.eval()
        with torch.no_grad():
            model(input_ids=torch.tensor([[2, 9, 3]]))
    hooked = finetune_classifier(tiny_model("bert", seed=0), tok, synthetic(), short, on_step=on_step)
    assert seen == [0, 1, 2, 3, 4] and all(modes) and hooked.losses == plain.losses
    stopped = finetune_classifier(tiny_model("bert", seed=0), tok, synthetic(), short, on_step=lambda s, m: s >= 2)
    assert stopped.steps == 2 and stopped.losses == plain.losses[:2]


def test_bad_configs_and_steps_past_the_end(tmp_path):
    for bad in [dict(steps=()), dict(steps=(5, 3)), dict(steps=(-1, 2)), dict(fractions=(0.5, 0.2)),
                dict(fractions=(0, 1.5)), dict(score_limit=0), dict(batch_size=0)]:
        with pytest.raises(HeadpruneError):
            DynamicsConfig(**bad)
    with pytest.raises(HeadpruneError, match="past the end of fine-tuning .12 steps"):
        training_dynamics(tiny_model("bert"), tokenizer_for(tmp_path), synthetic_task(),
                          DynamicsConfig(steps=(0, 13), finetune=FINETUNE))


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)      # ties share their mean rank
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(HeadpruneError):
        spearman([1, 2], [1, 2, 3])


@pytest.mark.parametrize("argv, message", [
    (["--steps", "5,3"], "--steps must be increasing"),
    (["--steps", "0,x"], "--steps must be increasing"),
    (["--fractions", "0,1.5"], "--fractions must be increasing shares"),
    (["--fractions", "a"], "--fractions must be increasing shares"),
    (["--score-limit", "0"], "--score-limit must be a whole number of at least 1"),
    (["--eval-limit", "-3"], "--eval-limit must be a whole number of at least 1"),
    (["--batch-size", "0"], "--batch-size must be a whole number of at least 1"),
])
def test_cli_option_checks(argv, message, capsys):
    from pruning_core.cli.main import main
    assert main(["dynamics", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_out_must_be_a_writable_file(tmp_path, capsys):
    from pruning_core.cli.main import main
    assert main(["dynamics", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


# -- the dashboard page ----------------------------------------------------------------------------

def synthetic_result() -> DynamicsResult:
    mask = {"encoder_self": [[1, 1], [1, 1]]}
    checkpoints = tuple(
        Checkpoint(step, step / 10, None if step == 0 else 0.5, 0.5 + 0.04 * i,
                   0.6, {"encoder_self": [[1.0 + i, 2.0], [3.0, 4.0 - i]]},
                   tuple(CurvePoint(f, round(4 * f), 0.5 + 0.04 * i - 0.1 * f * (3 - i), 0.6, mask)
                         for f in (0.0, 0.25, 0.5)),
                   [0.2, 0.6, 1.0][i], None if i == 0 else 0.8, 1.0)
        for i, step in enumerate((0, 5, 20)))
    return DynamicsResult("accuracy", 20, 4, 8, 16, checkpoints, {"steps": [0, 5, 20]},
                          {"task": "synthetic", "split": "validation", "created": "2026-01-01T00:00:00+00:00"})


@pytest.fixture
def page(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest
    from browser_helpers import ROOT, app_env, build_tiny_app
    import app.curves.dynamics as dc
    tiny = build_tiny_app(tmp_path / "app", "bert")
    for key, value in app_env(tiny, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)

    def open_with(content: str | None) -> AppTest:
        path = tmp_path / "dynamics.json"
        if content is not None:
            path.write_text(content)
        monkeypatch.setattr(dc, "DEFAULT_RESULT", path)
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
        at.run()
        at.switch_page("app_pages/dynamics.py").run()
        assert not at.exception, [e.value for e in at.exception]
        return at
    return open_with


def test_dynamics_page_draws_a_synthetic_run(page):
    result = synthetic_result()
    assert DynamicsResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    at = page(json.dumps(result.to_json()))
    assert at.title[0].value == "Training dynamics" and not at.error
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe) == 1
    assert list(at.dataframe[0].value["step"]) == [0, 5, 20]


def test_drop_heatmap_has_one_tick_per_column():
    """The columns mean 0/25/50 % removed, but plotly.js guessed a linear axis from
    the labels ("25 %" reads as 25) and ticked it -10, 0, 10 …; the axis is categorical now."""
    from app.curves.dynamics import drop_heatmap_figure
    fig = drop_heatmap_figure(synthetic_result())
    assert list(fig.data[0].x) == ["0 %", "25 %", "50 %"]
    assert fig.layout.xaxis.type == "category" and fig.layout.yaxis.type == "category"


def test_dynamics_page_without_a_file_or_with_a_bad_one(page):
    at = page(None)
    assert any("No dynamics run yet" in i.value for i in at.info) and not at.error
    at = page('{"format": "headprune.curve/1"}')
    assert at.error and "dynamics" in at.error[0].value and "needed here" in at.error[0].value


def test_cli_runs_on_a_model_folder_and_writes_json(tmp_path, capsys):
    from browser_helpers import build_tiny_app
    from pruning_core.cli.main import main
    tiny = build_tiny_app(tmp_path / "app", "bert")             # 48 snippets: 2 steps an epoch at batch 32
    out = tmp_path / "res" / "dynamics.json"
    assert main(["dynamics", "--model", str(tiny.model), "--task", tiny.task, "--steps", "0,1,3",
                 "--fractions", "0,0.5", "--score-limit", "8", "--eval-limit", "16", "--batch-size", "8",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rho_final" in printed and f"wrote {out}" in printed
    result = DynamicsResult.from_json(json.loads(out.read_text()))
    assert [c.step for c in result.checkpoints] == [0, 1, 3] and result.total_steps == 4
    assert result.provenance["model"] == str(tiny.model) and result.provenance["task"] == tiny.task
    assert main(["dynamics", "--model", str(tiny.model), "--task", tiny.task, "--steps", "0,9"]) == 2
    assert "past the end of fine-tuning (4 steps" in capsys.readouterr().err
