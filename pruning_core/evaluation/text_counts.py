"""sacrebleu's per-example counts (BLEU's n-gram matches and lengths, chrF's character and word n-grams), remembered
per (metric, hypothesis, reference): a click that changes a few translations counts only those again.

sacrebleu's corpus score sums exactly these counts before scoring, so a score from remembered counts equals
``sacrebleu.corpus_bleu`` / ``corpus_chrf`` on the same texts to the last digit (tests/evaluation/test_text_counts.py).
The memo is shared by every thread (the dashboard's sessions) and holds at most :data:`MEMO_SIZE` pairs.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

MEMO_SIZE = 65_536      # pairs: 512 masks' worth of 128 verses, a few MB of small int tuples


@functools.cache
def sacrebleu_metric(name: str):
    """One sacrebleu metric object with its defaults (what ``sacrebleu.corpus_bleu`` / ``corpus_chrf`` build)."""
    import sacrebleu.metrics

    return {"bleu": sacrebleu.metrics.BLEU, "chrf": sacrebleu.metrics.CHRF}[name]()


class _Memo:
    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: OrderedDict[tuple[str, str, str], tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def counts(self, name: str, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
        sacrebleu_metric(name)._check_corpus_score_args(list(hypotheses), [list(references)])  # its TypeErrors
        keys = [(name, h, r) for h, r in zip(hypotheses, references, strict=True)]
        with self._lock:
            known = {k: self._rows[k] for k in keys if k in self._rows}
            for k in known:
                self._rows.move_to_end(k)
        missing = [k for k in dict.fromkeys(keys) if k not in known]
        if missing:                         # counted outside the lock: other sessions' counts go on meanwhile
            rows = sacrebleu_metric(name)._extract_corpus_statistics([k[1] for k in missing],
                                                                    [[k[2] for k in missing]])
            new = {k: tuple(int(x) for x in row) for k, row in zip(missing, rows)}
            known.update(new)
            with self._lock:
                self._rows.update(new)
                while len(self._rows) > self.size:
                    self._rows.popitem(last=False)
        width = len(next(iter(known.values()))) if known else 0
        return np.asarray([known[k] for k in keys], dtype=np.int64).reshape(len(keys), width)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


MEMO = _Memo(MEMO_SIZE)


def sentence_counts(name: str, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """``[n, k]`` int64: each example's sacrebleu counts for metric ``name`` ("bleu" or "chrf")."""
    return MEMO.counts(name, hypotheses, references)


def score_of(name: str, summed) -> float:
    """The corpus score of summed :func:`sentence_counts` (sacrebleu's own formula)."""
    return float(sacrebleu_metric(name)._compute_score_from_stats([int(x) for x in summed]).score)


def corpus_score(name: str, hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """sacrebleu's corpus BLEU or chrF of ``hypotheses`` against one reference each, from remembered counts."""
    if not hypotheses:                      # sacrebleu's own answer (and error) for an empty corpus
        import sacrebleu

        score = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf}[name]
        return float(score(list(hypotheses), [list(references)]).score)
    return score_of(name, sentence_counts(name, hypotheses, references).sum(axis=0))
