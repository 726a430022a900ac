"""Attention of one sentence, dense and pruned: the data and pictures of the Attention page.

:func:`run_attention` runs the model once densely and once under the mask on a sentence and
returns an :class:`AttentionRun` (numpy arrays and strings, no live tensors) with both models'
predictions. From it:

- :func:`thumbnails_figure`: every head's attention map as a small heatmap, kept heads and
  removed heads in two blocks side by side (one plotly trace per block, so it stays fast);
- :func:`head_view_html` / :func:`model_view_html`: bertviz's head view and model view as one
  self-contained HTML document for ``st.iframe``. d3 and jQuery are inlined from
  ``assets/vendor/`` (see :mod:`app.webassets`), require.js is replaced by a shim, and the data
  is embedded as JSON with ``<``, ``>`` and ``&`` escaped, so a token such as ``</script>`` stays text.

What "pruned" means here: the masked model, which computes exactly what the physically pruned
model computes. A removed head's own attention map is still computed by the masked model but
contributes nothing, so in the pruned model's maps it is shown as all zeros; later layers' kept
heads can attend differently than in the dense model because their inputs changed.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch

from pruning_core.errors import HeadpruneError
from pruning_core.heads import HeadMask
from pruning_core.masking import apply_mask

from . import webassets

MAX_TOKENS = 48            # longer inputs are cut: bertviz draws one row per token
MAX_NEW_TOKENS = 32        # translation length for seq2seq models
HOVER_CELL_LIMIT = 40_000  # above this many heatmap cells, the thumbnails' hover shows no token names

# Paul Tol's "muted" qualitative scheme (colour-blind safe) + dark grey, replacing bertviz's
# d3.schemeCategory10. bertviz indexes it modulo 10, so it needs 10 entries.
HEAD_COLOURS = ["#332288", "#117733", "#CC6677", "#882255", "#44AA99", "#AA4499", "#999933", "#88CCEE",
                "#DDCC77", "#555555"]       # darkest first: they are drawn on white
KEPT_SCALE = "Blues"       # single-hue sequential scales read the same for every colour vision
REMOVED_SCALE = "Greys"


@dataclass(frozen=True)
class Prediction:
    """What a model outputs for the sentence."""

    label: str                                        # class name, or the translation
    probabilities: tuple[tuple[str, float], ...] = ()  # classification: (class name, p) in class order


@dataclass(frozen=True)
class AttentionRun:
    """Attention maps of one input for the dense and the pruned (masked) model.

    ``dense[kind][layer]`` is a float32 array ``[heads, T_query, T_key]``: row ``i`` is how query
    token ``i`` distributes its attention over the key tokens (each row sums to 1). ``pruned`` has
    the same shapes, with the removed heads' maps set to 0. Kinds: ``encoder_self`` (queries and
    keys are encoder tokens), ``decoder_self`` (decoder tokens), ``cross`` (decoder queries,
    encoder keys).
    """

    text: str
    encoder_tokens: tuple[str, ...]
    decoder_tokens: tuple[str, ...] | None            # seq2seq: the dense model's translation, teacher-forced
    sentence_b_start: int | None                      # first token of the second text of a pair
    dense: Mapping[str, tuple[np.ndarray, ...]]
    pruned: Mapping[str, tuple[np.ndarray, ...]]
    mask: HeadMask
    dense_prediction: Prediction
    pruned_prediction: Prediction
    truncated: bool                                   # the input was cut to ``MAX_TOKENS`` tokens
    seconds: float = 0.0
    model_id: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.dense)

    def tokens_for(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query tokens, key tokens) of ``kind``'s maps."""
        if kind == "encoder_self":
            return self.encoder_tokens, self.encoder_tokens
        if self.decoder_tokens is None:
            raise HeadpruneError(f"This model has no {kind} attention.")
        if kind == "decoder_self":
            return self.decoder_tokens, self.decoder_tokens
        return self.decoder_tokens, self.encoder_tokens


# ==================================================================================================
# Running the model
# ==================================================================================================

