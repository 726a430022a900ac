"""Results this session keeps that no cache key finds again: the last speed sweep ("bench"), the Head
map's latency probes and history metrics, a loaded analysis ("analysis"). Held under
:data:`app.core.session.state.RESULTS`, each with the model and task it was made for, so another model's result is
never shown."""
from __future__ import annotations

from typing import Any

import streamlit as st

from app.core.session import state


def set_result(name: str, value: Any) -> None:
    """Remember ``value`` under ``name`` for the current model and task (``None`` forgets it)."""
    results = st.session_state.setdefault(state.RESULTS, {})
    if value is None:
        results.pop(name, None)
    else:
        results[name] = (state.model_spec(), state.task_spec(), value)


def get_result(name: str) -> Any | None:
    """The value stored by :func:`set_result`, or None if absent or stored for another model/task."""
    entry = st.session_state.get(state.RESULTS, {}).get(name)
    if entry is None or (entry[0], entry[1]) != (state.model_spec(), state.task_spec()):
        return None
    return entry[2]


__all__ = ["set_result", "get_result"]
