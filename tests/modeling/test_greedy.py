"""Step-by-step greedy decoding (pruning_core.modeling.inference.greedy) gives exactly ``generate``'s greedy tokens on tiny
random encoder-decoders, with and without head masks, when rows finish at different steps; the Marian-SSRU's lean
steps follow its decoder with the cache."""
from __future__ import annotations

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.architectures.marian_ssru import SSRUDecoderSteps
from pruning_core.modeling.inference.greedy import AllowedIds, CachedSteps, decoder_steps, greedy_decode, supports_greedy
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from tiny import talking_whisper, tiny_inputs, tiny_loaded, whisper_features

ARCHS = ["marian-ssru", "marian", "bart"]
NEW = 12


def _generate(lm, inputs) -> list[list[int]]:
    """``generate``'s greedy tokens per row, without the start token, cut after the first </s>."""
    out = lm.model.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], num_beams=1,
                            do_sample=False, max_new_tokens=NEW)
    eos = lm.model.generation_config.eos_token_id
    rows = [row[1:].tolist() for row in out]
    return [r[:r.index(eos) + 1] if eos in r else r for r in rows]


def _generate_within(lm, inputs, allowed: torch.Tensor) -> list[list[int]]:
    """``generate``'s greedy tokens when row b may only produce the ids where ``allowed[b]`` [B, V] is True."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class OnlyAllowed(LogitsProcessor):
        def __call__(self, input_ids, scores):
            return scores.masked_fill(~allowed, float("-inf"))

    out = lm.model.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], num_beams=1,
                            do_sample=False, max_new_tokens=NEW, logits_processor=LogitsProcessorList([OnlyAllowed()]))
    eos = lm.model.generation_config.eos_token_id
    rows = [row[1:].tolist() for row in out]
    return [r[:r.index(eos) + 1] if eos in r else r for r in rows]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("masked", [False, True])
def test_greedy_decoding_gives_generates_tokens(tmp_path, arch, masked):
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=6, length=9)
    mask = HeadMask.from_removed(lm.layout, [(k, 0, 1) for k in lm.layout.kinds] + [(k, 1, 3) for k in lm.layout.kinds])
    mask = mask if masked else None
    assert supports_greedy(lm.model)
    with torch.inference_mode(), apply_mask(lm, mask):
        expected = _generate(lm, inputs)
        got = greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW)
        encoded = lm.model.get_encoder()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        reused = greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW,
                               encoder_hidden=encoded.last_hidden_state)
    assert got == expected and reused == expected
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch", ["marian-ssru", "marian"])      # the tiny BART decodes one token over and over
@pytest.mark.parametrize("masked", [False, True])
def test_rows_that_finish_early_leave_the_batch_and_the_others_keep_generates_tokens(tmp_path, arch, masked):
    """A random tiny model decodes every row alike; a random half of the vocabulary per row (the shortlist path)
    sends rows different ways, so they stop at different steps. ``generate`` gets the same rule as a logits
    processor and gives the same tokens."""
    lm = tiny_loaded(arch, tmp_path)
    inputs = tiny_inputs(arch, batch=6, length=9)
    vocab = lm.model.config.vocab_size
    allowed = torch.rand(6, vocab, generator=torch.Generator().manual_seed(3)) < 0.5
    never = lm.model.config.pad_token_id                    # first decode with an end no row may produce
    allowed[:, never] = False
    lm.model.generation_config.eos_token_id = lm.model.generation_config.forced_eos_token_id = never
    with torch.inference_mode():
        paths = _generate_within(lm, inputs, allowed)
    # then end on the token whose first appearance differs most between the rows
    eos = max(sorted({t for row in paths for t in row}),
              key=lambda t: len({row.index(t) if t in row else NEW for row in paths}))
    lm.model.generation_config.eos_token_id = lm.model.generation_config.forced_eos_token_id = eos
    allowed[:, eos] = True
    ids = allowed.any(0).nonzero().squeeze(1)
    mask = HeadMask.from_removed(lm.layout, [(k, 0, 1) for k in lm.layout.kinds]) if masked else None
    with torch.inference_mode(), apply_mask(lm, mask):
        expected = _generate_within(lm, inputs, allowed)
        got = greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW,
                            allowed=AllowedIds(ids, allowed[:, ids]))
    assert len({len(r) for r in got}) > 1 and any(r[-1] == eos for r in got[:-1])      # some left early
    assert got == expected
    for row, mine in zip(got, allowed):
        assert set(row) <= set(mine.nonzero().squeeze(1).tolist())


def test_allowed_ids_restrict_each_row_to_its_own(tmp_path):
    lm = tiny_loaded("marian-ssru", tmp_path)
    inputs = tiny_inputs("marian-ssru", batch=3, length=9)
    ids = torch.tensor([6, 9, 10, 11, 12, 13])
    rows = torch.tensor([[True, True, True, False, False, False],
                         [True, False, False, True, True, False],
                         [True, True, False, False, False, True]])
    with torch.inference_mode():
        got = greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW,
                            allowed=AllowedIds(ids, rows))
    for row, allowed in zip(got, rows):
        assert set(row) <= set(ids[allowed].tolist())
    everything = AllowedIds(torch.arange(lm.model.config.vocab_size), torch.ones(3, lm.model.config.vocab_size,
                                                                                 dtype=torch.bool))
    with torch.inference_mode():
        assert greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW,
                             allowed=everything) == \
            greedy_decode(lm.model, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=NEW)


def test_a_generation_config_with_other_rules_keeps_generate(tmp_path):
    lm = tiny_loaded("marian", tmp_path)
    lm.model.generation_config.no_repeat_ngram_size = 2
    assert not supports_greedy(lm.model)


def test_marian_ssru_decodes_with_lean_steps_that_follow_its_cached_decoder(tmp_path):
    """The Marian-SSRU student decodes with its own lean steps (no transformers cache); step by step, and after a
    row leaves, they give the hidden states of the model's decoder with its cache. The same operations in the same
    order: only float32 rounding may differ (a ``[b, d]`` input may take another matrix kernel than ``[b, 1, d]``),
    so the default float32 tolerance of ``assert_close``."""
    lm = tiny_loaded("marian-ssru", tmp_path)
    inputs = tiny_inputs("marian-ssru", batch=4, length=9)
    mask = HeadMask.from_removed(lm.layout, [("cross", 0, 1), ("cross", 1, 3), ("encoder_self", 0, 2)])
    with torch.inference_mode(), apply_mask(lm, mask):
        encoded = lm.model.get_encoder()(input_ids=inputs["input_ids"],
                                         attention_mask=inputs["attention_mask"]).last_hidden_state
        lean = decoder_steps(lm.model, encoded, inputs["attention_mask"])
        cached = CachedSteps(lm.model, encoded, inputs["attention_mask"])
        assert isinstance(lean, SSRUDecoderSteps)
        token = torch.full((4,), lm.model.config.decoder_start_token_id)
        for step in range(6):
            mine, theirs = lean.step(token), cached.step(token)
            torch.testing.assert_close(mine, theirs)
            token = torch.randint(9, 30, (mine.shape[0],), generator=torch.Generator().manual_seed(step))
            if step == 2:                                # rows 0 and 2 leave
                keep = torch.tensor([1, 3])
                lean.keep(keep)
                cached.keep(keep)
                token = token[keep]
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch,attn", [("marian", "eager"), ("marian-ssru", "sdpa")])
def test_other_decoders_decode_through_the_models_own_decoder(tmp_path, arch, attn):
    lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
    inputs = tiny_inputs(arch, batch=2, length=5)
    with torch.inference_mode():
        encoded = lm.model.get_encoder()(input_ids=inputs["input_ids"],
                                         attention_mask=inputs["attention_mask"]).last_hidden_state
        assert isinstance(decoder_steps(lm.model, encoded, inputs["attention_mask"]), CachedSteps)


# -- Whisper: a prompt of several ids, suppressed ids, no timestamps ---------------------------------------------

def layout_of_tiny_whisper(tmp_path):
    return tiny_loaded("whisper", tmp_path).layout


def _whisper_generate(lm, encoded: torch.Tensor, new: int) -> list[list[int]]:
    """``generate``'s transcripts as the speech task asks for them, cut before the first end-of-text or padding (it
    drops the end-of-text and pads the shorter rows)."""
    from transformers.modeling_outputs import BaseModelOutput

    from pruning_core.tasks.speech import no_timestamps_processor

    first = lm.model.generation_config.no_timestamps_token_id + 1
    out = lm.model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=encoded), num_beams=1, do_sample=False,
                            max_new_tokens=new, logits_processor=no_timestamps_processor(first))
    ends = {lm.model.config.eos_token_id, lm.model.generation_config.pad_token_id}
    rows = [row.tolist() for row in out]
    return [r[:min((r.index(t) for t in ends if t in r), default=len(r))] for r in rows]


def _without_end(rows: list[list[int]], eos: int) -> list[list[int]]:
    return [r[:-1] if r and r[-1] == eos else r for r in rows]


@pytest.mark.parametrize("masked", [False, True])
def test_whisper_greedy_decoding_gives_generates_transcripts(tmp_path, masked):
    from pruning_core.tasks.speech import greedy_rules

    mask = HeadMask.from_removed(layout_of_tiny_whisper(tmp_path), [("encoder_self", 1, 1), ("decoder_self", 1, 2),
                                                                   ("cross", 1, 0)]) \
        if masked else None
    lm = talking_whisper(tmp_path, mask)
    features = whisper_features()
    rules = greedy_rules(lm.model)
    assert rules.prompt == (5, 25) and rules.below == 26
    with torch.inference_mode(), apply_mask(lm, mask):
        encoded = lm.model.get_encoder()(features).last_hidden_state
        expected = _whisper_generate(lm, encoded, NEW)
        got = greedy_decode(lm.model, None, None, max_new_tokens=NEW, encoder_hidden=encoded, rules=rules)
    assert _without_end(got, lm.model.config.eos_token_id) == expected
    assert len({len(r) for r in got}) > 1 and len({tuple(r) for r in got}) > 1      # rows differ and end apart
    assert all(t not in (8, 11) and t < 26 for r in got for t in r) and all(r[0] not in (13, 6) for r in got)
    assert installed_hook_count(lm.model) == 0


def test_a_generation_config_with_other_rules_keeps_whisper_on_generate(tmp_path):
    from pruning_core.tasks.speech import greedy_rules

    lm = talking_whisper(tmp_path)
    lm.model.generation_config.no_repeat_ngram_size = 3
    assert greedy_rules(lm.model) is None


# -- bounds by the input's length ----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["whisper", "marian", "bart"])
def test_bounded_decoding_equals_unbounded_where_a_row_ends_before_its_bound(tmp_path, arch):
    """Per-row bounds: a row that ends before its bound gets exactly its unbounded tokens, a row that reaches it the
    first ``bound`` of them (BART: the last one its forced end), and never more."""
    if arch == "whisper":
        from pruning_core.tasks.speech import greedy_rules

        lm = talking_whisper(tmp_path)
        features = whisper_features()
        with torch.inference_mode():
            encoded = lm.model.get_encoder()(features).last_hidden_state
        kwargs = dict(encoder_hidden=encoded, rules=greedy_rules(lm.model))
        args = (None, None)
    else:
        lm = tiny_loaded(arch, tmp_path)
        inputs = tiny_inputs(arch, batch=8, length=9)
        kwargs, args = {}, (inputs["input_ids"], inputs["attention_mask"])
    forced = getattr(lm.model.generation_config, "forced_eos_token_id", None)
    with torch.inference_mode():
        free = greedy_decode(lm.model, *args, max_new_tokens=NEW, **kwargs)
        bounds = torch.tensor([len(r) for r in free]) + torch.tensor([-3, -1, 0, 1, 5, -3, 0, 2])
        bounds = bounds.clamp(1, NEW)
        bounded = greedy_decode(lm.model, *args, max_new_tokens=bounds, **kwargs)
    for row, cut, limit in zip(free, bounded, bounds.tolist()):
        if len(row) <= limit and (row[-1] == lm.model.config.eos_token_id or len(row) < limit):
            assert cut == row
        else:
            assert len(cut) == limit and cut[:-1] == row[:limit - 1]
            assert cut[-1] == (forced if forced is not None else row[limit - 1])
    assert any(len(c) < len(r) for c, r in zip(bounded, free))        # some row was cut


def test_a_length_bound_grows_with_the_input_and_keeps_to_the_maximum():
    from pruning_core.modeling.inference.greedy import LengthBound

    bound = LengthBound(per=2.0, plus=10, unit="source tokens")
    assert bound.tokens(torch.tensor([0, 3, 40]), most=64).tolist() == [10, 16, 64]
    assert LengthBound(per=8.0, plus=16, unit="seconds of audio").tokens(torch.tensor([1.55]), 100).tolist() == [28]
    assert "10 + 2" in bound.describe()
    with pytest.raises(ValueError):
        LengthBound(per=0.0, plus=10, unit="x")
