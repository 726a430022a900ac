"""Marian with an SSRU decoder (Bergamot's layout) on a tiny random model: the recurrence, cached generation,
masked == pruned, loading through load_model, and a model without decoder self-attention heads everywhere."""
from __future__ import annotations

import json
import random

import pytest
import sacrebleu
import torch

from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.architectures.marian_ssru import SSRU, MarianSSRUMTModel
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import prune_heads
from tiny import VOCAB, assert_generate_parity, tiny_inputs, tiny_loaded, tokenizer_for

ARCH = "marian-ssru"


def test_the_ssru_computes_its_recurrence():
    torch.manual_seed(0)
    ssru = SSRU(6, layer_idx=0)
    x = torch.randn(2, 5, 6)
    out, _ = ssru(x)
    c = torch.zeros(2, 6)
    for t in range(5):
        f = torch.sigmoid(x[:, t] @ ssru.forget_proj.weight.T + ssru.forget_proj.bias)
        c = f * c + (1 - f) * (x[:, t] @ ssru.input_proj.weight.T)
        assert torch.allclose(out[:, t], torch.relu(c), atol=1e-6)


def test_the_loop_free_form_used_for_export_equals_the_recurrence():
    from pruning_core.modeling.architectures.marian_ssru import _scan_closed_form
    g = torch.Generator().manual_seed(0)
    forget, update, c0 = torch.rand(2, 9, 4, generator=g), torch.randn(2, 9, 4, generator=g), torch.randn(2, 4, generator=g)
    c, states = c0, []
    for t in range(9):
        c = forget[:, t] * c + update[:, t]
        states.append(c)
    assert torch.allclose(_scan_closed_form(forget, update, c0), torch.stack(states, 1), atol=1e-5)


def test_the_layout_has_encoder_and_cross_heads_and_no_decoder_self(tmp_path):
    lm = tiny_loaded(ARCH, tmp_path)
    assert isinstance(lm.model, MarianSSRUMTModel)
    assert dict(lm.layout.kinds) == {"encoder_self": (4, 4), "cross": (4, 4)}
    assert all(isinstance(layer.self_attn, SSRU) for layer in lm.model.model.decoder.layers)
    assert "decoder_self" not in adapter_for(lm.model).flop_dims(lm.model.config).kind_stack


def _generate(model, inputs, **kw):
    with torch.no_grad():
        return model.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], do_sample=False,
                              max_new_tokens=8, min_new_tokens=8, output_scores=True, return_dict_in_generate=True,
                              pad_token_id=7, **kw)


@pytest.mark.parametrize("beams", [1, 3])
def test_generation_with_the_cache_carries_the_ssru_state(tmp_path, beams):
    """The cached SSRU state gives the same tokens and scores as recomputing every prefix (no cache)."""
    lm = tiny_loaded(ARCH, tmp_path)
    x = tiny_inputs(ARCH)
    cached, full = _generate(lm.model, x, num_beams=beams), _generate(lm.model, x, num_beams=beams, use_cache=False)
    assert torch.equal(cached.sequences, full.sequences)
    for a, b in zip(cached.scores, full.scores):
        assert torch.allclose(a, b, atol=1e-5)


def test_teacher_forced_logits_equal_step_by_step_cached_logits(tmp_path):
    lm = tiny_loaded(ARCH, tmp_path)
    x = tiny_inputs(ARCH)
    with torch.no_grad():
        full = lm.model(**x).logits                                                  # [B, 5, V]
        enc = lm.model.get_encoder()(input_ids=x["input_ids"], attention_mask=x["attention_mask"])
        past, steps = None, []
        for t in range(x["decoder_input_ids"].shape[1]):
            out = lm.model(encoder_outputs=enc, attention_mask=x["attention_mask"], past_key_values=past,
                           decoder_input_ids=x["decoder_input_ids"][:, t:t + 1], use_cache=True)
            past = out.past_key_values
            steps.append(out.logits[:, 0])
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5)


def test_masked_equals_pruned_on_loss_and_on_greedy_text(tmp_path):
    lm = tiny_loaded(ARCH, tmp_path)
    x = tiny_inputs(ARCH)
    labels = x["decoder_input_ids"].roll(-1, dims=1)
    mask = HeadMask.from_removed(lm.layout, [("encoder_self", 0, 1), ("encoder_self", 1, 0), ("encoder_self", 1, 3),
                                             ("cross", 0, 0), ("cross", 0, 1), ("cross", 0, 2), ("cross", 0, 3),
                                             ("cross", 1, 2)])
    pruned = prune_heads(lm.model, mask)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked_loss = lm.model(**x, labels=labels).loss
        pruned_loss = pruned(**x, labels=labels).loss
        dense_loss = lm.model(**x, labels=labels).loss
    assert masked_loss == pytest.approx(pruned_loss.item(), abs=1e-5)
    assert masked_loss != pytest.approx(dense_loss.item(), abs=1e-4)
    assert installed_hook_count(lm.model) == 0
    x.pop("decoder_input_ids")
    assert_generate_parity(lm, x, mask, new_tokens=6)


