"""One policy for the split heads are scored on (``pruning_core.tasks.default_score_split``): train when the
task has training examples of its own, else its evaluation split; used by the dashboard's Head map (its
``app.model.cache.scores`` call) and recorded in the share bundle as the split the scores were computed on."""
from __future__ import annotations

import itertools

import pytest

from app.core.session.selection import ScoreRequest, Selection
from app.model import cache
from app.headmap import latency as latency_ui
from app.core.session import session_results
from app.share import ui as share_ui
from app.runtime.work import Work
from browser_helpers import build_tiny_app
from pruning_core.core.heads import HeadMask
from pruning_core.scoring import ScoreConfig, get_scorer
from pruning_core.tasks import ClassificationTask, default_score_split, get_task
from tiny import synthetic_sentiment

_names = itertools.count()


def split_task(name: str, splits=("train", "validation")) -> ClassificationTask:
    """A classification task whose splits hold different examples (train: 40, the others: 16)."""
    rows = {s: synthetic_sentiment(40 if s == "train" else 16, seed=i) for i, s in enumerate(splits)}
    return ClassificationTask(name, lambda split, limit: rows[split][:limit], splits=splits,
                              default_split=splits[-1], label_names=["negative", "positive"])


@pytest.fixture(scope="module")
def tiny_bert_16(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("split-bert"), "bert", n_examples=16)


@pytest.fixture
def held_out(monkeypatch):
    """A fresh task name (the dashboard's caches are keyed by it) served by :func:`split_task`."""
    name = f"split-check-{next(_names)}"
    task = split_task(name)
    monkeypatch.setattr(cache, "_task", lambda n: task if n == name else get_task(n))
    return name, task


def test_the_policy(tmp_path):
    assert default_score_split(split_task("a")) == "train"
    assert default_score_split(split_task("b", ("validation", "test"))) == "test"       # no train split
    data = tmp_path / "d.csv"
    data.write_text("text,label\na good movie,1\na bad film,0\n")
    assert default_score_split(get_task(f"file:{data}")) == "test"       # a data file: one set, every split


def test_head_map_scores_come_from_the_train_split(tiny_bert_16, held_out):
    name, task = held_out
    spec = str(tiny_bert_16.model)
    assert cache.score_split_of(name) == "train" and cache.split_of(name) == "validation"
    result = cache.scores(ScoreRequest(Selection(spec, name), "gradient", 16))   # the Head map's call (app/model/jobs.py)
    assert result.provenance["split"] == "train" and result.provenance["n_examples"] == 16
    on_train = get_scorer("gradient").score(cache.load(spec), task, ScoreConfig(split="train", limit=16))
    on_validation = get_scorer("gradient").score(cache.load(spec), task, ScoreConfig(split="validation", limit=16))
    assert result.scores == on_train.scores and result.scores != on_validation.scores


@pytest.mark.parametrize("scorer, recorded", [("gradient", "train"), ("random", None)])
def test_the_bundle_records_the_split_the_scores_were_computed_on(tiny_bert_16, held_out, monkeypatch, scorer,
                                                                   recorded):
    name, _ = held_out
    monkeypatch.setattr(Work, "show", lambda self, *a, **k: self.fn(*self.args, **self.kwargs))   # no progress bar
    monkeypatch.setattr(session_results, "get_result", lambda key: None)
    monkeypatch.setattr(latency_ui, "measurement", lambda spec, mask, **kwargs: None)
    spec = str(tiny_bert_16.model)
    mask = HeadMask.full(cache.load(spec).layout).toggled("encoder_self", 0, 1)
    analysis = share_ui.gather_analysis(Selection(spec, name, 8), scorer, mask, curve_scorers=[],
                                        with_ablation=False, with_one_per_layer=False)
    used = analysis.scores[scorer].provenance.get("split")
    assert analysis.provenance["settings"]["score_split"] == used
    assert used == recorded                                          # random scores read no data
    assert analysis.provenance["split"] == "validation"             # where the metric was measured
