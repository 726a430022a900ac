"""Draft-checked greedy decoding (pruning_core.modeling.inference.drafts.draft_greedy_decode) gives exactly plain greedy
decoding's tokens on tiny random Marian-SSRU, Marian, BART and Whisper models, whatever the draft: the output under
another mask, the right output, one wrong from its first token, longer, shorter, empty or none, with rows ending apart,
per-row bounds and a shortlist."""
from __future__ import annotations

import random

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.drafts import draft_greedy_decode
from pruning_core.modeling.inference.greedy import AllowedIds, greedy_decode
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from tiers import heavy_beyond
from tiny import talking_whisper, tiny_inputs, tiny_loaded, whisper_features

NEW = 12


def _masks(layout, count: int, seed: int = 0) -> list[HeadMask | None]:
    """No mask, the last head removed alone, and ``count`` random masks of a quarter to half the
    heads removed."""
    heads = [(k, layer, h) for k, rows in layout.kinds.items() for layer, n in enumerate(rows) for h in range(n)]
    rng = random.Random(seed)
    masks = [None] + [HeadMask.from_removed(layout, [h]) for h in heads[-1:]]
    return masks + [HeadMask.from_removed(layout, rng.sample(heads, rng.randint(len(heads) // 4, len(heads) // 2)))
                    for _ in range(count)]


KINDS = ("right", "first token wrong", "longer", "shorter", "without the end", "empty", "none")


def _draft(kind: str, row: list[int], eos: int, vocab: int) -> list[int] | None:
    """A draft of ``kind`` for a row whose true tokens are ``row``."""
    bare = [t for t in row if t != eos]
    return {"right": row,
            "first token wrong": [(row[0] + 1) % vocab if row else 9] + row[1:],
            "longer": bare + [9, 10, eos],
            "shorter": row[:len(row) // 2],
            "without the end": bare,
            "empty": [],
            "none": None}[kind]


def _check(lm, mask, args: tuple, kwargs: dict, other: list[list[int]], eos: int) -> None:
    """Under ``mask`` plain greedy's tokens from the drafts ``other`` (the output under another mask) and from drafts
    of every kind, the rows of one call mixed (so they resume at different lengths)."""
    vocab = lm.model.config.vocab_size
    with torch.inference_mode(), apply_mask(lm, mask):
        truth = greedy_decode(lm.model, *args, **kwargs)
        calls = {"other mask": other}
        for shift in range(0, len(KINDS), 3):
            calls[f"mixed {shift}"] = [_draft(KINDS[(i + shift) % len(KINDS)], r, eos, vocab)
                                       for i, r in enumerate(truth)]
        for name, drafts in calls.items():
            for rounds in (1, 4):
                got, _ = draft_greedy_decode(lm.model, *args, drafts=drafts, rounds=rounds, **kwargs)
                assert got == truth, (name, rounds)
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch", heavy_beyond(["marian-ssru", "marian", "bart"], fast=["marian-ssru"]))
def test_any_draft_gives_plain_greedy_tokens_for_translation_models(tmp_path, arch):
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=6, length=9)
    args = (inputs["input_ids"], inputs["attention_mask"])
    eos = lm.model.generation_config.eos_token_id
    with torch.inference_mode():
        dense = greedy_decode(lm.model, *args, max_new_tokens=NEW)
    for mask in _masks(lm.layout, count=2):
        _check(lm, mask, args, {"max_new_tokens": NEW}, dense, eos)


@pytest.mark.parametrize("arch", heavy_beyond(["marian-ssru", "marian"], fast=["marian-ssru"]))
def test_rows_that_diverge_at_different_tokens_and_end_apart_give_plain_greedy_tokens(tmp_path, arch):
    """A random half of the vocabulary per row (the shortlist path) and per-row bounds send the rows different ways,
    so they diverge from their drafts at different tokens and resume at different lengths."""
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=6, length=9)
    args = (inputs["input_ids"], inputs["attention_mask"])
    vocab = lm.model.config.vocab_size
    keep = torch.rand(6, vocab, generator=torch.Generator().manual_seed(3)) < 0.5
    eos = lm.model.generation_config.eos_token_id
    keep[:, eos] = True
    allowed = AllowedIds(torch.arange(vocab), keep)
    bounds = torch.tensor([1, 3, 5, NEW, NEW, 8])
    kwargs = {"max_new_tokens": bounds, "allowed": allowed}
    with torch.inference_mode():
        dense = greedy_decode(lm.model, *args, **kwargs)
    for mask in _masks(lm.layout, count=2, seed=1):
        _check(lm, mask, args, kwargs, dense, eos)


@pytest.mark.heavy
def test_whisper_transcripts_from_any_draft_equal_plain_greedy(tmp_path):
    """Whisper: a prompt of several ids, ids suppressed always and at the first token, rows ending apart."""
    from pruning_core.tasks.speech import greedy_rules

    lm = talking_whisper(tmp_path)
    rules = greedy_rules(lm.model)
    with torch.inference_mode():
        dense_encoded = lm.model.get_encoder()(whisper_features()).last_hidden_state
        dense = greedy_decode(lm.model, None, None, max_new_tokens=NEW, encoder_hidden=dense_encoded, rules=rules)
    assert len({len(r) for r in dense}) > 1
    for mask in _masks(lm.layout, count=2, seed=2):
        with torch.inference_mode(), apply_mask(lm, mask):
            encoded = lm.model.get_encoder()(whisper_features()).last_hidden_state
        _check(lm, mask, (None, None), {"max_new_tokens": NEW, "encoder_hidden": encoded, "rules": rules}, dense,
               rules.eos)


def test_a_draft_that_is_right_is_accepted_whole_and_a_wrong_first_token_is_mended_by_the_next_pass(tmp_path):
    """Where no position is a near-tie the right draft is taken whole in the one pass (no greedy step); a row whose
    draft is wrong only in its first token gets it right in the next pass (its draft re-aligned after the right
    token), or, with one pass only and no lookahead, goes on by greedy steps from its second token."""
    lm = tiny_loaded("marian-ssru", tmp_path)
    inputs = tiny_inputs("marian-ssru", batch=4, length=9)
    args = (inputs["input_ids"], inputs["attention_mask"])
    with torch.inference_mode():
        truth = greedy_decode(lm.model, *args, max_new_tokens=NEW)
        got, stats = draft_greedy_decode(lm.model, *args, drafts=truth, max_new_tokens=NEW, tolerance=0.0)
        assert got == truth
        assert (stats.rows, stats.accepted, stats.drafted, stats.resumed, stats.steps) == \
            (4, sum(map(len, truth)), sum(map(len, truth)), 0, 0)
        assert stats.passes == 1
        r = next(i for i, row in enumerate(truth) if len(row) > 1)
        wrong = [list(row) for row in truth]
        wrong[r][0] = (truth[r][0] + 1) % lm.model.config.vocab_size
        mended, twice = draft_greedy_decode(lm.model, *args, drafts=wrong, max_new_tokens=NEW, tolerance=0.0,
                                            rounds=4)
        stepped, once = draft_greedy_decode(lm.model, *args, drafts=wrong, max_new_tokens=NEW, tolerance=0.0,
                                            rounds=1, lookahead=False)
    assert mended == stepped == truth
    assert twice.passes >= 2 and twice.accepted > once.accepted
    assert (once.passes, once.resumed, once.steps) == (1, 1, len(truth[r]) - 1)


def test_a_draft_is_re_aligned_after_a_word_for_a_word_or_a_few_skipped():
    from pruning_core.modeling.inference.drafts import _realigned

    draft = [10, 11, 12, 13, 14, 15]
    assert _realigned(draft, 1, 20) == [12, 13, 14, 15]          # 20 for 11
    assert _realigned(draft, 1, 13) == [14, 15]                  # 11 and 12 skipped
    assert _realigned(draft, 4, 99) == [15] and _realigned(draft, 5, 99) == []


def test_every_position_a_near_tie_is_decided_by_greedy_steps(tmp_path):
    """With an infinite tolerance no position is decided by the pass: every row decodes greedily from its first
    token, counted as a near-tie, and the tokens are plain greedy's."""
    lm = tiny_loaded("bart", tmp_path)
    inputs = tiny_inputs("bart", batch=3, length=9)
    args = (inputs["input_ids"], inputs["attention_mask"])
    with torch.inference_mode():
        truth = greedy_decode(lm.model, *args, max_new_tokens=NEW)
        got, stats = draft_greedy_decode(lm.model, *args, drafts=truth, max_new_tokens=NEW, tolerance=float("inf"))
    assert got == truth and stats.near_ties == 3 and stats.accepted == 0 and stats.resumed == 3


def test_a_draft_list_of_the_wrong_length_is_refused(tmp_path):
    lm = tiny_loaded("marian", tmp_path)
    inputs = tiny_inputs("marian", batch=3, length=9)
    with torch.inference_mode(), pytest.raises(ValueError, match="2 drafts for 3 rows"):
        draft_greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], drafts=[[], []],
                            max_new_tokens=NEW)
