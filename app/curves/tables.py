"""The Curves page's and the Tour's result tables with human column names and values in the metric's
unit: 'Accuracy (%)' 89.8 rather than 'metric' 0.898, 'Change in accuracy (points)' rather than
'delta_metric', 'p (Holm-corrected)' rather than 'p_holm'. The CSV download holds the same table;
the JSON download keeps the library's own field names.

Pure: no Streamlit; takes the result dataclasses of :mod:`pruning_core.evaluation.experiments` and
:mod:`pruning_core.evaluation.kinds`.
"""
from __future__ import annotations

import re

import pandas as pd

from pruning_core.core.heads import KIND_LABELS
from pruning_core.evaluation.metrics import Metric, get_metric

LOSS = "Loss (nats)"           # mean cross-entropy; the pages' captions gloss "nats"
LOSS_CHANGE = "Change in loss (nats)"


def _decimals(fmt: str) -> int:
    found = re.search(r"\.(\d+)f", fmt)
    return int(found.group(1)) if found else 4


def metric_column(metric: Metric) -> str:
    """'Accuracy (%)', 'BLEU', 'Perplexity': the metric's axis title, capitalised."""
    title = metric.axis_title
    return title[:1].upper() + title[1:]


def change_column(metric: Metric) -> str:
    """'Change in accuracy (points)', 'Change in BLEU', 'Change in perplexity'."""
    unit = metric.delta_fmt.rsplit("}", 1)[-1].strip()
    return f"Change in {metric.label}" + (f" ({unit})" if unit and unit != metric.label else "")


def _value(metric: Metric, value: float | None) -> float | None:
    """``value`` in display units, rounded as the metric shows it (BLEU 29.62 beside 24.78, not 29.615)."""
    return None if value is None else round(metric.display(value), _decimals(metric.fmt))


def _change(metric: Metric, delta: float | None) -> float | None:
    """A difference of two metric values in display units (points for accuracy), rounded as it is shown."""
    return None if delta is None else round(metric.scale * delta, _decimals(metric.delta_fmt))


def _kind(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def ablation_frame(table) -> pd.DataFrame:
    """One row per head of an ``AblationResult``: the metric without it, the change, its interval and tests."""
    m = get_metric(table.metric_name)
    change = change_column(m)
    return pd.DataFrame([{
        "Attention": _kind(r.kind), "Layer": r.layer, "Head": r.head,
        f"{metric_column(m)} without this head": _value(m, r.metric), change: _change(m, r.delta_metric),
        "Change: 95 % interval from": _change(m, r.delta_low), "Change: 95 % interval to": _change(m, r.delta_high),
        LOSS: round(r.loss, 4), LOSS_CHANGE: round(r.delta_loss, 4),
        "p": r.p_value, "p (Holm-corrected)": r.p_holm,
        "Significant (Holm, 5 %)": None if r.significant is None else ("yes" if r.significant else "no"),
    } for r in table.rows])


def one_per_layer_frame(result) -> pd.DataFrame:
    """One row per layer of a ``OnePerLayerResult``: the head it keeps and the metric with only that head."""
    m = get_metric(result.metric_name)
    return pd.DataFrame([{
        "Attention": _kind(r.kind), "Layer": r.layer, "Head kept": r.kept_head,
        f"{metric_column(m)}, this layer reduced": _value(m, r.metric), change_column(m): _change(m, r.delta_metric),
        LOSS: round(r.loss, 4),
    } for r in result.rows])


def curves_frame(curves: dict) -> pd.DataFrame:
    """One row per (scorer, point) of ``CurveResult`` curves, without the masks."""
    rows = []
    for name, c in curves.items():
        m = get_metric(c.metric_name)
        for p in c.points:
            rows.append({"Scorer": name, "Heads removed (%)": round(100 * p.fraction_removed, 1),
                         "Heads removed": p.heads_removed, metric_column(m): _value(m, p.metric),
                         "95 % interval from": _value(m, p.low), "95 % interval to": _value(m, p.high),
                         LOSS: round(p.loss, 4)})
    return pd.DataFrame(rows)


def kinds_frame(result) -> pd.DataFrame:
    """One row per point of a ``KindSensitivity``: one kind's share removed, in one order."""
    m = get_metric(result.metric_name)
    return pd.DataFrame([{
        "Attention": _kind(p.kind), "Share of its heads removed (%)": round(100 * p.fraction, 1),
        "Heads removed": p.heads_removed,
        "Order": "least important first" if p.method == "importance" else f"random (seed {p.seed})",
        metric_column(m): _value(m, p.metric), "95 % interval from": _value(m, p.low),
        "95 % interval to": _value(m, p.high), LOSS: round(p.loss, 4),
    } for p in result.points])