def example_text(example: Mapping) -> tuple[str, str | None]:
    """The input text(s) of a raw data example: ``(text, None)`` or ``(text_a, text_b)`` for a pair."""
    if "text_a" in example and "text_b" in example:
        return str(example["text_a"]), str(example["text_b"])
    for key in ("text", "source", "sentence"):
        if key in example:
            return str(example[key]), None
    strings = [v for v in example.values() if isinstance(v, str)]
    if not strings:
        raise HeadpruneError(f"The example {dict(example)!r} has no text field (text, text_a/text_b or source).")
    return strings[0], None


def _label_names(loaded, label_names: Sequence[str] | None, n: int) -> list[str]:
    if label_names and len(label_names) == n:
        return [str(x) for x in label_names]
    id2label = getattr(loaded.model.config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), f"class {i}"))) for i in range(n)]


def _stack_attentions(attentions, expected_layers: int) -> tuple[np.ndarray, ...]:
    """Per-layer ``[heads, T_q, T_k]`` float32 arrays from a model's ``[1, heads, T_q, T_k]`` outputs."""
    if attentions is None or len(attentions) != expected_layers:
        got = 0 if attentions is None else len(attentions)
        raise HeadpruneError(
            f"The model returned attention maps for {got} of its {expected_layers} layers. Attention maps need "
            "the 'eager' attention implementation; load the model with attn_implementation='eager'.")
    out = []
    for a in attentions:
        if a is None:       # a layer whose heads were all physically pruned
            out.append(np.zeros((0, 0, 0), dtype=np.float32))
        else:
            out.append(a[0].detach().float().cpu().numpy())
    return tuple(out)


def _maps_of(loaded, outputs) -> dict[str, tuple[np.ndarray, ...]]:
    layout = loaded.layout.kinds
    if "decoder_self" in layout:
        return {"encoder_self": _stack_attentions(outputs.encoder_attentions, len(layout["encoder_self"])),
                "decoder_self": _stack_attentions(outputs.decoder_attentions, len(layout["decoder_self"])),
                "cross": _stack_attentions(outputs.cross_attentions, len(layout["cross"]))}
    return {"encoder_self": _stack_attentions(outputs.attentions, len(layout["encoder_self"]))}


def _zero_removed(maps: Mapping[str, tuple[np.ndarray, ...]], mask: HeadMask) -> dict[str, tuple[np.ndarray, ...]]:
    out = {}
    for kind, layers in maps.items():
        new = []
        for layer, arr in enumerate(layers):
            keep = np.asarray(mask.kinds[kind][layer], dtype=np.float32)
            new.append(arr * keep[:, None, None] if arr.shape[0] == keep.shape[0] else arr)
        out[kind] = tuple(new)
    return out


def _tokens(tok, ids: Sequence[int]) -> tuple[str, ...]:
    """Token strings of ``ids``; an id the tokenizer cannot name shows as ``[id 123]``."""
    names = tok.convert_ids_to_tokens(list(ids))
    return tuple(n if isinstance(n, str) else f"[id {i}]" for n, i in zip(names, ids))


def _model_inputs(model, encoding) -> dict:
    """Only the inputs the model's forward takes (DistilBERT and BART take no token_type_ids)."""
    import inspect
    accepted = inspect.signature(model.forward).parameters
    return {k: v for k, v in encoding.items() if k in accepted}


