"""Share: the analysis as JSON and as an offline HTML report, a link, the pruned model; load one back."""
import streamlit as st

from app.model import cache
from app.sidebar import pickers
from app.core import ui, uncertainty
from app.core.session import state
from app.share import report, links, ui as share_ui
from app.share.analysis import link_params, read_shared_file
from app.core.access import task_label
from app.core.text import md_code, md_escape

ui.page_intro("Share", """
Send your analysis to a colleague, or keep it. **The JSON bundle** holds everything (model, task,
mask, scores, curves, measurements, provenance) in headprune's own file formats; **the HTML
report** shows the same with interactive plots and opens offline in any browser; **the link**
reopens the dashboard with the same model, task, score and mask; **the pruned model** is a
smaller model you can load with headprune. Load a bundle, a report or a mask file in the second tab
to restore that exact state here.""")

sel, scorer = pickers.selection(), state.scorer_name()
spec, task_name = sel.model, sel.task
share_tab, load_tab = st.tabs(["Share this analysis", "Load an analysis"])

with load_tab:      # drawn first: it must not wait for the downloads below to be computed
    upload = st.file_uploader("A JSON bundle, an HTML report or a mask file", type=["json", "html", "htm"],
                              key=state.widget_key("share", "upload"))
    if upload is not None:
        try:
            a = read_shared_file(upload.getvalue(), repr(upload.name))
            target = share_ui.check_restorable(a)           # checked against the model now, not after Restore
        except Exception as exc:  # noqa: BLE001 - a message, never a traceback
            ui.show_error(exc, "This file cannot be restored here")
        else:
            st.markdown(f"**{md_escape(upload.name)}**: model {md_code(target.model)}, task "
                        f"{md_code(task_label(target.task))} ({md_escape(target.task_from)}), scorer "
                        f"{md_code(a.scorer or scorer)}, **{a.mask.n_kept}/{a.mask.n_total} heads kept**"
                        + (f", {md_escape(a.evaluation.metric_name)} {md_escape(seen.value)} "
                           f"({md_escape(seen.interval)})" if (seen := a.evaluation and uncertainty.shown(a.evaluation))
                           else "")
                        + ".")
            st.button("Restore this analysis", type="primary", on_click=share_ui.restore_analysis,
                      args=(a, upload.name), key=state.widget_key("share", "restore"))
            st.caption("Restoring switches to this model, task, score, evaluation size and mask; "
                       "the other pages then show that state (and the link reproduces it).")

arch = pickers.load_architecture(spec)
if arch is None:
    st.stop()
try:
    share_ui.check_selection(sel)
except Exception as exc:  # noqa: BLE001 - a message, never a traceback
    with share_tab:
        ui.show_error(exc, f"Nothing to share for model {md_code(spec)} on task {md_code(task_label(task_name))}")
        st.caption("Choose a model and a task that go together on the **Model & data** page.")
    st.stop()
mask = state.current_mask(arch.layout)
with share_tab:
    o1, o2, o3 = st.columns([2, 1, 1])
    computed = sorted(share_ui.computed_curves(cache.load(spec), task_name))
    curve_scorers = o1.multiselect("Include pruning curves of", cache.scorer_names(), default=computed,
                                   key=state.widget_key("share", "curves"),
                                   help="Every curve this session computed is included (at the Curves page's "
                                        "settings); others are computed now (step 10 %, no re-scoring).")
    with_ablation = o2.toggle("Single-head ablation", key=state.widget_key("share", "ablation"))
    with_one = o3.toggle("One head per layer", key=state.widget_key("share", "one"))
    downloads = st.container()         # filled below: the analysis may score and time first, the link needs neither
    link = links.share_link(links.link_base(st.context.url),
                            link_params(spec, task_name, scorer, sel.eval_size, mask))
    st.markdown("**Link** · opens the Head map with this model, task, score, evaluation size and mask")
    st.code(link, language=None, wrap_lines=True)
    st.markdown("**Command** · measures the link's mask on its model, task and examples")
    st.code(links.link_command(link), language="bash", wrap_lines=True)
    printed = st.empty()
    with downloads:
        analysis = share_ui.gather_analysis(sel, scorer, mask, curve_scorers=curve_scorers,
                                         with_ablation=with_ablation, with_one_per_layer=with_one)
        stem = links.pruned_folder_name(spec, mask).replace("-pruned-", "-")
        d1, d2, d3 = st.columns(3)
        d1.download_button("JSON bundle", analysis.to_bytes(), f"{stem}-analysis.json", "application/json",
                           on_click="ignore", icon=":material/data_object:", key=state.widget_key("share", "json"))
        d2.download_button("HTML report", lambda: report.build_report(analysis, link=link).encode(),
                           f"{stem}-report.html", "text/html", on_click="ignore", icon=":material/description:",
                           key=state.widget_key("share", "html"))
        loaded = cache.load(spec)
        if mask.is_full():                # nothing removed: the pruned model would be the model itself
            d3.caption("No pruned model to download: all heads are kept. Remove heads on the Head map first.")
        else:
            d3.download_button(f"Pruned model ({mask.n_kept}/{mask.n_total} heads, zip)",
                               lambda: links.pruned_model_zip(loaded, mask, task_name),
                               f"{links.pruned_folder_name(spec, mask)}.zip", "application/zip", on_click="ignore",
                               icon=":material/folder_zip:", key=state.widget_key("share", "zip"))
        included = [k for k, v in analysis.to_json().items()
                    if v and k in ("scores", "curves", "eval", "ablation", "one_per_layer", "bench")]
        st.caption(f"The bundle has the mask{''.join(', ' + k for k in included)}."
                   + ("" if mask.is_full() else " Unzip the model and load it with "
                      "`pruning_core.modeling.sources.loading.load_model(folder)`, or measure it with "
                      f"`{links.evaluate_command(links.pruned_folder_name(spec, mask), task_name)}`."))
    if analysis.evaluation is not None:
        seen = uncertainty.shown(analysis.evaluation)
        printed.caption("It prints, as the dashboard shows it: " + md_escape(
            f"{uncertainty.labelled(analysis.evaluation.metric_name, f'{seen.value} ({seen.interval})')}, "
            f"loss {analysis.evaluation.loss:.4f}") + ".")
    if task_name.startswith("file:"):
        st.caption("The task is a file on this server: a colleague on another machine needs the same file.")
