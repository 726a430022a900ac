"""The language-model task computes the next-token cross-entropy once per batch: the evaluation loop's
loss_sum and predict_batch share it, and predict_batch alone (another batch or other logits) recomputes."""
from __future__ import annotations

import math

import pytest
import torch

from pruning_core import tasks
from pruning_core.tasks import get_task
from pruning_core.tasks import language_model as lm_module
from pruning_core.tasks.base import EvalState
from tiny import tiny_loaded

DOCS = ["the good movie was fun", "a bad film it was not very great", "the plot was dull and the acting awful",
        "love the movie really love it", "it is a very very good film the acting is great", "hate the plot"] * 3


@pytest.fixture(autouse=True)
def _fresh_cache():
    tasks.clear_cache()
    yield
    tasks.clear_cache()


@pytest.fixture
def setup(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("\n".join(DOCS) + "\n")
    loaded = tiny_loaded("llama", tmp_path)
    task = get_task(f"file:{path}")
    return loaded, task, task.encode(loaded, "test", max_length=8)


def _counting(monkeypatch) -> list[int]:
    calls = []
    real = lm_module.token_losses

    def counted(outputs, labels):
        calls.append(labels.shape[0])
        return real(outputs, labels)
    monkeypatch.setattr(lm_module, "token_losses", counted)
    return calls


def test_evaluate_computes_the_cross_entropy_once_per_batch(setup, monkeypatch):
    loaded, task, data = setup
    reference = task.evaluate(loaded, data, batch_size=4)
    calls = _counting(monkeypatch)
    again = task.evaluate(loaded, data, batch_size=4)
    assert len(calls) == math.ceil(data.n_examples / 4) and sum(calls) == data.n_examples
    assert again.metric == pytest.approx(reference.metric) and again.per_example == reference.per_example
    assert math.isfinite(again.metric)


def test_predict_batch_recomputes_for_other_logits(setup, monkeypatch):
    loaded, task, data = setup
    batch = next(iter(data.batches(4, device=loaded.device)))
    with torch.inference_mode():
        first = loaded.model(**batch.inputs)
        task.loss_sum(loaded, batch, first)
        other = type(first)(logits=first.logits * 0.5)                 # different logits, same batch
        calls = _counting(monkeypatch)
        state = EvalState(predictions=[None] * data.n_examples)
        task.predict_batch(loaded, data, batch, other, state)
    assert calls == [batch.n_examples]                                  # recomputed, not the stale losses
    rows = [state.predictions[j][0] for j in batch.index.tolist()]
    with torch.inference_mode():
        want = lm_module.token_losses(other, batch.labels).tolist()
    assert rows == pytest.approx(want)
