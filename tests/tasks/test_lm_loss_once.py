"""The language-model task computes the next-token cross-entropy once per batch: the evaluation loop keeps
each window's loss, and the window's prediction is that loss with its token count."""
from __future__ import annotations

import math

import pytest
import torch

from pruning_core.modeling.inference import packed_logits
from pruning_core.tasks import get_task
from pruning_core.tasks import language_model as lm_module
from tiny import tiny_loaded

DOCS = ["the good movie was fun", "a bad film it was not very great", "the plot was dull and the acting awful",
        "love the movie really love it", "it is a very very good film the acting is great", "hate the plot"] * 3


pytestmark = pytest.mark.usefixtures("fresh_task_cache")


@pytest.fixture
def setup(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("\n".join(DOCS) + "\n")
    loaded = tiny_loaded("llama", tmp_path)
    task = get_task(f"file:{path}")
    return loaded, task, task.encode(loaded, "test", max_length=8)


def _counting(monkeypatch) -> list[int]:
    """Calls of the cross-entropy over the target positions (the output head projects those alone): their number
    of positions each."""
    calls = []
    real = packed_logits.target_losses

    def counted(weight, bias, hidden, targets, chunk=packed_logits.CHUNK):
        calls.append(targets.shape[0])
        return real(weight, bias, hidden, targets, chunk)
    monkeypatch.setattr(packed_logits, "target_losses", counted)
    return calls


def test_evaluate_computes_the_cross_entropy_once_per_batch(setup, monkeypatch):
    loaded, task, data = setup
    reference = task.evaluate(loaded, data, batch_size=4)
    calls = _counting(monkeypatch)
    again = task.evaluate(loaded, data, batch_size=4)
    assert len(calls) == data.n_batches(4) >= math.ceil(data.n_examples / 4) and sum(calls) == sum(again.example_weights)
    assert again.metric == pytest.approx(reference.metric) and again.per_example == reference.per_example
    assert math.isfinite(again.metric)


def test_window_predictions_are_the_loops_per_window_losses(setup):
    """Each window's prediction is the (loss, tokens) the loop kept for it, recomputed here one window at a time."""
    loaded, task, data = setup
    res = task.evaluate(loaded, data, batch_size=4)
    assert res.predictions == tuple(zip(res.example_losses, res.example_weights))
    with torch.inference_mode():
        for j in range(data.n_examples):
            batch = task._collate(data, [j], loaded.device)
            alone = float(lm_module.token_losses(loaded.model(**batch.inputs), batch.labels)[0])
            # float32 sums over a window's targets, with the window padded in a batch or alone: ~1e-6 relative
            assert res.example_losses[j] == pytest.approx(alone, rel=1e-5)
            assert res.example_weights[j] == int((batch.labels[:, 1:] != -100).sum())


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_the_head_projects_the_target_positions_alone_and_the_losses_equal_the_whole_logits(arch, tmp_path,
                                                                                           monkeypatch):
    """The positions that predict a target alone are projected (no padding, no window's last token; the model's
    own head projects none) and the losses equal the cross-entropy of the model's whole logits up to float32
    rounding (another matrix-product kernel and blocking for the head: ~1e-7 relative)."""
    path = tmp_path / "x.txt"
    path.write_text("\n".join(DOCS) + "\n")
    loaded = tiny_loaded(arch, tmp_path)
    task = get_task(f"file:{path}")
    data = task.encode(loaded, "test", max_length=8)
    projected = []
    head = loaded.model.get_output_embeddings()
    handle = head.register_forward_hook(lambda m, args, out: projected.append(out.shape[1]))
    calls = _counting(monkeypatch)
    try:
        res = task.evaluate(loaded, data, batch_size=4)
    finally:
        handle.remove()
    assert set(projected) == {0} and sum(calls) == sum(res.example_weights) < sum(data.lengths)
    with torch.inference_mode():
        for batch in data.batches(4):
            whole = lm_module.token_losses(loaded.model(**batch.inputs), batch.labels)
            for j, loss in zip(batch.index.tolist(), whole.tolist()):
                assert res.example_losses[j] == pytest.approx(loss, rel=1e-6)


def test_the_output_weight_is_packed_once_while_it_lives_and_again_after_an_in_place_change():
    import gc

    from pruning_core.modeling.inference import packed_logits

    if not packed_logits._onednn():
        pytest.skip("this torch has no oneDNN packed linear: projection() uses linear, nothing is packed")
    weight, bias, hidden = torch.randn(50, 8), torch.zeros(50), torch.randn(3, 8)
    with torch.inference_mode():
        first = packed_logits.projection(weight, bias, hidden)(hidden)
        packed = packed_logits._PACKED[id(weight)][1]
        assert packed_logits._packed(weight) is packed                   # the second use finds it
        assert torch.allclose(first, hidden @ weight.T + bias, atol=1e-5)
    with torch.no_grad():
        weight.mul_(2)                                                   # a changed weight is packed again
    with torch.inference_mode():
        assert torch.allclose(packed_logits.projection(weight, bias, hidden)(hidden), 2 * first, atol=1e-5)
    del weight
    gc.collect()
    assert not any(v[1] is packed for v in packed_logits._PACKED.values())
