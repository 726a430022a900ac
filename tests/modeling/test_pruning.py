"""Physical pruning: parity with masking, fully pruned layers, save/reload, the original untouched."""
import pytest
import torch

from pruning_core.modeling.architectures import find_sites, layout_of
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model, save_pruned, weights_hash_of_module
from pruning_core.modeling.pruning import (
    attention_parameter_count,
    parameter_count,
    parameter_count_after,
    prune_heads,
)
from tiny import ALL_ARCHS, ARCHS, attn_implementations, logits_of, tiny_inputs, tiny_loaded


def mixed_mask(layout, kinds=None):
    """Remove heads 0 and 2 in layer 0 and every head of layer 1 (a fully pruned layer)."""
    kinds = kinds or list(layout.kinds)
    removed = [(k, 0, h) for k in kinds for h in (0, 2)] + [(k, 1, h) for k in kinds for h in range(4)]
    return HeadMask.from_removed(layout, removed)


@pytest.mark.parametrize("arch, attn", [(a, i) for a in ALL_ARCHS for i in attn_implementations(a)])
def test_pruned_equals_masked_and_original_untouched(arch, attn, tmp_path):
    lm = tiny_loaded(arch, tmp_path, attn_implementation=attn)
    assert lm.model.config._attn_implementation == attn
    x = tiny_inputs(arch)
    before = weights_hash_of_module(lm.model)
    mask = mixed_mask(lm.layout)
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    pruned = prune_heads(lm.model, mask)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    assert layout_of(find_sites(pruned)).kinds == {k: (2, 0) for k in lm.layout.kinds}
    assert parameter_count(pruned) < parameter_count(lm.model)
    assert attention_parameter_count(pruned) < attention_parameter_count(lm.model)
    assert weights_hash_of_module(lm.model) == before
    assert installed_hook_count(lm.model) == 0 and installed_hook_count(pruned) == 0


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_a_copy_sharing_the_weights_computes_the_same_and_writes_nothing_shared(arch, tmp_path):
    """``share_weights``: the tensors pruning leaves whole are the original's (no second model in memory), the
    sliced ones its own; the outputs equal a full copy's exactly, and neither model changes the other."""
    lm = tiny_loaded(arch, tmp_path)
    x, before, mask = tiny_inputs(arch), weights_hash_of_module(lm.model), mixed_mask(lm.layout)
    copied, shared = prune_heads(lm.model, mask), prune_heads(lm.model, mask, share_weights=True)
    assert torch.equal(logits_of(shared, x), logits_of(copied, x))
    original = {t.data_ptr() for t in (*lm.model.parameters(), *lm.model.buffers())}
    own = [n for n, t in shared.named_parameters() if t.data_ptr() not in original]
    assert own and all(any(part in n for part in ("attn", "attention", "q_proj", "k_proj", "v_proj", "query",
                                                   "key", "value", "out_proj", "o_proj", "c_proj", "dense"))
                       for n in own), own                  # only attention's projections were copied
    assert sum(t.numel() for n, t in shared.named_parameters() if n in own) < parameter_count(shared)
    assert weights_hash_of_module(lm.model) == before
    assert torch.equal(logits_of(shared, x), logits_of(copied, x))     # still, after running both


def _count_masks(layout, seeds=(0, 1, 2, 3)):
    """Masks to count: random ones (each head removed with chance 0.3, 0.6 or 0.9: uneven key/value groups,
    empty layers), every head of one layer or of one kind removed, and every head of the model."""
    import random
    heads = list(layout.heads())
    masks = []
    for seed in seeds:
        rng = random.Random(seed)
        for p in (0.3, 0.6, 0.9):
            masks.append(HeadMask.from_removed(layout, [h for h in heads if rng.random() < p]))
    for kind in layout.kinds:
        masks.append(HeadMask.from_removed(layout, [h for h in heads if h[:2] == (kind, 1)]))
        masks.append(HeadMask.from_removed(layout, [h for h in heads if h[0] == kind]))
    return masks + [HeadMask.from_removed(layout, heads)]


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_parameter_count_after_pruning_is_arithmetic_and_exact(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    before = weights_hash_of_module(lm.model)
    for mask in _count_masks(lm.layout):
        assert parameter_count_after(lm.model, mask) == parameter_count(prune_heads(lm.model, mask)), mask.to_json()
    assert parameter_count_after(lm.model, HeadMask.full(lm.layout)) == parameter_count(lm.model)
    assert weights_hash_of_module(lm.model) == before


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_parity_per_kind_seq2seq(kind, tmp_path):
    lm = tiny_loaded("bart", tmp_path)
    x = tiny_inputs("bart")
    mask = mixed_mask(lm.layout, [kind])
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    assert torch.allclose(logits_of(prune_heads(lm.model, mask), x), masked, atol=1e-5)


@pytest.mark.parametrize("arch", ["marian", "bart"])
def test_pruned_generate_equals_masked_generate(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch)
    x.pop("decoder_input_ids")
    mask = mixed_mask(lm.layout)
    kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, num_beams=2, output_scores=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked = lm.model.generate(**x, **kw)
        pruned = prune_heads(lm.model, mask).generate(**x, **kw)
    assert torch.equal(masked.sequences, pruned.sequences)
    assert torch.allclose(masked.scores[-1], pruned.scores[-1], atol=1e-4)


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_save_and_reload_pruned_model(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch)
    mask = mixed_mask(lm.layout)
    pruned = prune_heads(lm.model, mask)
    folder = save_pruned(pruned, lm.tokenizer, tmp_path / "pruned")
    again = load_model(str(folder))
    assert again.layout == layout_of(find_sites(pruned))
    assert again.pruned_heads == {k: {"0": [0, 2], "1": [0, 1, 2, 3]} for k in lm.layout.kinds}
    assert torch.allclose(logits_of(again.model, x), logits_of(pruned, x), atol=1e-5)


def test_pruning_a_pruned_model_is_refused(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    pruned = prune_heads(lm.model, mixed_mask(lm.layout))
    with pytest.raises(FormatError, match="already pruned"):
        prune_heads(pruned, HeadMask.full(layout_of(find_sites(pruned))))


def test_full_mask_prunes_nothing(tmp_path):
    lm = tiny_loaded("distilbert", tmp_path)
    pruned = prune_heads(lm.model, HeadMask.full(lm.layout))
    assert parameter_count(pruned) == parameter_count(lm.model)
    x = tiny_inputs("distilbert")
    assert torch.allclose(logits_of(pruned, x), logits_of(lm.model, x), atol=1e-6)
