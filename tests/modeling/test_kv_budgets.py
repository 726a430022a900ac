"""Per-head KV budgets (each key/value head its own window) and the field's accounting (kvpress's compression
ratio, PruLong's KV footprint): budgets split by hand-checked arithmetic, the cache's bytes equal to the formula,
the attention under budgets equal to the mask, and small cases counted by hand."""
from __future__ import annotations

import pytest
import torch

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadScores
from pruning_core.modeling.kv import kv_accounting as acc
from pruning_core.modeling.kv import kv_budgets as kvb
from pruning_core.modeling.kv import kv_cache, kv_policy as kvp
from tests.tiny import VOCAB, tiny_loaded


def test_split_gives_the_floor_then_shares_by_score():
    # floor 5 each (20), the other 20 split 3:1 between the two scored heads
    assert kvb.split_by_scores([[3, 1], [0, 0]], 40, floor=5, context=30) == ((20, 10), (5, 5))
    # head 0's share (5 + 36) passes the context: it keeps 30, its surplus 11 goes to head 1 (5 + 4 + 11)
    assert kvb.split_by_scores([[9, 1]], 50, floor=5, context=30) == ((30, 20),)
    # 10 / 3 each: the remainder goes to the first head; all-zero scores share equally
    assert kvb.split_by_scores([[1, 1, 1]], 10, floor=0, context=10) == ((4, 3, 3),)
    assert kvb.split_by_scores([[0, 0], [-1, 0]], 8, floor=1, context=8) == ((2, 2), (2, 2))
    with pytest.raises(FormatError, match="between 8 and 60"):
        kvb.split_by_scores([[1, 1], [1, 1]], 7, floor=2, context=15)


def test_budget_policy_keeps_its_budgets_and_reads_back():
    policy = kvb.budget_policy([[30, 20], [12, 6]], sink=4, context=30)
    assert policy.streaming == ((False, True), (True, True))
    assert policy.windows == ((0, 16), (8, 2))
    assert policy.kept_entries(30) == ((30, 20), (12, 6))
    assert kvb.total_of(policy, 30) == 68
    assert kvp.KVPolicy.from_json(policy.to_json()) == policy
    with pytest.raises(FormatError, match="exceed the sink"):
        kvb.budget_policy([[4, 30]], sink=4, context=30)


def test_budgets_from_scores_at_the_memory_of_a_binary_policy(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    scores = HeadScores({"decoder_self": ((1.0, 2.0, 9.0, 9.0), (0.0, 0.0, 5.0, 1.0))})   # groups: 3, 18 / 0, 6
    binary = kvp.from_scores(scores, kvp.groups_of(lm), 0.5, sink=2, window=6)
    total = kvb.total_of(binary, 40)                                    # 2 x 40 + 2 x 8 = 96
    assert total == 96
    policy = kvb.from_scores(scores, kvp.groups_of(lm), total, context=40, floor=4, sink=2)
    assert kvb.total_of(policy, 40) == total
    # floor 4 each, the other 80 by 3:18:0:6 (of 27): 8.9, 53.3, 0, 17.8; head (0, 1) stops at 40 and its surplus
    # 17.3 goes 3:6 to heads (0, 0) and (1, 1): 4 + 8.9 + 5.8 = 18.7 -> 19, 4 + 17.8 + 11.6 = 33.3 -> 33
    assert policy.kept_entries(40) == ((19, 40), (4, 33))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_budget_cache_bytes_equal_the_formula_and_the_logits_the_mask(tmp_path, arch):
    """Greedy decoding with a budget policy's cache: each head holds min(seen, its budget) entries, the bytes are
    2 x head_dim x 4 x sum(entries), and each step's logits equal one masked forward over the whole sequence."""
    lm = tiny_loaded(arch, tmp_path)
    sink, prompt, steps = 2, 9, 6
    seen = prompt + steps
    policy = kvb.budget_policy([[5, 9], [3, 15]], sink=sink, context=seen)      # windows 3, 7, 1; head (1, 1) full
    ids = torch.randint(9, len(VOCAB), (1, prompt), generator=torch.Generator().manual_seed(3))
    cache, logits, tokens = kv_cache.new_cache(lm, policy), [], ids
    with torch.no_grad(), kvp.applied(lm, policy):
        out = lm.model(input_ids=ids, past_key_values=cache, use_cache=True)
        for _ in range(steps):
            logits.append(out.logits[0, -1])
            nxt = out.logits[0, -1].argmax().view(1, 1)
            tokens = torch.cat([tokens, nxt], dim=1)
            out = lm.model(input_ids=nxt, past_key_values=cache, use_cache=True)
    assert [layer.entries() for layer in cache.layers] == [[5, 9], [3, 15]]
    stored = sum(layer.stored_bytes() for layer in cache.layers)
    head_dim = lm.sites[0].head_dim
    assert stored == kvp.kv_bytes(policy, head_dim, seen, 4) == 2 * head_dim * 4 * (5 + 9 + 3 + 15)
    with torch.no_grad(), kvp.applied(lm, policy, banded=False):
        reference = lm.model(input_ids=tokens[:, :-1]).logits[0]
    for i, step in enumerate(logits):
        torch.testing.assert_close(step, reference[prompt - 1 + i], atol=1e-5, rtol=1e-4)


def test_compression_ratio_counts_sink_and_window_as_kept():
    policy = kvp.KVPolicy(((True, False),), sink=1, window=2)
    assert acc.compression_ratio(policy, 5) == pytest.approx(0.2)           # kept 3 + 5 of 10
    assert acc.compression_ratio(policy, 3) == 0.0                          # sink + window hold the whole context
    half = kvp.KVPolicy(((True, False), (False, True)), sink=128, window=256)
    # kvpress's DuoAttention figure: streaming share x (1 - (sink + recent) / context)
    assert acc.compression_ratio(half, 2048) == pytest.approx(0.5 * (1 - 384 / 2048))
    budgets = kvb.budget_policy([[30, 20], [12, 6]], sink=4, context=30)
    assert acc.compression_ratio(budgets, 30) == pytest.approx(1 - 68 / 120)


def test_kv_footprint_by_hand():
    """One streaming head, sink 1, window 2. Entry p counts the token-times from p to the end of the step that
    drops it (or the end); the full cache counts N - p: 5 + 4 + 3 + 2 + 1 = 15 at N = 5."""
    policy = kvp.KVPolicy(((True,),), sink=1, window=2)
    # a one-step prefill drops nothing before its end
    assert acc.footprint_entries(policy, 5) == 15 and acc.kv_footprint(policy, 5) == 1.0
    # token by token: entry 1 goes after step 4 (3 token-times), entry 2 after step 5 (3): 5 + 3 + 3 + 2 + 1
    assert acc.footprint_entries(policy, 5, chunk=1) == 14
    assert acc.kv_footprint(policy, 5, chunk=1) == pytest.approx(14 / 15)
    # prefill of 5 in one step, 2 generated: 7 + 4 + 3 + 3 + 3 + 2 + 1 = 23 against 28
    assert acc.footprint_entries(policy, 5, new_tokens=2) == 23
    assert acc.kv_footprint(policy, 5, new_tokens=2) == pytest.approx(23 / 28)
    # a full head beside it doubles the denominator and adds its own 28
    two = kvp.KVPolicy(((True, False),), sink=1, window=2)
    assert acc.kv_footprint(two, 5, new_tokens=2) == pytest.approx((23 + 28) / 56)
    with pytest.raises(FormatError, match="chunk >= 1"):
        acc.kv_footprint(policy, 5, chunk=0)
