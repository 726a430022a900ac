"""Retraining-free compression (Kwon et al. 2022), end to end, on a copy of the model.

:func:`compress` runs, and records in its report, each step in order: **score** the heads on calibration
examples (Fisher by default); **search** the budget's mask (:mod:`.search`); **rearrange** each layer's
removed heads by the block-diagonal Fisher (:mod:`.rearrange`; needs labels); **repair** with least-squares
scales folded into W_O plus FLAP's bias compensation (:mod:`.tuning`; on for every scorer, kept per layer
only where it lowers the calibration residual: docs/METHODS.md); **prune** physically
(:func:`pruning_core.modeling.pruning.prune_heads`). The model passed in is only read.
:func:`evaluate_compression` measures the unpruned, pruned and repaired model on one evaluation set.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from pruning_core.core.io.codec import COMPRESS_FORMAT, JsonRecord
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.core.progress import ProgressCallback
from pruning_core.modeling.pruning import parameter_count, prune_heads
from pruning_core.evaluation.results import EvalResult, ScoreResult, provenance
from pruning_core.scoring import ScoreConfig, get_scorer
from pruning_core.scoring.fisher import FisherScorer, batch_gate_gradients
from pruning_core.scoring.gradient import scoring_batch_size
from pruning_core.tasks import default_score_split
from pruning_core.compress.latency import latency_probe
from pruning_core.compress.rearrange import rearrange
from pruning_core.compress.search import Budget, check_remove_budget, search_mask
from pruning_core.core.errors import BudgetError
from pruning_core.compress.tuning import repair_mask


@dataclass(frozen=True)
class CompressConfig:
    budget: Budget
    scorer: str = "fisher"              # a registered scorer; Fisher is Kwon et al.'s
    calibration: int = 512              # examples of the calibration split (scoring, rearrangement, tuning)
    split: str | None = None            # calibration split; None: the task's score split (train when it has one)
    batch_size: int = 32
    max_length: int = 128               # tokens per calibration example
    repair: bool = True                 # False: search (and rearrangement) only, no tuning
    rearrange: bool = True              # Kwon's per-layer swaps (needs labels)
    bias_compensation: bool = True      # offer FLAP's bias shift per layer (kept where it lowers the residual)
    fit_bias: bool = False              # also offer scales and bias fitted together (least_squares.solve_centred)
    target: str = "output"              # "output" | "residual": fit W_O z + b + x, drift from below corrected (no
                                        # better on the default: 85.9 % vs 86.1 %, benchmarks/compress.py) |
                                        # "normed": the residual's error after the LayerNorm, to first order
    choose: str = "residual"            # per layer, the candidate with the least "residual" (error) or "loss"
    head_tokens: bool = False           # fit the last layer on the token the head reads (first token) only
    ffn: bool = False                   # also tune one scale per feed-forward neuron after each repaired layer
    damping: float = 0.0                # pull least-squares scales towards 1 (share of the mean Gram diagonal)
    min_heads_per_layer: int = 1
    normalize: bool = False             # rank per-layer l2-normalised scores; False: raw, globally (Kwon)
    seq_len: int = 128                  # tokens per sequence for --flops and --latency-ms
    latency_batch: int = 1              # sequences per timed forward pass (--latency-ms)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.calibration < 1 or self.batch_size < 1 or self.seq_len < 1:
            raise BudgetError(f"calibration, batch size and seq_len must be at least 1; got {self.calibration}, "
                              f"{self.batch_size}, {self.seq_len}.")
        if self.min_heads_per_layer < 0:
            raise BudgetError(f"min_heads_per_layer must be 0 or more, got {self.min_heads_per_layer}.")


@dataclass(frozen=True)
class CompressReport(JsonRecord):
    """The record of every step of :func:`compress` (``headprune_compress.json`` beside the saved model)."""

    format: str = field(default=COMPRESS_FORMAT, init=False)
    budget: dict                        # kind, value and what it means
    config: dict                        # CompressConfig's fields (less the budget) and the calibration split
    scores: dict                        # method, normalized, kinds, n_examples, seconds
    search: dict                        # SearchResult.to_json()
    rearrangement: dict                 # per-layer swaps, or why they were skipped
    repair: dict                        # RepairResult.to_json(), or why it was skipped
    mask: dict                          # HeadMask.to_json()
    heads_removed: int
    heads_total: int
    parameters: dict                    # before, after
    calibration: dict                   # split, examples
    seconds: dict                       # per step, total and cpu_total
    provenance: dict
    evaluation: dict = field(default_factory=dict)      # the CLI's evaluations: split, then name -> metric ...


@dataclass
class CompressResult:
    """The pruned (and repaired) model, its mask and the record of every step (``report``, JSON-ready)."""

    model: nn.Module
    mask: HeadMask
    report: CompressReport
    tuned: nn.Module | None = None      # the repaired copy at full shape (removed heads' columns 0), or None


def gate_gradients(loaded, task, data, batch_size: int,
                   progress: ProgressCallback | None = None) -> dict[tuple[str, int], torch.Tensor]:
    """Per site ``[batches, heads]``: dL_b/dm_h of each calibration mini-batch's mean loss (Kwon's g)."""
    rows: dict[tuple[str, int], list[torch.Tensor]] = {}
    for grads in batch_gate_gradients(loaded, task, data, None, batch_size, progress):
        for key, g in grads.items():
            rows.setdefault(key, []).append(g.detach().double().cpu())
    return {key: torch.stack(r) for key, r in rows.items()}


def _fisher_from(loaded, grads, config: ScoreConfig, n: int, batch_size: int, seconds: float) -> ScoreResult:
    """The ``fisher`` scorer's result from gradients already taken: F_h = sum_b g[b, h]^2 (fisher.py)."""
    kinds = {k: [(grads[(k, l)] ** 2).sum(0).tolist() for l in range(len(rows))]
             for k, rows in loaded.layout.kinds.items()}
    return ScoreResult("fisher", HeadScores.from_lists(kinds), config.normalize,
                       provenance(loaded, split=config.split, n_examples=n, method="fisher",
                                  settings={"batch_size": batch_size, "loss": "mean per batch"}), seconds)


