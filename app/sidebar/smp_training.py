"""The SMP pruner, trained from the dashboard: a user who picks the ``smp`` scorer before any
pruner exists gets a button (with a time estimate) instead of an error naming a command.

The pruner lives in one folder per server (``$HEADPRUNE_HOME/smp/pruner``), so one training runs
at a time whichever session asks; it is written only when training finishes, so Cancel (or a
closed browser) leaves no half-pruner behind.
"""
from __future__ import annotations

import threading

import streamlit as st

from app.core.text import md_escape
from app.runtime.work import Work
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring.smp import default_pruner

_TRAINING = threading.Lock()        # one training per server: every session shares the pruner folder


def train(_progress: ProgressCallback | None = None) -> str:
    """Train and save the default pruner (the job behind the button); returns its summary."""
    if not _TRAINING.acquire(blocking=False):
        raise HeadpruneError("Another browser session is training the SMP pruner right now. Pick the smp scorer "
                             f"again when it has finished ({default_pruner.TRAIN_ESTIMATE}).")
    try:
        result, _ = default_pruner.train_and_save(progress=_progress)
    finally:
        _TRAINING.release()
    return result.summary()


def ready() -> bool:
    """Whether an SMP pruner exists (trained here or bundled); if not, say so and offer to train it (a job
    with progress and Cancel). True once it exists, so the page can go on and score with it."""
    if default_pruner.available():
        return True
    st.info("The **smp** scorer needs a trained SMP pruner, and this server has none yet. Training it reads "
            "five unlabeled text sources (fetched with pip once) and runs "
            f"{default_pruner.TRAIN_ESTIMATE}; every session of this server then uses it. "
            "Or pick another scorer.", icon=":material/model_training:")
    summary = Work("smp_train", f"Training the SMP pruner ({default_pruner.TRAIN_ESTIMATE})", train,
                   start="button").show()
    if summary is None:
        return False
    st.success(f"SMP pruner trained: {md_escape(summary.splitlines()[0])}.")
    return True
