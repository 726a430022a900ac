"""The KV mode's curve: a long-context task's accuracy against the share of key/value heads streaming, per policy,
read from what ``benchmarks/long_context_curves.py`` wrote (pure: no Streamlit).

Rows of ``headprune.long_context_curves/1`` are keyed ``model|task|length|policy|fraction|seed``; the points of
one model, task and length: the full cache at share 0, retrieval-chosen, RazorAttention-style and per-head-budget
policies at each share (a budget policy at the retrieval policy's memory), random policies (mean over seeds, bars from the lowest to the highest seed) and every head streaming at 1.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.io.codec import LONG_CONTEXT_CURVES_FORMAT

CURVES_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "long_context_curves.json"
FORMAT = LONG_CONTEXT_CURVES_FORMAT
TITLES = {"full": "full cache", "retrieval": "retrieval heads kept full", "razor": "retrieval + induction kept full",
          "budgets": "per-head budgets by retrieval score", "random": "random heads stream",
          "streaming": "every head streams"}


@dataclass(frozen=True)
class CurvePoint:
    """One policy at one streaming share: accuracy and its 95 % interval (random: lowest and highest seed)."""

    fraction: float
    accuracy: float
    low: float
    high: float
    examples: int


def read_curves(path: Path | None = None) -> dict | None:
    """The benchmark's JSON, or None when it is absent or not that format."""
    try:
        doc = json.loads((path or CURVES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def curve_points(doc: dict | None, model: str, task: str, length: int) -> dict[str, list[CurvePoint]]:
    """``policy -> points`` sorted by share, for ``model`` (the benchmark's ``--models`` name or a path ending in
    it), ``task`` and ``length`` tokens; {} when the benchmark has none."""
    if not doc:
        return {}
    seeds: dict[tuple[str, float], list[dict]] = {}
    for key, row in doc.get("rows", {}).items():
        m, t, n, policy, fraction, _ = key.split("|")
        if t == task and int(n) == length and (m == model or Path(model).name == Path(m).name):
            seeds.setdefault((policy, float(fraction)), []).append(row)
    out: dict[str, list[CurvePoint]] = {}
    for (policy, fraction), rows in sorted(seeds.items(), key=lambda kv: kv[0][1]):
        accs = [r["accuracy"] for r in rows]
        if len(rows) == 1:
            low, high = rows[0]["wilson_95"]
        else:
            low, high = min(accs), max(accs)
        out.setdefault(policy, []).append(CurvePoint(fraction, sum(accs) / len(accs), low, high,
                                                     rows[0]["examples"]))
    return out


def command(model: str, task: str, length: int) -> str:
    """The command that measures the curve of ``model`` on ``task`` at ``length`` tokens."""
    return (f"python benchmarks/long_context_curves.py --models {model} --tasks {task} --lengths {length} "
            "--limit 100")
