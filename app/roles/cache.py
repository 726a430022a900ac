"""Cached calls of the head-role probes (the Attention page's probe, the Tour's induction step), on the shared
model (only read; the role library runs plain eager forward passes); every head's role report is a model-floor
call, :func:`app.model.cache.roles`. The rules of :mod:`app.model.cache` hold."""
from __future__ import annotations

import streamlit as st

from app.core.session.selection import Selection
from app.model.cache import load, task
from app.roles.probe import ProbeView, probe_view
from pruning_core.core.progress import ProgressCallback
from pruning_core.analysis.roles import InductionCheck, induction_check

__all__ = ["induction_roles", "listed_alignment", "role_probe"]


@st.cache_data(show_spinner=False, max_entries=64)
def role_probe(sel: Selection, role: str, seed: int = 0) -> ProbeView:
    """One sequence of ``role``'s probe with every head's map on it (:func:`app.roles.probe.probe_view`)."""
    return probe_view(load(sel.model), task(sel.task), role, seed)


@st.cache_data(show_spinner=False, max_entries=8)
def induction_roles(sel: Selection, _progress: ProgressCallback | None = None) -> InductionCheck:
    """The Tour's induction step: :func:`pruning_core.analysis.roles.induction_check` (SmolLM2: 30-100 s on 2 CPU cores)."""
    return induction_check(load(sel.model), task=task(sel.task), progress=_progress)


def listed_alignment(sel: Selection) -> list[tuple[int, int]] | None:
    """The model's own alignment heads (Whisper's generation config), or None (:mod:`pruning_core.analysis.roles.alignment`)."""
    from pruning_core.analysis.roles.alignment import listed_alignment_heads
    return listed_alignment_heads(load(sel.model))
