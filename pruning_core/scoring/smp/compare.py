"""Does single-shot pruning before fine-tuning work? Five conditions side by side, one run.

From the same pre-trained model, with identical fine-tuning settings: ``a_full`` (the full model
fine-tuned), ``b_smp`` (SMP keeps the top half of every layer, label-free, pruned physically, then
fine-tuned), ``c_random_<s>`` (a random half, seed ``s``), ``d_gradient`` (the fine-tuned model of (a) pruned
to the top half by Michel's I_h, no retraining) and ``e_gradient_retrained`` ((d) fine-tuned again). Each
reports accuracy on ``eval_split``, fine-tuning wall and CPU time and peak memory
(:mod:`pruning_core.tasks.finetune`); each runs in a fresh process by default, so one condition's freed
memory cannot hide in another's peak (``isolate=False`` for tests).
"""
from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from pruning_core.core.io.codec import SMP_COMPARE_FORMAT, JsonRecord, check_format
from pruning_core.core.errors import DataError, FormatError, HeadpruneError
from pruning_core.tasks.finetune import FinetuneConfig
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.core.progress import ProgressCallback, ProgressEvent, report

SHORT = {"a_full": "(a) full", "b_smp": "(b) SMP", "c_random": "(c) random", "d_gradient": "(d) I_h, no retrain",
         "e_gradient_retrained": "(e) I_h + retrain"}
FINETUNE_STATS = ("seconds", "cpu_seconds", "peak_memory_bytes", "memory_increase_bytes")   # summarised per group
LABELS = {
    "a_full": "(a) full model, fine-tuned",
    "b_smp": "(b) SMP 50 % per layer, pruned, then fine-tuned",
    "c_random": "(c) random 50 % per layer, pruned, then fine-tuned",
    "d_gradient": "(d) fine-tuned, then gradient I_h 50 % per layer pruned, no retraining",
    "e_gradient_retrained": "(e) = (d), then fine-tuned again",
}


@dataclass(frozen=True)
class CompareConfig(JsonRecord):
    """One comparison run (every condition shares these settings)."""

    model: str = "pretrained"          # the pre-trained encoder ("pretrained" = the raw MiniLM-L6)
    task: str = "movie-sentiment"
    pruner: str | None = None          # SMP pruner folder (None: the one `headprune smp train` saved)
    train_limit: int | None = None     # fine-tune on the first N training examples (None: all)
    score_limit: int = 1024            # training examples SMP (texts) and the gradient I_h (labels) score
    eval_split: str = "test"
    keep_fraction: float = 0.5         # share of heads kept in every layer
    random_seeds: int = 3              # random masks for (c)
    finetune: FinetuneConfig = FinetuneConfig()
    seed: int = 0                      # classifier initialisation and random masks (seed, seed+1, ...)
    isolate: bool = True               # one fresh process per condition (clean peak memory)
    threads: int | None = None         # torch CPU threads in each isolated condition (None: torch's choice)
    eval_batch_size: int = 64

    def __post_init__(self) -> None:
        if not 0 < self.keep_fraction < 1:
            raise HeadpruneError(f"keep_fraction must be between 0 and 1 (0.5 keeps half); got {self.keep_fraction}.")
        if self.random_seeds < 0 or self.score_limit < 1:
            raise HeadpruneError(f"random_seeds ({self.random_seeds}) must be >= 0 and score_limit "
                                 f"({self.score_limit}) >= 1.")



@dataclass(frozen=True)
class ConditionResult(JsonRecord):
    """One row of the comparison."""

    _malformed = "The comparison file has malformed conditions; re-run `headprune smp compare`"

    key: str                           # a_full, b_smp, c_random_0, ..., d_gradient, e_gradient_retrained
    group: str                         # a_full, b_smp, c_random, d_gradient, e_gradient_retrained
    metric_name: str
    metric: float                      # on the evaluation split
    loss: float
    n_eval: int
    heads_kept: int
    heads_total: int
    parameters: int
    attention_parameters: int
    finetune: dict | None              # FinetuneStats.to_json(), None when not fine-tuned (d)
    selection_seconds: float | None    # time to choose the mask (SMP or gradient scoring)
    eval_seconds: float
    mask: dict | None                  # {kind: [[1, 0, ...], ...]}, None = all heads
    seed: int | None = None            # the random mask's seed (c)

    def __post_init__(self) -> None:
        if self.group not in LABELS:
            raise FormatError(f"condition {self.key[:40]!r} has group {self.group[:40]!r}, not one of {', '.join(LABELS)}")
        get_metric(self.metric_name)
        stats = self.finetune or {}
        if not isinstance(stats, dict) or any(not _number(stats.get(k, 0)) for k in FINETUNE_STATS):
            raise FormatError(f"condition {self.key[:40]!r} has fine-tuning figures that are not numbers")

    @property
    def label(self) -> str:
        return LABELS[self.group] + (f" (seed {self.seed})" if self.seed is not None else "")


