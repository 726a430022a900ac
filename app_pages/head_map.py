"""Head map: click heads to remove or restore them; the metric, size and speed follow."""
import streamlit as st

from app import cache, headmap, headmap_ui, latency_ui, state, ui, uncertainty, workload
from app.access import task_label
from app.text import md_code, md_escape
from pruning_core.metrics import get_metric

ui.page_intro("Head map", """
Each square is one attention head: rows are layers (0 at the top), columns are heads. **Filled
squares are kept** and coloured by the chosen importance score (brighter = more important);
**grey crossed squares are removed**. Click a head to remove or restore it, or use a preset. The
live panel (beside the map, or below it on a narrow screen) re-evaluates the model with exactly
these heads switched off, and times the physically smaller model against the full one.""")

PANEL_PX = 360          # the live panel's width: two metrics side by side, or one per line when long
spec, task_name = state.model_spec(), state.task_spec()
arch = ui.load_architecture(spec)
if arch is None:
    st.stop()
c1, c2, _ = st.columns([2, 1, 2])
with c1:
    scorer = ui.scorer_picker("headmap")
with c2:
    limit = ui.eval_size_picker("headmap")
layout, mask = arch.layout, state.current_mask(arch.layout)
ui.show_notices()                     # e.g. a shared link whose mask does not fit this model

n_score = cache.score_limit(scorer, limit)      # slow models and per-head scorers: on a click, with an estimate
result = ui.run_job(f"score_{scorer}", workload.scoring_label(spec, task_name, scorer, n_score, arch.layout.total_heads),
                    cache.scores, spec, task_name, scorer, n_score,
                    auto=not workload.waits_for_click(spec, task_name, scorer, n_score, arch.layout.total_heads))
ranking = result.ranking_scores if result is not None else None
# the map keeps the width its squares need; the panel sits beside it, or below it on a narrow
# screen (a 1024 x 768 projector), rather than squeezing either
map_px = max(headmap.figure_width(max(max(layout.kinds[k]) for k in layout.kinds)), 480)
page_row = st.container(horizontal=True, wrap=True, gap="large")
left, right = page_row.container(width=map_px), page_row.container(width=PANEL_PX)
with left:
    for kind in layout.kinds:
        headmap_ui.show_grid(kind, mask, ranking, scorer if ranking is not None else "")
        if note := headmap_ui.kv_groups_note(kind, arch.kv_groups.get(kind, ())):
            st.caption(note)
    with st.container(border=True):
        p1, p2 = st.columns([3, 2])
        pct = p1.slider("Share of heads to remove (%)", 0, 100, 50, 5, key=state.widget_key("headmap", "pct"))
        per_layer = p2.radio("Ranking", ["global", "per layer"], horizontal=True,
                             key=state.widget_key("headmap", "scope")) == "per layer"
        b = st.columns(2)
        b[0].button(f"Remove {pct} % least important", on_click=headmap_ui.apply_preset, disabled=ranking is None,
                    args=("remove_least", layout, ranking, pct / 100, per_layer), width="stretch")
        b[1].button("Keep the best head per layer", on_click=headmap_ui.apply_preset, disabled=ranking is None,
                    args=("one_per_layer", layout, ranking), width="stretch")
        b = st.columns(4)
        b[0].button("Invert", on_click=headmap_ui.apply_preset, args=("invert", layout), width="stretch")
        b[1].button("Reset", on_click=headmap_ui.apply_preset, args=("reset", layout), width="stretch")
        b[2].button("Undo", on_click=state.undo, disabled=not state.can_undo(), icon=":material/undo:",
                    width="stretch")
        b[3].button("Redo", on_click=state.redo, disabled=not state.can_redo(), icon=":material/redo:",
                    width="stretch")

with right:                           # drawn after the map: a click shows at once, numbers follow
    st.subheader("Live panel")
    # cheap numbers of the new mask first, then placeholders that say "updating…" until the
    # metric and the latency of this mask exist: nothing on the panel belongs to the previous mask
    changed = not mask.is_full()
    pruned_params, dense_params = cache.pruned_parameters(spec, mask)
    row = ui.metric_row()
    row.metric("heads kept", f"{mask.n_kept} / {mask.n_total}", width="content")
    row.metric("parameters", ui.count_text(pruned_params), width="content",
               **ui.delta_kwargs(f"{100 * (pruned_params - dense_params) / dense_params:+.1f} %" if changed else None,
                                 "inverse"))
    metric_slot = ui.updating("metric and loss")
    speed_slot = ui.updating("latency") if changed else st.empty()
    st.markdown("**History** · click a point to go back to that step")
    history_slot = st.container()

with ui.filling(metric_slot, "metric and loss"):
    ev = ui.run_job("eval", "Evaluating this mask", cache.evaluate, spec, task_name, limit, mask)
    dense = ui.run_job("eval_dense", "Evaluating all heads", cache.evaluate, spec, task_name, limit, None)
    if ev is not None and dense is not None:
        m1 = m2 = ui.metric_row()
        metric = get_metric(ev.metric_name)
        now, base = uncertainty.shown(ev), uncertainty.shown(dense)
        diff = uncertainty.change(dense, ev, cache.comparison(spec, task_name, limit, mask)) if changed else None
        m1.metric(ui.metric_label(ev.metric_name), now.value, width="content",
                  **ui.delta_kwargs(diff.text if diff else None, "normal" if metric.higher_is_better else "inverse",
                                    within_noise=bool(diff and diff.within_noise)),
                  help=f"{now.interval}." + (f" Change: {diff.detail}." if diff else ""))
        loss_slot = m2.empty()
        loss_slot.metric("loss", f"{ev.loss:.4f}", width="content",
                         help="The change follows: per-example losses are compared.")
        st.caption(f"On the first {ev.n_examples} examples of the {md_code(cache.split_of(task_name))} split of "
                   f"{md_code(task_label(task_name))}: {md_escape(ui.metric_label(ev.metric_name))} "
                   f"{md_escape(now.value)} "
                   f"({md_escape(now.interval)}). "
                   f"All heads: {md_escape(base.value)} ({md_escape(base.interval)})."
                   + (f" Change: {md_escape(diff.detail)}." if diff else ""))
        loss_diff = None
        if changed:                   # the loss change with its paired interval over examples
            per = [ui.run_job(f"losses_{n}", "Per-example losses", cache.example_outputs, spec, task_name, limit, m)
                   for n, m in (("dense", None), ("mask", mask))]
            loss_diff = uncertainty.loss_change(*per) if None not in per else None
        loss_slot.metric("loss", f"{ev.loss:.4f}", width="content",
                         **ui.delta_kwargs(loss_diff.text if loss_diff else None, "inverse",
                                           within_noise=bool(loss_diff and loss_diff.within_noise)),
                         help="Mean cross-entropy" + (f". Change: {loss_diff.detail}." if loss_diff else "."))
with history_slot:
    headmap_ui.show_history(spec, task_name, limit, ev.metric_name if ev is not None else "accuracy")
with ui.filling(speed_slot, "latency"):
    latency_ui.latency_panel(spec, mask)
