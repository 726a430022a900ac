"""The clickable layers x heads map, and the glue between the mask presets and the session's mask.

One figure per attention kind: a plotly scatter of square markers, layer 0 at the top, head 0 on
the left (a heatmap would be the natural chart, but Streamlit returns no selection for heatmap
clicks). Kept heads are filled squares coloured by their importance score (cividis: readable for
colour-blind readers and in greyscale); removed heads are hollow grey squares with a cross, so
kept vs removed never depends on colour alone. Clicking a head toggles it through
:func:`app.state.toggle_head` in the chart's selection callback.
"""
from __future__ import annotations

import functools

import plotly.graph_objects as go
import streamlit as st

from app import state
from pruning_core import presets
from pruning_core.heads import KIND_LABELS, HeadLayout, HeadMask, HeadScores

COLORSCALE = "Cividis"
REMOVED_COLOR = "#8c8c8c"
CELL_PX = 34                     # marker pitch in pixels


def figure(kind: str, mask: HeadMask, scores: HeadScores | None, score_name: str = "") -> go.Figure:
    """The layers x heads grid of one attention kind. Points carry ``customdata = [layer, head]``."""
    rows = mask.kinds[kind]
    n_layers, n_heads = len(rows), max((len(r) for r in rows), default=0)
    kept, removed = {"x": [], "y": [], "c": [], "t": []}, {"x": [], "y": [], "t": []}
    for layer, row in enumerate(rows):
        for head, keep in enumerate(row):
            value = scores.kinds[kind][layer][head] if scores is not None else None
            where = f"{KIND_LABELS[kind]}<br>layer {layer}, head {head}"
            score = f"<br>{score_name} score {value:.3g}" if value is not None else ""
            target = kept if keep else removed
            target["x"].append(head)
            target["y"].append(layer)
            target["t"].append(f"{where}{score}<br><b>{'kept' if keep else 'removed'}</b> · click to "
                               f"{'remove' if keep else 'restore'}")
            if keep:
                target["c"].append(value if value is not None else 0.5)
    size = max(10, min(28, int(CELL_PX * 0.8)))
    all_scores = [v for r in (scores.kinds[kind] if scores is not None else []) for v in r]
    lo, hi = (min(all_scores), max(all_scores)) if all_scores else (0.0, 1.0)
    fig = go.Figure()
    # legend-only entries: a neutral kept square (the real trace's legend swatch would take the
    # colour of whichever head comes first) and the removed symbol
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="kept", hoverinfo="skip",
                             marker=dict(symbol="square", size=12, color="#7f7c75",
                                         line=dict(width=1, color="#333333"))))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="removed", hoverinfo="skip",
                             marker=dict(symbol="square-x-open", size=12, color=REMOVED_COLOR, line=dict(width=2))))
    fig.add_trace(go.Scatter(
        x=kept["x"], y=kept["y"], mode="markers", name="kept", showlegend=False,
        customdata=list(zip(kept["y"], kept["x"])),
        hovertext=kept["t"], hoverinfo="text",
        marker=dict(symbol="square", size=size, color=kept["c"], colorscale=COLORSCALE, cmin=lo,
                    cmax=hi if hi > lo else lo + 1e-9, showscale=scores is not None,
                    colorbar=dict(title=dict(text=score_name or "score", side="right"), thickness=12),
                    line=dict(width=1, color="#333333"))))
    fig.add_trace(go.Scatter(
        x=removed["x"], y=removed["y"], mode="markers", name="removed", showlegend=False,
        customdata=list(zip(removed["y"], removed["x"])), hovertext=removed["t"], hoverinfo="text",
        marker=dict(symbol="square-x-open", size=size, color=REMOVED_COLOR, line=dict(width=2))))
    fig.update_layout(
        height=100 + CELL_PX * n_layers, width=None, margin=dict(l=50, r=10, t=40, b=40),
        title=dict(text=f"{KIND_LABELS[kind]}: {sum(map(sum, rows))}/{sum(map(len, rows))} heads kept",
                   font=dict(size=14), x=0, xanchor="left", y=0.99, yanchor="top"),
        showlegend=True, legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0,
                                    itemclick=False, itemdoubleclick=False),
        dragmode=False, clickmode="event+select", plot_bgcolor="white",
        xaxis=dict(title="head", tickmode="array", tickvals=list(range(n_heads)), range=[-0.6, n_heads - 0.4],
                   showgrid=False, zeroline=False, fixedrange=True),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(n_layers)),
                   range=[n_layers - 0.4, -0.6], showgrid=False, zeroline=False, fixedrange=True),
    )
    return fig


