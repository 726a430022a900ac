"""MPNet on a tiny random model: the shared relative-position bias after physical pruning, reload,
hooks, and the prepare step's unpacking checks (offline; the real model is in test_mpnet_slow.py)."""
import zipfile

import pytest
import torch

from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.modeling.architectures.mpnet import HeadSlicedMPNetAttention
from pruning_core.core.errors import DataError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import prune_heads
from tiny import logits_of, tiny_inputs, tiny_loaded

# layer 0 keeps heads 1 and 3 (not a prefix: a bias slice [:2] would be wrong), layer 1 keeps head 2
REMOVED = [(0, 0), (0, 2), (1, 0), (1, 1), (1, 3)]


@pytest.fixture()
def lm(tmp_path):
    """A tiny MPNet whose position bias is large (N(0, 2)), so a wrongly sliced bias changes the logits."""
    loaded = tiny_loaded("mpnet", tmp_path)
    with torch.no_grad():
        loaded.model.base_model.encoder.relative_attention_bias.weight.normal_(0.0, 2.0)
    return loaded


def _mask(layout, removed=REMOVED) -> HeadMask:
    return HeadMask.from_removed(layout, [("encoder_self", layer, h) for layer, h in removed])


def test_pruned_equals_masked_with_the_bias_sliced_per_layer(lm):
    x = tiny_inputs("mpnet")
    mask = _mask(lm.layout)
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    pruned = prune_heads(lm.model, mask)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    error = (logits_of(pruned, x) - masked).abs().max()
    attns = [layer.attention.attn for layer in pruned.base_model.encoder.layer]
    assert all(isinstance(a, HeadSlicedMPNetAttention) for a in attns)
    assert [a.kept_heads.tolist() for a in attns] == [[1, 3], [2]]
    assert layout_of(find_sites(pruned)).kinds == {"encoder_self": (2, 1)}
    # the test can fail: the first heads' bias instead of the kept heads' is off by far more than rounding
    attns[0].kept_heads = torch.tensor([0, 1])
    assert (logits_of(pruned, x) - masked).abs().max() > 20 * max(float(error), 1e-7)


def test_pruned_keeps_the_state_dict_keys_and_the_shared_bias(lm):
    pruned = prune_heads(lm.model, _mask(lm.layout))
    assert set(pruned.state_dict()) == set(lm.model.state_dict())         # kept_heads is not saved
    bias = pruned.base_model.encoder.relative_attention_bias.weight
    assert bias.shape == (32, 4) and torch.equal(bias, lm.model.base_model.encoder.relative_attention_bias.weight)


def test_a_layer_losing_every_head(lm):
    x = tiny_inputs("mpnet")
    mask = _mask(lm.layout, [(0, h) for h in range(4)] + [(1, 3)])
    with apply_mask(lm, mask):
        masked = logits_of(lm.model, x)
    pruned = prune_heads(lm.model, mask)
    assert torch.allclose(logits_of(pruned, x), masked, atol=1e-5)
    assert layout_of(find_sites(pruned)).kinds == {"encoder_self": (0, 3)}
    assert pruned.base_model.encoder.layer[1].attention.attn.kept_heads.tolist() == [0, 1, 2]


def test_save_and_reload_rebuilds_the_bias_slices(lm, tmp_path):
    x = tiny_inputs("mpnet")
    mask = _mask(lm.layout)
    pruned = prune_heads(lm.model, mask)
    folder = save_pruned(pruned, lm.tokenizer, tmp_path / "pruned")
    again = load_model(str(folder))
    assert again.arch == "mpnet" and again.layout.kinds == {"encoder_self": (2, 1)}
    assert [layer.attention.attn.kept_heads.tolist() for layer in again.model.base_model.encoder.layer] == [[1, 3], [2]]
    assert torch.allclose(logits_of(again.model, x), logits_of(pruned, x), atol=1e-6)


