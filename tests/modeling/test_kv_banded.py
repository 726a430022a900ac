"""Streaming heads computed over their sink and window keys only equal the mask over all keys: on tiny grouped-query
decoders (whole forward passes, chunked prefill, padding, per-head windows) and at SmolLM2's attention shape over
4,096 tokens. Both paths sum the same terms in float32 in another order, so they agree to float32 rounding."""
from __future__ import annotations

import pytest
import torch

from pruning_core.modeling.kv import kv_banded
from pruning_core.modeling.kv import kv_cache, kv_policy as kvp
from pruning_core.modeling.masking import installed_hook_count
from tests.tiny import VOCAB, tiny_loaded

ARCHS = ["llama", "qwen2"]          # 4 query heads sharing 2 key/value heads per layer


def _ids(length: int, seed: int = 3, batch: int = 1) -> torch.Tensor:
    return torch.randint(9, len(VOCAB), (batch, length), generator=torch.Generator().manual_seed(seed))


def _logits(lm, policy, ids, banded: bool, **kw) -> torch.Tensor:
    with torch.no_grad(), kvp.applied(lm, policy, banded=banded):
        return lm.model(input_ids=ids, **kw).logits


@pytest.fixture
def calls(monkeypatch):
    """How many times the banded computation ran (to show a test exercised it)."""
    seen = []
    real = kv_banded.streaming_attention

    def counting(*args, **kwargs):
        seen.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(kv_banded, "streaming_attention", counting)
    return seen


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("sink, window", [(2, 3), (0, 5), (4, 1)])
def test_banded_streaming_equals_the_mask_over_all_keys(tmp_path, arch, attn, sink, window, calls):
    lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
    policy = kvp.KVPolicy(((True, False), (True, True)), sink, window)
    ids = _ids(40)                                   # longer than the block below: several blocks and a padded one
    masked = _logits(lm, policy, ids, banded=False)
    assert not calls
    old = kv_banded.BLOCK
    kv_banded.BLOCK = 16
    try:
        banded = _logits(lm, policy, ids, banded=True)
    finally:
        kv_banded.BLOCK = old
    assert len(calls) == 2                             # one call per layer (one window size each)
    torch.testing.assert_close(banded, masked, atol=1e-5, rtol=1e-4)
    plain = lm.model(input_ids=ids).logits
    assert not torch.allclose(banded, plain, atol=1e-3)        # the restriction bites at this length
    assert installed_hook_count(lm.model) == 0
    assert lm.model.model.layers[0].self_attn.config is lm.model.config     # the attention points back


