"""The real SmolLM2-135M-Instruct (``headprune prepare --model smollm2``): it loads as plain safetensors,
masked == pruned (logits and greedy generate) for a few query heads and a whole key/value group, and
its perplexity on the manifest's quick-check subset is the one the manifest recorded. About 30 s on 2 idle
cores (5 min when the 2 cores were shared by a dozen busy processes)."""
from __future__ import annotations

import json
import math

import pytest
import torch

from pruning_core import tasks
from pruning_core.modeling.sources import catalog
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from tiny import masked_and_pruned, prepared_folder

pytestmark = pytest.mark.slow
K = "decoder_self"


@pytest.fixture(scope="module")
def smol():
    prepared_folder("smollm2", "needs `pip install gguf accelerate`; about 2 min")
    from pruning_core.modeling.sources.loading import load_model
    return load_model("smollm2", device="cpu")


def _mask(layout, removed: dict[int, list[int]]) -> HeadMask:
    return HeadMask({K: tuple(tuple(0 if h in removed.get(l, []) else 1 for h in range(n))
                              for l, n in enumerate(layout.kinds[K]))})


def test_layout_and_plain_safetensors(smol):
    assert smol.arch == "llama" and smol.layout.kinds[K] == (9,) * 30
    assert getattr(smol.config, "quantization_config", None) is None        # the GGUF quantizer record is gone
    assert smol.config.num_key_value_heads == 3 and smol.dtype == torch.float32
    manifest = json.loads((catalog.get("smollm2").folder() / catalog.MANIFEST).read_text())
    assert "dequantized" in manifest["provenance"] and "not the original bf16" in manifest["provenance"]


def test_masked_equals_pruned_with_a_whole_kv_group(smol):
    # layer 0 loses KV group 0 (query heads 0-2) entirely; layer 7 one head; layer 29 a group and one more
    mask = _mask(smol.layout, {0: [0, 1, 2], 7: [4], 29: [0, 6, 7, 8]})
    run = masked_and_pruned(smol, mask, ["The movie was a quiet, careful study of", "A loud film"])
    inputs, real, masked, got, dense, pruned = (run[k] for k in ("inputs", "real", "masked", "pruned", "dense", "model"))
    torch.testing.assert_close(got[real], masked[real], atol=2e-4, rtol=1e-4)
    assert (dense[real] - masked[real]).abs().max() > 1e-2                   # the mask did something
    attn0 = pruned.model.layers[0].self_attn
    assert attn0.k_proj.out_features == 2 * 64 and attn0.q_proj.out_features == 6 * 64   # the group's K/V left
    # greedy generate with the KV cache: the same tokens (the pruned copy is reused: a second costs ~10 s)
    kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0, output_scores=True,
              return_dict_in_generate=True)
    one = {k: v[:1] for k, v in inputs.items()}                             # the longer prompt: no padding
    with torch.no_grad():
        with apply_mask(smol, mask):
            want = smol.model.generate(**one, **kw)
        have = pruned.generate(**one, **kw)
    assert torch.equal(want.sequences, have.sequences)
    for a, b in zip(want.scores, have.scores):
        torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-4)
    assert installed_hook_count(smol.model) == 0


def test_perplexity_matches_the_manifest(smol):
    check = json.loads((catalog.get("smollm2").folder() / catalog.MANIFEST).read_text())["evaluation"]["check"]
    tasks.clear_cache()
    task = tasks.get_task("movie-text")
    data = task.encode(smol, "validation", limit=check["limit"], max_length=128)
    res = task.evaluate(smol, data, batch_size=16)
    assert math.isfinite(res.metric) and res.extra["tokens"] == check["tokens"]
    assert res.metric == pytest.approx(check["perplexity"], rel=1e-3)
    low, high = res.interval
    assert low < res.metric < high


def test_clicking_heads_of_one_group_shrinks_smollm2(smol):
    """Clicking L5 H0 then L5 H1 showed parameters +0.2 % and +0.4 %; each click now removes
    one head's W_Q rows and W_O columns (576 x 64 each), the shared K/V head staying once."""
    from pruning_core.modeling.pruning import parameter_count, parameter_count_after, prune_heads

    dense = parameter_count(smol.model)
    one, two = _mask(smol.layout, {5: [0]}), _mask(smol.layout, {5: [0, 1]})
    assert dense - parameter_count_after(smol.model, one) == 2 * 576 * 64
    assert dense - parameter_count_after(smol.model, two) == 4 * 576 * 64
    assert parameter_count(prune_heads(smol.model, two)) == parameter_count_after(smol.model, two)
