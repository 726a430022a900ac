"""The architecture registry and adapter contract, checked on every family with a tiny config (GPT-2 included)."""
import pytest
import torch

from pruning_core.modeling.architectures import (
    ARCHITECTURES,
    ArchitectureAdapter,
    adapter_for,
    find_sites,
    keep_inputs,
    keep_outputs,
    layout_of,
    register,
    supported_model_types,
)
from pruning_core.core.errors import UnsupportedArchitectureError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.pruning import prune_heads
from tiny import ALL_ARCHS, assert_generate_parity, kv_heads, logits_of, tiny_config, tiny_inputs, tiny_loaded, tiny_model


def test_registry_lists_every_family_and_explains_unknown_types():
    names = ARCHITECTURES.names()
    assert {"bert", "roberta", "electra", "xlm-roberta", "camembert", "distilbert", "bart", "marian", "gpt2"} <= set(names)
    assert adapter_for("gpt2").task_type == "language_model" and adapter_for("gpt2").auto_class == "AutoModelForCausalLM"
    assert "gpt2" not in supported_model_types("classification") and "bert" in supported_model_types("classification")
    assert all(ARCHITECTURES.entry(n).description for n in names)      # listing loads nothing, crashes on nothing
    with pytest.raises(UnsupportedArchitectureError, match=r"Architecture 'bret' is not supported\. Did you mean 'bert'"):
        adapter_for("bret")
    with pytest.raises(ValueError, match="already registered"):
        register(adapter_for("bert"))


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_adapter_for_accepts_type_config_model_and_loaded(arch, tmp_path):
    loaded = tiny_loaded(arch, tmp_path)
    adapter = adapter_for(arch)
    assert isinstance(adapter, ArchitectureAdapter)
    assert adapter_for(loaded) is adapter_for(loaded.model) is adapter_for(loaded.config) is adapter
    for site in loaded.sites:
        assert site.num_heads == 4 and site.num_kv_heads == kv_heads(arch) and site.head_dim == 8


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_flop_dims_agree_with_the_model(arch):
    model = tiny_model(arch)
    dims = adapter_for(model).flop_dims(model.config)
    layout = layout_of(find_sites(model))
    assert set(dims.kind_stack) == set(layout.kinds)
    for kind, rows in layout.kinds.items():
        stack = dims.stacks[dims.kind_stack[kind]]
        assert stack.layers == len(rows) and all(n == stack.heads for n in rows)
        assert stack.kv_heads == kv_heads(arch)
        assert stack.heads * stack.head_dim == dims.hidden == 32 and stack.ffn_dim == 64
    assert dims.is_encoder_decoder == bool(getattr(model.config, "is_encoder_decoder", False))


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_attention_maps_per_kind_match_the_layout(arch, tmp_path):
    loaded = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch)
    with torch.no_grad():
        maps = adapter_for(loaded).attention_maps(loaded.model(**x, output_attentions=True))
    assert set(maps) == set(loaded.layout.kinds)
    for kind, per_layer in maps.items():
        assert [m.shape[1] for m in per_layer] == list(loaded.layout.kinds[kind])
        for m in per_layer:
            assert m.dim() == 4 and m.shape[0] == 3
            assert torch.allclose(m.sum(-1), torch.ones(m.shape[:-1]), atol=1e-5)   # rows are distributions


def test_conv1d_is_sliced_along_its_transposed_weight():
    from transformers.pytorch_utils import Conv1D
    torch.manual_seed(0)
    conv = Conv1D(6, 4)                                   # weight [in=4, out=6]
    x = torch.randn(2, 3, 4)
    full = conv(x)
    keep_outputs(conv, torch.tensor([1, 4]))
    assert conv.weight.shape == (4, 2) and conv.nf == 2 and torch.allclose(conv(x), full[..., [1, 4]])
    keep_inputs(conv, torch.tensor([0, 2]))
    assert conv.weight.shape == (2, 2) and conv.nx == 2
    assert torch.allclose(conv(x[..., [0, 2]]), x[..., [0, 2]] @ conv.weight + conv.bias)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpt2_masked_equals_pruned_with_an_empty_layer(attn, tmp_path):
    lm = tiny_loaded("gpt2", tmp_path, attn_implementation=attn)
    assert lm.layout.kinds == {"decoder_self": (4, 4)} and lm.task_type == "language_model"
    x = tiny_inputs("gpt2")
    mask = HeadMask.from_removed(lm.layout, [("decoder_self", 0, h) for h in range(4)] + [("decoder_self", 1, 2)])
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    pruned = prune_heads(lm.model, mask)
    assert layout_of(find_sites(pruned)).kinds == {"decoder_self": (0, 3)}
    assert pruned.transformer.h[1].attn.split_size == 24
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    assert (masked - logits_of(lm.model, x)).abs().max() > 1e-5
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("arch, kind", [("gpt2", "decoder_self"), ("bart", "decoder_self"), ("marian", "cross")])
def test_generate_masked_equals_pruned_when_layer_0_loses_every_head(arch, kind, tmp_path):
    """The cache of an emptied decoder layer 0 still counts tokens (BART places positions by it)."""
    lm = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch)
    x.pop("decoder_input_ids", None)
    if not tiny_config(arch).is_encoder_decoder:
        x["attention_mask"] = torch.ones_like(x["attention_mask"])       # left-to-right LM: no right padding
    mask = HeadMask.from_removed(lm.layout, [(kind, 0, h) for h in range(4)] + [(kind, 1, 0)])
    assert_generate_parity(lm, x, mask, new_tokens=6)
