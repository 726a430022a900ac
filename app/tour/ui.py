"""The Tour page's Streamlit glue: the model picker, each step's prepared state and figure, the
step's link and the previous / next buttons. The steps themselves are data (:mod:`app.tour.steps`).

Every step computes through the cached calls the other pages make, with the same arguments (so the
Curves, Head map and Attention pages then find the same results): the first visit to a step
computes it with a progress bar, later visits, from any session, are cache hits. A step then makes
its mask the session's (undoable, in the mask history), so the address bar, the step's link and
the page its click opens all show that state.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from pruning_core import bench
from pruning_core.core.heads import KIND_LABELS, HeadMask
from pruning_core.evaluation.kinds import borrow, missing_note

from app.attention import figures as attention, jobs as attention_jobs
from app.model import cache, jobs
from app.curves import jobs as curve_jobs
from app.sidebar import pickers
from app.curves import figures as charts, kinds as kinds_tab, tables, words
from app.roles import cache as cache_roles
from app.headmap import cache as cache_headmap, latency
from app.core import ui
from app.core.session import state
from app.core.session.selection import Selection
from app.tour import steps as tour
from app.runtime.work import Work
from app.core.pages import PAGES
from app.core.progress_text import count_text
from app.core.text import md_code, md_escape

PAGE_FILES = {p.url_path: p for p in PAGES}
TIME_BUTTON = "Time dense vs pruned"       # step 6's button, named by its text and its load warning


@dataclass(frozen=True)
class Ctx:
    """What a step computes on: the tour model, the session's selection of it and its heads."""

    model: tour.TourModel
    sel: Selection        # the tour model, its task and the session's evaluation size
    arch: object          # app.model.cache.ArchSummary

    @property
    def spec(self) -> str:
        return self.model.spec


def model_picker(models: tuple[tour.TourModel, ...]) -> tour.TourModel:
    """The tour model radio; makes the chosen model and its task the session's."""
    chosen = next((m for m in models if m.spec == state.model_spec()), models[0])
    key = ui.bind(state.widget_key("tour", "model"), chosen.key)
    by_key = {m.key: m for m in models}

    def changed() -> None:
        picked = by_key[st.session_state[key]]
        state.set_model_spec(picked.spec)
        state.set_task_spec(picked.task)
    st.radio("Model", list(by_key), format_func=lambda k: by_key[k].label, horizontal=True, key=key,
             on_change=changed)
    if (state.model_spec(), state.task_spec()) != (chosen.spec, chosen.task):
        state.set_model_spec(chosen.spec)
        state.set_task_spec(chosen.task)
    return chosen


def show_step(step: tour.TourStep, model: tour.TourModel, models: tuple[tour.TourModel, ...]) -> str | None:
    """The step's paragraph, its prepared state and figure, and the one thing to click; on a model it does
    not run on, why not (``models``: the picker's, named in that message). Returns the step's title as its data
    tell it, where a step's title depends on them (None: the step's own title)."""
    st.markdown(step.paragraph)
    runs_here = model.key in step.models
    if not runs_here:
        st.info(f"{tour.runs_on(step, models)} {step.not_on}", icon=":material/info:")
    arch = pickers.load_architecture(model.spec)
    if arch is None:
        return
    if runs_here and step.task_types and arch.task_type not in step.task_types:
        st.info(f"This step needs a language model. {step.not_on}", icon=":material/info:")
        runs_here = False
    if not runs_here:
        state.current_mask(arch.layout)         # a link's mask still becomes the session's, as on the other steps
        return
    ctx = Ctx(model, pickers.selection(), arch)       # the model picker made the tour model the session's
    drawn = VIEWS[step.name](ctx)
    if not drawn:
        return None
    ui.show_notices()
    page = PAGE_FILES[step.page]
    st.markdown(f"**Now click** · {step.click}")
    for page in (page, *(PAGE_FILES[name] for name in step.also)):
        st.page_link(page.file, label=f"Open {page.title}", icon=page.icon)
    return drawn if isinstance(drawn, str) else None