def run_attention(loaded, text: str, mask: HeadMask | None = None, *, text_b: str | None = None,
                  label_names: Sequence[str] | None = None, max_tokens: int = MAX_TOKENS,
                  max_new_tokens: int = MAX_NEW_TOKENS) -> AttentionRun:
    """Run ``loaded`` on ``text`` (and ``text_b`` for a pair task) densely and under ``mask``.

    Args:
        loaded: a ``LoadedModel`` loaded with eager attention; it is only read (the mask is applied
            per call, so a model shared with other sessions is safe).
        mask: 1 = keep, 0 = removed, per kind and layer; ``None`` keeps every head.
        label_names: class names of the task (classification); default: the model config's.
        max_tokens: the input is cut to this many tokens (``run.truncated`` says whether it was).
        max_new_tokens: longest translation generated (seq2seq models).

    Raises:
        HeadpruneError: empty text, a mask for another model, or a model without attention maps.
    """
    started = time.perf_counter()
    text = (text or "").strip()
    text_b = (text_b or "").strip() or None
    if not text:
        raise HeadpruneError("Type a sentence first: the attention views need at least one word.")
    if max_tokens < 2:
        raise HeadpruneError(f"max_tokens must be at least 2, got {max_tokens}.")
    mask = mask or HeadMask.full(loaded.layout)
    mask.check_fits(loaded.layout)
    model, tok = loaded.model, loaded.tokenizer
    impl = getattr(model.config, "_attn_implementation", "eager")
    if impl not in (None, "eager"):
        raise HeadpruneError(f"The model was loaded with attn_implementation={impl!r}, which returns no attention "
                             "maps. Load it with attn_implementation='eager' (the dashboard does by default).")
    args = (text, text_b) if text_b else (text,)
    full_length = len(tok(*args, truncation=False)["input_ids"])
    encoding = tok(*args, truncation=True, max_length=max_tokens, return_tensors="pt")
    truncated = full_length > encoding["input_ids"].shape[1]
    sentence_b_start = None
    if text_b and hasattr(encoding, "sequence_ids"):
        ids = encoding.sequence_ids(0)
        sentence_b_start = next((i for i, s in enumerate(ids) if s == 1), None)
    device = loaded.device
    inputs = {k: v.to(device) for k, v in _model_inputs(model, encoding).items()}
    encoder_tokens = _tokens(tok, encoding["input_ids"][0].tolist())
    notes: list[str] = []

    with torch.inference_mode():
        if loaded.task_type == "translation":
            gen = dict(max_new_tokens=max_new_tokens, num_beams=1, do_sample=False)
            dense_ids = model.generate(**inputs, **gen)
            with apply_mask(loaded, mask):
                pruned_ids = model.generate(**inputs, **gen)
            dense_pred = Prediction(tok.decode(dense_ids[0], skip_special_tokens=True))
            pruned_pred = Prediction(tok.decode(pruned_ids[0], skip_special_tokens=True))
            forward = dict(inputs, decoder_input_ids=dense_ids, output_attentions=True)
            decoder_tokens = _tokens(tok, dense_ids[0].tolist())
            notes.append("Decoder and cross-attention maps are computed for both models on the dense model's "
                         "translation (teacher-forced), so that their token grids line up.")
        else:
            forward = dict(inputs, output_attentions=True)
            decoder_tokens = None
        dense_out = model(**forward)
        with apply_mask(loaded, mask):
            pruned_out = model(**forward)
        dense_maps = _maps_of(loaded, dense_out)
        pruned_maps = _zero_removed(_maps_of(loaded, pruned_out), mask)
        if loaded.task_type != "translation":
            dense_pred = _classification(loaded, dense_out.logits, label_names)
            pruned_pred = _classification(loaded, pruned_out.logits, label_names)
    return AttentionRun(text=text if not text_b else f"{text} ‖ {text_b}", encoder_tokens=encoder_tokens,
                        decoder_tokens=decoder_tokens, sentence_b_start=sentence_b_start, dense=dense_maps,
                        pruned=pruned_maps, mask=mask, dense_prediction=dense_pred, pruned_prediction=pruned_pred,
                        truncated=truncated, seconds=time.perf_counter() - started,
                        model_id=str(loaded.model_id), notes=tuple(notes))


def _classification(loaded, logits: torch.Tensor, label_names: Sequence[str] | None) -> Prediction:
    probs = torch.softmax(logits[0].float(), dim=-1).cpu().tolist()
    names = _label_names(loaded, label_names, len(probs))
    best = max(range(len(probs)), key=lambda i: probs[i])
    return Prediction(names[best], tuple(zip(names, (float(p) for p in probs))))


# ==================================================================================================
# Thumbnails: every head's map, kept and removed side by side
# ==================================================================================================

def _pretty(token: str) -> str:
    return token.replace("Ġ", " ").replace("▁", " ").replace("</w>", "").strip() or token


