"""The real Qwen2.5-Coder-0.5B-Instruct (``headprune prepare --model qwen2.5-0.5b``): it loads as plain
safetensors with its q/k/v biases; its perplexity on the manifest's quick-check documents is finite, in a
sane range and the one the manifest recorded; one whole key/value group removed from every layer (7 of 14
query heads on 1 of 2 key/value heads: the only uniform group shape between none and all) gives masked ==
pruned logits, and the saved folder loads in stock transformers, in a process without headprune, with
equal logits. About 2 min and ~8 GB of memory on 2 idle cores (the float32 model is 2.5 GB; the test holds
it and a pruned copy, and the stock process loads a third)."""
from __future__ import annotations

import gc
import json
import math

import pytest
import torch

from pruning_core import tasks
from pruning_core.modeling.sources import catalog
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import save_pruned
from stock_load import stock_run
from tiny import masked_and_pruned

pytestmark = pytest.mark.slow
K = "decoder_self"
NAME = "qwen2.5-0.5b"
PROMPTS = ["The movie was a quiet, careful study of", "def add(a, b):\n    return"]


@pytest.fixture(scope="module")
def qwen():
    if not catalog.get(NAME).is_prepared():
        pytest.skip(f"{NAME} is not prepared: run `headprune prepare --model {NAME}` "
                    "(needs `pip install gguf accelerate`; downloads 477 MB, about 2 min)")
    from pruning_core.modeling.sources.loading import load_model
    return load_model(NAME, device="cpu")


def test_layout_biases_and_plain_safetensors(qwen):
    assert qwen.arch == "llama" and qwen.config.model_type == "qwen2"
    assert qwen.layout.kinds[K] == (14,) * 24 and qwen.config.num_key_value_heads == 2
    assert getattr(qwen.config, "quantization_config", None) is None        # the GGUF quantizer record is gone
    attn = qwen.model.model.layers[0].self_attn
    assert all(getattr(attn, p).bias is not None for p in ("q_proj", "k_proj", "v_proj"))
    assert attn.o_proj.bias is None and attn.k_proj.out_features == 2 * 64
    manifest = json.loads((catalog.get(NAME).folder() / catalog.MANIFEST).read_text())
    assert manifest["source"]["gguf_size"] == 491_400_064 and "Apache-2.0" in manifest["source"]["license"]
    assert "Paris" in manifest["check"]["continuation"] and "not the original bf16" in manifest["provenance"]


def test_perplexity_is_finite_sane_and_the_manifests(qwen):
    check = json.loads((catalog.get(NAME).folder() / catalog.MANIFEST).read_text())["evaluation"]["check"]
    tasks.clear_cache()
    task = tasks.get_task("movie-text")
    data = task.encode(qwen, "validation", limit=check["limit"], max_length=128)
    res = task.evaluate(qwen, data, batch_size=16)
    # a language model, even a 4-bit coder one, does far better on English than chance over 151,936 tokens
    # (SmolLM2: 177 on the same documents); a broken conversion gives thousands
    assert math.isfinite(res.metric) and 20 < res.metric < 1000
    assert res.extra["tokens"] == check["tokens"]
    assert res.metric == pytest.approx(check["perplexity"], rel=1e-3)


def test_one_kv_group_per_layer_pruned_loads_in_stock_transformers(qwen, tmp_path):
    layers = len(qwen.layout.kinds[K])
    # group 1 (query heads 7-13 on key/value head 1) in even layers, group 0 (heads 0-6) in odd ones: each
    # layer's remaining heads need the right k/v rows and biases of a different group
    removed = [(K, l, h) for l in range(layers) for h in (range(7, 14) if l % 2 == 0 else range(7))]
    mask = HeadMask.from_removed(qwen.layout, removed)
    run = masked_and_pruned(qwen, mask, PROMPTS)
    real, masked, ours, dense, pruned = run["real"], run["masked"], run["pruned"], run["dense"], run["model"]
    # pruned sums 7 heads where masked sums 14 with 7 zeroed: float32 sums in another order over 24 layers
    torch.testing.assert_close(ours[real], masked[real], atol=2e-4, rtol=1e-4)
    assert (dense[real] - masked[real]).abs().max() > 1e-1                    # the mask did something
    a0 = pruned.model.layers[0].self_attn
    assert (a0.q_proj.out_features, a0.k_proj.out_features, a0.q_proj.bias.shape[0]) == (7 * 64, 64, 7 * 64)
    torch.testing.assert_close(a0.k_proj.bias, qwen.model.model.layers[0].self_attn.k_proj.bias[:64])
    folder = save_pruned(pruned, qwen.tokenizer, tmp_path / "pruned")
    config = json.loads((folder / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (7, 1, 64)
    ids = run["inputs"]["input_ids"][:1, :int(real[0].sum())].tolist()                 # the first prompt, unpadded
    with torch.no_grad():
        want = pruned(input_ids=torch.tensor(ids)).logits
    del pruned, run
    gc.collect()
    out = stock_run(folder, tmp_path, ids)
    assert out["headprune"] == [] and out["heads"] == [[7 * 64, 64]] * layers
    # the same float32 operations on the same weights in eager attention; another process may split the matrix
    # products over threads differently (sums in another order: ~1e-6 relative per product, over 24 layers
    # and logits of size ~10-20)
    torch.testing.assert_close(out["logits"], want, atol=1e-4, rtol=1e-5)
