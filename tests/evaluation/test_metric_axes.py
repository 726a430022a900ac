"""Perplexity and other unbounded metrics are drawn on a log axis in every curve (the
Curves page, the Tour, the offline report), declared by the metric rather than by its name."""
from __future__ import annotations

import math

import pytest

from app.curves import figures as charts, dynamics as dynamics_charts
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
    assert charts.history_figure(values, ["a", "b", "c"], 1, metric_name).layout.yaxis.type == axis


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
