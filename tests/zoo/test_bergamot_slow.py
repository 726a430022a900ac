"""The prepared Bergamot students (``headprune prepare --model bergamot-en-pt`` / ``bergamot-pt-en``)."""
from __future__ import annotations

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.modeling.pruning import prune_heads
from tiny import prepared_folder

pytestmark = pytest.mark.slow


def _loaded(name: str):
    from pruning_core.tasks.data import bible
    from pruning_core.modeling.loading import load_model
    prepared_folder(name)
    if not bible.is_prepared():
        pytest.skip(f"the Bible verse pairs are not prepared: run `headprune prepare --model {name}`")
    return load_model(name)


@pytest.mark.parametrize("name", ["bergamot-en-pt", "bergamot-pt-en"])
def test_the_check_translation(name):
    from pruning_core.zoo.bergamot import DIRECTIONS, translate
    lm = _loaded(name)
    sentence, expected = DIRECTIONS[name].check
    assert translate(lm.model, lm.tokenizer, [sentence]) == [expected]
    assert dict(lm.layout.kinds) == {"encoder_self": (8,) * 6, "cross": (8, 8)}


def test_bleu_on_50_test_verses_is_in_a_sane_range():
    from pruning_core.tasks import get_task
    lm = _loaded("bergamot-en-pt")
    task = get_task("bible-en-pt")
    result = task.evaluate(lm, task.encode(lm, "test", limit=50, max_length=128), batch_size=25)
    assert 15 < result.metric < 60 and 0.5 < result.loss < 4


def test_masked_equals_pruned_on_loss_and_text():
    from pruning_core.tasks.data import bible
    lm = _loaded("bergamot-en-pt")
    pairs = bible.examples("test", "en", "pt", limit=6)
    enc = lm.tokenizer([p["source"] for p in pairs], text_target=[p["target"] for p in pairs], padding=True,
                       return_tensors="pt")
    target = enc.pop("labels")
    labels = target.masked_fill(target == lm.tokenizer.pad_token_id, -100)       # [B, T_target]
    removed = [("encoder_self", l, h) for l in range(6) for h in range(0, 8, 2)] + [("cross", 1, h) for h in range(5)]
    mask = HeadMask.from_removed(lm.layout, removed)
    pruned = prune_heads(lm.model, mask)
    kw = dict(num_beams=1, do_sample=False, max_new_tokens=64)
    with torch.inference_mode():
        with apply_mask(lm, mask):
            masked_ids = lm.model.generate(**enc, **kw)
            masked_loss = lm.model(**enc, labels=labels).loss
        pruned_ids = pruned.generate(**enc, **kw)
        pruned_loss = pruned(**enc, labels=labels).loss
        dense_loss = lm.model(**enc, labels=labels).loss
    assert torch.equal(masked_ids, pruned_ids)
    assert masked_loss.item() == pytest.approx(pruned_loss.item(), abs=1e-4)
    assert masked_loss.item() > dense_loss.item()
