"""On the prepared Bergamot en->pt student, draft-checked greedy decoding gives plain greedy's tokens for every
sixteenth single-head removal (4 of 64) and 2 random masks, drafts the all-heads output, on the first 4 test
verses with the deployed shortlist and the task's length bound (every single-head removal and 50
random masks on 128 verses: ``benchmarks/draft_decoding.py``, kept out of ``make test`` for its time)."""
from __future__ import annotations

import random

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.drafts import DraftStats, draft_greedy_decode
from pruning_core.modeling.inference.greedy import greedy_decode
from pruning_core.modeling.masking import apply_mask
from tiny import prepared_folder

pytestmark = pytest.mark.slow

VERSES = 4


def _arguments(task, lm, data, mask) -> tuple[tuple, dict]:
    """Greedy decoding's arguments for ``data`` (one batch) under ``mask``, as the translation task gives them."""
    from pruning_core.tasks.translation import BOUND

    batch = next(iter(data.batches(VERSES)))
    ids, attn = batch.inputs["input_ids"], batch.inputs["attention_mask"]
    allowed = lm.shortlist.allowed(ids, attn, lm.model.config.vocab_size)
    with torch.inference_mode(), apply_mask(lm, mask):
        encoded = lm.model.get_encoder()(input_ids=ids, attention_mask=attn).last_hidden_state
    bound = BOUND.tokens(attn.sum(1), min(data.max_length, lm.model.config.max_position_embeddings - 1))
    return (ids, attn), {"max_new_tokens": bound, "allowed": allowed, "encoder_hidden": encoded}


def test_single_head_removals_and_random_masks_give_plain_greedy_tokens():
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.tasks import get_task
    from pruning_core.tasks.data import bible

    prepared_folder("bergamot-en-pt")
    if not bible.is_prepared():
        pytest.skip("the Bible verse pairs are not prepared: run `headprune prepare --model bergamot-en-pt`")
    lm = load_model("bergamot-en-pt")
    task = get_task("bible-en-pt")
    data = task.encode(lm, "test", VERSES)
    heads = list(lm.layout.heads())
    rng = random.Random(0)
    masks = [[h] for h in heads[::16]] + [rng.sample(heads, rng.randint(2, len(heads) // 2)) for _ in range(2)]
    args, kwargs = _arguments(task, lm, data, None)
    with torch.inference_mode():
        dense = greedy_decode(lm.model, *args, **kwargs)
    differ, stats = [], DraftStats()
    for removed in masks:
        mask = HeadMask.from_removed(lm.layout, removed)
        args, kwargs = _arguments(task, lm, data, mask)
        with torch.inference_mode(), apply_mask(lm, mask):
            plain = greedy_decode(lm.model, *args, **kwargs)
            got, counted = draft_greedy_decode(lm.model, *args, drafts=dense, **kwargs)
        stats = stats + counted
        if got != plain:
            differ.append(removed)
    assert len(masks) == 6 and not differ, f"{len(differ)} masks decode differently, first {differ[:3]}"
    assert stats.accepted > 0 and stats.resumed > 0           # drafts were kept and rows diverged
