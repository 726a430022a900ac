"""Model loading: local folders, safety, and every bad input's clear error."""
import pytest
import torch

from pruning_core.core.errors import CacheError, ModelLoadError, UnsupportedArchitectureError
from pruning_core.modeling.sources.loading import load_model
from tiny import logits_of, make_bert_tokenizer, tiny_inputs, tiny_model


@pytest.fixture
def bert_folder(tmp_path):
    model = tiny_model("bert")
    folder = tmp_path / "bert"
    model.save_pretrained(folder)
    make_bert_tokenizer(folder)
    return folder, model


def test_load_local_folder(bert_folder):
    folder, model = bert_folder
    lm = load_model(str(folder))
    assert lm.source == "local" and lm.task_type == "classification"
    assert lm.layout.kinds == {"encoder_self": (4, 4)}
    assert len(lm.weights_sha256) == 64
    x = tiny_inputs("bert")
    assert torch.allclose(logits_of(lm.model, x), logits_of(model, x), atol=1e-6)
    assert lm.model.config._attn_implementation == "eager"


def test_pickle_weights_refused_unless_allowed(tmp_path):
    model = tiny_model("bert")
    folder = tmp_path / "pickled"
    model.save_pretrained(folder)
    make_bert_tokenizer(folder)
    for f in folder.glob("*.safetensors"):   # transformers 5 writes safetensors only: make a pickle file
        f.unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="--allow-pickle"):
        load_model(str(folder))
    lm = load_model(str(folder), allow_pickle=True)
    x = tiny_inputs("bert")
    assert torch.allclose(logits_of(lm.model, x), logits_of(model, x), atol=1e-6)


def test_missing_weights(bert_folder):
    folder, _ = bert_folder
    for f in folder.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(str(folder))


def test_unsupported_architecture(tmp_path):
    import transformers as tf
    folder = tmp_path / "opt"           # a family without an adapter (GPT-2 has one now)
    tf.OPTForCausalLM(tf.OPTConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=8, ffn_dim=16,
                                   word_embed_proj_dim=8, vocab_size=20, max_position_embeddings=16)).save_pretrained(folder)
    with pytest.raises(UnsupportedArchitectureError, match="Supported model types"):
        load_model(str(folder))


@pytest.mark.parametrize("spec, message", [
    ("./no/such/folder", "does not exist"),
    ("not a valid id!", "neither an existing folder nor a valid hub id"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ModelLoadError, match=message):
        load_model(spec)


def test_folder_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path / "empty"))


def test_hub_id_offline_gives_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="the hub cannot be reached.*Check the spelling"):
        load_model("someone/some-model-that-is-not-cached")


def test_default_not_prepared(headprune_home):
    with pytest.raises(CacheError, match="headprune prepare"):
        load_model("default")


def test_cuda_requested_without_gpu(bert_folder):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ModelLoadError, match="no CUDA GPU"):
        load_model(str(bert_folder[0]), device="cuda")


def test_corrupt_default_is_detected(headprune_home, bert_folder):
    import json
    import shutil
    from pruning_core.modeling.sources.loading import _hash_files, default_model_dir
    folder, _ = bert_folder
    target = default_model_dir()
    shutil.copytree(folder, target)
    weights = target / "model.safetensors"
    (target / "headprune_manifest.json").write_text(json.dumps({"files": {"model.safetensors": _hash_files([weights])}}))
    assert load_model("default").source == "default"
    with open(weights, "r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02")
    with pytest.raises(CacheError, match="prepare --force"):
        load_model("default")
    (target / "headprune_manifest.json").unlink()
    with pytest.raises(CacheError, match="incomplete"):
        load_model("default")
