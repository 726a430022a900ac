"""A pruned grouped-query model whose layers kept different numbers of key/value heads still generates
with transformers' static KV cache (sized per layer from the key states), and the tokens are those of the
masked dense model."""
from __future__ import annotations

import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.modeling.pruning import prune_heads
from tiny import tiny_loaded


def test_static_cache_generate_after_a_whole_group_is_pruned(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    mask = HeadMask({"decoder_self": ((0, 0, 1, 1), (1, 0, 1, 1))})      # layer 0 loses K/V group 0
    pruned = prune_heads(lm.model, mask)
    assert pruned.model.layers[0].self_attn.k_proj.out_features != pruned.model.layers[1].self_attn.k_proj.out_features
    ids = torch.tensor([[12, 15, 9, 20, 11]])
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked = lm.model.generate(ids, **kw)
        static = pruned.generate(ids, cache_implementation="static", **kw)
    assert torch.equal(masked, static)