@dataclass
class CompareResult:
    conditions: list[ConditionResult]
    config: dict
    provenance: dict = field(default_factory=dict)
    seconds: float = 0.0

    def rows(self) -> list[dict]:
        """One flat row per run (masks left out), for tables."""
        out = []
        for c in self.conditions:
            ft = c.finetune or {}
            out.append({"key": c.key, "label": c.label, c.metric_name: c.metric, "loss": c.loss,
                        "heads_kept": c.heads_kept, "heads_total": c.heads_total, "parameters": c.parameters,
                        "finetune_seconds": ft.get("seconds"), "finetune_cpu_seconds": ft.get("cpu_seconds"),
                        "finetune_peak_memory_mib": _mib(ft.get("peak_memory_bytes")),
                        "finetune_memory_increase_mib": _mib(ft.get("memory_increase_bytes")),
                        "finetune_steps": ft.get("steps"), "selection_seconds": c.selection_seconds})
        return out

    def to_json(self) -> dict:
        # by hand: the summary rows are derived when written, from a list that grows while the run goes on
        return {"format": SMP_COMPARE_FORMAT, "config": self.config, "seconds": self.seconds,
                "conditions": [c.to_json() for c in self.conditions], "summary": summary_rows(self),
                "provenance": self.provenance}

    @classmethod
    def from_json(cls, data: dict) -> "CompareResult":
        check_format(data, SMP_COMPARE_FORMAT, "the comparison file")
        if not isinstance(data.get("conditions"), list) or not data["conditions"]:
            raise FormatError("The comparison file holds no conditions; re-run `headprune smp compare`.")
        conds = [ConditionResult.from_json(c) for c in data["conditions"]]
        return cls(conds, dict(data.get("config") or {}), dict(data.get("provenance") or {}),
                   float(data.get("seconds", 0.0)))


