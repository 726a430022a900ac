"""The dashboard's live panel per click, through ``app.model.cache``: the metric, its interval, the paired test,
each example's loss and prediction come from ONE forward pass per mask (the cached evaluation), and the
pruned model's parameter count is arithmetic (no pruned copy)."""
from __future__ import annotations

import math

import pytest

from app.core.session.selection import Selection
from app.model import cache
from browser_helpers import build_tiny_app
from pruning_core.modeling import pruning
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count


@pytest.fixture(scope="module")
def tiny_bert_150(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("one-pass-bert"), "bert", n_examples=150)


def test_a_click_runs_one_forward_pass_per_mask(tiny_bert_150):
    spec, task_name, limit = str(tiny_bert_150.model), tiny_bert_150.task, 130        # 3 batches of cache.EVAL_BATCH
    sel = Selection(spec, task_name, limit)
    model = cache.load(spec).model
    mask = HeadMask.full(cache.load(spec).layout).toggled("encoder_self", 0, 2)
    passes = []        # the output head runs once per batch of a pass, also of one that resumed from a cached layer
    handle = model.classifier.register_forward_pre_hook(lambda module, args: passes.append(1))
    try:
        for m in (None, mask):                     # what the Head map asks for after a click
            ev = cache.evaluate(sel, m)
            out = cache.example_outputs(sel, m)
            with_predictions = cache.example_outputs(sel, m, True)
        cmp = cache.comparison(sel, mask)
    finally:
        handle.remove()
    assert installed_hook_count(model) == 0
    assert len(passes) == 2 * math.ceil(limit / cache.EVAL_BATCH)          # one pass per batch per mask
    assert cache.layer_inputs().resumed >= 1                  # the masked pass began at a cached layer input
    assert ev.interval is not None and cmp is not None
    assert out.losses == ev.example_losses and len(out.losses) == limit and out.predictions == ()
    assert with_predictions.predictions == ev.predictions and len(ev.predictions) == limit


def test_pruned_parameters_are_counted_without_a_pruned_copy(tiny_bert_150, monkeypatch):
    spec = str(tiny_bert_150.model)
    model = cache.load(spec).model
    mask = HeadMask.from_removed(cache.load(spec).layout, [("encoder_self", 0, 1), ("encoder_self", 1, 0),
                                                           ("encoder_self", 1, 1), ("encoder_self", 1, 2),
                                                           ("encoder_self", 1, 3)])
    want = pruning.parameter_count(pruning.prune_heads(model, mask))

    def refuse(*args, **kwargs):
        raise AssertionError("a pruned copy was made to count parameters")
    monkeypatch.setattr(pruning, "prune_heads", refuse)
    assert cache.pruned_parameters(spec, mask) == (want, pruning.parameter_count(model))
