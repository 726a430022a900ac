"""One-shot messages for the top of the next page run: a link's unreadable mask, a task switched to
suit a model, an upload that cannot be used. Queued under :data:`app.core.session.state.NOTICES`; shown once by
``app.core.ui.show_notices`` (every page's intro)."""
from __future__ import annotations

import streamlit as st

from app.core.session import state

LEVELS = ("info", "warning", "error", "success")


def add_notice(level: str, text: str) -> None:
    """Queue a message (``level`` one of :data:`LEVELS`) for the top of the next page.

    ``text`` is Markdown: pass values from a link, a file or an error through :mod:`app.core.text`."""
    st.session_state.setdefault(state.NOTICES, []).append((level, text))


def pop_notices() -> list[tuple[str, str]]:
    """The queued messages, oldest first; the queue is empty afterwards."""
    state.init()
    notices = list(st.session_state.get(state.NOTICES, []))
    st.session_state[state.NOTICES] = []
    return notices


__all__ = ["LEVELS", "add_notice", "pop_notices"]