def _number(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _mib(n: int | None) -> float | None:
    return None if n is None else n / 2**20


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def summary_rows(result: CompareResult) -> list[dict]:
    """One row per group (random seeds averaged): metric, fine-tuning seconds, CPU seconds, peak memory.

    ``delta_vs_full_points``: the metric minus that of (a), in points (x 100 for accuracy-like metrics).
    """
    rows = []
    full = [c.metric for c in result.conditions if c.group == "a_full"]
    for group in LABELS:
        members = [c for c in result.conditions if c.group == group]
        if not members:
            continue
        row = {"group": group, "label": LABELS[group], "n": len(members), "heads_kept": members[0].heads_kept,
               "heads_total": members[0].heads_total, "parameters": members[0].parameters}
        row["metric"], row["metric_sd"] = _mean_sd([c.metric for c in members])
        metric = get_metric(members[0].metric_name)
        row["delta_vs_full_points"] = metric.delta(row["metric"], full[0]) if full else None
        row["short"] = SHORT[group] + (f" x{len(members)}" if len(members) > 1 else "")
        stats = [c.finetune for c in members if c.finetune]
        for key in FINETUNE_STATS:
            vals = [s[key] for s in stats if s.get(key) is not None]
            row[f"finetune_{key}"], row[f"finetune_{key}_sd"] = _mean_sd(vals) if vals else (None, None)
        row["finetune_peak_memory_mib"] = _mib(row["finetune_peak_memory_bytes"])
        row["finetune_memory_increase_mib"] = _mib(row["finetune_memory_increase_bytes"])
        sel = [c.selection_seconds for c in members if c.selection_seconds is not None]
        row["selection_seconds"] = statistics.fmean(sel) if sel else None
        row["metric_name"] = members[0].metric_name
        rows.append(row)
    return rows


def format_table(result: CompareResult) -> str:
    """The comparison as a text table (one line per group; random seeds as mean ± sd)."""
    def mb(v):
        return "—" if v is None else f"{v / 2**20:,.0f}"

    def num(v, fmt):
        return "—" if v is None else format(v, fmt)

    rows = summary_rows(result)
    name = rows[0]["metric_name"] if rows else "metric"
    lines = [f"{'condition':64s} {'heads':>7s} {'params':>8s} {name:>13s} {'ft wall s':>10s} {'ft CPU s':>9s} "
             f"{'peak MiB':>9s} {'+MiB':>6s}"]
    for r in rows:
        metric = f"{r['metric']:.4f}" + (f"±{r['metric_sd']:.4f}" if r["n"] > 1 else "")
        label = r["label"] + (f" x{r['n']}" if r["n"] > 1 else "")
        lines.append(f"{label:64s} "
                     f"{r['heads_kept']:>3d}/{r['heads_total']:<3d} {r['parameters'] / 1e6:>7.2f}M {metric:>13s} "
                     f"{num(r['finetune_seconds'], '.0f'):>10s} {num(r['finetune_cpu_seconds'], '.0f'):>9s} "
                     f"{mb(r['finetune_peak_memory_bytes']):>9s} {mb(r['finetune_memory_increase_bytes']):>6s}")
    return "\n".join(lines)


# -- one condition ---------------------------------------------------------------------------------

def _reset_classifier(model: torch.nn.Module, num_labels: int, seed: int) -> None:
    """Give the classifier ``num_labels`` outputs and a seeded initialisation (same for every condition)."""
    head = getattr(model, "classifier", None)
    layer = head if isinstance(head, torch.nn.Linear) else getattr(head, "out_proj", None)
    if not isinstance(layer, torch.nn.Linear):
        raise HeadpruneError(f"{type(model).__name__} has no linear classifier to initialise; SMP fine-tuning "
                             "supports BERT-like and DistilBERT classifiers.")
    std = getattr(model.config, "initializer_range", 0.02)
    gen = torch.Generator().manual_seed(seed)
    new = torch.nn.Linear(layer.in_features, num_labels, bias=layer.bias is not None)
    with torch.no_grad():
        new.weight.copy_(torch.randn(new.weight.shape, generator=gen) * std)
        if new.bias is not None:
            new.bias.zero_()
    if head is layer:
        model.classifier = new.to(layer.weight.device)
    else:
        head.out_proj = new.to(layer.weight.device)
    model.config.num_labels = num_labels
    model.num_labels = num_labels


def run_condition(spec: dict, progress: ProgressCallback | None = None) -> dict:
    """Load, (choose a mask,) prune, (fine-tune,) evaluate and (save) one model; a JSON-able dict back.

    ``spec`` keys: ``model`` (spec or folder), ``task``, ``eval_split``, ``mask`` (mask JSON or None),
    ``gradient_mask`` (choose the mask by I_h here), ``keep_fraction``, ``score_limit``,
    ``finetune`` (FinetuneConfig fields, or None), ``train_limit``, ``reset_classifier_seed``
    (int or None), ``save`` (folder or None), ``eval_batch_size``, ``device``, ``max_length``.
    """
    from pruning_core.tasks.finetune import finetune_classifier
    from pruning_core.modeling.sources.loading import load_model, save_pruned
    from pruning_core.modeling.pruning import attention_parameter_count, parameter_count, prune_heads
    from pruning_core.scoring import ScoreConfig, get_scorer
    from pruning_core.tasks import get_task
    from pruning_core.modeling.presets import keep_top_fraction_per_layer
    from pruning_core.scoring.smp.train import PRETRAINED

    task = get_task(spec["task"])
    if spec["model"] == PRETRAINED:
        from pruning_core.zoo.default import base_model_dir
        where = str(base_model_dir())
    else:
        where = spec["model"]
    loaded = load_model(where, device=spec.get("device", "cpu"), attn_implementation="sdpa")
    if spec.get("reset_classifier_seed") is not None:
        _reset_classifier(loaded.model, task.num_labels or 2, spec["reset_classifier_seed"])
    selection = None
    mask = HeadMask.from_lists(spec["mask"]) if spec.get("mask") else None
    ft_cfg = FinetuneConfig(**spec["finetune"]) if spec.get("finetune") else None
    max_length = spec.get("max_length", 64)
    if spec.get("gradient_mask"):
        start = time.perf_counter()
        scored = get_scorer("gradient").score(loaded, task, ScoreConfig(split="train", limit=spec["score_limit"],
                                                                        max_length=max_length), progress=progress)
        mask = keep_top_fraction_per_layer(scored.scores, spec["keep_fraction"])
        selection = time.perf_counter() - start
    if mask is not None and not mask.is_full():
        loaded = loaded.derive(prune_heads(loaded.model, mask))
    stats = None
    if ft_cfg is not None:
        examples = task.load("train", spec.get("train_limit"))
        stats = finetune_classifier(loaded.model, loaded.tokenizer, examples, ft_cfg, progress=progress).to_json()
    data = task.encode(loaded, spec["eval_split"], max_length=max_length)
    res = task.evaluate(loaded, data, batch_size=spec.get("eval_batch_size", 64), progress=progress)
    if spec.get("save"):
        save_pruned(loaded.model, loaded.tokenizer, spec["save"], shortlist=loaded.shortlist)
    total = (mask.layout if mask is not None else loaded.layout).total_heads
    return {"metric_name": res.metric_name, "metric": res.metric, "loss": res.loss, "n_eval": res.n_examples,
            "heads_kept": loaded.layout.total_heads, "heads_total": total,
            "parameters": parameter_count(loaded.model), "attention_parameters": attention_parameter_count(loaded.model),
            "finetune": stats, "selection_seconds": selection, "eval_seconds": res.seconds,
            "mask": mask.to_json() if mask is not None else None}


def _worker(spec: dict, queue) -> None:
    """Entry point of an isolated condition: run it, sending progress and the result over ``queue``."""
    try:
        if spec.get("threads"):
            torch.set_num_threads(int(spec["threads"]))
        def progress(event: ProgressEvent) -> None:
            queue.put(("progress", (event.stage, event.done, event.total, event.message)))
        queue.put(("result", run_condition(spec, progress)))
    except BaseException as exc:    # noqa: BLE001 - everything goes back to the parent
        queue.put(("error", (type(exc).__name__, str(exc), isinstance(exc, HeadpruneError))))


def run_isolated(spec: dict, progress: ProgressCallback | None = None, stage_prefix: str = "") -> dict:
    """:func:`run_condition` in a fresh process (spawn); progress is forwarded, errors re-raised.

    The worker is supervised (:func:`pruning_core.core.runtime.children.supervised`): SIGTERM/SIGINT on this
    process are passed on to it, and it is killed if it lingers, whatever ends the wait.
    """
    import multiprocessing as mp
    import queue as queue_mod
    from contextlib import closing

    from pruning_core.core.runtime.children import supervised

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(spec, q), daemon=True)
    with closing(q), supervised(proc):
        proc.start()
        while True:
            try:
                kind, payload = q.get(timeout=1.0)
            except queue_mod.Empty:
                if not proc.is_alive():
                    raise HeadpruneError(f"The worker process for {stage_prefix or 'a condition'} died "
                                         f"(exit code {proc.exitcode}); out of memory? Try --in-process.") from None
                continue
            if kind == "progress":
                stage, done, total, message = payload
                report(progress, stage_prefix + stage, done, total, message)
            elif kind == "result":
                return payload
            else:
                name, message, user_error = payload
                if user_error:
                    raise HeadpruneError(message)
                raise RuntimeError(f"{stage_prefix}{name}: {message}")


