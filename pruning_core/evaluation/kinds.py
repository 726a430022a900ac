"""Which kind of attention does a task need most (Michel et al. 2019, §5)?

Remove a share of ONE kind's heads (``encoder_self``, ``decoder_self`` or ``cross``), the least
important first or at random, keep every head of the other kinds, and measure the metric. A kind the
model has no heads of (an encoder has no cross-attention; the Bergamot students' decoder has an SSRU
instead of self-attention) is listed in ``missing``, never measured as an empty row. :func:`borrow` fills
such a kind from another model's run, for a figure that says which model each kind comes from.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from pruning_core.core.io.codec import KINDS_FORMAT, JsonRecord
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import KIND_LABELS, KINDS, HeadId, HeadMask, HeadScores
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import provenance

FRACTIONS = (0.1, 0.25, 0.5)
METHODS = ("importance", "random")


@dataclass(frozen=True)
class KindPoint(JsonRecord):
    kind: str
    fraction: float                 # share of this kind's heads removed
    heads_removed: int
    method: str                     # "importance" (least important first) or "random"
    seed: int | None                # random order's seed; None for importance
    metric: float
    loss: float
    low: float | None = None        # 95 % interval of the metric over the evaluation examples
    high: float | None = None


@dataclass(frozen=True)
class KindSensitivity(JsonRecord):
    """The metric with a share of one kind's heads removed, for every kind the model has."""

    _malformed = "The attention-kinds file is malformed; run `headprune kinds MODEL --task TASK --out FILE.json` again"

    format: str = field(default=KINDS_FORMAT, init=False)
    metric_name: str
    base_metric: float
    base_low: float | None
    base_high: float | None
    n_examples: int
    heads: dict                     # kind measured -> number of heads the model has of it
    missing: tuple[str, ...]        # kinds of ``KINDS`` the model has no head of
    points: tuple[KindPoint, ...]
    provenance: dict = field(default_factory=dict)

    def worsening(self, kind: str, method: str) -> float:
        """Mean worsening of the metric over the fractions (and seeds), in the metric's units (worse > 0)."""
        metric = get_metric(self.metric_name)
        values = [metric.worsening(p.metric, self.base_metric) for p in self.points
                  if p.kind == kind and p.method == method]
        if not values:
            raise HeadpruneError(f"No {method} points for {kind}: the model has {sorted(self.heads)} heads.")
        return sum(values) / len(values)

    def most_sensitive(self, method: str = "importance") -> str:
        return max(self.heads, key=lambda kind: self.worsening(kind, method))

    def ranked(self, method: str = "importance") -> list[str]:
        """The measured kinds, the most sensitive (largest mean worsening) first."""
        return sorted(self.heads, key=lambda kind: -self.worsening(kind, method))

    def apart(self, a: str, b: str, method: str) -> bool | None:
        """Whether kinds ``a`` and ``b`` differ beyond noise under ``method``: at some share their 95 %
        intervals do not overlap (random order: the span of every seed's interval). None when a point has
        no interval."""
        def span(kind: str, fraction: float) -> tuple[float, float] | None:
            pts = [p for p in self.points if p.kind == kind and p.method == method and p.fraction == fraction]
            if not pts or any(p.low is None or p.high is None for p in pts):
                return None
            return min(p.low for p in pts), max(p.high for p in pts)

        fractions = sorted({p.fraction for p in self.points if p.method == method})
        spans = [(span(a, f), span(b, f)) for f in fractions]
        if not spans or any(x is None or y is None for x, y in spans):
            return None
        return any(x[1] < y[0] or y[1] < x[0] for x, y in spans)


def missing_note(missing: Sequence[str]) -> str:
    """The sentence a table or figure shows for kinds without heads ("" when none)."""
    if not missing:
        return ""
    names = " and ".join(KIND_LABELS[k] for k in missing)
    return f"This model has no {names} heads, so {'that kind is' if len(missing) == 1 else 'those kinds are'} not measured."


def least_important_of_kind(ranking: HeadScores, kind: str, fraction: float) -> list[HeadId]:
    """round(``fraction`` × ``kind``'s heads) of ``kind``'s heads, the least important first by ``ranking``
    (larger = more important; ties broken by seed 0): the heads :func:`kind_sensitivity` removes at that share."""
    of_kind = [h for h in ranking.ranked(seed=0) if h[0] == kind]
    return of_kind[:round(fraction * len(of_kind))]


