"""``headprune prepare --model smollm2`` without the real file: the zoo entry, the clear error when
``gguf``/``accelerate`` are missing, and the conversion step dropping transformers' GGUF quantizer record so
the saved folder loads as plain safetensors."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from pruning_core import zoo
from pruning_core.cli import main
from pruning_core.errors import ModelLoadError
from pruning_core.models import load_model
from pruning_core.zoo_prepare import smollm2
from tiny import tiny_model, tokenizer_for


def test_entry_names_its_task_extras_and_command():
    entry = zoo.get("smollm2")
    assert entry.task == "movie-text" and entry.extras == ("gguf", "accelerate")
    assert entry.command() == "headprune prepare --model smollm2"
    assert entry.prepare == "pruning_core.zoo_prepare.smollm2:prepare_smollm2"


@pytest.fixture
def no_gguf(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(smollm2.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))


def test_missing_extras_name_the_pip_command(no_gguf, headprune_home, capsys):
    with pytest.raises(ModelLoadError, match=r"needs the PyPI package\(s\) gguf\. Run `pip install gguf accelerate`"):
        smollm2.check_extras()
    assert main(["prepare", "--model", "smollm2"]) == 2
    assert "pip install gguf accelerate" in capsys.readouterr().err
    assert not zoo.get("smollm2").folder().exists()                     # nothing half-built


def test_convert_drops_the_quantizer_record(tmp_path, monkeypatch):
    """What transformers returns for a GGUF (a float model still flagged as quantized) is saved as plain weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils.quantization_config import GgufConfig

    def fake_model(*args, **kwargs):
        model = tiny_model("llama")
        model.config.quantization_config = GgufConfig(gguf_file="x.gguf")
        model.is_quantized = True
        return model
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake_model)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: tokenizer_for(tmp_path))
    folder = tmp_path / "out"
    smollm2._convert(tmp_path / "x.gguf", folder)
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    monkeypatch.undo()
    loaded = load_model(str(folder), device="cpu")
    assert loaded.arch == "llama" and loaded.dtype == torch.float32
    assert getattr(loaded.config, "quantization_config", None) is None
