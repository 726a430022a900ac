"""What the features' figures share: the Head map's colourings besides one role's name, the line palette, the
attention maps' scale and hover limit, a token as shown, and a metric's axis. Pure: no Streamlit."""
from __future__ import annotations

from pruning_core.evaluation.metrics import get_metric

IMPORTANCE, STRONGEST = "importance", "strongest"
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
KEPT_SCALE = "Blues"       # single-hue sequential scales read the same for every colour vision
HOVER_CELL_LIMIT = 40_000  # above this many heatmap cells, an attention map's hover shows no token names


def pretty_token(token: str) -> str:
    """A token as a reader sees it: the tokenizers' space marks (Ġ, ▁, </w>) gone."""
    return token.replace("Ġ", " ").replace("▁", " ").replace("</w>", "").strip() or token


def metric_axis(metric_name: str, **settings) -> dict:
    """The y axis of a plot of a metric: its title and, for an unbounded metric (perplexity), a log
    scale, on which 136 and 200,000 are both readable."""
    metric = get_metric(metric_name)
    log = metric.axis_type == "log"
    return dict(title=metric.axis_title + (" (log scale)" if log else ""), type=metric.axis_type, **settings)


__all__ = ["IMPORTANCE", "STRONGEST", "PALETTE", "KEPT_SCALE", "HOVER_CELL_LIMIT", "pretty_token", "metric_axis"]