# -- the comparison --------------------------------------------------------------------------------

def _check_task(task) -> None:
    if task.task_type != "classification":
        raise DataError(f"SMP fine-tuning needs a classification task; {task.name!r} is a {task.task_type} task.")


def _smp_mask(config: CompareConfig, progress: ProgressCallback | None) -> tuple[HeadMask, float, dict]:
    """Score the task's training texts with the pruner on the pre-trained model; keep the top share per layer."""
    from pruning_core.scoring import ScoreConfig
    from pruning_core.tasks import get_task
    from pruning_core.modeling.presets import keep_top_fraction_per_layer
    from pruning_core.scoring.smp.scorer import SMPScorer, resolve_pruner
    from pruning_core.scoring.smp.train import load_base_model

    task = get_task(config.task)
    _check_task(task)
    pfile = resolve_pruner(config.pruner)
    base = load_base_model(config.model, device=config.finetune.device)
    start = time.perf_counter()
    scored = SMPScorer(pfile).score(base, task, ScoreConfig(split="train", limit=config.score_limit,
                                                            max_length=config.finetune.max_length), progress=progress)
    mask = keep_top_fraction_per_layer(scored.ranking_scores, config.keep_fraction, seed=config.seed)
    return mask, time.perf_counter() - start, {"model": base.model_id, "weights_sha256": base.weights_sha256,
                                               "layout": base.layout.to_json(), "scores": scored.to_json()}


def _spec(config: CompareConfig, **kw) -> dict:
    base = {"model": config.model, "task": config.task, "eval_split": config.eval_split, "mask": None,
            "gradient_mask": False, "keep_fraction": config.keep_fraction, "score_limit": config.score_limit,
            "finetune": config.finetune.to_json(), "train_limit": config.train_limit,
            "reset_classifier_seed": config.seed, "save": None, "eval_batch_size": config.eval_batch_size,
            "device": config.finetune.device or "cpu", "max_length": config.finetune.max_length,
            "threads": config.threads}
    base.update(kw)
    return base


