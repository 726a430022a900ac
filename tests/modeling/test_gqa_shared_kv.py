"""Removing query heads of a grouped-query model never adds parameters. With uneven groups
each kept key/value head is stored once (SharedKVLinear) and read by its remaining query heads, so on a
tiny Llama of 6 query heads on 2 key/value heads (groups of 3) every removal shrinks the model, the pruned
logits equal the masked ones, and a saved pruned model loads back equal; even groups keep a stock config."""
from __future__ import annotations

import random

import pytest
import torch

from pruning_core.modeling.architectures import SharedKVLinear, find_sites, layout_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import parameter_count, parameter_count_after, prune_heads, stock_shape
from tiny import llama_6_on_2, logits_of, make_bert_tokenizer, tiny_loaded

K = "decoder_self"


def _inputs(seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(7, 30, (3, 9), generator=g)
    attention = torch.ones_like(ids)
    attention[0, -3:] = 0
    return {"input_ids": ids, "attention_mask": attention}


def _loaded(model, tmp_path):
    """``model`` as a LoadedModel (apply_mask reads its sites and layout)."""
    return tiny_loaded("llama", tmp_path).derive(model, "llama-6-on-2")


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_removal_shrinks_the_model_and_pruned_equals_masked(tmp_path, attn, seed):
    model = llama_6_on_2(seed)
    model.config._attn_implementation = attn
    lm = _loaded(model, tmp_path)
    heads = [(K, layer, h) for layer in range(2) for h in range(6)]
    random.Random(seed).shuffle(heads)                 # a random order: groups go uneven on the way
    x = _inputs(seed)
    previous = parameter_count(model)
    for n in range(1, len(heads) + 1):
        mask = HeadMask.from_removed(lm.layout, heads[:n])
        after = parameter_count_after(model, mask)
        assert after < previous, (n, heads[:n], previous, after)          # never more, never the same
        previous = after
        if n in (1, 2, 4, 7, 11):
            pruned = prune_heads(model, mask)
            assert parameter_count(pruned) == after
            with apply_mask(lm, mask):
                masked = logits_of(model, x)
            assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5), n


def test_a_saved_uneven_model_loads_back_equal_and_says_why_it_is_not_stock(tmp_path):
    model = llama_6_on_2(3)
    mask = HeadMask.from_removed(layout_for(model), [(K, 0, 0), (K, 0, 4), (K, 0, 5), (K, 1, 3)])  # 2+1, 3+2 kept
    pruned = prune_heads(model, mask)
    sites = find_sites(pruned)
    assert all(isinstance(s.k, SharedKVLinear) for s in sites) and [s.num_kv_heads for s in sites] == [2, 2]
    assert [s.k.head_index.tolist() for s in sites] == [[0, 0, 1], [0, 0, 0, 1, 1]]
    assert "uneven key/value groups" in stock_shape(pruned).reason
    folder = save_pruned(pruned, make_bert_tokenizer(tmp_path / "tok"), tmp_path / "pruned")
    again = load_model(str(folder), device="cpu")
    assert parameter_count(again.model) == parameter_count(pruned) == parameter_count_after(model, mask)
    assert [s.k.head_index.tolist() for s in again.sites] == [[0, 0, 1], [0, 0, 0, 1, 1]]
    x = _inputs()
    assert torch.allclose(logits_of(again.model, x), logits_of(pruned, x), atol=1e-6)


def test_even_groups_keep_the_stock_config():
    model = llama_6_on_2(4)
    mask = HeadMask.from_removed(layout_for(model), [(K, l, h) for l in range(2) for h in (0, 3)])   # 2 of each
    pruned = prune_heads(model, mask)
    assert not any(isinstance(s.k, SharedKVLinear) for s in find_sites(pruned))
    assert dict(stock_shape(pruned).fields) == {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}
