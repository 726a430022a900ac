"""The Head map's live loop: the clickable map, the presets and the live panel, in one ``st.fragment``.

A click on a head (or a preset, Undo/Redo, a point of the history) reruns this fragment only. Per click: the
mask changes (the widget callback) → the map, heads kept and parameter count are drawn at once, the metric,
loss and latency marked "updating…" → the metric and loss when the one evaluation of the new mask is done →
the history → the latency (timed after the metric, behind urgent work: :data:`app.runtime.board.GATE`).
The fragment never waits for work while a click could come: it shows each piece of work as far as it got,
then polls (:func:`_poll`) until a piece is done or a click comes; a click cancels the old mask's work.
Nothing on the panel shows a value of the previous mask unmarked. Head roles (:mod:`app.roles.ui`) colour
the map, protect heads in presets and are named on the panel. docs/DASHBOARD.md gives the details.
"""
from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass

import streamlit as st

from app.model import cache, jobs
from app.headmap import cache as cache_headmap, figures, ui as headmap_ui, latency, clicks
from app.core import reruns, ui, uncertainty
from app.core.session import session_results, state
from app.headmap import roles as role_ui
from app.headmap import examples
from app.core.access import task_label
from app.core.session.selection import Selection
from app.core.progress_text import count_text
from app.core.text import md_code, md_escape
from app.runtime.work import PENDING, Work, wait_for_change
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import KIND_LABELS, HeadMask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.core.io.share_link import encode_mask

PANEL_PX = 320          # the live panel: two metrics side by side (one per line when long)
ROW_GAP = "small"       # between map and panel, and between two metrics: the three figures fit beside
#                         a 12-head map in a 1280 px window (sidebar open)
WIDE_PX = 1250          # from this window width the panel sits beside the map: no strip needed
STRIP_KEY = "hp_live_strip"
METRICS_LOG = logging.getLogger("headprune.app.metrics")   # one INFO record per metric sent (no handler here)
CHANGE_UPDATING = "change: updating…"   # the loss's delta until its paired change is computed
REDRAW_S = 5.0          # while work runs, its progress is redrawn at most this often (at once when it ends)
LAST_SHOWN = "live_last_shown"          # session_results name: (heads kept, heads, metric text) last drawn
# the strip sticks under Streamlit's header (3.75rem) while the page scrolls; where the panel is
# beside the map (wide windows) it is not drawn at all
STYLE = f"""<style>
.st-key-{STRIP_KEY} {{position: sticky; top: 3.75rem; z-index: 990; background: var(--background-color, #fff);
  border-bottom: 1px solid rgba(49, 51, 63, 0.2); padding: 0.2rem 0 0.3rem 0;}}
.st-key-{STRIP_KEY} p {{margin: 0; font-size: 1.05rem;}}
@media (min-width: {WIDE_PX}px) {{ .st-key-{STRIP_KEY} {{display: none;}} }}
</style>"""


def strip_text(mask: HeadMask, metric: str | None = None, loss: str | None = None) -> str:
    """The strip's one line: heads kept of the new mask at once, metric and loss once known (a decoded metric
    comes first: the loss is then "computing…")."""
    kept = f"Heads kept **{mask.n_kept} / {mask.n_total}**"
    if metric is None:
        return (f"{kept} · :material/hourglass_top: metric and loss: updating for {mask.n_kept} / {mask.n_total} "
                "heads…")
    return f"{kept} · {metric} · " + (f"loss **{loss}**" if loss is not None else
                                      "loss: :material/hourglass_top: computing…")


def _strip_done(mask: HeadMask, ev) -> str:
    label, value = _metric_text(ev)
    return strip_text(mask, f"{label} **{value}**", uncertainty.loss_text(ev.loss))


def show(sel: Selection, arch, ranking, score_name: str) -> None:
    """The map and the live panel of the session's current mask (a fragment: clicks rerun only this)."""
    _live(sel, arch, ranking, score_name)


