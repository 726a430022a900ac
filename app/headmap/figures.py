"""The layers x heads map of a mask as a plotly figure (pure: no Streamlit; the Head map page makes it
clickable through :mod:`app.headmap.ui`, the HTML report draws it as it is).

One figure per attention kind: square markers, layer 0 at the top, head 0 on the left (a scatter: Streamlit
returns no selection for heatmap clicks). Kept heads are filled squares coloured by their importance score
(cividis), removed heads hollow grey squares with a cross, so kept vs removed never depends on colour alone.
With a role report (:class:`pruning_core.analysis.roles.RoleReport`) kept squares can instead be coloured by
one role's score or by each head's strongest role (docs/DASHBOARD.md describes the colourings). Beside the map:
the metric after every change of the mask (:func:`history_figure`).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from pruning_core.core.heads import KIND_LABELS, HeadMask, HeadScores
from pruning_core.analysis.roles import RoleReport, get_role
from pruning_core.analysis.roles.report import STRONGEST_RULE
from pruning_core.evaluation.metrics import get_metric

from app.core.colouring import IMPORTANCE, PALETTE, STRONGEST, metric_axis

COLORSCALE = "Cividis"
REMOVED_COLOR = "#8c8c8c"
CELL_PX = 26                     # marker pitch in pixels (smaller for many heads, see cell_px)
MAX_GRID_PX = 700                # the squares of one row fit in this many pixels
MARGIN_PX = 60                   # left + right plot margins
COLORBAR_PX = 70                 # the score colour bar and its title
TITLE_CHAR_PX = 8                # a generous width of one character of the 14 px title
TITLE_LINE_PX = 20               # one line of the title
LEGEND_PX = 26                   # the kept/removed legend, on its own line under the title
ROLE_SCALE = "Viridis"           # one role's score (kept apart from importance's cividis)
DETECTED_LINE = dict(width=3.5, color="#000000")     # the frame of a head that has the coloured role
NO_ROLE_COLOR = "#e4e4e4"        # strongest role: a kept head without any role
ROLE_LEGEND_PX = 170             # strongest role: the legend of roles right of the map
ROLE_LEGEND_ROW_PX = 21          # one line of that legend
# Paul Tol's "muted" scheme (colour-blind safe) less its wine, which read as previous-token's rose: one colour
# per role in registry order (positional: teal)
ROLE_COLOURS = ["#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", "#44AA99", "#999933", "#AA4499", "#882255"]


def cell_px(n_heads: int) -> int:
    """The marker pitch for ``n_heads`` heads per row: 26 px, less when a row would exceed :data:`MAX_GRID_PX`."""
    return max(14, min(CELL_PX, MAX_GRID_PX // max(1, n_heads)))


def figure_width(n_heads: int, with_scores: bool = True, colour: str = IMPORTANCE) -> int:
    """The figure's width in pixels: fixed by the layout, so the squares never overlap however
    narrow the page (the page gives the map this width and wraps the panel below it instead).
    ``colour``: the colouring (:data:`IMPORTANCE`, a role name or :data:`STRONGEST`), which decides what
    stands right of the squares (a colour bar, or the legend of roles)."""
    side = ROLE_LEGEND_PX if colour == STRONGEST else COLORBAR_PX if with_scores or colour != IMPORTANCE else 0
    return MARGIN_PX + cell_px(n_heads) * (n_heads + 1) + side


def role_colour(role: str, roles: tuple[str, ...]) -> str:
    """The colour of ``role`` among ``roles`` (the report's roles, in registry order)."""
    return ROLE_COLOURS[roles.index(role) % len(ROLE_COLOURS)]


def role_hover(roles: RoleReport, kind: str, layer: int, head: int) -> str:
    """The hover lines of one head's role scores: ``<br>induction 0.82 ✔`` (✔ and bold: the head has the
    role, its score is above the threshold); roles absent for this kind are left out."""
    lines = []
    for role in roles.roles:
        value = roles.score(role, (kind, layer, head))
        if value is None or value != value:                 # absent for this kind, or NaN (no data)
            continue
        threshold = roles.thresholds[role]
        text = f"{get_role(role).title} {value:.2f} (threshold {threshold:.2f}, ×{value / max(threshold, 1e-9):.1f})"
        lines.append(f"<br><b>{text} ✔</b>" if value > threshold else f"<br>{text}")
    if not lines:
        return ""
    best = roles.strongest_of((kind, layer, head))
    if best is not None:
        lines.append(f"<br>strongest role: <b>{get_role(best).title}</b> ({STRONGEST_RULE})")
    return "<br><i>role scores (✔ above threshold)</i>" + "".join(lines)


def _role_marker(roles: RoleReport, kind: str, colour: str, cells: list[tuple[int, int]]) -> dict:
    """The kept heads' marker settings (colours, scale, frames) when colouring the (layer, head) ``cells``
    by one role's score or by each head's strongest role."""
    if colour == STRONGEST:
        named = roles.strongest().get(kind)
        return dict(color=[role_colour(named[l][h], roles.roles) if named and named[l][h] else NO_ROLE_COLOR
                           for l, h in cells], showscale=False)
    grid = roles.scores.get(colour, {}).get(kind)
    if grid is None:                  # the role does not apply to this attention kind: no colour says anything
        return dict(color=[NO_ROLE_COLOR] * len(cells), showscale=False)
    values = [float(grid[l, h]) if grid[l, h] == grid[l, h] else 0.0 for l, h in cells]
    threshold = roles.thresholds[colour]
    finite = grid[grid == grid]
    top = max(float(finite.max()) if finite.size else 0.0, 2 * threshold, 1e-9)
    low = min(float(finite.min()) if finite.size else 0.0, 0.0)
    return dict(color=values, colorscale=ROLE_SCALE, cmin=low, cmax=top, showscale=True,
                colorbar=dict(title=dict(text=f"{get_role(colour).title} score", side="right"), thickness=12),
                line=dict(color=DETECTED_LINE["color"],
                          width=[DETECTED_LINE["width"] if v > threshold else 1 for v in values]))


def figure(kind: str, mask: HeadMask, scores: HeadScores | None, score_name: str = "",
           roles: RoleReport | None = None, colour: str = IMPORTANCE) -> go.Figure:
    """The layers x heads grid of one attention kind. Points carry ``customdata = [layer, head]``.

    ``roles``: the model's role report (hover text lists each head's role scores); ``colour``:
    :data:`IMPORTANCE` (by ``scores``), a role name (by that role's score) or :data:`STRONGEST` (each
    head's strongest role). Without ``roles`` the colouring is by importance whatever ``colour`` says.
    """
    if roles is None:
        colour = IMPORTANCE
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
            role_text = role_hover(roles, kind, layer, head) if roles is not None else ""
            target["t"].append(f"{where}{score}<br><b>{'kept' if keep else 'removed'}</b> · click to "
                               f"{'remove' if keep else 'restore'}{role_text}")
            if keep:
                target["c"].append(value if value is not None else 0.5)
    pitch = cell_px(n_heads)
    width = figure_width(n_heads, scores is not None, colour)
    # the title on top (on two lines when one would not fit the figure), the legend on its own line
    # below it: beside a narrow map (SmolLM2's 9 heads) the legend covered "heads kept"
    title = f"{KIND_LABELS[kind]}: {sum(map(sum, rows))}/{sum(map(len, rows))} heads kept"
    if len(title) * TITLE_CHAR_PX > width - 10:
        title = title.replace(": ", ":<br>", 1)
    top = 8 + TITLE_LINE_PX * (title.count("<br>") + 1) + LEGEND_PX
    size = max(10, min(28, int(pitch * 0.8)))
    all_scores = [v for r in (scores.kinds[kind] if scores is not None else []) for v in r]
    lo, hi = (min(all_scores), max(all_scores)) if all_scores else (0.0, 1.0)
    traces = []
    # legend-only entries: a neutral kept square (the real trace's legend swatch would take the
    # colour of whichever head comes first) and the removed symbol
    traces.append(go.Scatter(x=[None], y=[None], mode="markers", name="kept", hoverinfo="skip",
                             marker=dict(symbol="square", size=12, color="#7f7c75",
                                         line=dict(width=1, color="#333333"))))
    traces.append(go.Scatter(x=[None], y=[None], mode="markers", name="removed", hoverinfo="skip",
                             marker=dict(symbol="square-x-open", size=12, color=REMOVED_COLOR, line=dict(width=2))))
    marker = dict(symbol="square", size=size, color=kept["c"], colorscale=COLORSCALE, cmin=lo,
                  cmax=hi if hi > lo else lo + 1e-9, showscale=scores is not None,
                  colorbar=dict(title=dict(text=score_name or "score", side="right"), thickness=12),
                  line=dict(width=1, color="#333333"))
    if colour != IMPORTANCE:
        marker.update(_role_marker(roles, kind, colour, list(zip(kept["y"], kept["x"]))))
    traces.append(go.Scatter(
        x=kept["x"], y=kept["y"], mode="markers", name="kept", showlegend=False,
        customdata=list(zip(kept["y"], kept["x"])),
        hovertext=kept["t"], hoverinfo="text", marker=marker))
    traces.append(go.Scatter(
        x=removed["x"], y=removed["y"], mode="markers", name="removed", showlegend=False,
        customdata=list(zip(removed["y"], removed["x"])), hovertext=removed["t"], hoverinfo="text",
        marker=dict(symbol="square-x-open", size=size, color=REMOVED_COLOR, line=dict(width=2))))
    plot_px = pitch * n_layers
    if colour == STRONGEST:            # legend-only entries after the heads' traces (clicks and tests count those)
        named = [r for r in roles.roles if roles.heads(r)] + [None]
        plot_px = max(plot_px, ROLE_LEGEND_ROW_PX * (len(named) + 1))          # the legend and its title fit
        for role in named:
            traces.append(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip", legend="legend2",
                                     name=get_role(role).title if role else "no role",
                                     marker=dict(symbol="square", size=12, line=dict(width=1, color="#333333"),
                                                 color=role_colour(role, roles.roles) if role else NO_ROLE_COLOR)))
    height = 60 + top + plot_px
    # the layout given whole to the constructor: ``update_layout`` on a built figure costs a click's rerun
    # several times as much (plotly's relayout machinery), time the evaluation beside it waits for
    return go.Figure(data=traces, layout=dict(
        height=height, width=width,
        margin=dict(l=50, r=10, t=top, b=40),
        # anchored at its middle: plotly centres a title of several lines on its anchor, so a "top" anchor
        # put the first line of a wrapped title above the figure, cut off
        title=dict(text=title, font=dict(size=14), x=0, xanchor="left", xref="container", yref="container",
                   y=1 - (4 + TITLE_LINE_PX * (title.count("<br>") + 1) / 2) / height,
                   yanchor="middle", pad=dict(l=8)),
        showlegend=True, legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0,
                                    itemclick=False, itemdoubleclick=False),
        legend2=dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", title=dict(text="strongest role<br>(largest score ÷ threshold)"),
                     itemclick=False, itemdoubleclick=False, font=dict(size=11)),
        dragmode=False, clickmode="event+select", plot_bgcolor="white",
        xaxis=dict(title="head", tickmode="array", tickvals=list(range(n_heads)), range=[-0.6, n_heads - 0.4],
                   showgrid=False, zeroline=False, fixedrange=True),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(n_layers)),
                   range=[n_layers - 0.4, -0.6], showgrid=False, zeroline=False, fixedrange=True),
    ))


