"""Whisper: the CTranslate2 reader and name mapping, and the adapter's three attention kinds on a tiny random
Whisper (masked == pruned, generate included, layers losing every head, reload, no hook left)."""
import struct

import pytest
import torch

from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import prune_heads
from pruning_core.zoo.ctranslate2 import read_ct2
from pruning_core.zoo.whisper import hf_config, hf_state_dict
from tiny import assert_generate_parity, logits_of, tiny_config, tiny_inputs, tiny_loaded, tiny_model

KINDS = ("encoder_self", "decoder_self", "cross")


# -- a CTranslate2 file of the tiny Whisper, written the way CTranslate2's converter lays it out -------------

def _ct2_variables(model) -> dict[str, torch.Tensor]:
    sd = {k: v.detach().half() for k, v in model.state_dict().items()}
    d = model.config.d_model
    zeros = torch.zeros(d, dtype=torch.float16)
    out = {"encoder/num_heads": torch.tensor(4, dtype=torch.int16),
           "decoder/num_heads": torch.tensor(4, dtype=torch.int16)}
    for i in ("1", "2"):
        out[f"encoder/conv{i}/weight"] = sd[f"model.encoder.conv{i}.weight"]
        out[f"encoder/conv{i}/bias"] = sd[f"model.encoder.conv{i}.bias"]
    out["encoder/position_encodings/encodings"] = sd["model.encoder.embed_positions.weight"]
    out["decoder/position_encodings/encodings"] = sd["model.decoder.embed_positions.weight"]
    out["decoder/embeddings/weight"] = sd["model.decoder.embed_tokens.weight"]

    def norm(dst, src):
        out[f"{dst}/gamma"], out[f"{dst}/beta"] = sd[f"{src}.weight"], sd[f"{src}.bias"]

    def attn(dst, src, fused_qkv: bool):
        q, k, v, o = (f"{src}.{p}" for p in ("q_proj", "k_proj", "v_proj", "out_proj"))
        if fused_qkv:
            out[f"{dst}/linear_0/weight"] = torch.cat([sd[f"{q}.weight"], sd[f"{k}.weight"], sd[f"{v}.weight"]])
            out[f"{dst}/linear_0/bias"] = torch.cat([sd[f"{q}.bias"], zeros, sd[f"{v}.bias"]])
            out[f"{dst}/linear_1/weight"], out[f"{dst}/linear_1/bias"] = sd[f"{o}.weight"], sd[f"{o}.bias"]
        else:
            out[f"{dst}/linear_0/weight"], out[f"{dst}/linear_0/bias"] = sd[f"{q}.weight"], sd[f"{q}.bias"]
            out[f"{dst}/linear_1/weight"] = torch.cat([sd[f"{k}.weight"], sd[f"{v}.weight"]])
            out[f"{dst}/linear_1/bias"] = torch.cat([zeros, sd[f"{v}.bias"]])
            out[f"{dst}/linear_2/weight"], out[f"{dst}/linear_2/bias"] = sd[f"{o}.weight"], sd[f"{o}.bias"]

    def ffn(dst, src):
        for i, fc in enumerate(("fc1", "fc2")):
            out[f"{dst}/ffn/linear_{i}/weight"] = sd[f"{src}.{fc}.weight"]
            out[f"{dst}/ffn/linear_{i}/bias"] = sd[f"{src}.{fc}.bias"]
        norm(f"{dst}/ffn/layer_norm", f"{src}.final_layer_norm")

    for stack in ("encoder", "decoder"):
        for i in range(2):
            dst, src = f"{stack}/layer_{i}", f"model.{stack}.layers.{i}"
            attn(f"{dst}/self_attention", f"{src}.self_attn", fused_qkv=True)
            norm(f"{dst}/self_attention/layer_norm", f"{src}.self_attn_layer_norm")
            if stack == "decoder":
                attn(f"{dst}/attention", f"{src}.encoder_attn", fused_qkv=False)
                norm(f"{dst}/attention/layer_norm", f"{src}.encoder_attn_layer_norm")
            ffn(dst, src)
        norm(f"{stack}/layer_norm", f"model.{stack}.layer_norm")
    return out


def _write_ct2(path, variables: dict[str, torch.Tensor], aliases: dict[str, str]) -> None:
    codes = {torch.float16: 4, torch.int16: 2, torch.float32: 0}

    def string(s: str) -> bytes:
        raw = s.encode() + b"\0"
        return struct.pack("<H", len(raw)) + raw

    body = struct.pack("<I", 6) + string("WhisperSpec") + struct.pack("<I", 3) + struct.pack("<I", len(variables))
    for name, t in sorted(variables.items()):
        data = t.contiguous().numpy().tobytes()
        body += string(name) + struct.pack("<B", t.dim()) + struct.pack("<" + "I" * t.dim(), *t.shape)
        body += struct.pack("<B", codes[t.dtype]) + struct.pack("<I", len(data)) + data
    body += struct.pack("<I", len(aliases)) + b"".join(string(a) + string(b) for a, b in aliases.items())
    path.write_bytes(body)


