"""Every edit on the Head map counts: the page logs each head clicked and each edit button pressed (presets,
Undo, Redo), in order, and the server applies each logged edit once, in that order.

Why a log (issue 31): a grid's click reaches Streamlit as the chart's *selection*, a value, and a value
sent while the script still runs is replaced by the next one (Streamlit keeps the newest value of a
widget until the run ends). Two quick clicks on one grid then arrive as one. So a small in-page
component (``st.components.v2``, no iframe) listens to every press of the mouse on a grid (the square from
its position on the figure's axes) and sends the whole
list of clicks since the page loaded, ``{"page": token, "clicks": [[kind, layer, head], ...]}``: a newer
value holds every older click, and :func:`_on_clicks` toggles the ones not applied yet, in order. The
clicked square is faded at once in the page, until the map of the new mask is drawn.

The edit buttons (:func:`edit_button`) go through the same log: Streamlit delivers a button press and a
map click that arrive during one run together, and calls their callbacks in the page's widget order, so
"click a head, then Undo" could undo the click before it. The log keeps the order made; a button's own
callback acts only before the page's log has reported (then the log skips that press).

While this log reports (any browser with JavaScript), the grids are drawn without a selection
(:func:`active`); before it first reports, and in ``AppTest`` (no JavaScript), a click comes as the
selection (:func:`app.headmap.ui.show_grid`).
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st

from app.core import mask as mask_state, state
from pruning_core.core.heads import HeadLayout

KEY = state.widget_key("headmap", "clicks")
_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const log = window.__hpMapClicks || (window.__hpMapClicks = {
    page: Date.now().toString(36) + Math.random().toString(36).slice(2), clicks: [] });
  log.send = setStateValue;        // the newest mount's (the component remounts when the page is left and reopened)
  log.prefix = data.prefix;        // "st-key-<grid key prefix>_"
  log.editPrefix = data.edit_prefix;    // "st-key-<edit button key prefix>_"
  const report = () => log.send("clicks", { page: log.page, clicks: log.clicks.slice() });
  const fade = (gd, layer, head) => {    // the clicked square changes at once (until the new map is drawn)
    gd.querySelectorAll("path.point").forEach((mark) => {
      const d = mark.__data__;
      if (d && d.x === head && d.y === layer) mark.style.opacity = "0.3";
    });
  };
  // The square under the mouse, from the press's position on the figure's axes (null outside the grid).
  // Not plotly's own "plotly_click": plotly sends it only for a point the mouse has hovered, and a grid drawn
  // anew under a still mouse (the map of the previous click's mask) has none. One listener on the document,
  // at the press: a grid replaced between press and release, or not yet seen by the page, loses nothing.
  const under = (gd, mouse) => {
    const layout = gd._fullLayout;
    if (!layout || !layout.xaxis || !layout.yaxis || !layout.xaxis.p2c) return null;
    const box = gd.getBoundingClientRect();
    const x = mouse.clientX - box.left - layout.xaxis._offset, y = mouse.clientY - box.top - layout.yaxis._offset;
    if (x < 0 || y < 0 || x > layout.xaxis._length || y > layout.yaxis._length) return null;
    const head = Math.round(layout.xaxis.p2c(x)), layer = Math.round(layout.yaxis.p2c(y));
    return Number.isFinite(head) && Number.isFinite(layer) && head >= 0 && layer >= 0 ? [layer, head] : null;
  };
  if (!log.grids) {
    log.grids = true;
    document.addEventListener("mousedown", (mouse) => {
      if (mouse.button !== 0) return;
      const gd = mouse.target && mouse.target.closest && mouse.target.closest(".js-plotly-plot");
      const box = gd && gd.closest(`[class*="${log.prefix}"]`);
      const name = box && [...box.classList].find((c) => c.startsWith(log.prefix));
      const kind = name && name.slice(log.prefix.length).replace(/_\\d+$/, "");
      const head = kind && under(gd, mouse);
      if (!head) return;
      log.clicks.push([kind, head[0], head[1]]);
      fade(gd, head[0], head[1]);
      report();
    }, { capture: true });
  }
  if (!log.buttons) {              // edit buttons pressed, logged in the same order as the clicks
    log.buttons = true;
    document.addEventListener("click", (event) => {
      const button = event.target && event.target.closest && event.target.closest("button");
      const box = button && !button.disabled && button.closest(`[class*="${log.editPrefix}"]`);
      const name = box && [...box.classList].find((c) => c.startsWith(log.editPrefix));
      if (!name) return;
      log.clicks.push(["edit", name.slice(log.editPrefix.length)]);
      report();
    }, { capture: true });
  }
  report();
}
"""
_component = st.components.v2.component("headprune_map_clicks", js=_JS)
EDIT_KEYS = state.widget_key("headmap", "edit")       # every edit button's key starts with this


