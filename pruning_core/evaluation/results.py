"""Results as JSON files with a ``format`` field, a version and provenance.

Two formats are fixed because other tools read them:

- ``headprune.mask/1``: ``{"format", "model", "kinds": {kind: [[1, 0, ...], ...]}}`` (1 = keep)
- ``headprune.scores/1``: ``{"format", "method", "normalized", "kinds", "provenance"}``

Every other result (evaluations, curves, ablation tables, benchmarks) is ``headprune.<name>/1``
with a ``provenance`` block. Files are written atomically (temp file + rename), so an
interrupted write never leaves a half-written file behind.
"""
from __future__ import annotations

import datetime
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pruning_core.core.runtime import distributed
from pruning_core.core.io.codec import EVAL_FORMAT, MASK_FORMAT, SCORES_FORMAT, check_format, loads
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.core.io.storage import write_json  # noqa: F401  (re-exported: results are written atomically)


def versions() -> dict[str, str]:
    import torch
    import transformers

    from pruning_core import __version__
    return {"headprune": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}


def provenance(loaded=None, *, task: str | None = None, split: str | None = None, n_examples: int | None = None,
               method: str | None = None, settings: dict | None = None, device: str | None = None) -> dict:
    """Where a result came from: model and weights hash, data, method and settings, versions, time.

    ``parallel``: world size, backend and every rank's device (one process: its device alone),
    see :mod:`pruning_core.core.runtime.distributed`.
    """
    device = device or (str(loaded.device) if loaded is not None else None)
    return {
        "model": getattr(loaded, "model_id", None),
        "weights_sha256": getattr(loaded, "weights_sha256", None),
        "task": task,
        "split": split,
        "n_examples": n_examples,
        "method": method,
        "settings": settings or {},
        "versions": versions(),
        "device": device or (str(loaded.device) if loaded is not None else None),
        "dtype": str(loaded.dtype).removeprefix("torch.") if hasattr(loaded, "dtype") else None,
        "parallel": distributed.describe(device),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def read_json(path: str | Path, expected_prefix: str | None = None) -> dict:
    """Read a headprune JSON file; check its ``format`` starts with ``expected_prefix`` if given."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"File {str(path)!r} does not exist. Check the path.") from None
    except OSError as exc:                    # a folder, no permission, a name too long
        raise FormatError(f"File {str(path)!r} cannot be read ({exc.strerror}). Check the path.") from None
    return check_format(loads(raw, f"File {str(path)!r}"), expected_prefix, str(path))


# -- masks -----------------------------------------------------------------------------------------

def mask_to_json(mask: HeadMask, model_id: str | None, provenance_: dict | None = None) -> dict:
    # by hand: a mask's wire form is its 0/1 lists per kind and layer, and provenance only when given
    data = {"format": MASK_FORMAT, "model": model_id, "kinds": mask.to_json()}
    if provenance_ is not None:
        data["provenance"] = provenance_
    return data


def mask_from_json(data: dict, layout: HeadLayout | None = None, where: str = "the mask file") -> HeadMask:
    check_format(data, MASK_FORMAT, where)
    if not isinstance(data.get("kinds"), dict):
        raise FormatError(f"{where} has no 'kinds' object (attention kind -> rows of 0/1). Write it again with "
                          "`headprune mask` or the dashboard's Share page.")
    try:
        mask = HeadMask.from_lists(data["kinds"])
        if layout is not None:
            mask.check_fits(layout)
    except FormatError as exc:
        raise FormatError(f"{where}: {exc}") from None
    return mask


def load_mask(path: str | Path, layout: HeadLayout | None = None) -> HeadMask:
    return mask_from_json(read_json(path), layout, where=f"Mask file {str(path)!r}")


# -- scores ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoreResult:
    """Importance scores of every head (raw) plus how they were obtained."""

    method: str
    scores: HeadScores                  # raw scores, larger = more important
    normalize: bool = True              # whether ranking uses per-layer l2-normalised scores
    provenance: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ranking_scores(self) -> HeadScores:
        return self.scores.normalized_per_layer() if self.normalize else self.scores

    def to_json(self) -> dict:
        # by hand: the ranking scores are derived (normalised), and a file without raw_kinds reads as given
        return {"format": SCORES_FORMAT, "method": self.method, "normalized": self.normalize,
                "kinds": self.ranking_scores.to_json(), "raw_kinds": self.scores.to_json(),
                "seconds": self.seconds, "provenance": self.provenance}

    @classmethod
    def from_json(cls, data: dict, layout: HeadLayout | None = None, where: str = "the scores file") -> "ScoreResult":
        check_format(data, SCORES_FORMAT, where)
        fix = "Write it again with `headprune score`."
        if "kinds" not in data or not isinstance(data.get("method"), str):
            raise FormatError(f"{where} lacks 'kinds' or the name of its 'method'. {fix}")
        try:
            raw = HeadScores.from_lists(data.get("raw_kinds") or data["kinds"])
            if layout is not None:
                raw.check_fits(layout)
        except FormatError as exc:
            raise FormatError(f"{where}: {exc}") from None
        seconds, provenance_ = data.get("seconds", 0.0), data.get("provenance") or {}
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise FormatError(f"{where} has 'seconds' {str(seconds)[:40]!r}, not a number of seconds. {fix}")
        if not isinstance(provenance_, dict):
            raise FormatError(f"{where} has a 'provenance' that is not an object. {fix}")
        normalized = data.get("normalized", False) is True
        if "raw_kinds" not in data:   # written by another tool: take the scores as given
            normalized = False
        return cls(method=data["method"], scores=raw, normalize=normalized, provenance=dict(provenance_),
                   seconds=float(seconds))


def load_scores(path: str | Path, layout: HeadLayout | None = None) -> ScoreResult:
    return ScoreResult.from_json(read_json(path), layout, where=f"Scores file {str(path)!r}")


# -- evaluations -----------------------------------------------------------------------------------

def _tuples(values) -> tuple:
    """``values`` as a tuple, pairs read back from JSON lists as tuples (a language-model window's)."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in values or ())


def _float32_text(values) -> list[float]:
    """Float32 values (each example's loss) as the shortest decimals that read back to the same float32:
    about 10 characters each instead of a double's 18, so evaluation files stay small."""
    import numpy as np

    return [float(str(v)) for v in np.asarray(values, dtype=np.float32)]


def _float32_values(values) -> tuple[float, ...]:
    import numpy as np

    return tuple(np.asarray(values, dtype=np.float32).tolist())


@dataclass(frozen=True)
class EvalResult:
    """The metric and mean loss of one model (under one mask) on one data split, from one pass.

    per_example: one entry per example in the split's order, so that others can recompute the
    metric or compare two models example by example: the score per example (accuracy: 1 right,
    0 wrong) when the metric is ``per_example``, else the predictions (class ids, decoded texts).
    interval: 95 % interval of ``metric`` (Wilson for accuracy, bootstrap over examples otherwise);
    None when unknown (a result written before intervals existed, or a loss-based metric).
    example_losses: each example's loss summed in float32 over what it is scored on (itself, or its
    target tokens); example_weights: what each is summed over (1, or its target tokens), so
    ``sum(example_losses) / sum(example_weights)`` is ``loss`` up to float32 summation order.
    predictions: each example's prediction (class id, decoded text, or a language-model window's
    ``(loss_sum, tokens)``). All three are ``()`` in a result written before they existed.
    """

    metric_name: str          # a pruning_core.evaluation.metrics name: how to show it and which way is better
    metric: float
    loss: float               # mean cross-entropy per example (classification) or per target token
    n_examples: int
    extra: dict = field(default_factory=dict)   # other metrics, e.g. {"accuracy": .., "f1": ..}
    seconds: float = 0.0
    per_example: tuple = ()
    interval: tuple[float, float] | None = None
    example_losses: tuple[float, ...] = ()
    example_weights: tuple[int, ...] = ()
    predictions: tuple = ()

    def to_json(self, provenance_: dict | None = None, mask: HeadMask | None = None) -> dict:
        """The ``headprune.eval/1`` document. The losses are written as float32 decimals; the predictions
        only when they differ from ``per_example`` (class ids beside 0/1 scores), else they are read back
        from it."""
        # by hand: float32 losses, predictions only when they differ, the mask and provenance passed in
        data = {"format": EVAL_FORMAT, "metric_name": self.metric_name, "metric": self.metric,
                "interval": list(self.interval) if self.interval is not None else None,
                "loss": self.loss, "n_examples": self.n_examples, "extra": self.extra, "seconds": self.seconds,
                "per_example": list(self.per_example)}
        if self.example_losses:
            data["example_losses"] = _float32_text(self.example_losses)
            data["example_weights"] = list(self.example_weights)
        if self.predictions and tuple(self.predictions) != tuple(self.per_example):
            data["predictions"] = list(self.predictions)
        if mask is not None:
            data["mask"] = mask.to_json()
            data["heads_kept"] = mask.n_kept
            data["heads_total"] = mask.n_total
        data["provenance"] = provenance_ or {}
        return data

    @classmethod
    def from_json(cls, data: dict) -> "EvalResult":
        check_format(data, EVAL_FORMAT)
        interval = data.get("interval")
        per_example = _tuples(data.get("per_example"))
        losses = _float32_values(data.get("example_losses") or ())
        predictions = _tuples(data["predictions"]) if "predictions" in data else (per_example if losses else ())
        return cls(data["metric_name"], float(data["metric"]), float(data["loss"]), int(data["n_examples"]),
                   dict(data.get("extra") or {}), float(data.get("seconds", 0.0)), per_example,
                   tuple(interval) if interval else None, losses,
                   tuple(int(w) for w in data.get("example_weights") or ()), predictions)
