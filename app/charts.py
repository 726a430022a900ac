"""Plotly figures other than the head map: the mask history and the pruning curves.

Figure builders take plain data and return a ``go.Figure``; they draw nothing themselves, so the
Share page's offline HTML report can reuse them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from pruning_core.metrics import get_metric

# Okabe-Ito: distinguishable for the common colour-vision deficiencies
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon"]


def _scale(metric_name: str) -> tuple[float, str]:
    """Display scale and axis title from the metric registry (x 100 for accuracy-like metrics)."""
    metric = get_metric(metric_name)
    return metric.scale, metric.axis_title


def history_figure(metrics: Sequence[float | None], labels: Sequence[str], current: int,
                   metric_name: str) -> go.Figure:
    """Metric after every change of the mask; the current step is a large ring.

    Points carry ``customdata = [step]`` so a click can jump back to that step.
    """
    k, title = _scale(metric_name)
    steps = list(range(len(metrics)))
    ys = [None if m is None else k * m for m in metrics]
    fig = go.Figure(go.Scatter(
        x=steps, y=ys, mode="lines+markers", customdata=[[s] for s in steps], name="history",
        hovertext=[f"step {s}: {lab}" for s, lab in zip(steps, labels)], hoverinfo="text+y",
        line=dict(color=PALETTE[0], width=2), marker=dict(size=9, color=PALETTE[0])))
    if 0 <= current < len(ys) and ys[current] is not None:
        fig.add_trace(go.Scatter(x=[current], y=[ys[current]], mode="markers", name="current",
                                 hoverinfo="skip",
                                 marker=dict(size=18, symbol="circle-open", color=PALETTE[5], line=dict(width=3))))
    fig.update_layout(height=220, margin=dict(l=50, r=10, t=10, b=40), showlegend=False, dragmode=False,
                      clickmode="event+select", xaxis=dict(title="change", dtick=1 if len(steps) < 15 else None,
                                                           fixedrange=True),
                      yaxis=dict(title=title, fixedrange=True))
    return fig


def curves_figure(curves: Mapping[str, object], current: tuple[float, float] | None = None,
                  current_label: str = "current mask", dense_metric: float | None = None) -> go.Figure:
    """Metric vs share of heads removed, one line per scorer (``experiments.CurveResult``).

    ``current`` = (fraction removed, metric) of the session's mask, drawn as a star.
    """
    metric_name = next((c.metric_name for c in curves.values()), "accuracy")
    k, title = _scale(metric_name)
    fig = go.Figure()
    for i, (name, c) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(
            x=[100 * p.fraction_removed for p in c.points], y=[k * p.metric for p in c.points],
            mode="lines+markers", name=name,
            line=dict(color=PALETTE[i % len(PALETTE)], width=2, dash=None if i % 2 == 0 else "dash"),
            marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=8),
            hovertemplate=f"{name}<br>%{{x:.0f}} % removed<br>%{{y:.2f}}<extra></extra>"))
    if dense_metric is not None:
        fig.add_hline(y=k * dense_metric, line=dict(color="#888888", dash="dot"),
                      annotation_text="all heads", annotation_position="top right")
    if current is not None:
        fig.add_trace(go.Scatter(x=[100 * current[0]], y=[k * current[1]], mode="markers", name=current_label,
                                 marker=dict(symbol="star", size=18, color=PALETTE[5],
                                             line=dict(width=1, color="#000000")),
                                 hovertemplate=f"{current_label}<br>%{{x:.0f}} % removed<br>%{{y:.2f}}<extra></extra>"))
    fig.update_layout(height=420, margin=dict(l=60, r=10, t=20, b=50),
                      xaxis=dict(title="heads removed (%)", range=[-2, 102]), yaxis=dict(title=title),
                      legend=dict(orientation="h", y=-0.2))
    return fig