def _condition(key: str, group: str, out: dict, seed: int | None = None,
               selection: float | None = None) -> ConditionResult:
    return ConditionResult(key=key, group=group, metric_name=out["metric_name"], metric=out["metric"],
                           loss=out["loss"], n_eval=out["n_eval"], heads_kept=out["heads_kept"],
                           heads_total=out["heads_total"], parameters=out["parameters"],
                           attention_parameters=out["attention_parameters"], finetune=out["finetune"],
                           selection_seconds=selection if selection is not None else out["selection_seconds"],
                           eval_seconds=out["eval_seconds"], mask=out["mask"], seed=seed)


def _provenance(config: CompareConfig, smp_info: dict, method: str) -> dict:
    from pruning_core.evaluation.results import provenance
    prov = provenance(None, task=config.task, split=config.eval_split, method=method,
                      settings=config.to_json(), device=config.finetune.device)
    prov.update({"model": smp_info["model"], "weights_sha256": smp_info["weights_sha256"],
                 "smp_scores": smp_info["scores"]})
    return prov


def compare(config: CompareConfig = CompareConfig(), progress: ProgressCallback | None = None) -> CompareResult:
    """Run conditions (a)-(e) (see the module docstring) and return every row."""
    from pruning_core.modeling.presets import random_per_layer

    start = time.perf_counter()
    smp_mask, smp_seconds, info = _smp_mask(config, progress)
    layout = smp_mask.layout
    run = (lambda spec, prefix: run_isolated(spec, progress, prefix)) if config.isolate else \
        (lambda spec, prefix: run_condition(spec, _prefixed(progress, prefix)))
    conditions: list[ConditionResult] = []
    n_jobs = 4 + config.random_seeds
    with tempfile.TemporaryDirectory(prefix="headprune-smp-compare-") as tmp:
        full_dir = str(Path(tmp) / "a_full")
        report(progress, "smp:compare", 0, n_jobs, "a_full")
        conditions.append(_condition("a_full", "a_full", run(_spec(config, save=full_dir), "a_full:")))
        report(progress, "smp:compare", 1, n_jobs, "b_smp")
        conditions.append(_condition("b_smp", "b_smp", run(_spec(config, mask=smp_mask.to_json()), "b_smp:"),
                                     selection=smp_seconds))
        for i in range(config.random_seeds):
            seed = config.seed + i
            mask = random_per_layer(layout, 1.0 - config.keep_fraction, seed=seed)
            key = f"c_random_{seed}"
            report(progress, "smp:compare", 2 + i, n_jobs, key)
            conditions.append(_condition(key, "c_random", run(_spec(config, mask=mask.to_json()), key + ":"),
                                         seed=seed))
        report(progress, "smp:compare", 2 + config.random_seeds, n_jobs, "d_gradient")
        d = run(_spec(config, model=full_dir, gradient_mask=True, finetune=None, reset_classifier_seed=None),
                "d_gradient:")
        conditions.append(_condition("d_gradient", "d_gradient", d))
        report(progress, "smp:compare", 3 + config.random_seeds, n_jobs, "e_gradient_retrained")
        e = run(_spec(config, model=full_dir, mask=d["mask"], reset_classifier_seed=None), "e_gradient_retrained:")
        conditions.append(_condition("e_gradient_retrained", "e_gradient_retrained", e,
                                     selection=d["selection_seconds"]))
        report(progress, "smp:compare", n_jobs, n_jobs)
    return CompareResult(conditions, config.to_json(), _provenance(config, info, "smp-compare"),
                         time.perf_counter() - start)


def smp_finetune(config: CompareConfig = CompareConfig(), save: str | Path | None = None,
                 progress: ProgressCallback | None = None) -> CompareResult:
    """The single-shot flow alone: SMP mask from the task's texts, prune the pre-trained model, fine-tune."""
    start = time.perf_counter()
    smp_mask, smp_seconds, info = _smp_mask(config, progress)
    out = run_condition(_spec(config, mask=smp_mask.to_json(), save=str(save) if save else None), progress)
    return CompareResult([_condition("b_smp", "b_smp", out, selection=smp_seconds)], config.to_json(),
                         _provenance(config, info, "smp-finetune"), time.perf_counter() - start)


def _prefixed(progress: ProgressCallback | None, prefix: str) -> ProgressCallback | None:
    if progress is None:
        return None
    return lambda e: progress(replace(e, stage=prefix + e.stage))


__all__ = ["SMP_COMPARE_FORMAT", "CompareConfig", "CompareResult", "ConditionResult", "compare", "format_table",
           "run_condition", "smp_finetune", "summary_rows"]
