"""Lookahead steps (pruning_core.modeling.inference.lookahead): several guessed tokens checked in one decoder call
give plain greedy decoding's tokens; the steps' multi-token call and its cut back equal one step at a time; the
guesses come from the row's draft and from its own loop; the plain step's shortcut past the shortlist mask picks the
id the masked logits pick."""
from __future__ import annotations

import pytest
import torch

from pruning_core.modeling.inference.drafts import draft_greedy_decode
from pruning_core.modeling.inference.greedy import AllowedIds, Choice, decoder_steps, greedy_decode, translation_rules
from pruning_core.modeling.inference.lookahead import guess
from tiers import heavy_beyond
from tiny import tiny_inputs, tiny_loaded

BOUNDS = torch.tensor([2, 40, 5, 3])        # the second row decodes alone after its fifth token


@pytest.mark.parametrize("arch", heavy_beyond(["bart", "marian-ssru", "marian"], fast=["bart"]))
def test_a_row_left_alone_is_decoded_several_tokens_a_call_into_plain_greedy_tokens(tmp_path, arch):
    """No draft: every row goes on by steps; the row with the long bound ends up alone, repeating itself (tiny
    random models loop), and the lookahead takes several of its tokens per call. Same tokens as plain greedy."""
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=4, length=9)
    args = (inputs["input_ids"], inputs["attention_mask"])
    with torch.inference_mode():
        truth = greedy_decode(lm.model, *args, max_new_tokens=BOUNDS)
        got, stats = draft_greedy_decode(lm.model, *args, drafts=[None] * 4, max_new_tokens=BOUNDS)
        one_by_one, plain = draft_greedy_decode(lm.model, *args, drafts=[None] * 4, max_new_tokens=BOUNDS,
                                                lookahead=False)
    assert got == one_by_one == truth
    assert len(truth[1]) > 10
    assert plain.lookahead == plain.guessed == 0 and plain.steps == max(map(len, truth)) - 1    # the pass gave one
    assert stats.lookahead > 0 and stats.guessed > 0
    assert stats.steps == plain.steps - stats.guessed          # each guessed token kept saved one call


@pytest.mark.parametrize("arch", heavy_beyond(["marian-ssru", "bart"], fast=["marian-ssru"]))
def test_several_inputs_in_one_call_then_cut_back_equal_one_input_a_step(tmp_path, arch):
    """``step_many`` over 5 inputs gives each input's hidden state as 5 steps do; after ``back(3)`` the next step
    equals the step after the second input (the SSRU state, transformers' cache)."""
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=2, length=9)
    model = lm.model
    tokens = torch.tensor([[5, 9, 11, 12, 9], [7, 7, 13, 9, 10]])
    with torch.inference_mode():
        encoded = model.get_encoder()(**inputs).last_hidden_state
        start = torch.full((2,), translation_rules(model).prompt[0])
        one = decoder_steps(model, encoded, inputs["attention_mask"])
        one.step(start)
        singly = torch.stack([one.step(tokens[:, j]) for j in range(5)], dim=1)
        two = decoder_steps(model, encoded, inputs["attention_mask"])
        two.step(start)
        many = two.step_many(tokens)
        torch.testing.assert_close(many, singly, rtol=1e-5, atol=1e-5)     # float32 sums over other shapes
        two.back(3)
        again = decoder_steps(model, encoded, inputs["attention_mask"])
        again.step(start)
        again.step(tokens[:, 0])
        again.step(tokens[:, 1])
        torch.testing.assert_close(two.step(tokens[:, 2]), again.step(tokens[:, 2]), rtol=1e-5, atol=1e-5)


def test_guesses_follow_the_draft_where_the_row_rejoins_it_else_the_rows_own_loop():
    draft = [1, 2, 3, 4, 5, 6, 0]
    assert guess([1, 9, 3], draft, 3, eos=0) == [4, 5, 6]              # one word changed, then the draft again
    assert guess([1, 2, 3, 4, 5], draft, 8, eos=0) == [6, 0]            # cut after </s>
    assert guess([7, 8, 9, 7, 8], None, 5, eos=0) == [9, 7, 8, 9, 7]    # a loop goes on as a cycle
    assert guess([7, 8, 9], [4, 4], 5, eos=0) == []                     # nothing to go on from
    assert guess([3, 3], None, 3, eos=0) == [3, 3, 3]


def test_the_plain_steps_best_id_is_the_masked_logits_first_even_among_equal_logits(tmp_path):
    """With a shortlist per row: the batch's best id where the row may produce it, else the row's own best; among
    equal logits the lowest column, as ``argmax`` of the masked logits."""
    lm = tiny_loaded("marian", tmp_path)
    vocab = lm.model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    keep = torch.rand(6, vocab, generator=generator) < 0.3
    keep[:, 3] = True
    choice = Choice(lm.model, translation_rules(lm.model), AllowedIds(torch.arange(vocab), keep),
                    torch.zeros(1, 1, lm.model.config.d_model))
    hidden = torch.randn(6, lm.model.config.d_model, generator=generator)
    hidden[4] = 0                               # every logit of row 4 is its bias: ties wherever biases are equal
    rows = torch.tensor([0, 1, 2, 3, 4, 5])
    with torch.inference_mode():
        expected = choice.logits(hidden, rows, first=False).argmax(-1)
        assert torch.equal(choice.best(hidden, rows, first=False), expected)
        assert torch.equal(choice.best(hidden[[2, 0]], rows[[2, 0]], first=True),
                           choice.logits(hidden[[2, 0]], rows[[2, 0]], first=True).argmax(-1))
