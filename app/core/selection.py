"""What a page works on: one frozen value for the model, the task and how many examples are evaluated.

Every cached call and every long job takes a :class:`Selection` instead of loose ``(spec, task_name, limit)``
arguments, so it is the key of the cross-session cache (``st.cache_data`` hashes its fields) and of the
session's jobs. The session's selection comes from :func:`app.sidebar.pickers.selection`.

"How many examples", one name per idea in the app:

- ``eval_size``: examples evaluated, the first N of the task's evaluation split (this value's field).
- ``default_eval_size``: a model's own evaluation size when the user chose none (a click in about 5 s;
  :func:`app.model.workload.default_eval_size`).
- ``score_size``: examples a scorer reads on the score split (:func:`app.model.workload.score_size`).

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


__all__ = ["Selection"]
