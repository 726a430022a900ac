"""Train and save the SMP pruner in one call: what ``headprune smp train`` and the dashboard's
"train the SMP pruner" button both run.

Steps: fetch the unlabeled text sources once (pip, cached), load the frozen pre-trained encoder,
train the pruner (:func:`pruning_core.scoring.smp.train.train_pruner`), save it atomically (the
``pruner.json`` that marks a folder as a pruner is written last, so a stopped run leaves no
half-pruner that the scorer would read).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring.smp.pruner import CONFIG_FILE, save_pruner
from pruning_core.scoring.smp import scorer
from pruning_core.scoring.smp.scorer import default_pruner_dir
from pruning_core.scoring.smp.train import TrainConfig, TrainResult, load_base_model, train_pruner

# what the dashboard says before it starts: 600 steps of 32 sentences on the raw MiniLM-L6
TRAIN_ESTIMATE = "about 10 minutes on 2 CPU cores"


def is_trained(folder: str | Path | None = None) -> bool:
    """Whether ``folder`` (default: ``$HEADPRUNE_HOME/smp/pruner``) holds a saved pruner."""
    return (Path(folder) if folder is not None else default_pruner_dir()).joinpath(CONFIG_FILE).is_file()


def available() -> bool:
    """Whether the ``smp`` scorer has a pruner without training: one trained here, or the bundled one."""
    return is_trained() or is_trained(scorer.BUNDLED_DIR)


def train_and_save(config: TrainConfig = TrainConfig(), *, sources: Sequence[str] | None = None,
                   model: str = "pretrained", device: str = "cpu", pruner_dir: str | Path | None = None,
                   force: bool = False, bible_wheel: str | None = None,
                   progress: ProgressCallback | None = None) -> tuple[TrainResult, Path]:
    """Fetch ``sources`` (default: all five), train the pruner on ``model``, save it to ``pruner_dir``
    (default ``$HEADPRUNE_HOME/smp/pruner``); returns the training result and the folder."""
    from pruning_core.scoring.smp.sources import (
        DEFAULT_SOURCES,
        check_sources,
        load_sources,
        prepare_bible,
        prepare_sources,
    )

    names = check_sources(list(sources) if sources else list(DEFAULT_SOURCES))
    rest = names
    if bible_wheel and "bible" in names:
        prepare_bible(force=force, progress=progress, wheel=bible_wheel)
        rest = [n for n in names if n != "bible"]
    if rest:
        prepare_sources(rest, force=force, progress=progress)
    loaded = load_base_model(model, device=device)
    result = train_pruner(loaded, load_sources(names), config, progress=progress)
    folder = save_pruner(result.pruner_file, Path(pruner_dir) if pruner_dir else default_pruner_dir())
    return result, folder
