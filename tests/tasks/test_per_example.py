"""pruning_core.tasks.per_example: each example's loss and prediction come from the one evaluation that gives
the metric and its interval, for every task type (classification, translation, language model, asr)."""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.tasks.per_example import ExampleOutputs, example_outputs
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import compare
from pruning_core.tasks import get_task
from task_files import listing_folder, loaded_for
from tiers import heavy_beyond
from tiny import tiny_loaded

CASES = [("bert", "cls_file"), ("bart", "mt_file"), ("gpt2", "txt_file"), ("whisper", "speech_folder")]


pytestmark = pytest.mark.usefixtures("fresh_task_cache")


@pytest.fixture
def speech_folder(tmp_path):
    return listing_folder(tmp_path, ("the movie was good", "it was a bad film", "a great plot", "dull acting",
                                      "it was fun", "not very good", "really awful"))


def _setup(request, tmp_path, arch, fixture):
    if arch == "whisper":
        loaded, name = tiny_loaded(arch, tmp_path), f"speech:{request.getfixturevalue(fixture)}"
    else:
        loaded, name = loaded_for(arch, tmp_path), f"file:{request.getfixturevalue(fixture)}"
    task = get_task(name)
    return loaded, task, task.encode(loaded, "test", max_length=12)   # a random decoder writes max_length tokens


@contextlib.contextmanager
def counting(loaded):
    """``(passes, decodes)``: forward passes over a batch of examples (a call of the model with the batch's inputs
    alone; decoding steps pass their key/value cache as well, or call the decoder alone, and are not passes) and
    decodings of a batch (``generate``, or the translation and speech tasks' step-by-step greedy decoder)."""
    from pruning_core.tasks import base

    passes, decodes = [], []
    model = loaded.model
    real_generate = getattr(model, "generate", None)
    real_greedy = base.greedy_decode

    def counted_generate(*args, **kwargs):
        decodes.append(1)
        return real_generate(*args, **kwargs)

    def counted_greedy(*args, **kwargs):
        decodes.append(1)
        return real_greedy(*args, **kwargs)

    def pre_hook(module, args, kwargs):
        if "past_key_values" not in kwargs:
            passes.append(1)

    handle = model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    if real_generate is not None:
        model.generate = counted_generate
    base.greedy_decode = counted_greedy
    try:
        yield passes, decodes
    finally:
        handle.remove()
        model.__dict__.pop("generate", None)
        base.greedy_decode = real_greedy


def _old_row_loss(task, batch, logits, j) -> float:
    """Example ``j``'s loss as the old per-example loop gave it: row ``j`` of the batch's logits, summed on its own."""
    labels = batch.labels[j:j + 1]
    row = logits[j:j + 1].float()
    if task.task_type == "classification":
        return float(F.cross_entropy(row, labels, reduction="sum"))
    if task.task_type == "language_model":
        row, labels = row[:, :-1], labels[:, 1:]
    return float(F.cross_entropy(row.reshape(-1, row.shape[-1]), labels.reshape(-1), ignore_index=-100,
                                 reduction="sum"))


@pytest.mark.parametrize("arch, fixture", heavy_beyond(CASES, fast=["bert"]))
def test_one_pass_gives_metric_interval_losses_and_predictions(request, tmp_path, arch, fixture):
    loaded, task, data = _setup(request, tmp_path, arch, fixture)
    mask = HeadMask.full(loaded.layout).toggled(next(iter(loaded.layout.kinds)), 0, 1)
    n_batches = data.n_batches(3)
    with counting(loaded) as (passes, decodes):
        dense = task.evaluate(loaded, data, batch_size=3)
        masked = task.evaluate(loaded, data, mask, batch_size=3)
        views = [ExampleOutputs.from_eval(r) for r in (dense, masked)]
        cmp = compare(get_metric(masked.metric_name), dense, masked, task.references(data))
    assert len(passes) == 2 * n_batches                                  # one pass per batch per mask, no more
    assert len(decodes) == (2 * n_batches if task.beam_search else 0)    # and one decoding of each batch
    assert cmp is not None and all(r.interval is not None for r in (dense, masked))
    for res, out in zip((dense, masked), views):
        assert len(out.losses) == len(out.weights) == len(out.predictions) == data.n_examples
        assert all(w >= 1 for w in out.weights)
        # float32 sums of each example's losses in another order than the batch's: ~1e-6 relative
        assert out.mean_loss == pytest.approx(res.loss, rel=1e-5)
        if task.task_type == "classification":
            assert tuple(int(p == y) for p, y in zip(out.predictions, data.labels)) == res.per_example
        else:                                  # texts, or a language-model window's (loss_sum, tokens)
            assert out.predictions == res.per_example
    assert example_outputs(loaded, task, data, mask, batch_size=3).predictions == ()
    assert example_outputs(loaded, task, data, mask, batch_size=3, predictions=True) == views[1]


@pytest.mark.parametrize("arch, fixture", heavy_beyond(CASES, fast=["bert", "gpt2"]))
def test_per_example_losses_equal_the_old_row_by_row_loop(request, tmp_path, arch, fixture):
    loaded, task, data = _setup(request, tmp_path, arch, fixture)
    mask = HeadMask.full(loaded.layout).toggled(next(iter(loaded.layout.kinds)), 1, 0)
    out = ExampleOutputs.from_eval(task.evaluate(loaded, data, mask, batch_size=3))
    old = [0.0] * data.n_examples
    with torch.inference_mode(), apply_mask(loaded, mask):
        for batch in data.batches(3, device=loaded.device):
            logits = loaded.model(**batch.inputs).logits
            for j, where in enumerate(batch.index.tolist()):
                old[where] = _old_row_loss(task, batch, logits, j)
    # the same logits; a row's float32 token losses summed flat or per row differ by ~1e-6 relative
    assert list(out.losses) == pytest.approx(old, rel=1e-5)


def test_losses_and_predictions_round_trip_through_json_small_and_old_files_still_load():
    res = EvalResult("accuracy", 0.5, 0.7, 4, per_example=(1, 0, 1, 0), interval=(0.1, 0.9),
                     example_losses=tuple(torch.tensor([0.1, 2.3, 0.45, 1.7]).tolist()), example_weights=(1, 1, 1, 1),
                     predictions=(1, 1, 0, 0))
    data = res.to_json()
    assert data["example_losses"] == [0.1, 2.3, 0.45, 1.7]              # float32 decimals, not 0.10000000149...
    assert EvalResult.from_json(data) == res
    window = EvalResult("perplexity", 9.0, 2.2, 2, per_example=((4.5, 2), (2.0, 1)), example_losses=(4.5, 2.0),
                        example_weights=(2, 1), predictions=((4.5, 2), (2.0, 1)))
    assert "predictions" not in window.to_json()                          # the same as per_example: written once
    assert EvalResult.from_json(window.to_json()) == window
    old = {k: v for k, v in data.items() if k not in ("example_losses", "example_weights", "predictions")}
    back = EvalResult.from_json(old)
    assert (back.example_losses, back.example_weights, back.predictions) == ((), (), ())
    with pytest.raises(Exception, match="no per-example losses"):
        ExampleOutputs.from_eval(back)
