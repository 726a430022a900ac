"""The metrics: one registry entry per metric, read by every ranking, delta sign, colour and label.

A :class:`Metric` declares how it is computed, whether a larger value is better, and how it is shown;
nothing outside this module branches on a metric's name (a display asks :meth:`Metric.format`,
:meth:`Metric.delta`, :attr:`Metric.axis_title`; a ranking :meth:`Metric.sort_key` / :meth:`Metric.worsening`).
``compute`` takes, by ``inputs``: ``"labels"`` (class ids: accuracy, F1, MCC), ``"text"`` (one string per
example: BLEU, chrF, WER) or ``"loss"`` (the summed cross-entropy and its token count: perplexity). Values
are stored as computed (accuracy 0.85, BLEU 27.3); ``scale`` only changes what is shown.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.registry import Registry
from pruning_core.evaluation import text_counts


_DECIMALS = re.compile(r"\.(\d+)f")


def with_places(fmt: str, places: int) -> str:
    """``fmt`` ("{:.1f} %") with its first fixed-point field given ``places`` decimals."""
    return _DECIMALS.sub(f".{places}f", fmt, count=1)


@dataclass(frozen=True)
class Metric:
    """One metric: how to compute it, which direction is better, and how to show it.

    name: registry key, also ``EvalResult.metric_name`` ("accuracy", "bleu").
    label: shown in the UI ("accuracy", "BLEU", "Perplexity").
    higher_is_better: False for errors and perplexity: rankings and colours flip.
    compute: see the module docstring; ``inputs`` says which arguments it takes.
    scale: display multiplier (100 for fractions shown as %, 1 for BLEU points).
    fmt: display format of ``scale * value`` ("{:.1f} %", "{:.2f} BLEU").
    delta_fmt: display format of a difference in display units ("{:+.1f} points").
    plain_fmt: the unscaled value in command-line output ("{:.4f}").
    per_example: True when the metric is the mean of a score per example (accuracy: 1 right, 0
        wrong), so intervals and paired tests work on those scores (Wilson, McNemar); False for a
        corpus-level metric (F1, MCC, BLEU, WER, perplexity), resampled whole (bootstrap).
    resamples: bootstrap resamples for an interval or paired test of this metric (fewer for
        metrics that are slow to compute).
    unbounded: True when values have no upper limit and span orders of magnitude as heads go
        (perplexity: 20 with all heads, 10^5 with half), so plots draw it on a log axis.
    statistics, of_statistics: for a corpus metric that is a function of per-example counts summed over
        the corpus (BLEU, chrF, WER): ``statistics(hypotheses, references)`` -> int array ``[n, k]`` and
        ``of_statistics(summed [k])`` -> the metric, equal to ``compute`` on those examples; a bootstrap
        then sums resampled rows instead of re-tokenising every resample's texts. None: resample ``compute``.
    """

    name: str
    label: str
    higher_is_better: bool
    compute: Callable[..., float]
    inputs: str = "labels"
    scale: float = 100.0
    fmt: str = "{:.1f} %"
    delta_fmt: str = "{:+.1f} points"
    plain_fmt: str = "{:.4f}"
    per_example: bool = False
    resamples: int = 1000
    unbounded: bool = False
    statistics: Callable[[Sequence[str], Sequence[str]], "np.ndarray"] | None = None
    of_statistics: Callable[["np.ndarray"], float] | None = None

    def of(self, predictions: Sequence, references: Sequence, loss_sum: float = 0.0, n_tokens: int = 0) -> float:
        """This metric of one evaluation run: from predictions and references, or from the loss."""
        if self.inputs == "loss":
            return float(self.compute(loss_sum, n_tokens))
        return float(self.compute(predictions, references))

    def example_scores(self, predictions: Sequence, references: Sequence) -> list[float]:
        """One score per example (the metric is their mean); only for ``per_example`` metrics."""
        if not self.per_example:
            raise HeadpruneError(f"Metric {self.name!r} is corpus-level: it has no score per example.")
        return [float(self.compute([p], [r])) for p, r in zip(predictions, references)]

    def display(self, value: float) -> float:
        """``value`` in display units (x 100 for percentages)."""
        return self.scale * value

    def format(self, value: float | None) -> str:
        """'85.0 %', '27.31 BLEU'; 'n/a' for None."""
        return "n/a" if value is None else self.fmt.format(self.display(value))

    def format_interval(self, low: float, high: float) -> str:
        """'81.0–88.7 %', '25.10–29.40 BLEU': both ends in display units, the unit written once."""
        unit = self.fmt.rsplit("}", 1)[-1]
        low_text = self.fmt.format(self.display(low))
        return f"{low_text[:len(low_text) - len(unit)]}–{self.format(high)}"

    def format_with_interval(self, value: float, interval: tuple[float, float] | None) -> str:
        """'85.2 % (95 % interval 81.0–88.7 %)'; the value alone when the interval is unknown."""
        if interval is None:
            return self.format(value)
        return f"{self.format(value)} (95 % interval {self.format_interval(*interval)})"

    def places(self, half_width: float | None) -> int:
        """Decimals a value deserves when its 95 % interval is ± ``half_width`` display units: none from ± 1 up
        (± 3 points: '70 %', not '70.3 %'), one from ± 0.1, else this metric's own. The dashboard and
        ``headprune evaluate --mask-link`` both round by it, so a shared figure reads the same in both."""
        found = _DECIMALS.search(self.fmt)
        own = int(found.group(1)) if found else 2
        if half_width is None:
            return own
        return min(own, 0 if half_width >= 1 else 1 if half_width >= 0.1 else 2)

    def interval_places(self, interval: tuple[float, float] | None) -> int:
        """:meth:`places` for a value whose 95 % interval is ``interval`` (metric units; None: unknown)."""
        if interval is None:
            return self.places(None)
        return self.places(abs(self.display(interval[1]) - self.display(interval[0])) / 2)

    def format_shown(self, value: float, interval: tuple[float, float] | None) -> tuple[str, str | None]:
        """``value`` and its interval as the dashboard shows them, to the precision the interval supports:
        ('87 %', '80–92 %'); the interval None when unknown (the value then at this metric's own precision)."""
        if interval is None:
            return self.format(value), None
        places = self.interval_places(interval)
        fmt, number = with_places(self.fmt, places), with_places("{:.1f}", places)
        unit = fmt.replace("{:." + str(places) + "f}", "").strip()
        low, high = (number.format(self.display(v)) for v in interval)
        return fmt.format(self.display(value)), f"{low}–{high}{' ' + unit if unit else ''}"

    def format_plain(self, value: float) -> str:
        """The unscaled value for text output ('0.8500', '27.31')."""
        return self.plain_fmt.format(value)

    def delta(self, new: float, old: float) -> float:
        """``new - old`` in display units (percentage points for accuracy, BLEU points for BLEU)."""
        return self.scale * (new - old)

    def format_delta(self, new: float, old: float) -> str:
        """'+1.5 points', '-0.3 BLEU'."""
        return self.delta_fmt.format(self.delta(new, old))

    def is_better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is strictly better than ``b``."""
        return a > b if self.higher_is_better else a < b

    def sort_key(self, value: float) -> float:
        """Ascending order of this key is worst first (for values and for deltas alike)."""
        return value if self.higher_is_better else -value

    def worsening(self, new: float, old: float) -> float:
        """How much worse ``new`` is than ``old``, in metric units (> 0: worse, < 0: better)."""
        return old - new if self.higher_is_better else new - old

    def improved(self, delta: float) -> bool:
        """Whether a change of ``delta`` (new - old) is an improvement (green, not red)."""
        return delta > 0 if self.higher_is_better else delta < 0

    @property
    def helps_sign(self) -> str:
        """The sign of an ablation's Δ metric (without the head minus with it) when the head helps."""
        return "<" if self.higher_is_better else ">"

    @property
    def axis_type(self) -> str:
        """Plotly axis type of a plot of ``display(value)``: 'log' for unbounded metrics, else 'linear'."""
        return "log" if self.unbounded else "linear"

    @property
    def axis_title(self) -> str:
        """Axis title of a plot of ``display(value)``: 'accuracy (%)', 'BLEU'."""
        return f"{self.label} (%)" if self.fmt.endswith("%") else self.label


METRICS: Registry[Metric] = Registry("metric", HeadpruneError,
                                     "Register the metric in pruning_core/evaluation/metrics.py.")


def register_metric(metric: Metric, description: str = "") -> Metric:
    """Add ``metric`` to the registry (a second metric of the same name raises)."""
    return METRICS.add(metric.name, metric, description=description, higher_is_better=metric.higher_is_better)


def get_metric(name: str) -> Metric:
    """The metric called ``name`` (case-insensitive); unknown names raise with the choices."""
    if name not in METRICS and name.lower() in METRICS:
        name = name.lower()
    return METRICS.get(name)


def metric_names() -> list[str]:
    return METRICS.names()


# -- the functions ---------------------------------------------------------------------------------

def accuracy(preds: Sequence[int], labels: Sequence[int]) -> float:
    return sum(int(p == y) for p, y in zip(preds, labels)) / max(1, len(labels))


def binary_f1(preds: Sequence[int], labels: Sequence[int], positive: int = 1) -> float:
    tp = sum(1 for p, y in zip(preds, labels) if p == positive and y == positive)
    fp = sum(1 for p, y in zip(preds, labels) if p == positive and y != positive)
    fn = sum(1 for p, y in zip(preds, labels) if p != positive and y == positive)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def matthews_corrcoef(preds: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation (multi-class form of Gorodkin 2004); 0 when undefined."""
    classes = sorted(set(preds) | set(labels))
    n = len(labels)
    t = {k: sum(1 for y in labels if y == k) for k in classes}
    p = {k: sum(1 for q in preds if q == k) for k in classes}
    c = sum(1 for q, y in zip(preds, labels) if q == y)
    num = c * n - sum(t[k] * p[k] for k in classes)
    den = math.sqrt(n * n - sum(v * v for v in p.values())) * math.sqrt(n * n - sum(v * v for v in t.values()))
    return num / den if den else 0.0


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu, one reference per example), 0 to 100."""
    return text_counts.corpus_score("bleu", hypotheses, references)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF (sacrebleu's defaults: character 6-grams, beta 2), 0 to 100."""
    return text_counts.corpus_score("chrf", hypotheses, references)


def _sentence_statistics(name: str) -> Callable[[Sequence[str], Sequence[str]], np.ndarray]:
    """``[n, k]`` int64: each example's sacrebleu counts (n-gram matches and totals, lengths) for metric ``name``;
    what sacrebleu's ``corpus_score`` sums before scoring."""
    return functools.partial(text_counts.sentence_counts, name)


def _of_statistics(name: str) -> Callable[[np.ndarray], float]:
    """The corpus score of summed :func:`_sentence_statistics` (sacrebleu's own formula)."""
    return functools.partial(text_counts.score_of, name)


@functools.cache
def _words():
    """jiwer's transformation of a text into its words: split at any run of whitespace (tabs, newlines too)."""
    import jiwer

    return jiwer.Compose([jiwer.RemoveWhiteSpace(replace_by_space=True), jiwer.RemoveMultipleSpaces(), jiwer.Strip(),
                          jiwer.ReduceToListOfListOfWords()])


def word_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus WER (jiwer): word edits summed over examples / reference words (0 = perfect; can exceed 1)."""
    import jiwer

    if not references:
        return 0.0
    return float(jiwer.wer(list(references), list(hypotheses), reference_transform=_words(),
                           hypothesis_transform=_words()))


def word_edit_counts(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """``[n, 2]`` int64: each example's word edits (substitutions, deletions, insertions) and reference words, what
    :func:`word_error_rate` sums over the corpus (jiwer aligns each pair on its own)."""
    import jiwer

    rows = []
    for hypothesis, reference in zip(hypotheses, references):
        out = jiwer.process_words(reference, hypothesis, reference_transform=_words(), hypothesis_transform=_words())
        rows.append((out.substitutions + out.deletions + out.insertions, out.hits + out.substitutions + out.deletions))
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), 2)


def _wer_of_counts(summed: np.ndarray) -> float:
    return float(summed[0]) / float(summed[1])


def perplexity(loss_sum: float, n_tokens: int) -> float:
    """exp(mean cross-entropy per token); ``loss_sum`` in nats summed over ``n_tokens`` tokens."""
    return math.exp(loss_sum / max(1, n_tokens))


ACCURACY = register_metric(Metric("accuracy", "accuracy", True, accuracy, per_example=True),
                           "share of examples classified right")
F1 = register_metric(Metric("f1", "F1", True, binary_f1), "binary F1 of the positive class (id 1)")
MCC = register_metric(Metric("mcc", "MCC", True, matthews_corrcoef), "Matthews correlation coefficient")
BLEU = register_metric(Metric("bleu", "BLEU", True, corpus_bleu, inputs="text", scale=1.0, fmt="{:.2f} BLEU",
                              delta_fmt="{:+.1f} BLEU", plain_fmt="{:.2f}", resamples=200,
                              statistics=_sentence_statistics("bleu"), of_statistics=_of_statistics("bleu")),
                       "corpus BLEU (sacrebleu)")
CHRF = register_metric(Metric("chrf", "chrF", True, corpus_chrf, inputs="text", scale=1.0, fmt="{:.2f} chrF",
                              delta_fmt="{:+.1f} chrF", plain_fmt="{:.2f}", resamples=200,
                              statistics=_sentence_statistics("chrf"), of_statistics=_of_statistics("chrf")),
                       "corpus chrF (sacrebleu)")
WER = register_metric(Metric("wer", "WER", False, word_error_rate, inputs="text", resamples=200,
                             statistics=word_edit_counts, of_statistics=_wer_of_counts), "word error rate")
PERPLEXITY = register_metric(Metric("perplexity", "perplexity", False, perplexity, inputs="loss", scale=1.0,
                                    fmt="{:.2f}", delta_fmt="{:+.2f}", plain_fmt="{:.3f}", unbounded=True),
                             "exp of the mean cross-entropy per token")
