"""Every click on the Head map counts: the page logs each head clicked, in order, and the server applies
each logged click once.

Why a log (issue 31): a grid's click reaches Streamlit as the chart's *selection*, a value, and a value
sent while the script still runs is replaced by the next one (Streamlit keeps the newest value of a
widget until the run ends). Two quick clicks on one grid then arrive as one. So a small in-page
component (``st.components.v2``, no iframe) listens to every grid's ``plotly_click`` and sends the whole
list of clicks since the page loaded, ``{"page": token, "clicks": [[kind, layer, head], ...]}``: a newer
value holds every older click, and :func:`_on_clicks` toggles the ones not applied yet, in order. The
clicked square is faded at once in the page, until the map of the new mask is drawn.

While this log reports (any browser with JavaScript), the grids are drawn without a selection
(:func:`active`); before it first reports, and in ``AppTest`` (no JavaScript), a click comes as the
selection (:func:`app.headmap.ui.show_grid`).
"""
from __future__ import annotations

import functools

import streamlit as st

from app.core import mask as mask_state, state
from pruning_core.core.heads import HeadLayout

KEY = state.widget_key("headmap", "clicks")
_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const log = window.__hpMapClicks || (window.__hpMapClicks = {
    page: Date.now().toString(36) + Math.random().toString(36).slice(2), clicks: [], observer: null });
  log.send = setStateValue;        // the newest mount's (the component remounts when the page is left and reopened)
  log.prefix = data.prefix;        // "st-key-<grid key prefix>_"
  const report = () => log.send("clicks", { page: log.page, clicks: log.clicks.slice() });
  const fade = (gd, layer, head) => {    // the clicked square changes at once (until the new map is drawn)
    gd.querySelectorAll("path.point").forEach((mark) => {
      const d = mark.__data__;
      if (d && d.x === head && d.y === layer) mark.style.opacity = "0.3";
    });
  };
  // The head under the mouse, from its position: plotly's own point is the last one hovered, which a
  // click right after a quick move (a few ms) has not updated yet.
  const under = (gd, event) => {
    const layout = gd._fullLayout, mouse = event && event.event;
    if (!layout || !mouse || !layout.xaxis || !layout.yaxis) return null;
    const box = gd.getBoundingClientRect();
    const head = Math.round(layout.xaxis.p2c(mouse.clientX - box.left - layout.xaxis._offset));
    const layer = Math.round(layout.yaxis.p2c(mouse.clientY - box.top - layout.yaxis._offset));
    return Number.isFinite(head) && Number.isFinite(layer) ? [layer, head] : null;
  };
  const attach = () => {
    document.querySelectorAll(`[class*="${log.prefix}"] .js-plotly-plot`).forEach((gd) => {
      if (gd.__hpClicks || typeof gd.on !== "function") return;
      gd.__hpClicks = true;
      gd.on("plotly_click", (event) => {
        const box = gd.closest(`[class*="${log.prefix}"]`);
        const name = box && [...box.classList].find((c) => c.startsWith(log.prefix));
        const kind = name && name.slice(log.prefix.length).replace(/_\\d+$/, "");
        const point = ((event && event.points) || [])[0];
        const head = under(gd, event) || (point && point.customdata);
        if (!kind || !Array.isArray(head)) return;
        log.clicks.push([kind, head[0], head[1]]);
        fade(gd, head[0], head[1]);
        report();
      });
    });
  };
  attach();
  if (!log.observer) {             // grids drawn later (a new mask, another model) are attached as they come
    log.observer = new MutationObserver(attach);
    log.observer.observe(document.body, { childList: true, subtree: true });
  }
  report();
}
"""
_component = st.components.v2.component("headprune_map_clicks", js=_JS)


def log_clicks(layout: HeadLayout, grid_prefix: str) -> None:
    """Mount the click log for the grids whose keys start with ``grid_prefix`` (inside the Head map's fragment,
    so a click reruns only the fragment)."""
    _component(key=KEY, data={"prefix": f"st-key-{grid_prefix}_"}, height=0,
               on_clicks_change=functools.partial(_on_clicks, layout))


def active() -> bool:
    """Whether this session's page reports its clicks through the log."""
    return bool((st.session_state.get(state.MAP_LOG) or {}).get("page"))


def _on_clicks(layout: HeadLayout) -> None:
    """Toggle the logged clicks not applied yet, in the order they were made."""
    value = (st.session_state.get(KEY) or {}).get("clicks") or {}
    page, clicks = value.get("page"), value.get("clicks") or []
    seen = st.session_state.get(state.MAP_LOG) or {}
    applied = seen.get("applied", 0) if seen.get("page") == page else 0
    for kind, layer, head in clicks[applied:]:
        if _fits(layout, kind, layer, head):
            mask_state.toggle_head(layout, kind, int(layer), int(head))
    st.session_state[state.MAP_LOG] = {"page": page, "applied": max(applied, len(clicks))}


def _fits(layout: HeadLayout, kind, layer, head) -> bool:
    rows = layout.kinds.get(kind)
    return (rows is not None and isinstance(layer, int) and isinstance(head, int)
            and 0 <= layer < len(rows) and 0 <= head < rows[layer])


__all__ = ["KEY", "log_clicks", "active"]
