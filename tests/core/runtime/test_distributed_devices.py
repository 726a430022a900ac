"""Models spread over devices (``device_map``): gates follow each layer's device, masks and pruning still work.

Only CPU is available here, so the maps put every module on the CPU (through accelerate's loading
path) and the gate placement is checked against a module on the ``meta`` device; a real split over
GPUs is not exercised by these tests (see docs/DISTRIBUTED.md).
"""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from pruning_core.modeling.architectures import find_sites
from pruning_core.core.errors import ModelLoadError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import _on_device_of, installed_hook_count
from pruning_core.modeling.sources.loading import load_model
from pruning_core.modeling.pruning import prune_heads
from pruning_core.tasks.classification import ClassificationTask
from tiny import make_bert_tokenizer, synthetic_sentiment, tiny_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("dm") / "tiny"
    tiny_model("bert").save_pretrained(path)
    make_bert_tokenizer(path)
    return path


def _task():
    rows = synthetic_sentiment(9, seed=5)
    return ClassificationTask("syn9", lambda split, limit: rows, splits=("validation",), default_split="validation")


@pytest.mark.parametrize("device_map", ["cpu", {"bert.embeddings": "cpu", "bert.encoder.layer.0": "cpu",
                                                "bert.encoder.layer.1": "cpu", "bert.pooler": "cpu",
                                                "classifier": "cpu", "dropout": "cpu"}])
def test_masked_evaluation_and_pruning_with_a_device_map(folder, device_map):
    plain = load_model(str(folder))
    mapped = load_model(str(folder), device_map=device_map)
    _check_mask_and_prune(plain, mapped)


def test_masks_and_pruning_under_accelerate_hooks(folder):
    """The hooks accelerate puts on a dispatched model (moving inputs and weights between devices)."""
    from accelerate import dispatch_model

    plain = load_model(str(folder))
    model = load_model(str(folder)).model
    dispatch_model(model, device_map={"bert.embeddings": "cpu", "bert.encoder.layer.0": "cpu",
                                      "bert.encoder.layer.1": "cpu", "bert.pooler": "cpu", "classifier": "cpu",
                                      "dropout": "cpu"}, main_device="cpu", force_hooks=True)
    assert any(hasattr(m, "_hf_hook") for m in model.modules()), "accelerate added no hook"
    _check_mask_and_prune(plain, plain.derive(model))


def _check_mask_and_prune(plain, mapped):
    task = _task()
    mask = HeadMask.from_removed(plain.layout, [("encoder_self", 0, 1), ("encoder_self", 1, 3)])
    a = task.evaluate(plain, task.encode(plain, "validation"), mask, batch_size=4)
    b = task.evaluate(mapped, task.encode(mapped, "validation"), mask, batch_size=4)
    assert (a.metric, a.per_example) == (b.metric, b.per_example) and a.loss == pytest.approx(b.loss, abs=1e-6)
    assert installed_hook_count(mapped.model) == installed_hook_count(plain.model)   # no gate hook left
    pruned = prune_heads(mapped.model, mask)
    batch = next(task.encode(mapped, "validation").batches(9))
    with torch.no_grad():
        from pruning_core.modeling.masking import apply_mask
        with apply_mask(mapped, mask):
            masked_logits = mapped.model(**batch.inputs).logits
        assert torch.allclose(pruned(**batch.inputs).logits, masked_logits, atol=1e-5)


def test_masks_and_scoring_with_an_offloaded_layer(folder, tmp_path):
    """A device_map with "cpu" beside a GPU offloads those layers: accelerate keeps their weights on
    ``meta`` until each forward. Simulated on the CPU by offloading layer 1 to disk: its gate must
    follow the layer's input, not become a meta tensor without values."""
    from accelerate import dispatch_model

    from pruning_core.scoring.gradient import per_token_importance

    plain = load_model(str(folder))
    model = load_model(str(folder)).model
    dispatch_model(model, device_map={"bert.embeddings": "cpu", "bert.encoder.layer.0": "cpu",
                                      "bert.encoder.layer.1": "disk", "bert.pooler": "cpu", "classifier": "cpu",
                                      "dropout": "cpu"}, main_device="cpu", offload_dir=str(tmp_path / "offload"))
    offloaded = dataclasses.replace(plain, model=model, sites=find_sites(model))   # derive() would hash meta weights
    assert offloaded.sites[1].out.weight.is_meta                     # the offloaded layer's weights wait elsewhere
    task = _task()
    mask = HeadMask.from_removed(plain.layout, [("encoder_self", 0, 1), ("encoder_self", 1, 3)])
    a = task.evaluate(plain, task.encode(plain, "validation"), mask, batch_size=4)
    b = task.evaluate(offloaded, task.encode(offloaded, "validation"), mask, batch_size=4)
    assert (a.metric, a.per_example) == (b.metric, b.per_example) and a.loss == pytest.approx(b.loss, abs=1e-6)
    data = task.encode(plain, "validation")
    one, spread = (per_token_importance(m, task, data, batch_size=4) for m in (plain, offloaded))
    # the same float32 operations on the same device, the weights reloaded bit for bit: equal up to
    # rounding of the summation order (none expected; 1e-6 relative allows a reordered reduction)
    for ra, rb in zip(one.kinds["encoder_self"], spread.kinds["encoder_self"]):
        assert ra == pytest.approx(rb, rel=1e-6, abs=1e-12)


def test_gates_go_to_the_layer_device():
    gate = torch.ones(4)
    on_meta = torch.nn.Linear(4, 4, device="meta")
    assert _on_device_of(gate, on_meta) is gate                        # offloaded: the hook follows the input
    assert _on_device_of(gate, torch.nn.Linear(4, 4)) is gate          # same device: no copy
    assert _on_device_of(gate, torch.nn.Identity()) is gate            # no weights (a removed attention)


def test_a_pruned_folder_refuses_a_device_map(folder, tmp_path):
    from pruning_core.modeling.sources.loading import save_pruned
    plain = load_model(str(folder))
    mask = HeadMask.from_removed(plain.layout, [("encoder_self", 0, 1)])
    save_pruned(prune_heads(plain.model, mask), plain.tokenizer, tmp_path / "pruned")
    with pytest.raises(ModelLoadError, match="--device-map"):
        load_model(str(tmp_path / "pruned"), device_map="auto")


def test_cli_device_map_option(folder, tmp_path, monkeypatch, capsys):
    from pruning_core.cli.main import main
    rows = ["text,label"] + [f"{r['text']},{r['label']}" for r in synthetic_sentiment(6, seed=1)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", str(folder), "--task", "file:d.csv", "--device-map", "cpu", "--out", "e.json"]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["n_examples"] == 6
    assert main(["evaluate", str(folder), "--task", "file:d.csv", "--device-map", "everywhere"]) == 2
    assert "--device-map must be one of" in capsys.readouterr().err
