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

from pruning_core.bench import MASKED_TEXT, BenchResult, speed_verdict
from pruning_core.core.heads import KIND_LABELS

# Okabe-Ito colours plus a distinct marker and dash per variant: never colour alone
STYLE = {
    "dense": dict(color="#0072B2", symbol="circle", dash="solid", label="dense (all heads)"),
    "masked": dict(color="#E69F00", symbol="square", dash="dot", label="masked (heads zeroed, still computed)"),
    "pruned": dict(color="#009E73", symbol="diamond", dash="solid", label="physically pruned"),
}
CEILING_COLOUR = "#CC79A7"
BATCH_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
SEQ_LEN_CHOICES = (16, 32, 64, 128, 256, 512)


def _throughput_bars(result: BenchResult, variant: str) -> tuple[list[float], list[float], list[float]]:
    """Examples/s at the median latency, and the IQR as (up, down) error bar lengths."""
    mid, up, down = [], [], []
    for b in result.batch_sizes:
        lat = result.row(variant, b).latency
        m = b / lat.median if lat.median > 0 else math.inf
        mid.append(m)
        up.append((b / lat.q1 if lat.q1 > 0 else m) - m)
        down.append(m - b / lat.q3 if lat.q3 > 0 else 0.0)
    return mid, up, down


def _top(values) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return max(finite, default=1.0)


