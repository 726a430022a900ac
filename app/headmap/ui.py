"""The clickable head map, and the glue between the mask presets and the session's mask.

The figure is :func:`app.headmap.figures.figure`; clicking a head toggles it through
:func:`app.core.session.state.toggle_head` in the chart's selection callback.
"""
from __future__ import annotations

import functools

import streamlit as st

from app.headmap import clicks
from app.core.session import session_results, state
from app.core.colouring import IMPORTANCE
from app.headmap.figures import figure, history_figure
from app.core.text import md_escape
from pruning_core.modeling import presets
from pruning_core.core.heads import KIND_LABELS, HeadLayout, HeadMask, HeadScores
from pruning_core.core.io.share_link import encode_mask


GRID_KEYS = state.widget_key("headmap", "grid")        # every grid's key starts with this


def presets_wait_note(no_scores: bool, roles_pending: bool) -> str | None:
    """Why the score presets are disabled and what enables them (their tooltip); None when they are enabled."""
    if no_scores:
        return ("Needs importance scores: press the Run button above the map (or pick another importance "
                "score) and these presets use them.")
    if roles_pending:
        return "Waits for the head roles (found above the map) to know which heads to protect."
    return None


def chart_key(kind: str, edits: int | None = None) -> str:
    """The key of ``kind``'s grid drawn after the mask's ``edits``-th change (:func:`app.core.session.state.edits`);
    without ``edits``, the prefix shared by all of them."""
    prefix = f"{GRID_KEYS}_{kind}"
    return prefix if edits is None else f"{prefix}_{edits}"


KEEP_CLICKS = 64        # selections remembered as applied (one per figure the browser may still send)


def _on_select(kind: str, layout: HeadLayout, key: str) -> None:
    """Selection callback of the grid drawn under ``key``: toggle every clicked head (normally one), once.

    Each figure has its own key, so this reads the selection made on that figure. The browser keeps
    sending the selection of a figure already replaced until the script run that replaced it ends, and
    Streamlit then calls its callback again: a selection already applied is skipped, so a click counts
    exactly once, and a click that landed on the old figure still counts. Skipped once the page's click
    log reports (:mod:`app.headmap.clicks`): it has the same click."""
    if clicks.active():
        return
    selection = st.session_state.get(key) or {}
    points = (selection.get("selection") or {}).get("points", [])
    seen = f"{key} {sorted(map(str, points))}"
    applied: dict = st.session_state.setdefault(state.MAP_CLICKS, {})
    if not points or seen in applied:
        return
    applied[seen] = True
    while len(applied) > KEEP_CLICKS:
        applied.pop(next(iter(applied)))
    for point in points:
        layer, head = point.get("customdata") or (point.get("y"), point.get("x"))
        if layer is not None and head is not None:
            state.toggle_head(layout, kind, int(layer), int(head))


def show_grid(kind: str, mask: HeadMask, scores: HeadScores | None, score_name: str, roles=None,
              colour: str = IMPORTANCE) -> None:
    """Draw one kind's grid; a click on a head toggles it (the live panel's fragment reruns with the new mask):
    through the page's click log (:mod:`app.headmap.clicks`) once it reports, else as the chart's selection.
    ``roles`` (a ``RoleReport``) and ``colour``: see :func:`app.headmap.figures.figure`."""
    key = chart_key(kind, state.edits())
    selecting = {} if clicks.active() else dict(
        on_select=functools.partial(_on_select, kind, mask.layout, key), selection_mode="points")
    st.plotly_chart(figure(kind, mask, scores, score_name, roles, colour), key=key, width="content", **selecting,
                    config={"displayModeBar": False, "scrollZoom": False, "doubleClick": False, "doubleClickDelay": 1},
                    alt=f"{KIND_LABELS[kind]} heads: filled squares are kept, crossed grey squares removed")


def kv_groups_note(kind: str, groups: tuple) -> str | None:
    """A sentence on grouped-query attention for ``kind``'s grid (``groups``: per layer, each key/value
    group's query heads); None when every query head has its own key/value head."""
    if not groups or all(len(g) <= 1 for row in groups for g in row):
        return None
    first = groups[0]
    spans = ", ".join(f"H{g[0]}–H{g[-1]} → K/V {j}" if len(g) > 1 else f"H{g[0]} → K/V {j}"
                      for j, g in enumerate(first))
    same = all(row == first for row in groups)
    return (f"Grouped-query attention: {len(first)} key/value heads per layer, each shared by a group of query "
            f"heads ({spans}{' in every layer' if same else ' in layer 0'}). Removing a query head keeps its "
            "group's key/value head; removing every query head of a group removes that key/value head too, which "
            "is where the memory and time go. Removing a head never adds parameters: a group's key/value head is "
            "kept once, whatever its group keeps.")


