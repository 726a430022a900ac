"""Grouped-query attention (Llama, Qwen2, Mistral; Gemma without grouping): one cell per query head,
key/value heads that go with their last query head, uneven groups that keep each key/value head once,
parity masked = pruned (logits and generate), reload, group scores and presets, the FLOP ceiling by hand."""
import pytest
import torch

from pruning_core.modeling.architectures import (
    SharedKVLinear,
    adapter_for,
    find_sites,
    kv_groups,
    kv_groups_of,
    kv_index,
    kv_plan,
    layout_of,
)
from pruning_core.bench import flop_ceiling
from pruning_core.core.errors import UnsupportedArchitectureError
from pruning_core.core.heads import HeadMask, HeadScores, group_scores
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.presets import prune_by_group, prune_k_per_group
from pruning_core.modeling.pruning import attention_parameter_count, prune_heads
from tiny import VOCAB, assert_generate_parity, kv_heads, logits_of, tiny_config, tiny_inputs, tiny_loaded

GQA = ["llama", "qwen2", "mistral"]       # 4 query heads on 2, 2 and 1 key/value heads
DECODERS = GQA + ["gemma"]
K = "decoder_self"


def mask_of(layout, removed):
    return HeadMask.from_removed(layout, [(K, l, h) for l, heads in removed.items() for h in heads])


# layer 0 loses query head 0 only (uneven groups: 1 and 2 kept of 2), layer 1 loses every head
UNEVEN = {0: [0], 1: [0, 1, 2, 3]}
# layer 0 loses key/value group 0 whole (heads 0, 1), layer 1 one query head of group 1
WHOLE_GROUP = {0: [0, 1], 1: [2]}


def test_registered_as_causal_language_models():
    for arch in DECODERS:
        adapter = adapter_for(arch)
        assert adapter.name == "llama" and adapter.task_type == "language_model"
        assert adapter.auto_class == "AutoModelForCausalLM"
    with pytest.raises(UnsupportedArchitectureError, match="phi3"):
        adapter_for("phi3")                   # fused qkv_proj sized from the shared config: not listed


@pytest.mark.parametrize("arch", DECODERS)
def test_one_cell_per_query_head_and_the_groups(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    assert lm.layout.kinds == {K: (4, 4)}
    g = 4 // kv_heads(arch)
    expected = [list(range(j * g, (j + 1) * g)) for j in range(kv_heads(arch))]
    assert all(kv_groups(s) == expected for s in lm.sites)
    assert kv_groups_of(lm.sites) == {K: (tuple(tuple(x) for x in expected),) * 2}


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("removed", [UNEVEN, WHOLE_GROUP], ids=["uneven", "whole-group"])
@pytest.mark.parametrize("arch", DECODERS)
def test_pruned_logits_equal_masked(arch, removed, attn, tmp_path):
    lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
    x = tiny_inputs(arch)
    mask = mask_of(lm.layout, removed)
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    assert (masked - logits_of(lm.model, x)).abs().max() > 1e-5
    pruned = prune_heads(lm.model, mask)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    assert layout_of(find_sites(pruned)).kinds == {K: tuple(4 - len(removed[l]) for l in (0, 1))}
    assert attention_parameter_count(pruned) < attention_parameter_count(lm.model)
    assert installed_hook_count(lm.model) == 0 and installed_hook_count(pruned) == 0


@pytest.mark.parametrize("removed", [UNEVEN, WHOLE_GROUP, {0: [0, 1, 2, 3], 1: [1]}],
                         ids=["uneven", "whole-group", "layer0-empty"])
@pytest.mark.parametrize("arch", DECODERS)
def test_generate_greedy_masked_equals_pruned(arch, removed, tmp_path):
    """Greedy tokens and scores agree; an emptied layer (0 included) still counts its tokens in the cache."""
    lm = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch, batch=2, length=5)
    x["attention_mask"] = torch.ones_like(x["attention_mask"])
    mask = mask_of(lm.layout, removed)
    assert_generate_parity(lm, x, mask, new_tokens=5)


def test_whole_group_removes_its_key_value_head_part_of_a_group_keeps_it(tmp_path):
    lm = tiny_loaded("llama", tmp_path)       # groups [0, 1] and [2, 3]
    k0 = lm.sites[0].k.weight.detach().clone()
    pruned = prune_heads(lm.model, mask_of(lm.layout, WHOLE_GROUP))
    s0, s1 = find_sites(pruned)
    assert (s0.num_heads, s0.num_kv_heads, s1.num_heads, s1.num_kv_heads) == (2, 1, 3, 2)
    assert torch.equal(s0.k.weight, k0[8:16])                   # group 0's key head is gone, group 1's stays
    # uneven layer 1 (2 and 1 kept): each key/value head stored once, query heads 0, 1 read it, 3 reads head 1
    assert kv_plan(lm.sites[1], [0, 1, 3]) == [0, 1] and kv_index(lm.sites[1], [0, 1, 3]) == [0, 0, 1]
    assert isinstance(s1.k, SharedKVLinear) and isinstance(s1.v, SharedKVLinear)
    assert s1.container.num_key_value_groups == 1 and s1.k.weight.shape == (16, 32)
    assert kv_groups(s1) == [[0, 1], [2]]                       # the pruned layer's groups, renumbered
    assert kv_index(lm.sites[0], [1, 3]) is None and kv_index(lm.sites[0], [2, 3]) is None   # even: no index
    # part of a group, evenly (one of each): both key/value heads stay, uncopied
    assert kv_plan(lm.sites[0], [1, 3]) == [0, 1] and kv_plan(lm.sites[0], [0, 1, 2, 3]) == [0, 1]
    assert kv_plan(lm.sites[0], [2, 3]) == [1] and kv_plan(lm.sites[0], []) == []
    assert lm.sites[0].k.weight.shape == (16, 32)               # the original is untouched


