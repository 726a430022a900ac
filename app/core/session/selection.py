"""What a page works on: one frozen value for the model, the task and how many examples are evaluated
(:class:`Selection`), and one for the scores asked of it (:class:`ScoreRequest`).

Cached calls and long jobs that depend on the task take these values instead of loose ``(spec, task_name,
limit)`` arguments, so a value is the key of the cross-session cache and of the session's jobs (docs/DESIGN.md
says which calls take which). The session's selection comes from :func:`app.sidebar.pickers.selection`. One name
per size: ``eval_size``, the examples evaluated (this value's field); ``default_eval_size``, a model's own size
when the user chose none (:func:`app.model.workload.default_eval_size`); ``score_size``, the examples a scorer
reads on the score split (:attr:`ScoreRequest.score_size`).

Pure: no Streamlit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Selection:
    """The model, the task and the evaluation size a result is computed for."""

    model: str                        # model spec: "default", a prepared model, a local folder or a hub id
    task: str                         # task name: "movie-sentiment", a GLUE/WMT name, "file:PATH"
    eval_size: int | None = None      # examples evaluated (the first N of the evaluation split); None: all

    def __post_init__(self) -> None:
        if self.eval_size is not None and (isinstance(self.eval_size, bool) or not isinstance(self.eval_size, int)
                                           or self.eval_size < 1):
            raise ValueError(f"Selection.eval_size must be a positive int or None, got {self.eval_size!r}.")

    def without_size(self) -> Selection:
        """This model and task with no evaluation size: the key of results that do not depend on it (scores, roles)."""
        return Selection(self.model, self.task)


@dataclass(frozen=True)
class ScoreRequest:
    """Every head's importance asked of a model on a task: by ``scorer`` on ``score_size`` examples of the score
    split, with ``seed``. Its selection carries no evaluation size (scores do not depend on it), so one request
    keys the cache, the kept file and the job whatever size the page evaluates; build it with :meth:`of`."""

    sel: Selection                    # the model and the task, ``eval_size`` None
    scorer: str                       # a registered scorer's name (``pruning_core.scoring``)
    score_size: int | None            # examples the scorer reads; None: all of the split
    seed: int = 0

    def __post_init__(self) -> None:
        if self.sel.eval_size is not None:
            raise ValueError(f"ScoreRequest.sel must carry no evaluation size, got {self.sel!r}: build it with "
                             "ScoreRequest.of(sel, scorer, score_size).")

    @classmethod
    def of(cls, sel: Selection, scorer: str, score_size: int | None, seed: int = 0) -> ScoreRequest:
        """The request for ``sel``'s model and task, whatever its evaluation size."""
        return cls(sel.without_size(), scorer, score_size, seed)


__all__ = ["ScoreRequest", "Selection"]
