"""Head roles on the Head map: the colouring and protection controls, the mask's role summary, and the roles job.

The role report is the shared job :func:`app.model.jobs.roles` (it starts by itself only when it is cheap, else
on a click with its time estimate). The Head map's fragment draws the map with the report it has (:func:`ready`:
no work), and :func:`show_roles_job` at the end of the fragment reruns it once a report arrives.
"""
from __future__ import annotations

import streamlit as st

from pruning_core.core.heads import HeadMask
from pruning_core.analysis.roles import RoleReport, get_role, protected_heads, removal_summary, role_names
from pruning_core.analysis.roles.report import STRONGEST_RULE

from app.core.session import state
from app.core.colouring import IMPORTANCE, STRONGEST
from app.core.session.selection import Selection
from app.core.text import md_escape
from app.model import jobs
from app.model.cache import applicable_roles
from app.runtime.work import PENDING, Work


def ready(sel: Selection) -> RoleReport | None:
    """This session's finished role report of ``sel``'s model on its task; None when not (yet) computed. No work."""
    return jobs.roles(sel, sized=False).ready()


def show_roles_job(slot, sel: Selection, wanted: bool, drawn: RoleReport | None,
                   wait: bool = True) -> Work | None:
    """In ``slot``: the roles job when ``wanted`` (its button with the time estimate, or its progress); once
    its report is there and the map was ``drawn`` without one, rerun so the map shows it. Returns the job
    while it runs and ``wait`` is False (:meth:`app.runtime.work.Work.show`), else None."""
    if not wanted:
        return None
    job = jobs.roles(sel)
    with slot:
        report = job.show(wait)
    if report is PENDING:
        return job
    if report is not None and drawn is None:
        st.rerun()
    return None


def _title(option: str) -> str:
    return {IMPORTANCE: "importance (score above)", STRONGEST: "strongest role per head"}.get(
        option, f"role: {get_role(option).title}" if option in role_names() else option)


def colour_picker(arch) -> str:
    """'Colour heads by': importance, one role, or each head's strongest role."""
    options = [IMPORTANCE, *applicable_roles(arch), STRONGEST]
    key = state.widget_key("headmap", "colour")
    if st.session_state.get(key) not in options:            # another model: its roles differ
        st.session_state[key] = IMPORTANCE
    return st.selectbox("Colour heads by", options, key=key, format_func=_title,
                        help="Importance: the score chosen above. A role: how strongly each head does it (framed "
                             f"heads have it). Strongest role: per head, {STRONGEST_RULE}, since roles score on "
                             "different scales (a previous-token score of 0.72 over its threshold 0.40 is ×1.8 and "
                             "beats a positional 0.95 over 0.90, ×1.06). Hover a head for all its role scores. Roles "
                             "are found once per model and shared by every user.")


def protect_picker(arch) -> list[str]:
    """'Protect roles': heads with these roles are never removed by the presets."""
    return st.multiselect("Protect roles", applicable_roles(arch), key=state.widget_key("headmap", "protect"),
                          format_func=lambda r: get_role(r).title, placeholder="none",
                          help="Heads found to have one of these roles are never removed by the two presets above "
                               "(a head can matter little for this task and still be the model's only induction "
                               "head).")


def protected(report: RoleReport | None, names: list[str]) -> frozenset:
    """The heads ``names`` protect in ``report`` (none without a report)."""
    return protected_heads(report, names) if report is not None and names else frozenset()


def colour_note(colour: str, report: RoleReport | None) -> str | None:
    """What the map says while it cannot show the chosen colouring yet."""
    if colour == IMPORTANCE or report is not None:
        return None
    return f"Coloured by importance until the head roles are found (below the map); then by {_title(colour)}."


def summary_caption(report: RoleReport | None, mask: HeadMask) -> None:
    """The live panel's line on role heads: "Role heads: removes 3 of 4 induction heads, ..."."""
    if report is None:
        st.caption("Role heads: not found yet (choose a role colouring or protect a role to find them).")
        return
    st.caption(f"**Role heads**: this mask {md_escape(removal_summary(report, mask))}.")
