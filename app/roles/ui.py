"""Head roles on the dashboard: the roles job, the Head map's colouring and protection controls, the
mask's role summary, and the Attention page's role probe.

The role report is :func:`app.roles.cache.roles` (``st.cache_data``: one computation per model, weights, task
and seed for every session), run as this session's job :data:`JOB` (:class:`app.runtime.work.Work`): it starts
by itself only when it is cheap (:func:`app.model.workload.roles_wait_for_click`), else on a click with its
time estimate, with progress and Cancel. The Head map's fragment draws the map with the report it has
(:func:`ready`: no work), and :func:`show_roles_job` at the end of the fragment reruns it once a report arrives.
"""
from __future__ import annotations

import streamlit as st

from pruning_core.core.heads import HeadMask
from pruning_core.analysis.roles import RoleReport, get_role, protected_heads, removal_summary, role_names
from pruning_core.analysis.roles.base import kinds_for
from pruning_core.analysis.roles.report import STRONGEST_RULE

from app.attention import figures
from app.roles import cache
from app.core import ui
from app.core.session import state
from app.model import workload
from app.core.colouring import IMPORTANCE, STRONGEST
from app.core.session.selection import Selection
from app.core.text import md_escape
from app.runtime.work import PENDING, Work

JOB = "roles"


def applicable(arch) -> list[str]:
    """The roles that apply to the model of ``arch`` (an ``ArchSummary``), in registry order."""
    return [r for r in role_names() if kinds_for(get_role(r), arch.task_type, arch.layout.kinds)]


def ready(sel: Selection) -> RoleReport | None:
    """This session's finished role report of ``sel``'s model on its task; None when not (yet) computed. No work."""
    return Work(JOB, "Finding head roles", cache.roles, (sel.without_size(),)).ready()


def show_roles_job(slot, sel: Selection, wanted: bool, drawn: RoleReport | None,
                   wait: bool = True) -> Work | None:
    """In ``slot``: the roles job when ``wanted`` (its button with the time estimate, or its progress); once
    its report is there and the map was ``drawn`` without one, rerun so the map shows it. Returns the job
    while it runs and ``wait`` is False (:meth:`app.runtime.work.Work.show`), else None."""
    if not wanted:
        return None
    job = Work(JOB, workload.roles_label(sel), cache.roles, (sel.without_size(),),
               start="button" if workload.roles_wait_for_click(sel) else "auto")
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
    options = [IMPORTANCE, *applicable(arch), STRONGEST]
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
    return st.multiselect("Protect roles", applicable(arch), key=state.widget_key("headmap", "protect"),
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


def alignment_caption(report: RoleReport, listed: list[tuple[int, int]] | None) -> None:
    """The audio-alignment detector's top heads beside the model's own list (Whisper's ``alignment_heads``)."""
    from pruning_core.analysis.roles.alignment import compare_listed
    grid = report.scores.get("alignment", {}).get("cross")
    if grid is None or not listed:
        st.caption("This model lists no alignment heads of its own to compare the detector with.")
        return
    got = compare_listed(grid, listed)
    heads = ", ".join(f"L{layer}H{head}{' ✔' if (layer, head) in got['hits'] else ''}" for layer, head in got["top"])
    st.caption(f"**Against the model's own list**: the detector's top {len(listed)} cross-attention heads are "
               f"{heads}; {len(got['hits'])} of them are among the {len(listed)} alignment heads the model's "
               f"generation config lists (✔; precision {got['precision']:.0%}).")


# -- the Attention page's role probe -------------------------------------------------------------------
def probe_tab(sel: Selection, arch) -> None:
    """A role's probe input and one head's attention map on it, the head with the highest score first."""
    roles = applicable(arch)
    if not roles:
        st.info("No head role applies to this model's attention.")
        return
    c1, c2 = st.columns([1, 2])
    role = c1.selectbox("Role", roles, format_func=lambda r: get_role(r).title,
                        **ui.remembered(state.widget_key("attention", "role"),
                                        "induction" if "induction" in roles else roles[0]))
    view = Work("role_probe", f"Running the model on the {get_role(role).title} probe", cache.role_probe,
                (sel.without_size(), role), progress=False).show()
    if view is None:
        return
    kind = view.kinds[0] if len(view.kinds) == 1 else c2.selectbox(
        "Attention kind", view.kinds, format_func=lambda k: arch.kind_labels[k],
        key=state.widget_key("attention", "role_kind"))
    ranked = view.ranked(kind)
    pick = c2.selectbox("Head (highest score on this probe first)", range(len(ranked)),
                        key=state.widget_key("attention", f"role_head_{role}_{kind}"),
                        format_func=lambda i: f"layer {ranked[i][0]}, head {ranked[i][1]} · score {ranked[i][2]:.2f}"
                                              f"{' ✔' if ranked[i][2] > view.threshold else ''}")
    layer, head, _ = ranked[pick]
    st.caption(f"**Probe**: {md_escape(view.input)}. **Score**: {md_escape(get_role(role).score)} (A: the head's "
               "attention weights, a row per reading token, a column per token read; [BOS]: the start token); a head with a "
               f"score above {view.threshold:g} has the role (✔). " + " ".join(md_escape(n) for n in view.notes))
    report = ready(sel)
    if report is not None and (full := report.score(role, (kind, layer, head))) is not None:
        st.caption(f"Over the whole probe set this head scores {full:.2f} "
                   f"({'has' if full > view.threshold else 'does not have'} the role).")
    if role == "alignment" and report is not None:
        alignment_caption(report, cache.listed_alignment(sel))
    q_tokens, k_tokens = view.tokens[kind]
    st.plotly_chart(figures.probe_figure(view.maps[kind][layer][head], q_tokens, k_tokens,
                                           f"layer {layer}, head {head} on the {get_role(role).title} probe",
                                           stripe=view.stripe, span=view.span),
                    config={"displaylogo": False}, key=state.widget_key("attention", "role_map"),
                    alt=f"Attention map of layer {layer}, head {head} on the {role} probe")