@pytest.mark.parametrize("arch", ARCHS)
def test_per_head_windows_banded_equals_masked(tmp_path, arch, calls):
    lm = tiny_loaded(arch, tmp_path, attn_implementation="sdpa")
    policy = kvp.KVPolicy(((True, True), (False, True)), 2, 4, windows=((3, 7), (0, 1)))
    ids = _ids(30)
    torch.testing.assert_close(_logits(lm, policy, ids, True), _logits(lm, policy, ids, False), atol=1e-5, rtol=1e-4)
    assert len(calls) == 3                             # layer 0: windows 3 and 7; layer 1: window 1


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_banded_prefill_in_chunks_and_decoding_equal_one_masked_forward(tmp_path, attn, calls):
    """Queries after cached keys (past > 0): a prompt fed in chunks of 7 through the policy's cache, then 5 greedy
    steps, give the logits of one masked forward over the whole sequence."""
    lm = tiny_loaded("qwen2", tmp_path, attn_implementation=attn)
    policy = kvp.KVPolicy(((True, False), (False, True)), 2, 3)
    ids = _ids(21)
    cache = kv_cache.new_cache(lm, policy)
    steps, tokens = [], ids
    with torch.no_grad(), kvp.applied(lm, policy):
        for start in range(0, 21, 7):
            out = lm.model(input_ids=ids[:, start:start + 7], past_key_values=cache, use_cache=True)
            steps.append(out.logits[0])
        for _ in range(5):
            nxt = out.logits[0, -1].argmax().view(1, 1)
            tokens = torch.cat([tokens, nxt], dim=1)
            out = lm.model(input_ids=nxt, past_key_values=cache, use_cache=True)
            steps.append(out.logits[0])
    reference = _logits(lm, policy, tokens, banded=False)[0]
    torch.testing.assert_close(torch.cat(steps), reference, atol=1e-5, rtol=1e-4)
    assert calls and installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_banded_right_padded_batch_equals_the_mask(tmp_path, attn):
    lm = tiny_loaded("llama", tmp_path, attn_implementation=attn)
    ids = _ids(18, batch=2)
    attention = torch.ones(2, 18, dtype=torch.long)
    attention[1, 13:] = 0
    policy = kvp.KVPolicy(((True, False), (False, True)), 1, 4)
    kw = {"attention_mask": attention}
    banded, masked = _logits(lm, policy, ids, True, **kw), _logits(lm, policy, ids, False, **kw)
    torch.testing.assert_close(banded[0], masked[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(banded[1, :13], masked[1, :13], atol=1e-5, rtol=1e-4)


def test_attention_weights_asked_for_take_the_mask(tmp_path, calls):
    lm = tiny_loaded("llama", tmp_path)
    policy = kvp.KVPolicy(((True, False), (False, True)), 2, 3)
    with torch.no_grad(), kvp.applied(lm, policy):
        out = lm.model(input_ids=_ids(12), output_attentions=True)
    assert not calls and out.attentions[0].shape == (1, 4, 12, 12)


def test_hooks_and_pointer_are_gone_when_the_block_raises(tmp_path):
    lm = tiny_loaded("llama", tmp_path, attn_implementation="sdpa")
    attention = lm.model.model.layers[0].self_attn
    with pytest.raises(RuntimeError, match="boom"):
        with kvp.applied(lm, kvp.KVPolicy(((True, False), (False, False)), 2, 3)):
            assert attention.config._attn_implementation == kv_banded.NAME
            raise RuntimeError("boom")
    assert attention.config is lm.model.config and lm.model.config._attn_implementation == "sdpa"
    assert installed_hook_count(lm.model) == 0 and not kv_banded._BASE


def _masked_reference(q, k, v, sink, window, scale):
    """Each query head alone, over a [Q, K] boolean mask of every key (what the mask path computes)."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    t = torch.arange(k_len - q_len, k_len)[:, None]
    key = torch.arange(k_len)[None, :]
    allowed = (key <= t) & ((key < sink) | (key > t - window))
    g = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for h in range(q.shape[1]):
        out[:, h] = torch.nn.functional.scaled_dot_product_attention(
            q[:, h], k[:, h // g], v[:, h // g], attn_mask=allowed, scale=scale)
    return out


@pytest.mark.heavy                    # about 18 s on two cores: the reference is a [4096, 4096] softmax per head
def test_banded_equals_the_mask_at_smollm2_shape_over_4k_tokens():
    """SmolLM2-135M's attention: 9 query heads, 3 key/value heads, head_dim 64; 4,096 tokens, sink 128, window 256,
    random queries/keys/values of unit variance. Each output is a convex combination of at most 384 values summed in
    float32 in another order, so the two paths differ by a few units of float32 rounding (2^-24 relative), far
    below 1e-5."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 9, 4096, 64, generator=gen)
    k = torch.randn(1, 3, 4096, 64, generator=gen)
    v = torch.randn(1, 3, 4096, 64, generator=gen)
    scale = 64 ** -0.5
    banded = kv_banded.streaming_attention(q, k, v, 128, 256, scale)
    reference = _masked_reference(q, k, v, 128, 256, scale)
    torch.testing.assert_close(banded, reference, atol=1e-5, rtol=1e-5)
    # queries after a cache: the last 1,000 of 4,096 positions
    tail = kv_banded.streaming_attention(q[:, :, -1000:], k, v, 128, 256, scale)
    torch.testing.assert_close(tail, reference[:, :, -1000:], atol=1e-5, rtol=1e-5)


def test_a_policy_with_more_window_sizes_than_the_layouts_kept_takes_the_mask(tmp_path, calls, monkeypatch):
    """Budgets give each key/value head its own window: past :data:`kv_banded.LAYOUTS` sizes every layer would build
    its layouts again, so the policy runs the mask over all keys (the same logits)."""
    lm = tiny_loaded("llama", tmp_path)
    policy = kvp.KVPolicy(((True, True), (True, True)), 2, 3, windows=((3, 4), (5, 6)))
    assert kvp.window_sizes(policy) == {3, 4, 5, 6}
    ids = _ids(40)
    masked = _logits(lm, policy, ids, banded=False)
    banded = _logits(lm, policy, ids, banded=True)
    assert len(calls) == 4                                # four sizes: banded, one call per size and layer
    torch.testing.assert_close(banded, masked, atol=1e-5, rtol=1e-4)
    monkeypatch.setattr(kv_banded, "LAYOUTS", 3)
    calls.clear()
    assert torch.equal(_logits(lm, policy, ids, banded=True), masked)       # the mask, exactly
    assert not calls and installed_hook_count(lm.model) == 0