def speed_figure(result: BenchResult) -> go.Figure:
    """Left: throughput (examples/s at the median latency, IQR error bars) per batch size for the three
    variants, and the ceiling (dense throughput x FLOP speed-up). Right: the pruned model's measured
    speed-up over dense (median, IQR-derived error bars) beside the FLOP ceiling and 1.0x. Masked
    is not drawn there: it is the same computation as dense. Both axes contain every point and
    whisker."""
    sizes = list(result.batch_sizes)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("Throughput (examples per second)", "Speed-up of the pruned model"))
    tops: list[float] = []
    for variant in result.variants:
        rows = [result.row(variant, b) for b in sizes]
        mid, up, down = _throughput_bars(result, variant)
        tops += [m + u for m, u in zip(mid, up)]
        s = STYLE[variant]
        label = s["label"] if variant != "masked" else f"masked ({MASKED_TEXT})"
        fig.add_trace(go.Scatter(
            x=sizes, y=mid, mode="lines+markers", name=label,
            legendgroup=variant, line=dict(color=s["color"], dash=s["dash"], width=2),
            marker=dict(symbol=s["symbol"], size=9, color=s["color"]),
            error_y=dict(type="data", symmetric=False, array=up, arrayminus=down, color=s["color"], thickness=1.2),
            customdata=[[1e3 * r.latency.median, 1e3 * r.latency.q1, 1e3 * r.latency.q3] for r in rows],
            hovertemplate=f"{variant}, batch %{{x}}<br>%{{y:.1f}} examples/s<br>median %{{customdata[0]:.2f}} ms "
                          "(IQR %{customdata[1]:.2f}-%{customdata[2]:.2f})<extra></extra>"), row=1, col=1)
    dense = [result.row("dense", b).examples_per_s for b in sizes]
    ceiling = [c.ceiling_speedup for c in result.comparisons]
    tops += [d * c for d, c in zip(dense, ceiling)]
    # one batch size: a line of one point is not drawn, so the ceiling is a wide dash at its value
    ceiling_mode, ceiling_marker = ("lines", None) if len(sizes) > 1 else \
        ("markers", dict(symbol="line-ew", size=40, line=dict(color=CEILING_COLOUR, width=3)))
    fig.add_trace(go.Scatter(
        x=sizes, y=[d * c for d, c in zip(dense, ceiling)], mode=ceiling_mode, marker=ceiling_marker,
        name="FLOP ceiling for the pruned model",
        legendgroup="ceiling", line=dict(color=CEILING_COLOUR, dash="dash", width=2),
        hovertemplate="ceiling, batch %{x}<br>%{y:.1f} examples/s<extra></extra>"), row=1, col=1)
    verdicts = [speed_verdict(result, b) for b in sizes]
    fig.add_trace(go.Scatter(
        x=sizes, y=[v.speedup for v in verdicts], mode="lines+markers", name="pruned / dense",
        legendgroup="pruned", showlegend=False,
        line=dict(color=STYLE["pruned"]["color"], width=2), marker=dict(symbol="diamond", size=9),
        error_y=dict(type="data", symmetric=False, array=[max(0.0, v.high - v.speedup) for v in verdicts],
                     arrayminus=[max(0.0, v.speedup - v.low) for v in verdicts], color=STYLE["pruned"]["color"],
                     thickness=1.2),
        customdata=[[v.low, v.high, v.text] for v in verdicts],
        hovertemplate="pruned, batch %{x}: %{y:.3f}x (IQR %{customdata[0]:.2f}-%{customdata[1]:.2f}x)"
                      "<br>%{customdata[2]}<extra></extra>"),
        row=1, col=2)
    fig.add_trace(go.Scatter(
        x=sizes, y=ceiling, mode=ceiling_mode, marker=ceiling_marker, name="FLOP ceiling", legendgroup="ceiling",
        showlegend=False,
        line=dict(color=CEILING_COLOUR, dash="dash", width=2),
        hovertemplate="ceiling: %{y:.3f}x<extra></extra>"), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#888888", width=1), row=1, col=2)
    right_top = _top([*ceiling, *(v.high for v in verdicts), *(v.speedup for v in verdicts), 1.0])
    # an infinite whisker is left out by _top; a finite one, however wild under load, stays on the chart
    span = math.log10(max(sizes)) - math.log10(min(sizes))
    pad = 0.08 * span if span > 0 else 0.3
    fig.update_xaxes(type="log", title_text="batch size (sequences)", tickvals=sizes,
                     range=[math.log10(min(sizes)) - pad, math.log10(max(sizes)) + pad])
    fig.update_yaxes(title_text="examples / s", range=[0, _top(tops) * 1.1], row=1, col=1)
    fig.update_yaxes(title_text="× dense", range=[0, right_top * 1.1], row=1, col=2)
    fig.update_layout(height=420, margin=dict(l=60, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.22),
                      plot_bgcolor="white")
    fig.update_xaxes(showgrid=True, gridcolor="#e5e5e5")
    fig.update_yaxes(showgrid=True, gridcolor="#e5e5e5")
    return fig


def speed_table(result: BenchResult) -> pd.DataFrame:
    """One row per (batch size, variant): latency, throughput, memory, parameters, and what the
    pruned model's speed-up may be called (``speed_verdict``); masked is the same computation as dense."""
    out = []
    for comp in result.comparisons:
        verdict = speed_verdict(result, comp.batch_size)
        for variant in result.variants:
            r = result.row(variant, comp.batch_size)
            judged = {"dense": "reference", "masked": MASKED_TEXT, "pruned": verdict.short}[variant]
            out.append({
                "batch": comp.batch_size, "variant": variant,
                "median ms": round(1e3 * r.latency.median, 3),
                "IQR ms": f"{1e3 * r.latency.q1:.2f}-{1e3 * r.latency.q3:.2f}",
                "examples/s": round(r.examples_per_s, 1),
                "vs dense": judged,
                "speed-up IQR": f"{verdict.low:.2f}-{verdict.high:.2f}x" if variant == "pruned" else "",
                "ceiling": f"{comp.ceiling_speedup:.2f}x" if variant == "pruned" else "",
                "peak MiB": None if r.peak_memory_bytes is None else round(r.peak_memory_bytes / 2**20, 1),
                "parameters": r.parameters, "heads computed": r.heads_kept,
            })
    return pd.DataFrame(out)


def verdict_lines(result: BenchResult) -> list[str]:
    """One line per batch size: what the pruned model's measured speed-up may be called."""
    return [f"batch {b}: {speed_verdict(result, b).text}" for b in result.batch_sizes]


def kind_parts(by_kind: dict) -> str:
    """Heads kept per kind, in words: 'encoder self-attention: 36 / 72 heads, cross ...'."""
    return ", ".join(f"{KIND_LABELS.get(kind, kind)}: {v['heads_kept']:,} / {v['heads']:,} heads"
                     for kind, v in by_kind.items())


def memory_text(result: BenchResult) -> str:
    """What the sweep says of memory: how the peak was measured, or that peak memory was not."""
    if result.memory_measure == "not measured":
        return "peak memory not measured (the sweep timed latency only)"
    return f"peak memory: {result.memory_measure}"


def ceiling_text(result: BenchResult) -> str:
    """One sentence: what share of the multiply-adds the mask removes, hence the best possible speed-up."""
    c = result.ceiling
    parts = kind_parts(c.by_kind())
    return (f"The mask removes {100 * c.removed_fraction:.1f} % of the multiply-adds of one forward pass "
            f"({parts}; {c.seq_len} tokens), so no implementation can be more than {c.speedup:.2f}× faster by "
            "removing these heads: the feed-forward blocks and the output head do not shrink.")


