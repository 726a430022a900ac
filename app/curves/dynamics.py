"""Figures and reading for the Dynamics page (``headprune.dynamics/1``): pure, no Streamlit.

``read_dynamics`` turns uploaded bytes or a file into a :class:`DynamicsResult` (a FormatError for
anything else); the figure builders take that result and return ``go.Figure`` objects.
"""
from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from app.core.colouring import PALETTE, metric_axis
from app.curves.figures import SYMBOLS, _scale
from pruning_core.analysis.dynamics import DynamicsResult
from pruning_core.core.io.codec import read_document
from pruning_core.evaluation.metrics import get_metric

# where `python benchmarks/dynamics.py` writes the default's run (read when nothing is uploaded)
DEFAULT_RESULT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "dynamics.json"


def read_dynamics(raw: bytes | str, where: str = "The dynamics file") -> DynamicsResult:
    """The dynamics document in ``raw``; a FormatError naming ``where`` when it is not JSON or not that format."""
    return read_document(raw, DynamicsResult.from_json, where)


def _step_colour(i: int, n: int) -> str:
    """Early checkpoints light, late ones dark (a blue ramp), so the order reads without a legend."""
    t = i / max(1, n - 1)
    return f"rgb({int(198 - 198 * t)},{int(219 - 105 * t)},{int(239 - 61 * t)})"


def curves_by_step_figure(result: DynamicsResult) -> go.Figure:
    """Metric vs % of heads removed (by that checkpoint's I_h), one line per checkpoint."""
    k = get_metric(result.metric_name).scale
    fig = go.Figure()
    n = len(result.checkpoints)
    for i, c in enumerate(result.checkpoints):
        fig.add_trace(go.Scatter(
            x=[100 * p.fraction_removed for p in c.points], y=[k * p.metric for p in c.points],
            mode="lines+markers", name=f"step {c.step}",
            line=dict(color=_step_colour(i, n), width=2), marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=8),
            hovertemplate=f"step {c.step}<br>%{{x:.0f}} % removed<br>%{{y:.2f}}<extra></extra>"))
    fig.update_layout(height=400, margin=dict(l=60, r=10, t=20, b=50),
                      xaxis=dict(title="heads removed (%)"), yaxis=metric_axis(result.metric_name),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def rank_correlation_figure(result: DynamicsResult) -> go.Figure:
    """Spearman correlation of each checkpoint's I_h with the final one's and with the previous one's."""
    steps = [c.step for c in result.checkpoints]
    fig = go.Figure()
    for i, (name, values) in enumerate([("with the final I_h", [c.rank_corr_final for c in result.checkpoints]),
                                        ("with the previous checkpoint", [c.rank_corr_previous
                                                                         for c in result.checkpoints])]):
        fig.add_trace(go.Scatter(x=steps, y=values, mode="lines+markers", name=name,
                                 line=dict(color=PALETTE[i], width=2, dash=None if i == 0 else "dash"),
                                 marker=dict(symbol=SYMBOLS[i], size=8),
                                 hovertemplate=f"{name}<br>step %{{x}}<br>rho %{{y:.3f}}<extra></extra>"))
    fig.update_layout(height=400, margin=dict(l=60, r=10, t=20, b=50),
                      xaxis=dict(title="fine-tuning step"), yaxis=dict(title="Spearman rho of I_h", range=[-1.05, 1.05]),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def drop_heatmap_figure(result: DynamicsResult) -> go.Figure:
    """Metric change from the unpruned model (display units) at each step x % removed: pruning tolerance."""
    k, _ = _scale(result.metric_name)
    fractions = [p.fraction_removed for p in result.checkpoints[0].points] if result.checkpoints else []
    z = [[k * (p.metric - c.metric) for p in c.points] for c in result.checkpoints]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"{100 * f:.0f} %" for f in fractions], y=[f"step {c.step}" for c in result.checkpoints],
        colorscale="RdBu", zmid=0, texttemplate="%{z:+.1f}", colorbar=dict(title="change"),
        hovertemplate="%{y}, %{x} removed: %{z:+.2f}<extra></extra>"))
    fig.update_layout(height=60 + 40 * len(z), margin=dict(l=80, r=10, t=20, b=40),
                      # categories: plotly.js reads "20 %" as the number 20 when it guesses the axis type,
                      # which gave a linear axis with ticks at -10, 0, 10 … 70 between the columns
                      xaxis=dict(title="heads removed", type="category"),
                      yaxis=dict(autorange="reversed", type="category"))
    return fig
