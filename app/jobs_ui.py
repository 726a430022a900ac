"""Several long jobs started by one button, and questions about this session's jobs (:mod:`app.jobs`).

A page that must not start work by itself (curves, ablation: minutes on a big model) describes
its calls as :class:`JobCall` s, draws :func:`start_button`, and shows each started call with
:meth:`JobCall.run` (progress while it runs, the result after, also after a visit to another page).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field as dataclass_field
from typing import Any

import streamlit as st

from app import jobs, state, ui


@dataclass(frozen=True)
class JobCall:
    """A :func:`run_job` call described up front, so a button can start several (:func:`start_button`)."""

    job: str
    label: str
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = dataclass_field(default_factory=dict)

    def started(self) -> bool:
        """Whether this session has this job (same arguments): running, finished or cancelled."""
        found = state.job_board().get(self.job)
        return found is not None and found.ident == jobs.identity(self.fn, self.args, self.kwargs)

    def running(self) -> bool:
        """Whether this session's job is this call and still running (e.g. started before a page change)."""
        return self.started() and state.job_board().running(self.job)

    def run(self) -> Any | None:
        """:func:`run_job` for this call (its progress, its result); None until started."""
        return ui.run_job(self.job, self.label, self.fn, *self.args, auto=False, **self.kwargs)


def start_button(label: str, key: str, calls: list[JobCall], **button: Any) -> None:
    """A button that starts every call of ``calls`` not started yet; drawn only while one is not
    started, so it is gone once the work runs (its results then show where the button was)."""
    waiting = [c for c in calls if not c.started()]
    if waiting:
        st.button(label, key=state.widget_key("job", key), on_click=_start_all, args=(waiting,), **button)


def _start_all(calls: list[JobCall]) -> None:
    for c in calls:
        ui.start_job(c.job, c.label, c.fn, c.args, c.kwargs, True)