def navigation(step: tour.TourStep) -> None:
    """The step's link (what the address bar shows) and the previous / next buttons."""
    st.markdown("**Link to this step** (project it; students open the same state)")
    st.code(tour.step_link(st.context.url, state.share_params(page=state.TOUR_PAGE)), language=None,
            wrap_lines=True)
    before, after = tour.neighbours(step)
    c1, c2 = st.columns(2)
    if before is not None:
        c1.button(f"Previous: {before.title}", key=state.widget_key("tour", "previous"), icon=":material/arrow_back:",
                  on_click=state.set_tour_step, args=(before.name,))
    if after is not None:
        c2.button(f"Next: {after.title}", key=state.widget_key("tour", "next"), icon=":material/arrow_forward:",
                  type="primary", on_click=state.set_tour_step, args=(after.name,))


# -- each step: compute (cached), make its mask the session's, draw -------------------------------
def _prepare(mask: HeadMask, label: str) -> HeadMask:
    if state.current_mask(mask.layout) != mask:
        state.set_mask(mask, f"tour: {label}")
    return mask


def _scores(ctx: Ctx):
    """Gradient scores, the Head map's job; a step starts it by itself."""
    return jobs.scores(ctx.sel, tour.SCORER, ctx.arch.layout.total_heads, start="auto").show()


def _half_removed(ctx: Ctx) -> HeadMask | None:
    scores = _scores(ctx)
    return None if scores is None else _prepare(tour.half_removed(scores), "half the heads removed (gradient)")


def _one_head(ctx: Ctx) -> str | bool:
    table = curve_jobs.ablation(ctx.sel).show()
    if table is None:
        return False
    kind, layer, head = tour.costliest_head(table)
    _prepare(tour.one_head_removed(table, ctx.arch.layout),
             f"{KIND_LABELS[kind]} L{layer} H{head} removed (costliest alone)")
    row = next(r for r in table.rows if (r.kind, r.layer, r.head) == (kind, layer, head))
    significant = sum(bool(r.significant) for r in table.rows)
    st.plotly_chart(charts.ablation_figure(table), key="tour_ablation",
                    alt="Change of the metric when each head alone is removed, per layer and head")
    iv = _dense_interval(ctx)
    st.caption(f"All heads: {ui.metric_text(table.metric_name, table.base_metric, iv)}. The costliest single head, "
               f"{KIND_LABELS[kind]} layer {layer} head {head}: {ui.metric_text(table.metric_name, row.metric, iv)} "
               "without it. "
               f"{significant} of {len(table.rows)} heads change the metric significantly on their own "
               f"({_count(ctx, table.n_examples)}; {md_escape(table.test or 'no test')}, Holm-corrected).")
    return tour.one_head_title(table, ui.metric_text(table.metric_name, table.base_metric, iv),
                               ui.metric_text(table.metric_name, row.metric, iv))


def _count(ctx: Ctx, n: int) -> str:
    """``n`` examples named as the tour model's examples are: '128 windows', '8 utterances', '12 examples'."""
    return count_text(n, cache.example_unit(ctx.sel.model, ctx.sel.task))


def _dense_interval(ctx: Ctx) -> tuple[float, float] | None:
    """The 95 % interval of the all-heads evaluation of the step's examples (the Head map's), so a value in a
    step's caption is rounded as the Head map rounds it."""
    dense = jobs.dense_evaluation(ctx.sel).show()
    return None if dense is None else dense.interval


def _one_per_layer(ctx: Ctx) -> bool:
    result = curve_jobs.one_per_layer(ctx.sel, tour.SCORER).show()          # the Curves page's job
    if result is None:
        return False
    _prepare(tour.best_head_per_layer(result, ctx.arch.layout), "one head per layer (gradient)")
    ui.table(tables.one_per_layer_frame(result))
    iv = _dense_interval(ctx)
    st.caption(f"All heads: {ui.metric_text(result.metric_name, result.base_metric, iv)}. Every layer reduced to "
               f"its best head at once (the prepared mask, {len(result.rows)} heads of {ctx.arch.total_heads} kept): "
               f"{ui.metric_text(result.metric_name, result.all_layers_metric, iv)}; "
               f"{_count(ctx, result.n_examples)}.")
    return True