@st.fragment
def _live(sel: Selection, arch, ranking, score_name: str) -> None:
    state.push_query_params()           # a fragment rerun skips the shell's: keep the link current
    layout = arch.layout
    mask = state.current_mask(layout)
    wait = not reruns.fragment_rerun()  # a full run cannot rerun the fragment alone: it waits for the work
    pending: list[Work] = []            # work still running at the end of this run (only when not ``wait``)
    latency.drop_stale_timing(sel.model, mask)            # a timing of the previous mask would hold the CPU queue
    evaluation = _evaluation(sel, mask)
    evaluation.begin()                  # queued for the CPU now, while the map is drawn
    known = evaluation.ready()          # a redraw: the metric is drawn at once, never marked "updating"
    st.html(STYLE)
    with st.container(key=STRIP_KEY):
        strip = st.empty()
        strip.markdown(strip_text(mask) if known is None else _strip_done(mask, known))
    roles = role_ui.ready(sel)      # the session's role report when found (no work here)
    colour = st.session_state.get(state.widget_key("headmap", "colour"), figures.IMPORTANCE)
    map_px = max(figures.figure_width(max(max(layout.kinds[k]) for k in layout.kinds), colour=colour), 470)
    row = st.container(horizontal=True, wrap=True, gap=ROW_GAP)
    left, right = row.container(width=map_px), row.container(width=PANEL_PX)
    with left:
        roles_slot, roles_wanted = _map_and_presets(arch, mask, ranking, score_name, roles)
    with right:                         # drawn after the map: the new mask's cheap numbers, then placeholders
        metric_slot, speed_slot, history_slot = _panel_top(sel.model, mask, roles, known is None)
    with metric_slot.container():
        note = st.empty()
        if known is None:
            note.caption(_updating_text(mask))
        ev, loss_slot = _metric_and_loss(sel, mask, wait, pending)
        early = None
        if ev is not PENDING:
            note.empty()
        else:                           # a translation's BLEU comes before its loss: drawn here once known
            early = EarlyMetric(sel, mask, _evaluation(sel, mask), note, strip)
            early.draw()
    if ev is None:
        strip.markdown(f"Heads kept **{mask.n_kept} / {mask.n_total}** · metric: see the panel below")
    elif ev is not PENDING:             # while it runs the strip keeps "updating for …"
        strip.markdown(_strip_done(mask, ev))
        _note_metric_sent(mask)
    shown = ev if ev is not PENDING else None
    if shown is not None and not mask.is_full():
        _loss_change(sel, mask, shown, loss_slot, wait, pending)
    with right:
        _repair(sel, mask, ev, wait, pending)
    with history_slot:
        headmap_ui.show_history(shown.metric_name if shown is not None else _task_metric(sel))
    if ev is not PENDING:               # timed after the metric: it does not compete with the evaluation
        with speed_slot.container(key=latency_key(mask)):
            note = st.empty()
            note.caption(ui.updating_text("latency"))
            pending += latency.latency_panel(sel.model, mask, wait, note)
    else:                               # meanwhile what is known without work: a timing or the estimate
        with speed_slot.container(key=latency_key(mask)):
            if not latency.early_latency(sel.model, mask):
                st.caption(ui.updating_text("latency"))
    roles_job = role_ui.show_roles_job(roles_slot, sel, roles_wanted, roles, wait)  # last: holds up nothing
    _poll(pending + ([roles_job] if roles_job is not None else []), early)


def latency_key(mask: HeadMask) -> str:
    """The latency slot's key, named by the heads kept: the page marks it ``st-key-hp-latency-<kept>``."""
    return f"hp-latency-{mask.n_kept}"


def _poll(pending: list[Work], early: "EarlyMetric | None" = None) -> None:
    """With work still running, wait for it drawing nothing, and run the fragment again once a piece of it
    is done (or its progress changed, at most every :data:`REDRAW_S`). A click meanwhile ends the wait at
    once and its own rerun comes next: a session waiting for the CPU costs the CPU nothing. The evaluation's
    early metric is drawn in place, without a rerun (which would redraw the map while the loss is computed)."""
    while pending and wait_for_change(pending, REDRAW_S, reruns.user_waiting):
        if early is None or not early.draw():
            if early is not None:
                early.draw_done()       # the metric in place at once; the rerun then draws the whole panel
            st.rerun(scope="fragment")