def click_saving(savings: dict, kind_labels: dict | None = None) -> str:
    """What one click on a head saves, per attention kind (``savings``: kind -> ``pruning.HeadSaving``), e.g.
    "A click on a head removes its W_Q rows and W_O columns (64.5 k parameters); its K/V head is shared by
    2 others and goes (73.7 k more) with the last head of its group." """
    from app.core.ui import count_text

    parts = []
    alike = len(set(savings.values())) == 1           # every kind saves the same: say it once
    for kind, saving in (list(savings.items())[:1] if alike else savings.items()):
        where = "" if alike else f"{(kind_labels or {}).get(kind, KIND_LABELS[kind])}: "
        if saving.group_size > 1:
            others = saving.group_size - 1
            parts.append(f"{where}a click on a head removes its W_Q rows and W_O columns ({count_text(saving.head)} "
                         f"parameters); its K/V head is shared by {others} other{'s' if others != 1 else ''} and "
                         f"goes ({count_text(saving.kv_head)} more) with the last head of its group.")
        else:
            parts.append(f"{where}a click on a head removes its W_Q, W_K, W_V rows and W_O columns "
                         f"({count_text(saving.head)} parameters).")
    text = " ".join(parts)
    return text[0].upper() + text[1:] if text else ""


# -- presets -------------------------------------------------------------------------------------
def apply_preset(name: str, layout: HeadLayout, scores: HeadScores | None = None, fraction: float = 0.5,
                 per_layer: bool = False, seed: int = 0, protected: frozenset = frozenset(),
                 protected_roles: tuple[str, ...] = ()) -> None:
    """Make a preset the current mask (undoable). ``scores`` are the ranking scores of the scorer.

    Presets: "remove_least" (the ``fraction`` least important heads, globally or per layer),
    "one_per_layer" (keep the best head of every layer), "invert", "reset". The two ranked presets never
    remove a ``protected`` head (``(kind, layer, head)``: the heads of ``protected_roles``).
    """
    current = state.current_mask(layout)
    keeping = f", keeping {', '.join(protected_roles)} heads" if protected_roles else ""
    if name == "reset":
        state.reset_mask(layout)
    elif name == "invert":
        state.set_mask(current.inverted(), "invert")
    elif name == "remove_least":
        mask = presets.remove_least_important(scores, fraction, per_layer=per_layer, seed=seed, protected=protected)
        scope = "per layer" if per_layer else "globally"
        state.set_mask(mask, f"remove {round(100 * fraction)} % least important {scope}{keeping}")
    elif name == "one_per_layer":
        state.set_mask(presets.keep_top_per_layer(scores, 1, protected=protected),
                            f"keep the best head per layer{keeping}")
    else:
        raise ValueError(f"unknown preset {name!r}")


# -- history -------------------------------------------------------------------------------------
def _on_history_select() -> None:
    selection = st.session_state.get(state.widget_key("headmap", "history")) or {}
    for point in (selection.get("selection") or {}).get("points", []):
        step = (point.get("customdata") or [point.get("x")])[0]
        if step is not None:
            state.jump_to(int(step))


HISTORY_METRICS = "history_metrics"     # session_results name: {mask text: (metric, interval)} of this session
KEEP_METRICS = 512


def remember(mask: HeadMask, result) -> None:
    """Note the metric of ``mask`` (an EvalResult the panel showed) for the history chart."""
    known = dict(session_results.get_result(HISTORY_METRICS) or {})
    known[encode_mask(mask)] = (result.metric, result.interval)
    session_results.set_result(HISTORY_METRICS, dict(list(known.items())[-KEEP_METRICS:]))


def show_history(metric_name: str) -> None:
    """The metric after every change of the mask, as the panel showed it (a step skipped by quick clicks
    has no point until it is current again: the chart evaluates nothing); clicking a point makes that
    step current."""
    entries = state.history()
    known = session_results.get_result(HISTORY_METRICS) or {}
    found = [known.get(encode_mask(e.mask)) for e in entries]
    fig = history_figure([f[0] if f else None for f in found], [e.label for e in entries],
                                state.history_index(), metric_name, [f[1] if f else None for f in found])
    st.plotly_chart(fig, key=state.widget_key("headmap", "history"), on_select=_on_history_select,
                    selection_mode="points", config={"displayModeBar": False},
                    alt="Metric after each change of the mask")
    current = state.history_index()
    st.caption(f"Step {current} of {len(entries) - 1}: "
               f"{md_escape(entries[current].label.rstrip('.'))}."     # a label may hold a file name
               + skipped_note([f is not None for f in found], current))


def skipped_note(known: list[bool], current: int) -> str:
    """" 2 steps skipped by quick clicks have no point." for the steps without a metric, the current one
    left out (its evaluation is under way, as the panel says); "" when none was skipped."""
    skipped = sum(1 for i, k in enumerate(known) if not k and i != current)
    if not skipped:
        return ""
    return f" {skipped} step{'s' if skipped > 1 else ''} skipped by quick clicks {'have' if skipped > 1 else 'has'} no point."
