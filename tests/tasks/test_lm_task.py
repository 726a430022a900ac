"""The language_model task type: windows, perplexity = exp(mean token loss), intervals over windows,
masked = pruned, gradient scores, and ``file:x.txt`` end to end through the command line."""
from __future__ import annotations

import json
import math

import pytest
import torch

from pruning_core import tasks
from pruning_core.cli.main import main
from pruning_core.core.errors import DataError
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.metrics import PERPLEXITY
from pruning_core.modeling.pruning import prune_heads
from pruning_core.evaluation.results import EvalResult
from pruning_core.scoring.gradient import per_token_importance
from pruning_core.evaluation.significance import compare
from pruning_core.tasks import IGNORE, get_task
from pruning_core.tasks.language_model import windows
from task_files import DOCS
from tiny import make_bert_tokenizer, tiny_loaded, tiny_model

K = "decoder_self"
LM_ARCHS = ["llama", "gpt2"]


pytestmark = pytest.mark.usefixtures("fresh_task_cache")


def _mask(layout, removed: dict[int, list[int]]) -> HeadMask:
    return HeadMask({K: tuple(tuple(0 if h in removed.get(l, []) else 1 for h in range(n))
                              for l, n in enumerate(layout.kinds[K]))})


def test_windows_predict_each_token_at_most_once():
    ids = list(range(10))
    got = windows(ids, 4, 4)
    assert [w for w, _ in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    targets = [t for _, labels in got for t in labels if t != IGNORE]
    assert targets == [1, 2, 3, 5, 6, 7, 9]                 # the first token of each window is context only
    overlapping = windows(ids, 4, 2)
    targets = [t for _, labels in overlapping for t in labels if t != IGNORE]
    assert targets == list(range(1, 10))                    # with overlap every token after the first is predicted
    assert windows([7], 4, 4) == []


def test_txt_and_jsonl_files_are_language_model_tasks(tmp_path, txt_file):
    task = get_task(f"file:{txt_file}")
    assert task.task_type == "language_model" and task.metric_name == "perplexity"
    assert [e["text"] for e in task.load("test")] == DOCS          # blank lines skipped
    jl = tmp_path / "docs.jsonl"
    jl.write_text("\n".join(json.dumps({"text": d, "id": i}) for i, d in enumerate(DOCS[:3])))
    assert get_task(f"file:{jl}").task_type == "language_model"
    with pytest.raises(DataError, match="classification model"):
        get_task(f"file:{txt_file}").encode(tiny_loaded("bert", tmp_path), "test")


@pytest.mark.parametrize("arch", LM_ARCHS)
def test_perplexity_is_exp_mean_loss_and_matches_model_loss(arch, tmp_path, txt_file):
    lm = tiny_loaded(arch, tmp_path)
    task = get_task(f"file:{txt_file}")
    data = task.encode(lm, "test")
    res = task.evaluate(lm, data, batch_size=5)
    assert math.isfinite(res.metric) and res.metric == pytest.approx(math.exp(res.loss))
    assert res.extra["mean_token_loss"] == pytest.approx(res.loss)
    assert res.extra["context_length"] == 64 and res.extra["stride"] == 64      # capped by the model's positions
    assert res.extra["tokens"] == sum(len(f["input_ids"]) - 1 for f in data.features)
    assert res.n_examples == len(DOCS) and len(res.per_example) == len(DOCS)
    assert res.interval is not None and res.interval[0] <= res.metric <= res.interval[1]
    # one window by hand: model(labels=...) gives the mean next-token loss of the window
    ids = torch.tensor([data.features[0]["input_ids"]])
    with torch.no_grad():
        ref = lm.model(input_ids=ids, labels=ids).loss
    one = tasks.get_task(f"file:{txt_file}")
    one_doc = tmp_path / "one.txt"
    one_doc.write_text(DOCS[0] + "\n")
    single = get_task(f"file:{one_doc}")
    single_res = single.evaluate(lm, single.encode(lm, "test"))
    assert single_res.metric == pytest.approx(math.exp(float(ref)), rel=1e-5)
    loss, n = res.per_example[0]
    assert n == ids.shape[1] - 1 and loss / n == pytest.approx(float(ref), rel=1e-5)
    assert one.metric_name == "perplexity"
    # batching does not change the result
    assert task.evaluate(lm, data, batch_size=64).metric == pytest.approx(res.metric, rel=1e-5)


def test_short_context_makes_more_windows(tmp_path, txt_file):
    lm = tiny_loaded("llama", tmp_path)
    task = get_task(f"file:{txt_file}")
    data = task.encode(lm, "test", max_length=4)
    assert data.n_examples > len(DOCS) and max(len(f["input_ids"]) for f in data.features) <= 4
    res = task.evaluate(lm, data)
    assert res.extra["context_length"] == 4 and math.isfinite(res.metric)


@pytest.mark.parametrize("arch", LM_ARCHS)
def test_masked_equals_pruned_perplexity(arch, tmp_path, txt_file):
    lm = tiny_loaded(arch, tmp_path)
    task = get_task(f"file:{txt_file}")
    data = task.encode(lm, "test")
    mask = _mask(lm.layout, {0: [0, 1], 1: [3]})
    masked = task.evaluate(lm, data, mask)
    base = task.evaluate(lm, data)
    assert masked.metric != pytest.approx(base.metric)
    pruned = tiny_loaded(arch, tmp_path)
    pruned.model = prune_heads(pruned.model, mask)
    assert task.evaluate(pruned, data).metric == pytest.approx(masked.metric, rel=1e-5)
    cmp = compare(PERPLEXITY, base, masked, None)
    assert cmp is not None and cmp.delta == pytest.approx(masked.metric - base.metric)
    assert cmp.low <= cmp.delta <= cmp.high
    back = EvalResult.from_json(json.loads(json.dumps(masked.to_json())))
    assert compare(PERPLEXITY, base, back, None) is not None                  # pairs survive JSON as lists


@pytest.mark.parametrize("arch", LM_ARCHS)
def test_gradient_scores_for_language_model(arch, tmp_path, txt_file):
    lm = tiny_loaded(arch, tmp_path)
    task = get_task(f"file:{txt_file}")
    scores = per_token_importance(lm, task, task.encode(lm, "test"), batch_size=7)
    values = [v for row in scores.kinds[K] for v in row]
    assert len(values) == 8 and all(math.isfinite(v) and v > 0 for v in values)


def _trained_llama_folder(tmp_path):
    """A tiny llama fitted for a few steps on DOCS (so removing heads hurts), saved with a tokenizer."""
    folder = tmp_path / "llama"
    tok = make_bert_tokenizer(folder)
    model = tiny_model("llama")
    ids = [tok(d)["input_ids"] for d in DOCS]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    torch.manual_seed(0)
    for step in range(60):
        for row in ids[:6]:
            x = torch.tensor([row])
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.heavy
def test_cli_evaluate_and_curve_on_txt_file(tmp_path, txt_file, capsys):
    folder = _trained_llama_folder(tmp_path)
    out = tmp_path / "eval.json"
    assert main(["evaluate", str(folder), "--task", f"file:{txt_file}", "--device", "cpu", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["metric_name"] == "perplexity" and 1.0 < res["metric"] < 10.0           # it learned the text
    assert res["interval"] is not None and "perplexity" in capsys.readouterr().out
    curve_out = tmp_path / "curve.json"
    assert main(["curve", str(folder), "--task", f"file:{txt_file}", "--score-split", "test", "--step", "0.25",
                 "--device", "cpu", "--out", str(curve_out)]) == 0
    curve = json.loads(curve_out.read_text())
    ppl = [p["metric"] for p in curve["points"]]
    assert curve["metric_name"] == "perplexity" and ppl[0] == pytest.approx(res["metric"], rel=1e-4)
    assert ppl[-1] > ppl[0] * 1.5                                 # perplexity rises as heads go
    assert all(p["low"] is not None and p["low"] <= p["metric"] <= p["high"] for p in curve["points"])


def test_movie_text_is_registered_and_needs_prepare(headprune_home):
    task = get_task("movie-text")
    assert task.task_type == "language_model" and task.metric_name == "perplexity"
    assert task.splits == ("train", "validation", "test") and task.default_split == "validation"
    assert "movie-text" in tasks.task_names() and "labels ignored" in task.description
    from pruning_core.core.errors import CacheError
    with pytest.raises(CacheError, match="headprune prepare"):
        task.load("test")


# -- the unigram baseline (a perplexity needs a reference) ----------------------------

def test_unigram_perplexity_by_hand():
    from pruning_core.tasks.language_model import unigram_perplexity
    # counts {2: 2, 3: 1}, N = 3, V = 4: p(2) = 3/7, p(3) = 2/7; on [2, 3]: exp(-(ln 3/7 + ln 2/7) / 2) = sqrt(49/6)
    assert unigram_perplexity([2, 2, 3], [2, 3], 4) == pytest.approx(math.sqrt(49 / 6), rel=1e-12)
    # an unseen token gets count 1: p(0) = 1/7
    assert unigram_perplexity([2, 2, 3], [0], 4) == pytest.approx(7.0, rel=1e-12)
    with pytest.raises(ValueError, match="vocab_size"):
        unigram_perplexity([2, 9], [2], 4)


def test_unigram_baseline_counts_the_train_split_on_the_evaluated_targets(tmp_path, txt_file):
    from collections import Counter

    from pruning_core.tasks.language_model import LanguageModelTask, text_loader
    from pruning_core.tasks.language_model import unigram_baseline

    lm = tiny_loaded("llama", tmp_path)
    splits = {"train": DOCS[:6], "test": ["the movie was great", "a dull plot"]}
    task = LanguageModelTask("two-splits", text_loader(splits.__getitem__), splits=("train", "test"),
                             default_split="test")
    data = task.encode(lm, "test")
    base = unigram_baseline(lm, task, data)
    assert base.own_split and base.train_split == "train"
    assert base.eval_tokens == task.evaluate(lm, data).extra["tokens"]       # the model's perplexity's tokens
    # by hand: every document is shorter than the context, so each token after the first is a target
    ids = lambda docs: [t for d in docs for t in lm.tokenizer(d)["input_ids"][1:]]  # noqa: E731
    counts, scored = Counter(ids(splits["train"])), ids(splits["test"])
    n, v = sum(counts.values()), base.vocab_size
    expected = math.exp(sum(math.log((n + v) / (counts[t] + 1)) for t in scored) / len(scored))
    assert base.train_tokens == n and base.perplexity == pytest.approx(expected, rel=1e-12)
    # a data file has one text for every split: the baseline is counted on it, and says so
    file_task = get_task(f"file:{txt_file}")
    assert not unigram_baseline(lm, file_task, file_task.encode(lm, "test")).own_split
