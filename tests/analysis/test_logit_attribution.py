"""Direct logit attribution on tiny random decoders: the heads' contributions and the output projection's bias sum
to the attention block's output, the linearised final norm rebuilds the logits from the residual, "after removal"
is a masked forward pass, and no hook is left behind (after success and after an error)."""
from __future__ import annotations

import pytest
import torch

from pruning_core.analysis import logit_attribution as dla
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.sources.loading import weights_hash_of_module
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from tests.tiny import VOCAB, tiny_loaded

ARCHS = ["llama", "qwen2", "gemma", "gpt2"]     # grouped-query (llama, qwen2), Gemma's 1 + w norm, GPT-2's LayerNorm
# fp32: each of the 32 output coordinates sums 4 heads x 8 products (plus a bias) in another order than o_proj's
# matmul; values are O(1), so the sums agree to a few ulps of 1 (1.2e-7): 1e-5 leaves a wide margin
ATOL = 1e-5


def _ids(length: int = 12, seed: int = 3) -> torch.Tensor:
    return torch.randint(9, len(VOCAB), (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ARCHS)
def test_head_contributions_sum_to_the_attention_output(tmp_path, arch):
    lm = tiny_loaded(arch, tmp_path)
    for layer in (0, 1):
        for position in (-1, 4):
            found = dla.head_contributions(lm, _ids(), layer, position)
            assert found["contributions"].shape == (4, 32)
            torch.testing.assert_close(found["contributions"].sum(0) + found["bias"], found["attn_out"],
                                       atol=ATOL, rtol=0)
            assert found["contributions"].abs().sum(-1).min() > 0          # every head writes something


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("position", [-1, 4])
def test_the_linearised_norm_of_the_whole_residual_gives_the_logits(tmp_path, arch, position):
    """The convention's anchor: the norm linearised at x, applied to x itself, plus the norm's bias, through the
    unembedding (plus its bias) is the model's logits at that position (LayerNorm's centering included)."""
    lm = tiny_loaded(arch, tmp_path)
    found = dla.head_contributions(lm, _ids(), 1, position)
    with torch.no_grad():
        # the unembedding of one position or of all: the same sums, blocked differently (fp32 last bits)
        torch.testing.assert_close(found["logits"], lm.model(input_ids=_ids()).logits[0, position], atol=1e-5, rtol=0)
    adapter = adapter_for(lm.model)
    norm, unembed = adapter.final_norm(lm.model), adapter.logits_layer(lm.model)
    normed = dla.linearised_norm(norm, found["residual"], found["residual"][None])[0]
    if getattr(norm, "bias", None) is not None:
        normed = normed + norm.bias.detach()
    logits = normed @ unembed.weight.detach().T
    if getattr(unembed, "bias", None) is not None:
        logits = logits + unembed.bias.detach()
    torch.testing.assert_close(logits, found["logits"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_after_removal_is_the_masked_forward_pass_and_nothing_changes(tmp_path, arch):
    lm = tiny_loaded(arch, tmp_path)
    ids, weights, hooks = _ids(), weights_hash_of_module(lm.model), installed_hook_count(lm.model)
    result = dla.attribute_head(lm, ids, 1, 2, target=int(ids[0, 3]), top=5)
    mask = HeadMask.full(lm.layout).toggled("decoder_self", 1, 2)
    with torch.no_grad():
        plain = lm.model(input_ids=ids).logits[0, -1].softmax(-1)
        with apply_mask(lm, mask):
            masked = lm.model(input_ids=ids).logits[0, -1].softmax(-1)
    top = torch.topk(masked, 5)
    assert [t.token_id for t in result.after] == top.indices.tolist()
    torch.testing.assert_close(torch.tensor([t.value for t in result.after]), top.values, atol=1e-6, rtol=0)
    assert [t.token_id for t in result.before] == torch.topk(plain, 5).indices.tolist()
    assert not torch.allclose(plain, masked)                              # the removal changes the prediction
    assert result.target["p_after"] == pytest.approx(float(masked[int(ids[0, 3])]), abs=1e-7)
    assert len(result.promoted) == 5 and result.promoted[0].value >= result.promoted[-1].value
    assert (result.position, result.n_tokens) == (11, 12)
    assert weights_hash_of_module(lm.model) == weights and installed_hook_count(lm.model) == hooks


def test_promoted_tokens_are_the_heads_direct_logits(tmp_path):
    """The promoted list is W_U of the head's linearised contribution, and the heads' direct logits plus the bias's
    sum to the attention block's."""
    lm = tiny_loaded("llama", tmp_path)
    found = dla.head_contributions(lm, _ids(), 0)
    adapter = adapter_for(lm.model)
    norm, w_u = adapter.final_norm(lm.model), adapter.logits_layer(lm.model).weight.detach()
    per_head = dla.linearised_norm(norm, found["residual"], found["contributions"]) @ w_u.T          # [H, V]
    block = dla.linearised_norm(norm, found["residual"], (found["attn_out"] - found["bias"])[None]) @ w_u.T
    torch.testing.assert_close(per_head.sum(0), block[0], atol=1e-4, rtol=0)
    result = dla.attribute_head(lm, _ids(), 0, 3, top=3)
    assert [t.token_id for t in result.promoted] == torch.topk(per_head[3], 3).indices.tolist()


def test_hooks_are_removed_after_an_error_and_bad_heads_are_refused(tmp_path):
    lm = tiny_loaded("qwen2", tmp_path)
    hooks = installed_hook_count(lm.model)
    with pytest.raises(IndexError):
        dla.attribute_head(lm, torch.tensor([[len(VOCAB) + 50]]), 0, 0)          # out of the vocabulary
    assert installed_hook_count(lm.model) == hooks
    with pytest.raises(FormatError, match="not in model"):
        dla.attribute_head(lm, _ids(), 2, 0)
    with pytest.raises(FormatError, match="not in model"):
        dla.attribute_head(lm, _ids(), 0, 4)


def test_another_threads_pass_is_not_recorded(tmp_path):
    """The dashboard's model is shared: a pass another thread runs while a head is attributed (a session's click)
    leaves the attribution's recorded values alone, and they are the ones the attribution's own input gives."""
    import threading

    lm = tiny_loaded("qwen2", tmp_path)
    site = dla._site(lm, 1, 0)
    with dla._captured(lm, site, 3) as (seen, norm), torch.no_grad():
        other = threading.Thread(target=lambda: lm.model(input_ids=_ids(length=7, seed=5)))
        other.start()
        other.join()
        assert seen == {}                                   # the other thread's pass was not recorded
        lm.model(input_ids=_ids())
        assert set(seen) == {"z", "attn_out", "residual"}
    expected = dla.head_contributions(lm, _ids(), 1, 3)
    torch.testing.assert_close(seen["attn_out"], expected["attn_out"], atol=ATOL, rtol=0)
    torch.testing.assert_close(seen["residual"], expected["residual"], atol=ATOL, rtol=0)


def _greedy(lm, ids: torch.Tensor, steps: int) -> list[int]:
    """The greedy continuation of ``ids`` by whole forward passes (no cache)."""
    out = ids
    with torch.no_grad():
        for _ in range(steps):
            out = torch.cat([out, lm.model(input_ids=out).logits[0, -1].argmax().view(1, 1)], dim=1)
    return out[0, ids.shape[1]:].tolist()


def _counting(lm) -> None:
    """Make this test's tiny model count: embeddings 100x larger dominate the residual and the unembedding maps word
    ``t`` to the next word of the vocabulary, so a greedy continuation runs through distinct words."""
    first, n = 9, len(VOCAB) - 9                                             # the words after the special tokens
    with torch.no_grad():
        emb = lm.model.get_input_embeddings().weight.mul_(100.0)             # [V, d]
        head = torch.zeros_like(emb)
        for t in range(first, first + n):
            head[first + (t - first + 1) % n] = emb[t]
        lm.model.get_output_embeddings().weight = torch.nn.Parameter(head)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_attribution_at_the_answer_is_where_the_greedy_continuation_starts_it(tmp_path, arch):
    """The answer is a later stretch of the model's own greedy continuation: the attributed input is the prompt plus
    the greedy tokens before it, and there the model's top next token is the answer's first."""
    lm = tiny_loaded(arch, tmp_path)
    _counting(lm)
    tok, ids = lm.tokenizer, _ids()
    gen = _greedy(lm, ids, 8)
    assert len(set(gen)) == 8                                                # it counts: no word repeats
    answer = tok.decode(gen[3:5])
    step = dla.answer_step(lm, ids, ["not-an-answer", answer], fallback=5, max_new=8)
    assert step.found and step.input_ids[0].tolist() == ids[0].tolist() + gen[:3] and step.target == gen[3]
    hooks = installed_hook_count(lm.model)
    result = dla.attribute_at_answer(lm, ids, 1, 2, [answer], fallback=5, max_new=8)
    assert (result.position, result.n_tokens) == (ids.shape[1] + 2, ids.shape[1] + 3)
    assert result.before[0].token_id == gen[3] == result.target["token_id"]       # the model predicts the answer there
    assert result.answer_step == {"prompt_tokens": ids.shape[1], "found": True, "continuation": tok.decode(gen[:3])}
    assert installed_hook_count(lm.model) == hooks
    missing = dla.attribute_at_answer(lm, ids, 1, 2, ["[no such answer]"], fallback=5, max_new=8)
    assert (missing.position, missing.target["token_id"], missing.answer_step["found"]) == (ids.shape[1] - 1, 5, False)


class _SpaceAt:
    """The tiny tokenizer, except that token ``space`` decodes to a bare space (Qwen writes " " before digits)."""

    def __init__(self, tok, space: int) -> None:
        self.tok, self.space = tok, space

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def decode(self, ids, **kwargs) -> str:
        return "".join(" " if i == self.space else self.tok.decode([i], **kwargs) for i in list(ids))


def test_the_answer_step_passes_over_a_bare_space_token_to_the_answers_first_real_token(tmp_path):
    """Where the continuation writes a lone space token before the answer, the attributed target is the answer's
    first real token, not the space (whose direct logits say nothing about the needle)."""
    import dataclasses

    lm = tiny_loaded("qwen2", tmp_path)
    _counting(lm)
    ids = _ids()
    gen = _greedy(lm, ids, 8)
    spaced = dataclasses.replace(lm, tokenizer=_SpaceAt(lm.tokenizer, gen[2]))
    answer = spaced.tokenizer.decode(gen[3:5])
    step = dla.answer_step(spaced, ids, [answer], fallback=5, max_new=8)
    assert step.found and step.target == gen[3] and step.input_ids.shape[1] == ids.shape[1] + 3