def chart_key(kind: str) -> str:
    return state.widget_key("headmap", f"grid_{kind}")


def _on_select(kind: str, layout: HeadLayout) -> None:
    """Selection callback: toggle every clicked head (normally one)."""
    selection = st.session_state.get(chart_key(kind)) or {}
    for point in (selection.get("selection") or {}).get("points", []):
        layer, head = point.get("customdata") or (point.get("y"), point.get("x"))
        if layer is not None and head is not None:
            state.toggle_head(layout, kind, int(layer), int(head))


def show_grid(kind: str, mask: HeadMask, scores: HeadScores | None, score_name: str) -> None:
    """Draw one kind's grid; a click on a head toggles it (the page reruns with the new mask)."""
    st.plotly_chart(figure(kind, mask, scores, score_name), key=chart_key(kind),
                    on_select=functools.partial(_on_select, kind, mask.layout), selection_mode="points",
                    config={"displayModeBar": False, "scrollZoom": False},
                    alt=f"{KIND_LABELS[kind]} heads: filled squares are kept, crossed grey squares removed")


# -- presets -------------------------------------------------------------------------------------
def apply_preset(name: str, layout: HeadLayout, scores: HeadScores | None = None, fraction: float = 0.5,
                 per_layer: bool = False, seed: int = 0) -> None:
    """Make a preset the current mask (undoable). ``scores`` are the ranking scores of the scorer.

    Presets: "remove_least" (the ``fraction`` least important heads, globally or per layer),
    "one_per_layer" (keep the best head of every layer), "invert", "reset".
    """
    current = state.current_mask(layout)
    if name == "reset":
        state.reset_mask(layout)
    elif name == "invert":
        state.set_mask(current.inverted(), "invert")
    elif name == "remove_least":
        mask = presets.remove_least_important(scores, fraction, per_layer=per_layer, seed=seed)
        scope = "per layer" if per_layer else "globally"
        state.set_mask(mask, f"remove {round(100 * fraction)} % least important {scope}")
    elif name == "one_per_layer":
        state.set_mask(presets.keep_top_per_layer(scores, 1), "keep the best head per layer")
    else:
        raise ValueError(f"unknown preset {name!r}")


# -- history -------------------------------------------------------------------------------------
def _on_history_select() -> None:
    selection = st.session_state.get(state.widget_key("headmap", "history")) or {}
    for point in (selection.get("selection") or {}).get("points", []):
        step = (point.get("customdata") or [point.get("x")])[0]
        if step is not None:
            state.jump_to(int(step))


def show_history(spec: str, task_name: str, limit: int, metric_name: str) -> None:
    """The metric after every change of the mask; clicking a point makes that step current."""
    from app import cache, charts, ui

    entries = state.history()
    results = ui.run_job("history", "Evaluating the mask history", cache.evaluate_many, spec, task_name, limit,
                         [e.mask for e in entries])
    if results is None:
        return
    fig = charts.history_figure([r.metric for r in results], [e.label for e in entries], state.history_index(),
                                metric_name)
    st.plotly_chart(fig, key=state.widget_key("headmap", "history"), on_select=_on_history_select,
                    selection_mode="points", config={"displayModeBar": False},
                    alt="Metric after each change of the mask")
    st.caption(f"Step {state.history_index()} of {len(entries) - 1}: {entries[state.history_index()].label}.")
