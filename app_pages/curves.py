"""Curves: iterative pruning curves per scorer, and the single-head and one-head-per-layer tables."""
import streamlit as st

from app.model import cache, jobs as model_jobs
from app.curves import jobs
from app.sidebar import pickers
from app.curves import figures, kinds, tables
from app.core import ui, uncertainty
from app.core.progress_text import about
from app.core.session import state
from app.core.text import md_code, md_escape
from app.runtime.work import start_button
from pruning_core.evaluation.metrics import get_metric

ui.page_intro("Curves", """
A **pruning curve** removes heads in order of increasing importance, a step at a time, and
measures the metric after each step (Michel et al. 2019). A good importance score keeps the
curve flat for longer; the **random** scorer is the baseline to beat. The star is your current
mask from the Head map. Below, the **single-head ablation** table shows what removing each head
*alone* does, and **one head per layer** what remains when a layer keeps only its best head.
Click a column header to sort; download the tables as CSV or as headprune JSON.""")

arch = pickers.load_architecture(state.model_spec())
if arch is None:
    st.stop()
names = cache.scorer_names()
# two rows of two: four columns cut the labels ("Re-sc…") and the number box's -/+ at 1024 x 768
c = [*st.columns([3, 2], gap="medium"), *st.columns([3, 2], gap="medium", vertical_alignment="bottom")]
# choices kept across page visits (Streamlit forgets a widget that a page run does not draw)
chosen = c[0].multiselect("Scorers", names, **ui.remembered(state.widget_key("curves", "scorers"),
                                                           [n for n in ("gradient", "random") if n in names]),
                          help="ablation needs one evaluation per head before the curve starts: slow on big models")
step = c[1].select_slider("Step (share of heads)", [0.05, 0.1, 0.2, 0.25],
                          **ui.remembered(state.widget_key("curves", "step"), 0.1))
rescore = c[2].toggle("Re-score each step", **ui.remembered(state.widget_key("curves", "rescore"), False),
                      help="Michel et al. score once; the later HF port re-scores the remaining heads")
with c[3]:
    sel = pickers.eval_size_picker("curves")

# curves start on the button only; they run on while the user is on other pages
calls = [jobs.curve(sel, name, step, rescore, start="button") for name in chosen]
waiting = {name: call.estimate_s for name, call in zip(chosen, calls) if not call.started() and not call.cached()}
start_button("Compute the curves", "curves_start", calls, type="primary", icon=":material/play_arrow:",
             help="The work goes on while you look at other pages.")
if waiting:
    st.caption(f"Computing {'them' if len(waiting) > 1 else 'it'} takes {about(sum(waiting.values()))} "
               "on 2 CPU cores (" + ", ".join(f"{md_escape(n)} {about(s).removeprefix('about ')}"
                                              for n, s in waiting.items()) + ").")
curves = {}
for call in calls:
    # one button for all: no "Run:" button of its own; a curve the server holds shows at once
    result = call.show() if call.started() or call.cached() else None
    if result is not None:
        curves[call.job.removeprefix("curve_")] = result
mask = state.current_mask(arch.layout)
ui.show_notices()
current = model_jobs.evaluation(sel, mask).show()
dense = model_jobs.dense_evaluation(sel).show()
if curves:
    point = (1 - mask.n_kept / mask.n_total, current.metric) if current is not None else None
    first = next(iter(curves.values()))
    # chance: the accuracy of always answering the most frequent label (a metric that averages a
    # per-example score); no line for corpus-level metrics (F1, BLEU) or texts
    chance = uncertainty.majority_share(cache.references(sel)) \
        if get_metric(first.metric_name).per_example else None
    st.plotly_chart(figures.curves_figure(curves, point, f"current mask ({mask.n_kept}/{mask.n_total} kept)",
                                         dense.metric if dense is not None else None, chance),
                    alt="Metric against the share of heads removed, one line per scorer")
    st.caption(f"Each point: the metric on the first {first.n_examples} evaluation examples "
               f"({md_code(first.provenance.get('split'))}), with its 95 % interval; heads scored on "
               f"{md_code(first.provenance.get('settings', {}).get('score_split'))}. A shaded band: the range "
               "over seeds of a seeded scorer (the line is their mean)."
               + (f" Dashed red: the majority class, {100 * chance:.0f} % of these examples (always answering "
                  "it scores that)." if chance is not None else ""))
    baseline = model_jobs.unigram(sel).show() \
        if dense is not None and cache.task_summary(sel.task)["task_type"] == "language_model" else None
    if baseline is not None:
        st.caption(uncertainty.unigram_reference(dense, baseline))
    ui.downloads("curves", tables.curves_frame(curves), {n: r.to_json() for n, r in curves.items()},
                 show_table="The curves as a table")

iv = dense.interval if dense is not None else None     # values rounded as the Head map rounds them
ablation_tab, one_tab, kinds_tab = st.tabs(["Single-head ablation", "One head per layer", "Attention kinds"])
with ablation_tab:                     # a button that says the cost, not a switch: it runs once per click
    table = jobs.ablation(sel, start="button").show()
    if table is not None:
        st.caption(f"Base {ui.metric_text(table.metric_name, table.base_metric, iv)}; "
                   f"a change {get_metric(table.metric_name).helps_sign} 0 without a head means the head helps. "
                   "Cells marked n.s. (greyed) are not significant after correction; * are.")
        st.plotly_chart(figures.ablation_figure(table), key="ablation_heatmap",
                        alt="Change of the metric when each head alone is removed, per layer and head")
        st.caption(md_escape(f"{table.note} Test: {table.test or 'none'}."))
        ui.downloads("ablation", tables.ablation_frame(table), table.to_json())
with one_tab:
    how = st.radio("Best head chosen by", ["search (evaluate every head)", f"{state.scorer_name()} scores"],
                   horizontal=True, key=state.widget_key("curves", "one_how"))
    by = None if how.startswith("search") else state.scorer_name()
    table = jobs.one_per_layer(sel, by, start="button").show()
    if table is not None:
        st.caption(f"All layers reduced at once: {ui.metric_text(table.metric_name, table.all_layers_metric, iv)} "
                   f"(all heads: {ui.metric_text(table.metric_name, table.base_metric, iv)}).")
        ui.downloads("one_per_layer", tables.one_per_layer_frame(table), table.to_json())
with kinds_tab:
    kinds.show(sel, arch)