def history_figure(metrics: Sequence[float | None], labels: Sequence[str], current: int,
                   metric_name: str, intervals: Sequence[tuple[float, float] | None] | None = None) -> go.Figure:
    """Metric after every change of the mask; the current step is a large ring.

    Points carry ``customdata = [step]`` so a click can jump back to that step; ``intervals`` (95 %,
    one per step, in metric units) become error bars when every step has one.
    """
    k = get_metric(metric_name).scale
    steps = list(range(len(metrics)))
    ys = [None if m is None else k * m for m in metrics]
    bars = None
    if intervals and len(intervals) == len(metrics) and all(i is not None and m is not None
                                                             for i, m in zip(intervals, metrics)):
        bars = dict(type="data", symmetric=False, thickness=1, width=3,
                    array=[k * (hi - m) for (_, hi), m in zip(intervals, metrics)],
                    arrayminus=[k * (m - lo) for (lo, _), m in zip(intervals, metrics)])
    traces = [go.Scatter(
        x=steps, y=ys, error_y=bars, mode="lines+markers", customdata=[[s] for s in steps], name="history",
        hovertext=[f"step {s}: {lab}" for s, lab in zip(steps, labels)], hoverinfo="text+y",
        line=dict(color=PALETTE[0], width=2), marker=dict(size=9, color=PALETTE[0]))]
    if 0 <= current < len(ys) and ys[current] is not None:
        traces.append(go.Scatter(x=[current], y=[ys[current]], mode="markers", name="current", hoverinfo="skip",
                                 marker=dict(size=18, symbol="circle-open", color=PALETTE[5], line=dict(width=3))))
    return go.Figure(data=traces, layout=dict(           # whole, as :func:`figure`: drawn at every click
        height=220, margin=dict(l=50, r=10, t=10, b=40), showlegend=False, dragmode=False, clickmode="event+select",
        xaxis=dict(title="change", dtick=1 if len(steps) < 15 else None, fixedrange=True),
        yaxis=metric_axis(metric_name, fixedrange=True)))
