"""Tasks on tiny random models: registry, encoding and buckets, loss_sum, evaluation under masks."""
from __future__ import annotations

import math
import random

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from pruning_core import tasks
from pruning_core.core.errors import CacheError, DataError, HeadpruneError
from pruning_core.core.progress import ProgressEvent
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.tasks import get_task
from task_files import loaded_for, sentence
from tiers import heavy_beyond


@pytest.fixture
def pair_file(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "pair.tsv"
    path.write_text("text_a\ttext_b\tlabel\n" + "".join(
        f"{sentence(rng)}\t{sentence(rng)}\t{rng.randint(0, 1)}\n" for _ in range(11)))
    return path


pytestmark = pytest.mark.usefixtures("fresh_task_cache")


# -- registry --------------------------------------------------------------------------------------

def test_registry_names_and_did_you_mean():
    assert {"movie-sentiment", "sst2", "mnli", "qnli", "qqp", "mrpc", "cola", "rte", "wmt14-fr-en",
            "wmt16-de-en", "wmt16-ro-en"} <= set(tasks.task_names())
    with pytest.raises(DataError, match="Did you mean 'movie-sentiment'"):
        get_task("movie-sentimnet")
    with pytest.raises(DataError, match="Did you mean 'sst2'"):
        get_task("sst-2")
    with pytest.raises(DataError, match="Did you mean 'wmt14-fr-en'"):
        get_task("wmt14-fr-eng")
    with pytest.raises(DataError, match="file:my_data.csv"):
        get_task("my_data.csv")


def test_registered_tasks_metadata():
    assert get_task("mrpc").metric_name == "f1" and get_task("qqp").metric_name == "f1"
    assert get_task("cola").metric_name == "mcc" and get_task("sst2").metric_name == "accuracy"
    assert get_task("mnli").num_labels == 3 and get_task("mnli").task_type == "classification"
    mt = get_task("wmt16-ro-en")
    assert mt.task_type == "translation" and mt.metric_name == "bleu" and mt.default_split == "test"
    with pytest.raises(DataError, match="regression"):
        get_task("stsb")
    assert "stsb" not in tasks.task_names()                  # not offered, but explained when asked for
    ms = get_task("movie-sentiment")
    assert ms.splits == ("train", "validation", "test") and ms.label_names == ["negative", "positive"]


def test_movie_sentiment_unprepared_says_run_prepare(headprune_home, tmp_path):
    task = get_task("movie-sentiment")
    with pytest.raises(CacheError, match="headprune prepare"):
        task.load("test")
    with pytest.raises(CacheError, match="headprune prepare"):
        task.encode(loaded_for("bert", tmp_path), "validation")


def test_file_task_errors_surface_at_get_task(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nok,1\nbroken\n")
    with pytest.raises(DataError, match="line 3"):
        get_task(f"file:{bad}")
    with pytest.raises(DataError, match="does not exist"):
        get_task(f"file:{tmp_path / 'none.csv'}")


def test_task_type_and_label_mismatch(tmp_path, cls_file, mt_file):
    bert = loaded_for("bert", tmp_path)
    with pytest.raises(DataError, match="translation task but model"):
        get_task(f"file:{mt_file}").encode(bert, "test")
    three = tmp_path / "three.csv"
    three.write_text("text,label\nthe movie,0\na film,2\n")
    with pytest.raises(DataError, match="only 2 classes"):
        get_task(f"file:{three}").encode(bert, "test")
    with pytest.raises(DataError, match="no split 'dev'"):
        get_task(f"file:{cls_file}").encode(bert, "dev")


# -- encoding and buckets --------------------------------------------------------------------------

@pytest.mark.parametrize("fixture, arch", [("cls_file", "bert"), ("pair_file", "bert"), ("mt_file", "marian")])
def test_batches_cover_every_example_once(request, tmp_path, fixture, arch):
    path = request.getfixturevalue(fixture)
    loaded = loaded_for(arch, tmp_path)
    data = get_task(f"file:{path}").encode(loaded, "test")
    for bs in (1, 4, 5, 64):
        batches = list(data.batches(bs))
        assert len(batches) == math.ceil(data.n_examples / bs)
        seen = torch.cat([b.index for b in batches]).tolist()
        assert sorted(seen) == list(range(data.n_examples))
        for b in batches:
            assert b.n_examples == len(b.index) == b.inputs["input_ids"].shape[0]
            assert "labels" not in b.inputs
            assert torch.equal(b.token_masks["encoder_self"], b.inputs["attention_mask"])
            # every row has its own length of real tokens, padding only at the end
            for row, i in zip(b.inputs["attention_mask"], b.index.tolist()):
                assert int(row.sum()) == len(data.features[i]["input_ids"])


def test_buckets_need_less_padding_than_file_order(tmp_path, cls_file):
    data = get_task(f"file:{cls_file}").encode(loaded_for("bert", tmp_path), "test")
    assert data.padding_fraction(8) < data.padding_fraction(8, sort_by_length=False)
    lens = [int(b.inputs["attention_mask"].sum(1).max()) for b in data.batches(8)]
    assert lens == sorted(lens)                              # shortest batches first


def test_encode_is_cached_and_keyed(tmp_path, cls_file):
    loaded = loaded_for("bert", tmp_path)
    task = get_task(f"file:{cls_file}")
    a = task.encode(loaded, "test")
    assert task.encode(loaded, "test") is a
    assert get_task(f"file:{cls_file}").encode(loaded, "test") is a
    assert task.encode(loaded, "test", limit=5) is not a and task.encode(loaded, "test", limit=5).n_examples == 5
    assert task.encode(loaded, "test", max_length=6) is not a
    assert a.fingerprint and a.fingerprint != task.encode(loaded, "test", limit=5).fingerprint
    assert a.texts[0] == task.load("test")[0] and a.references is None
    import os
    import time
    cls_file.write_text('{"text": "the movie", "label": "pos"}\n{"text": "a plot", "label": "neg"}\n')
    os.utime(cls_file, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    b = get_task(f"file:{cls_file}").encode(loaded, "test")
    assert b is not a and b.n_examples == 2


def test_truncation_to_max_length(tmp_path, cls_file):
    data = get_task(f"file:{cls_file}").encode(loaded_for("bert", tmp_path), "test", max_length=5)
    assert max(len(f["input_ids"]) for f in data.features) == 5


def test_pairs_get_token_types_but_distilbert_does_not(tmp_path, pair_file):
    bert = get_task(f"file:{pair_file}").encode(loaded_for("bert", tmp_path), "test")
    batch = next(bert.batches(4))
    assert "token_type_ids" in batch.inputs and int(batch.inputs["token_type_ids"].max()) == 1
    distil = get_task(f"file:{pair_file}").encode(loaded_for("distilbert", tmp_path), "test")
    assert "token_type_ids" not in next(distil.batches(4)).inputs


def test_translation_batch_layout(tmp_path, mt_file):
    loaded = loaded_for("bart", tmp_path)
    data = get_task(f"file:{mt_file}").encode(loaded, "test")
    assert data.references == [t["target"] for t in data.texts]
    b = next(data.batches(4))
    dec, labels = b.inputs["decoder_input_ids"], b.labels
    assert dec.shape == labels.shape
    assert (dec[:, 0] == loaded.model.config.decoder_start_token_id).all()
    real = labels != -100
    assert torch.equal(dec[:, 1:][real[:, :-1]], labels[:, :-1][real[:, :-1]])    # shifted right
    assert torch.equal(b.token_masks["decoder_self"], real.long()) and torch.equal(b.token_masks["cross"], real.long())


# -- loss_sum --------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, fixture", [("bert", "cls_file"), ("roberta", "pair_file"), ("marian", "mt_file"),
                                           ("bart", "mt_file")])
def test_loss_sum_is_sum_of_per_example_losses(request, tmp_path, arch, fixture):
    loaded = loaded_for(arch, tmp_path)
    task = get_task(f"file:{request.getfixturevalue(fixture)}")
    data = task.encode(loaded, "test")
    with torch.no_grad():
        batched = sum(float(task.loss_sum(loaded, b, loaded.model(**b.inputs))) for b in data.batches(8))
        single = 0.0
        for b in data.batches(1):
            out = loaded.model(**b.inputs)
            if task.task_type == "classification":
                single += float(F.cross_entropy(out.logits, b.labels))            # one example: its CE
            else:
                keep = b.labels[0] != -100
                single += float(F.cross_entropy(out.logits[0][keep], b.labels[0][keep], reduction="sum"))
    assert batched == pytest.approx(single, rel=1e-4)


# -- evaluation ------------------------------------------------------------------------------------

def test_classification_evaluate(tmp_path, cls_file):
    loaded = loaded_for("bert", tmp_path)
    task = get_task(f"file:{cls_file}")
    data = task.encode(loaded, "test")
    events = []
    res = task.evaluate(loaded, data, batch_size=8, progress=events.append)
    assert res.metric_name == "accuracy" and 0 <= res.metric <= 1 and res.n_examples == 37
    assert set(res.extra) >= {"accuracy", "f1", "mcc"} and res.extra["accuracy"] == res.metric
    with torch.no_grad():
        total = sum(float(task.loss_sum(loaded, b, loaded.model(**b.inputs))) for b in data.batches(64))
    assert res.loss == pytest.approx(total / 37, rel=1e-5)
    assert [e.done for e in events] == [1, 2, 3, 4, 5] and events[-1].total == 5
    assert res.seconds > 0


def test_masked_evaluation(tmp_path, cls_file):
    loaded = loaded_for("bert", tmp_path)
    task = get_task(f"file:{cls_file}")
    data = task.encode(loaded, "test")
    plain = task.evaluate(loaded, data, batch_size=16)
    full = task.evaluate(loaded, data, HeadMask.full(loaded.layout), batch_size=16)
    assert (full.metric, full.loss) == (plain.metric, plain.loss)
    removed = HeadMask.from_removed(loaded.layout, [h for h in loaded.layout.heads() if h[2] != 0])
    masked = task.evaluate(loaded, data, removed, batch_size=16)
    assert masked.loss != pytest.approx(plain.loss, abs=1e-6)
    assert installed_hook_count(loaded.model) == 0                                # hooks gone afterwards
    assert task.evaluate(loaded, data, batch_size=16).loss == plain.loss          # and the model unchanged


@pytest.mark.parametrize("arch", heavy_beyond(["marian", "bart"], fast=["marian"]))
def test_translation_evaluate_with_bleu_and_mask(tmp_path, mt_file, arch):
    loaded = loaded_for(arch, tmp_path)
    task = get_task(f"file:{mt_file}")
    data = task.encode(loaded, "test", max_length=10)
    plain = task.evaluate(loaded, data, batch_size=8)
    assert plain.metric_name == "bleu" and plain.metric == plain.extra["bleu"]
    references = [row["target"] for row in task.load("test")]                    # BLEU of the shown outputs
    assert plain.metric == sacrebleu.corpus_bleu(list(plain.predictions), [references]).score
    n_tokens = sum(int((b.labels != -100).sum()) for b in data.batches(8))
    assert plain.extra["target_tokens"] == n_tokens and plain.n_examples == 13
    assert len(plain.extra["samples"]) == 3 and "hypothesis" in plain.extra["samples"][0]
    full = task.evaluate(loaded, data, HeadMask.full(loaded.layout), batch_size=8)
    assert (full.metric, full.loss) == (plain.metric, plain.loss)
    cross_off = HeadMask.from_removed(loaded.layout, [h for h in loaded.layout.heads() if h[0] == "cross"])
    masked = task.evaluate(loaded, data, cross_off, batch_size=16, beams=2)
    assert masked.loss != pytest.approx(plain.loss, abs=1e-6) and masked.extra["beams"] == 2
    assert installed_hook_count(loaded.model) == 0


@pytest.mark.parametrize("arch", heavy_beyond(["marian", "marian-ssru", "bart"], fast=["marian-ssru"]))
def test_translation_loss_reads_the_target_positions_alone(tmp_path, mt_file, arch):
    """The evaluation's loss reads the target positions alone: in chunks of the output layer (hidden_at,
    target_losses), or as packed [N, V] logits (only_at); each example's loss is the one the whole [B, T, V]
    logits give, and the hooks are gone afterwards, even after an error."""
    from pruning_core.modeling.inference import packed_logits
    from pruning_core.tasks.batching import label_losses, packed_label_losses

    loaded = loaded_for(arch, tmp_path)
    task = get_task(f"file:{mt_file}")
    data = task.encode(loaded, "test")
    res = task.evaluate(loaded, data, batch_size=8)
    whole, packed_rows, chunked = ([0.0] * data.n_examples for _ in range(3))
    layer = packed_logits.output_layer(loaded.model)
    assert layer is not None
    with torch.no_grad():
        for b in data.batches(8):
            keep = b.labels != -100
            with packed_logits.only_at(loaded.model, keep):
                packed = loaded.model(**b.inputs).logits
            assert packed.shape == (int(keep.sum()), loaded.model.config.vocab_size)
            with packed_logits.hidden_at(loaded.model, keep) as kept:
                assert loaded.model(**b.inputs).logits.shape[1] == 0            # the head scored no position
            rows = packed_logits.target_losses(*layer, kept.hidden, b.labels[keep], chunk=3)   # chunks of 3 positions
            for j, w, p, c in zip(b.index.tolist(), label_losses(loaded.model(**b.inputs).logits, b.labels).tolist(),
                                  packed_label_losses(packed, b.labels).tolist(),
                                  task.forward_losses(loaded, b, lambda: loaded.model(**b.inputs))[1].tolist()):
                whole[j], packed_rows[j], chunked[j] = w, p, c
            assert packed_logits.target_losses(*layer, kept.hidden, b.labels[keep]).tolist() == pytest.approx(
                rows.tolist(), rel=1e-5)
    for found in (res.example_losses, packed_rows, chunked):
        assert found == pytest.approx(whole, rel=1e-5)       # float32 sums in another order
    head = loaded.model.get_output_embeddings()
    assert not head._forward_pre_hooks
    for scope in (packed_logits.only_at, packed_logits.hidden_at):
        with pytest.raises(RuntimeError), scope(loaded.model, keep):
            raise RuntimeError("mid-batch")
        assert not head._forward_pre_hooks
    with packed_logits.only_at(torch.nn.Linear(2, 2), keep) as packing:
        assert packing is False                                          # no output embeddings: logits whole
    with packed_logits.hidden_at(torch.nn.Linear(2, 2), keep) as kept:
        assert kept is None


def test_packed_output_layer_acts_for_its_own_thread_only(tmp_path, mt_file):
    """A shared model evaluated by two sessions at once: while one thread packs the output layer's positions
    (only_at, hidden_at), another thread's pass of the same shape gets its whole [B, T, V] logits, and the value it
    would get alone; the shared hook leaves with the last thread."""
    import threading

    from pruning_core.modeling.inference import packed_logits

    loaded = loaded_for("marian-ssru", tmp_path)
    data = get_task(f"file:{mt_file}").encode(loaded, "test")
    b = next(iter(data.batches(8)))
    keep = b.labels != -100
    head = loaded.model.get_output_embeddings()
    with torch.no_grad():
        alone = loaded.model(**b.inputs).logits
        for scope in (packed_logits.only_at, packed_logits.hidden_at):
            seen = []
            with scope(loaded.model, keep):
                other = threading.Thread(target=lambda: seen.append(loaded.model(**b.inputs).logits))
                other.start()
                other.join()
                assert loaded.model(**b.inputs).logits.shape[:2] != alone.shape[:2]     # this thread's is packed
            assert seen[0].shape == alone.shape and torch.allclose(seen[0], alone, rtol=1e-5, atol=1e-6)
            assert not head._forward_pre_hooks


def test_generation_runs_under_the_mask(tmp_path, mt_file, monkeypatch):
    """The mask acts inside decoding: with every cross head off, the cross out-projections see zeros."""
    from pruning_core.tasks import base

    loaded = loaded_for("marian", tmp_path)
    task = get_task(f"file:{mt_file}")
    data = task.encode(loaded, "test", max_length=12)
    state = {"generating": False, "seen": []}
    real_generate = base.greedy_decode

    def spy(*args, **kwargs):
        state["generating"] = True
        try:
            return real_generate(*args, **kwargs)
        finally:
            state["generating"] = False

    def watch(module, args, output):          # forward hooks see the inputs after the gate pre-hook
        if state["generating"]:
            state["seen"].append(bool((args[0] == 0).all()))

    monkeypatch.setattr(base, "greedy_decode", spy)
    cross = [s for s in loaded.sites if s.kind == "cross"]
    handles = [s.out.register_forward_hook(watch) for s in cross]
    try:
        cross_off = HeadMask.from_removed(loaded.layout, [h for h in loaded.layout.heads() if h[0] == "cross"])
        task.evaluate(loaded, data, cross_off, batch_size=64)
        assert state["seen"] and all(state["seen"])
        state["seen"].clear()
        task.evaluate(loaded, data, batch_size=64)
        assert state["seen"] and not any(state["seen"])
    finally:
        for h in handles:
            h.remove()


def test_f1_and_mcc_metric_names_are_reported(tmp_path, cls_file, monkeypatch):
    loaded = loaded_for("bert", tmp_path)
    rows = [{"text": t["text"], "label": t["label"]} for t in get_task(f"file:{cls_file}").load("test")]
    task = tasks.ClassificationTask("fake-mrpc", lambda split, limit: rows, splits=("validation",),
                                    default_split="validation", metric_name="f1", label_names=["a", "b"])
    data = task.encode(loaded, "validation")
    res = task.evaluate(loaded, data)
    assert res.metric_name == "f1" and res.metric == res.extra["f1"]


def test_a_task_with_a_lower_is_better_metric(tmp_path, cls_file):
    """The one evaluation loop serves any registered metric: perplexity comes from the summed loss."""
    loaded = loaded_for("bert", tmp_path)
    rows = get_task(f"file:{cls_file}").load("test")
    task = tasks.ClassificationTask("ppl", lambda split, limit: rows, splits=("test",), default_split="test",
                                    metric_name="perplexity")
    res = task.evaluate(loaded, task.encode(loaded, "test"), batch_size=8)
    assert res.metric_name == "perplexity" and res.metric == pytest.approx(math.exp(res.loss))
    assert 0 <= res.extra["accuracy"] <= 1 and not task.metric.higher_is_better
    with pytest.raises(HeadpruneError, match="Unknown metric 'acc'"):
        tasks.ClassificationTask("bad", lambda split, limit: rows, splits=("test",), default_split="test",
                                 metric_name="acc")


def test_task_types_and_names_are_registries():
    assert tasks.TASK_TYPES.get("translation") is tasks.TranslationTask
    assert tasks.TASK_TYPES.get("classification").default_metric == "accuracy"
    assert tasks.task_names()[0] == "movie-sentiment"
    with pytest.raises(ValueError, match="already registered"):
        tasks.register_task("sst2", "again", lambda: None)
    with pytest.raises(DataError, match="Unknown task type 'regression'"):
        tasks.TASK_TYPES.get("regression")


def test_translation_reports_its_metric_before_the_losses_output_layer(tmp_path, mt_file, monkeypatch):
    """metric_first: every batch's forward pass, then the decoding, then the metric goes out as progress's partial,
    and only then does the output layer score the references (``target_losses``). The partial is the result but for
    the loss; the figures equal those of each batch's loss and decoding in turn (the same sums in the same order)."""
    from pruning_core.modeling.inference import packed_logits
    from pruning_core.tasks.translation import TranslationTask

    loaded = loaded_for("marian-ssru", tmp_path)
    task = get_task(f"file:{mt_file}")
    data = task.encode(loaded, "test")
    seen: list = []
    decode, project = TranslationTask.predict_batch, packed_logits.target_losses
    monkeypatch.setattr(TranslationTask, "predict_batch",
                        lambda self, *a: (seen.append("decode"), decode(self, *a))[1])
    monkeypatch.setattr(packed_logits, "target_losses", lambda *a, **k: (seen.append("project"), project(*a, **k))[1])
    res = task.evaluate(loaded, data, batch_size=4, progress=lambda e: seen.append(e))
    partials = [i for i, e in enumerate(seen) if isinstance(e, ProgressEvent) and e.partial is not None]
    assert len(partials) == 1 and seen.count("decode") >= 2 and seen.count("project") == seen.count("decode")
    assert max(i for i, e in enumerate(seen) if e == "decode") < partials[0] < seen.index("project")
    early = seen[partials[0]].partial
    assert early.loss != early.loss and res.loss == res.loss                     # NaN before, known after
    assert (early.metric, early.predictions, early.interval) == (res.metric, res.predictions, res.interval)
    steps = [e for e in seen if isinstance(e, ProgressEvent) and e.stage == "evaluate"]
    assert [e.done for e in steps] == sorted(e.done for e in steps) and steps[-1].done == steps[-1].total
    monkeypatch.setattr(TranslationTask, "metric_first", False)
    in_turn = task.evaluate(loaded, data, batch_size=4)
    assert (in_turn.metric, in_turn.loss, in_turn.example_losses, in_turn.example_weights, in_turn.predictions) == \
        (res.metric, res.loss, res.example_losses, res.example_weights, res.predictions)


def test_greedy_decoding_reports_each_token_and_decodes_the_same(tmp_path, mt_file):
    """A long decode's bar moves: stage ``decode`` counts the tokens of each batch against the most a row may have
    (rising by one, never past it), between the batch's loss and its end; the tokens are those decoded without a
    callback, with drafts too."""
    from pruning_core.modeling.inference.drafts import DraftStore

    loaded = loaded_for("marian-ssru", tmp_path)
    task = get_task(f"file:{mt_file}")
    data = task.encode(loaded, "test")
    plain = task.evaluate(loaded, data, batch_size=4)
    seen: list = []
    res = task.evaluate(loaded, data, batch_size=4, progress=seen.append)
    assert res.predictions == plain.predictions and res.metric == plain.metric
    decode = [e for e in seen if e.stage == "decode"]
    assert decode and all(1 <= e.done <= e.total for e in decode)
    runs = [[e.done for e in decode if e.message == m] for m in dict.fromkeys(e.message for e in decode)]
    assert len(runs) == -(-data.n_examples // 4) and all(r == list(range(1, len(r) + 1)) for r in runs), runs
    first = next(i for i, e in enumerate(seen) if e.stage == "decode")
    store, again = DraftStore(), []
    task.evaluate(loaded, data, batch_size=4, drafts=store)
    drafted = task.evaluate(loaded, data, batch_size=4, drafts=store, progress=again.append)
    assert drafted.predictions == plain.predictions
    assert all(1 <= e.done <= e.total for e in again if e.stage == "decode")