def kind_sensitivity(loaded, task, data, ranking: HeadScores, *, fractions: Sequence[float] = FRACTIONS,
                     seeds: int = 3, batch_size: int = 64, kinds: Sequence[str] | None = None,
                     progress: ProgressCallback | None = None) -> KindSensitivity:
    """Remove ``fractions`` of each kind's heads, by ``ranking`` (least important first) and in ``seeds``
    random orders, the other kinds untouched; evaluate ``task`` on ``data`` under each mask.

    ``ranking``: the scores that order heads (e.g. a ScoreResult's ``ranking_scores``, larger = more important).
    ``kinds``: measure only these kinds (default: every kind the model has).
    """
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise HeadpruneError(f"Shares of a kind's heads to remove must lie in (0, 1], e.g. 0.1,0.25,0.5; got {list(fractions)}.")
    if seeds < 0:
        raise HeadpruneError(f"seeds must be 0 or more, got {seeds}.")
    layout = loaded.layout
    heads = {k: sum(rows) for k, rows in layout.kinds.items() if sum(rows) > 0}
    missing = tuple(k for k in KINDS if k not in heads)
    if kinds is not None:
        if unknown := [k for k in kinds if k not in heads]:
            raise HeadpruneError(f"This model has no {', '.join(map(repr, unknown))} heads to remove; its kinds are "
                                 f"{', '.join(heads)}. Choose among those.")
        heads = {k: n for k, n in heads.items() if k in kinds}
    plans = []
    for kind in heads:
        of_kind = least_important_of_kind(ranking, kind, 1.0)
        for fraction in fractions:
            least = least_important_of_kind(ranking, kind, fraction)
            n = len(least)
            plans.append((kind, fraction, n, "importance", None, least))
            plans += [(kind, fraction, n, "random", s, random.Random(s).sample(of_kind, n)) for s in range(seeds)]
    base = task.evaluate(loaded, data, None, batch_size=batch_size)
    total = len(plans) + 1                  # every evaluation counted, the one with all heads first
    report(progress, "kinds", 1, total, "all heads")
    points = []
    for i, (kind, fraction, n, method, seed, removed) in enumerate(plans):
        res = task.evaluate(loaded, data, HeadMask.from_removed(layout, removed), batch_size=batch_size)
        low, high = res.interval if res.interval is not None else (None, None)
        points.append(KindPoint(kind, fraction, n, method, seed, res.metric, res.loss, low, high))
        report(progress, "kinds", i + 2, total, f"{KIND_LABELS[kind]}: {n} heads removed ({method})")
    base_low, base_high = base.interval if base.interval is not None else (None, None)
    settings = {"fractions": list(fractions), "seeds": seeds, "eval_split": data.split, "eval_n": data.n_examples,
                "kinds": list(heads)}
    return KindSensitivity(base.metric_name, base.metric, base_low, base_high, data.n_examples, heads, missing,
                           tuple(points), provenance(loaded, task=task.name, split=data.split,
                                                     n_examples=data.n_examples, method="michel-kinds",
                                                     settings=settings))


def borrow(own: KindSensitivity,
           others: Sequence[KindSensitivity]) -> tuple[tuple[KindSensitivity, tuple[str, ...]], ...]:
    """``own`` with each kind it lacks taken from the first of ``others`` that measured it: (run, kinds taken
    from it) pairs, ``own`` first. Each run keeps its own model, task and metric (they are not comparable
    across runs: a figure draws each on its own axis)."""
    taken = {id(own): (own, list(own.heads))}
    for kind in own.missing:
        source = next((o for o in others if kind in o.heads), None)
        if source is not None:
            taken.setdefault(id(source), (source, []))[1].append(kind)
    return tuple((run, tuple(kinds)) for run, kinds in taken.values())


def source_label(run: KindSensitivity, unit: str = "example") -> str:
    """Which model, task and metric a run measured, e.g. "whisper-base on movie-speech, WER, 10 utterances"
    (``unit``: what one of the run's examples is)."""
    prov = run.provenance
    model, task = prov.get("model", "another model"), prov.get("task")
    count = f"{run.n_examples} {unit}{'s' if run.n_examples != 1 else ''}"
    return f"{model}{f' on {task}' if task else ''}, {get_metric(run.metric_name).label}, {count}"
