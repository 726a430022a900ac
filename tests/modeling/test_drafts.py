"""Drafts kept between evaluations (pruning_core.modeling.inference.drafts): the nearest mask's output is the draft, and an
evaluation given a store has exactly the predictions, metric and loss of one without, whatever the store holds."""
from __future__ import annotations

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.drafts import DraftStore
from pruning_core.modeling.sources.loading import load_model
from pruning_core.tasks import get_task


def _layout():
    from pruning_core.core.heads import HeadLayout

    return HeadLayout({"encoder_self": (4, 4), "cross": (4, 4)})


def test_the_draft_is_the_output_of_the_nearest_mask_kept_and_the_latest_of_equals():
    layout = _layout()
    store = DraftStore(masks=3)
    one = HeadMask.from_removed(layout, [("cross", 0, 1)])
    two = HeadMask.from_removed(layout, [("cross", 0, 1), ("cross", 1, 2)])
    assert store.draft("k", None) is None
    store.put("k", None, [[1, 2], [3]])
    store.put("k", two, [[7], [8]])
    assert store.draft("k", None) == [[1, 2], [3]]
    assert store.draft("k", HeadMask.from_removed(layout, [("cross", 0, 1), ("cross", 1, 2), ("cross", 1, 3)])) == \
        [[7], [8]]
    assert store.draft("k", one) == [[7], [8]]              # one head from each: the latest
    assert store.draft("other", one) is None
    for i in range(3):                                     # the least recently kept masks leave first
        store.put("k", HeadMask.from_removed(layout, [("encoder_self", 1, i)]), [[i], [i]])
    assert len(store) == 3 and store.draft("k", None) in ([[0], [0]], [[1], [1]], [[2], [2]])


def test_a_store_that_keeps_nothing_is_refused():
    with pytest.raises(ValueError, match="at least one mask"):
        DraftStore(masks=0)


@pytest.mark.heavy
@pytest.mark.parametrize("fixture", ["tiny_ssru", "tiny_bart_12"])
def test_evaluations_with_drafts_give_the_results_of_evaluations_without(request, fixture):
    """A sequence of clicks (masks), each evaluated with a shared store and without: the same predictions, metric
    and loss; from the second on the drafts are checked (counted in ``extra["decoding"]["draft"]``)."""
    app = request.getfixturevalue(fixture)
    loaded = load_model(str(app.model), device="cpu")
    task = get_task(app.task)
    data = task.encode(loaded, task.default_split, 8)
    heads = loaded.layout.heads()
    masks = [None, HeadMask.from_removed(loaded.layout, heads[-1:]),
             HeadMask.from_removed(loaded.layout, heads[::3]), HeadMask.from_removed(loaded.layout, heads[1::2])]
    store = DraftStore()
    for i, mask in enumerate(masks):
        plain = task.evaluate(loaded, data, mask, batch_size=4)
        drafted = task.evaluate(loaded, data, mask, batch_size=4, drafts=store)
        assert drafted.predictions == plain.predictions
        assert drafted.metric == plain.metric
        assert drafted.loss == pytest.approx(plain.loss, rel=1e-6)
        counted = drafted.extra["decoding"].get("draft")
        assert (counted is None) == (i == 0)
        if counted is not None:
            assert counted["rows"] == data.n_examples and counted["drafted"] > 0
    assert len(store) == len(masks)
    assert not any(p.is_inference() for p in loaded.model.parameters())
    assert torch.equal(next(loaded.model.parameters()), next(load_model(str(app.model)).model.parameters()))