def compress(loaded, task, config: CompressConfig, progress: ProgressCallback | None = None) -> CompressResult:
    """Score, search, rearrange, repair and prune a copy of ``loaded.model`` (see the module docstring)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    times: dict[str, float] = {}
    scorer = get_scorer(config.scorer)
    check_remove_budget(loaded.layout, config.budget, config.min_heads_per_layer)     # before any work
    split = config.split or default_score_split(task)
    clock = time.perf_counter()
    data = task.encode(loaded, split, config.calibration, max_length=config.max_length)
    score_config = ScoreConfig(split=split, limit=config.calibration, normalize=config.normalize, seed=config.seed,
                               batch_size=config.batch_size, max_length=config.max_length)
    batch_size = scoring_batch_size(loaded, data, config.batch_size)
    use_grads = config.rearrange and scorer.needs_labels
    grads = gate_gradients(loaded, task, data, batch_size, progress) if use_grads else None
    if grads is not None and isinstance(scorer, FisherScorer):      # the same gradients: no second pass
        scores = _fisher_from(loaded, grads, score_config, data.n_examples, batch_size, time.perf_counter() - clock)
    else:
        scores = scorer.score(loaded, task, score_config, progress=progress)
    times["score"] = time.perf_counter() - clock

    clock = time.perf_counter()
    probe = (latency_probe(loaded, batch_size=config.latency_batch, seq_len=config.seq_len)
             if config.budget.kind == "latency_ms" else None)
    found = search_mask(loaded, scores.ranking_scores, config.budget, min_heads_per_layer=config.min_heads_per_layer,
                        seq_len=config.seq_len, seed=config.seed, latency_probe=probe)
    times["search"] = time.perf_counter() - clock

    clock = time.perf_counter()
    mask, swaps = found.mask, []
    if grads is not None:
        mask, swaps = rearrange(mask, grads)
    times["rearrange"] = time.perf_counter() - clock

    tuned = None
    clock = time.perf_counter()
    if config.repair and not mask.is_full():
        tuned = repair_mask(loaded, mask, data, bias_compensation=config.bias_compensation, fit_bias=config.fit_bias,
                            target=config.target, choose=config.choose, task=task, head_tokens=config.head_tokens,
                            ffn=config.ffn, damping=config.damping,
                            batch_size=config.batch_size, progress=progress)
    times["repair"] = time.perf_counter() - clock

    clock = time.perf_counter()
    pruned = prune_heads(tuned.model if tuned is not None else loaded.model, mask)
    times["prune"] = time.perf_counter() - clock
    times["total"] = time.perf_counter() - started
    times["cpu_total"] = time.process_time() - cpu_started       # all threads: on a shared machine, the load-free cost

    report = CompressReport(
        budget={"kind": config.budget.kind, "value": config.budget.value, "means": config.budget.describe()},
        config={k: v for k, v in asdict(config).items() if k != "budget"} | {"split": split},
        scores={"method": scores.method, "normalized": scores.normalize, "kinds": scores.ranking_scores.to_json(),
                "n_examples": data.n_examples, "seconds": scores.seconds},
        search=found.to_json(),
        rearrangement=({"layers": [asdict(s) for s in swaps], "swaps": sum(len(s.swaps) for s in swaps)}
                       if grads is not None else {"skipped": "needs gate gradients: a scorer that reads labels"
                                                  if config.rearrange else "turned off"}),
        repair=(tuned.to_json() if tuned is not None else
                {"skipped": "turned off (--no-repair)" if not config.repair else "nothing removed"}),
        mask=mask.to_json(),
        heads_removed=mask.n_total - mask.n_kept, heads_total=mask.n_total,
        parameters={"before": parameter_count(loaded.model), "after": parameter_count(pruned)},
        calibration={"split": split, "examples": data.n_examples},
        seconds=times,
        provenance=provenance(loaded, task=task.name, split=split, n_examples=data.n_examples, method="compress",
                              settings={"scorer": scores.method, "budget": config.budget.describe()}),
    )
    return CompressResult(pruned, mask, report, tuned.model if tuned is not None else None)


def evaluate_compression(loaded, task, data, result: CompressResult, *, batch_size: int = 64,
                         progress: ProgressCallback | None = None) -> dict[str, EvalResult]:
    """``unpruned``, ``pruned`` (the mask alone, no repair) and ``repaired`` (the model ``compress`` made)
    evaluated on ``data``; ``repaired`` is absent when repair did not run."""
    out = {"unpruned": task.evaluate(loaded, data, None, batch_size=batch_size, progress=progress),
           "pruned": task.evaluate(loaded, data, result.mask, batch_size=batch_size, progress=progress)}
    if result.tuned is not None:
        out["repaired"] = task.evaluate(loaded.derive(result.model), data, None, batch_size=batch_size,
                                        progress=progress)
    return out


def summary_json(evaluations: dict[str, EvalResult]) -> dict:
    """The evaluations as ``{name: {metric, loss, interval, n_examples}}`` for the report."""
    return {name: {"metric_name": ev.metric_name, "metric": ev.metric, "loss": ev.loss,
                   "interval": list(ev.interval) if ev.interval else None, "n_examples": ev.n_examples}
            for name, ev in evaluations.items()}


__all__ = ["COMPRESS_FORMAT", "Budget", "BudgetError", "CompressConfig", "CompressReport", "CompressResult",
           "compress", "evaluate_compression", "gate_gradients", "summary_json"]
