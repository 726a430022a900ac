"""The experiments of Michel et al. (2019): single-head ablation, one head per layer, and
iterative pruning curves. Each returns a typed result that round-trips through JSON.

Every reported difference carries its evidence (:mod:`pruning_core.evaluation.significance`): each ablation
row a paired test against the unpruned model, a 95 % interval of the difference and a
Holm–Bonferroni adjusted p-value; each curve point the 95 % interval of its metric, and a curve
over several seeds (``random``) the mean, standard deviation and min–max band per point.

Which way is better is the metric's (:mod:`pruning_core.evaluation.metrics`): a lower-is-better metric such
as perplexity picks the head with the *lowest* value and ranks heads by the metric *increase*.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from pruning_core.core.io.codec import ABLATION_FORMAT, CURVE_FORMAT, ONE_PER_LAYER_FORMAT, JsonRecord, json_field
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.results import EvalResult, ScoreResult, provenance
from pruning_core.evaluation.significance import compare, too_few
from pruning_core.evaluation.stats import bootstrap_interval, holm, mean_sd

ALPHA = 0.05


@dataclass(frozen=True)
class AblationRow(JsonRecord):
    kind: str
    layer: int
    head: int
    metric: float
    delta_metric: float      # metric without this head minus the base metric (worse = head helps)
    loss: float
    delta_loss: float
    delta_low: float | None = None      # 95 % interval of delta_metric (paired, metric units)
    delta_high: float | None = None
    p_value: float | None = None        # paired test against the model with every (base) head
    p_holm: float | None = None         # Holm–Bonferroni adjusted over all rows of the table
    significant: bool | None = None     # p_holm < 0.05; None when untested (an old file)


@dataclass(frozen=True)
class AblationResult(JsonRecord):
    _malformed = "The ablation file is malformed; run the ablation again"

    format: str = field(default=ABLATION_FORMAT, init=False)
    metric_name: str
    base_metric: float
    base_loss: float
    n_examples: int
    rows: tuple[AblationRow, ...]
    provenance: dict = field(default_factory=dict)
    test: str = ""                      # the paired test used ("" when none could be run)
    note: str = field(default="", metadata=json_field("multiple_comparisons"))
    # derived, written for readers of the file: the level and how many heads pass it
    alpha: float = field(default=ALPHA, init=False)
    n_significant_raw: int = field(default=0, init=False)
    n_significant_holm: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._derive(n_significant_raw=self.n_significant(False), n_significant_holm=self.n_significant(True))

    def n_significant(self, adjusted: bool = True, alpha: float = ALPHA) -> int:
        """Heads whose removal changes the metric at ``p < alpha`` (Holm-adjusted, or raw)."""
        key = "p_holm" if adjusted else "p_value"
        return sum(1 for r in self.rows if getattr(r, key) is not None and getattr(r, key) < alpha)



def _with_tests(rows: list[AblationRow], comparisons: list, n_examples: int) -> tuple[list[AblationRow], str, str]:
    """Rows with their paired tests and Holm-adjusted p-values; the test used and the note."""
    tested = [i for i, c in enumerate(comparisons) if c is not None]
    if not tested:
        few = too_few(n_examples)
        return rows, "", (f"No paired test: {few}." if few else
                          "No paired test: the evaluations kept no per-example results.")
    adjusted = dict(zip(tested, holm([comparisons[i].p_value for i in tested])))
    out = []
    for i, row in enumerate(rows):
        c = comparisons[i]
        if c is not None:
            row = replace(row, delta_low=c.low, delta_high=c.high, p_value=c.p_value, p_holm=adjusted[i],
                          significant=adjusted[i] < ALPHA)
        out.append(row)
    raw = sum(1 for i in tested if comparisons[i].p_value < ALPHA)
    held = sum(1 for i in tested if adjusted[i] < ALPHA)
    note = (f"{len(tested)} heads tested, one comparison each against the unpruned model: {raw} differ at "
            f"p < {ALPHA} before correction, {held} after Holm–Bonferroni adjustment for {len(tested)} "
            f"comparisons ('significant' uses the adjusted p-value).")
    return out, comparisons[tested[0]].test, note


def ablation_table(loaded, task, data, *, base_mask: HeadMask | None = None, batch_size: int = 64,
                   progress: ProgressCallback | None = None, tests: bool = True) -> AblationResult:
    """Evaluate the model with each (still kept) head removed alone.

    With ``tests`` each row gets a paired test against the base model on the same examples (exact
    McNemar for accuracy-like metrics, paired bootstrap otherwise), a 95 % interval of its delta
    and a Holm-adjusted p-value; the ``ablation`` scorer, which only ranks, skips them.
    """
    base_mask = base_mask or HeadMask.full(loaded.layout)
    base = task.evaluate(loaded, data, base_mask, batch_size=batch_size)
    heads = [h for h in loaded.layout.heads() if base_mask.kinds[h[0]][h[1]][h[2]] == 1]
    metric, refs = get_metric(base.metric_name), task.references(data)
    rows, comparisons = [], []
    for i, (kind, layer, head) in enumerate(heads):
        res = task.evaluate(loaded, data, base_mask.toggled(kind, layer, head), batch_size=batch_size)
        rows.append(AblationRow(kind, layer, head, res.metric, res.metric - base.metric, res.loss,
                                res.loss - base.loss))
        comparisons.append(compare(metric, base, res, refs, seed=i) if tests else None)
        report(progress, "ablation", i + 1, len(heads), f"{kind} L{layer} H{head}")
    rows, test, note = _with_tests(rows, comparisons, data.n_examples)
    return AblationResult(base.metric_name, base.metric, base.loss, data.n_examples, tuple(rows),
                          provenance(loaded, task=task.name, split=data.split, n_examples=data.n_examples,
                                     method="ablation", settings={"base_heads_removed": len(base_mask.removed()),
                                                                  "test": test, "alpha": ALPHA,
                                                                  "adjustment": "holm"}),
                          test, note)


@dataclass(frozen=True)
class OnePerLayerRow(JsonRecord):
    kind: str
    layer: int
    kept_head: int
    metric: float
    delta_metric: float
    loss: float


@dataclass(frozen=True)
class OnePerLayerResult(JsonRecord):
    _malformed = "The one-per-layer file is malformed; run the experiment again"

    format: str = field(default=ONE_PER_LAYER_FORMAT, init=False)
    metric_name: str
    base_metric: float
    n_examples: int
    selection: str                 # "scores:<method>" or "search"
    rows: tuple[OnePerLayerRow, ...]
    all_layers_metric: float       # every layer reduced to its best head at once
    provenance: dict = field(default_factory=dict)


def _only_head(full: HeadMask, kind: str, layer: int, head: int) -> HeadMask:
    rows = list(full.kinds[kind])
    rows[layer] = tuple(1 if h == head else 0 for h in range(len(rows[layer])))
    return HeadMask({**full.kinds, kind: tuple(rows)})


def one_head_per_layer(loaded, task, data, *, scores: ScoreResult | None = None, batch_size: int = 64,
                       progress: ProgressCallback | None = None) -> OnePerLayerResult:
    """For each layer alone, keep only its best head and measure the metric (Michel et al., Table 2).

    The best head is the highest-scoring one when ``scores`` are given, else found by search
    (evaluate every choice; as many evaluations as there are heads).
    """
    full = HeadMask.full(loaded.layout)
    base = task.evaluate(loaded, data, None, batch_size=batch_size)
    layers = [(k, l, n) for k, rows in loaded.layout.kinds.items() for l, n in enumerate(rows) if n > 0]
    rows, best_mask, done = [], full, 0
    total = len(layers) if scores is not None else sum(n for _, _, n in layers)
    metric = get_metric(base.metric_name)
    for kind, layer, n in layers:
        if scores is not None:
            values = scores.scores.kinds[kind][layer]
            best = max(range(n), key=lambda h: values[h])
            res = task.evaluate(loaded, data, _only_head(full, kind, layer, best), batch_size=batch_size)
            done += 1
            report(progress, "one-per-layer", done, total)
        else:
            best, res = None, None
            for h in range(n):
                r = task.evaluate(loaded, data, _only_head(full, kind, layer, h), batch_size=batch_size)
                if res is None or (metric.sort_key(r.metric), -r.loss) > (metric.sort_key(res.metric), -res.loss):
                    best, res = h, r
                done += 1
                report(progress, "one-per-layer", done, total)
        rows.append(OnePerLayerRow(kind, layer, best, res.metric, res.metric - base.metric, res.loss))
        kept = list(best_mask.kinds[kind])
        kept[layer] = tuple(1 if h == best else 0 for h in range(n))
        best_mask = HeadMask({**best_mask.kinds, kind: tuple(kept)})
    all_res = task.evaluate(loaded, data, best_mask, batch_size=batch_size)
    selection = f"scores:{scores.method}" if scores is not None else "search"
    return OnePerLayerResult(base.metric_name, base.metric, data.n_examples, selection, tuple(rows),
                             all_res.metric, provenance(loaded, task=task.name, split=data.split,
                                                        n_examples=data.n_examples, method="one-head-per-layer",
                                                        settings={"selection": selection}))


@dataclass(frozen=True)
class CurvePoint(JsonRecord):
    fraction_removed: float
    heads_removed: int
    metric: float
    loss: float
    mask: dict                      # HeadMask.to_json() (of the first seed when there are several)
    low: float | None = None        # 95 % interval of metric over the evaluation examples
    high: float | None = None
    per_example: tuple = ()         # EvalResult.per_example of this point (one seed only)
    sd: float | None = None         # over seeds: sample standard deviation of metric (metric = the mean)
    band_low: float | None = None   # over seeds: lowest and highest metric
    band_high: float | None = None
    seed_metrics: tuple = ()        # over seeds: the metric of each seed
    # with repair (``curve --repair``, pruning_core.compress.curve): the same mask after least-squares tuning
    repaired_metric: float | None = None
    repaired_loss: float | None = None
    repaired_low: float | None = None   # its 95 % interval
    repaired_high: float | None = None


@dataclass(frozen=True)
class CurveResult(JsonRecord):
    _malformed = "The curve file is malformed; run the curve again"

    format: str = field(default=CURVE_FORMAT, init=False)
    method: str
    metric_name: str
    step: float
    rescore: bool
    total_heads: int
    n_examples: int
    points: tuple[CurvePoint, ...]
    provenance: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = ()     # the scorer seeds averaged (several for a band of `random`)

    @property
    def has_band(self) -> bool:
        return len(self.seeds) > 1



def removal_schedule(total: int, step: float) -> list[int]:
    """Cumulative numbers of heads removed at each point: 0, step, 2*step, ..., all."""
    if not 0 < step <= 1:
        raise HeadpruneError(f"--step must be a fraction in (0, 1], e.g. 0.1 for 10 % per step; got {step}.")
    n_steps = math.ceil(round(1 / step, 9))
    counts = sorted({min(total, round(i * step * total)) for i in range(n_steps + 1)} | {0, total})
    return counts


def removal_counts(total: int, fractions: Sequence[float]) -> list[int]:
    """Cumulative numbers of heads removed at the given shares of ``total`` (rounded; 0 always first)."""
    bad = [f for f in fractions if not 0 <= f <= 1]
    if bad:
        raise HeadpruneError(f"Shares of heads to remove must lie in [0, 1], e.g. 0,0.1,0.25,0.5; got {bad}.")
    return sorted({round(f * total) for f in fractions} | {0})


def pruning_curve(loaded, task, data, scorer, score_config, *, step: float = 0.1, rescore: bool = False,
                  initial_scores: ScoreResult | None = None, batch_size: int = 64,
                  progress: ProgressCallback | None = None, protected: frozenset = frozenset(),
                  fractions: Sequence[float] | None = None) -> CurveResult:
    """Remove heads in order of increasing importance, ``step`` of all heads at a time (or, with
    ``fractions``, at just those shares of all heads, e.g. ``(0, 0.1, 0.25, 0.5)`` for a costly model;
    shares past the heads that are not ``protected`` stop at removing all of those).

    Without ``rescore`` the ranking is computed once (Michel et al.'s paper); with it, the
    remaining heads are re-scored under the current mask after each step (the HF bertology port).
    ``protected`` heads (``roles.protected_heads``) are never removed: the curve removes the other heads,
    ``step`` of them at a time, and its last point keeps only the protected ones.
    """
    layout = loaded.layout
    total = layout.total_heads
    removable = total - len(protected)
    schedule = (sorted({min(c, removable) for c in removal_counts(total, fractions)}) if fractions is not None
                else removal_schedule(removable, step))
    scores = initial_scores or scorer.score(loaded, task, score_config)
    order = [h for h in scores.ranking_scores.ranked(seed=score_config.seed) if h not in protected]
    mask = HeadMask.full(layout)
    removed: list = []
    points = []
    for i, count in enumerate(schedule):
        while len(removed) < count:
            removed.append(order.pop(0))
        mask = HeadMask.from_removed(layout, removed)
        res: EvalResult = task.evaluate(loaded, data, mask, batch_size=batch_size)
        low, high = res.interval if res.interval is not None else (None, None)
        points.append(CurvePoint(len(removed) / total if total else 0.0, len(removed), res.metric, res.loss,
                                 mask.to_json(), low, high, tuple(res.per_example)))
        report(progress, f"curve:{scorer.name}", i + 1, len(schedule), f"{len(removed)} of {total} heads removed")
        if rescore and 0 < len(removed) < total and i + 1 < len(schedule):
            fresh = scorer.score(loaded, task, score_config, mask=mask)
            order = [h for h in fresh.ranking_scores.ranked(mask=mask, seed=score_config.seed) if h not in protected]
    settings = {"step": step if fractions is None else None, "fractions": None if fractions is None else list(fractions),
                "rescore": rescore, "score_split": score_config.split, "protected": len(protected),
                "score_limit": score_config.limit, "score_n": scores.provenance.get("n_examples"),
                "eval_split": data.split, "eval_n": data.n_examples, "normalize": scores.normalize,
                "seed": score_config.seed}
    return CurveResult(scorer.name, res.metric_name, step, rescore, total, data.n_examples, tuple(points),
                       provenance(loaded, task=task.name, split=data.split, n_examples=data.n_examples,
                                  method=scorer.name, settings=settings), (score_config.seed,))


def seeded_curves(loaded, task, data, scorer, score_config, seeds: int, **kwargs) -> CurveResult:
    """:func:`pruning_curve` for ``seeds`` seeds (``score_config.seed``, +1, ...) combined per point.

    Each point's metric is the mean over the seeds, with ``sd``, the min–max band and each seed's
    value; its interval is a bootstrap over examples of the seed-mean (per-example metrics only).
    """
    if seeds < 1:
        raise HeadpruneError(f"seeds must be at least 1, got {seeds}.")
    curves = [pruning_curve(loaded, task, data, scorer, replace(score_config, seed=score_config.seed + i), **kwargs)
              for i in range(seeds)]
    return combine_seeds(curves) if seeds > 1 else curves[0]


def combine_seeds(curves: list[CurveResult]) -> CurveResult:
    """One curve from curves of the same method and schedule under different seeds (see seeded_curves)."""
    first = curves[0]
    metric = get_metric(first.metric_name)
    points = []
    for j, p in enumerate(first.points):
        column = [c.points[j] for c in curves]
        values = [q.metric for q in column]
        mean, sd = mean_sd(values)
        low = high = None
        if metric.per_example and all(len(q.per_example) == first.n_examples for q in column):
            scores = np.mean([np.asarray(q.per_example, dtype=float) for q in column], axis=0)   # [n]
            low, high = bootstrap_interval(lambda idx: float(scores[idx].mean()), scores.size)
        points.append(CurvePoint(p.fraction_removed, p.heads_removed, mean, float(np.mean([q.loss for q in column])),
                                 p.mask, low, high, (), sd, min(values), max(values), tuple(values)))
    seeds = tuple(s for c in curves for s in c.seeds)
    settings = {**first.provenance.get("settings", {}), "seeds": list(seeds), "seed": None}
    return replace(first, points=tuple(points), seeds=seeds,
                   provenance={**first.provenance, "settings": settings})
