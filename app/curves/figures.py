"""Plotly figures other than the head map: the mask history, the pruning curves (with intervals
and seed bands) and the single-head ablation heatmap (non-significant cells marked).

Figure builders take plain data and return a ``go.Figure``; they draw nothing themselves, so the
Share page's offline HTML report can reuse them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from pruning_core.core.heads import KIND_LABELS, KIND_SHORT
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.significance import p_text

from app.core.colouring import PALETTE, metric_axis
from app.curves.tables import change_column

CAP_FRACTION = 0.5     # a log axis is sized to the curves up to this share removed (the Tour asks about 50 %)
# Okabe-Ito: distinguishable for the common colour-vision deficiencies
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon"]


def _scale(metric_name: str) -> tuple[float, str]:
    """Display scale and axis title from the metric registry (x 100 for accuracy-like metrics)."""
    metric = get_metric(metric_name)
    return metric.scale, metric.axis_title






def curves_figure(curves: Mapping[str, object], current: tuple[float, float] | None = None,
                  current_label: str = "current mask", dense_metric: float | None = None,
                  chance: float | None = None) -> go.Figure:
    """Metric vs share of heads removed, one line per scorer (``experiments.CurveResult``).

    ``current`` = (fraction removed, metric) of the session's mask, drawn as a star; ``chance``: the
    metric of always answering the most frequent label (:func:`app.core.uncertainty.majority_share`),
    drawn as a dashed line.
    """
    metric_name = next((c.metric_name for c in curves.values()), "accuracy")
    k = get_metric(metric_name).scale
    cap = log_axis_cap(curves, k) if get_metric(metric_name).unbounded else None
    clip = (lambda y: y) if cap is None else (lambda y: min(y, cap))
    fig = go.Figure()
    for i, (name, c) in enumerate(curves.items()):
        _add_band(fig, c, name, k, PALETTE[i % len(PALETTE)], clip)
        ys = [k * p.metric for p in c.points]
        above = [cap is not None and y > cap for y in ys]
        fig.add_trace(go.Scatter(
            x=[100 * p.fraction_removed for p in c.points], y=[clip(y) for y in ys], customdata=ys,
            error_y=_error_bars(c.points, k, above),
            mode="lines+markers", name=name if len(getattr(c, "seeds", ())) < 2 else f"{name} (mean of "
                                                                                      f"{len(c.seeds)} seeds)",
            line=dict(color=PALETTE[i % len(PALETTE)], width=2, dash=None if i % 2 == 0 else "dash"),
            marker=dict(symbol=["triangle-up" if a else SYMBOLS[i % len(SYMBOLS)] for a in above],
                        size=[12 if a else 8 for a in above]),
            hovertemplate=f"{name}<br>%{{x:.0f}} % removed<br>%{{customdata:.4g}}<extra></extra>"))
    if cap is not None and any(k * p.metric > cap for c in curves.values() for p in c.points):
        fig.add_hline(y=cap, line=dict(color="#555555", dash="dash", width=1),
                      annotation_text=f"axis capped at 10<sup>{round(math.log10(cap))}</sup>: ▲ points lie "
                                      "above it (hover for the value)",
                      annotation_position="top left")
    if dense_metric is not None:
        fig.add_hline(y=k * dense_metric, line=dict(color="#888888", dash="dot"),
                      annotation_text="all heads", annotation_position="top right")
    if chance is not None:
        fig.add_hline(y=k * chance, line=dict(color="#b22222", dash="dash"),
                      annotation_text=f"majority class ({100 * chance:.0f} %)", annotation_position="bottom right")
    if current is not None:
        fig.add_trace(go.Scatter(x=[100 * current[0]], y=[clip(k * current[1])], mode="markers", name=current_label,
                                 marker=dict(symbol="star", size=18, color=PALETTE[5],
                                             line=dict(width=1, color="#000000")),
                                 hovertemplate=f"{current_label}<br>%{{x:.0f}} % removed<br>%{{y:.2f}}<extra></extra>"))
    fig.update_layout(height=420, margin=dict(l=60, r=10, t=20, b=50),
                      xaxis=dict(title="heads removed (%)", range=[-2, 102]),
                      yaxis=metric_axis(metric_name, **({} if cap is None else
                                                         {"range": _log_range(curves, k, dense_metric, cap)})),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def kinds_figure(result, borrowed: Sequence = (), unit_of=None) -> go.Figure:
    """Michel et al. §5: the metric against the share of ONE kind's heads removed (``KindSensitivity``),
    one colour per kind; solid with 95 % intervals: least important first; dashed: mean of the random
    orders, with their range. ``borrowed``: (run, kinds) pairs from other models
    (:func:`pruning_core.evaluation.kinds.borrow`), each drawn in a panel of its own, titled with its model;
    ``unit_of(run)``: what one example of a run is ("utterance"), for the titles' counts."""
    from plotly.subplots import make_subplots

    from pruning_core.evaluation.kinds import source_label

    panels = [(result, tuple(result.heads))] + [(run, tuple(kinds)) for run, kinds in borrowed]
    fig = make_subplots(rows=1, cols=len(panels), horizontal_spacing=0.12,
                        subplot_titles=[source_label(run, unit_of(run) if unit_of else "example") if borrowed
                                        else "" for run, _ in panels],
                        column_widths=[max(1, len(kinds)) for _, kinds in panels])
    for col, (run, kinds) in enumerate(panels, start=1):
        for kind in kinds:
            _kind_traces(fig, run, kind, col, borrowed=col > 1)
        fig.update_yaxes(metric_axis(run.metric_name), row=1, col=col)
        widest = 100 * max((p.fraction for p in run.points), default=1.0)     # the axis ends at the largest share
        fig.update_xaxes(title="share of that kind's heads removed (%)", range=[-0.02 * widest, 1.02 * widest],
                         row=1, col=col)
    fig.update_annotations(font_size=12)
    fig.update_layout(height=420, margin=dict(l=60, r=10, t=40 if borrowed else 20, b=50),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def _kind_traces(fig: go.Figure, result, kind: str, col: int, borrowed: bool) -> None:
    """One kind's line (least important first, with intervals) and its random orders' mean and range."""
    from pruning_core.core.heads import KINDS

    k = get_metric(result.metric_name).scale
    colour, symbol = PALETTE[KINDS.index(kind)], SYMBOLS[KINDS.index(kind)]
    model = f", {result.provenance.get('model', 'another model')}" if borrowed else ""
    best = sorted((p for p in result.points if p.kind == kind and p.method == "importance"), key=lambda p: p.fraction)
    xs = [0.0] + [100 * p.fraction for p in best]
    lows = [result.base_low] + [p.low for p in best]
    highs = [result.base_high] + [p.high for p in best]
    ys = [result.base_metric] + [p.metric for p in best]
    bars = None if None in lows else dict(type="data", symmetric=False, thickness=1, width=3,
                                         array=[k * (h - y) for h, y in zip(highs, ys)],
                                         arrayminus=[k * (y - lo) for lo, y in zip(lows, ys)])
    label = f"{KIND_LABELS[kind]} ({result.heads[kind]} heads{model})"
    fig.add_trace(go.Scatter(x=xs, y=[k * y for y in ys], error_y=bars, mode="lines+markers", name=label,
                             line=dict(color=colour, width=2), marker=dict(symbol=symbol, size=8),
                             hovertemplate=f"{label}, least important first<br>%{{x:.0f}} % of its heads removed"
                                           f"<br>%{{y:.2f}}<extra></extra>"), row=1, col=col)
    shares = sorted({p.fraction for p in result.points if p.kind == kind and p.method == "random"})
    if not shares:
        return
    rnd = [[p.metric for p in result.points if p.kind == kind and p.method == "random" and p.fraction == f]
           for f in shares]
    rx = [0.0] + [100 * f for f in shares]
    mean = [result.base_metric] + [sum(v) / len(v) for v in rnd]
    low, high = [result.base_metric] + [min(v) for v in rnd], [result.base_metric] + [max(v) for v in rnd]
    fig.add_trace(go.Scatter(x=rx + rx[::-1], y=[k * v for v in high] + [k * v for v in low[::-1]],
                             fill="toself", fillcolor=colour, opacity=0.15, line=dict(width=0),
                             hoverinfo="skip", showlegend=False), row=1, col=col)
    fig.add_trace(go.Scatter(x=rx, y=[k * v for v in mean], mode="lines", name=f"{KIND_LABELS[kind]}, random{model}",
                             line=dict(color=colour, width=1.5, dash="dash"),
                             hovertemplate=f"{KIND_LABELS[kind]}, random order (mean)<br>%{{x:.0f}} % removed"
                                           f"<br>%{{y:.2f}}<extra></extra>"), row=1, col=col)


def _error_bars(points: Sequence, k: float, off_axis: Sequence[bool] = ()) -> dict | None:
    """The 95 % intervals of the points as asymmetric error bars (None when the points have none); none on
    a point ``off_axis`` (drawn on a capped axis's top)."""
    if not points or any(getattr(p, "low", None) is None for p in points):
        return None
    off = list(off_axis) or [False] * len(points)
    return dict(type="data", symmetric=False, thickness=1, width=3,
                array=[0 if o else k * (p.high - p.metric) for p, o in zip(points, off)],
                arrayminus=[0 if o else k * (p.metric - p.low) for p, o in zip(points, off)])


def log_axis_cap(curves: Mapping[str, object], k: float, up_to: float = CAP_FRACTION) -> float:
    """The top of a log axis (display units) for curves of an unbounded metric: the next power of ten
    above 10 x the worst value at or below ``up_to`` removed, so the curves are apart where the question is
    asked (perplexity passes 10^100 once most heads are gone, flattening everything below it)."""
    worst = max((k * v for c in curves.values() for p in c.points if p.fraction_removed <= up_to + 1e-9
                 for v in (p.metric, getattr(p, "band_high", None), getattr(p, "high", None)) if v is not None),
                default=1.0)
    return 10.0 ** math.ceil(math.log10(10 * max(worst, 1e-12)))


def _log_range(curves: Mapping[str, object], k: float, dense_metric: float | None, cap: float) -> list[float]:
    """Plotly's range of a log axis (log10 units): from the power of ten below the lowest value to ``cap``."""
    values = [k * v for c in curves.values() for p in c.points
              for v in (p.metric, getattr(p, "band_low", None), getattr(p, "low", None)) if v is not None and v > 0]
    low = min(values + ([k * dense_metric] if dense_metric else []), default=1.0)
    return [math.floor(math.log10(0.8 * low)), math.log10(cap) + 0.05]


def _add_band(fig: go.Figure, curve, name: str, k: float, colour: str, clip=lambda y: y) -> None:
    """The min–max band over seeds of a curve run with several seeds (nothing otherwise)."""
    points = curve.points
    if len(getattr(curve, "seeds", ())) < 2 or any(p.band_low is None for p in points):
        return
    xs = [100 * p.fraction_removed for p in points]
    upper, lower = [clip(k * p.band_high) for p in points], [clip(k * p.band_low) for p in points]
    fig.add_trace(go.Scatter(x=xs + xs[::-1], y=upper + lower[::-1],
                             fill="toself", fillcolor=colour, opacity=0.18, line=dict(width=0), hoverinfo="skip",
                             name=f"{name}: range over {len(curve.seeds)} seeds"))


def ablation_figure(table) -> go.Figure:
    """Layer x head heatmap of Δ metric when each head alone is removed (``experiments.AblationResult``).

    Cells whose change is not significant after Holm–Bonferroni adjustment are greyed over and
    marked "n.s."; significant ones are marked "*". Colour: red = the metric got worse.
    """
    metric = get_metric(table.metric_name)
    kinds = sorted({r.kind for r in table.rows}, key=lambda kind: [r.kind for r in table.rows].index(kind))
    rows = [(kind, layer) for kind in kinds for layer in sorted({r.layer for r in table.rows if r.kind == kind})]
    n_heads = 1 + max((r.head for r in table.rows), default=0)
    where = {(r.kind, r.layer, r.head): r for r in table.rows}
    z, marks, grey, hover = [], [], [], []
    for kind, layer in rows:
        cells = [where.get((kind, layer, h)) for h in range(n_heads)]
        z.append([None if r is None else metric.delta(r.metric, table.base_metric) for r in cells])
        marks.append(["" if r is None or r.significant is None else ("*" if r.significant else "n.s.") for r in cells])
        grey.append([1 if r is not None and r.significant is False else None for r in cells])
        hover.append(["" if r is None else _ablation_hover(metric, table, r) for r in cells])
    labels = [f"L{layer}" if len(kinds) == 1 else f"{KIND_SHORT[kind]} L{layer}" for kind, layer in rows]
    limit = max((abs(v) for row in z for v in row if v is not None), default=1.0) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_heads)), y=labels, text=marks, texttemplate="%{text}", hovertext=hover,
        hoverinfo="text", zmid=0, zmin=-limit, zmax=limit,
        colorscale="RdBu" if metric.higher_is_better else "RdBu_r",
        colorbar=dict(title=change_column(metric).replace(" (", "<br>(").replace("Change in ", "Change in<br>"))))
    fig.add_trace(go.Heatmap(z=grey, x=list(range(n_heads)), y=labels, showscale=False, hoverinfo="skip",
                             colorscale=[[0, "rgba(200,200,200,0.65)"], [1, "rgba(200,200,200,0.65)"]]))
    fig.update_layout(height=max(220, 34 * len(rows) + 90), margin=dict(l=70, r=10, t=20, b=50),
                      xaxis=dict(title="head", dtick=1), yaxis=dict(title="layer", autorange="reversed"))
    return fig


def _ablation_hover(metric, table, r) -> str:
    text = (f"{KIND_LABELS.get(r.kind, r.kind)}, layer {r.layer} head {r.head}<br>"
            f"change {metric.format_delta(r.metric, table.base_metric)}")
    if r.p_value is not None:
        text += (f"<br>95 % interval [{metric.delta(r.delta_low, 0):+.2f}, {metric.delta(r.delta_high, 0):+.2f}]"
                 f"<br>{p_text(r.p_value, table.test, metric)}, Holm-adjusted {p_text(r.p_holm, table.test, metric)}")
    return text