def test_pruning_a_site_twice_composes_the_kept_heads(lm):
    """prune_site on an already sliced attention keeps original head ids (kept_heads[keep])."""
    import copy

    model = copy.deepcopy(lm.model)
    adapter = adapter_for(model)
    adapter.prune_site(adapter.sites(model)[0], [0, 2, 3])
    adapter.prune_site(adapter.sites(model)[0], [1, 2])
    assert model.base_model.encoder.layer[0].attention.attn.kept_heads.tolist() == [2, 3]
    x = tiny_inputs("mpnet")
    with apply_mask(lm, _mask(lm.layout, [(0, 0), (0, 1)])):
        masked = logits_of(lm.model, x)
    assert torch.allclose(logits_of(model, x), masked, atol=1e-5)


def test_no_hook_left_after_masking_scoring_and_an_error(lm):
    from fake_task import FakeTask
    from pruning_core.scoring import ScoreConfig, get_scorer

    x = tiny_inputs("mpnet")
    with apply_mask(lm, _mask(lm.layout)):
        logits_of(lm.model, x)
    assert installed_hook_count(lm.model) == 0
    with pytest.raises(RuntimeError, match="boom"):
        with apply_mask(lm, _mask(lm.layout)):
            assert installed_hook_count(lm.model) == 2          # one gate hook per layer, while inside
            raise RuntimeError("boom")
    assert installed_hook_count(lm.model) == 0
    scores = get_scorer("gradient").score(lm, FakeTask(), ScoreConfig())
    assert len(scores.scores.kinds["encoder_self"]) == 2 and installed_hook_count(lm.model) == 0
    assert installed_hook_count(prune_heads(lm.model, _mask(lm.layout))) == 0


def test_attention_maps_of_the_pruned_model_have_the_kept_heads(lm):
    x = tiny_inputs("mpnet")
    pruned = lm.derive(prune_heads(lm.model, _mask(lm.layout)))
    with torch.no_grad():
        maps = adapter_for(pruned).attention_maps(pruned.model(**x, output_attentions=True))
    assert [m.shape[1] for m in maps["encoder_self"]] == [2, 1]


# -- prepare: unpacking the zip --------------------------------------------------------------------

def _fake_zip(path, card="---\nlicense: apache-2.0\n---\n", weights=b"weights"):
    from pruning_core.zoo import mpnet
    with zipfile.ZipFile(path, "w") as z:
        for name in mpnet.MEMBERS:
            data = {"README.md": card.encode(), mpnet.WEIGHTS: weights}.get(name, b"{}")
            z.writestr(mpnet.ZIP_FOLDER + name, data)
    return path


def test_unpack_checks_the_weights_hash_and_the_license(tmp_path, monkeypatch):
    from pruning_core.core.io import storage
    from pruning_core.zoo import mpnet

    with pytest.raises(DataError, match="SHA-256"):
        mpnet._unpack(_fake_zip(tmp_path / "a.zip"), tmp_path / "a")
    monkeypatch.setattr(mpnet, "WEIGHTS_SHA256", storage.sha256_bytes(b"weights"))
    mpnet._unpack(_fake_zip(tmp_path / "b.zip"), tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(mpnet.MEMBERS)
    with pytest.raises(DataError, match="apache-2.0"):
        mpnet._unpack(_fake_zip(tmp_path / "c.zip", card="---\nlicense: other\n---\n"), tmp_path / "c")
    broken = tmp_path / "d.zip"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr(mpnet.ZIP_FOLDER + "config.json", b"{}")
    with pytest.raises(DataError, match="lacks an expected file"):
        mpnet._unpack(broken, tmp_path / "d")


def test_mpnet_is_a_registered_prepared_model(monkeypatch, tmp_path):
    from pruning_core.modeling.sources import catalog
    from pruning_core.core.errors import CacheError

    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path))
    entry = catalog.get("mpnet")
    assert entry.command() == "headprune prepare --model mpnet" and entry.task == "movie-sentiment"
    with pytest.raises(CacheError, match="headprune prepare --model mpnet"):
        load_model("mpnet")


def test_loading_with_sdpa_falls_back_to_eager(lm, tmp_path):
    """transformers' MPNet has no sdpa; load_model(attn_implementation='sdpa') (the bench) gets eager, recorded."""
    folder = tmp_path / "full"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    loaded = load_model(str(folder), attn_implementation="sdpa")
    assert loaded.config._attn_implementation == "eager"
    assert adapter_for("bert").attn_implementations == ("eager", "sdpa")