def test_ctranslate2_file_maps_back_to_the_same_whisper(tmp_path):
    model = tiny_model("whisper")
    path = tmp_path / "model.bin"
    _write_ct2(path, _ct2_variables(model), {"decoder/projection/weight": "decoder/embeddings/weight"})
    ct2 = read_ct2(path)
    assert ct2.spec == "WhisperSpec" and ct2.scalar("decoder/num_heads") == 4
    assert torch.equal(ct2.get("decoder/projection/weight"), ct2.get("decoder/embeddings/weight"))
    config = hf_config(ct2, {"suppress_ids": [], "suppress_ids_begin": []})
    assert (config.encoder_layers, config.decoder_layers, config.d_model, config.num_mel_bins,
            config.max_source_positions, config.encoder_ffn_dim) == (2, 2, 32, 8, 50, 64)
    state = hf_state_dict(ct2, config.d_model)
    rebuilt = tiny_model("whisper", seed=1)                       # other weights, then the converted ones
    missing, unexpected = rebuilt.load_state_dict(state, strict=False)
    assert missing == ["proj_out.weight"] and not unexpected       # proj_out is tied to the embeddings
    rebuilt.tie_weights()
    x = tiny_inputs("whisper")
    half = tiny_model("whisper").half().float()                     # the original at the file's float16 precision
    assert torch.allclose(logits_of(rebuilt, x), logits_of(half, x), atol=1e-4)


def test_ctranslate2_reader_refuses_truncated_files_and_non_zero_key_bias(tmp_path):
    model = tiny_model("whisper")
    variables = _ct2_variables(model)
    path = tmp_path / "model.bin"
    _write_ct2(path, variables, {})
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(FormatError, match="truncated"):
        read_ct2(path)
    bias = variables["encoder/layer_0/self_attention/linear_0/bias"].clone()
    bias[40] = 1.0                                                  # inside the key part [32, 64)
    variables["encoder/layer_0/self_attention/linear_0/bias"] = bias
    _write_ct2(path, variables, {})
    with pytest.raises(FormatError, match="key bias is not zero"):
        hf_state_dict(read_ct2(path), 32)


# -- the adapter ----------------------------------------------------------------------------------------------

def test_whisper_has_three_kinds_of_four_heads(tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    assert lm.task_type == "asr" and lm.arch == "whisper"
    assert lm.layout.kinds == {k: (4, 4) for k in KINDS}
    assert all(s.k.bias is None for s in lm.sites)                  # Whisper's keys have no bias


@pytest.mark.parametrize("kind", KINDS)
def test_masked_equals_pruned_per_kind_with_an_emptied_layer(kind, tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    x = tiny_inputs("whisper")
    mask = HeadMask.from_removed(lm.layout, [(kind, 0, h) for h in range(4)] + [(kind, 1, 1), (kind, 1, 3)])
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    pruned = prune_heads(lm.model, mask)
    assert layout_of(find_sites(pruned)).kinds[kind] == (0, 2)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    assert (masked - logits_of(lm.model, x)).abs().max() > 1e-5
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_generate_masked_equals_pruned_when_layer_0_loses_every_head(kind, tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    x = tiny_inputs("whisper")
    x.pop("decoder_input_ids")
    mask = HeadMask.from_removed(lm.layout, [(kind, 0, h) for h in range(4)] + [(kind, 1, 0)])
    assert_generate_parity(lm, x, mask, new_tokens=6)


def test_beam_generate_masked_equals_pruned_in_every_kind_at_once(tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    x = {"input_features": tiny_inputs("whisper")["input_features"]}
    mask = HeadMask.from_removed(lm.layout, [(k, 1, h) for k in KINDS for h in range(4)] + [(k, 0, 2) for k in KINDS])
    kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, num_beams=2, output_scores=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked = lm.model.generate(**x, **kw)
        pruned = prune_heads(lm.model, mask).generate(**x, **kw)
    assert torch.equal(masked.sequences, pruned.sequences)
    assert torch.allclose(masked.scores[-1], pruned.scores[-1], atol=1e-4)
    assert installed_hook_count(lm.model) == 0


def test_pruned_whisper_reloads_and_generates_the_same(tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    x = {"input_features": tiny_inputs("whisper")["input_features"]}
    mask = HeadMask.from_removed(lm.layout, [("cross", 0, h) for h in range(4)] + [("encoder_self", 1, 2)])
    pruned = prune_heads(lm.model, mask)
    again = load_model(str(save_pruned(pruned, lm.tokenizer, tmp_path / "pruned")))
    assert again.arch == "whisper" and again.layout.kinds["cross"] == (0, 4)
    kw = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False)
    with torch.no_grad():
        assert torch.equal(again.model.generate(**x, **kw), pruned.generate(**x, **kw))


def test_no_hook_left_when_the_forward_pass_fails(tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    bad = {"input_features": torch.randn(1, 8, 37)}                  # not 2 x max_source_positions frames
    mask = HeadMask.from_removed(lm.layout, [("cross", 0, 1)])
    with pytest.raises(ValueError):
        with apply_mask(lm, mask):
            lm.model(**bad, decoder_input_ids=torch.tensor([[5]]))
    assert installed_hook_count(lm.model) == 0


def test_flop_dims_read_whisper_stacks():
    dims = adapter_for("whisper").flop_dims(tiny_config("whisper"))
    assert dims.is_encoder_decoder and dims.kind_stack["cross"] == "decoder"
    assert dims.stacks["encoder"].heads == 4 and dims.head_size == tiny_config("whisper").vocab_size
