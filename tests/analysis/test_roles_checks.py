"""pruning_core.analysis.roles.checks: the copy losses of [BOS] + R + R (index arithmetic checked on an oracle that
copies perfectly), random heads outside a role, and the induction check on a tiny random Llama."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from pruning_core.core.errors import UsageError
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.sources.loading import LoadedModel
from pruning_core.analysis.roles import copy_losses, induction_check, random_heads
from tiny import synthetic_task, tiny_loaded

VOCAB = 40


class CopyOracle(nn.Module):
    """Logits for a [BOS] + R + R input: uniform on the first copy; from the second copy on, certain of the token
    that followed the current token's earlier occurrence (position t predicts ids[t - n + 1])."""

    def __init__(self, n: int, prefix: int) -> None:
        super().__init__()
        self.n, self.prefix = n, prefix
        self.config = SimpleNamespace(vocab_size=VOCAB, max_position_embeddings=512)

    def forward(self, input_ids, attention_mask=None):
        b, t = input_ids.shape
        logits = torch.zeros(b, t, VOCAB)
        for pos in range(self.prefix + self.n, t):
            logits[torch.arange(b), pos, input_ids[:, pos - self.n + 1]] = 100.0      # exp(-100) * 40 ~ 0 loss
        return SimpleNamespace(logits=logits)


def oracle_loaded(n: int) -> SimpleNamespace:
    tok = type("Tok", (), {"bos_token_id": 0, "all_special_ids": [0], "__len__": lambda self: VOCAB})()
    return SimpleNamespace(task_type="language_model", model=CopyOracle(n, 1), tokenizer=tok, model_id="oracle",
                           device=torch.device("cpu"))


def test_copy_losses_index_the_copies_exactly():
    n = 12
    losses = copy_losses(oracle_loaded(n), n=n, sequences=5, batch=2)
    assert losses.n == n and len(losses.first) == len(losses.second) == 5
    # first copy: uniform logits, loss log(V) for every token (float32 softmax of equal logits: exact to ~1e-6)
    assert all(math.isclose(v, math.log(VOCAB), rel_tol=1e-5) for v in losses.first)
    # second copy, tokens 2..n: the oracle is certain and right (an off-by-one would give it ~100 nats)
    assert all(v < 1e-6 for v in losses.second), losses.second
    assert math.isclose(losses.drop, math.log(VOCAB), rel_tol=1e-5)


def test_copy_losses_other_seeds_draw_other_tokens_and_seeds_repeat():
    loaded = oracle_loaded(8)
    a, b = copy_losses(loaded, n=8, sequences=3, seed=1), copy_losses(loaded, n=8, sequences=3, seed=1)
    assert a == b and a.seed == 1


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> LoadedModel:
    return tiny_loaded("llama", tmp_path_factory.mktemp("roles-checks"))


def test_copy_losses_no_op_masks_and_masks_change_them(llama):
    full = copy_losses(llama, None, n=10, sequences=4)
    assert copy_losses(llama, HeadMask.full(llama.layout), n=10, sequences=4) == full      # the same no-op path
    removed = copy_losses(llama, HeadMask.from_removed(llama.layout, llama.layout.heads()[:3]), n=10, sequences=4)
    assert removed.first != full.first
    assert installed_hook_count(llama.model) == 0


def test_random_heads_stay_outside_the_excluded_ones():
    layout = HeadLayout({"decoder_self": (4, 4, 4), "cross": (2, 2, 2)})
    excluded = [("decoder_self", 0, 1), ("decoder_self", 2, 3)]
    for seed in range(20):
        picked = random_heads(layout, 5, exclude=excluded, kinds=["decoder_self"], seed=seed)
        assert len(set(picked)) == 5 and not set(picked) & set(excluded)
        assert all(k == "decoder_self" for k, _, _ in picked)
    assert random_heads(layout, 5, exclude=excluded, seed=3) == random_heads(layout, 5, exclude=excluded, seed=3)
    with pytest.raises(UsageError, match="draw fewer"):
        random_heads(layout, 11, exclude=excluded, kinds=["decoder_self"])


def test_induction_check_removes_exactly_the_detected_heads(llama):
    check = induction_check(llama, task=synthetic_task(), sequences=4)
    assert check.scores.shape == (2, 4)
    assert set(check.mask.removed()) == set(check.heads)
    assert all(check.scores[l, h] > check.threshold for _, l, h in check.heads)
    assert [check.scores[l, h] for _, l, h in check.heads] == sorted((check.scores[l, h] for _, l, h in check.heads),
                                                                    reverse=True)
    assert check.all_heads.seed != 0 and len(check.all_heads.first) == 4


def test_the_copy_check_refuses_a_classifier_and_equal_seeds(llama):
    with pytest.raises(UsageError, match="check_seed"):
        induction_check(llama, seed=1, check_seed=1)
    classifier = SimpleNamespace(task_type="classification", model_id="tiny-bert")
    with pytest.raises(UsageError, match="language model"):
        copy_losses(classifier)
    with pytest.raises(UsageError, match="language model"):
        induction_check(classifier)