def _curve(ctx: Ctx) -> bool:
    mask = _half_removed(ctx)
    curves = {}
    for name in tour.CURVE_SCORERS:                     # the Curves page's jobs: its page shows them at once
        found = curve_jobs.curve(ctx.sel, name, tour.CURVE_STEP).show()
        if found is not None:
            curves[name] = found
    if mask is None or len(curves) < len(tour.CURVE_SCORERS):
        return False
    current = jobs.evaluation(ctx.sel, mask).show()
    dense = jobs.dense_evaluation(ctx.sel).show()
    point = (1 - mask.n_kept / mask.n_total, current.metric) if current is not None else None
    st.plotly_chart(charts.curves_figure(curves, point, f"prepared mask ({mask.n_kept}/{mask.n_total} kept)",
                                         dense.metric if dense is not None else None),
                    key="tour_curves", alt="Metric against the share of heads removed: gradient order and random order")
    first = curves[tour.CURVE_SCORERS[0]]
    st.caption(f"Each point: the metric on the first {_count(ctx, first.n_examples)} of the evaluation split, with "
               "its 95 % interval; the band is the range over the random seeds.")
    return True


def _translation(ctx: Ctx) -> bool:
    scores = _scores(ctx)
    result = curve_jobs.kinds(ctx.sel, tour.SCORER).show()     # the Curves page's Attention kinds job
    if scores is None or result is None:
        return False
    mask = _prepare(tour.half_cross_removed(scores), "half the cross-attention heads removed (gradient)")
    borrowed = borrow(result, kinds_tab.bundled_runs())[1:]        # Michel's third kind, from another model
    st.plotly_chart(charts.kinds_figure(result, borrowed, kinds_tab.run_unit), key="tour_kinds",
                    alt="Metric against the share of one attention kind's heads removed, one colour per kind")
    why = "; ".join(w for k, w in ctx.arch.absent_kinds.items() if k in result.missing)   # e.g. an SSRU decoder
    missing = missing_note(result.missing)
    base_iv = None if result.base_low is None else (result.base_low, result.base_high)
    st.caption(f"All heads: {ui.metric_text(result.metric_name, result.base_metric, base_iv)}. "
               f"{words.kinds_headline(result)} The prepared mask removes {mask.n_total - mask.n_kept} of "
               f"{result.heads.get('cross', 0)} "
               f"cross-attention heads. Error bars: 95 % intervals over the {_count(ctx, result.n_examples)}; "
               "dashed: the "
               f"mean of {curve_jobs.KIND_SEEDS} random orders, shaded their range. "
               + (f"{missing[:-1]}: {why}." if missing and why else missing))
    kinds_tab.borrowed_caption(borrowed)
    return True


def _attention(ctx: Ctx) -> bool:
    mask = _half_removed(ctx)
    if mask is None:
        return False
    run = attention_jobs.attention_run(ctx.spec, tour.SENTENCE, None, mask, ctx.model.task).show()   # the page's
    if run is None:
        return False
    st.markdown(f"Sentence: {md_code(tour.SENTENCE)}")
    st.plotly_chart(attention.thumbnails_figure(run, run.kinds[0], kept_from="dense", arrange="grouped"),
                    key="tour_attention", config={"displaylogo": False},
                    alt="Attention map of every head, kept heads on the left, removed heads on the right")
    st.caption("Each head's map with all heads present (so the removed heads show what they did); darker = more "
               "attention. Hover for the tokens and the weight.")
    return True


