"""Reading and clicking a Streamlit ``AppTest`` of the dashboard: metrics, query parameters, buttons, a click on
a head of the Head map, and the check that tables name their columns for a reader."""
from __future__ import annotations

import json

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest


def metric(at: AppTest, label: str) -> str:
    """The value of the metric labelled ``label``; fails naming the labels shown when there is none."""
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; have {[m.label for m in at.metric]}"
    return found[0]


def query_param(at: AppTest, name: str) -> str | None:
    """The URL's query parameter ``name`` as one string (AppTest may hold it as a one-item list)."""
    value = at.query_params.get(name)
    return value[-1] if isinstance(value, list) else value


def button(at: AppTest, label: str):
    """The first button labelled ``label``."""
    return next(b for b in at.button if b.label == label)


def click_head(at: AppTest, kind: str, layer: int, head: int) -> AppTest:
    """Send the selection a click on head (layer, head) of ``kind``'s grid produces in the browser."""
    from app.headmap.ui import chart_key

    return click_grid(at, chart_key(kind) + "_", layer, head)


def click_grid(at: AppTest, key_prefix: str, layer: int, column: int) -> AppTest:
    """Send the selection a click on the square (layer, column) of the grid whose chart key starts with
    ``key_prefix`` produces in the browser (its points' ``customdata`` is ``[layer, column]``)."""
    chart = next(e for e in at.get("plotly_chart") if e.key and e.key.startswith(key_prefix))
    states = at._tree.get_widget_states()
    ws = WidgetState(id=chart.proto.id)
    ws.string_value = json.dumps({"selection": {
        "points": [{"curve_number": 0, "point_index": 0, "x": column, "y": layer, "customdata": [layer, column]}],
        "point_indices": [0], "box": [], "lasso": []}})
    states.widgets.append(ws)
    return at._run(states)


def assert_human_columns(frames) -> None:
    """Tables name their columns for a reader ('Change in accuracy (points)', 'p (Holm-corrected)'), never the
    library's field names ('delta_metric', 'p_holm', 'kept_head'), and show accuracy in percent."""
    for frame in frames:
        raw = [c for c in frame.columns if "_" in str(c) or str(c) in ("metric", "loss", "kind", "layer", "head")]
        assert not raw, list(frame.columns)
        for column in (c for c in frame.columns if str(c).startswith("Accuracy (%)")):
            values = frame[column].dropna()
            assert len(values) and values.between(0, 100).all() and values.max() > 1, (column, list(values))
