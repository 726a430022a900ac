"""One head's attention map on a role's probe (:mod:`app.roles.probe`), drawn like a kept head's thumbnail on the
Attention page but large, with the cells a role looks at outlined. Pure: no Streamlit."""
from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from pruning_core.core.errors import HeadpruneError

from app.core.colouring import HOVER_CELL_LIMIT, KEPT_SCALE, pretty_token

__all__ = ["probe_figure"]


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
    q_names = [f"{i}: {html.escape(pretty_token(t))}" for i, t in enumerate(q_tokens)]
    k_names = [f"{i}: {html.escape(pretty_token(t))}" for i, t in enumerate(k_tokens)]
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
                   ticktext=[html.escape(pretty_token(k_tokens[j])) for j in range(0, tk, ticks)], tickangle=-60,
                   showgrid=False, zeroline=False, constrain="domain"),
        yaxis=dict(title="query: the token that reads", tickmode="array", tickvals=list(range(0, tq, ticks)),
                   ticktext=[html.escape(pretty_token(q_tokens[i])) for i in range(0, tq, ticks)], autorange="reversed",
                   showgrid=False, zeroline=False, scaleanchor="x" if square else None))
    return fig