@dataclass
class EarlyMetric:
    """Where the figures of ``mask`` are drawn in place while the fragment waits: its metric while its loss is still
    computed (``Task.metric_first``: a translation's BLEU comes before the output layer's pass over the references;
    the evaluation reports it as its job's ``partial``), then its metric and loss the moment the evaluation ends,
    before the rerun that redraws the map and the panel. One line of text in the panel and the strip: metric widgets
    there would cost the decoding the browser's layout (benchmarks/dashboard_timings.py)."""

    sel: Selection
    mask: HeadMask
    work: Work                  # the evaluation of ``mask``
    note: object                # the panel's "updating…" line (an st.empty)
    strip: object               # the strip above the map (narrow windows)
    shown: object = None        # the partial result drawn

    def draw(self) -> bool:
        """Draw the evaluation's metric if it is new and the loss still to come; returns whether it drew."""
        early = self.work.partial()
        if early is None or early is self.shown or not self.work.running():
            return False
        self.shown = early
        label, value = _metric_text(early)
        self.note.markdown(f"{label} **{value}** for {self.mask.n_kept} / {self.mask.n_total} heads · loss: "
                           ":material/hourglass_top: computing…")
        self.strip.markdown(strip_text(self.mask, f"{label} **{value}**"))
        _note_metric_sent(self.mask)
        return True

    def draw_done(self) -> None:
        """Draw the finished evaluation's metric and loss in the strip and the panel's line (nothing while it runs
        or after it failed): the fragment's rerun that follows takes a map's drawing longer to show them."""
        ev = self.work.ready()
        if ev is None:
            return
        self.strip.markdown(_strip_done(self.mask, ev))
        label, value = _metric_text(ev)
        self.note.markdown(f"{label} **{value}** · loss **{uncertainty.loss_text(ev.loss)}** for "
                           f"{self.mask.n_kept} / {self.mask.n_total} heads")
        _note_metric_sent(self.mask)


def _metric_text(ev) -> tuple[str, str]:
    """The label and shown value of ``ev``'s metric, escaped for markdown ("BLEU", "31.5")."""
    return (md_escape(ui.metric_label(ev.metric_name)),
            md_escape(uncertainty.unitless(ev.metric_name, uncertainty.shown(ev).value)))


def _task_metric(sel: Selection) -> str:
    """The name of the task's metric; "accuracy" for a task that cannot be read (the page says why above)."""
    try:
        return cache.task(sel.task).metric_name
    except HeadpruneError:
        return "accuracy"


def _updating_text(mask: HeadMask) -> str:
    """What the metric's slot says while ``mask`` is evaluated, with the last figure drawn and its mask."""
    text = f":material/hourglass_top: metric and loss: updating for {mask.n_kept} / {mask.n_total} heads…"
    last = session_results.get_result(LAST_SHOWN)
    if last is not None and last[:2] != (mask.n_kept, mask.n_total):
        text += f" (last shown: {last[2]} for {last[0]} / {last[1]} heads)"
    return text


def _evaluation(sel: Selection, mask: HeadMask) -> Work:
    """The one evaluation of ``mask`` behind a click. The fragment begins it before anything is drawn and
    :func:`_metric_and_loss` shows it: in a class, eight sessions' evaluations join the CPU's queue
    (:data:`app.runtime.board.GATE`) at once instead of after eight redraws that share the server's interpreter, and
    a lone click gets its metric one map-drawing sooner."""
    return jobs.evaluation(sel, mask, "this mask")


def _note_metric_sent(mask: HeadMask) -> None:
    """Log (:data:`METRICS_LOG`, INFO) that this mask's metric was sent, with the server's CPU seconds so far:
    what an observer attaching a handler (benchmarks/dashboard_timings.py) needs for click -> metric sent."""
    if METRICS_LOG.isEnabledFor(logging.INFO):
        METRICS_LOG.info("metric sent %s", json.dumps({"mask": encode_mask(mask), "kept": mask.n_kept,
                                                       "sent": time.time(), "cpu": time.process_time()}))


def _panel_top(spec: str, mask: HeadMask, roles, metric_pending: bool):
    """Heads kept, parameters and removed role heads of ``mask``; returns the metric, latency and history
    slots (the metric's marked "updating…" while ``metric_pending``)."""
    st.markdown("**Live panel**")
    changed = not mask.is_full()
    pruned_params, dense_params = cache.pruned_parameters(spec, mask)
    row = ui.metric_row(ROW_GAP)
    row.metric("heads kept", f"{mask.n_kept} / {mask.n_total}", width="content")
    row.metric("parameters", ui.count_text(pruned_params), width="content",
               help=headmap_ui.click_saving(cache.head_savings(spec)),
               **ui.delta_kwargs(f"{100 * (pruned_params - dense_params) / dense_params:+.1f} %" if changed else None,
                                 "inverse"))
    role_ui.summary_caption(roles, mask)
    metric_slot = ui.updating("metric and loss") if metric_pending else st.empty()
    speed_slot = ui.updating("latency") if changed else st.empty()
    st.markdown("**History** · click a point to go back to that step")
    return metric_slot, speed_slot, st.container()


