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
    from pruning_core.modeling.sources.loading import load_model
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


@pytest.mark.parametrize("masked", [False, True])
def test_step_by_step_greedy_decoding_gives_generates_tokens_on_16_verses(masked):
    from pruning_core.modeling.inference.greedy import greedy_decode
    from pruning_core.tasks import get_task
    lm = _loaded("bergamot-en-pt")
    data = get_task("bible-en-pt").encode(lm, "test", 16)
    batch = next(iter(data.batches(16)))
    mask = HeadMask.from_removed(lm.layout, [("encoder_self", 0, 0), ("cross", 0, 0), ("cross", 1, 3)]) \
        if masked else None
    ids, attn = batch.inputs["input_ids"], batch.inputs["attention_mask"]
    with torch.inference_mode(), apply_mask(lm, mask):
        out = lm.model.generate(input_ids=ids, attention_mask=attn, num_beams=1, do_sample=False, max_new_tokens=127)
        got = greedy_decode(lm.model, ids, attn, max_new_tokens=127)
    expected = [row[1:].tolist() for row in out]
    expected = [r[:r.index(0) + 1] if 0 in r else r for r in expected]
    assert got == expected and len({len(r) for r in got}) > 1


def test_the_shortlist_decodes_within_each_verses_allowed_ids():
    from pruning_core.tasks import get_task
    lm = _loaded("bergamot-en-pt")
    if lm.shortlist is None:
        pytest.skip("this bergamot-en-pt folder was prepared without the shortlist: "
                    "run `headprune prepare --model bergamot-en-pt --force`")
    task = get_task("bible-en-pt")
    data = task.encode(lm, "test", 16)
    with_list = task.evaluate(lm, data, None, batch_size=16)
    without = task.evaluate(lm, data, None, batch_size=16, shortlist=False)
    assert with_list.extra["decoding"]["shortlist"]["sha256"] == lm.shortlist.sha256
    assert without.extra["decoding"]["shortlist"] is None
    for j, text in enumerate(with_list.predictions):
        source = data.features[j]["input_ids"]
        allowed = set(lm.shortlist.row_ids(source, lm.model.config.vocab_size).tolist())
        assert set(lm.tokenizer(text_target=text)["input_ids"]) <= allowed | {0}


@pytest.mark.parametrize("name", ["bergamot-en-pt", "bergamot-pt-en"])
def test_the_manifests_bleu_after_conversion_is_the_librarys(name):
    """prepare records greedy BLEU on the first verses of John; the library's step-by-step greedy decoding over the
    whole vocabulary gives the same tokens, so the same BLEU (the manifest rounds to 2 decimals)."""
    import json

    from pruning_core.modeling.sources import catalog
    from pruning_core.tasks import get_task
    lm = _loaded(name)
    after = json.loads((catalog.get(name).folder() / catalog.MANIFEST).read_text()).get("bleu_after_conversion")
    if after is None:
        pytest.skip(f"{name} was prepared before prepare recorded BLEU: run `headprune prepare --model {name} --force`")
    task = get_task(catalog.get(name).task)
    result = task.evaluate(lm, task.encode(lm, "test", limit=after["verses"], max_length=128), batch_size=32,
                           shortlist=False)
    assert result.metric == pytest.approx(after["bleu"], abs=0.005 + 1e-9)
