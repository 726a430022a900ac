"""Every edit on the Head map counts: the page logs each head clicked and each edit button pressed (presets,
Undo, Redo), in order, and the server applies each logged edit once, in that order.

Why a log: Streamlit keeps only the newest value of a chart's selection sent while the script runs (two quick
clicks on one grid arrive as one), and calls the callbacks of a button and a click that arrive in one run in
widget order. A small in-page component (``st.components.v2``, no iframe) takes every mouse press on a grid or
an edit button and sends the whole list since the page loaded; :func:`_on_clicks` applies those not applied
yet. While the log reports, the grids are drawn without a selection (:func:`active`); before it first reports,
and in ``AppTest``, a click comes as the selection (:func:`app.headmap.ui.show_grid`). docs/DASHBOARD.md
gives the details.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st

from app.core.session import state
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
  // The page's log holds head clicks [kind, layer, head], edits ["edit", name], and presses still waiting
  // for their grid to be drawn ({kind, dx, dy, box, until}); what is sent stops at the first waiting press,
  // so the server gets every edit in the order made.
  const report = (always) => {
    const waiting = log.clicks.findIndex((entry) => !Array.isArray(entry));
    const ready = waiting < 0 ? log.clicks.length : waiting;
    if (ready === log.sent && !always) return;
    log.sent = ready;
    log.send("clicks", { page: log.page, clicks: log.clicks.slice(0, ready) });
  };
  const fade = (gd, layer, head) => {    // the clicked square changes at once (until the new map is drawn)
    gd.querySelectorAll("path.point").forEach((mark) => {
      const d = mark.__data__;
      if (d && d.x === head && d.y === layer) mark.style.opacity = "0.3";
    });
  };
  // The square at (x, y) on the screen, from the position on the figure's axes (null outside the grid).
  const under = (gd, x, y) => {
    const layout = gd._fullLayout, box = gd.getBoundingClientRect();
    x -= box.left + layout.xaxis._offset;
    y -= box.top + layout.yaxis._offset;
    if (x < 0 || y < 0 || x > layout.xaxis._length || y > layout.yaxis._length) return null;
    const head = Math.round(layout.xaxis.p2c(x)), layer = Math.round(layout.yaxis.p2c(y));
    return Number.isFinite(head) && Number.isFinite(layer) && head >= 0 && layer >= 0 ? [layer, head] : null;
  };
  const drawn = (box) => {               // the grid's figure once plotly has laid it out, else null
    const gd = box && box.isConnected && box.querySelector(".js-plotly-plot");
    const layout = gd && gd._fullLayout;
    return layout && layout.xaxis && layout.yaxis && layout.xaxis.p2c && layout.yaxis.p2c ? gd : null;
  };
  const gridOf = (element) => {          // the grid's container under an element, with its kind
    const box = element && element.closest && element.closest(`[class*="${log.prefix}"]`);
    const name = box && [...box.classList].find((c) => c.startsWith(log.prefix));
    return name ? { box, kind: name.slice(log.prefix.length).replace(/_\\d+$/, "") } : null;
  };
  // Waiting presses become head clicks (or are dropped, outside the grid) once their grid is drawn: the
  // map of a new mask is a new figure, and a press landing while it is laid out still counts.
  const settle = () => {
    for (let i = 0; i < log.clicks.length; i++) {
      const entry = log.clicks[i];
      if (Array.isArray(entry)) continue;
      const box = entry.box.isConnected ? entry.box
        : document.querySelector(`[class*="${log.prefix}${entry.kind}_"]`);
      const gd = drawn(box);
      if (!gd && performance.now() < entry.until) break;        // the edits after it wait their turn
      const rect = box && box.getBoundingClientRect();
      const head = gd && under(gd, rect.left + entry.dx, rect.top + entry.dy);
      if (head) {
        log.clicks[i] = [entry.kind, head[0], head[1]];
        fade(gd, head[0], head[1]);
      } else {
        log.clicks.splice(i--, 1);
      }
    }
    report();
    clearTimeout(log.timer);
    if (log.clicks.some((entry) => !Array.isArray(entry))) log.timer = setTimeout(settle, 25);
  };
  // One listener on the document, at the press (not plotly's "plotly_click": plotly sends it only for a point
  // the mouse has hovered, and a grid drawn anew under a still mouse has none): a grid replaced between
  // press and release, or not yet drawn, loses nothing.
  if (!log.grids) {
    log.grids = true;
    document.addEventListener("mousedown", (mouse) => {
      const grid = mouse.button === 0 && gridOf(mouse.target);
      if (!grid) return;
      const rect = grid.box.getBoundingClientRect();
      log.clicks.push({ kind: grid.kind, box: grid.box, dx: mouse.clientX - rect.left, dy: mouse.clientY - rect.top,
                        until: performance.now() + 5000 });
      settle();
    }, { capture: true });
  }
  // Edit buttons count at the press too (a button Streamlit redraws between press and release gets no
  // "click"); a click without a press (the keyboard: Enter, Space) counts at the click.
  const editOf = (target) => {
    const button = target && target.closest && target.closest("button");
    const box = button && !button.disabled && button.closest(`[class*="${log.editPrefix}"]`);
    const name = box && [...box.classList].find((c) => c.startsWith(log.editPrefix));
    return name ? name.slice(log.editPrefix.length) : null;
  };
  const pressed = (name) => {
    log.clicks.push(["edit", name]);
    settle();
  };
  if (!log.buttons) {              // edit buttons pressed, logged in the same order as the clicks
    log.buttons = true;
    document.addEventListener("pointerdown", (press) => {
      const name = press.button === 0 && editOf(press.target);
      if (name) pressed(name);
    }, { capture: true });
    document.addEventListener("click", (event) => {
      const name = event.detail === 0 && editOf(event.target);
      if (name) pressed(name);
    }, { capture: true });
  }
  report(true);
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
            state.toggle_head(layout, entry[0], int(entry[1]), int(entry[2]))
    st.session_state[state.MAP_LOG] = {"page": page, "applied": max(applied, len(clicks))}


def _fits(layout: HeadLayout, kind, layer, head) -> bool:
    rows = layout.kinds.get(kind)
    return (rows is not None and isinstance(layer, int) and isinstance(head, int)
            and 0 <= layer < len(rows) and 0 <= head < rows[layer])


__all__ = ["KEY", "EDIT_KEYS", "log_clicks", "edit_button", "active"]
