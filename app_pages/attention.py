"""Attention: what each head looks at for one sentence, with all heads and with the current mask."""
import streamlit as st

from app.attention import figures, ui as attention_ui, cache as cache_attention
from app.attention import jobs as attention_jobs, logit_attribution
from app.model import jobs
from app.sidebar import pickers
from app.core import ui
from app.core.session import state
from app.roles import ui as role_ui
from app.core.access import task_label
from app.core.session.selection import Selection
from app.core.text import md_code

spec, task_name = state.model_spec(), state.task_spec()
intro = st.container()          # the title on top, its text known once the model (its family) is
arch = pickers.load_architecture(spec)
with intro:
    ui.page_intro("Attention", attention_ui.intro(arch.task_type if arch is not None else None))
if arch is None:
    st.stop()
mask = state.current_mask(arch.layout)

source = st.radio("Input", ["Type a sentence", "An example from the data"], horizontal=True,
                  key=state.widget_key("attention", "source"))
text, text_b = "", None
if source == "Type a sentence":
    text = st.text_input("Sentence", "The plot was dull, but the acting was really great.",
                         key=state.widget_key("attention", "text"), max_chars=1000)
else:
    examples = jobs.examples(task_name, 20).show() or []
    if not examples:
        st.info(f"Task {md_code(task_label(task_name))} has no examples to show; type a sentence instead.")
        st.stop()
    index = st.selectbox("Example", range(len(examples)), key=state.widget_key("attention", "example"),
                         format_func=lambda i: " ‖ ".join(x for x in figures.example_text(examples[i]) if x)[:120])
    text, text_b = figures.example_text(examples[index])
if not text.strip():
    st.info("Type a sentence above: the attention views need at least one word.")
    st.stop()

call = attention_jobs.attention_run(spec, text, text_b, mask, task_name)
run = call.show()
if run is None:
    st.stop()
attention_ui.show_predictions(run)

thumbs, head_tab, model_tab, role_tab, *dla_tab = st.tabs(["Every head", "bertviz: head view", "bertviz: model view",
                                                             "Head roles: probe", *logit_attribution.tabs(arch)],
                                                            key=state.widget_key("attention", "tabs"))  # kept on reruns
with thumbs:
    c1, c2, c3 = st.columns(3)
    # remembered: these are not drawn while the sentence is empty, and must not fall back then
    kind = c1.selectbox("Attention kind", list(run.kinds), format_func=lambda k: arch.kind_labels[k],
                        **ui.remembered(state.widget_key("attention", "kind"), run.kinds[0])) \
        if len(run.kinds) > 1 else run.kinds[0]
    kept_from = c2.radio("Kept heads as computed by", ["pruned", "dense"], horizontal=True,
                         format_func={"pruned": "the pruned model", "dense": "the full model"}.get,
                         **ui.remembered(state.widget_key("attention", "kept_from"), "pruned"))
    arrange = c3.radio("Arrange", ["grid", "grouped"], horizontal=True,
                       format_func={"grid": "as on the head map", "grouped": "kept | removed"}.get,
                       **ui.remembered(state.widget_key("attention", "arrange"), "grid"))
    st.plotly_chart(figures.thumbnails_figure(run, kind, kept_from=kept_from, arrange=arrange),
                    config={"displaylogo": False},
                    alt="Attention map of every head: rows are layers, kept heads in blue, removed heads in grey")
    st.caption("Each small square is one head's map: row = the token that reads, column = the token read from; "
               "darker = more attention. Hover for the tokens and the weight.")
for tab, view in ((head_tab, "head"), (model_tab, "model")):
    with tab:
        which = st.radio("Model", ["dense", "pruned"], horizontal=True, key=state.widget_key("attention", view),
                         format_func={"dense": "all heads", "pruned": "pruned (removed heads empty)"}.get)
        try:
            page = cache_attention.bertviz_html(*call.args, view, which)   # the run's own inputs
        except Exception as exc:  # noqa: BLE001 - shown, never a traceback
            ui.show_error(exc, f"bertviz {view} view")
            continue
        st.iframe(page, height=figures.view_height(run, view), alt=f"bertviz {view} view of the {which} model")
        st.caption("Hover over a token to see where it attends; click the coloured squares to show or hide heads "
                   "(double-click: only that head)." if view == "head" else
                   "Every layer (row) and head (column) at once; click a thumbnail to enlarge it.")
with role_tab:                  # what a role's probe looks like to one head (the induction stripe)
    role_ui.probe_tab(Selection(spec, task_name), arch)
for tab in dla_tab:             # a decoder LM: the tokens one head promotes, and the answer without it
    with tab:
        logit_attribution.show(spec, arch, text)
