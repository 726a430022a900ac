"""Head scores kept on disk, so a result computed once is ready for every later session and server start.

A score computed on a model's weights, a task, a split and a number of examples does not change
until one of them does, so it is written once as a ``headprune.scores/1`` file (with its
provenance) under ``$HEADPRUNE_HOME/scores/<first 16 hex digits of the weights' SHA-256>/``. The
weights hash in the folder name means a model prepared again (new weights) never reads an old
file; the file's own provenance is checked against it too. A ``file:PATH`` task is known by its
file's SHA-256 (its data can change under the same name).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadLayout
from pruning_core.evaluation.results import ScoreResult, read_json, write_json
from pruning_core.core.io.storage import sha256_file
from pruning_core.tasks.registry import FILE_PREFIX
from pruning_core.modeling.sources.catalog import headprune_home

SCORES_DIR = "scores"


@dataclass(frozen=True)
class ScoreKey:
    """What a stored score depends on besides the weights: task, method, split, examples, seed."""

    task: str                  # a registered task name, or "file-<SHA-256 prefix>" for a data file
    method: str
    split: str
    limit: int | None          # examples scored; None = the whole split
    seed: int = 0

    def file_name(self) -> str:
        parts = (self.task, self.method, self.split, "all" if self.limit is None else str(self.limit),
                 f"seed{self.seed}")
        return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", p) for p in parts) + ".json"


def key_for(task_name: str, method: str, split: str, limit: int | None, seed: int = 0) -> ScoreKey | None:
    """The key of a score of ``task_name``; None when its data cannot be pinned (a ``file:`` that is gone)."""
    task = task_name
    if task_name.startswith(FILE_PREFIX):
        path = Path(task_name[len(FILE_PREFIX):]).expanduser()
        if not path.is_file():
            return None
        task = f"file-{sha256_file(path)[:16]}"
    return ScoreKey(task, method, split, limit, seed)


def storable(key: ScoreKey | None, weights_sha256: str | None) -> bool:
    """Whether a score under ``key`` may be kept: its data is pinned and the weights have a hash."""
    return key is not None and bool(weights_sha256)


def stored_path(key: ScoreKey, weights_sha256: str, home: Path | None = None) -> Path:
    """Where the score of ``key`` on the weights ``weights_sha256`` is kept."""
    return (home or headprune_home()) / SCORES_DIR / weights_sha256[:16] / key.file_name()


def load_stored(key: ScoreKey | None, weights_sha256: str | None, layout: HeadLayout,
                home: Path | None = None) -> ScoreResult | None:
    """The kept score of ``key`` on these weights, or None (none kept, another model's, or unreadable)."""
    if not storable(key, weights_sha256):
        return None
    path = stored_path(key, weights_sha256, home)
    if not path.is_file():
        return None
    try:
        result = ScoreResult.from_json(read_json(path), layout, where=str(path))
    except FormatError:
        return None                              # a damaged file is computed again and replaced
    p = result.provenance
    if (p.get("weights_sha256") != weights_sha256 or result.method != key.method
            or p.get("split", key.split) != key.split):
        return None
    return result


def save_stored(key: ScoreKey | None, result: ScoreResult, home: Path | None = None) -> Path | None:
    """Keep ``result`` (atomically); returns the path, or None when it may not be kept (see :func:`storable`)."""
    weights = result.provenance.get("weights_sha256")
    if not storable(key, weights):
        return None
    return write_json(stored_path(key, weights, home), result.to_json())