def log_clicks(layout: HeadLayout, grid_prefix: str) -> None:
    """Mount the click log for the grids whose keys start with ``grid_prefix`` and the :func:`edit_button`s
    (inside the Head map's fragment, so a click reruns only the fragment)."""
    _component(key=KEY, data={"prefix": f"st-key-{grid_prefix}_", "edit_prefix": f"st-key-{EDIT_KEYS}_"},
               height=0, on_clicks_change=functools.partial(_on_clicks, layout))


def edit_button(where, name: str, label: str, action: Callable[[], None], **button) -> None:
    """A button in ``where`` that edits the mask with ``action()``, in order with the map's clicks: the page's
    log applies it (the action drawn with the button, so a preset uses the settings shown when pressed)."""
    st.session_state.setdefault(state.MAP_EDITS, {})[name] = action
    where.button(label, key=f"{EDIT_KEYS}_{name}", on_click=_pressed, args=(name,), **button)


def _pressed(name: str) -> None:
    """An edit button's own callback: acts only while the page's log has not reported (no JavaScript yet, or
    ``AppTest``); the log then skips the press, as it holds it too."""
    if active():
        return
    st.session_state[state.MAP_EDITS][name]()
    seen = st.session_state.get(state.MAP_LOG) or {}
    st.session_state[state.MAP_LOG] = {**seen, "direct": seen.get("direct", 0) + 1}


def active() -> bool:
    """Whether this session's page reports its clicks through the log."""
    return bool((st.session_state.get(state.MAP_LOG) or {}).get("page"))


def _on_clicks(layout: HeadLayout) -> None:
    """Apply the logged edits not applied yet, in the order they were made: head clicks and edit buttons
    (skipping, on a page's first report, the presses its buttons already applied themselves)."""
    value = (st.session_state.get(KEY) or {}).get("clicks") or {}
    page, clicks = value.get("page"), value.get("clicks") or []
    seen = st.session_state.get(state.MAP_LOG) or {}
    applied = seen.get("applied", 0) if seen.get("page") == page else 0
    direct = 0 if seen.get("page") == page else seen.get("direct", 0)
    for entry in clicks[applied:]:
        if entry[:1] == ["edit"]:
            action = (st.session_state.get(state.MAP_EDITS) or {}).get(entry[1]) if len(entry) == 2 else None
            if direct:
                direct -= 1
            elif action is not None:
                action()
        elif len(entry) == 3 and _fits(layout, *entry):
            mask_state.toggle_head(layout, entry[0], int(entry[1]), int(entry[2]))
    st.session_state[state.MAP_LOG] = {"page": page, "applied": max(applied, len(clicks))}


def _fits(layout: HeadLayout, kind, layer, head) -> bool:
    rows = layout.kinds.get(kind)
    return (rows is not None and isinstance(layer, int) and isinstance(head, int)
            and 0 <= layer < len(rows) and 0 <= head < rows[layer])


__all__ = ["KEY", "EDIT_KEYS", "log_clicks", "edit_button", "active"]
