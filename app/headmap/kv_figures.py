"""The Head map's KV-cache mode as pictures and words (pure: no Streamlit): the layers x key/value heads map of a
policy, and the KV memory of a policy beside the full cache's.

One square per key/value head (rows are layers, 0 at the top; columns its key/value heads), standing for the group
of query heads that read it (named in the hover). A *full* head keeps its whole cache: a filled square; a
*streaming* head keeps only the first ``sink`` and the last ``window`` tokens: a hollow square with a dot, in
another colour, so the two never depend on colour alone.
"""
from __future__ import annotations

import plotly.graph_objects as go

from pruning_core.modeling.kv.kv_policy import KVPolicy

FULL_COLOR = "#00204c"           # cividis' dark end, as the head map's important heads
STREAMING_COLOR = "#d95f02"
CELL_PX = 30
MAP_MAX_PX = 520                 # the map's most height: a deep model's squares shrink (to 14 px) so the panel's
MIN_CELL_PX = 14                 # results stay in the first screen at 1366 x 900 beside it


def cell_px(layers: int) -> int:
    """A square's pitch in pixels for ``layers`` rows: :data:`CELL_PX`, less for a deep model."""
    return max(MIN_CELL_PX, min(CELL_PX, (MAP_MAX_PX - 110) // max(1, layers)))


def kv_figure(policy: KVPolicy, groups, scores=None) -> go.Figure:
    """The map of ``policy``: ``groups`` per layer, each key/value head's query heads (``ArchSummary.kv_groups``'s
    ``decoder_self``); ``scores``: per layer, each key/value head's retrieval score (summed over its query heads),
    shown in the hover when given. Each point's ``customdata`` is ``[layer, key/value head]``."""
    traces = {}
    for layer, row in enumerate(policy.streaming):
        for j, streaming in enumerate(row):
            heads = groups[layer][j]
            span = f"H{heads[0]}–H{heads[-1]}" if len(heads) > 1 else f"H{heads[0]}"
            what = (f"streaming: keeps the first {policy.sink} and last {policy.window} tokens" if streaming
                    else "full: keeps every token")
            score = "" if scores is None else f"<br>retrieval score of the group {scores[layer][j]:.3f}"
            t = traces.setdefault(streaming, {"x": [], "y": [], "text": [], "customdata": []})
            t["x"].append(j)
            t["y"].append(layer)
            t["customdata"].append([layer, j])
            t["text"].append(f"layer {layer}, K/V head {j} (query heads {span})<br>{what}{score}<br>click to switch")
    fig = go.Figure()
    cell = cell_px(len(policy.streaming))
    names = {False: "full cache: every token", True: f"streaming: S {policy.sink} + W {policy.window} tokens"}
    for streaming in (False, True):         # the heads: trace 0 full, trace 1 streaming (either may be empty)
        t = traces.get(streaming, {"x": [], "y": [], "text": [], "customdata": []})
        fig.add_trace(go.Scatter(
            x=t["x"], y=t["y"], customdata=t["customdata"], text=t["text"], hoverinfo="text", mode="markers",
            name=names[streaming], showlegend=False, marker=_marker(streaming, cell - 6)))
    for streaming in (False, True):         # legend-only entries: both kinds named, even while none streams
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=names[streaming], hoverinfo="skip",
                                 marker=_marker(streaming, 14)))
    layers, width = len(policy.streaming), max(policy.kv_heads)
    fig.update_layout(
        width=figure_width(width), height=110 + cell * layers,
        margin=dict(l=60, r=20, t=40, b=40),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0, itemclick=False, itemdoubleclick=False),
        xaxis=dict(title="key/value head", tickmode="array", tickvals=list(range(width)), range=[-0.6, width - 0.4]),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(layers)),
                   range=[layers - 0.4, -0.6]),
        plot_bgcolor="white", clickmode="event+select", dragmode=False)
    return fig


def _marker(streaming: bool, size: int) -> dict:
    return dict(symbol="square-open-dot" if streaming else "square", size=size,
                color=STREAMING_COLOR if streaming else FULL_COLOR, line=dict(width=2.5))


def figure_width(kv_heads: int) -> int:
    """The map's width in pixels for ``kv_heads`` key/value heads per layer (room for the legend above it)."""
    return max(360, 120 + CELL_PX * (kv_heads + 1))


def mib(n: int) -> str:
    """Bytes as MiB with two decimals, as ``headprune kv-policy`` prints them."""
    return f"{n / 2 ** 20:.2f} MiB"