def test_a_saved_model_loads_through_load_model_pruned_or_not(tmp_path):
    lm = tiny_loaded(ARCH, tmp_path)
    tok = tokenizer_for(tmp_path)
    x = tiny_inputs(ARCH)
    mask = HeadMask.from_removed(lm.layout, [("cross", 1, h) for h in range(4)] + [("encoder_self", 0, 2)])
    for name, model in (("dense", lm.model), ("pruned", prune_heads(lm.model, mask))):
        folder = save_pruned(model, tok, tmp_path / name)
        assert json.loads((folder / "config.json").read_text())["model_type"] == ARCH
        loaded = load_model(str(folder))
        assert loaded.arch == ARCH and loaded.task_type == "translation"
        assert loaded.layout == adapter_for(model).layout(model)
        with torch.no_grad():
            assert torch.allclose(loaded.model(**x).logits, model(**x).logits, atol=1e-5)


def test_translation_task_on_a_file_and_every_scorer_see_two_kinds(tmp_path):
    """file:PATH with source/target works, and scorers give grids of the model's two kinds only."""
    from pruning_core.modeling.presets import remove_least_important
    from pruning_core.scoring import ScoreConfig, get_scorer
    from pruning_core.core.io.share_link import decode_mask, encode_mask
    from pruning_core.evaluation.significance import beside_intervals
    from pruning_core.tasks import get_task

    lm = tiny_loaded(ARCH, tmp_path)
    if len(lm.tokenizer) < len(VOCAB):
        lm.tokenizer = tokenizer_for(tmp_path)
    rng = random.Random(0)
    rows = [{"source": " ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(2, 7))),
             "target": " ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(2, 7)))} for _ in range(9)]
    path = tmp_path / "mt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = get_task(f"file:{path}")
    data = task.encode(lm, "test", max_length=10)
    plain = task.evaluate(lm, data, batch_size=4)
    assert plain.metric_name == "bleu" and plain.loss > 0 and plain.interval is not None
    references = list(task.references(data))
    assert plain.metric == sacrebleu.corpus_bleu(list(plain.predictions), [references]).score   # of the shown outputs
    low, high = beside_intervals(plain, references)["chrf"]                     # chrF beside BLEU, with its interval
    assert plain.extra["chrf"] == sacrebleu.corpus_chrf(list(plain.predictions), [references]).score
    assert low <= plain.extra["chrf"] <= high
    for name in ("gradient", "random"):
        scores = get_scorer(name).score(lm, task, ScoreConfig(split="test", limit=9, batch_size=4, max_length=10)).scores
        assert set(scores.kinds) == {"encoder_self", "cross"}, name
    mask = remove_least_important(scores, 0.5)
    assert set(mask.kinds) == {"encoder_self", "cross"} and mask.n_kept == 8
    assert decode_mask(encode_mask(mask), lm.layout) == mask
    cross_off = HeadMask.from_removed(lm.layout, [h for h in lm.layout.heads() if h[0] == "cross"])
    assert task.evaluate(lm, data, cross_off, batch_size=4).loss != pytest.approx(plain.loss, abs=1e-6)


def test_the_translation_task_decodes_as_cache_free_greedy_decoding(tmp_path):
    """The task's batched greedy decoding (cached SSRU state and cross keys/values) gives the texts of decoding
    every prefix from scratch, example by example."""
    from pruning_core.tasks import get_task

    lm = tiny_loaded(ARCH, tmp_path, seed=3)
    if len(lm.tokenizer) < len(VOCAB):
        lm.tokenizer = tokenizer_for(tmp_path)
    with torch.no_grad():                       # never <s> nor </s>: every row decodes all 12 steps
        lm.model.final_logits_bias[0, 5:7] = -1e4
        for layer in lm.model.model.decoder.layers:           # and the source decides what is said
            layer.encoder_attn.v_proj.weight.mul_(10)          # (std 0.02 -> 0.2: unit-scale outputs)
            layer.encoder_attn.out_proj.weight.mul_(10)
    rng = random.Random(1)
    rows = [{"source": " ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(1, 8))), "target": "good movie"}
            for _ in range(7)]
    path = tmp_path / "mt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = get_task(f"file:{path}")
    data = task.encode(lm, "test", max_length=12)
    result = task.evaluate(lm, data, batch_size=4)
    assert len(set(result.per_example)) > 1                          # the random model does say different things
    for row, text in zip(rows, result.per_example):
        enc = lm.tokenizer([row["source"]], return_tensors="pt", truncation=True, max_length=12)
        with torch.no_grad():
            ids = lm.model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], num_beams=1,
                                    do_sample=False, max_new_tokens=12, use_cache=False)
        assert lm.tokenizer.decode(ids[0], skip_special_tokens=True).strip() == text
