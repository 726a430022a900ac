"""One self-contained HTML report of an analysis: opens offline, plots stay interactive.

:func:`build_report` turns an :class:`app.share.analysis.Analysis` into one HTML document: plotly.js inlined
once in ``<head>`` (no ``<script src>``, no CDN, no external fonts); every string from a user or a file
through ``html.escape``; the analysis bundle (``headprune.analysis/1``) embedded as a
``<script type="application/json" id="headprune-analysis">`` and offered as a download, so the report alone
restores the analysis on the Share page. Figures reuse the dashboard's own builders
(:mod:`app.headmap.figures`, :mod:`app.curves.figures`, :mod:`app.speed.figures`): the report shows what the
pages show.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import numbers
from collections.abc import Iterable, Mapping

import plotly.graph_objects as go
import plotly.io as pio

from pruning_core.bench import speed_verdict
from pruning_core.core.heads import KIND_LABELS
from pruning_core.evaluation.metrics import get_metric

from app.curves import figures as charts
from app.headmap import figures as headmap
from app.speed import figures as speed
from app.core import uncertainty, webassets
from app.core.text import measured_text
from app.core.access import task_label
from app.share.analysis import BUNDLE_SCRIPT_ID, Analysis
from app.share.links import link_command

_CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1B1F24;background:#fff;
     max-width:1180px;margin:0 auto;padding:24px 28px 60px;line-height:1.45}
h1{font-size:1.7em;margin:0 0 4px} h2{font-size:1.25em;margin:34px 0 6px;border-bottom:1px solid #d0d7de;
padding-bottom:4px} h3{font-size:1.05em;margin:18px 0 4px}
.sub{color:#57606a;margin:0 0 18px} .explain{color:#333;max-width:900px}
table{border-collapse:collapse;margin:8px 0 12px;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#F2F4F7} td.num{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:150px}
.card .v{font-size:1.35em;font-weight:600} .card .l{color:#57606a;font-size:.85em}
details{margin:8px 0} summary{cursor:pointer;color:#0072B2}
pre{background:#F2F4F7;padding:10px;overflow:auto;max-height:360px;font-size:.85em}
a{color:#0072B2} .muted{color:#57606a;font-size:.9em}
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _metric(name: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    return get_metric(name).format(value)


def _figure_html(fig: go.Figure, div_id: str) -> str:
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _cell(value) -> object:
    """A whole number of 10,000 and more with thousands separators (22,713,986 parameters); else as it is."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return value