def test_a_layer_losing_every_head_is_an_empty_attention(tmp_path):
    lm = tiny_loaded("qwen2", tmp_path)
    pruned = prune_heads(lm.model, mask_of(lm.layout, {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]}))
    assert layout_of(find_sites(pruned)).kinds == {K: (0, 0)}
    assert [s.num_kv_heads for s in find_sites(pruned)] == [0, 0]
    x = tiny_inputs("qwen2")
    with apply_mask(lm, mask_of(lm.layout, {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]})):
        masked = logits_of(lm.model, x)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)


@pytest.mark.parametrize("arch", GQA)
def test_uneven_pruned_model_reloads_with_load_model(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path, attn_implementation="sdpa")
    pruned = prune_heads(lm.model, mask_of(lm.layout, UNEVEN))
    folder = save_pruned(pruned, lm.tokenizer, tmp_path / "pruned")
    again = load_model(str(folder), device="cpu", attn_implementation="sdpa")
    assert again.task_type == "language_model" and again.layout.kinds == {K: (3, 0)}
    assert again.pruned_heads == {K: {"0": [0], "1": [0, 1, 2, 3]}}
    assert [s.num_kv_heads for s in again.sites] == [s.num_kv_heads for s in find_sites(pruned)]
    x = tiny_inputs(arch)
    assert torch.allclose(logits_of(again.model, x), logits_of(pruned, x), atol=1e-5)
    assert installed_hook_count(again.model) == 0


def _scores():
    return HeadScores.from_lists({K: [[0.1, 0.2, 0.9, 0.3], [0.5, 0.6, 0.05, 0.04]]})


def test_group_scores_sum_the_query_heads_of_each_key_value_head(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    groups = kv_groups_of(lm.sites)
    by_group = group_scores(_scores(), groups)
    assert by_group.kinds == {K: ((pytest.approx(0.3), pytest.approx(1.2)), (pytest.approx(1.1),
                                                                              pytest.approx(0.09)))}
    mha = tiny_loaded("gemma", tmp_path)      # no grouping: a group per head, scores unchanged
    assert group_scores(_scores(), kv_groups_of(mha.sites)) == _scores()
    with pytest.raises(Exception, match="heads per layer"):
        group_scores(HeadScores.from_lists({K: [[1.0, 2.0], [3.0, 4.0]]}), groups)


def test_group_presets_keep_groups_even_so_pruning_copies_nothing(tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    groups = kv_groups_of(lm.sites)
    by_group = prune_by_group(_scores(), groups, 0.5)          # 2 of 4 groups: the lowest sums 0.09 and 0.3
    assert by_group.kinds == {K: ((0, 0, 1, 1), (1, 1, 0, 0))}
    per_group = prune_k_per_group(_scores(), groups, 1)        # the weaker head of each group
    assert per_group.kinds == {K: ((0, 1, 1, 0), (0, 1, 1, 0))}
    assert prune_k_per_group(_scores(), groups, 0).is_full()
    with pytest.raises(Exception, match="between 0 and the group size"):
        prune_k_per_group(_scores(), groups, 3)
    for mask in (by_group, per_group):
        for site, row in zip(lm.sites, mask.kinds[K]):
            plan = kv_plan(site, [h for h, v in enumerate(row) if v])
            assert len(plan) == len(set(plan))                  # no key/value head copied
        x = tiny_inputs("llama")
        with apply_mask(lm, mask):
            masked = logits_of(lm.model, x)
        assert torch.allclose(logits_of(prune_heads(lm.model, mask), x), masked, atol=1e-5)


def test_flop_ceiling_of_tiny_llama_by_hand():
    config = tiny_config("llama")          # d=32, 2 layers, 4 query heads of 8, 2 key/value heads, d_ff=64 gated
    t, d, v = 8, 32, len(VOCAB)            # vocab V = 29
    assert v == 29
    c = flop_ceiling(config, None, t)
    # per layer, all heads: q and o 8*32*32 = 8192 each; k and v 8*32*16 = 4096 each; QK^T + AV 2*8*8*32 = 4096
    per_layer = 2 * 8192 + 2 * 4096 + 4096
    assert per_layer == 28672 and c.attention_macs == 2 * per_layer == 57344
    # gated feed-forward: gate, up, down = 3 matrices of 32 x 64, per token, per layer: 8*3*32*64*2
    assert c.ffn_macs == 3 * t * d * 64 * 2 == 98304
    # LM head: every token's logits over the vocabulary: 8*32*29
    assert c.head_kind == "lm_head" and c.head_macs == t * d * v == 7424
    assert c.total_macs == 57344 + 98304 + 7424 == 163072
    # layer 0 loses key/value group 0 whole (heads 0, 1): q, o 8*32*16 = 4096 each, k, v 8*32*8 = 2048 each,
    # attention 2*8*8*16 = 2048 -> 14336 kept, 14336 removed; layer 1 loses query head 2 only (its key/value
    # head stays): q, o 8*32*24 = 6144 each, k, v 4096 each, attention 2*8*8*24 = 3072 -> 23552 kept, 5120 removed
    mask = HeadMask.from_lists({K: [[0, 0, 1, 1], [1, 1, 0, 1]]})
    c = flop_ceiling(config, mask, t)
    assert [l.removed_macs for l in c.layers] == [14336, 5120]
    assert c.removed_macs == 19456 and c.speedup == pytest.approx(163072 / (163072 - 19456))
