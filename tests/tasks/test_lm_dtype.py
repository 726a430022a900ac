"""``--dtype``: float32 on CPU by default, half precision refused on CPU (a CUDA-only choice), the dtype
recorded in the results' provenance, and the masking/pruning code consistent in bfloat16."""
from __future__ import annotations

import json

import pytest
import torch

from pruning_core.cli.main import main
from pruning_core.cli.args import DTYPE_CHOICES
from pruning_core.core.errors import ModelLoadError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.modeling.sources.loading import DTYPES, load_model, resolve_dtype
from pruning_core.modeling.pruning import prune_heads
from tiny import logits_of, tiny_inputs, tiny_loaded, tiny_model, tokenizer_for

CPU = torch.device("cpu")


def test_choices_are_one_list_and_cpu_runs_float32():
    assert DTYPE_CHOICES == DTYPES
    assert resolve_dtype("auto", CPU) == torch.float32 and resolve_dtype(None, CPU) == torch.float32
    assert resolve_dtype("float32", CPU) == torch.float32
    for half in ("bfloat16", "float16"):
        with pytest.raises(ModelLoadError, match=f"--dtype {half} needs a CUDA GPU.*float32"):
            resolve_dtype(half, CPU)
    with pytest.raises(ModelLoadError, match="Unknown dtype 'int8'.*auto, float32, bfloat16, float16"):
        resolve_dtype("int8", CPU)


@pytest.fixture
def llama_folder(tmp_path):
    model = tiny_model("llama")
    folder = tmp_path / "llama"
    model.to(torch.bfloat16).save_pretrained(folder)        # a half-precision checkpoint still loads as float32
    tokenizer_for(tmp_path).save_pretrained(folder)
    return folder


def test_load_model_casts_to_the_asked_dtype_and_refuses_half_on_cpu(llama_folder):
    loaded = load_model(str(llama_folder), device="cpu")
    assert loaded.dtype == torch.float32
    with pytest.raises(ModelLoadError, match="needs a CUDA GPU"):
        load_model(str(llama_folder), device="cpu", dtype="bfloat16")


def test_cli_records_the_dtype_and_refuses_half_on_cpu(llama_folder, tmp_path, capsys):
    text = tmp_path / "x.txt"
    text.write_text("the good movie was fun\na bad film it was not very great\n")
    out = tmp_path / "eval.json"
    assert main(["evaluate", str(llama_folder), "--task", f"file:{text}", "--device", "cpu", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["provenance"]["dtype"] == "float32"
    assert main(["evaluate", str(llama_folder), "--task", f"file:{text}", "--device", "cpu",
                 "--dtype", "float16"]) == 2
    assert "--dtype float16 needs a CUDA GPU" in capsys.readouterr().err


def test_masked_equals_pruned_in_bfloat16(tmp_path):
    """The gates follow the activations' dtype: a bf16 model (as on a GPU) masks and prunes consistently."""
    lm = tiny_loaded("llama", tmp_path)
    lm = lm.derive(lm.model.to(torch.bfloat16))
    n = lm.layout.kinds["decoder_self"]
    mask = HeadMask({"decoder_self": tuple(tuple(0 if (l == 0 and h < 2) else 1 for h in range(k))
                                           for l, k in enumerate(n))})
    inputs = tiny_inputs("llama")
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, inputs)
    got = logits_of(prune_heads(lm.model, mask), inputs)
    assert masked.dtype == torch.bfloat16 and got.dtype == torch.bfloat16
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(got[real].float(), masked[real].float(), atol=3e-2, rtol=3e-2)
