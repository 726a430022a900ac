"""Pictures of an attention run (:class:`pruning_core.analysis.attention_maps.AttentionRun`): the Attention
page and nothing else draws them. Pure: no Streamlit, no model execution.

- :func:`thumbnails_figure`: every head's attention map as a small heatmap, kept heads and
  removed heads in two blocks side by side (one plotly trace per block, so it stays fast);
- :func:`probe_figure`: one head's map on a role's probe (:mod:`app.roles.probe`), in the thumbnails'
  colours, with the cells a role looks at outlined;
- :func:`head_view_html` / :func:`model_view_html`: bertviz's head view and model view as one
  self-contained HTML document for ``st.iframe``. d3 and jQuery are inlined from
  ``assets/vendor/`` (see :mod:`app.core.webassets`), require.js is replaced by a shim, and the data
  is embedded as JSON with ``<``, ``>`` and ``&`` escaped, so a token such as ``</script>`` stays text.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch

from pruning_core.analysis.attention_maps import MAX_TOKENS, AttentionRun, example_text
from pruning_core.core.errors import HeadpruneError

from app.core import webassets

__all__ = ["MAX_TOKENS", "AttentionRun", "example_text", "thumbnails_figure", "probe_figure", "head_view_html",
           "model_view_html", "view_height"]

HOVER_CELL_LIMIT = 40_000  # above this many heatmap cells, the thumbnails' hover shows no token names
PLOT_PX = 760              # the thumbnails' plot width in a 1366 px window: the height is sized to it, so the
#                           squares fill the figure instead of leaving blank bands above and below
LABEL_PX = 16              # an "H3" label over a grouped thumbnail (9 px font and its spacing)

# Paul Tol's "muted" qualitative scheme (colour-blind safe) + dark grey + two of his "vibrant" colours,
# replacing bertviz's d3.schemeCategory10, which has 10 colours: with 12 heads two pairs of heads
# shared a colour. :func:`head_colours` gives every head (and every layer in the model view) its own.
HEAD_COLOURS = ["#332288", "#117733", "#CC6677", "#882255", "#44AA99", "#AA4499", "#999933", "#88CCEE",
                "#DDCC77", "#555555", "#EE7733", "#0077BB"]       # darkest first: they are drawn on white
KEPT_SCALE = "Blues"       # single-hue sequential scales read the same for every colour vision
REMOVED_SCALE = "Greys"


# ==================================================================================================
# Thumbnails: every head's map, kept and removed side by side
# ==================================================================================================

def _pretty(token: str) -> str:
    return token.replace("Ġ", " ").replace("▁", " ").replace("</w>", "").strip() or token


def thumbnails_figure(run: AttentionRun, kind: str, *, kept_from: str = "pruned",
                      arrange: str = "grid", layers: Sequence[int] | None = None) -> go.Figure:
    """One small heatmap per head of ``kind``, kept heads in blue and removed heads in grey.

    Rows are layers. ``arrange="grid"`` puts every head in its column, as on the head map, with a
    dashed frame around removed heads; ``"grouped"`` packs each layer's kept heads on the left and
    its removed heads in a separate block on the right, labelled ``H<head>``. Kept heads show their
    map in the pruned model (``kept_from="pruned"``) or the dense one (``"dense"``); removed heads
    the map they had in the dense model. Hover gives layer, head, the two tokens and the weight.
    ``layers``: draw only these layers (e.g. the few that hold removed heads in a 30-layer model), in order.
    """
    if kind not in run.dense:
        raise HeadpruneError(f"No {kind} attention in this run; kinds are {list(run.dense)}.")
    if kept_from not in ("pruned", "dense") or arrange not in ("grid", "grouped"):
        raise HeadpruneError(f"kept_from must be 'pruned' or 'dense' and arrange 'grid' or 'grouped'; "
                             f"got {kept_from!r}, {arrange!r}.")
    q_tokens, k_tokens = (tuple(_pretty(t) for t in ts) for ts in run.tokens_for(kind))
    tq, tk = len(q_tokens), len(k_tokens)
    shown = list(range(len(run.mask.kinds[kind]))) if layers is None else sorted(set(layers))
    if any(not 0 <= l < len(run.mask.kinds[kind]) for l in shown):
        raise HeadpruneError(f"layers {shown} are not all layers of the {len(run.mask.kinds[kind])}-layer {kind} stack.")
    rows = [run.mask.kinds[kind][l] for l in shown]          # row i of the figure is layer shown[i]
    n_layers, n_heads = len(rows), max((len(r) for r in rows), default=0)
    grouped = arrange == "grouped"
    # column of every head: its own index (grid), or packed kept | gap | removed (grouped)
    kept_cols = max((sum(r) for r in rows), default=0)
    columns: dict[tuple[int, int], int] = {}
    for layer, row in enumerate(rows):
        kept = [h for h, v in enumerate(row) if v]
        removed = [h for h, v in enumerate(row) if not v]
        for j, h in enumerate(kept):
            columns[(layer, h)] = j if grouped else h
        for j, h in enumerate(removed):
            columns[(layer, h)] = kept_cols + 1 + j if grouped else h
    n_cols = (max(columns.values()) + 1) if columns else 1
    gap = max(2, math.ceil(0.12 * max(tq, tk)))
    if grouped:            # room for the "H3" labels: LABEL_PX at the drawn size of a cell, above a removed head's frame
        label_gap = gap
        for _ in range(2):     # the gap widens the figure, which shrinks the cells: estimate twice
            cell = max(2.0, min(12.0, PLOT_PX / max(n_cols * (tk + label_gap), 1)))
            label_gap = max(gap, 1 + math.ceil(LABEL_PX / cell))
        gap = label_gap
    tile_h, tile_w = tq + gap, tk + gap
    height, width = n_layers * tile_h, n_cols * tile_w
    with_text = height * width <= HOVER_CELL_LIMIT
    kept_src = run.pruned if kept_from == "pruned" else run.dense
    q_esc = [html.escape(t) for t in q_tokens]     # plotly renders a subset of HTML in hover text
    k_esc = [html.escape(t) for t in k_tokens]

    z = {True: np.full((height, width), np.nan, dtype=np.float32),
         False: np.full((height, width), np.nan, dtype=np.float32)}
    text = {True: [[""] * width for _ in range(height)], False: [[""] * width for _ in range(height)]} \
        if with_text else None
    annotations, shapes = [], []
    for (layer, head), col in columns.items():
        keep = bool(rows[layer][head])
        arr = (kept_src if keep else run.dense)[kind][shown[layer]][head]
        y0, x0 = layer * tile_h + gap, col * tile_w
        z[keep][y0:y0 + tq, x0:x0 + tk] = arr
        if text is not None:
            for qi in range(tq):
                line = text[keep][y0 + qi]
                for ki in range(tk):
                    line[x0 + ki] = f"L{shown[layer]} H{head}  {q_esc[qi]} → {k_esc[ki]}"
        if grouped:
            annotations.append(dict(x=x0 - 0.5, y=y0 - 1, text=f"H{head}", xanchor="left", yanchor="bottom",
                                    showarrow=False, borderpad=0, font=dict(size=9, color="#1B1F24" if keep else "#555555")))
        if not keep:
            shapes.append(dict(type="rect", x0=x0 - 1, x1=x0 + tk, y0=y0 - 1, y1=y0 + tq, xref="x", yref="y",
                               line=dict(color="#555555", width=1, dash="dot"), fillcolor="rgba(0,0,0,0)"))

    fig = go.Figure()
    for keep, scale, label in ((True, KEPT_SCALE, "kept"), (False, REMOVED_SCALE, "removed")):
        fig.add_trace(go.Heatmap(
            z=z[keep], x0=0, dx=1, y0=0, dy=1, colorscale=scale, zmin=0, zmax=1, name=label,
            text=text[keep] if text is not None else None, hoverongaps=False,
            hovertemplate=(f"%{{text}}: %{{z:.3f}}<extra>{label}</extra>" if text is not None
                           else f"weight %{{z:.3f}}<extra>{label}</extra>"),
            showscale=keep, colorbar=dict(title=dict(text="attention"), len=0.5, thickness=12, y=0.75)))
    n_kept = sum(sum(r) for r in rows)
    n_removed = sum(len(r) for r in rows) - n_kept
    title = (f"<b>kept heads</b> ({n_kept}, blue): attention in the "
             f"{'pruned' if kept_from == 'pruned' else 'full'} model<br><b>removed heads</b> ({n_removed}, grey, "
             "dotted frame): as they attended in the full model")
    if grouped and n_removed:
        annotations.append(dict(x=(kept_cols + 1) * tile_w - 0.5, y=-0.5, xref="x", yref="y", yanchor="bottom",
                                xanchor="left", showarrow=False, yshift=14, text="<b>removed</b>",
                                font=dict(color="#555555")))
        annotations.append(dict(x=-0.5, y=-0.5, xref="x", yref="y", yanchor="bottom", xanchor="left",
                                showarrow=False, yshift=14, text="<b>kept</b>"))
    cell_px = max(2.0, min(12.0, PLOT_PX / max(width, 1)))
    fig.update_layout(
        title=dict(text=title, font=dict(size=13), x=0, xanchor="left"),
        annotations=annotations, shapes=shapes,
        height=int(min(2400, max(240, height * cell_px + 130))),
        margin=dict(l=60, r=20, t=80 if grouped else 70, b=10 if grouped else 30),
        plot_bgcolor="white",
        xaxis=dict(range=[-1.5, width - 0.5], constrain="domain", showgrid=False, zeroline=False,
                   visible=not grouped, tickmode="array",
                   tickvals=[h * tile_w + (tk - 1) / 2 for h in range(n_heads)],
                   ticktext=[f"H{h}" for h in range(n_heads)]),
        yaxis=dict(autorange="reversed", scaleanchor="x", tickmode="array", showgrid=False, zeroline=False,
                   tickvals=[l * tile_h + gap + (tq - 1) / 2 for l in range(n_layers)],
                   ticktext=[f"layer {l}" for l in shown]),
    )
    return fig


PROBE_PLOT_PX = 650        # about the probe map's plot width in a 1366 px window (sidebar open)
PROBE_MIN_PX = 200         # the least height of the probe map's plot area


def probe_figure(arr: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str, *,
                 stripe: tuple[int, int, int] | None = None, span: tuple[int, int] | None = None) -> go.Figure:
    """One head's attention map ``arr`` (``[T_query, T_key]``, rows sum to 1) on a role's probe, drawn like a
    kept head's thumbnail but large, with the tokens on the axes.

    ``stripe`` (first query, last query, offset): a dotted line over the cells key = query - offset (where an
    induction head attends); ``span`` [start, end): a frame around those keys in every row (the needle).
    """
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim != 2 or arr.shape != (len(q_tokens), len(k_tokens)):
        raise HeadpruneError(f"A probe map of shape {arr.shape} does not fit {len(q_tokens)} query and "
                             f"{len(k_tokens)} key tokens.")
    tq, tk = arr.shape
    q_names = [f"{i}: {html.escape(_pretty(t))}" for i, t in enumerate(q_tokens)]
    k_names = [f"{i}: {html.escape(_pretty(t))}" for i, t in enumerate(k_tokens)]
    fig = go.Figure(go.Heatmap(
        z=arr, x=list(range(tk)), y=list(range(tq)), colorscale=KEPT_SCALE, zmin=0, zmax=1,
        customdata=[[(q_names[i], k_names[j]) for j in range(tk)] for i in range(tq)] if tq * tk <= HOVER_CELL_LIMIT
        else None,
        hovertemplate=("%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>" if tq * tk <= HOVER_CELL_LIMIT
                       else "query %{y} → key %{x}: %{z:.3f}<extra></extra>"),
        colorbar=dict(title=dict(text="attention"), thickness=12)))
    if stripe is not None:
        first, last, offset = stripe
        fig.add_trace(go.Scatter(x=[first - offset, last - offset], y=[first, last], mode="lines", hoverinfo="skip",
                                 line=dict(color="#CC6677", width=2, dash="dot"), name="induction stripe",
                                 showlegend=False))
    shapes = [dict(type="rect", x0=span[0] - 0.5, x1=span[1] - 0.5, y0=-0.5, y1=tq - 0.5, xref="x", yref="y",
                   line=dict(color="#CC6677", width=2), fillcolor="rgba(0,0,0,0)")] if span is not None else []
    cell = max(4.0, min(18.0, 900 / max(tk, 1)))
    ticks = max(1, math.ceil(max(tq, tk) / 60))               # every token up to 60, then every n-th
    # square cells only where they leave the map tall enough to read: a few queries over hundreds of keys
    # (a retrieval probe) drew a strip tens of pixels high
    square = tq > 1 and tq * PROBE_PLOT_PX / max(tk, 1) >= PROBE_MIN_PX
    fig.update_layout(
        title=dict(text=html.escape(title), font=dict(size=13), x=0, xanchor="left", y=1, yanchor="bottom",
                   yref="paper", pad=dict(b=12)), shapes=shapes,
        height=int(min(1400, max(PROBE_MIN_PX + 250, tq * cell + 250))), margin=dict(l=90, r=20, t=60, b=90),
        plot_bgcolor="white",
        xaxis=dict(title="key: the token read from", tickmode="array", tickvals=list(range(0, tk, ticks)),
                   ticktext=[html.escape(_pretty(k_tokens[j])) for j in range(0, tk, ticks)], tickangle=-60,
                   showgrid=False, zeroline=False, constrain="domain"),
        yaxis=dict(title="query: the token that reads", tickmode="array", tickvals=list(range(0, tq, ticks)),
                   ticktext=[html.escape(_pretty(q_tokens[i])) for i in range(0, tq, ticks)], autorange="reversed",
                   showgrid=False, zeroline=False, scaleanchor="x" if square else None))
    return fig


# ==================================================================================================
# bertviz, offline and escaped
# ==================================================================================================

_SHIM = """
// require.js stand-in: bertviz asks for ['jquery', 'd3']; both are inlined above as globals.
window.requirejs = function (deps, callback) {
  var modules = {jquery: window.jQuery, d3: window.d3};
  callback.apply(null, deps.map(function (name) { return modules[name]; }));
};
window.require = window.requirejs;
window.require.config = function () {};
"""
# bertviz's model view is 970 px wide; shrink it to the frame instead of cutting off the last heads
_FIT_WIDTH = """
(function () {
  function fit() {   // also on resize: a view in a hidden tab is laid out at width 0
    document.body.style.zoom = '';
    var width = document.body.scrollWidth, room = window.innerWidth - 8;
    if (room > 0 && width > room) { document.body.style.zoom = room / width; }
  }
  window.addEventListener('resize', fit);
  fit();
})();
"""
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\);\s*", re.S)
_VIS_ID = re.compile(r"bertviz-[0-9a-f]{32}")


def _bertviz_js(name: str) -> tuple[str, str]:
    """bertviz's view script: (the template as shipped, our copy without the CDN require.config)."""
    import bertviz
    template = (Path(bertviz.__file__).parent / name).read_text(encoding="utf-8")
    ours, n = _REQUIRE_CONFIG.subn("", template, count=1)
    if "const params = PYTHON_PARAMS;" not in template or n != 1:
        raise HeadpruneError(f"bertviz's {name} is not the one this dashboard was written for; "
                             "install bertviz==1.4.1 as pinned in requirements.txt.")
    return template, ours


