"""The real prepared mpnet (all-mpnet-base-v2 fine-tuned on movie-sentiment): layout, masked == pruned with
the shared position bias sliced per layer, and accuracy on a slice of the test split against its manifest.

Skips, naming the command, when ``headprune prepare --model mpnet`` has not run in this HEADPRUNE_HOME.
About 30 s on 2 cores (loading 438 MB of weights, 136 short snippets through a 12-layer encoder).
"""
import json

import pytest
import torch

from pruning_core.modeling.sources import catalog
from pruning_core.bench import half_mask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model
from pruning_core.modeling.pruning import prune_heads
from pruning_core.evaluation.stats import wilson_interval
from pruning_core.tasks import get_task

pytestmark = pytest.mark.slow
SLICE = 128


@pytest.fixture(scope="module")
def mpnet():
    if not catalog.get("mpnet").is_prepared():
        pytest.skip("the prepared model 'mpnet' is not prepared: run `headprune prepare --model mpnet` "
                    "(about 25 min on 2 cores)")
    return load_model("mpnet")


@pytest.fixture(scope="module")
def manifest():
    return json.loads((catalog.get("mpnet").folder() / catalog.MANIFEST).read_text())


def test_layout_and_manifest(mpnet, manifest):
    assert mpnet.arch == "mpnet" and mpnet.layout.kinds == {"encoder_self": (12,) * 12}
    assert manifest["source"]["license"] == "Apache-2.0"
    assert manifest["finetune"]["stats"]["seconds"] > 0 and manifest["accuracy"]["test"]["n_examples"] == 1012


def test_masked_equals_pruned_on_the_real_model(mpnet):
    data = get_task("movie-sentiment").encode(mpnet, "validation", 8, max_length=64)
    batch = next(data.batches(8))
    mask = half_mask(mpnet.layout, seed=0)              # 6 random heads of each layer: not a prefix
    with torch.inference_mode():
        with apply_mask(mpnet, mask):
            masked = mpnet.model(**batch.inputs).logits
        pruned = prune_heads(mpnet.model, mask)(**batch.inputs).logits
        dense = mpnet.model(**batch.inputs).logits
    assert torch.allclose(pruned, masked, atol=1e-4)
    assert not torch.allclose(dense, masked, atol=1e-3)
    assert installed_hook_count(mpnet.model) == 0


def test_accuracy_on_a_test_slice_agrees_with_the_manifest(mpnet, manifest):
    task = get_task("movie-sentiment")
    res = task.evaluate(mpnet, task.encode(mpnet, "test", SLICE, max_length=64))
    k = round(res.metric * res.n_examples)
    lo, hi = wilson_interval(k, res.n_examples, z=3.29)       # 99.9 %: fails on a broken model, not on noise
    full = manifest["accuracy"]["test"]["accuracy"]
    assert lo <= full <= hi, (res.metric, full)
    assert res.metric > 0.75, res
