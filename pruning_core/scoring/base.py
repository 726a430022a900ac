"""The scorer extension point: a base class, its config, and the registry."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import HeadpruneError, did_you_mean
from ..heads import HeadMask
from ..progress import ProgressCallback
from ..results import ScoreResult


@dataclass(frozen=True)
class ScoreConfig:
    split: str = "validation"     # data split the scores are computed on
    limit: int | None = 512       # at most this many examples (None = the whole split)
    normalize: bool = True        # rank by per-layer l2-normalised scores (Michel et al.)
    seed: int = 0                 # for `random`, and tie-breaking
    batch_size: int = 32
    max_length: int = 128         # tokens per example after truncation

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise HeadpruneError(f"limit must be a positive number of examples, got {self.limit}.")
        if self.batch_size < 1:
            raise HeadpruneError(f"batch_size must be at least 1, got {self.batch_size}.")


class Scorer:
    """One importance-scoring method. Subclasses set the class attributes and implement ``score``."""

    name: str = ""
    needs_labels: bool = True
    description: str = ""

    def score(self, loaded, task, config: ScoreConfig = ScoreConfig(), progress: ProgressCallback | None = None,
              mask: HeadMask | None = None) -> ScoreResult:
        """Score every head of ``loaded`` for ``task``. With ``mask``, score the masked model
        (removed heads then score 0)."""
        raise NotImplementedError


SCORERS: dict[str, Scorer] = {}


def register_scorer(scorer: Scorer) -> Scorer:
    SCORERS[scorer.name] = scorer
    return scorer


def get_scorer(name: str) -> Scorer:
    try:
        return SCORERS[name]
    except KeyError:
        raise HeadpruneError(f"Unknown scoring method {name!r}.{did_you_mean(name, SCORERS)} "
                             f"Available: {', '.join(sorted(SCORERS))}.") from None
