"""The metric registry: the functions, the display helpers, and lower-is-better metrics on a tiny model."""
from __future__ import annotations

import math

import pytest

from fake_task import FakeTask
from pruning_core.core.errors import HeadpruneError
from pruning_core.evaluation.experiments import ablation_table, one_head_per_layer, pruning_curve
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.metrics import (
    ACCURACY,
    BLEU,
    METRICS,
    PERPLEXITY,
    WER,
    Metric,
    accuracy,
    binary_f1,
    get_metric,
    matthews_corrcoef,
    register_metric,
    word_error_rate,
)
from pruning_core.scoring import ScoreConfig, get_scorer
from tiny import tiny_loaded


def test_metric_functions():
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    # tp=2, fp=1, fn=1 -> f1 = 4 / 6
    assert binary_f1([1, 1, 1, 0, 0], [1, 1, 0, 1, 0]) == pytest.approx(2 / 3)
    assert binary_f1([0, 0], [0, 0]) == 0.0
    assert matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert matthews_corrcoef([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0
    # hand-computed binary case: tp=2 tn=1 fp=1 fn=1 -> (2*1-1*1)/sqrt(3*3*2*2) = 1/6
    assert matthews_corrcoef([1, 1, 1, 0, 0], [1, 1, 0, 1, 0]) == pytest.approx(1 / 6)


def test_text_and_loss_metrics():
    # one substitution + one deletion over 4 + 2 reference words
    assert word_error_rate(["the cat sat", "a dog"], ["the cat sat down", "the dog"]) == pytest.approx(2 / 6)
    assert WER.of(["a b"], ["a b"]) == 0.0
    assert BLEU.of(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100.0)
    assert PERPLEXITY.of([], [], loss_sum=2 * math.log(5), n_tokens=2) == pytest.approx(5.0)


@pytest.mark.parametrize("hypotheses, references, wer", [
    (["the cat sat", "a dog"], ["the cat sat down", "the dog"], 2 / 6),
    ([""], ["a b"], 1.0),                          # nothing heard: every reference word deleted
    (["a b"], [""], 2.0),                          # no reference word: the insertions over one
    (["x", "a"], ["", "a"], 1.0),
    ([" a\tb  c\n"], ["a b c"], 0.0),              # any run of whitespace separates words
    (["a b c d"], ["b c d a"], 0.5),               # one deletion + one insertion, not four substitutions
    ([], [], 0.0),
])
def test_wer_is_word_edits_over_reference_words(hypotheses, references, wer):
    """WER = word-level Levenshtein edits summed over the examples / max(1, reference words)."""
    assert word_error_rate(hypotheses, references) == pytest.approx(wer, abs=1e-12)


def test_registry_lookup():
    assert {"accuracy", "f1", "mcc", "bleu", "perplexity", "wer"} <= set(METRICS.names())
    assert get_metric("BLEU") is BLEU and get_metric("accuracy") is ACCURACY
    assert METRICS.entry("perplexity").meta["higher_is_better"] is False
    with pytest.raises(HeadpruneError, match="Did you mean 'accuracy'"):
        get_metric("acuracy")
    with pytest.raises(ValueError, match="already registered"):
        register_metric(Metric("bleu", "BLEU", True, lambda h, r: 0.0))


def test_display_helpers():
    assert ACCURACY.format(0.85) == "85.0 %" and ACCURACY.format(None) == "n/a"
    assert BLEU.format(27.314) == "27.31 BLEU" and BLEU.format_plain(27.314) == "27.31"
    assert ACCURACY.format_plain(0.85) == "0.8500"
    assert ACCURACY.delta(0.80, 0.85) == pytest.approx(-5.0) and ACCURACY.format_delta(0.80, 0.85) == "-5.0 points"
    assert BLEU.format_delta(20.0, 21.0) == "-1.0 BLEU"
    assert ACCURACY.axis_title == "accuracy (%)" and BLEU.axis_title == "BLEU"
    # direction: higher is better for accuracy, lower for perplexity
    assert ACCURACY.is_better(0.9, 0.8) and not ACCURACY.is_better(0.8, 0.9)
    assert PERPLEXITY.is_better(3.0, 4.0) and not PERPLEXITY.is_better(4.0, 3.0)
    assert ACCURACY.improved(+0.1) and not ACCURACY.improved(-0.1)
    assert PERPLEXITY.improved(-0.1) and not PERPLEXITY.improved(+0.1)
    assert sorted([0.9, 0.5, 0.7], key=ACCURACY.sort_key) == [0.5, 0.7, 0.9]        # worst first
    assert sorted([3.0, 9.0, 5.0], key=PERPLEXITY.sort_key) == [9.0, 5.0, 3.0]
    assert ACCURACY.worsening(0.8, 0.9) == pytest.approx(0.1) and PERPLEXITY.worsening(5.0, 4.0) == 1.0


# -- a lower-is-better metric through the experiments and the ablation scorer ---------------------

def test_ablation_importance_follows_a_lower_is_better_metric(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8, metric_name="perplexity")
    table = ablation_table(lm, task, task.data)
    assert table.metric_name == "perplexity" and any(r.delta_metric > 0 for r in table.rows)
    scores = get_scorer("ablation").score(lm, task, ScoreConfig())
    for r in table.rows:
        # a head whose removal raises perplexity is important: positive score
        assert scores.scores.kinds[r.kind][r.layer][r.head] == pytest.approx(r.delta_metric + 1e-3 * r.delta_loss)
    least = min(table.rows, key=lambda r: r.delta_metric + 1e-3 * r.delta_loss)
    # the curve removes the least important head first: the smallest perplexity of any single removal
    total = lm.layout.total_heads
    curve = pruning_curve(lm, task, task.data, get_scorer("ablation"), ScoreConfig(), step=1 / total)
    assert curve.metric_name == "perplexity" and curve.points[0].metric == pytest.approx(table.base_metric)
    assert HeadMask.from_lists(curve.points[1].mask).removed() == [(least.kind, least.layer, least.head)]
    assert curve.points[1].metric == pytest.approx(min(r.metric for r in table.rows))


def test_one_head_per_layer_search_keeps_the_lowest_perplexity(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8, metric_name="perplexity")
    res = one_head_per_layer(lm, task, task.data)
    for row in res.rows:
        values = []
        for h in range(4):
            only = [[1] * 4, [1] * 4]
            only[row.layer] = [1 if g == h else 0 for g in range(4)]
            values.append(task.evaluate(lm, task.data, HeadMask.from_lists({"encoder_self": only})).metric)
        assert row.kept_head == min(range(4), key=lambda h: values[h]) and row.metric == min(values)


@pytest.mark.parametrize("name", ["bleu", "chrf", "wer"])
def test_summed_sentence_counts_give_the_corpus_score_of_any_resample(name):
    """BLEU, chrF and WER from summed per-example counts (what a bootstrap resamples) equal sacrebleu's and jiwer's
    scores of the texts, empty hypotheses and odd whitespace included."""
    import random

    import numpy as np

    metric = get_metric(name)
    rng = random.Random(0)
    words = "the cat sat on a mat dog ran far away under blue sky".split()
    refs = [" ".join(rng.choices(words, k=rng.randint(3, 12))) for _ in range(40)]
    hyps = [" ".join(rng.choices(words, k=rng.randint(1, 12))) if i % 7 else "" for i in range(40)]
    hyps[3] = "  the\tcat \n sat  "
    counts = metric.statistics(hyps, refs)
    assert counts.shape[0] == 40
    for _ in range(5):
        idx = np.array([rng.randrange(40) for _ in range(40)])
        assert metric.of_statistics(counts[idx].sum(0)) == metric.of([hyps[i] for i in idx], [refs[i] for i in idx])
