"""How sure a shown number is: a metric with its 95 % interval and example count, to the precision
the interval supports; a change that says "within noise" when its paired interval covers zero; the
majority-class (chance) share of a set of labels; the change of the mean loss with its paired interval.

Pure: no Streamlit; takes :class:`EvalResult` s and :class:`Comparison` s (``pruning_core.evaluation.significance``).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pruning_core.evaluation import stats
from pruning_core.evaluation.metrics import Metric, get_metric, with_places
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import Comparison, too_few
from pruning_core.tasks.language_model import UnigramBaseline

from app.core.text import md_code

BOOTSTRAP_LOSS = "paired bootstrap over examples"


def decimals(metric: Metric, half_width: float | None) -> int:
    """Decimals a value of ``metric`` deserves when its 95 % interval is ± ``half_width`` display units
    (:meth:`Metric.places`, the one rule)."""
    return metric.places(half_width)


@dataclass(frozen=True)
class Shown:
    """A metric as shown: the value (at the precision its interval supports) and the line beside it."""

    value: str          # '70 %'
    interval: str       # '95 % interval 62–77 %, 128 examples' ('128 examples, no interval' when unknown)


def shown(result: EvalResult, unit: str = "example") -> Shown:
    """``result``'s metric, rounded to what its 95 % interval supports, with the interval and ``n`` (counted in
    ``unit``s, what one example of the model is: "utterance", "window")."""
    metric = get_metric(result.metric_name)
    n = f"{result.n_examples} {unit}{'s' if result.n_examples != 1 else ''}"
    value, span = metric.format_shown(result.metric, result.interval)
    return Shown(value, f"{n}, no interval" if span is None else f"95 % interval {span}, {n}")


def rounded(metric_name: str, value: float, interval: tuple[float, float] | None = None) -> str:
    """``value`` as :func:`shown` rounds a value whose 95 % interval is ``interval`` (a value measured on the
    same examples as a shown one passes that one's interval): one rounding rule on every page."""
    metric = get_metric(metric_name)
    return with_places(metric.fmt, metric.interval_places(interval)).format(metric.display(value))


def unitless(metric_name: str, text: str) -> str:
    """A shown value or interval without its unit where the unit is the metric's name: '32' and
    '95 % interval 28–35, 128 examples' under the label 'BLEU'; '90 %' keeps its unit."""
    metric = get_metric(metric_name)
    unit = metric.fmt.rsplit("}", 1)[-1].strip()
    return text.replace(f" {unit}", "") if unit == metric.label else text


def labelled(metric_name: str, text: str) -> str:
    """``text`` (a value, or a value with its interval, as shown) after the metric's name, its unit written
    once: 'accuracy 90 %', 'BLEU 32 (95 % interval 28–35)' rather than 'BLEU 32 BLEU (… 28–35 BLEU)'."""
    return f"{get_metric(metric_name).label} {unitless(metric_name, text)}"


@dataclass(frozen=True)
class Change:
    """A change of metric as shown: the text and whether its paired 95 % interval covers zero."""

    text: str               # '-3 points', '+0.8 BLEU'
    within_noise: bool      # the paired interval covers zero (or there is no per-example evidence)
    detail: str             # '95 % interval of the change −7 to +1 points (exact McNemar …)'


def _value_places(metric: Metric, result: EvalResult) -> int:
    """The decimals :func:`shown` gives ``result``'s value."""
    return metric.interval_places(result.interval)


def on_screen(value: float, places: int) -> float:
    """``value`` as it reads when printed with ``places`` decimals (the printed text, read back)."""
    return float(f"{value:.{places}f}")


def shown_difference(base: EvalResult, other: EvalResult) -> tuple[float, int]:
    """``other``'s shown value minus ``base``'s, in display units, and the decimals to print it with (the finer of
    the two values'): the change a reader checks by subtracting the two numbers on the page. 32 and 4.2 differ
    by -27.8, whatever the unrounded change."""
    metric = get_metric(base.metric_name)
    vb, vo = _value_places(metric, base), _value_places(metric, other)
    places = max(vb, vo)
    apart = on_screen(metric.display(other.metric), vo) - on_screen(metric.display(base.metric), vb)
    return on_screen(apart, places) + 0.0, places   # + 0.0: no "-0"


def _change_text(metric: Metric, delta: float, places: int) -> str:
    text = with_places(metric.delta_fmt, places).format(delta)
    text = re.sub(r"^[+-](0(?:\.0+)?)( |$)", r"\1\2", text)        # a zero change carries no sign
    return re.sub(r"^([+-]?1) points$", r"\1 point", text)


def change(base: EvalResult, other: EvalResult, comparison: Comparison | None) -> Change:
    """``other`` minus ``base`` on the same examples, shown as the difference of the two shown values
    (:func:`shown_difference`); "within noise" when the paired 95 % interval of the unrounded change covers zero.
    With no paired comparison (no per-example results) the change counts as within noise only when it is zero."""
    metric = get_metric(base.metric_name)
    delta = metric.delta(other.metric, base.metric)
    text = _change_text(metric, *shown_difference(base, other))
    if comparison is None:
        paired = len(base.per_example) if len(base.per_example) == len(other.per_example) else 0
        if paired and (few := too_few(paired)):
            return Change(text, True, few)
        return Change(text, delta == 0, "no paired test (no per-example results)")
    low, high = metric.display(comparison.low), metric.display(comparison.high)
    places = decimals(metric, (high - low) / 2)
    fmt = with_places(metric.delta_fmt, places)
    number = with_places("{:+.1f}", places)
    unit = fmt.replace("{:+." + str(places) + "f}", "").strip()
    return Change(text, low <= 0 <= high,
                  f"95 % interval of the change {_signed(number, low)} to {_signed(number, high)}"
                  f"{' ' + unit if unit else ''} ({comparison.test}, {comparison.p_text})")


def _signed(fmt: str, value: float) -> str:
    """``value`` with its sign ('+1.2', '-0.4'), but an end of exactly 0 as '0.0': '+0.0' would read as a
    gain where the resamples with no change put the end of the interval."""
    return fmt.format(0.0).lstrip("+") if value == 0 else fmt.format(value)


def majority_share(labels: Sequence | None) -> float | None:
    """The share of the most frequent label: the accuracy of always answering it (chance line).
    None for no labels or labels that are not classes (texts of a translation task)."""
    values = [] if labels is None else list(labels)
    if not values or any(isinstance(v, (str, bytes)) for v in values):
        return None
    try:
        classes = [int(v) for v in values]
    except (TypeError, ValueError):
        return None
    return Counter(classes).most_common(1)[0][1] / len(classes)


LOSS_PLACES = 4        # a mean loss is printed with 4 decimals on every page and in the report


def loss_text(loss: float) -> str:
    """A mean loss as every page and the report print it: '0.2728'."""
    return f"{loss:.{LOSS_PLACES}f}"


def loss_delta_text(old: float, new: float) -> str:
    """``new`` minus ``old`` as printed: the difference of the two :func:`loss_text` s ('+0.0323', '0.0000')."""
    apart = on_screen(on_screen(new, LOSS_PLACES) - on_screen(old, LOSS_PLACES), LOSS_PLACES) + 0.0
    return f"{apart:.{LOSS_PLACES}f}" if apart == 0 else f"{apart:+.{LOSS_PLACES}f}"


def loss_change(dense, pruned) -> Change:
    """The mean loss of ``pruned`` minus that of ``dense`` (``pruning_core.tasks.per_example.ExampleOutputs`` of
    the same examples), with a paired bootstrap 95 % interval over examples: "within noise" when it
    covers zero. The mean loss is ``sum(losses) / sum(weights)`` (per example or per target token). The change is
    shown as the difference of the two losses as printed (:func:`loss_text`), so it adds up on the page."""
    la, wa = np.asarray(dense.losses, dtype=float), np.asarray(dense.weights, dtype=float)
    lb, wb = np.asarray(pruned.losses, dtype=float), np.asarray(pruned.weights, dtype=float)
    delta = pruned.mean_loss - dense.mean_loss
    text = loss_delta_text(dense.mean_loss, pruned.mean_loss)
    if la.size == 0 or la.shape != lb.shape:
        return Change(text, delta == 0, "no paired interval (no per-example losses)")
    if np.array_equal(la, lb):
        return Change(text, True, "the same loss on every example")
    if few := too_few(la.size):
        return Change(text, True, few)
    low, high, p = stats.paired_difference(lambda idx: lb[idx].sum() / wb[idx].sum() - la[idx].sum() / wa[idx].sum(),
                                           la.size)
    half = (high - low) / 2
    places = 4 if half <= 0 else max(1, min(4, 1 - math.floor(math.log10(half))))
    return Change(text, low <= 0 <= high,
                  f"95 % interval of the change {_signed(f'{{:+.{places}f}}', low)} to "
                  f"{_signed(f'{{:+.{places}f}}', high)} ({BOOTSTRAP_LOSS}, "
                  f"{stats.format_p(p, stats.RESAMPLES)})")


def unigram_reference(dense: EvalResult, baseline: UnigramBaseline) -> str:
    """What a language model's perplexity is next to (Markdown): the model with all heads and a unigram
    model (token frequencies alone) on the same tokens; lower is better."""
    metric = get_metric(dense.metric_name)
    counted = (f"the {md_code(baseline.train_split)} split's {baseline.train_tokens:,} tokens" if baseline.own_split else
               "the evaluated text itself, since a data file has no separate training text: this flatters it")
    return (f"For reference: with all heads the model's perplexity is {metric.format(dense.metric)}; a **unigram** "
            f"model, which predicts each token from its frequency alone (counted on {counted}, add-one "
            f"smoothing), gives {metric.format(baseline.perplexity)} on the same {baseline.eval_tokens:,} tokens. "
            "Lower is better; a model near the unigram value uses almost none of its context.")
