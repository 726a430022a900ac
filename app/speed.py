"""Pictures and tables of a speed sweep (``pruning_core.bench.BenchResult``): dense vs masked vs
physically pruned per batch size, with the FLOP ceiling beside the measurement.

Figure builders take the result and return a ``go.Figure``; the Speed page and the offline HTML
report both use them.
"""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pruning_core.bench import VARIANTS, BenchResult

# Okabe-Ito colours plus a distinct marker and dash per variant: never colour alone
STYLE = {
    "dense": dict(color="#0072B2", symbol="circle", dash="solid", label="dense (all heads)"),
    "masked": dict(color="#E69F00", symbol="square", dash="dot", label="masked (heads zeroed, still computed)"),
    "pruned": dict(color="#009E73", symbol="diamond", dash="solid", label="physically pruned"),
}
CEILING_COLOUR = "#CC79A7"
BATCH_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
SEQ_LEN_CHOICES = (16, 32, 64, 128, 256, 512)


def speed_figure(result: BenchResult) -> go.Figure:
    """Left: throughput (examples/s) per batch size for the three variants, and the ceiling
    (dense throughput x FLOP speed-up). Right: measured speed-up of pruned and masked over dense,
    beside the FLOP ceiling."""
    sizes = list(result.batch_sizes)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("Throughput (examples per second)", "Speed-up over the dense model"))
    for variant in VARIANTS:
        rows = [result.row(variant, b) for b in sizes]
        s = STYLE[variant]
        fig.add_trace(go.Scatter(
            x=sizes, y=[r.examples_per_s for r in rows], mode="lines+markers", name=s["label"],
            legendgroup=variant, line=dict(color=s["color"], dash=s["dash"], width=2),
            marker=dict(symbol=s["symbol"], size=9, color=s["color"]),
            customdata=[[1e3 * r.latency.median, 1e3 * r.latency.q1, 1e3 * r.latency.q3] for r in rows],
            hovertemplate=f"{variant}, batch %{{x}}<br>%{{y:.1f}} examples/s<br>median %{{customdata[0]:.2f}} ms "
                          "(IQR %{customdata[1]:.2f}-%{customdata[2]:.2f})<extra></extra>"), row=1, col=1)
    dense = [result.row("dense", b).examples_per_s for b in sizes]
    ceiling = [c.ceiling_speedup for c in result.comparisons]
    fig.add_trace(go.Scatter(
        x=sizes, y=[d * c for d, c in zip(dense, ceiling)], mode="lines", name="FLOP ceiling for the pruned model",
        legendgroup="ceiling", line=dict(color=CEILING_COLOUR, dash="dash", width=2),
        hovertemplate="ceiling, batch %{x}<br>%{y:.1f} examples/s<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=sizes, y=[c.speedup for c in result.comparisons], mode="lines+markers", name="pruned / dense",
        legendgroup="pruned", showlegend=False,
        line=dict(color=STYLE["pruned"]["color"], width=2), marker=dict(symbol="diamond", size=9),
        customdata=[[c.fraction_of_ceiling * 100] for c in result.comparisons],
        hovertemplate="pruned, batch %{x}: %{y:.3f}x<br>%{customdata[0]:.0f} % of the ceiling<extra></extra>"),
        row=1, col=2)
    fig.add_trace(go.Scatter(
        x=sizes, y=[1 / c.masked_ratio for c in result.comparisons], mode="lines+markers", name="masked / dense",
        legendgroup="masked", showlegend=False,
        line=dict(color=STYLE["masked"]["color"], dash="dot", width=2), marker=dict(symbol="square", size=9),
        hovertemplate="masked, batch %{x}: %{y:.3f}x<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Scatter(
        x=sizes, y=ceiling, mode="lines", name="FLOP ceiling", legendgroup="ceiling", showlegend=False,
        line=dict(color=CEILING_COLOUR, dash="dash", width=2),
        hovertemplate="ceiling: %{y:.3f}x<extra></extra>"), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#888888", width=1), row=1, col=2)
    top = max([*ceiling, *(c.speedup for c in result.comparisons), 1.0])
    fig.update_xaxes(type="log", title_text="batch size (sequences)", tickvals=sizes)
    fig.update_yaxes(title_text="examples / s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="× dense", range=[0, (top if math.isfinite(top) else 2.0) * 1.15], row=1, col=2)
    fig.update_layout(height=420, margin=dict(l=60, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.22),
                      plot_bgcolor="white")
    fig.update_xaxes(showgrid=True, gridcolor="#e5e5e5")
    fig.update_yaxes(showgrid=True, gridcolor="#e5e5e5")
    return fig


def speed_table(result: BenchResult) -> pd.DataFrame:
    """One row per (batch size, variant): latency, throughput, memory, parameters, speed-up, ceiling."""
    out = []
    for comp in result.comparisons:
        for variant in VARIANTS:
            r = result.row(variant, comp.batch_size)
            speedup = {"dense": 1.0, "masked": 1 / comp.masked_ratio, "pruned": comp.speedup}[variant]
            out.append({
                "batch": comp.batch_size, "variant": variant,
                "median ms": round(1e3 * r.latency.median, 3),
                "IQR ms": f"{1e3 * r.latency.q1:.2f}-{1e3 * r.latency.q3:.2f}",
                "examples/s": round(r.examples_per_s, 1),
                "speed-up": round(speedup, 3),
                "ceiling": round(comp.ceiling_speedup, 3) if variant == "pruned" else 1.0,
                "of ceiling": f"{100 * comp.fraction_of_ceiling:.0f} %" if variant == "pruned" else "",
                "peak MiB": None if r.peak_memory_bytes is None else round(r.peak_memory_bytes / 2**20, 1),
                "parameters": r.parameters, "heads computed": r.heads_kept,
            })
    return pd.DataFrame(out)


def ceiling_text(result: BenchResult) -> str:
    """One sentence: what share of the multiply-adds the mask removes, hence the best possible speed-up."""
    c = result.ceiling
    parts = ", ".join(f"{kind}: {v['heads_kept']}/{v['heads']} heads" for kind, v in c.by_kind().items())
    return (f"The mask removes {100 * c.removed_fraction:.1f} % of the multiply-adds of one forward pass "
            f"({parts}; {c.seq_len} tokens), so no implementation can be more than {c.speedup:.2f}× faster by "
            "removing these heads: the feed-forward blocks and the output head do not shrink.")
