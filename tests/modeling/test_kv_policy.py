"""KV-cache head policies on tiny grouped-query decoders: exact streaming attention, a cache that holds
sink + window entries, memory from the shapes, hooks that leave nothing behind."""
from __future__ import annotations

import pytest
import torch

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadScores
from pruning_core.modeling.kv import kv_cache, kv_policy as kvp
from pruning_core.modeling.masking import installed_hook_count
from tests.tiny import VOCAB, tiny_loaded

ARCHS = ["llama", "qwen2"]          # 4 query heads sharing 2 key/value heads per layer


def _ids(length: int, seed: int = 3) -> torch.Tensor:
    return torch.randint(9, len(VOCAB), (1, length), generator=torch.Generator().manual_seed(seed))


def _policy(rows, sink=2, window=3) -> kvp.KVPolicy:
    return kvp.KVPolicy(tuple(tuple(r) for r in rows), sink, window)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_all_full_policy_is_the_plain_model_bitwise(tmp_path, arch, attn):
    lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
    ids = _ids(20)
    with torch.no_grad():
        plain = lm.model(input_ids=ids).logits
        with kvp.applied(lm, kvp.KVPolicy.full(kvp.kv_heads_of(lm))):
            ruled = lm.model(input_ids=ids, past_key_values=kv_cache.new_cache(lm, kvp.KVPolicy.full([2, 2]))).logits
    assert torch.equal(plain, ruled)
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_streaming_head_attends_exactly_to_sink_and_window(tmp_path, arch):
    """Layer 1's key/value head 0 streams: its query heads' attention is the full attention renormalised over
    [0, sink) ∪ (t - window, t]; layer 0 (unchanged) gives layer 1 the same input, other heads are untouched."""
    lm = tiny_loaded(arch, tmp_path)
    ids, sink, window = _ids(16), 2, 3
    policy = _policy([[False, False], [True, False]], sink, window)
    with torch.no_grad():
        full = lm.model(input_ids=ids, output_attentions=True).attentions[1][0]          # [H, T, T]
        before = installed_hook_count(lm.model)                  # transformers' own output-recording hooks
        with kvp.applied(lm, policy):
            ruled = lm.model(input_ids=ids, output_attentions=True).attentions[1][0]
    t = torch.arange(16)[:, None]
    k = torch.arange(16)[None, :]
    keep = (k <= t) & ((k < sink) | (k > t - window))
    for h in (0, 1):                                           # group 0: query heads 0 and 1
        expected = full[h] * keep / (full[h] * keep).sum(-1, keepdim=True)
        torch.testing.assert_close(ruled[h], expected, atol=1e-6, rtol=1e-5)
        assert torch.all(ruled[h][~keep] == 0)
    torch.testing.assert_close(ruled[2:], full[2:], atol=0, rtol=0)
    assert not torch.allclose(ruled[0], full[0])               # the restriction bites at this length
    assert installed_hook_count(lm.model) == before


@pytest.mark.parametrize("arch", ARCHS)
def test_sdpa_and_eager_agree_under_a_policy(tmp_path, arch):
    policy = _policy([[True, False], [False, True]])
    ids = _ids(14)
    out = {}
    for attn in ("eager", "sdpa"):
        lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
        with torch.no_grad(), kvp.applied(lm, policy):
            out[attn] = lm.model(input_ids=ids).logits
    torch.testing.assert_close(out["eager"], out["sdpa"], atol=1e-5, rtol=1e-4)


def _greedy(lm, policy, ids, steps):
    """Greedy decoding with the policy's cache: (tokens, logits of each step [V]), and the cache."""
    cache = kv_cache.new_cache(lm, policy)
    logits, tokens = [], []
    with torch.no_grad(), kvp.applied(lm, policy):
        out = lm.model(input_ids=ids, past_key_values=cache, use_cache=True)
        for _ in range(steps):
            step = out.logits[0, -1]
            logits.append(step)
            nxt = step.argmax().view(1, 1)
            tokens.append(int(nxt))
            out = lm.model(input_ids=nxt, past_key_values=cache, use_cache=True)
    return tokens, logits, cache