def _table(header: Iterable[str], rows: Iterable[Iterable], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{_e(_cell(c))}</td>" if i in numeric
                                    else f"<td>{_e(_cell(c))}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _static_headmap(kind: str, analysis: Analysis) -> go.Figure:
    scores = analysis.scores.get(analysis.scorer or "")
    fig = headmap.figure(kind, analysis.mask, scores.ranking_scores if scores else None,
                         analysis.scorer if scores else "")
    for trace in fig.data:   # the dashboard's hover says "click to remove"; nothing is clickable here
        if trace.hovertext is not None:
            trace.hovertext = [t.split(" · click")[0] for t in trace.hovertext]
    fig.update_layout(clickmode="none")
    return fig


def _flatten(prefix: str, value, out: list) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out.append((prefix, value))


def _cards(items: list[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{_e(v)}</div><div class="l">{_e(l)}</div></div>' for l, v in items) + "</div>"


def build_report(analysis: Analysis, *, title: str | None = None, link: str | None = None) -> str:
    """The whole analysis as one HTML document (str), viewable offline in any browser; with ``link`` (the Share
    page's), also the command that measures it again."""
    a = analysis
    bundle = a.to_json()
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    title = title or f"headprune analysis: {a.model_id} on {task_label(a.task) if a.task else 'no task'}"
    parts: list[str] = []
    parts.append(f"<h1>{_e(title)}</h1>")
    task = task_label(a.task) if a.task else "n/a"           # an upload by its file name, not its server path
    parts.append(f'<p class="sub">Model <b>{_e(a.model_id)}</b> · task <b>{_e(task)}</b> · importance '
                 f'score <b>{_e(a.scorer or "n/a")}</b> · report made {_e(created)}</p>')
    parts.append('<p class="explain">A transformer has many attention heads, and Michel et al. (2019) found that '
                 "many can be removed with little loss. This report records one such experiment: which heads were "
                 "removed (the mask), how important each head was judged to be, how the metric falls as more "
                 "heads are removed, and how much faster the physically smaller model runs. Plots are "
                 "interactive: hover for values, drag to zoom, double-click to reset.</p>")

    # -- summary --
    cards = [("heads kept", f"{a.mask.n_kept} / {a.mask.n_total}")]
    for result, which in ((a.evaluation, "this mask"), (a.dense_evaluation, "all heads")):
        if result is not None:          # at the precision its interval supports, with the interval and n
            seen = uncertainty.shown(result)
            cards.append((f"{get_metric(result.metric_name).label}, {which}",
                          uncertainty.unitless(result.metric_name, f"{seen.value} ({seen.interval})")))
    if a.evaluation is not None:
        cards.append(("loss, this mask", uncertainty.loss_text(a.evaluation.loss)))
    if a.bench is not None:
        comp = a.bench.comparisons[-1]
        verdict = speed_verdict(a.bench, comp.batch_size)
        cards.append((f"pruned vs dense at batch {comp.batch_size}",
                      f"{verdict.short} ({verdict.spread}; ceiling {comp.ceiling_speedup:.2f}×)"))
        cards.append(("parameters (pruned)", f"{a.bench.row('pruned', comp.batch_size).parameters:,}"))
    parts.append("<h2>Summary</h2>" + _cards(cards))
    if a.evaluation is not None:
        split = a.provenance.get("split")
        parts.append(f'<p class="muted">Measured on the first {a.evaluation.n_examples} examples of the '
                     + (f"<b>{_e(split)}</b> split" if split else "evaluation split (not recorded in this file)")
                     + (f" of task {_e(task_label(a.task))}" if a.task else "") + ".</p>")

    # -- the mask --
    parts.append("<h2>The mask</h2><p class=\"explain\">One grid per attention kind: rows are layers (0 at the top), "
                 "columns are heads. Filled squares are kept heads, coloured by their importance score when one "
                 "was computed; grey crossed squares are removed heads.</p>")
    for kind in a.layout.kinds:
        parts.append(_figure_html(_static_headmap(kind, a), f"headmap-{kind}"))
    removed = a.mask.removed()
    removed_text = ", ".join(f"{KIND_LABELS[k]} L{l} H{h}" for k, l, h in removed) or "none"
    parts.append(f"<details><summary>Removed heads ({len(removed)}) and the mask file</summary>"
                 f"<p>{_e(removed_text)}</p><pre>{_e(json.dumps(bundle['mask'], indent=1))}</pre>"
                 "</details>")

    # -- scores --
    if a.scores:
        parts.append("<h2>Importance scores</h2><p class=\"explain\">Larger = more important. Gradient scores are "
                     "the expected sensitivity of the loss to switching a head off (Michel et al.); ranking uses "
                     "scores normalised per layer where noted.</p>")
        for name, res in a.scores.items():
            rows = []
            ranking = res.ranking_scores
            for kind, layers in ranking.kinds.items():
                for layer, row in enumerate(layers):
                    rows.append([KIND_LABELS[kind], layer, *(f"{v:.3g}" for v in row)])
            width = max((len(r) - 2 for r in rows), default=0)
            parts.append(f"<details><summary>{_e(name)} scores ({'normalised per layer' if res.normalize else 'raw'}"
                         f", {res.seconds:.1f} s)</summary>"
                         + _table(["kind", "layer", *(f"H{h}" for h in range(width))], rows,
                                  numeric=set(range(2, 2 + width))) + "</details>")

    # -- curves --
    if a.curves:
        point = (1 - a.mask.n_kept / a.mask.n_total, a.evaluation.metric) if a.evaluation is not None else None
        fig = charts.curves_figure(dict(a.curves), point, f"this mask ({a.mask.n_kept}/{a.mask.n_total} kept)",
                                   a.dense_evaluation.metric if a.dense_evaluation is not None else None)
        parts.append("<h2>Pruning curves</h2><p class=\"explain\">Heads are removed in order of increasing "
                     "importance, a fixed share at a time, and the metric is measured after each step. A better "
                     "importance score keeps its curve high for longer; random order is the baseline.</p>"
                     + _figure_html(fig, "curves"))
        rows = [[name, f"{100 * p.fraction_removed:.0f} %", p.heads_removed, f"{p.metric:.4f}", uncertainty.loss_text(p.loss)]
                for name, c in a.curves.items() for p in c.points]
        parts.append("<details><summary>Curve points</summary>"
                     + _table(["scorer", "removed", "heads removed", "metric", "loss"], rows, {2, 3, 4}) + "</details>")

    # -- tables --
    if a.ablation is not None:
        t = a.ablation
        ordered = sorted(t.rows, key=lambda r: get_metric(t.metric_name).sort_key(r.delta_metric))
        rows = [[KIND_LABELS[r.kind], r.layer, r.head, f"{r.metric:.4f}", f"{r.delta_metric:+.4f}",
                 f"{r.delta_loss:+.4f}"] for r in ordered]
        parts.append(f"<h2>Single-head ablation</h2><p class=\"explain\">The metric with each head removed alone "
                     f"(base {_e(_metric(t.metric_name, t.base_metric))} on {t.n_examples} examples); Δ "
                     f"{_e(get_metric(t.metric_name).helps_sign)} 0 means the "
                     "head helps. Most important heads first.</p>"
                     + _table(["kind", "layer", "head", "metric", "Δ metric", "Δ loss"], rows[:15], {1, 2, 3, 4, 5})
                     + (f"<details><summary>All {len(rows)} heads</summary>"
                        + _table(["kind", "layer", "head", "metric", "Δ metric", "Δ loss"], rows, {1, 2, 3, 4, 5})
                        + "</details>" if len(rows) > 15 else ""))
    if a.one_per_layer is not None:
        t = a.one_per_layer
        rows = [[KIND_LABELS[r.kind], r.layer, r.kept_head, f"{r.metric:.4f}", f"{r.delta_metric:+.4f}"] for r in t.rows]
        parts.append(f"<h2>One head per layer</h2><p class=\"explain\">Each layer alone reduced to its best head "
                     f"({_e(t.selection)}); every layer reduced at once gives "
                     f"{_e(_metric(t.metric_name, t.all_layers_metric))} (all heads: "
                     f"{_e(_metric(t.metric_name, t.base_metric))}).</p>"
                     + _table(["kind", "layer", "kept head", "metric", "Δ metric"], rows, {1, 2, 3, 4}))

    # -- speed --
    if a.bench is not None:
        b = a.bench
        parts.append("<h2>Speed</h2><p class=\"explain\">The dense model, the same model with the removed heads "
                     "masked (their outputs zeroed; every head is still computed, so no faster), and the physically "
                     "pruned copy, timed side by side. The dashed line is the FLOP ceiling: the best speed-up the "
                     f"removed heads can buy.</p><p>{_e(speed.ceiling_text(b))}</p>"
                     + _figure_html(speed.speed_figure(b), "speed"))
        frame = speed.speed_table(b)
        parts.append(_table(list(frame.columns), frame.astype(object).where(frame.notna(), "").values.tolist(),
                            numeric={0, 2, 4, 8, 9, 10}))
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in speed.verdict_lines(b)) + "</ul>")
        parts.append(f'<p class="muted">{_e(b.device)}, {b.torch_threads} threads, attention '
                     f"{_e(b.attn_implementation)}, {b.seq_len} tokens per sequence; {_e(measured_text(b))}; "
                     f"{_e(speed.memory_text(b))}.</p>")

    # -- provenance --
    prov: list = []
    _flatten("", {"model": a.model_id, "weights_sha256": a.weights_sha256, "task": a.task, "scorer": a.scorer,
                  "evaluation examples": a.eval_size, **dict(a.provenance)}, prov)
    parts.append("<h2>Provenance</h2><p class=\"explain\">Where these numbers came from. Each embedded result "
                 "carries its own provenance too (see the JSON).</p>"
                 + _table(["field", "value"], [(k, "" if v is None else v) for k, v in prov]))
    params = a.link_params()
    parts.append("<p>Share-link parameters: <code>" + _e("&".join(f"{k}={v}" for k, v in params.items()))
                 + "</code></p>")
    if link is not None:
        parts.append("<p>Measure it again (the link's model, task, examples and mask): <code>"
                     + _e(link_command(link)) + "</code></p>")
    raw = a.to_bytes()
    parts.append(f'<p><a download="headprune-analysis.json" href="data:application/json;base64,'
                 f'{base64.b64encode(raw).decode()}">Download the analysis as JSON</a> '
                 '<span class="muted">(load it on the Share page of the dashboard to restore this analysis; the '
                 "dashboard also reads this HTML file directly)</span></p>")

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style>\n"
            + webassets.inline_script(pio_plotlyjs())
            + "</head><body>\n" + "\n".join(parts) + "\n"
            + f'<script type="application/json" id="{BUNDLE_SCRIPT_ID}">{webassets.script_json(bundle)}</script>\n'
            + "</body></html>\n")


def pio_plotlyjs() -> str:
    """The plotly.js bundle shipped with the installed plotly package (~4.8 MB, MIT)."""
    from plotly.offline import get_plotlyjs
    return get_plotlyjs()