def _speed(ctx: Ctx) -> bool:
    mask = _half_removed(ctx)
    if mask is None:
        return False
    pruned, dense = cache.pruned_parameters(ctx.spec, mask)
    ceiling = bench.flop_ceiling(cache.load(ctx.spec), mask, cache_headmap.LATENCY_SEQ_LEN)
    st.markdown(f"The prepared mask keeps **{mask.n_kept} of {mask.n_total} heads**: the pruned model has "
                f"**{ui.count_text(pruned)} parameters** (dense {ui.count_text(dense)}, "
                f"{100 * (1 - pruned / dense):.1f} % fewer). It removes {100 * ceiling.removed_fraction:.1f} % of the "
                f"multiply-adds of one {ceiling.seq_len}-token forward pass, so no implementation can be more "
                f"than **{ceiling.speedup:.2f}× faster**.")
    # only a timing made here, after the press: an older one (from the Head map) would read as the answer
    timed = state.widget_key("tour", "timed_mask")
    stored = None
    if st.button(TIME_BUTTON, key=state.widget_key("tour", "time"), icon=":material/timer:", type="primary"):
        stored = latency.measurement(ctx.spec, mask, again=True)
        st.session_state[timed] = latency.mask_key(mask) if stored is not None else None
    elif st.session_state.get(timed) == latency.mask_key(mask):
        stored = latency.measurement(ctx.spec, mask, measure=False)
    if stored is not None:
        latency.show_latency(stored, again_button=TIME_BUTTON)
    return True


def _induction(ctx: Ctx) -> bool:
    check = Work("induction", "Finding the induction heads", cache_roles.induction_roles,
                 (ctx.sel.without_size(),)).show()
    if check is None:
        return False
    mask = _prepare(check.mask, f"{len(check.heads)} induction heads removed")
    if check.heads:
        with st.expander(f"**{len(check.heads)} induction heads** (score above {check.threshold:g}), the heads the "
                         f"prepared mask removes ({mask.n_kept} of {mask.n_total} kept)"):
            st.dataframe(tour.induction_heads_rows(check), hide_index=True)
    else:
        st.info(f"No head of this model scores above {check.threshold:g}: it has no induction head, so the "
                "prepared mask keeps every head.", icon=":material/info:")
    run = attention_jobs.attention_run(ctx.spec, tour.REPEATED, None, mask, ctx.model.task).show()
    if run is None:
        return False
    layers = sorted({layer for _, layer, _ in check.heads}) or None      # only the layers that hold one
    st.plotly_chart(attention.thumbnails_figure(run, run.kinds[0], kept_from="dense", arrange="grouped", layers=layers),
                    key="tour_induction", config={"displaylogo": False},
                    alt="Attention map of every head on the repeated sentence, removed (induction) heads on the right")
    if layers:
        st.caption(f"Layers {', '.join(map(str, layers))}: those that hold an induction head (the other layers keep "
                   "every head).")
    st.dataframe(tour.copy_loss_rows(check), hide_index=True)
    share = check.drop_removed_share
    st.caption(f"Loss: mean next-token cross-entropy in nats (natural-log units: a loss of L means the model gave "
               f"the right token probability e^−L, geometric mean) on tokens 2 to {check.all_heads.n} of each copy, "
               f"{len(check.all_heads.first)} sequences of {check.all_heads.n} random tokens twice (not those used to "
               f"find the heads: {md_escape(check.detection)}; [BOS] is the start token, R the random tokens)."
               + (f" Removing the induction heads takes away {100 * share:.0f} % of the drop." if share is not None
                  and check.heads else ""))
    st.markdown("The repeated sentence for the Attention page:")
    st.code(tour.REPEATED, language=None, wrap_lines=True)
    return True


VIEWS: dict[str, Callable[[Ctx], bool | str]] = {       # a str: drawn, and the step's title its data tell
    "one-head": _one_head, "one-per-layer": _one_per_layer, "curve": _curve, "translation": _translation,
    "attention": _attention, "induction": _induction, "speed": _speed,
}
