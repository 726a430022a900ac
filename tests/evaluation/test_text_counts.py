"""BLEU and chrF from remembered per-example counts equal sacrebleu's corpus scores exactly, whatever was remembered."""
from __future__ import annotations

import threading

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from pruning_core.evaluation import metrics, text_counts

WORDS = ["the", "a", "cat", "sat", "on", "mat", ".", ",", "Deus", "disse", "luz", "haja", "é", "'s", "don't", "42"]
SENTENCE = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)
CORPUS = st.integers(1, 8).flatmap(lambda n: st.tuples(st.lists(SENTENCE, min_size=n, max_size=n),
                                                       st.lists(SENTENCE, min_size=n, max_size=n)))


def _sacrebleu(name, hyps, refs) -> float:
    fn = sacrebleu.corpus_bleu if name == "bleu" else sacrebleu.corpus_chrf
    return float(fn(list(hyps), [list(refs)]).score)


@pytest.fixture
def small_memo(monkeypatch):
    memo = text_counts._Memo(5)     # smaller than the corpora below: hits, misses and evictions in one call
    monkeypatch.setattr(text_counts, "MEMO", memo)
    return memo


@settings(max_examples=60, deadline=None)
@given(CORPUS, st.data())
def test_scores_equal_sacrebleus_before_and_after_remembering(corpus, data):
    hyps, refs = corpus
    for name, score in (("bleu", metrics.corpus_bleu), ("chrf", metrics.corpus_chrf)):
        want = _sacrebleu(name, hyps, refs)
        assert score(hyps, refs) == want          # counted now
        assert score(hyps, refs) == want          # remembered
        changed = list(hyps)
        changed[data.draw(st.integers(0, len(hyps) - 1))] = data.draw(SENTENCE)
        assert score(changed, refs) == _sacrebleu(name, changed, refs)      # one pair new, the rest remembered


def test_a_bounded_memo_evicts_and_still_scores_exactly(small_memo):
    hyps = [f"the cat sat {i}" for i in range(12)]
    refs = [f"a cat sat on the mat {i}" for i in range(12)]
    for _ in range(2):
        assert metrics.corpus_bleu(hyps, refs) == _sacrebleu("bleu", hyps, refs)
        assert len(small_memo._rows) <= 5
    assert metrics.corpus_bleu(hyps[:3], refs[:3]) == _sacrebleu("bleu", hyps[:3], refs[:3])


def test_only_the_changed_pairs_are_counted_again(monkeypatch):
    text_counts.MEMO.clear()
    counted: list[int] = []
    bleu = text_counts.sacrebleu_metric("bleu")
    original = type(bleu)._extract_corpus_statistics

    def spy(self, hyps, refs):
        counted.append(len(hyps))
        return original(self, hyps, refs)

    monkeypatch.setattr(type(bleu), "_extract_corpus_statistics", spy)
    hyps = [f"in the beginning {i}" for i in range(10)]
    refs = [f"in the beginning God created {i}" for i in range(10)]
    metrics.corpus_bleu(hyps, refs)
    metrics.corpus_bleu(hyps[:4] + ["and the earth"] + hyps[5:], refs)
    metrics.corpus_bleu(hyps, refs)
    assert counted == [10, 1]


def test_the_per_example_counts_are_sacrebleus_and_threads_share_them():
    hyps = [f"let there be light {i}" for i in range(40)]
    refs = [f"and there was light {i % 7}" for i in range(40)]
    want = text_counts.sacrebleu_metric("chrf")._extract_corpus_statistics(hyps, [refs])
    text_counts.MEMO.clear()
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(metrics.CHRF.statistics(hyps, refs))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 4 and all(o.tolist() == [list(map(int, w)) for w in want] for o in out)
    assert metrics.CHRF.of_statistics(out[0].sum(axis=0)) == _sacrebleu("chrf", hyps, refs)


def test_bad_input_fails_as_sacrebleu_does():
    with pytest.raises(TypeError, match="should be a string"):
        metrics.corpus_bleu([1, 2], ["a", "b"])
    with pytest.raises(Exception) as theirs:
        _sacrebleu("bleu", [], [])
    with pytest.raises(type(theirs.value)):        # an empty corpus: the same error as sacrebleu's own
        metrics.corpus_bleu([], [])