def _tensor_list(layers: Sequence[np.ndarray]) -> list[torch.Tensor]:
    """bertviz wants one ``[1, heads, T_q, T_k]`` tensor per layer with the same number of heads in
    every layer; layers of a physically pruned model with fewer heads are padded with all-zero maps."""
    heads = max((a.shape[0] for a in layers), default=0)
    tq, tk = next((a.shape[1:] for a in layers if a.shape[0]), (0, 0))
    out = []
    for a in layers:
        t = torch.zeros(heads, tq, tk, dtype=torch.float64)
        if a.shape[0]:
            t[:a.shape[0]] = torch.from_numpy(np.round(a.astype(np.float64), 3))  # 3 decimals: 5x less JSON
        out.append(t.unsqueeze(0))
    return out


def head_colours(n: int) -> list[str]:
    """``n`` distinct colours: :data:`HEAD_COLOURS` first, then evenly spaced hues at two lightnesses."""
    if n <= len(HEAD_COLOURS):
        return HEAD_COLOURS[:max(n, 1)]
    extra = n - len(HEAD_COLOURS)
    more = [f"hsl({round(360 * k / extra + 17) % 360}, 65%, {38 if k % 2 else 52}%)" for k in range(extra)]
    return HEAD_COLOURS + more


def _colours_needed(run: AttentionRun) -> int:
    """The most heads of any layer, or layers of any stack (the model view colours by layer)."""
    sizes = [1]
    for maps in (run.dense, run.pruned):
        for layers in (m for m in maps.values() if m is not None):
            sizes += [len(layers), *(len(heads) for heads in layers)]
    return max(sizes)