def legend_text(policy: KVPolicy, context: int) -> str:
    """The map's legend in words (Markdown): what a filled and a hollow square keep at ``context`` tokens, and what S
    and W are; a warning when S + W reaches the context, so that streaming keeps every token."""
    kept = policy.kept_tokens(context, True)
    text = (f":blue[■] **full cache**: the key/value head keeps all {context:,} tokens · :orange[▣] **streaming**: it "
            f"keeps the first S = {policy.sink} tokens (attention sinks) and the last W = {policy.window} (a recent "
            f"window), {kept:,} of {context:,}.")
    if policy.sink + policy.window >= context:
        text += (f" S + W = {policy.sink + policy.window:,} is at least the context: a streaming head keeps every "
                 "token here, so streaming changes nothing; lower S or W.")
    return text


def memory_help(report: dict, full: bool = False) -> str:
    """What the panel's memory figure counts (``report``: :func:`pruning_core.modeling.kv.kv_policy.memory_report`)."""
    whose = "with every key/value head keeping the full cache" if full else "under the policy on the map"
    return (f"The keys and values the attention layers keep for one sequence of {report['context']:,} tokens "
            f"{whose}; the model's weights are not included. C{_counted(report)[1:]}.")


def _counted(report: dict) -> str:
    return (f"counted from the shapes: layers x key/value heads x 2 (K and V) x head dim {report['head_dim']} x "
            f"{report['dtype_bytes']} bytes x tokens kept, not measured")


def memory_text(report: dict) -> tuple[str, str]:
    """(the policy's KV memory, a sentence beside it) from :func:`pruning_core.modeling.kv.kv_policy.memory_report`."""
    ratio = report["ratio"]
    times = ("the same: no key/value head streams" if not report["streaming_kv_heads"] else
             f"{ratio:.2f}x smaller" if ratio is not None else "nothing kept")
    return mib(report["kv_bytes"]), (
        f"KV cache of one sequence at {report['context']:,} tokens: {mib(report['kv_bytes'])} with this policy vs "
        f"{mib(report['full_kv_bytes'])} for the full cache ({times}); {report['streaming_kv_heads']} of "
        f"{report['kv_heads']} key/value heads stream, each keeping {report['sink']} + {report['window']} tokens. "
        f"Keys and values only, not the weights; {_counted(report)}.")


CURVE_COLORS = {"full": FULL_COLOR, "retrieval": "#1b9e77", "razor": "#7570b3", "budgets": "#e6ab02",
                "random": "#999999", "streaming": STREAMING_COLOR}


def curve_figure(points: dict, titles: dict, fraction: float, current: float | None = None, width: int = 460,
                 height: int = 270) -> go.Figure:
    """Accuracy against the share of key/value heads streaming: ``points`` per policy
    (:func:`app.headmap.kv_curve.curve_points`) with 95 % bars, ``titles`` naming them, a dashed line at the
    policy on the map's share ``fraction`` and, once evaluated, its accuracy ``current`` as a star."""
    fig = go.Figure()
    for policy, pts in points.items():
        fig.add_trace(go.Scatter(
            x=[p.fraction for p in pts], y=[p.accuracy for p in pts], name=titles.get(policy, policy),
            mode="lines+markers", marker=dict(size=7, color=CURVE_COLORS.get(policy, "#444")),
            error_y=dict(type="data", symmetric=False, array=[p.high - p.accuracy for p in pts],
                         arrayminus=[p.accuracy - p.low for p in pts], thickness=1),
            hovertemplate="%{y:.0%} at %{x:.0%} streaming<extra>" + titles.get(policy, policy) + "</extra>"))
    fig.add_vline(x=fraction, line_dash="dash", line_color=STREAMING_COLOR)
    if current is not None:
        fig.add_trace(go.Scatter(x=[fraction], y=[current], name="the map's policy", mode="markers",
                                 marker=dict(symbol="star", size=14, color=STREAMING_COLOR),
                                 hovertemplate="the map's policy: %{y:.0%}<extra></extra>"))
    fig.update_layout(width=width, height=height, margin=dict(l=45, r=10, t=10, b=10),
                      xaxis=dict(title="share of key/value heads streaming", range=[-0.05, 1.05], tickformat=".0%"),
                      yaxis=dict(title="accuracy", range=[-0.05, 1.05], tickformat=".0%"),
                      legend=dict(font=dict(size=10), orientation="h", y=-0.3, yanchor="top"), plot_bgcolor="white")
    return fig
