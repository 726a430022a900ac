"""ONNX export of pruned models of every family (tiny random models), non-uniform shapes included (a layer
down one head, the last layer of every kind without heads): ONNX Runtime's logits equal headprune's on
inputs the export never saw; the CLI writes and checks the file; a slow test on the pruned default."""
import json

import pytest
import torch

from pruning_core.cli.main import main
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import default_model_dir, load_model
from pruning_core.modeling.pruning import prune_heads
from tiny import ALL_ARCHS, logits_of, make_bert_tokenizer, tiny_inputs, tiny_loaded, tiny_model

pytest.importorskip("onnxruntime", reason="pip install -r requirements.txt (onnx, onnxruntime)")
from pruning_core.bench.export.to_onnx import export_onnx, onnx_logits, onnx_session  # noqa: E402

# ONNX Runtime's own float32 kernels (fused ops, another summation order) on 2 tiny layers: ~1e-7 apart;
# 1e-5 absolute is 100 times that and far below what one wrong head slice moves (~1e-2 on these logits)
ATOL = 1e-5


def uneven(layout) -> HeadMask:
    """Layer 0 of every kind loses head 0, the last layer of every kind loses all its heads."""
    removed = []
    for kind, rows in layout.kinds.items():
        removed += [(kind, 0, 0)] + [(kind, len(rows) - 1, h) for h in range(rows[-1])]
    return HeadMask.from_removed(layout, removed)


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_onnx_runtime_equals_the_pruned_model(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    pruned = lm.derive(prune_heads(lm.model, uneven(lm.layout)))
    result = export_onnx(pruned, tmp_path / f"{arch}.onnx")
    assert result.path.is_file() and result.max_abs_diff <= result.tolerance
    x = {k: v for k, v in tiny_inputs(arch, batch=4, length=6, seed=7).items()}   # one padded, unseen shapes
    want = logits_of(pruned.model, x)
    got = onnx_logits(onnx_session(result.path), x)
    assert got.shape == want.shape and torch.allclose(got, want, atol=ATOL, rtol=0)
    # the export is of the pruned model, not the dense one: 100 times closer to the pruned logits
    assert (got - logits_of(lm.model, x)).abs().max() > 100 * (got - want).abs().max()


def test_the_cli_exports_a_pruned_folder(tmp_path, monkeypatch, headprune_home, capsys):
    tiny_model("bert").save_pretrained(tmp_path / "bert")
    make_bert_tokenizer(tmp_path / "bert")
    rows = [[0, 1, 1, 1], [0, 0, 0, 0]]
    (tmp_path / "m.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "x",
                                                 "kinds": {"encoder_self": rows}}))
    monkeypatch.chdir(tmp_path)
    assert main(["prune", "bert", "--mask", "m.json", "--out", "pruned"]) == 0
    capsys.readouterr()
    assert main(["export", "pruned", "--format", "onnx", "--out", "out/p.onnx"]) == 0
    out = capsys.readouterr().out
    assert "wrote out/p.onnx" in out and "checked: ONNX Runtime's logits equal headprune's" in out
    x = tiny_inputs("bert")
    again = load_model("pruned")
    assert torch.allclose(onnx_logits(onnx_session(tmp_path / "out" / "p.onnx"), x), logits_of(again.model, x),
                          atol=ATOL, rtol=0)
    assert main(["export", "pruned", "--format", "onnx", "--dtype", "float16", "--out", "h.onnx"]) == 2
    assert "ONNX export writes float32" in capsys.readouterr().err


@pytest.mark.slow
def test_the_pruned_default_in_onnx_runtime(tmp_path):
    if not (default_model_dir() / "config.json").is_file():
        pytest.skip("the embedded default is not prepared: run `headprune prepare` (make test does)")
    default = load_model("default", device="cpu", dtype="float32")
    pruned = default.derive(prune_heads(default.model, uneven(default.layout)))
    result = export_onnx(pruned, tmp_path / "default.onnx")
    enc = default.tokenizer(["a wonderful, moving film", "dull and far too long; I left early"],
                            padding=True, return_tensors="pt")
    x = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    want = logits_of(pruned.model, x)
    # 6 layers of 384-wide float32 arithmetic in two libraries: ~1e-6 apart on logits of size ~3
    assert torch.allclose(onnx_logits(onnx_session(result.path), x), want, atol=1e-4, rtol=0)


@pytest.mark.heavy
def test_bench_onnx_times_both_runtimes_beside_the_ceiling(tmp_path, monkeypatch, headprune_home, capsys):
    tiny_model("llama").save_pretrained(tmp_path / "llama")
    make_bert_tokenizer(tmp_path / "tok").save_pretrained(tmp_path / "llama")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "llama", "--onnx", "--batch-sizes", "1,2", "--seq-len", "8", "--repeats", "3",
                 "--out", "b.json"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime pruned" in out and "FLOP ceiling" in out
    result = json.loads((tmp_path / "b.json").read_text())
    assert result["format"] == "headprune.onnx_bench/1" and result["ceiling"]["speedup"] > 1
    assert [(r["batch_size"], r["variant"]) for r in result["rows"]] == \
        [(b, v) for b in (1, 2) for v in ("pytorch dense", "pytorch pruned", "onnxruntime dense", "onnxruntime pruned")]
    assert all(r["n_runs"] >= 3 and r["median_s"] > 0 for r in result["rows"])
    assert all(r["speedup"] == 1.0 for r in result["rows"] if r["variant"].endswith("dense"))
    assert max(result["onnx_check"].values()) < 1e-4
    assert main(["bench", "llama", "--onnx", "--dtype", "bfloat16"]) == 2
