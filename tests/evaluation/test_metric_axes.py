"""Perplexity and other unbounded metrics are drawn on a log axis in every curve (the
Curves page, the Tour, the offline report), declared by the metric rather than by its name."""
from __future__ import annotations

import math

import pytest

from app.curves import figures as charts, dynamics as dynamics_charts
from app.headmap.figures import history_figure
from app.share.report import build_report
from pruning_core.evaluation.experiments import CurvePoint, CurveResult
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.evaluation.metrics import METRICS, get_metric


def _curve(metric_name: str, values: list[float]) -> CurveResult:
    mask = HeadMask.full(HeadLayout({"decoder_self": (4, 4)})).to_json()
    points = tuple(CurvePoint(i / (len(values) - 1), 8 * i // (len(values) - 1), v, math.log(v), mask)
                   for i, v in enumerate(values))
    return CurveResult("gradient", metric_name, 0.5, False, 8, 16, points)


def test_only_unbounded_metrics_ask_for_a_log_axis():
    assert get_metric("perplexity").axis_type == "log"
    for name in METRICS.names():
        metric = get_metric(name)
        assert metric.axis_type == ("log" if metric.unbounded else "linear")
    assert get_metric("accuracy").axis_type == "linear" and get_metric("wer").axis_type == "linear"


@pytest.mark.parametrize("metric_name, axis", [("perplexity", "log"), ("accuracy", "linear")])
def test_curves_and_history_use_the_metrics_axis(metric_name, axis):
    values = [136.0, 2_000.0, 200_000.0] if axis == "log" else [0.9, 0.8, 0.5]
    curves = {"gradient": _curve(metric_name, values)}
    fig = charts.curves_figure(curves, (0.5, values[1]), dense_metric=values[0])
    assert fig.layout.yaxis.type == axis and ("log scale" in fig.layout.yaxis.title.text) == (axis == "log")
    assert history_figure(values, ["a", "b", "c"], 1, metric_name).layout.yaxis.type == axis


def test_the_report_draws_a_perplexity_curve_on_a_log_axis():
    from app.share.analysis import Analysis

    layout = HeadLayout({"decoder_self": (4, 4)})
    analysis = Analysis(model_id="tiny-llama", layout=layout, mask=HeadMask.full(layout),
                        curves={"gradient": _curve("perplexity", [136.0, 2_000.0, 200_000.0])})
    html = build_report(analysis)
    assert '"type":"log"' in html.replace(" ", "") and "perplexity (log scale)" in html


def test_training_dynamics_curves_use_the_metrics_axis():
    from pruning_core.analysis.dynamics import Checkpoint, DynamicsResult

    points = _curve("perplexity", [136.0, 2_000.0, 200_000.0]).points
    checkpoint = Checkpoint(10, 1.0, 3.2, 136.0, 4.9, {}, points, None, None, 1.0)
    result = DynamicsResult("perplexity", 10, 8, 16, 16, (checkpoint,))
    assert dynamics_charts.curves_by_step_figure(result).layout.yaxis.type == "log"


def test_a_perplexity_curve_to_ten_to_the_133_keeps_fifty_percent_readable():
    """SmolLM2's curve: 20 with all heads, 2,000 at 50 %, 10^133 with every head gone. The axis stops a
    power of ten above 10x the worst value at 50 %, the points above it sit on a marked cap with their value."""
    from dataclasses import replace

    values = [20.0, 60.0, 300.0, 2_000.0, 9_000.0, 1e40, 1e133]
    curve = _curve("perplexity", values)
    curve = replace(curve, points=tuple(replace(p, low=0.9 * p.metric, high=1.1 * p.metric) for p in curve.points))
    fig = charts.curves_figure({"gradient": curve}, dense_metric=20.0)
    low, high = fig.layout.yaxis.range
    assert low == 1 and 5 <= high <= 5.1                      # 10 .. 10^5: 2,000 at 50 % sits well under the top
    line = next(t for t in fig.data if t.name == "gradient")
    assert max(line.y) == pytest.approx(1e5) and line.customdata[-1] == pytest.approx(1e133)
    assert list(line.marker.symbol).count("triangle-up") == 2
    assert any("axis capped at 10<sup>5</sup>" in a.text for a in fig.layout.annotations)
    assert line.error_y.array[-1] == 0 and line.error_y.array[0] > 0    # no bar drawn from the cap


def test_a_perplexity_curve_below_its_cap_is_not_marked():
    fig = charts.curves_figure({"gradient": _curve("perplexity", [136.0, 2_000.0, 20_000.0])})
    assert not any("capped" in (a.text or "") for a in fig.layout.annotations)
    assert "triangle-up" not in list(fig.data[0].marker.symbol)
