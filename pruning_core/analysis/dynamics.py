"""Training dynamics (Michel et al. 2019, §6): how head importance and pruning tolerance evolve
while a model is fine-tuned.

:func:`training_dynamics` fine-tunes with :func:`~pruning_core.tasks.finetune.finetune_classifier` (the loop,
schedule and seed of ``headprune prepare``) and at each requested step (``0`` = before any update) measures
the gradient importance I_h on a subset of the scoring split, the unpruned metric and a short pruning curve
by that checkpoint's I_h, and the Spearman correlation of its I_h with the final and the previous
checkpoint's. Measuring does not change the run (eval mode, gradients only with respect to head outputs,
no random numbers), so the last checkpoint of the default is the model ``prepare`` builds. The result is
``headprune.dynamics/1`` JSON with provenance.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from pruning_core.core.io.codec import DYNAMICS_FORMAT, JsonRecord
from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.core.errors import HeadpruneError
from pruning_core.evaluation.experiments import CurvePoint
from pruning_core.tasks.finetune import FinetuneConfig, finetune_classifier
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.sources.loading import LoadedModel, weights_hash_of_module
from pruning_core.zoo.default import FINETUNE
from pruning_core.core.progress import ProgressCallback, ProgressEvent, report
from pruning_core.evaluation.results import provenance
from pruning_core.evaluation.stats import spearman

PRETRAINED = "pretrained"          # the raw MiniLM-L6 that `headprune prepare` fine-tunes
DEFAULT_STEPS = (0, 50, 100, 250, 506)


@dataclass(frozen=True)
class DynamicsConfig(JsonRecord):
    """What to measure, and when. The fine-tuning settings default to ``prepare``'s, so step 506 is its end."""

    steps: tuple[int, ...] = DEFAULT_STEPS     # optimiser steps to measure at, increasing; 0 = before training
    fractions: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6)   # shares of all heads removed on each curve
    score_split: str = "train"
    score_limit: int | None = 256              # examples I_h is computed on (the first N of the split)
    eval_split: str = "validation"
    eval_limit: int | None = 400               # examples the curve is evaluated on
    batch_size: int = 64                       # for scoring and evaluation
    finetune: FinetuneConfig = FINETUNE

    def __post_init__(self) -> None:
        steps = tuple(self.steps)
        if not steps or any(not isinstance(s, int) or s < 0 for s in steps) or list(steps) != sorted(set(steps)):
            raise HeadpruneError(f"steps must be increasing whole numbers of at least 0, like 0,50,100; got {steps}.")
        if not self.fractions or any(not 0 <= f <= 1 for f in self.fractions) \
                or list(self.fractions) != sorted(set(self.fractions)):
            raise HeadpruneError(f"fractions must be increasing shares in [0, 1], like 0,0.2,0.4; "
                                 f"got {tuple(self.fractions)}.")
        for name in ("score_limit", "eval_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise HeadpruneError(f"{name} must be a positive number of examples (or None), got {value}.")
        if self.batch_size < 1:
            raise HeadpruneError(f"batch_size must be at least 1, got {self.batch_size}.")



@dataclass(frozen=True)
class Checkpoint(JsonRecord):
    """The model at one optimiser step."""

    step: int
    epoch: float                    # epochs completed at this step
    train_loss: float | None        # mean training loss of the steps since the previous checkpoint
    metric: float                   # unpruned, on the evaluation subset
    loss: float
    scores: dict                    # raw I_h, HeadScores.to_json(): {kind: [[per head] per layer]}
    points: tuple[CurvePoint, ...]  # the pruning curve by this checkpoint's I_h
    rank_corr_final: float | None   # Spearman of this I_h with the last checkpoint's (None: undefined)
    rank_corr_previous: float | None
    seconds: float                  # time spent measuring this checkpoint

    @property
    def head_scores(self) -> HeadScores:
        return HeadScores.from_lists(self.scores)


@dataclass(frozen=True)
class DynamicsResult(JsonRecord):
    _malformed = "The dynamics file is incomplete or malformed; re-create it with `headprune dynamics --out FILE`"

    format: str = field(default=DYNAMICS_FORMAT, init=False)
    metric_name: str
    total_steps: int                # steps of the whole fine-tuning schedule
    total_heads: int
    n_score_examples: int
    n_eval_examples: int
    checkpoints: tuple[Checkpoint, ...]
    config: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)