def thumbnails_figure(run: AttentionRun, kind: str, *, kept_from: str = "pruned",
                      arrange: str = "grid") -> go.Figure:
    """One small heatmap per head of ``kind``, kept heads in blue and removed heads in grey.

    Rows are layers. ``arrange="grid"`` puts every head in its column, as on the head map, with a
    dashed frame around removed heads; ``"grouped"`` packs each layer's kept heads on the left and
    its removed heads in a separate block on the right, labelled ``H<head>``. Kept heads show their
    map in the pruned model (``kept_from="pruned"``) or the dense one (``"dense"``); removed heads
    the map they had in the dense model. Hover gives layer, head, the two tokens and the weight.
    """
    if kind not in run.dense:
        raise HeadpruneError(f"No {kind} attention in this run; kinds are {list(run.dense)}.")
    if kept_from not in ("pruned", "dense") or arrange not in ("grid", "grouped"):
        raise HeadpruneError(f"kept_from must be 'pruned' or 'dense' and arrange 'grid' or 'grouped'; "
                             f"got {kept_from!r}, {arrange!r}.")
    q_tokens, k_tokens = (tuple(_pretty(t) for t in ts) for ts in run.tokens_for(kind))
    tq, tk = len(q_tokens), len(k_tokens)
    rows = run.mask.kinds[kind]
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
    gap = max(2, math.ceil((0.25 if grouped else 0.12) * max(tq, tk)))   # room for "H3" labels when grouped
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
        arr = (kept_src if keep else run.dense)[kind][layer][head]
        y0, x0 = layer * tile_h + gap, col * tile_w
        z[keep][y0:y0 + tq, x0:x0 + tk] = arr
        if text is not None:
            for qi in range(tq):
                line = text[keep][y0 + qi]
                for ki in range(tk):
                    line[x0 + ki] = f"L{layer} H{head}  {q_esc[qi]} → {k_esc[ki]}"
        if grouped:
            annotations.append(dict(x=x0 - 0.5, y=y0 - 0.5, text=f"H{head}", xanchor="left", yanchor="bottom",
                                    showarrow=False, font=dict(size=10, color="#1B1F24" if keep else "#555555")))
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
             f"{'pruned' if kept_from == 'pruned' else 'full'} model · <b>removed heads</b> ({n_removed}, grey, "
             "dotted frame): as they attended in the full model")
    if grouped and n_removed:
        annotations.append(dict(x=(kept_cols + 1) * tile_w - 0.5, y=-0.5, xref="x", yref="y", yanchor="bottom",
                                xanchor="left", showarrow=False, yshift=14, text="<b>removed</b>",
                                font=dict(color="#555555")))
        annotations.append(dict(x=-0.5, y=-0.5, xref="x", yref="y", yanchor="bottom", xanchor="left",
                                showarrow=False, yshift=14, text="<b>kept</b>"))
    cell_px = max(2.0, min(12.0, 1000 / max(width, 1)))
    fig.update_layout(
        title=dict(text=title, font=dict(size=13), x=0, xanchor="left"),
        annotations=annotations, shapes=shapes,
        height=int(min(2400, max(240, height * cell_px + 110))),
        margin=dict(l=60, r=20, t=60 if grouped else 50, b=10 if grouped else 30),
        plot_bgcolor="white",
        xaxis=dict(range=[-1.5, width - 0.5], constrain="domain", showgrid=False, zeroline=False,
                   visible=not grouped, tickmode="array",
                   tickvals=[h * tile_w + (tk - 1) / 2 for h in range(n_heads)],
                   ticktext=[f"H{h}" for h in range(n_heads)]),
        yaxis=dict(autorange="reversed", scaleanchor="x", tickmode="array", showgrid=False, zeroline=False,
                   tickvals=[l * tile_h + gap + (tq - 1) / 2 for l in range(n_layers)],
                   ticktext=[f"layer {l}" for l in range(n_layers)]),
    )
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


def _view_kwargs(run: AttentionRun, which: str) -> dict:
    if which not in ("dense", "pruned"):
        raise HeadpruneError(f"which must be 'dense' or 'pruned', got {which!r}.")
    maps = run.dense if which == "dense" else run.pruned
    if run.decoder_tokens is None:
        return dict(attention=_tensor_list(maps["encoder_self"]), tokens=list(run.encoder_tokens),
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
    js = js.replace("d3.schemeCategory10", json.dumps(HEAD_COLOURS))
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