def _view_kwargs(run: AttentionRun, which: str) -> dict:
    if which not in ("dense", "pruned"):
        raise HeadpruneError(f"which must be 'dense' or 'pruned', got {which!r}.")
    maps = run.dense if which == "dense" else run.pruned
    if "cross" not in maps:            # one stack (an encoder, or a decoder-only LM's causal self-attention)
        kind = "encoder_self" if "encoder_self" in maps else "decoder_self"
        return dict(attention=_tensor_list(maps[kind]), tokens=list(run.tokens_for(kind)[0]),
                    sentence_b_start=run.sentence_b_start)
    return dict(encoder_attention=_tensor_list(maps["encoder_self"]),
                decoder_attention=_tensor_list(maps["decoder_self"]),
                cross_attention=_tensor_list(maps["cross"]),
                encoder_tokens=list(run.encoder_tokens), decoder_tokens=list(run.decoder_tokens))


def _document(view: str, run: AttentionRun, which: str, fit_width: bool = False, **extra) -> str:
    import bertviz

    fn = {"head_view.js": bertviz.head_view, "model_view.js": bertviz.model_view}[view]
    template, js = _bertviz_js(view)
    prefix = template[:template.index("PYTHON_PARAMS")]
    try:
        produced = fn(html_action="return", **_view_kwargs(run, which), **extra).data
    except ValueError as exc:          # bertviz validates shapes; say what to do
        raise HeadpruneError(f"bertviz could not draw this input: {exc}") from None
    # bertviz pasted json.dumps(params) (unescaped) after the prefix; read exactly that one value back
    params, _ = json.JSONDecoder().raw_decode(produced, produced.index(prefix) + len(prefix))
    vis_html = produced[produced.index("</script>") + len("</script>"):produced.index('<script type="text/javascript">')]
    # deterministic element id: the same input gives the same HTML, so Streamlit keeps the iframe on reruns
    params.pop("root_div_id", None)
    vis_id = "bertviz-" + hashlib.sha256(webassets.script_json(params).encode()).hexdigest()[:32]
    params["root_div_id"] = vis_id
    vis_html = _VIS_ID.sub(vis_id, vis_html)
    js = js.replace("const params = PYTHON_PARAMS;", "const params = " + webassets.script_json(params) + ";", 1)
    js = js.replace("PYTHON_PARAMS", "params")     # the marker's mention in a comment
    # one colour per head (head view) and per layer (model view): bertviz's own scheme has only 10
    js = js.replace("d3.schemeCategory10", json.dumps(head_colours(_colours_needed(run))))
    js = js.replace("config.layers[layer] % 10]", "config.layers[layer] % LAYER_COLORS.length]")
    title = f"bertviz {view.split('.')[0].replace('_', ' ')}: {which} model"
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title>"
            "<style>body{margin:0;padding:4px;background:#fff;color:#111;"
            "font-family:'Helvetica Neue',Helvetica,Arial,sans-serif}</style></head><body>\n"
            + vis_html + "\n"
            + webassets.inline_script(webassets.script("d3")) + webassets.inline_script(webassets.script("jquery"))
            + webassets.inline_script(_SHIM) + webassets.inline_script(js)
            + (webassets.inline_script(_FIT_WIDTH) if fit_width else "")
            + "</body></html>\n")


def head_view_html(run: AttentionRun, which: str = "dense") -> str:
    """bertviz's head view of ``run`` (``which``: "dense" or "pruned") as one offline HTML document.

    Raises:
        webassets.ScriptsMissing: d3/jQuery were not installed into ``assets/vendor/``.
    """
    return _document("head_view.js", run, which)


def model_view_html(run: AttentionRun, which: str = "dense") -> str:
    """bertviz's model view (every layer x head at once) of ``run`` as one offline HTML document."""
    return _document("model_view.js", run, which, fit_width=True, display_mode="light")


def view_height(run: AttentionRun, view: str) -> int:
    """A pixel height that fits the bertviz view (the iframe cannot measure bertviz's late drawing)."""
    n = max(len(run.encoder_tokens), len(run.decoder_tokens or ()))
    if view == "head":
        return int(min(3000, 140 + 23 * n))
    layers = max(len(v) for v in run.dense.values())
    return int(min(6000, 120 + layers * 115))