def _flat(scores: HeadScores) -> list[float]:
    """Per-layer normalised scores (the ranking the curve uses), flattened in layout order."""
    norm = scores.normalized_per_layer()
    return [norm.get(h) for h in scores.layout.heads()]


# -- the run ---------------------------------------------------------------------------------------

def _as_loaded(model, tokenizer, model_id: str) -> LoadedModel:
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=tokenizer, model_id=model_id, source="memory",
                       task_type=adapter_for(model.config.model_type).task_type,
                       arch=adapter_for(model.config.model_type).name, weights_sha256="", sites=sites,
                       layout=layout_of(sites))


def _measure(loaded: LoadedModel, task, score_data, eval_data, config: DynamicsConfig) -> tuple:
    """I_h on ``score_data``, then the unpruned metric and the curve on ``eval_data``."""
    from pruning_core.scoring.gradient import per_token_importance

    raw = per_token_importance(loaded, task, score_data, batch_size=config.batch_size)
    layout = loaded.layout
    order = raw.normalized_per_layer().ranked(seed=config.finetune.seed)
    points, base = [], None
    for fraction in config.fractions:
        count = round(fraction * layout.total_heads)
        mask = HeadMask.from_removed(layout, order[:count])
        res = task.evaluate(loaded, eval_data, mask, batch_size=config.batch_size)
        if count == 0:
            base = res                      # the unpruned model: no second evaluation needed
        points.append(CurvePoint(fraction, count, res.metric, res.loss, mask.to_json()))
    if base is None:
        base = task.evaluate(loaded, eval_data, None, batch_size=config.batch_size)
    return raw, base, tuple(points)


