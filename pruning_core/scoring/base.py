"""The scorer extension point: a base class, its config, and the registry with each method's metadata."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback
from pruning_core.core.registry import Registry
from pruning_core.evaluation.results import ScoreResult


# what `atp` patches a head's output with (pruning_core.scoring.attribution)
ATP_BASELINES: tuple[str, ...] = ("zero", "mean", "corrupt")


@dataclass(frozen=True)
class ScoreConfig:
    split: str = "validation"     # data split the scores are computed on
    limit: int | None = 512       # at most this many examples (None = the whole split)
    normalize: bool = True        # rank by per-layer l2-normalised scores (Michel et al.)
    seed: int = 0                 # for `random`, and tie-breaking
    batch_size: int = 32
    max_length: int = 128         # tokens per example after truncation
    baseline: str = "zero"        # `atp` only: the output a head is patched with (ATP_BASELINES)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise HeadpruneError(f"limit must be a positive number of examples, got {self.limit}.")
        if self.batch_size < 1:
            raise HeadpruneError(f"batch_size must be at least 1, got {self.batch_size}.")
        if self.baseline not in ATP_BASELINES:
            raise HeadpruneError(f"baseline must be one of {', '.join(ATP_BASELINES)}, got {self.baseline!r}.")


COSTS: dict[str, str] = {
    "one_pass": "one pass over the scoring data (gradient, random, smp)",
    "per_head": "one evaluation per head (ablation): slow on big models",
}


@dataclass(frozen=True)
class ScorerInfo:
    """What the registry declares about a scorer; readable without loading it (SMP is lazy)."""

    name: str
    description: str
    needs_labels: bool      # True: scoring reads the task's labels (a loss or a metric); False: texts only
    cost: str               # a key of COSTS
    seeded: bool = False    # True: the scores themselves come from the seed (random): average several


class Scorer:
    """One importance-scoring method. Subclasses set ``name`` and implement ``score``.

    What a method needs and costs is declared once, where it is registered (:func:`register_scorer`);
    ``needs_labels``, ``cost`` and ``description`` read it back from the registry.
    """

    name: str = ""

    @property
    def info(self) -> ScorerInfo:
        return scorer_info(self.name)

    @property
    def needs_labels(self) -> bool:
        return self.info.needs_labels

    @property
    def cost(self) -> str:
        return self.info.cost

    @property
    def description(self) -> str:
        return self.info.description

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress: ProgressCallback | None = None,
              mask: HeadMask | None = None) -> ScoreResult:
        """Score every head of ``loaded`` for ``task``. With ``mask``, score the masked model
        (removed heads then score 0)."""
        raise NotImplementedError


SCORERS: Registry[Scorer] = Registry("scoring method", HeadpruneError)


def _check_meta(name: str, needs_labels: bool, cost: str) -> None:
    if not isinstance(needs_labels, bool):
        raise ValueError(f"Scorer {name!r}: needs_labels must be True or False, got {needs_labels!r}.")
    if cost not in COSTS:
        raise ValueError(f"Scorer {name!r}: cost must be one of {', '.join(COSTS)}, got {cost!r}.")


def register_scorer(scorer: Scorer, *, needs_labels: bool, cost: str, description: str,
                    seeded: bool = False) -> Scorer:
    """Register ``scorer`` under ``scorer.name`` with its metadata; a taken name raises.

    seeded: the scores are drawn from the seed (not just ties broken by it), so a curve of this
    scorer is worth repeating over several seeds.
    """
    _check_meta(scorer.name, needs_labels, cost)
    return SCORERS.add(scorer.name, scorer, description=description, needs_labels=needs_labels, cost=cost,
                       seeded=bool(seeded))


def register_lazy_scorer(name: str, loader: Callable[[], Scorer], *, needs_labels: bool, cost: str,
                         description: str, seeded: bool = False) -> None:
    """Register a scorer whose module is imported on first use (``loader()`` returns the scorer)."""
    _check_meta(name, needs_labels, cost)
    SCORERS.add_lazy(name, loader, description=description, needs_labels=needs_labels, cost=cost,
                     seeded=bool(seeded))


def get_scorer(name: str) -> Scorer:
    """The scorer registered as ``name`` (HeadpruneError with "did you mean" when unknown)."""
    return SCORERS.get(name)


def scorer_names() -> list[str]:
    """Every registered scoring method, sorted."""
    return SCORERS.names()


def scorer_info(name: str) -> ScorerInfo:
    """Description, ``needs_labels`` and ``cost`` of ``name``, without importing a lazy scorer."""
    entry = SCORERS.entry(name)
    return ScorerInfo(entry.name, entry.description, entry.meta["needs_labels"], entry.meta["cost"],
                      entry.meta.get("seeded", False))
