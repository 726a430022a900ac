"""pruning_core.per_example: each example's loss and prediction through the task's own hooks, for
every task type (classification, translation, language model), under a mask."""
from __future__ import annotations

import pytest

from pruning_core import tasks
from pruning_core.heads import HeadMask
from pruning_core.per_example import example_outputs
from pruning_core.tasks import get_task
from test_lm_task import txt_file  # noqa: F401 - fixture
from test_tasks import cls_file, loaded_for, mt_file  # noqa: F401 - fixtures


@pytest.fixture(autouse=True)
def _fresh_cache():
    tasks.clear_cache()
    yield
    tasks.clear_cache()


@pytest.mark.parametrize("arch, fixture", [("bert", "cls_file"), ("bart", "mt_file"), ("gpt2", "txt_file")])
def test_per_example_losses_add_up_to_the_evaluation_and_predictions_match(request, tmp_path, arch, fixture):
    loaded = loaded_for(arch, tmp_path)
    task = get_task(f"file:{request.getfixturevalue(fixture)}")
    data = task.encode(loaded, "test", max_length=24)          # a random decoder writes max_length tokens
    mask = HeadMask.full(loaded.layout).toggled(next(iter(loaded.layout.kinds)), 0, 1)
    for m in (None, mask):
        ev = task.evaluate(loaded, data, m, batch_size=5)
        out = example_outputs(loaded, task, data, m, predictions=True, batch_size=5)
        assert len(out.losses) == len(out.weights) == len(out.predictions) == data.n_examples
        assert out.mean_loss == pytest.approx(ev.loss, rel=1e-4)          # same forward passes, split by row
        assert all(w >= 1 for w in out.weights)
        if task.task_type == "classification":
            right = tuple(int(p == y) for p, y in zip(out.predictions, data.labels))
            assert right == ev.per_example
        elif task.task_type == "translation":
            assert list(out.predictions) == list(ev.per_example)
        else:                                                             # windows: (loss_sum, tokens)
            assert [w for _, w in ev.per_example] == list(out.weights)
    assert example_outputs(loaded, task, data, mask).predictions == ()