def _map_and_presets(arch, mask: HeadMask, ranking, score_name: str, roles):
    """The colouring control, the grids and the presets; returns (the roles job's slot, whether roles are wanted)."""
    layout = arch.layout
    colour = role_ui.colour_picker(arch)
    if note := role_ui.colour_note(colour, roles):
        st.caption(note)
    roles_slot = st.container()
    clicks.log_clicks(layout, headmap_ui.GRID_KEYS)      # every click on a grid, in order, none lost
    for kind in layout.kinds:
        headmap_ui.show_grid(kind, mask, ranking, score_name if ranking is not None else "", roles, colour)
        if note := headmap_ui.kv_groups_note(kind, arch.kv_groups.get(kind, ())):
            st.caption(note)
    for kind, why in arch.absent_kinds.items():         # a kind the model has no heads of: said, never an empty grid
        st.caption(f"No {KIND_LABELS[kind]} map: {why}.")
    with st.container(border=True):
        p1, p2 = st.columns([3, 2])
        pct = p1.slider("Share of heads to remove (%)", 0, 100, 50, 5, key=state.widget_key("headmap", "pct"))
        per_layer = p2.radio("Ranking", ["global", "per layer"], horizontal=True,
                             key=state.widget_key("headmap", "scope")) == "per layer"
        keep_roles = role_ui.protect_picker(arch)
        waiting = bool(keep_roles) and roles is None            # protection needs the roles found first
        if waiting:
            st.caption("The presets wait for the head roles (found above the map) to know which heads to protect.")
        kept = dict(protected=role_ui.protected(roles, keep_roles), protected_roles=tuple(keep_roles))
        why = headmap_ui.presets_wait_note(ranking is None, waiting)
        b = st.columns(2)

        def preset(*args, **kwargs):
            return functools.partial(headmap_ui.apply_preset, *args, **kwargs)

        clicks.edit_button(b[0], "remove_least", f"Remove {pct} % least important",
                               preset("remove_least", layout, ranking, pct / 100, per_layer, **kept),
                               disabled=why is not None, width="stretch", help=why)
        clicks.edit_button(b[1], "one_per_layer", "Keep the best head per layer",
                               preset("one_per_layer", layout, ranking, **kept),
                               disabled=why is not None, width="stretch", help=why)
        b = st.columns(4)
        clicks.edit_button(b[0], "invert", "Invert", preset("invert", layout), width="stretch")
        clicks.edit_button(b[1], "reset", "Reset", preset("reset", layout), width="stretch")
        clicks.edit_button(b[2], "undo", "Undo", state.undo, disabled=not state.can_undo(),
                               icon=":material/undo:", width="stretch")
        clicks.edit_button(b[3], "redo", "Redo", state.redo, disabled=not state.can_redo(),
                               icon=":material/redo:", width="stretch")
    return roles_slot, colour != figures.IMPORTANCE or bool(keep_roles)


def _metric_and_loss(sel: Selection, mask: HeadMask, wait: bool = True, pending: list | None = None):
    """The metric (with its change against all heads) and the loss of ``mask``, drawn as soon as its one
    evaluation is done; returns (EvalResult, the loss's slot), (None, None) when it failed, or
    (:data:`app.runtime.work.PENDING`, None) while it runs and ``wait`` is False (the work put in ``pending``)."""
    changed = not mask.is_full()
    works = [_evaluation(sel, mask), jobs.dense_evaluation(sel)]
    ev, dense = (w.show(wait) for w in works)
    if PENDING in (ev, dense):
        pending.extend(w for w, r in zip(works, (ev, dense)) if r is PENDING)
        return PENDING, None
    if ev is None or dense is None:
        return None, None
    headmap_ui.remember(mask, ev)       # the history chart shows what the panel showed
    headmap_ui.remember(HeadMask.full(mask.layout), dense)
    m1 = m2 = ui.metric_row(ROW_GAP)
    metric = get_metric(ev.metric_name)
    unit = cache.example_unit(sel.model, sel.task)      # "utterance", "window": as the sidebar says
    now, base = uncertainty.shown(ev, unit), uncertainty.shown(dense, unit)
    diff = uncertainty.change(dense, ev, cache.comparison(sel, mask)) if changed else None
    session_results.set_result(LAST_SHOWN, (mask.n_kept, mask.n_total, uncertainty.labelled(ev.metric_name, now.value)))
    m1.metric(ui.metric_label(ev.metric_name), uncertainty.unitless(ev.metric_name, now.value), width="content",
              **ui.delta_kwargs(diff.text if diff else None, "normal" if metric.higher_is_better else "inverse",
                                within_noise=bool(diff and diff.within_noise)),
              help=f"{now.interval}." + (f" Change: {diff.detail}." if diff else ""))
    loss_slot = m2.empty()              # the loss of this mask now; its paired change follows (_loss_change)
    loss_slot.metric("loss", uncertainty.loss_text(ev.loss), width="content", help="Mean cross-entropy.",
                     **({"delta": CHANGE_UPDATING, "delta_color": "off", "delta_arrow": "off"} if changed else {}))
    st.caption(f"On the first {count_text(ev.n_examples, unit)} of the "
               f"{md_code(cache.split_of(sel.task))} split of "
               f"{md_code(task_label(sel.task))}: "
               f"{md_escape(uncertainty.labelled(ev.metric_name, f'{now.value} ({now.interval})'))}. "
               f"All heads: {md_escape(uncertainty.unitless(ev.metric_name, f'{base.value} ({base.interval})'))}."
               + (f" Change: {md_escape(diff.detail)}." if diff else ""))
    example_outputs(dense, ev, mask)
    return ev, loss_slot


