"""No page shows a raw kind name (``encoder_self``, ``decoder_self``, ``cross`` as an identifier): a student reads
"encoder self-attention" or "cross", the labels of ``pruning_core.core.heads``. Every page of the dashboard on a
tiny translation model (all three kinds), with half its heads removed and its long work run, scanned as rendered:
text, widget labels, tables and the charts' visible strings."""
from __future__ import annotations

import json
import re

import pytest

from app.core.pages import PAGES
from browser_helpers import ok

RAW = re.compile(r"\b(encoder_self|decoder_self)\b|(?<![\w(-])cross(?=[:_])")    # "cross L0" is a short label
START = ("Run the sweep",)        # the ablation axis: test_the_ablation_axis_... (its run is long on a loaded machine)
MASK = "e:3.c,d:3.c,c:3.c"           # two of four heads removed in every layer of every kind (tiny BART: 2 x 4)

pytestmark = [pytest.mark.usefixtures("stand_in_scripts"), pytest.mark.heavy]


def _chart_strings(spec: dict) -> list[str]:
    """What a reader sees of a Plotly figure: titles, tick labels, trace names, texts and hover texts."""
    out: list[str] = []

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in ("customdata", "meta", "uid", "legendgroup", "type", "colorscale"):
                    walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            out.append(value)
    walk(spec)
    return out


def page_text(at) -> list[str]:
    texts = [e.value for kind in ("markdown", "caption", "info", "warning", "success", "title", "header",
                                  "subheader", "code") for e in at.get(kind)]
    for m in at.metric:
        texts += [m.label, m.value, m.proto.delta, m.help or ""]
    for w in (*at.button, *at.selectbox, *at.radio, *at.multiselect, *at.toggle, *at.slider):
        texts.append(w.label)
        texts += [str(o) for o in getattr(w, "options", [])]
    for frame in at.dataframe:
        texts += [str(c) for c in frame.value.columns] + [str(v) for v in frame.value.astype(str).to_numpy().ravel()]
    for chart in at.get("plotly_chart"):
        texts += _chart_strings(json.loads(chart.proto.spec))
    for html in at.get("html"):
        texts.append(html.proto.body)
    return texts


def _raw(texts: list[str]) -> list[str]:
    return [t[:160] for t in texts if RAW.search(t)]


@pytest.mark.parametrize("page", [p.file for p in PAGES if not p.file.endswith("tour.py")])
def test_no_page_shows_a_raw_kind_name(app_for, tiny_bart, page):
    at = ok(app_for(tiny_bart, page, mask=MASK))
    for label in START:                               # the page's long work, so its results are read too
        found = [b for b in at.button if b.label.startswith(label) and not b.disabled]
        for b in found[:2]:
            at = ok(b.click().run())
    assert not _raw(page_text(at)), _raw(page_text(at))


def test_the_ablation_axis_and_ceiling_sentence_name_kinds_in_words():
    from app.curves import figures
    from app.speed import figures as speed_figures
    from pruning_core.evaluation.experiments import AblationResult, AblationRow

    rows = tuple(AblationRow(kind, 0, h, 0.5, -0.1, 0.7, 0.1) for kind in ("encoder_self", "cross") for h in range(2))
    fig = figures.ablation_figure(AblationResult("accuracy", 0.6, 1.0, 12, rows))
    labels = list(fig.data[0].y)
    assert labels == ["encoder self L0", "cross L0"] and not _raw(labels)
    assert speed_figures.kind_parts({"encoder_self": {"heads_kept": 36, "heads": 72}}) == \
        "encoder self-attention: 36 / 72 heads"
    assert "61,925" in speed_figures.kind_parts({"cross": {"heads_kept": 61925, "heads": 99999}})