def training_dynamics(model, tokenizer, task, config: DynamicsConfig = DynamicsConfig(), *,
                      model_id: str = PRETRAINED, progress: ProgressCallback | None = None) -> DynamicsResult:
    """Fine-tune ``model`` (in place) on ``task``'s train split and measure it at ``config.steps``.

    Args:
        model: a sequence classifier to fine-tune (e.g. from :func:`pretrained_classifier`).
        tokenizer: its tokenizer.
        task: a classification Task (its ``train`` split is fine-tuned on).
        config: see :class:`DynamicsConfig`; a step past the end of the schedule is an error.
        progress: ``dynamics:train`` events per step and ``dynamics:measure`` per checkpoint.
    """
    loaded = _as_loaded(model, tokenizer, model_id)
    task.check_model(loaded)
    if loaded.layout.total_heads == 0:
        raise HeadpruneError(f"Model {model_id!r} has no attention heads to measure.")
    examples = task.load("train")
    steps_per_epoch = -(-len(examples) // config.finetune.batch_size)
    total = config.finetune.max_steps or steps_per_epoch * config.finetune.epochs      # as finetune counts
    if config.steps[-1] > total:
        raise HeadpruneError(f"Step {config.steps[-1]} is past the end of fine-tuning ({total} steps: "
                             f"{len(examples)} examples, batch {config.finetune.batch_size}, "
                             f"{config.finetune.epochs} epochs). Give steps up to {total}.")
    max_length = config.finetune.max_length
    score_data = task.encode(loaded, config.score_split, config.score_limit, max_length=max_length)
    eval_data = task.encode(loaded, config.eval_split, config.eval_limit, max_length=max_length)
    measured: list[tuple[int, HeadScores, object, tuple, float, str]] = []

    def on_step(step: int, m) -> bool:
        if step in config.steps:
            start = time.perf_counter()
            m.eval()                        # no dropout; finetune restores train mode
            raw, base, points = _measure(loaded, task, score_data, eval_data, config)
            measured.append((step, raw, base, points, time.perf_counter() - start, weights_hash_of_module(m)))
            report(progress, "dynamics:measure", len(measured), len(config.steps), f"step {step}")
        return step >= config.steps[-1]

    train_progress = None if progress is None else \
        (lambda e: progress(ProgressEvent("dynamics:train", e.done, e.total, e.message)))
    stats = finetune_classifier(model, tokenizer, examples, config.finetune, progress=train_progress,
                                on_step=on_step)
    final = _flat(measured[-1][1])
    checkpoints, previous, last_step = [], None, 0
    for step, raw, base, points, seconds, _ in measured:
        flat = _flat(raw)
        window = stats.losses[last_step:step]
        checkpoints.append(Checkpoint(step, step / steps_per_epoch, sum(window) / len(window) if window else None,
                                      base.metric, base.loss, raw.to_json(), points, spearman(flat, final),
                                      spearman(flat, previous) if previous is not None else None, seconds))
        previous, last_step = flat, step
    loaded.weights_sha256 = measured[-1][5]
    settings = {**config.to_json(), "finetune_stats": stats.to_json(),
                "weights_sha256_by_step": {str(s): h for s, _, _, _, _, h in measured}}
    return DynamicsResult(base.metric_name, total, loaded.layout.total_heads, score_data.n_examples,
                          eval_data.n_examples, tuple(checkpoints), config.to_json(),
                          provenance(loaded, task=task.name, split=config.eval_split, n_examples=eval_data.n_examples,
                                     method="dynamics:gradient", settings=settings))


def pretrained_classifier(spec: str = PRETRAINED, task=None):
    """``(model, tokenizer, model_id)`` to fine-tune: by default (``"pretrained"``) the raw MiniLM-L6
    with prepare's seeded fresh head; else a classifier folder or hub id loaded with :func:`load_model`."""
    if spec == PRETRAINED:
        from pruning_core.zoo.default import base_classifier
        model, tokenizer = base_classifier(attn_implementation="eager")
        return model, tokenizer, PRETRAINED
    from pruning_core.modeling.sources.loading import load_model
    loaded = load_model(spec, device="cpu")
    if task is not None:
        task.check_model(loaded)
    return loaded.model, loaded.tokenizer, loaded.model_id


def summary_rows(result: DynamicsResult) -> list[dict]:
    """One row per checkpoint: step, unpruned metric, metric at each fraction removed, rank correlations."""
    rows = []
    for c in result.checkpoints:
        row = {"step": c.step, "epoch": round(c.epoch, 3), "train_loss": c.train_loss, "metric": c.metric}
        row.update({f"removed_{p.fraction_removed:.0%}": p.metric for p in c.points})
        row.update(rank_corr_final=c.rank_corr_final, rank_corr_previous=c.rank_corr_previous)
        rows.append(row)
    return rows


def format_table(result: DynamicsResult) -> str:
    """The checkpoints as a plain-text table: metric at each share removed, and the rank correlations."""
    from pruning_core.evaluation.metrics import get_metric
    metric = get_metric(result.metric_name)
    fractions = [p.fraction_removed for p in result.checkpoints[0].points] if result.checkpoints else []
    corr = lambda v: "   -  " if v is None else f"{v:+.3f}"          # noqa: E731
    lines = [f"{result.metric_name} on {result.n_eval_examples} examples by % of heads removed "
             f"(I_h on {result.n_score_examples}); rho = Spearman of I_h with the final / previous checkpoint",
             "  step  epoch  " + "  ".join(f"{f:>6.0%}" for f in fractions) + "   rho_final  rho_prev"]
    for c in result.checkpoints:
        values = "  ".join(f"{metric.format_plain(p.metric):>6}" for p in c.points)
        lines.append(f"  {c.step:4d}  {c.epoch:5.2f}  {values}   {corr(c.rank_corr_final):>9}  {corr(c.rank_corr_previous):>8}")
    return "\n".join(lines)


__all__ = ["DEFAULT_STEPS", "DYNAMICS_FORMAT", "PRETRAINED", "Checkpoint", "DynamicsConfig", "DynamicsResult",
           "format_table", "pretrained_classifier", "spearman", "summary_rows", "training_dynamics"]