@pytest.mark.parametrize("arch", ARCHS)
def test_generation_cache_holds_sink_plus_window_and_matches_the_masked_forward(tmp_path, arch):
    lm = tiny_loaded(arch, tmp_path)
    sink, window, prompt, steps = 2, 3, 9, 6
    policy = _policy([[True, False], [False, True]], sink, window)
    ids = _ids(prompt)
    tokens, logits, cache = _greedy(lm, policy, ids, steps)
    seen = prompt + steps                  # the last generated token went through the model too
    for layer, row in zip(cache.layers, policy.streaming):
        assert layer.get_seq_length() == seen
        assert layer.entries() == [sink + window if s else seen for s in row]
    whole = torch.cat([ids, torch.tensor([tokens])], dim=1)
    with torch.no_grad(), kvp.applied(lm, policy):
        reference = lm.model(input_ids=whole).logits[0]      # one masked forward over the whole sequence
    for i, step in enumerate(logits):
        torch.testing.assert_close(step, reference[prompt - 1 + i], atol=1e-5, rtol=1e-4)
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_memory_arithmetic_matches_what_the_cache_stores(tmp_path, arch):
    lm = tiny_loaded(arch, tmp_path)
    policy = _policy([[True, True], [False, True]], sink=2, window=3)
    _, _, cache = _greedy(lm, policy, _ids(11), 4)
    stored = sum(layer.stored_bytes() if isinstance(layer, kv_cache.PolicyLayer) else
                 layer.keys.numel() * layer.keys.element_size() * 2 for layer in cache.layers)
    head_dim = lm.sites[0].head_dim
    assert stored == kvp.kv_bytes(policy, head_dim, 15, 4)
    # by hand: 3 streaming heads keep 5 tokens, 1 full head 15; K and V; head_dim floats of 4 bytes
    assert kvp.kv_bytes(policy, head_dim, 15, 4) == 2 * head_dim * 4 * (3 * 5 + 15)
    report = kvp.memory_report(policy, lm, 15)
    assert report["full_kv_bytes"] == 2 * head_dim * 4 * 4 * 15
    assert report["ratio"] == pytest.approx(60 / 30)


def test_hooks_are_removed_when_the_block_raises(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with kvp.applied(lm, _policy([[True, False], [False, False]])):
            assert installed_hook_count(lm.model) == 2
            raise RuntimeError("boom")
    assert installed_hook_count(lm.model) == 0
    with kvp.applied(lm, _policy([[True, False], [False, False]])):     # nested users share one hook set
        with kvp.applied(lm, _policy([[False, False], [False, True]])):
            assert installed_hook_count(lm.model) == 2
    assert installed_hook_count(lm.model) == 0


def test_policy_json_round_trip_and_checks(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    policy = _policy([[True, False], [False, True]], sink=4, window=8)
    back = kvp.KVPolicy.from_json(policy.to_json({"model": "x"}))
    assert back == policy and back.source == policy.source
    with pytest.raises(FormatError, match="key/value heads per layer"):
        _policy([[True, False, False]]).check_fits(lm)
    with pytest.raises(FormatError, match="not a headprune.kv_policy/1"):
        kvp.KVPolicy.from_json({"format": "headprune.mask/1"})
    with pytest.raises(FormatError, match="window >= 1"):
        kvp.KVPolicy(((True,),), sink=0, window=0)


def test_policy_from_scores_streams_the_lowest_groups(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    # group sums: layer 0 -> (1+2, 9+9), layer 1 -> (0+0, 5+0)
    scores = HeadScores({"decoder_self": ((1.0, 2.0, 9.0, 9.0), (0.0, 0.0, 5.0, 0.0))})
    policy = kvp.from_scores(scores, kvp.groups_of(lm), 0.5, sink=1, window=2)
    assert policy.streaming == ((True, False), (True, False))
    assert kvp.from_scores(scores, kvp.groups_of(lm), 0.25).n_streaming == 1
    rand = [kvp.random_policy((2, 2), 0.5, seed) for seed in range(3)]
    assert all(p.n_streaming == 2 for p in rand)
    assert kvp.random_policy((2, 2), 0.5, 7) == kvp.random_policy((2, 2), 0.5, 7)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_right_padded_batch_keeps_the_model_mask_and_the_policy(tmp_path, attn):
    """The model's own mask (padding) and the policy's combine: each row equals that row alone."""
    lm = tiny_loaded("llama", tmp_path, attn_implementation=attn)
    ids = _ids(9).repeat(2, 1)
    ids[1, :7] = _ids(7, seed=4)
    attention = torch.ones(2, 9, dtype=torch.long)
    attention[1, 7:] = 0
    policy = _policy([[True, False], [False, True]], sink=1, window=2)
    with torch.no_grad(), kvp.applied(lm, policy):
        batch = lm.model(input_ids=ids, attention_mask=attention).logits
        first = lm.model(input_ids=ids[:1]).logits
        second = lm.model(input_ids=ids[1:, :7]).logits
    torch.testing.assert_close(batch[0], first[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(batch[1, :7], second[0], atol=1e-5, rtol=1e-4)