def example_outputs(dense, ev, mask: HeadMask) -> None:
    """The first few outputs of a translation or speech model (gold, all heads, this mask) under the metric,
    redrawn with it on every click; nothing for a task whose evaluation keeps none."""
    rows = examples.sample_rows(dense, ev)
    if not rows:
        return
    with st.container(border=True, key="hp_example_outputs"):
        st.markdown(f"**Example outputs** · the first {len(rows)}")
        for i, row in enumerate(rows, start=1):
            lines = [f"**{i}.** " + (f"*{md_escape(row['source'])}*" if row["source"] else ""),
                     f"gold: {md_escape(row['gold'])}", f"all heads: {md_escape(row['all heads'])}"]
            if not mask.is_full():
                lines.append(f"this mask: :red[{md_escape(row['this mask'])}]" if row["changed"]
                             else f"this mask: {md_escape(row['this mask'])} (the same)")
            st.markdown("  \n".join(lines))
        st.caption("Every example, with all heads and with this mask: the **Per example** page.")


def _repair(sel: Selection, mask: HeadMask, ev, wait: bool = True, pending: list | None = None) -> None:
    """The "repair" toggle (off by default: a click stays one forward pass): the metric of ``mask`` with
    and without least-squares repair of the kept heads, computed behind other sessions' clicks."""
    if not st.toggle("repair", key=state.widget_key("headmap", "repair"),
                     help="Tune one scale per kept head so each pruned layer reproduces the unpruned layer's "
                          f"output (Kwon et al. 2022), on {cache_headmap.REPAIR_CALIBRATION} score-split examples; the "
                          "scales fold into the output projection, so the pruned model keeps its size."):
        return
    if ev is PENDING:
        return                          # repaired once the metric is there
    if ev is None or mask.is_full():
        st.caption("Nothing removed: nothing to repair." if ev is not None else "No metric to repair.")
        return
    work = Work("repair", "Repairing this mask", cache_headmap.repaired_evaluation, (sel, mask))
    fixed = work.show(wait)
    if fixed is PENDING:
        pending.append(work)
    if fixed is None or fixed is PENDING:
        return
    metric = get_metric(ev.metric_name)
    row = ui.metric_row(ROW_GAP)
    row.metric("without repair", uncertainty.shown(ev).value, width="content")
    row.metric("with repair", uncertainty.shown(fixed).value, width="content",
               **ui.delta_kwargs(uncertainty.change(ev, fixed, None).text,
                                 "normal" if metric.higher_is_better else "inverse"))


def _loss_change(sel: Selection, mask: HeadMask, ev, loss_slot, wait: bool = True,
                 pending: list | None = None) -> None:
    """The loss of ``mask`` again, now with its change against all heads and the paired interval over examples."""
    works = [jobs.example_outputs(sel, m) for m in (None, mask)]
    per = [w.show(wait) for w in works]
    if PENDING in per:                  # the loss keeps "change: updating…"
        pending.extend(w for w, r in zip(works, per) if r is PENDING)
        return
    loss_diff = uncertainty.loss_change(*per) if None not in per else None
    loss_slot.metric("loss", uncertainty.loss_text(ev.loss), width="content",
                     **ui.delta_kwargs(loss_diff.text if loss_diff else None, "inverse",
                                       within_noise=bool(loss_diff and loss_diff.within_noise)),
                     help="Mean cross-entropy" + (f". Change: {loss_diff.detail}." if loss_diff else "."))
