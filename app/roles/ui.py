"""The Attention page's role probe: a role's probe input and one head's attention map on it."""
from __future__ import annotations

import streamlit as st

from pruning_core.analysis.roles import RoleReport, get_role

from app.core import ui
from app.core.session import state
from app.core.session.selection import Selection
from app.core.text import md_escape
from app.model import jobs
from app.model.cache import applicable_roles
from app.roles import cache, figures
from app.runtime.work import Work


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


def probe_tab(sel: Selection, arch) -> None:
    """A role's probe input and one head's attention map on it, the head with the highest score first."""
    roles = applicable_roles(arch)
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
    report = jobs.roles(sel, sized=False).ready()
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
