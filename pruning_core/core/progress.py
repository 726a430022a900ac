"""Progress reporting for long work, without any UI dependency.

Long functions take ``progress: ProgressCallback | None``. They call it with a
:class:`ProgressEvent` as work advances. A caller cancels the work by raising
:class:`pruning_core.core.errors.Cancelled` from inside the callback; the work then unwinds
(hooks removed, nothing half-written) and the exception propagates to the caller.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProgressEvent:
    stage: str            # what is being done, e.g. "score:gradient" or "prepare:train"
    done: int             # units finished so far
    total: int | None     # units in all, None when unknown
    message: str = ""     # a short human-readable note
    partial: Any = None   # a result known before the work ends (a decoding evaluation's metric before its loss)

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


ProgressCallback = Callable[[ProgressEvent], None]


def report(progress: ProgressCallback | None, stage: str, done: int, total: int | None,
           message: str = "", partial: Any = None) -> None:
    """Call ``progress`` if one was given. Any exception it raises (Cancelled) propagates."""
    if progress is not None:
        progress(ProgressEvent(stage, done, total, message, partial))


# tqdm's own rate divides by the time since the bar was drawn, so a step answered from a cache
# shows absurd rates ("38130.04it/s"); the bar shows a rate only once it has run for a while.
RATE_AFTER_S = 1.0
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


def rate_text(done: int, seconds: float) -> str:
    """'2.3 s per step' or '14.0 steps/s' once ``seconds`` >= RATE_AFTER_S and a step is done; else ''."""
    if seconds < RATE_AFTER_S or done <= 0:
        return ""
    per_step = seconds / done
    return f"{per_step:.1f} s per step" if per_step >= 1 else f"{done / seconds:.1f} steps/s"


def tqdm_progress(desc_prefix: str = "") -> ProgressCallback:
    """A callback that draws tqdm bars on stderr, one per stage (used by the CLI)."""
    from tqdm.auto import tqdm

    bars: dict[str, tqdm] = {}

    def callback(event: ProgressEvent) -> None:
        bar = bars.get(event.stage)
        if bar is None:
            bar = tqdm(total=event.total, desc=desc_prefix + event.stage, leave=False, dynamic_ncols=True,
                       bar_format=BAR_FORMAT)
            bars[event.stage] = bar
        if event.total is not None and bar.total != event.total:
            bar.total = event.total
        bar.n = event.done
        notes = [text for text in (event.message, rate_text(event.done, bar.format_dict["elapsed"])) if text]
        bar.set_postfix_str(", ".join(notes), refresh=False)
        bar.refresh()
        if event.total is not None and event.done >= event.total:
            bar.close()
            del bars[event.stage]

    return callback
