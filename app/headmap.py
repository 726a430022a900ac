"""The layers x heads map of a mask as a plotly figure (pure: no Streamlit; the Head map page
makes it clickable through :mod:`app.headmap_ui`, the HTML report draws it as it is).

One figure per attention kind: a plotly scatter of square markers, layer 0 at the top, head 0 on
the left (a heatmap would be the natural chart, but Streamlit returns no selection for heatmap
clicks). Kept heads are filled squares coloured by their importance score (cividis: readable for
colour-blind readers and in greyscale); removed heads are hollow grey squares with a cross, so
kept vs removed never depends on colour alone.
"""
from __future__ import annotations

import plotly.graph_objects as go

from pruning_core.heads import KIND_LABELS, HeadMask, HeadScores

COLORSCALE = "Cividis"
REMOVED_COLOR = "#8c8c8c"
CELL_PX = 26                     # marker pitch in pixels (smaller for many heads, see cell_px)
MAX_GRID_PX = 700                # the squares of one row fit in this many pixels
MARGIN_PX = 60                   # left + right plot margins
COLORBAR_PX = 70                 # the score colour bar and its title
TITLE_CHAR_PX = 8                # a generous width of one character of the 14 px title
TITLE_LINE_PX = 20               # one line of the title
LEGEND_PX = 26                   # the kept/removed legend, on its own line under the title


def cell_px(n_heads: int) -> int:
    """The marker pitch for ``n_heads`` heads per row: 26 px, less when a row would exceed :data:`MAX_GRID_PX`."""
    return max(14, min(CELL_PX, MAX_GRID_PX // max(1, n_heads)))


def figure_width(n_heads: int, with_scores: bool = True) -> int:
    """The figure's width in pixels: fixed by the layout, so the squares never overlap however
    narrow the page (the page gives the map this width and wraps the panel below it instead)."""
    return MARGIN_PX + cell_px(n_heads) * (n_heads + 1) + (COLORBAR_PX if with_scores else 0)


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
    pitch = cell_px(n_heads)
    width = figure_width(n_heads, scores is not None)
    # the title on top (on two lines when one would not fit the figure), the legend on its own line
    # below it: beside a narrow map (SmolLM2's 9 heads) the legend covered "heads kept"
    title = f"{KIND_LABELS[kind]}: {sum(map(sum, rows))}/{sum(map(len, rows))} heads kept"
    if len(title) * TITLE_CHAR_PX > width - 10:
        title = title.replace(": ", ":<br>", 1)
    top = 8 + TITLE_LINE_PX * (title.count("<br>") + 1) + LEGEND_PX
    size = max(10, min(28, int(pitch * 0.8)))
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
        height=60 + top + pitch * n_layers, width=width,
        margin=dict(l=50, r=10, t=top, b=40),
        title=dict(text=title, font=dict(size=14), x=0, xanchor="left", xref="container", y=1, yanchor="top",
                   yref="container", pad=dict(t=8, l=8)),
        showlegend=True, legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0,
                                    itemclick=False, itemdoubleclick=False),
        dragmode=False, clickmode="event+select", plot_bgcolor="white",
        xaxis=dict(title="head", tickmode="array", tickvals=list(range(n_heads)), range=[-0.6, n_heads - 0.4],
                   showgrid=False, zeroline=False, fixedrange=True),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(n_layers)),
                   range=[n_layers - 0.4, -0.6], showgrid=False, zeroline=False, fixedrange=True),
    )
    return fig
